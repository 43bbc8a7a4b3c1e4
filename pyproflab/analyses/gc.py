"""The join: each profile beside the GC metrics of its instance and time window.

For every selected profile, its *window* is ``[window_start, window_end]``
when it was collected live, else ``[time, time + duration]``. Its *instance*
rows are the ``metric_samples``/``gc_cycles`` rows with the same instance (and
the same service, when both name one), whose time lies in the window (ends
included).

The runtime view (from ``metric_samples`` and ``gc_cycles``) follows the rules of
``gc_windows``.

Profile view (CPU profiles only): the categories of ``gc_categories``; the GC
share is the sum of the exclusive categories over the profile total, and the
GC *mark* share counts only ``RUNTIME_COMPARABLE``, the work the runtime's
CPU classes call GC (so it is the one to set beside ``gc_cpu_fraction_busy``).

Per instance (service, version, instance): the profile view sums the GC and
total CPU of its CPU profiles; the runtime view applies the rules above to one
window spanning all of its selected profiles.

A selection that matches no profile is an error (``StoreError``), as for
``top``: the join sets GC metrics beside profiles; GC metrics alone are
``gogc``'s. Anything else missing (a table, a metric, a window, an instance)
gives NULL columns and a note in ``GcResult.notes``, never an error. A note says which
rows it is about. Profiles whose window holds no ``/metrics`` scrape of their
instance (a snapshot, heap, goroutine or threadcreate, is an instant whose
fetch holds none; a window too short for the scrape interval, or one whose
scrapes failed) have no runtime view of their own: one note for the snapshots
and one for the others says how many, of which types and instances, and
whether those instances' rows, over the span of all of an instance's profiles,
have the runtime view (which rows do, which do not).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pyproflab.analyses.gc_categories import (
    CATEGORY_NAMES,
    GC_CATEGORIES,
    GcCategoriesResult,
    gc_categories,
)
from pyproflab.analyses.gc_windows import Notes, window_metrics
from pyproflab.display import render
from pyproflab.store import queries
from pyproflab.store.connection import Store
from pyproflab.store.select import Selection, no_profiles

# The categories the runtime's own ``/cpu/classes/gc/total`` counts (mark
# assists, dedicated/fractional/idle workers, pauses). Allocation, write
# barriers, sweeping and the scavenger are GC *cost* in the guide's sense but
# the runtime books them as user (or scavenge) time, so the like-for-like
# comparison with ``gc_cpu_fraction_busy`` is ``profile_gc_mark_share``.
RUNTIME_COMPARABLE: tuple[str, ...] = (
    "mark_dedicated",
    "mark_fractional",
    "mark_idle",
    "mark_worker_other",
    "mark_assist",
    "stw_other",
)

# Said when the selection matches no profile.
NO_PROFILES_HINT = "for GC metrics alone: pyproflab gogc"

# Profiles of a moment, not of a window: their fetch is too short to hold a scrape.
SNAPSHOT_TYPES = ("heap", "goroutine", "threadcreate")

# --- result columns -----------------------------------------------------------------

_F = pa.float64()
_I = pa.int64()
_S = pa.string()
_T = pa.timestamp("us", tz="UTC")

# What the runtime-view columns are, in order (shared by both tables).
RUNTIME_FIELDS: tuple[pa.Field, ...] = (
    pa.field("scrapes", _I),  # distinct sample times of the metrics read, in the window
    pa.field("gc_cycles", _F),
    pa.field("gc_cycles_per_min", _F),
    pa.field("heap_live_mean_bytes", _F),
    pa.field("heap_live_last_bytes", _F),
    pa.field("heap_goal_mean_bytes", _F),
    pa.field("heap_goal_last_bytes", _F),
    pa.field("alloc_bytes", _F),
    pa.field("alloc_bytes_per_sec", _F),
    pa.field("stw_pauses", _F),
    pa.field("stw_pause_total_seconds", _F),
    pa.field("stw_pause_p99_seconds", _F),
    pa.field("gc_cpu_seconds", _F),
    pa.field("total_cpu_seconds", _F),
    pa.field("idle_cpu_seconds", _F),
    pa.field("gc_cpu_fraction", _F),
    pa.field("gc_cpu_fraction_busy", _F),
    pa.field("gogc_percent", _F),
    pa.field("gomemlimit_bytes", _F),
    pa.field("gctrace_cycles", _I),
    pa.field("gctrace_heap_live_mean_mb", _F),
    pa.field("gctrace_heap_goal_mean_mb", _F),
)

_ID_FIELDS: tuple[pa.Field, ...] = (
    pa.field("service", _S),
    pa.field("version", _S),
    pa.field("instance", _S),
)

PROFILES_SCHEMA = pa.schema(
    [
        pa.field("profile_id", _I, nullable=False),
        *_ID_FIELDS,
        pa.field("profile_type", _S),
        pa.field("window_start", _T),
        pa.field("window_end", _T),
        *RUNTIME_FIELDS,
        pa.field("profile_cpu_ns", _I),
        pa.field("profile_gc_cpu_ns", _I),
        pa.field("profile_gc_share", _F),
        pa.field("profile_gc_mark_share", _F),
        *[pa.field(f"gc_{name}_ns", _I) for name in CATEGORY_NAMES],
    ]
)

INSTANCES_SCHEMA = pa.schema(
    [
        *_ID_FIELDS,
        pa.field("profiles", _I, nullable=False),
        pa.field("cpu_profiles", _I, nullable=False),
        pa.field("window_start", _T),
        pa.field("window_end", _T),
        pa.field("profile_gc_share", _F),
        pa.field("profile_gc_mark_share", _F),
        *RUNTIME_FIELDS,
        pa.field("profile_cpu_ns", _I),
        pa.field("profile_gc_cpu_ns", _I),
        pa.field("profile_gc_mark_cpu_ns", _I),
    ]
)

CATEGORIES_SCHEMA = pa.schema(
    [
        pa.field("profile_id", _I, nullable=False),
        pa.field("category", _S, nullable=False),
        pa.field("cpu_ns", _I, nullable=False),
        pa.field("share", _F, nullable=False),
        pa.field("samples", _I, nullable=False),
        pa.field("plain_cpu_ns", _I, nullable=False),
        pa.field("plain_share", _F, nullable=False),
    ]
)


# --- the result ---------------------------------------------------------------------


@dataclass
class GcResult:
    """GC metrics per profile and per instance, with the profile view of CPU profiles.

    ``profiles`` (``PROFILES_SCHEMA``): one row per selected profile.
    ``instances`` (``INSTANCES_SCHEMA``): one row per (service, version, instance).
    ``categories`` (``CATEGORIES_SCHEMA``): per CPU profile and category.
    ``notes``: what was missing, one line per kind.
    """

    profiles: pa.Table
    instances: pa.Table
    categories: pa.Table
    notes: list[str] = field(default_factory=list)
    category_results: dict[int, GcCategoriesResult] = field(default_factory=dict, repr=False)

    def to_arrow(self) -> pa.Table:
        return self.profiles

    def to_pandas(self):
        return self.profiles.to_pandas()

    def __len__(self) -> int:
        return self.profiles.num_rows

    def _repr_html_(self) -> str:
        return render(self, "html")

    def __str__(self) -> str:
        """The text ``pyproflab gc`` prints (``print(lab.gc())``)."""
        return render(self, "text")

    def __repr__(self) -> str:
        return (
            f"GcResult({self.profiles.num_rows} profiles, {self.instances.num_rows} "
            f"instances, {len(self.notes)} notes)"
        )


def _windows_of(table: pa.Table, key: str) -> pa.Table:
    """Key, service, instance and window bounds of the rows that have all of them."""
    cols = {
        c: table.column(c).to_pylist() for c in (key, "service", "instance", "w_start", "w_end")
    }
    keep = [
        i
        for i in range(table.num_rows)
        if cols["instance"][i] is not None
        and cols["w_start"][i] is not None
        and cols["w_end"][i] is not None
    ]
    return pa.table(
        {
            "key": pa.array([cols[key][i] for i in keep], _I),
            "service": pa.array([cols["service"][i] for i in keep], _S),
            "instance": pa.array([cols["instance"][i] for i in keep], _S),
            "w_start": pa.array([cols["w_start"][i] for i in keep], _T),
            "w_end": pa.array([cols["w_end"][i] for i in keep], _T),
        }
    )


def gc(store: Store, selection: Selection | None = None, *, categories: bool = True) -> GcResult:
    """Join the selected profiles with their instances' GC metrics (see the module rules).

    ``categories=False`` skips reading CPU profiles' stacks (runtime view only).
    """
    profiles = queries.profile_windows(store, selection)
    notes = Notes()
    present = queries.table_names(store)
    if profiles.num_rows == 0:  # as top: a mistyped selection is not an empty table
        raise no_profiles(store, selection or Selection(), NO_PROFILES_HINT)

    ids = profiles.column("profile_id").to_pylist()
    meta = {
        c: profiles.column(c).to_pylist()
        for c in ("service", "version", "instance", "profile_type", "w_start", "w_end")
    }
    for i in range(len(ids)):
        if meta["instance"][i] is None:
            notes.add("profile without an instance: runtime-view columns are NULL")
        elif meta["w_start"][i] is None:
            notes.add("profile without a time or collection window: runtime-view columns are NULL")
    runtime, bare = _runtime_view(store, profiles, present, notes)

    # Profile view: the categories of every CPU profile.
    cat_results: dict[int, GcCategoriesResult] = {}
    if categories:
        for pid, ptype in zip(ids, meta["profile_type"], strict=True):
            if ptype == "cpu":
                cat_results[pid] = gc_categories(store.profile(pid))

    rows: dict[str, list] = {f.name: [] for f in PROFILES_SCHEMA}
    for i, pid in enumerate(ids):
        rows["profile_id"].append(pid)
        for c in ("service", "version", "instance", "profile_type"):
            rows[c].append(meta[c][i])
        rows["window_start"].append(meta["w_start"][i])
        rows["window_end"].append(meta["w_end"][i])
        vals = runtime.get(pid, {})
        for f in RUNTIME_FIELDS:
            rows[f.name].append(vals.get(f.name))
        r = cat_results.get(pid)
        rows["profile_cpu_ns"].append(r.total if r else None)
        rows["profile_gc_cpu_ns"].append(r.gc if r else None)
        rows["profile_gc_share"].append(r.gc_share if r and r.total else None)
        mark = sum(r.value(n) for n in RUNTIME_COMPARABLE) if r and r.total else None
        rows["profile_gc_mark_share"].append(mark / r.total if r and mark is not None else None)
        for name in CATEGORY_NAMES:
            rows[f"gc_{name}_ns"].append(r.value(name) if r else None)
    profile_table = pa.table(rows, schema=PROFILES_SCHEMA)

    cat_rows: dict[str, list] = {f.name: [] for f in CATEGORIES_SCHEMA}
    for pid, r in cat_results.items():
        for x in r.rows.to_pylist():
            for col, src in (
                ("category", "category"),
                ("cpu_ns", "cpu"),
                ("share", "share"),
                ("samples", "samples"),
                ("plain_cpu_ns", "plain_cpu"),
                ("plain_share", "plain_share"),
            ):
                cat_rows[col].append(x[src])
            cat_rows["profile_id"].append(pid)
    cat_table = pa.table(cat_rows, schema=CATEGORIES_SCHEMA)

    instance_table = _instances(store, profile_table, present, notes)
    at = {pid: i for i, pid in enumerate(ids)}
    bare_rows = [{c: v[at[k]] for c, v in meta.items()} for k in bare]
    _no_scrape_notes(bare_rows, instance_table, notes)
    return GcResult(profile_table, instance_table, cat_table, notes.lines("profiles"), cat_results)


def _runtime_view(
    store: Store, profiles: pa.Table, present: set[str], notes: Notes
) -> tuple[dict[int, dict[str, Any]], list[int]]:
    """Runtime-view values per profile id, and the ids of the profiles whose window
    holds no scrape of their instance (``_no_scrape_notes`` says which). Snapshots
    are asked apart: a gap the spans already noted is not noted again for them."""
    windows = _windows_of(profiles, "profile_id")
    types = dict(
        zip(
            profiles.column("profile_id").to_pylist(),
            profiles.column("profile_type").to_pylist(),
            strict=True,
        )
    )
    snap = [types[k] in SNAPSHOT_TYPES for k in windows.column("key").to_pylist()]
    spans = windows.filter(pa.array([not x for x in snap], pa.bool_()))
    runtime = window_metrics(store, spans, present, notes)
    shot_notes = notes if spans.num_rows == 0 else Notes()
    picked = windows.filter(pa.array(snap, pa.bool_()))
    runtime |= window_metrics(store, picked, present, shot_notes)
    if "metric_samples" not in present:  # window_metrics said so, once
        return runtime, []
    return runtime, [k for k, v in runtime.items() if not v.get("scrapes")]


def _listed(names: list[str], most: int = 4) -> str:
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"


def _no_scrape_notes(bare: list[dict[str, Any]], instances: pa.Table, notes: Notes) -> None:
    """One note for the snapshots and one for the other profiles among ``bare``
    (profiles whose window holds no scrape of their instance): how many, of which
    types and instances, and which of those instances' rows have the runtime view."""
    has = {
        (r["service"], r["version"], r["instance"]): bool(r["scrapes"])
        for r in instances.to_pylist()
    }
    for snapshots in (True, False):
        mine = [r for r in bare if (r["profile_type"] in SNAPSHOT_TYPES) == snapshots]
        if not mine:
            continue
        one = len(mine) == 1
        its, s = ("its", "") if one else ("their", "s")
        kinds = "/".join(sorted({r["profile_type"] for r in mine}))
        if snapshots:
            what = f"{kinds} snapshot{s} ({'an' if one else 'each an'} instant)"
            where = "no /metrics scrape"
        else:
            what = f"{kinds} profile{s} of {_listed(sorted({r['instance'] for r in mine}))}"
            where = f"no /metrics scrape of {its} instance in {its} window"
        keys = {(r["service"], r["version"], r["instance"]) for r in mine}
        with_view = sorted({k[2] for k in keys if has.get(k)})
        without = sorted({k[2] for k in keys if not has.get(k)} - set(with_view))
        if not without:
            tail = "the instance rows, over all of an instance's profiles, have it"
        elif not with_view:
            tail = f"nor do the rows of {its} instance{'' if len(keys) == 1 else 's'}"
        else:
            tail = (
                f"the rows of {_listed(with_view)} have it, over all of an instance's "
                f"profiles; those of {_listed(without)} do not"
            )
        notes.add(
            f"{len(mine)} {what} hold{'s' if one else ''} {where}: no runtime view in {its} "
            f"per-profile row{s}; {tail}"
        )


def _instances(store: Store, profiles: pa.Table, present: set[str], notes: Notes) -> pa.Table:
    """Per (service, version, instance): profile view sums, runtime view over the span."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in profiles.to_pylist():
        groups[(row["service"], row["version"], row["instance"])].append(row)
    keys = sorted(groups, key=lambda k: tuple((x is None, x or "") for x in k))
    spans = []
    for n, key in enumerate(keys):
        starts = [r["window_start"] for r in groups[key] if r["window_start"] is not None]
        ends = [r["window_end"] for r in groups[key] if r["window_end"] is not None]
        spans.append(
            (n, key[0], key[2], min(starts) if starts else None, max(ends) if ends else None)
        )
    span_table = pa.table(
        {
            "key": pa.array([s[0] for s in spans], _I),
            "service": pa.array([s[1] for s in spans], _S),
            "instance": pa.array([s[2] for s in spans], _S),
            "w_start": pa.array([s[3] for s in spans], _T),
            "w_end": pa.array([s[4] for s in spans], _T),
        }
    )
    # Notes from the per-profile pass already name every gap; don't repeat them.
    runtime = window_metrics(store, _windows_of(span_table, "key"), present, Notes())
    out: dict[str, list] = {f.name: [] for f in INSTANCES_SCHEMA}
    for (n, _, _, start, end), key in zip(spans, keys, strict=True):
        rows = groups[key]
        cpu = [r for r in rows if r["profile_cpu_ns"] is not None]
        total = sum(r["profile_cpu_ns"] for r in cpu)
        gc_ns = sum(r["profile_gc_cpu_ns"] for r in cpu)
        mark_ns = sum(r[f"gc_{n}_ns"] for r in cpu for n in RUNTIME_COMPARABLE)
        out["service"].append(key[0])
        out["version"].append(key[1])
        out["instance"].append(key[2])
        out["profiles"].append(len(rows))
        out["cpu_profiles"].append(len(cpu))
        out["window_start"].append(start)
        out["window_end"].append(end)
        out["profile_gc_share"].append(gc_ns / total if total else None)
        out["profile_gc_mark_share"].append(mark_ns / total if total else None)
        vals = runtime.get(n, {})
        for f in RUNTIME_FIELDS:
            out[f.name].append(vals.get(f.name))
        out["profile_cpu_ns"].append(total if cpu else None)
        out["profile_gc_cpu_ns"].append(gc_ns if cpu else None)
        out["profile_gc_mark_cpu_ns"].append(mark_ns if cpu else None)
    return pa.table(out, schema=INSTANCES_SCHEMA)


__all__ = [
    "CATEGORIES_SCHEMA",
    "GC_CATEGORIES",
    "INSTANCES_SCHEMA",
    "PROFILES_SCHEMA",
    "GcResult",
    "gc",
]
