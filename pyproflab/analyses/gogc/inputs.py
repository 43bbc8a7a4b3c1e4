"""Where the GOGC model's observation comes from: log and snapshot files, the
store, or figures given by hand.

Rules:

- Files: each gctrace log is one instance (named by its path); a set of
  Prometheus text snapshots is one instance (a sample without a timestamp
  takes the file's modification time). An unreadable file is one line naming it.
- The store: the selection's gctrace cycles and GC metric samples. Each
  source that can serve is used: both together (gctrace for the per-cycle
  figures, Prometheus for the process's CPU and RSS), or the one that can,
  with a note saying which and why the other could not (no rows, or too few:
  one Prometheus snapshot, fewer than 3 cycles). Neither: one line with both
  reasons. cAdvisor's container metrics come along (``container``). Rows of
  several services name their instance ``service/instance``: two services'
  pod-0 are two instances.
- Figures (``from_figures``, the GC guide's case with no per-cycle data):
  GOGC, cycles per minute and GC share, optionally the heap goal or marked
  heap, roots and the process CPU, make one steady sample. Without a heap
  size, heaps are in units of the marked heap (100 MiB stands for it: only
  ratios mean anything); without the process CPU, CPU is in units of the
  process's (1 core stands for it). No mark time: no floating garbage; the
  cost per cycle is all per byte of scan work at the point (the guide's).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from pyproflab.analyses.gogc import container as ct
from pyproflab.analyses.gogc.prometheus import METRIC_NAMES, from_metrics
from pyproflab.analyses.gogc.samples import (
    MiB,
    Observation,
    combine,
    from_gctrace,
    setting_label,
)
from pyproflab.analyses.gogc.thin import thin_cycles, thinned_note
from pyproflab.errors import UsageError


def _with_instance(table: pa.Table, name: str | None) -> pa.Table:
    col = pa.array([name] * table.num_rows, pa.string())
    if "instance" in table.column_names:
        return table.set_column(table.column_names.index("instance"), "instance", col)
    return table.append_column("instance", col)


def read_gctrace_files(paths: Iterable[str], skipped: list | None = None) -> pa.Table:
    """The gctrace cycles of log files, one instance per file (named by its path).
    An unreadable file is one line naming it; one holding no gctrace line is a
    ``UsageError`` naming it (the log was given: "no gctrace cycles" alone would
    not say which). A malformed gctrace line (a log cut in the middle of one)
    is one line naming the file and the line, as ``ingest-gc`` says it; with
    ``skipped`` (``--lenient``), such lines (split by other output) are
    skipped and collected there (they were skipped without a word)."""
    from pyproflab.analyses.gogc.thin import Thinner
    from pyproflab.sources.gctrace import iter_gctrace_file

    thinner = Thinner()
    for path in paths:
        before = thinner.cycles
        # Read in bounded pieces, each value checked (sources.gctrace), and
        # thinned as read: memory stays bounded whatever the log's length.
        for t in iter_gctrace_file(path, source=path, errors=skipped):
            thinner.add(_with_instance(t, path))
        if thinner.cycles == before:
            raise UsageError(
                f"{path}: no gctrace line in it (a GODEBUG=gctrace=1 log has lines "
                "'gc N @Ts P%: ...')"
            )
    return thinner.table()


def read_metric_files(paths: Iterable[str], instance: str | None = None) -> pa.Table:
    """Prometheus text snapshots, as one instance."""
    from pyproflab.sources.prometheus_scan import read_exposition

    tables = []
    for path in paths:
        t = read_exposition(path, source=path)  # undated samples: the file's mtime
        tables.append(_with_instance(t, instance))
    return pa.concat_tables(tables)


def _one_gogc_each(trace: Observation | None) -> dict:
    """Each instance's GOGC in gctrace, for those that show one only."""
    seen: dict = {}
    for s in trace.samples if trace else []:
        seen.setdefault(s.get("instance"), set()).add(s["setting"][0])
    return {inst: next(iter(gs)) for inst, gs in seen.items() if len(gs) == 1}


def observe(
    *,
    cycles: pa.Table | None = None,
    samples: pa.Table | None = None,
    gogc: float | None | str = "auto",
    memory_limit: float | None | str = "auto",
) -> Observation:
    """One observation from gctrace cycles and/or metric samples, each source
    used when it can serve (module rules). ``"auto"``: the setting from the
    metrics, else GOGC inferred from the goals and no limit."""
    got: dict[str, Observation] = {}
    why: dict[str, str] = {}
    if cycles is not None and cycles.num_rows > 0:
        cycles = cycles if thinned_note(cycles) else thin_cycles(cycles)
        try:
            got["gctrace"] = from_gctrace(
                cycles,
                gogc="infer" if gogc == "auto" else gogc,
                memory_limit=None if memory_limit == "auto" else memory_limit,  # type: ignore[arg-type]
            )
        except UsageError as e:
            why["gctrace"] = str(e)
    else:
        why["gctrace"] = "no gctrace cycles"
    if samples is not None and samples.num_rows > 0:
        try:
            got["prometheus"] = from_metrics(
                samples,
                gogc="observed" if gogc == "auto" else gogc,
                memory_limit="observed" if memory_limit == "auto" else memory_limit,
                trace_gogc=_one_gogc_each(got.get("gctrace")),
            )
        except UsageError as e:
            why["prometheus"] = str(e)
    else:
        why["prometheus"] = "no GC metric samples"
    if not got:
        raise UsageError("cannot model GOGC: " + "; ".join(f"{why[k]}" for k in why))
    if len(got) == 2:
        obs = combine(got["gctrace"], got["prometheus"])
    else:
        ((used, obs),) = got.items()
        other = "prometheus" if used == "gctrace" else "gctrace"
        if other in why and not why[other].startswith("no "):
            obs.notes.insert(0, f"GC data from {used} only: {other} could not serve ({why[other]})")
    if "gctrace" in got and (note := thinned_note(cycles)):
        obs.notes.append(note)
    obs.container = ct.from_cadvisor(samples)
    return obs


def observe_store(
    store,
    *,
    service: str | None = None,
    version: str | None = None,
    instance: str | None = None,
    gogc: float | None | str = "auto",
    memory_limit: float | None | str = "auto",
) -> Observation:
    """The observation of a service/version/instance from the store's gctrace
    cycles and metric samples (module rules); no profile needed."""
    from pyproflab.store.metrics import gc_cycle_rows, metric_sample_rows

    sel = dict(service=service, version=version, instance=instance)
    cycles, samples = _instances_of_their_service(
        gc_cycle_rows(store, **sel), metric_sample_rows(store, METRIC_NAMES + ct.CADVISOR, **sel)
    )
    if cycles.num_rows == 0 and samples.num_rows == 0:
        what = ", ".join(f"{k} {v}" for k, v in sel.items() if v is not None) or "the store"
        raise UsageError(
            f"no gctrace cycles or GC metrics for {what}: ingest them with `pyproflab ingest-gc`"
        )
    return observe(cycles=cycles, samples=samples, gogc=gogc, memory_limit=memory_limit)


def _instances_of_their_service(*tables: pa.Table) -> tuple[pa.Table, ...]:
    """The rows with ``instance`` named ``service/instance`` when they hold more
    than one service: by name alone, two services' pod-0 were one instance, their
    scrapes one series (two counters interleaved: a "restart" at every scrape)."""
    services = {s for t in tables for s in t.column("service").to_pylist() if s is not None}
    if len(services) < 2:
        return tables
    out = []
    for t in tables:
        pairs = zip(t.column("service").to_pylist(), t.column("instance").to_pylist(), strict=True)
        names = [f"{s}/{i}" if s is not None and i is not None else i for s, i in pairs]
        out.append(_with_instance_names(t, names))
    return tuple(out)


def _with_instance_names(table: pa.Table, names: list) -> pa.Table:
    i = table.column_names.index("instance")
    return table.set_column(i, "instance", pa.array(names, pa.string()))


def from_figures(
    *,
    gogc: float | None,
    gc_cycles_per_min: float,
    gc_cpu_share: float,
    heap_goal: float | None = None,
    live_heap: float | None = None,
    roots: float = 0.0,
    process_cpu: float | None = None,
    memory_limit: float | None = None,
) -> Observation:
    """One steady sample from figures given by hand (module rules)."""
    if not (gc_cycles_per_min > 0 and math.isfinite(gc_cycles_per_min)):
        raise UsageError("gc cycles per minute must be > 0")
    if not 0 <= gc_cpu_share < 1:
        raise UsageError(f"GC CPU share must be in [0, 1), got {gc_cpu_share}")
    g = 100.0 if gogc is None else gogc
    notes: list[str] = []
    if live_heap is not None:
        h = live_heap
    elif heap_goal is not None:
        h = (heap_goal - roots * g / 100) / (1 + g / 100)
        notes.append("marked heap derived from the heap goal: H = (goal - R*g)/(1 + g)")
    else:
        h, roots = 100 * MiB, 0.0
        notes.append("no heap size given: heap columns are in units of the marked heap (100 MiB)")
    if h <= 0:
        raise UsageError("heap goal too small for these roots and GOGC")
    goal = (
        heap_goal if heap_goal is not None and live_heap is not None else h + (h + roots) * g / 100
    )
    proc = process_cpu if process_cpu is not None else 1.0
    if process_cpu is None:
        notes.append("no process CPU given: CPU columns are in units of the process's CPU")
    n = gc_cycles_per_min / 60
    sample: dict[str, Any] = dict(
        n=n,
        per_cycle=goal - h,
        alloc=n * (goal - h),
        marked=h,
        goal=goal,
        mark_alloc=0.0,
        roots=roots,
        cost=gc_cpu_share * proc / n,
        work=math.nan,
        assist=math.nan,
        idle_mark=math.nan,
        mark_s=math.nan,
        mutator=proc * (1 - gc_cpu_share),
        idle=0.5,  # not CPU-bound: the guide's model holds the mutator's CPU
        peak_heap=goal,
        procs=max(64.0, 2 * proc),
        setting=(gogc, memory_limit),
        run=0,
        w=1 / n,
        t_end=0.0,
    )
    obs = Observation([dict(sample, t_end=float(i)) for i in range(3)], sample["procs"], "figures")
    obs.notes += notes
    obs.provenance = {k: "given" for k in ("cycles", "GC CPU", "GOGC", "marked heap")}
    obs.provenance["mark time"] = "not given: no floating garbage modelled"
    return obs


def check_process_cpu(obs: Observation, cores: float) -> None:
    """A process CPU given for the current setting lies between the GC's CPU there
    and GOMAXPROCS, else one line says which bound it breaks (50 cores on 2 Ps,
    or less than the GC alone took, a GC share of 100 %, were modelled)."""
    ss = [s for s in obs.samples if s["setting"] == obs.current]
    procs, what = max((s["procs"] for s in ss), default=obs.procs), "process CPU (--process-cpu)"
    if cores > procs * (1 + 1e-9):
        raise UsageError(f"{what} {cores:g} cores is more than GOMAXPROCS {procs:g} allows")
    ws = [(s["w"], s["n"] * s["cost"]) for s in ss if math.isfinite(s["n"] * s["cost"])]
    gc = sum(w * v for w, v in ws) / sum(w for w, _ in ws) if ws else 0.0
    if cores < gc:
        assert obs.current is not None  # a GC CPU comes from samples at the current setting
        raise UsageError(
            f"{what} {cores:g} cores is less than the GC's own CPU at {setting_label(obs.current)} "
            f"({gc:.2f} cores): give it as the runtime counts it (CPU classes total - idle)"
        )
