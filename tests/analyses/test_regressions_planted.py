"""Acceptance of ``regressions`` on real profiles with planted regressions of
known size (tests/regprog, recorded once into tests/testdata/regressions by
``python -m bench.record_regressions``; see tests/support/regdata.py).

Each two-sample case was recorded alternating with its own baseline
(``base-CASE``), 8 + 8 profiles of 10 s at 100 Hz, one process at a time, on a
quiet machine: every window served its full request rate (see the data's
README). The cases are compared per request (``per="requests_total"``, the
counter written beside each profile); on this recording per second gives the
same rows. The A/A test runs both per second and per request.

The program uses about 0.9 of a core, so its 10%-of-CPU functions have about
80 samples per 10 s profile; the windows vary more than sampling alone would
(the over-dispersion the counts' test estimates), and the smallest increase
found with 80% power over 8 + 8 profiles is 25-37% (the ``detectable``
column), around the planted 30%. The cases whose planted change this
recording does not show at FDR 5% are strict xfails, each with what was
measured.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import regdata

pytestmark = pytest.mark.skipif(
    not (regdata.DATA / "base").is_dir(), reason="no recorded regression data"
)

PER = "requests_total"
# What was measured on this data (bench/regressions_table.py): the counts' test.
TEST = "quasi-poisson"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    st = regdata.store_of(
        tmp_path_factory.mktemp("planted") / "s.duckdb",
        ["base", "busy", "transient", "step"]
        + [f"{p}{c}" for c in ("own", "helper", "shift", "load") for p in ("", "base-")],
    )
    yield st
    st.close()


def _ids_of(store, instance: str) -> list[int]:
    from pyproflab.store.select import Selection

    rows = store.profiles(Selection(instance=instance)).sort_by("time_nanos")
    return rows.column("profile_id").to_pylist()


def _compare(store, case: str, **kw):
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store.select import Selection

    return regressions(
        store, Selection(instance=f"base-{case}"), Selection(instance=case), test=TEST, **kw
    )


HELPER_WEAK = pytest.mark.xfail(
    strict=True,
    reason="main.viaB is first (cum +21.3% [+6.4%, +38.2%], the planted +30% inside) but "
    "q = 0.17 > 0.05: detectable 35% on this recording",
)

WEAK = {"helper": HELPER_WEAK}


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=WEAK.get(c, ())) for c in sorted(regdata.PLANTED)]
)
def test_planted_is_first_significant_and_in_interval(store, case) -> None:
    name, size = regdata.PLANTED[case]
    res = _compare(store, case, per=PER)
    top = res.rows.to_pylist()[0]
    m = top["evidence_metric"]
    assert top["label"] == name, (case, top["label"])
    assert top["direction"] == "increase" and top[f"{m}_significant"]
    assert top[f"{m}_q"] <= 0.05
    assert top[f"{m}_rel_lo"] <= size <= top[f"{m}_rel_hi"], (
        top[f"{m}_rel_lo"],
        top[f"{m}_rel_hi"],
    )
    assert top["explained_by"] is None


@pytest.mark.xfail(
    strict=True,
    reason="no edges: they are tested into nodes whose flat change is significant, and "
    "main.helper's flat measured +1.5% (q 0.75; +10% planted: viaB's third of its calls +30%)",
)
def test_shared_helper_change_is_attributed_to_its_caller_edge(store) -> None:
    res = _compare(store, "helper", per=PER)
    edges = {(e["caller"], e["callee"]): e for e in res.edges.to_pylist()}
    e = edges[("main.viaB", "main.helper")]
    assert e["significant"] and e["rel_lo"] <= 0.30 <= e["rel_hi"]
    for other in ("main.viaC", "main.viaD"):
        assert not edges[(other, "main.helper")]["significant"]


def test_shared_helper_is_grouped_under_its_caller(store) -> None:
    res = _compare(store, "helper", per=PER)
    rows = {r["label"]: r for r in res.rows.to_pylist()}
    # The helper's own (flat) change is grouped under the caller that carries it.
    if rows["main.helper"]["direction"] == "increase":
        assert rows["main.helper"]["explained_by"] == "main.viaB"


def test_cost_shift_is_labelled_not_two_findings(store) -> None:
    res = _compare(store, "shift", per=PER)
    rows = {r["label"]: r for r in res.rows.to_pylist()}
    assert rows["main.shiftX"]["shift_with"] == "main.shiftY"
    assert rows["main.shiftY"]["shift_with"] == "main.shiftX"
    assert rows["main.shiftY"]["direction"] == "decrease"
    assert any("cost shift: main.shiftY -> main.shiftX" in n for n in res.notes)


@pytest.mark.xfail(
    strict=True,
    reason="per request, 4 decreases are significant: main.viaD cum -21% (q 0.009), "
    "main.helper -11% (q 0.014), main.handle and its caller -6% (q 0.027); no increase",
)
def test_more_load_is_no_finding_per_request(store) -> None:
    res = _compare(store, "load", per=PER)
    assert not res.rows.column("flat_significant").to_numpy().any()
    assert not res.rows.column("cum_significant").to_numpy().any()


@pytest.mark.slow
@pytest.mark.parametrize("per", [None, PER])
@pytest.mark.parametrize("instance", ["base", "busy"])
def test_aa_random_window_splits_are_quiet(store, instance, per) -> None:
    """100 random 8/8 splits of one version's 16 windows: at most 5 have any
    significant row, on the quiet machine and beside 3 busy-looping processes."""
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store.select import Selection

    ids = np.array(_ids_of(store, instance))
    assert len(ids) == 16
    rng = np.random.default_rng(13)
    alarms = 0
    for _ in range(100):
        pick = rng.permutation(len(ids))
        a, b = sorted(ids[pick[:8]].tolist()), sorted(ids[pick[8:]].tolist())
        res = regressions(
            store, Selection(profile_ids=a), Selection(profile_ids=b), per=per, test=TEST
        )
        sig = res.rows.column("flat_significant").to_numpy()
        sig = sig | res.rows.column("cum_significant").to_numpy()
        alarms += bool(sig.any())
    assert alarms <= 5, alarms


@pytest.mark.xfail(
    strict=True,
    reason="not found: window 5 shows main.ownWork +15% (185 samples against about 160) "
    "and main.otherWork -19%; the change point found is main.handle's cum -10.9% at "
    "window 5, went away",
)
def test_transient_went_away(store) -> None:
    from pyproflab.analyses.regressions.over_time import over_time
    from pyproflab.store.select import Selection

    res = over_time(store, Selection(service="regprog-transient"), per=PER)
    first = res.findings().to_pylist()[0]
    assert first["label"] == "main.ownWork" and first["window"] == 5
    assert first["status"] == "went away" and first["until_window"] == 6
    assert first["rel_lo"] <= 0.30 <= first["rel_hi"]


@pytest.mark.xfail(
    strict=True,
    reason="no change point: main.ownWork is +15% after window 6 (1.79 s against 1.56 s "
    "a 20 s window), under what 12 windows show at FDR 5% over 20 functions",
)
def test_step_found_within_one_window(store) -> None:
    from pyproflab.analyses.regressions.over_time import over_time
    from pyproflab.store.select import Selection

    res = over_time(store, Selection(service="regprog-step"), per=PER)
    first = res.findings().to_pylist()[0]
    assert first["label"] == "main.ownWork" and abs(first["window"] - 6) <= 1
    assert first["status"] == "persisted" and first["rel_lo"] <= 0.15 <= first["rel_hi"]


def test_cli_over_time_per_request(tmp_path, capsys) -> None:
    import json

    from pyproflab.cli import main

    regdata.store_of(tmp_path / "step.duckdb", ["step"]).close()
    argv = ["regressions", "--db", str(tmp_path / "step.duckdb"), "--over-time"]
    rc = main([*argv, "--service", "regprog-step", "--per", PER, "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(doc["windows"]) == 12 and doc["per"] == PER
    rc = main([*argv, "--service", "regprog-step", "--base", "version=v1"])
    assert rc == 2 and "drop --base/--new" in capsys.readouterr().err
    rc = main(argv)
    assert rc == 2 and "needs --service" in capsys.readouterr().err
