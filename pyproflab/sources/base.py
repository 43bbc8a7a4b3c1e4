"""The one interface every way in implements (in the spirit of pprof's ``plugin.Fetcher``).

A ``Source`` is anything that gives data for a selection and a time range (a
``Request``): local files and folders, exported Parquet datasets, live
``net/http/pprof`` targets, Prometheus, gctrace logs, execution traces,
continuous profilers (Datadog, Pyroscope, Parca). It says what it can give
(``offer``) and yields items (``items``); it never writes to a store. One store
entry point takes any source: ``pyproflab.store.sourced.ingest_source``.

Items:

- ``ProfileItem``: one profile as bytes (gzipped or not) or a local file path,
  with its ``ItemMeta`` (service, version, instance, profile type, time,
  window, labels, and the name of where it came from, without credentials).
- ``TableItem``: GC metric samples (``schema.METRIC_SAMPLES``) or GC cycles
  (``schema.GC_CYCLES``) as an Arrow table, all rows of one ``ItemMeta``.
- ``TraceItem``: one execution trace file or its bytes, with its ``ItemMeta``.
- ``FileSet``: local profile files for the store's own fast reader (worker
  processes; ``store.ingest.ingest_paths``), and ``Dataset``: an exported
  Parquet dataset folder (``store.parquet.import_parquet``). They let the file
  and Parquet sources keep the store's bulk paths.
- ``Refused``: something the source could not get (one line naming it and why);
  the run goes on.
- ``Seen``: a key the source looked at and found nothing to store for (an
  empty window): remembered with the next batch, so a re-run skips it.
- ``Expect``: how many more items the source means to yield (for progress).

Rules a source follows:

- ``name`` names the source in reports, errors and the store without
  credentials (no user:password, no key, no token); an item's ``meta.source``
  likewise.
- A failure of one item is a ``Refused`` item and the others still come; a
  failure of the whole source (its listing request failed, a bad argument) is
  a ``SourceError`` (a one-line ``ProflabError`` naming the source and the
  request).
- ``key`` is the source's own identity of an item (a Datadog event id, a
  Pyroscope series and window). ``items`` is given ``known``: asked with keys,
  it answers those this source (by ``name``) already delivered into the store,
  so a re-run fetches only what is new. Items without a key are deduplicated by
  content alone.
- Every network request is bounded in time and size, and retried only when a
  retry may help (``sources.http``).

Rules the store's entry point follows (``store/sourced.py``): items are stored
in batches, each one transaction (all of it or none of it, its items' keys
recorded in the same transaction), profiles keyed by the sha256 of their
decompressed bytes, so a profile already present is reported ``present`` and
a killed run leaves whole batches only; a re-run completes it. It sets each
item's ``outcome``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pyproflab.errors import ProflabError

if TYPE_CHECKING:
    import pyarrow as pa

    from pyproflab.model import Profile

#: The kinds of data a source may give.
PROFILES = "profiles"
METRIC_SAMPLES = "metric_samples"
GC_CYCLES = "gc_cycles"
TRACES = "traces"
KINDS = (PROFILES, METRIC_SAMPLES, GC_CYCLES, TRACES)


class SourceError(ProflabError):
    """A source as a whole failed: one line naming the source and the request."""

    def __init__(self, source: str, problem: str):
        self.source = source
        self.problem = problem
        super().__init__(f"{source}: {problem}")


@dataclass(frozen=True)
class Request:
    """What a caller asks a source for: a selection and a time range.

    ``None`` means "any" (a source that cannot filter on a field gives what it
    has). ``since``/``until`` are aware datetimes; ``until`` is exclusive.
    """

    service: str | None = None
    version: str | None = None
    instance: str | None = None
    profile_types: tuple[str, ...] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    since: datetime | None = None
    until: datetime | None = None
    kinds: tuple[str, ...] = KINDS


@dataclass(frozen=True)
class Offer:
    """What a source can give for a request: the kinds of data, and where it knows
    them, the profile types, the services and how many items (``None``: unknown
    until the items are fetched)."""

    kinds: tuple[str, ...]
    profile_types: tuple[str, ...] = ()
    services: tuple[str, ...] = ()
    items: int | None = None


@dataclass
class ItemMeta:
    """Who and when an item is about. ``source`` names where it came from (a path,
    a URL, ``datadog:...``), never with credentials. ``time`` is when the source
    says it was taken (used when the profile itself carries no time)."""

    service: str | None = None
    version: str | None = None
    instance: str | None = None
    profile_type: str | None = None
    time: datetime | None = None
    window_start: datetime | None = None
    window_end: datetime | None = None
    labels: dict[str, str] = field(default_factory=dict)
    source: str | None = None


@dataclass
class Outcome:
    """What the store did with an item: ``status`` new, present or refused; the
    profile id (profiles); the rows added (tables); the reason (refused)."""

    status: str
    profile_id: int | None = None
    rows: int = 0
    reason: str | None = None


@dataclass(eq=False)
class ProfileItem:
    """One profile: ``data`` (bytes as fetched, gzipped or not) or ``path`` (a local
    file). A source that decoded the bytes already (to check them before keeping
    them) may give the ``profile`` and the ``content_hash`` (sha256 of the
    decompressed bytes) too, so the store does not decode it again."""

    meta: ItemMeta
    data: bytes | None = None
    path: str | None = None
    key: str | None = None
    profile: Profile | None = None
    content_hash: str | None = None
    outcome: Outcome | None = None

    def __post_init__(self) -> None:
        if (self.data is None) == (self.path is None) and self.profile is None:
            raise ValueError("a ProfileItem has data or a path (one of them)")

    @property
    def what(self) -> str:
        """How lines name this item: its source, else its path, else its key."""
        return self.meta.source or self.path or self.key or "<profile>"


@dataclass(eq=False)
class TableItem:
    """GC metric samples (``kind`` METRIC_SAMPLES, rows ``schema.METRIC_SAMPLES``) or
    GC cycles (``kind`` GC_CYCLES, rows ``schema.GC_CYCLES``) of one instance; its
    ``meta`` fills the service, version, instance and source of every row."""

    kind: str
    table: pa.Table
    meta: ItemMeta
    key: str | None = None
    outcome: Outcome | None = None

    def __post_init__(self) -> None:
        if self.kind not in (METRIC_SAMPLES, GC_CYCLES):
            raise ValueError(f"a TableItem holds metric_samples or gc_cycles, not {self.kind!r}")

    @property
    def what(self) -> str:
        return self.meta.source or self.key or self.kind


@dataclass(eq=False)
class TraceItem:
    """One execution trace (``go tool trace`` input) as bytes or a local file."""

    meta: ItemMeta
    data: bytes | None = None
    path: str | None = None
    key: str | None = None
    outcome: Outcome | None = None

    @property
    def what(self) -> str:
        return self.meta.source or self.path or self.key or "<trace>"


@dataclass(eq=False)
class FileSet:
    """Local profile files, read by the store's bulk reader (worker processes):
    ``paths`` (files, folders, globs), metadata ``defaults``, a ``path_template``
    and a decompressed size cap (``max_bytes``; None: the decoder's)."""

    paths: list[str]
    defaults: ItemMeta = field(default_factory=ItemMeta)
    path_template: str | None = None
    max_bytes: int | None = None
    workers: int | None = None


@dataclass(eq=False)
class Dataset:
    """A Parquet dataset folder written by ``pyproflab export``."""

    path: str


@dataclass(frozen=True)
class Refused:
    """Something the source could not get: ``what`` names it (a URL without
    credentials, a file, a request), ``why`` says why, in one line."""

    what: str
    why: str


@dataclass(frozen=True)
class Seen:
    """The source looked at ``key`` and found nothing to store (an empty window, an
    event without the wanted files): remember it, so a re-run does not ask again."""

    key: str


@dataclass(frozen=True)
class Expect:
    """The source means to yield about ``items`` more items (for progress). A
    source that lists what a request matches (a pull) gives ``known`` too: the
    listed items ``known`` named, left out; ``items + known`` is all it listed."""

    items: int
    known: int = 0


Item = ProfileItem | TableItem | TraceItem | FileSet | Dataset | Refused | Seen | Expect

#: Asked with item keys, the keys this source already delivered into the store.
#: The store's one (``store.sourced``) also has ``delivered_under(prefix)``: the
#: delivered keys beginning with ``prefix``, those found empty left out.
Known = Callable[[Sequence[str]], set[str]]


def nothing_known(keys: Sequence[str]) -> set[str]:
    """A ``Known`` for a run without a store: nothing was delivered before."""
    return set()


@runtime_checkable
class Source(Protocol):
    """A way in (see the module rules)."""

    @property
    def name(self) -> str:
        """How reports, errors and the store name this source (no credentials)."""
        ...

    def offer(self, request: Request) -> Offer:
        """What this source can give for ``request``."""
        ...

    def items(self, request: Request, known: Known) -> Iterable[Item]:
        """The items for ``request``, leaving out those whose key ``known`` names."""
        ...


def in_range(when: datetime | None, request: Request) -> bool:
    """Whether ``when`` lies in the request's time range (an unknown time does)."""
    if when is None:
        return True
    if request.since is not None and when < request.since:
        return False
    return not (request.until is not None and when >= request.until)


@dataclass
class Prefetched:
    """A source over items fetched already: ``prefetch(source, request)`` reads a
    source whole before a store is opened (a front end whose rule is "read
    everything first, then store it in one transaction")."""

    name: str
    fetched: list[Item]

    def offer(self, request: Request) -> Offer:
        return Offer(kinds=KINDS, items=len(self.fetched))

    def items(self, request: Request, known: Known) -> Iterable[Item]:
        return list(self.fetched)


def prefetch(source: Source, request: Request | None = None) -> Prefetched:
    """Every item of ``source`` for ``request``, read now (nothing is known before)."""
    return Prefetched(source.name, list(source.items(request or Request(), nothing_known)))
