"""The advice is monotone in the budget (``predict`` rules 2-3): a larger budget
never advises a setting with a smaller upper bound of peak memory or more GC
CPU. On the recorded demo store (tests/testdata/demo: the notesd fleet, GOGC 50
and 200) the bound of a raise under a limit at the usable budget went past the
limit (the interval's widening) unless its point stayed well under it: the
advice went from GOGC=800 with a 94 MiB limit at 3x the current peak to
GOGC=400 with 126 MiB at 4x, 0.0187 GC cores against 0.0104."""

from __future__ import annotations

import copy

import pytest
from support.browser.stores import demo_store

from pyproflab.analyses import gogc as model
from pyproflab.analyses.gogc.predict import Model
from pyproflab.store import Store

BUDGETS = (1.25, 1.5, 2, 2.5, 3, 4)  # times the current setting's predicted peak


@pytest.fixture(scope="module")
def notesd() -> model.Observation:
    with Store.open(demo_store(), read_only=True) as store:
        return model.observe_store(store, service="notesd")


def test_a_larger_budget_never_advises_a_lower_bound_or_more_gc_cpu(notesd) -> None:
    recs = []
    for k in BUDGETS:
        opts = model.GogcOptions(budget=model.Budget(times=k))
        rec = model.advise(copy.deepcopy(notesd), opts).recommendation
        assert rec is not None, f"{k}x"
        recs.append((k, rec))
    for (k0, a), (k1, b) in zip(recs, recs[1:], strict=False):
        said = f"{k0}x: GOGC={a['gogc_label']}, {k1}x: GOGC={b['gogc_label']}"
        assert b["peak_memory_hi"] >= a["peak_memory_hi"], said
        assert b["gc_cores"] <= a["gc_cores"], said


def test_a_limit_bounds_the_peak_of_a_setting_the_limiter_does_not_hold(notesd) -> None:
    """The runtime keeps what the limit counts under it while the GC keeps pace
    (rule 2): the upper bound is at most the limit, and the point too."""
    m = Model.build(copy.deepcopy(notesd))
    limit = 1.5 * m.predict(*notesd.current)["peak_memory"]  # type: ignore[misc]
    for g in (400, 800, None):
        r = m.predict(g, limit)
        assert r["status"] == "ok", g
        assert r["peak_memory"] <= r["peak_memory_hi"] <= limit, g
