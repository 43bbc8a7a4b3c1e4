"""The Python entry point for notebooks: ``lab = pyproflab.open("fleet.duckdb")``.

A ``Lab`` owns one store and offers the analyses over selections of it.
Selections are keyword arguments (service, version, instance, profile_type,
since, until, labels), a dict of them, or a ``Selection``; a wrong type or a
misspelled key is one line naming it (``Selection.of``). Analyses return result objects
with ``to_pandas()``, ``to_arrow()`` and an HTML repr for Jupyter.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa

from pyproflab.model import Profile
from pyproflab.sources.base import Request, Source
from pyproflab.store import Store
from pyproflab.store.ingest_report import InputsRefused
from pyproflab.store.select import Selection

SELECTION_KEYS = ("service", "version", "instance", "profile_type", "since", "until", "labels")


def _selection(selection: Any, kwargs: dict[str, Any]) -> Selection:
    """The selection from a ``Selection``, a dict of its fields, or the selection
    keywords (popped from ``kwargs``); a wrong type is one line naming it."""
    picked = {k: kwargs.pop(k) for k in list(kwargs) if k in SELECTION_KEYS}
    if selection is not None and picked:
        raise TypeError("give a Selection or selection keywords, not both")
    return Selection.of(selection if selection is not None else picked)


def _selection_only(method: str, selection: Any, kwargs: dict[str, Any], *extra: str) -> Selection:
    """``_selection`` for a method whose keywords are the selection's (and ``extra``):
    any other keyword is refused (a misspelled key selected everything)."""
    sel = _selection(selection, kwargs)
    if kwargs:
        raise TypeError(
            f"{method}() got an unexpected keyword {next(iter(kwargs))!r} "
            f"(selection keys: {', '.join((*SELECTION_KEYS, *extra))})"
        )
    return sel


def _check_ingest(paths: Any, service: Any, version: Any, instance: Any, labels: Any) -> list:
    """``ingest``'s paths as a list, and its metadata checked: a wrong type is one
    line naming the argument (ingest(None) was "'NoneType' object is not iterable",
    labels="a=b" a ValueError of dict(), service=5 taken as it is)."""
    from pyproflab.errors import UsageError

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    elif isinstance(paths, Iterable) and not isinstance(paths, bytes):
        paths = list(paths)
    if not isinstance(paths, list) or not all(isinstance(p, (str, os.PathLike)) for p in paths):
        raise UsageError(f"paths={paths!r}: expected a file, folder or glob, or a list of them")
    for name, v in (("service", service), ("version", version), ("instance", instance)):
        if v is not None and not isinstance(v, str):
            raise UsageError(f"{name}={v!r}: expected a string")
    if labels is not None and not (
        isinstance(labels, Mapping) and all(isinstance(v, str) for v in labels.values())
    ):
        raise UsageError(f"labels={labels!r}: expected a dict of strings such as {{'team': 'x'}}")
    return paths


def _warn_refused(report):
    """``report``, after an ``InputsRefused`` warning (at the caller of the Lab's
    method) when it refused inputs: a script or a notebook cell that calls
    ``lab.ingest("profiles/")`` as a statement never sees the report, and a
    mistyped path or a file that is not a profile was then left out silently."""
    if note := report.refusal_note():
        warnings.warn(note, InputsRefused, stacklevel=3)
    return report


# How far past this machine's clock a profile's time may be before it is said:
# clocks of other hosts drift by seconds, a time zone taken for UTC by hours.
AHEAD = 3600.0


def _warn_dated_ahead(store: Store, report) -> None:
    """A ``DatedAhead`` warning when the new profiles include some taken more than
    ``AHEAD`` after now (a file's time of 2100, a local time read as UTC): stored
    as they say, but every ``--since`` then takes them and their version reads as
    the newest, silently."""
    from datetime import UTC, datetime, timedelta

    from pyproflab.store.ingest_report import DatedAhead
    from pyproflab.store.queries import taken_after

    if not report.profile_ids:
        return
    now = datetime.now(UTC)
    n, latest = taken_after(store, report.profile_ids, now + timedelta(seconds=AHEAD))
    if n:
        warnings.warn(
            f"{n} new profile{'s' * (n != 1)} dated after now (the latest "
            f"{latest:%Y-%m-%dT%H:%M:%S%z}, this machine's clock {now:%Y-%m-%dT%H:%M:%S%z}): "
            "stored as dated, so every --since selects them and their version reads as "
            "the newest; check the files' times (time_nanos, a sidecar's window)",
            DatedAhead,
            stacklevel=3,
        )


def _warn_found_nothing(report, paths: list):
    """``report``, after an ``InputsRefused`` warning when the paths held no input
    at all (an empty folder, one of hidden files): the CLI exits 2 there, and
    ``lab.ingest("profiles/")`` as a statement went on with zeros, silently. A
    Parquet dataset is no such case: read whole, all of it is in the store."""
    from pyproflab.keying.paths import expand_paths, held_nothing

    found = report.new or report.present or report.refused or report.metric_rows
    if not (found or report.traces or expand_paths(paths)[1]):
        named = " ".join(os.fspath(p) for p in paths) or "ingest([])"
        held = held_nothing(paths) if paths else "no paths given"
        note = f"{named}: no profile files found ({held}); nothing stored"
        warnings.warn(note, InputsRefused, stacklevel=3)
    return report


def _filtered(analysis: Callable[..., Any], profile: Profile, *args: Any, **kwargs: Any):
    """``analysis(profile, ...)``, then pprof's warning for each filter that matched
    nothing (``pprof_filters.warn_unmatched``)."""
    from pyproflab.analyses.pprof_filters import warn_unmatched
    from pyproflab.errors import UsageError

    try:
        result = analysis(profile, *args, **kwargs)
    except UsageError as e:
        if not str(e).startswith("unknown option"):
            raise
        # The keyword reached the analysis because it is no selection key either:
        # lab.top(servce="api") listed the graph options only, not "service".
        raise UsageError(f"{e}; selection keys: {', '.join(SELECTION_KEYS)}") from None
    warn_unmatched(profile, kwargs, stacklevel=4)  # the caller of the Lab's method
    return result


class Lab:
    """A store plus the analyses that run on it."""

    def __init__(self, store: Store):
        self.store = store

    # --- opening -------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike = "pyproflab.duckdb",
        *,
        read_only: bool = False,
        wait: float = 0.0,
    ) -> Lab:
        """Open (or create) the store at ``path``; ``":memory:"`` for a throw-away
        one. A store another process holds (a job ingesting) is waited for up to
        ``wait`` seconds, then refused in one line."""
        from pyproflab.errors import UsageError

        # Checked here, not by DuckDB: open(5) made a store named "5", read_only="yes"
        # was a TypeError from duckdb.connect, wait="5" one comparing str and float.
        if not isinstance(path, (str, os.PathLike)):
            raise UsageError(f"path={path!r}: expected a file name (str or Path) or ':memory:'")
        if not isinstance(read_only, bool):
            raise UsageError(f"read_only={read_only!r}: expected True or False")
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
            raise UsageError(f"wait={wait!r}: expected seconds, a number >= 0")
        from pyproflab.store.lock import StoreBusyError

        try:
            return cls(Store.open(path, read_only=read_only, wait=wait))
        except StoreBusyError as e:  # the CLI suggests --wait; a notebook, its keyword
            raise e.with_hint("wait=SECONDS") from None

    @classmethod
    def from_connection(cls, con) -> Lab:
        """Adopt a DuckDB connection a notebook already has."""
        import duckdb

        from pyproflab.errors import UsageError

        if not isinstance(con, duckdb.DuckDBPyConnection):  # was an AttributeError on .execute
            raise UsageError(f"con={con!r}: expected a DuckDB connection (duckdb.connect(...))")
        return cls(Store.from_connection(con))

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- data in -------------------------------------------------------------

    def ingest(
        self,
        paths: str | os.PathLike | Iterable[str | os.PathLike],
        *,
        service: str | None = None,
        version: str | None = None,
        instance: str | None = None,
        labels: Mapping[str, str] | None = None,
        path_template: str | None = None,
        max_bytes: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        workers: int | None = None,
        batch_size: int | None = None,
        batch_bytes: int | None = None,
    ):
        """Read profiles (files, folders, globs, or an exported Parquet dataset) into the store.

        ``workers`` processes decode the files (default: one per core); a
        transaction stores at most ``batch_size`` profiles and closes once their
        keyed rows reach ``batch_bytes`` (memory follows the bytes, not the count).
        Returns an ``IngestReport``: counts of new, already present and refused
        profiles, with each refusal's reason.
        """
        from pyproflab.errors import UsageError
        from pyproflab.sources.base import ItemMeta
        from pyproflab.sources.local import FileSource
        from pyproflab.store.ingest import BATCH_BYTES, BATCH_SIZE

        paths = _check_ingest(paths, service, version, instance, labels)
        for name, n in (
            ("workers", workers),
            ("batch_size", batch_size),
            ("batch_bytes", batch_bytes),
        ):
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
                raise UsageError(f"{name}={n!r}: expected a whole number >= 1 (None: the default)")
        meta = ItemMeta(
            service=service, version=version, instance=instance, labels=dict(labels or {})
        )
        source = FileSource(
            [str(p) for p in paths], meta, path_template=path_template, max_bytes=max_bytes
        )
        with warnings.catch_warnings():  # said once, naming this call
            warnings.simplefilter("ignore", InputsRefused)
            report = self.pull(
                source,
                progress=progress,
                workers=workers,
                batch_size=batch_size or BATCH_SIZE,
                batch_bytes=batch_bytes or BATCH_BYTES,
            )
        _warn_dated_ahead(self.store, report)
        return _warn_found_nothing(_warn_refused(report), paths)

    def pull(self, source: Source, request: Request | None = None, **options: Any):
        """Store what a source (``pyproflab.sources``: files, a Parquet dataset, live
        targets, Datadog, Pyroscope, Parca ...) gives for ``request`` (a
        ``sources.base.Request``: selection and time range), one transaction per
        batch; returns an ``IngestReport``. ``options``: those of
        ``store.sourced.ingest_source`` (progress, batch_size, batch_bytes, ...)."""
        import pyproflab.store.traces  # noqa: F401 (registers the writers of trace files and items)
        from pyproflab.errors import StoreError
        from pyproflab.store.sourced import ingest_source

        if self.store.read_only:  # before decoding every file, not after
            raise StoreError(
                f"{self.store.name}: store is open read-only: open it with "
                "pyproflab.open(path) (read_only=False) to ingest"
            )

        return _warn_refused(ingest_source(self.store, source, request, **options))

    # --- questions -----------------------------------------------------------

    def profiles(self, selection: Selection | None = None, **kwargs: Any) -> pa.Table:
        """The selected profiles' metadata, one row each."""
        return self.store.profiles(_selection_only("profiles", selection, kwargs))

    def merged(self, selection: Selection | None = None, **kwargs: Any) -> Profile:
        """One profile merging the selection, as ``go tool pprof -proto`` would."""
        sel = _selection_only("merged", selection, kwargs)
        return self.store.merged_profile(self._one_kind(sel))

    def top(self, selection: Selection | None = None, **kwargs: Any):
        """Top functions over the selection (``TopResult``), equal to ``go tool pprof -top
        -nodefraction=0`` (no node trimmed unless ``node_fraction`` says; 0.005 is
        pprof's and the command line's default) (CPU profiles holding clearly less
        CPU than their processes used: a note).

        Keywords besides the selection: sample_index, granularity, nodecount,
        cum_sort, focus, ignore, node_fraction, edge_fraction.
        """
        from pyproflab.analyses.cpu_coverage import notes_for
        from pyproflab.analyses.top import top

        sel = self._one_kind(_selection(selection, kwargs), kwargs.get("sample_index"))
        result = _filtered(top, self.store.merged_profile(sel), **kwargs)
        if result.sample_type.type == "cpu":
            result.notes.extend(notes_for(self.store, sel))
        return result

    def tree(self, selection: Selection | None = None, **kwargs: Any):
        """Callers and callees of every node over the selection (``TreeResult``), as
        ``go tool pprof -tree``. Keywords as ``top``."""
        from pyproflab.analyses.tree import tree

        sel = self._one_kind(_selection(selection, kwargs), kwargs.get("sample_index"))
        return _filtered(tree, self.store.merged_profile(sel), **kwargs)

    def peek(self, regex: str, selection: Selection | None = None, **kwargs: Any):
        """Callers and callees of the nodes matching ``regex`` (``TreeResult``), as
        ``go tool pprof -peek``. Keywords as ``top``."""
        from pyproflab.analyses.tree import peek

        sel = self._one_kind(_selection(selection, kwargs), kwargs.get("sample_index"))
        return _filtered(peek, self.store.merged_profile(sel), regex, **kwargs)

    def source_list(self, regex: str, selection: Selection | None = None, **kwargs: Any):
        """Annotated source of the functions matching ``regex`` (``ListResult``), as
        ``go tool pprof -list``. Keywords: sample_index, source_path, trim_path, filters."""
        from pyproflab.analyses.source_list import source_list

        sel = self._one_kind(_selection(selection, kwargs), kwargs.get("sample_index"))
        return _filtered(source_list, self.store.merged_profile(sel), regex, **kwargs)

    def gc(self, selection: Selection | None = None, *, categories: bool = True, **kwargs: Any):
        """GC metrics of each selected profile's instance and window, beside the GC CPU
        categories of CPU profiles (``GcResult``: ``.to_pandas()`` per profile,
        ``.instances`` per instance, ``.categories``, ``.notes``).

        ``categories=False`` skips reading CPU profiles' stacks (runtime view only).
        """
        from pyproflab.analyses.gc import gc
        from pyproflab.errors import UsageError

        sel = _selection_only("gc", selection, kwargs, "categories")
        if not isinstance(categories, bool):  # categories="no" read every CPU stack
            raise UsageError(f"categories={categories!r}: expected True or False")
        return gc(self.store, sel, categories=categories)

    def gogc(
        self,
        selection: Selection | None = None,
        *,
        observation: Any = None,
        options: Any = None,
        **kwargs: Any,
    ):
        """GOGC / GOMEMLIMIT advice (``GogcResult``) from the selection's gctrace
        cycles and GC metrics (no profile needed; service, version, instance), fitted
        on every setting they show, or from an ``observation`` made elsewhere
        (``pyproflab.analyses.gogc.from_figures``, ``observe``). Keywords: those of
        ``GogcOptions.parse`` -- candidates, memory_limits, budget (``"2.5x"`` the
        current predicted peak, or a size; default the container's memory limit),
        headroom, gogc, current_limit, process_cpu, peak_rss, cpu_limit,
        container_memory, cgroup."""
        from pyproflab.analyses.gogc import gogc, refuse_unused

        sel = None if observation is not None else _selection(selection, kwargs)
        refuse_unused(sel)
        return gogc(self.store, sel, observation=observation, options=options, **kwargs)

    def pgo(self, selection: Selection | None = None, **kwargs: Any):
        """A checked ``default.pgo`` (``PgoResult``) from the selection's CPU profiles:
        the top 5 by CPU cores (or ``all=True``); keywords top, weight, safeguards,
        trim_leaf. ``result.write(path)`` writes it atomically and verifies it."""
        from pyproflab.analyses.pgo import pgo

        return pgo(self.store, _selection(selection, kwargs), **kwargs)

    def pgo_weights(self, selection: Selection | None = None, **kwargs: Any):
        """The selection's PGO profile under each weighting (none, duration,
        instance) and how their hot edges differ (``WeightComparison``)."""
        from pyproflab.analyses.pgo_weights import compare_weights

        return compare_weights(self.store, _selection(selection, kwargs), **kwargs)

    def pgo_check(self, profile: str | os.PathLike, source: str | os.PathLike, **options: Any):
        """Is ``profile`` (a default.pgo) still true of the Go module at ``source``?
        The share of its hot weight the compiler still applies and a verdict
        (``PgoCheckResult``; needs Go to build the source reader)."""
        from pyproflab.analyses.pgo_check import CheckOptions, check

        return check(profile, source, CheckOptions.build(**options))

    def pgo_effect(
        self, before: Any, after: Any, *, log: str | os.PathLike | None = None, **options: Any
    ):
        """What PGO changed between two builds' profiles (Selections or dicts such as
        ``{"version": "v1"}``): CPU with intervals, memory, and, from a build log
        (its text, as ``pgo_build_log`` gives it, or a ``Path`` to it), the
        compiler's PGO decisions (``PgoEffect``)."""
        from pyproflab.analyses.pgo_effect import EffectOptions, pgo_effect, read_build_log

        before, after = Selection.of(before, "before"), Selection.of(after, "after")
        if isinstance(log, os.PathLike):
            log = read_build_log(log)
        return pgo_effect(self.store, before, after, EffectOptions.build(**options), log=log)

    @staticmethod
    def pgo_build_log(
        source: str | os.PathLike, profile: str | os.PathLike, package: str = "."
    ) -> str:
        """The output of ``go build -pgo=PROFILE -gcflags=-m -d=pgodebug=1 PACKAGE``
        in the module at ``source`` (nothing written), for ``pgo_effect``."""
        from pyproflab.analyses.pgo_effect import build_log

        return build_log(source, profile, package)

    def regressions(self, base: Any, new: Any, *, sample: Any = None, **options: Any):
        """What got slower from ``base`` to ``new`` (Selections or dicts such as
        ``{"version": "v1"}``): a ``RegressionsResult`` with intervals and FDR.
        ``sample`` names the sample type (e.g. ``"cpu"``, ``"alloc_space"``)."""
        from pyproflab.analyses.regressions import regressions

        options.setdefault("sample_index", sample)
        base = self._one_kind(Selection.of(base, "base"), sample)
        new = self._one_kind(Selection.of(new, "new"), sample)
        return regressions(self.store, base, new, **options)

    def _one_kind(self, selection: Selection, sample: Any = None) -> Selection:
        """A selection mixing profile kinds narrowed to one (CPU first), with a
        ``SelectionNarrowed`` warning saying so (see ``store.kinds``)."""
        from pyproflab.store.kinds import one_kind_warn

        return one_kind_warn(self.store, selection, sample=sample)

    def trace(self, question: str, selection: Selection | None = None, **kwargs: Any):
        """A question about the store's execution traces (``goroutines``,
        ``sched``, ``stw``, ``tasks``, ``leaks``: ``analyses.gotrace_answers``)
        over the selected traces; ``path=FILE`` asks one trace file instead.
        Other keywords are the question's options (``window_s``, ``top`` ...)."""
        from pyproflab.analyses.gotrace_answers import ANSWERS, answer, options_of

        path = kwargs.pop("path", None)
        given = selection is not None or any(k in SELECTION_KEYS for k in kwargs)
        sel = _selection(selection, kwargs)
        if question not in ANSWERS:
            raise ValueError(f"unknown trace question {question!r}; one of {', '.join(ANSWERS)}")
        options = options_of(question, **kwargs)
        if path is not None:
            if given:  # the selection was dropped without a word
                raise TypeError("give path= (one trace file) or a selection, not both")
            return answer(question, path=path, options=options)
        return answer(question, store=self.store, selection=sel, options=options)

    def sql(self, query: str, params: Any = None) -> pa.Table:
        """Run SQL against the store (bind values with ``?`` or ``$name``)."""
        return self.store.sql(query, params)

    def __repr__(self) -> str:
        return f"Lab({self.store!r})"
