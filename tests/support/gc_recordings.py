"""The recorded tests/gcbench runs (tests/testdata/gc/bench, `make bench-gc`) and
the fitted model's predictions for them: calibrated on GOGC=100 only, from
gctrace only or from Prometheus only, then every other setting predicted and
compared with what was measured.

Layout: ``bench/<mode>/<label>/r<k>/`` with ``gctrace.log`` (cycles after the
warm-up, thinned), ``snap-NNN.prom`` (three metric snapshots: the window's
start, middle and end) and ``summary.txt`` (peak RSS, the machine's other
CPU). Labels: ``gogc100``, ``gogc400-lim160MiB``, ``gogcoff-lim160MiB``.

Measured, per run: the heap goal (mean of gctrace's goals), GC cycles per
minute (gctrace: cycle numbers over start times), the GC CPU share (the
snapshots: GC CPU classes over busy CPU, total − idle, first to last), the
peak RSS. A setting's measured value is the mean over its runs. For
diagnostics only (``bench/gc_explain.py``), never predicted against: the
marked heap, mark time and mark-time allocation (gctrace), GC CPU per cycle,
GC and user (mutator) CPU in cores, the allocation rate (the snapshots).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from pyproflab.analyses import gogc_inputs as gi
from pyproflab.analyses.gogc_model import predict_setting
from pyproflab.sources.gctrace import parse_gctrace
from pyproflab.sources.prometheus import parse_exposition

# PYPROFLAB_GC_RECORDINGS points the bench script at raw runs (.bench/gc/raw).
ROOT = Path(
    os.environ.get("PYPROFLAB_GC_RECORDINGS")
    or Path(__file__).resolve().parents[1] / "testdata" / "gc" / "bench"
)
MiB = float(1 << 20)
MODES = ("cpu", "rate")
_LABEL = re.compile(r"gogc(\w+?)(?:-lim(\d+)MiB)?$")


def setting_of(label: str) -> tuple[float | None, float | None]:
    m = _LABEL.match(label)
    if not m:
        raise ValueError(label)
    g = None if m.group(1) == "off" else float(m.group(1))
    return g, float(m.group(2)) * MiB if m.group(2) else None


def runs(mode: str, label: str) -> list[Path]:
    return sorted(p for p in (ROOT / mode / label).glob("r*") if re.fullmatch(r"r\d+", p.name))


def labels(mode: str) -> list[str]:
    order = lambda s: (s[0] is None, s[0] or 0, s[1] or 0)  # noqa: E731
    return sorted((p.name for p in (ROOT / mode).iterdir()), key=lambda x: order(setting_of(x)))


def cycles_table(dirs: list[Path]) -> pa.Table:
    """gctrace cycles of the runs, one instance per run."""
    ts = []
    for d in dirs:
        t = parse_gctrace((d / "gctrace.log").read_text(), source=str(d))
        ts.append(t.append_column("instance", pa.array([d.name] * t.num_rows, pa.string())))
    return pa.concat_tables(ts)


def samples_table(dirs: list[Path]) -> pa.Table:
    """Metric snapshots of the runs, one instance per run."""
    ts = []
    for d in dirs:
        for f in sorted(d.glob("snap-*.prom")):
            t = parse_exposition(f.read_text(), default_time=datetime.now(UTC), source=str(f))
            ts.append(t.append_column("instance", pa.array([d.name] * t.num_rows, pa.string())))
    return pa.concat_tables(ts)


def summary(d: Path) -> dict[str, float]:
    return {
        k: float(v)
        for k, _, v in (ln.partition(" ") for ln in (d / "summary.txt").read_text().splitlines())
    }


def measured(d: Path) -> dict[str, float]:
    """One run's measured figures (see the module rules)."""
    rows = [
        r
        for r in parse_gctrace((d / "gctrace.log").read_text(), source=str(d)).to_pylist()
        if not r["forced"]
    ]
    span = rows[-1]["seconds"] - rows[0]["seconds"]
    snaps = [
        parse_exposition(f.read_text(), default_time=datetime.now(UTC), source=str(f))
        for f in sorted(d.glob("snap-*.prom"))
    ]

    def val(t: pa.Table, name: str) -> float:
        return next(r["value"] for r in t.to_pylist() if r["metric"] == name and not r["labels"])

    def delta(name: str) -> float:
        return val(snaps[-1], name) - val(snaps[0], name)

    gc = delta("go_cpu_classes_gc_total_cpu_seconds_total")
    total = delta("go_cpu_classes_total_cpu_seconds_total")
    busy = total - delta("go_cpu_classes_idle_cpu_seconds_total")
    wall = total / val(snaps[-1], "go_sched_gomaxprocs_threads")  # total = P x wall
    mean = lambda key: sum(r[key] for r in rows) / len(rows)  # noqa: E731
    return dict(
        goal=sum((r["heap_goal_mb"] + 0.5) * MiB for r in rows) / len(rows),
        cycles_per_min=60 * (rows[-1]["gc_num"] - rows[0]["gc_num"]) / span,
        gc_share=gc / busy,
        peak_memory=summary(d)["peak_rss_bytes"],
        other_cpu=summary(d)["other_cpu_cores"],
        # Diagnostics (bench/gc_explain.py), not predicted figures:
        marked=(mean("heap_live_mb") + 0.5) * MiB,
        mark_s=mean("clock_mark_ms") / 1e3,
        mark_alloc=(mean("heap_end_mb") - mean("heap_start_mb")) * MiB,
        cost=gc / delta("go_gc_cycles_total_gc_cycles_total"),
        gc_cores=gc / wall,
        mutator=delta("go_cpu_classes_user_cpu_seconds_total") / wall,
        alloc=delta("go_gc_heap_allocs_bytes_total") / wall,
    )


SOURCES = ("gctrace", "prometheus", "gctrace+prometheus")
SHORT = {"gctrace": "gctr", "prometheus": "prom", "gctrace+prometheus": "both"}


def calibration(mode: str, source: str) -> gi.GcObservation:
    """The GOGC=100 runs of a mode as one observation (instances = runs), from
    one of ``SOURCES``: ``gctrace+prometheus`` is what ``observe`` makes of both
    (the store's joined data, or ``pyproflab gogc --gctrace LOG --metrics ...``)."""
    dirs = runs(mode, "gogc100")
    if source == "gctrace+prometheus":
        return gi.observe(cycles=cycles_table(dirs), samples=samples_table(dirs))
    if source == "gctrace":
        obs = gi.from_gctrace(cycles_table(dirs), gogc=100.0)
        # gctrace has no RSS: the peak RSS a user reads off the container at GOGC=100.
        obs.peak_rss_by_instance = [summary(d)["peak_rss_bytes"] for d in dirs]
        obs.peak_rss = max(obs.peak_rss_by_instance)
        obs.provenance["peak RSS"] = "given (the runs' VmHWM)"
        return obs
    return gi.from_metrics(samples_table(dirs))


@dataclass
class Row:
    mode: str
    source: str
    label: str
    metric: str
    predicted: float
    measured: float
    lo: float
    hi: float
    runs_measured: list[float]

    @property
    def error(self) -> float:
        return (self.predicted - self.measured) / self.measured

    @property
    def inside(self) -> bool:
        return all(self.lo <= v <= self.hi for v in self.runs_measured)


METRICS = ("goal", "cycles_per_min", "gc_share", "peak_memory")


def table(mode: str, source: str) -> list[Row]:
    """Predicted vs measured for every recorded setting of a mode, calibrated
    on its GOGC=100 runs from one source."""
    obs = calibration(mode, source)
    out = []
    for label in labels(mode):
        g, lim = setting_of(label)
        pred = predict_setting(obs, g, lim)
        ms = [measured(d) for d in runs(mode, label)]
        for k in METRICS:
            vals = [m[k] for m in ms]
            out.append(
                Row(
                    mode,
                    source,
                    label,
                    k,
                    pred[k],
                    sum(vals) / len(vals),
                    pred[k + "_lo"],
                    pred[k + "_hi"],
                    vals,
                )
            )
    return out


def format_rows(rows: list[Row]) -> str:
    def f(metric: str, v: float) -> str:
        if not math.isfinite(v):
            return str(v)
        if metric in ("goal", "peak_memory"):
            return f"{v / MiB:.1f}MiB"
        if metric == "gc_share":
            return f"{100 * v:.1f}%"
        return f"{v:.1f}"

    lines = [
        f"{'mode':5} {'source':10} {'setting':18} {'metric':15} {'predicted':>10} "
        f"{'measured':>10} {'error':>7}  interval"
    ]
    for r in rows:
        lines.append(
            f"{r.mode:5} {r.source:10} {r.label:18} {r.metric:15} {f(r.metric, r.predicted):>10} "
            f"{f(r.metric, r.measured):>10} {100 * r.error:+6.1f}%  "
            f"[{f(r.metric, r.lo)}, {f(r.metric, r.hi)}]{'' if r.inside else '  OUTSIDE'}"
        )
    return "\n".join(lines)


def format_compact(rows: list[Row]) -> str:
    """One line per setting: each figure as predicted/measured error [interval]."""

    def cell(r: Row) -> str:
        if r.metric in ("goal", "peak_memory"):
            f = lambda v: f"{v / MiB:.0f}"  # noqa: E731
        elif r.metric == "gc_share":
            f = lambda v: f"{100 * v:.1f}"  # noqa: E731
        else:
            f = lambda v: f"{v:.0f}"  # noqa: E731
        mark = "" if r.inside else "!"
        return f"{f(r.predicted)}/{f(r.measured)} {100 * r.error:+.0f}% [{f(r.lo)}-{f(r.hi)}]{mark}"

    by: dict[tuple[str, str, str], dict[str, Row]] = {}
    for r in rows:
        by.setdefault((r.mode, r.source, r.label), {})[r.metric] = r
    lines = ["mode src  setting        goal MiB | GC/min | GC share % | peak MiB"]
    for (mode, source, label), ms in by.items():
        lines.append(
            f"{mode:4} {SHORT.get(source, source[:4]):4} {label.replace('gogc', ''):14} "
            + " | ".join(cell(ms[k]) for k in METRICS)
        )
    return "\n".join(lines)
