"""What ``regressions`` and ``over_time`` compare: shares or rates (rule 4 of
``pyproflab.analyses.regressions``)."""

from __future__ import annotations

import numpy as np

from pyproflab.analyses import cpu_coverage
from pyproflab.analyses.options import MEASURES
from pyproflab.analyses.regressions import inference
from pyproflab.analyses.regressions.incidence import NodeValues
from pyproflab.analyses.regressions.reads import ProfileReads
from pyproflab.analyses.regressions.selection import Sides
from pyproflab.analyses.regressions.units import per_work
from pyproflab.errors import UsageError


def resolve_measure(measure: str, per: str | None) -> str:
    """The measure ``auto`` stands for: rates when a work counter is given
    (``per``), shares otherwise (rule 4). ``share`` with ``per`` is refused:
    a share has no denominator to replace."""
    if measure not in MEASURES:
        raise UsageError(f"measure must be one of {', '.join(MEASURES)}, not {measure!r}")
    if measure == "share" and per:
        raise UsageError("per=COUNTER gives rates per unit of work; it needs measure=rate or auto")
    if measure == "auto":
        return "rate" if per else "share"
    return measure


def denominators_of(
    reads: ProfileReads, sides: Sides, nv: NodeValues, measure: str, per: str | None
):
    """(per-profile denominators, factor, shown unit) of the rates (rule 4):
    each profile's total for shares, the counter's increase with ``per``, else
    its duration (1 when not a rate)."""
    if measure == "share":
        # Denominator: each profile's total (sum of |value|), so values become shares;
        # in samples, so the counts' test sees the profiles' sample sizes.
        if not (nv.totals > 0).all():
            raise UsageError("measure=share needs every profile to have a non-zero total")
        sides.notes.append("compared as shares of each side's profile totals, not rates")
        sides.notes.append(totals_change(sides, nv.totals))
        return nv.totals / sides.count_scale, 1.0 / sides.count_scale, "share"
    if per:
        work = per_work(reads, sides.rows, per)
        shown = sides.rate_unit.removesuffix("/s") if sides.rate else sides.rate_unit
        shown = {"cores": "s"}.get(shown, shown)
        sides.notes.append(f"rates are per unit of {per} (its increase over each profile)")
        return work, sides.factor, f"{shown}/{per}"
    return sides.durations, sides.factor, sides.rate_unit


def totals_change(sides: Sides, totals: np.ndarray, confidence: float = 0.95) -> str:
    """The note on what shares leave out: the change of the profiles' totals per
    second (per profile when not a rate), with its quasi-Poisson interval over
    the profiles (rule 4)."""
    counts = (totals / sides.count_scale)[:, None]
    exposure = sides.durations if sides.rate else np.ones(len(totals))
    fit = inference.quasi_poisson_fit(counts, exposure, sides.is_new)
    q = fit.quantile(1 - (1 - confidence) / 2)
    rel, lo, hi = inference.log_ratio(fit.y_new, fit.d_new, fit.y_base, fit.d_base, fit.phi, q)
    unit = sides.rate_unit if sides.rate else f"{sides.rate_unit} a profile"
    scale = sides.count_scale * sides.factor
    return (
        f"totals: {fit.y_base[0] / fit.d_base * scale:.4g} {unit} (base), "
        f"{fit.y_new[0] / fit.d_new * scale:.4g} (new), {rel[0]:+.1%} "
        f"[{lo[0]:+.1%}, {hi[0]:+.1%}]: a change of every function alike shows here, "
        "not in the rows' shares"
    )


def coverage_note(reads: ProfileReads, sides: Sides, nv: NodeValues) -> None:
    """When the rates are CPU cores and a side's profiles hold clearly less CPU
    than its processes used over the same windows (``analyses.cpu_coverage``),
    one note with the figures of each such side and the likely cause."""
    if not (sides.rate and sides.rate_unit == "cores" and sides.sample_type.type == "cpu"):
        return
    services = sorted({r["service"] for r in sides.rows}, key=str)
    samples = reads.counter_samples(cpu_coverage.PROCESS_CPU, services)
    if not samples.num_rows:
        return
    seconds = nv.totals * sides.factor
    named = []
    for name, on in (("base", ~sides.is_new), ("new", sides.is_new)):
        rows = [r for r, o in zip(sides.rows, on, strict=True) if o]
        named.append((name, cpu_coverage.coverage_of(rows, seconds[on], samples)))
    note = cpu_coverage.short_note(named)
    if note:
        sides.notes.append(note)
