"""The store's one entry point for any source (``sources.base.Source``).

``ingest_source(store, source, request)`` asks the source for its items and
stores them. Rules:

- Profiles and metric tables are stored in batches of at most ``batch_size``
  items (a batch also closes once its keyed rows reach ``batch_bytes``), each
  batch ONE transaction: its profiles, its metric rows and the keys of its
  items (``source_items``) commit together or not at all. A run killed part
  way leaves whole batches only, and their keys say what a re-run can skip.
- A profile is identified by the sha256 of its decompressed bytes: one already
  stored (from this source or any other) is ``present`` and nothing is
  written for it; its bytes are not even decoded. Metric rows are new unless
  the store has the same (service, instance, metric, labels, time) or
  (service, instance, source, run, gc_num) (``store/metrics.py``).
- An item the store cannot take (bytes that are not a profile, a table of
  another shape) is refused with its one-line reason; the others still land.
  Its key is not recorded, so a re-run tries it again.
- ``FileSet`` items go to the bulk file reader (``ingest.ingest_paths``: worker
  processes, its own batches), ``Dataset`` items to ``parquet.import_parquet``,
  after the batch before them is stored.
- A source that raises (a ``SourceError``: its listing failed) stops the run:
  the batch being filled is dropped, the error propagates. Batches stored
  before it stay; an interrupt says how much they hold.
- Each item's ``outcome`` is set once its batch is stored (new, present or
  refused), so a source can report per item after the run. A ``Seen`` key is
  recorded (status ``empty``) with the batch it arrives in.
- ``TraceItem``: stored by the writer registered for it in ``WRITERS`` (the
  traces' store module); without one, refused with a reason.

``stream_source(open_store, source)`` is the other way in, for sources of
metric tables that must land whole (``ingest-gc`` of files): every row in ONE
transaction or none (a bad line at the end of a 2-million-cycle log stores
nothing), memory holding one batch (``metrics.StreamedRows``), the store opened
only once the first batch is ready (a source failing within it leaves no
store).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from pyproflab.errors import IdCollisionError, ProfileError, StoreError
from pyproflab.keying.keys import KeyedProfile, ProfileMeta, key_profile
from pyproflab.keying.prepare import _maybe_known, _read_raw
from pyproflab.sources.base import (
    GC_CYCLES,
    Dataset,
    Expect,
    FileSet,
    Item,
    ItemMeta,
    Outcome,
    ProfileItem,
    Refused,
    Request,
    Seen,
    Source,
    TableItem,
    TraceItem,
    nothing_known,
)
from pyproflab.store import queries
from pyproflab.store.connection import Store
from pyproflab.store.ingest import (
    BATCH_BYTES,
    BATCH_SIZE,
    existing_hashes,
    ingest_paths,
    known_hash_prefixes,
    write_keyed,
)
from pyproflab.store.ingest_report import IngestReport, says_what_was_stored

if TYPE_CHECKING:
    from pyproflab.model import Profile

Progress = Callable[[int, int], None]
#: a profile item keyed (``key_items``), or why it could not be
Keyed = KeyedProfile | str

#: item type -> writer(store, items) for items this module does not store itself
#: (the traces' store module adds TraceItem here); a writer returns an IngestReport.
WRITERS: dict[type, Callable[[Store, list[Any]], IngestReport]] = {}


def profile_meta(meta: ItemMeta) -> ProfileMeta:
    """A source's metadata as the store's (``time`` is applied to the row instead)."""
    return ProfileMeta(
        service=meta.service,
        version=meta.version,
        instance=meta.instance,
        labels=dict(meta.labels),
        source=meta.source,
        window_start=meta.window_start,
        window_end=meta.window_end,
        profile_type=meta.profile_type,
    )


def item_meta(meta: ProfileMeta) -> ItemMeta:
    """The store's metadata as a source's (the inverse of ``profile_meta``)."""
    return ItemMeta(
        service=meta.service,
        version=meta.version,
        instance=meta.instance,
        profile_type=meta.profile_type,
        window_start=meta.window_start,
        window_end=meta.window_end,
        labels=dict(meta.labels),
        source=meta.source,
    )


@dataclass
class ItemBatch:
    """Items waiting for one transaction (``store_batch``): keyed profiles, profiles
    found present, metric rows, and the keys of what was seen empty."""

    profiles: list[tuple[ProfileItem, KeyedProfile]] = field(default_factory=list)
    present: list[ProfileItem] = field(default_factory=list)
    tables: list[tuple[TableItem, pa.Table]] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    nbytes: int = 0

    def __len__(self) -> int:
        return len(self.profiles) + len(self.present) + len(self.tables) + len(self.seen)


def ingest_source(
    store: Store,
    source: Source,
    request: Request | None = None,
    *,
    batch_size: int = BATCH_SIZE,
    batch_bytes: int = BATCH_BYTES,
    max_bytes: int | None = None,
    progress: Progress | None = None,
    workers: int | None = None,
) -> IngestReport:
    """Store what ``source`` gives for ``request`` (see the module rules)."""
    from pyproflab.decode import DEFAULT_MAX_BYTES

    if batch_size < 1 or batch_bytes < 1:
        raise StoreError(f"batch size and bytes must be at least 1 ({batch_size}, {batch_bytes})")
    run = _Run(store, source.name, batch_size, batch_bytes, max_bytes or DEFAULT_MAX_BYTES)
    items = source.items(request or Request(), _Known(run))
    with says_what_was_stored(run.report):
        try:
            _take(run, items, progress, workers)
        finally:
            close = getattr(items, "close", None)
            if close is not None:  # a generator's own clean-up (threads, sockets) runs now
                close()
        run.flush()
    return run.report


def _take(run: _Run, items: Iterable[Item], progress: Progress | None, workers: int | None) -> None:
    """Hand each item to the run (see the module rules)."""
    store = run.store
    expected = 0
    for item in items:
        if isinstance(item, Expect):
            expected += item.items
            run.report.listed = (run.report.listed or 0) + item.items + item.known
            run.report.known += item.known
        elif isinstance(item, FileSet):
            run.flush()
            run.report.add(_file_set(store, item, run, progress, workers))
            continue
        elif isinstance(item, Dataset):
            from pyproflab.store.parquet import import_parquet

            run.flush()
            run.report.add(import_parquet(store, item.path))
        elif isinstance(item, Refused):
            run.report.refused.append((item.what, item.why))
        elif isinstance(item, Seen):
            run.seen(item.key)
        else:
            run.add(item)
        if not isinstance(item, Expect):
            run.done += 1
        if progress and expected:
            progress(min(run.done, expected), expected)


def _file_set(
    store: Store, item: FileSet, run: _Run, progress: Progress | None, workers: int | None
) -> IngestReport:
    return ingest_paths(
        store,
        item.paths,
        profile_meta(item.defaults),
        path_template=item.path_template,
        max_bytes=item.max_bytes or run.max_bytes,
        progress=progress,
        batch_size=run.batch_size,
        workers=item.workers if item.workers is not None else workers,
        batch_bytes=run.batch_bytes,
    )


class _Known:
    """The ``Known`` given to a source: the keys it delivered before (called),
    and those under a prefix (``delivered_under``: a windowed pull's stored
    windows of a series, whatever their step)."""

    def __init__(self, run: _Run) -> None:
        self.run = run

    def __call__(self, keys: Sequence[str]) -> set[str]:
        return self.run.known(keys)

    def delivered_under(self, prefix: str) -> list[str]:
        return self.run.delivered_under(prefix)


class _Run:
    """One ``ingest_source``: the batch being filled and the report so far."""

    def __init__(
        self, store: Store, name: str, batch_size: int, batch_bytes: int, max_bytes: int
    ) -> None:
        self.store, self.name = store, name
        self.batch_size, self.batch_bytes, self.max_bytes = batch_size, batch_bytes, max_bytes
        self.report = IngestReport()
        self.batch = ItemBatch()
        self.done = 0
        self.now = datetime.now(UTC)
        self._prefixes: np.ndarray | None = None  # read when the first profile comes
        self.hashes: set[str] = set()  # keyed in this run (present ones are skipped)

    def known(self, keys: Sequence[str]) -> set[str]:
        return queries.known_source_items(self.store, self.name, list(keys))

    def delivered_under(self, prefix: str) -> list[str]:
        """This source's keys beginning with ``prefix`` that brought data (not empty)."""
        if "source_items" not in queries.table_names(self.store):
            return []
        sql = "SELECT item FROM source_items WHERE source = ? AND starts_with(item, ?) "
        sql += "AND status <> 'empty' ORDER BY item"
        return self.store.sql(sql, [self.name, prefix]).column(0).to_pylist()

    def add(self, item: ProfileItem | TableItem | TraceItem) -> None:
        if isinstance(item, TraceItem):
            self._trace(item)
            return
        if isinstance(item, TableItem):
            self._table(item)
        else:
            self._profile(item)
        if len(self.batch) >= self.batch_size or self.batch.nbytes >= self.batch_bytes:
            self.flush()

    def seen(self, key: str) -> None:
        self.batch.seen.append(key)
        if len(self.batch) >= self.batch_size:
            self.flush()

    def _refuse(self, item: ProfileItem | TableItem | TraceItem, why: str) -> None:
        item.outcome = Outcome("refused", reason=why)
        self.report.refused.append((item.what, why))

    def _trace(self, item: TraceItem) -> None:
        writer = WRITERS.get(TraceItem)
        if writer is None:
            self._refuse(item, "this pyproflab does not store execution traces")
            return
        self.flush()
        self.report.add(writer(self.store, [item]))

    def _table(self, item: TableItem) -> None:
        from pyproflab.store.metrics import with_meta

        m = item.meta
        if ("gc_num" in item.table.schema.names) != (item.kind == GC_CYCLES):
            self._refuse(item, f"the rows do not have the schema of {item.kind}")
            return
        try:
            rows = with_meta(
                item.table,
                service=m.service,
                version=m.version,
                instance=m.instance,
                source=m.source,
            )
        except StoreError as e:
            self._refuse(item, str(e))
            return
        self.batch.tables.append((item, rows))
        self.batch.nbytes += rows.nbytes

    def _profile(self, item: ProfileItem) -> None:
        try:
            keyed = self._keyed(item)
        except ProfileError as e:
            self._refuse(item, e.problem)
            return
        except (StoreError, ValueError) as e:
            self._refuse(item, str(e))
            return
        if keyed is None:
            self.batch.present.append(item)
            return
        self.batch.profiles.append((item, keyed))
        self.batch.nbytes += keyed.nbytes

    def _keyed(self, item: ProfileItem) -> KeyedProfile | None:
        """The item keyed for the store; None when its content is stored already
        (the store's hashes are asked only when the first 64 bits are among the
        stored ones: ``known_hash_prefixes``, read once per run)."""
        digest = item.content_hash if item.profile is not None else None
        if digest is None:
            raw, digest = item_bytes(item, self.max_bytes)
        else:
            raw = None
        item.content_hash = digest
        if self._prefixes is None:
            self._prefixes = known_hash_prefixes(self.store)
        if digest in self.hashes or (
            _maybe_known(self._prefixes, digest) and existing_hashes(self.store, [digest])
        ):
            return None
        self.hashes.add(digest)
        return key_item(item, raw, max_bytes=self.max_bytes, now=self.now)

    def flush(self) -> None:
        """Store the batch in one transaction (see the module rules)."""
        batch, self.batch = self.batch, ItemBatch()
        if len(batch):
            self.report.add(store_batch(self.store, self.name, batch, self.now))


def store_batch(store: Store, name: str, batch: ItemBatch, now: datetime) -> IngestReport:
    """One batch of a source named ``name`` in one transaction (the module rules);
    on a 64-bit id collision, one transaction per profile, so only the profile
    that collides is refused. Sets each item's outcome."""
    try:
        return _write(store, name, batch, now)
    except IdCollisionError:
        report = IngestReport()
        for item, keyed in batch.profiles:
            try:
                report.add(_write(store, name, ItemBatch(profiles=[(item, keyed)]), now))
            except IdCollisionError as e:
                item.outcome = Outcome("refused", reason=str(e))
                report.refused.append((item.what, str(e)))
        rest = ItemBatch(present=batch.present, tables=batch.tables, seen=batch.seen)
        report.add(_write(store, name, rest, now))
        return report


def _write(store: Store, name: str, batch: ItemBatch, now: datetime) -> IngestReport:
    from pyproflab.store.metrics import write_rows

    keyed = [k for _, k in batch.profiles]
    keys = [i.key for i, _ in batch.profiles] + [i.key for i in batch.present]
    keys += [i.key for i, _ in batch.tables] + list(batch.seen)
    if any(k is not None for k in keys):
        queries.create_source_tables(store)
    with store.transaction():
        rep = write_keyed(store, keyed)  # sets profile_id in the rows of new profiles
        hashes = [k.content_hash for k in keyed] + [i.content_hash or "" for i in batch.present]
        ids = existing_hashes(store, hashes)
        added = [write_rows(store, rows) for _, rows in batch.tables]
        records: list[tuple[str, str | None, str]] = []
        for item, k in batch.profiles:
            new = k.row.get("profile_id") is not None
            item.outcome = Outcome("new" if new else "present", ids.get(k.content_hash))
        for seen in batch.present:
            seen.outcome = Outcome("present", ids.get(seen.content_hash or ""))
        for (table, _), n in zip(batch.tables, added, strict=True):
            table.outcome = Outcome("new" if n else "present", rows=n)
        every: list[ProfileItem | TableItem] = [i for i, _ in batch.profiles]
        every += batch.present + [i for i, _ in batch.tables]
        for one in every:
            if one.key is not None and one.outcome is not None:
                digest = getattr(one, "content_hash", None)
                records.append((one.key, digest, one.outcome.status))
        records += [(key, None, "empty") for key in batch.seen]
        queries.record_source_items(store, name, records, now)
    rep.present += len(batch.present)
    rep.metric_rows += sum(added)
    return rep


def item_bytes(item: ProfileItem, max_bytes: int) -> tuple[bytes | bytearray, str]:
    """A profile item's decompressed protobuf bytes and their sha256 (ProfileError
    when they cannot be read, are not gzip or pprof, or pass ``max_bytes``)."""
    import hashlib

    from pyproflab.decode.pprof import decompress

    if item.data is None:
        return _read_raw(item.path or "", max_bytes)
    raw = decompress(item.data, source=item.what, max_bytes=max_bytes)
    return raw, hashlib.sha256(raw).hexdigest()


def key_item(
    item: ProfileItem, raw: bytes | bytearray | None, *, max_bytes: int, now: datetime
) -> KeyedProfile:
    """A profile item as the store's rows (pure: no database): its ``profile``, or
    ``raw`` (its decompressed bytes, ``item_bytes``) decoded; the item's
    ``content_hash`` must be set. The item's time fills a profile without one.
    Raises ``ProfileError`` (with its reason), ``StoreError`` or ``ValueError``."""
    from pyproflab.decode import decode_bytes

    assert item.content_hash is not None
    profile = item.profile
    if profile is None:
        if raw is None:
            raw, _ = item_bytes(item, max_bytes)
        profile = decode_bytes(raw, source=item.what, max_bytes=max_bytes)
        del raw  # the decompressed bytes go before keying allocates
    meta = profile_meta(item.meta)
    keyed = key_profile(profile, meta, item.content_hash, now=now, with_content=False)
    return _with_item_time(keyed, item)


def key_items(decoded: Sequence[tuple[ProfileItem, Profile]], now: datetime) -> list[Keyed]:
    """``key_item`` of each item and its decoded profile, keyed as one batch
    (``keying.batch.key_profiles``: the same rows); where the batch cannot be
    keyed, item by item, and an item that cannot be is its reason."""
    from pyproflab.keying.batch import key_profiles

    metas = [profile_meta(i.meta) for i, _ in decoded]
    try:
        keyed = key_profiles(
            [p for _, p in decoded], metas, [i.content_hash or "" for i, _ in decoded], now=now
        )
    except (StoreError, ValueError):
        out: list[Keyed] = []
        for (item, profile), meta in zip(decoded, metas, strict=True):
            try:
                one = key_profile(
                    profile, meta, item.content_hash or "", now=now, with_content=False
                )
            except (StoreError, ValueError) as e:
                out.append(str(e))
                continue
            out.append(_with_item_time(one, item))
        return out
    return [_with_item_time(k, i) for k, (i, _) in zip(keyed, decoded, strict=True)]


def _with_item_time(keyed: KeyedProfile, item: ProfileItem) -> KeyedProfile:
    if keyed.row.get("time") is None and item.meta.time is not None:
        keyed.row["time"] = item.meta.time
    return keyed


def stream_source(
    open_store: Callable[[], Store], source: Source, request: Request | None = None
) -> IngestReport:
    """Store a source of metric tables whole, as its items come (the module rules):
    a ``Refused`` item, or an item other than a table, fails the run (nothing
    stored). Returns the report (``metric_rows``: the rows added)."""
    from pyproflab.store.metrics import StreamedRows, with_meta

    report = IngestReport()
    with StreamedRows(open_store) as stream:
        for item in source.items(request or Request(), nothing_known):
            if isinstance(item, Expect | Seen):
                continue
            if isinstance(item, Refused):
                raise StoreError(f"{item.what}: {item.why}")
            if not isinstance(item, TableItem):
                raise StoreError(f"{source.name}: only metric tables are stored whole")
            m = item.meta
            stream.add(
                with_meta(
                    item.table,
                    service=m.service,
                    version=m.version,
                    instance=m.instance,
                    source=m.source,
                )  # fmt: skip
            )
        report.metric_rows = stream.finish()
    return report
