"""The canary plan's claim against a refit, replayed on the recorded workloads
(issue 29 item 4: "how much that would narrow the interval").

For each workload and source, fitted on the GOGC=100 runs under a budget of
2.5x their peak (``gc_recordings.budget_check``: the advice among the
recorded settings), the plan names a setting and a number of cycles and
claims each figure's interval width there afterwards (``width_after``, the
width over the point). The claim is compared with the width a refit gives
at that setting with one of its recorded runs added as one more instance
(each of its first three runs in turn), then with its first three; the
fleet's setting stays the current one (the canary is one instance). A run
covers the cycles between its first and last kept gctrace line; the plan
asks for ``cycles``. ``claim/refit`` above 1 is cautious, below 1
optimistic (the unsafe side).

    python -m bench.gc_validate --canary [--workloads graph,lru] [--sources gctrace]
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from pyproflab.analyses.gogc import predict as pr
from pyproflab.analyses.gogc import samples as ob
from pyproflab.sources.gctrace import parse_gctrace

FIGURES = pr.CANARY_FIGURES
ONE = 3  # single-run refits: each of the canary setting's first ONE runs


def label_of(setting: tuple) -> str:
    g, lim = setting
    out = "gogc" + ("off" if g is None else f"{g:g}")
    return out + (f"-lim{lim / (1 << 20):.0f}MiB" if lim is not None else "")


def covered(d: Path) -> int:
    """The cycles a run covers: its last kept gctrace line's number less its first's."""
    rows = [
        r
        for r in parse_gctrace((d / "gctrace.log").read_text(), source=str(d)).to_pylist()
        if not r["forced"]
    ]
    return rows[-1]["gc_num"] - rows[0]["gc_num"]


def observation(rec, base: list[Path], extra: list[Path], source: str, setting):
    """The base runs and the canary's as one observation. gctrace does not show
    a memory limit, and a canary under one is left out of a log-only refit
    (``infer`` rule 9): its log then counts as run at the plan's setting, as
    the plan's note asks (its /metrics, or the setting given), with its
    process CPU and peak RSS as ``gc_recordings`` gives every setting's."""
    if source != "gctrace" or setting[1] is None:
        return rec.observation_of([*base, *extra], source)
    obs = rec.observation_of(base, source)
    can = ob.from_gctrace(rec.cycles_table(extra), gogc=setting[0], memory_limit=setting[1])
    cores = [rec.busy_cores(d) for d in extra]
    ob.with_process_cpu(can, sum(cores) / len(cores), "given", setting)
    top = max(s["run"] for s in obs.samples) + 1
    for s in can.samples:
        s["run"] += top
    obs.samples += can.samples
    obs.peak_rss[setting] = [rec.summary(d)["peak_rss_bytes"] for d in extra]
    return obs


def refit(rec, base: list[Path], extra: list[Path], source: str, setting, current) -> dict:
    """The widths at ``setting`` refitted with ``extra`` runs beside ``base``."""
    obs = observation(rec, base, extra, source, setting)
    obs.current = current
    m = pr.Model.build(obs)
    assert setting in {sf.setting for sf in m.fit.observed}, (setting, m.fit.observed)
    r = m.predict(*setting)
    return {k: pr._width(r, k) for k in FIGURES}


def case(rec, workload: str, source: str) -> dict:
    """One workload and source: the plan, its claim and the refits' widths."""
    check = rec.budget_check(workload, source)
    res = check["result"]
    plan = res.canary
    out = dict(workload=workload, source=source, plan=plan, advice=check["recommendation"])
    if plan is None:
        return out
    runs = rec.runs(workload, label_of(plan["setting"]))
    base = rec.runs(workload, "gogc100")
    cur = res.observation.current
    out["label"] = label_of(plan["setting"])
    out["covers"] = [covered(d) for d in runs[:ONE]]
    out["one"] = [refit(rec, base, [d], source, plan["setting"], cur) for d in runs[:ONE]]
    out["three"] = refit(rec, base, runs[:3], source, plan["setting"], cur)
    return out


def _f(x: float) -> str:
    return f"{x:.2f}" if math.isfinite(x) else "-"


def _ref(c: dict, k: str, which: str) -> float:
    return statistics.median(o[k] for o in c["one"]) if which == "one" else c["three"][k]


def rows(c: dict) -> list[str]:
    """Markdown rows of one case, one per figure."""
    head = f"| {c['workload']} | {c['source']} "
    if c["plan"] is None:
        return [head + f"| none (advice {c['advice']}, observed) |" + " |" * 7]
    p = c["plan"]
    out = []
    for k in FIGURES:
        ones = [o[k] for o in c["one"]]
        claim, one, three = p["width_after"][k], _ref(c, k, "one"), _ref(c, k, "three")
        out.append(
            head
            + f"| {c['label']} | {p['cycles']} | {'/'.join(map(str, c['covers']))} | {k} "
            + f"| {_f(p['width_now'][k])} | {_f(claim)} "
            + f"| {_f(one)} ({', '.join(map(_f, ones))}) | {_f(three)} "
            + f"| {_f(claim / one)} / {_f(claim / three)} |"
        )
    return out


def ratios(cases: list[dict], which: str) -> list[float]:
    """Claimed over refitted width, every figure of every case with a plan."""
    return [
        c["plan"]["width_after"][k] / ref
        for c in cases
        if c["plan"] is not None
        for k in FIGURES
        if math.isfinite(ref := _ref(c, k, which)) and ref > 0
    ]


def table(rec, workloads: list[str], sources: list[str]) -> str:
    cases = [case(rec, w, s) for w in workloads for s in sources]
    out = [
        "| workload | source | canary | plan cycles | a run covers | figure | width now "
        "| claimed after | refit, 1 run: median (each) | refit, 3 runs | claimed/refit (1 / 3) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        out += rows(c)
    out.append("")
    for which in ("one", "three"):
        rs = ratios(cases, which)
        if not rs:
            continue
        off = sum(not 1 / 1.3 <= r <= 1.3 for r in rs)
        low = sum(r < 1 / 1.3 for r in rs)
        out.append(
            f"claimed / refit with {which} run(s): {len(rs)} figures, median "
            f"{statistics.median(rs):.2f}, range {min(rs):.2f}-{max(rs):.2f}; off by more "
            f"than 30% in {off} ({low} optimistic); below 1 in {sum(r < 1 for r in rs)}"
        )
    out.append(narrowing(cases))
    return "\n".join(out)


def narrowing(cases: list[dict]) -> str:
    """The one-run refit's width over the three-run refit's (``predict`` rule 2:
    one run borrows the spread between runs it cannot show)."""
    rs = [
        _ref(c, k, "one") / three
        for c in cases
        if c["plan"] is not None
        for k in FIGURES
        if math.isfinite(three := _ref(c, k, "three")) and three > 0
    ]
    if not rs:
        return ""
    return (
        f"refit with one run / with three: {len(rs)} figures, median "
        f"{statistics.median(rs):.2f}, range {min(rs):.2f}-{max(rs):.2f}; below 0.6 in "
        f"{sum(r < 0.6 for r in rs)}"
    )
