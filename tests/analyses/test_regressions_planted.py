"""Acceptance of ``regressions`` on real profiles with planted regressions of
known size (tests/regprog, recorded once into tests/testdata/regressions by
``python -m bench.record_regressions``; see tests/support/regdata.py).

Each two-sample case was recorded alternating with its own baseline
(``base-CASE``), 8 + 8 profiles of 10 s at 100 Hz, one process at a time, on a
quiet machine: every window served its full request rate (see the data's
README). The cases are compared with the default measure, shares of each
profile's total: the processes of one side ran about 6% faster or slower per
request than the other's (machine speed; every unchanged function moved
alike), which shares cancel and rates per request or per second do not. The
per-request and per-second comparisons are tested where they make their own
claims (load, A/A).

The program uses about 0.9 of a core, so its 10%-of-CPU functions have about
80 samples per 10 s profile, and the smallest increase found with 80% power
over 8 + 8 profiles is about 25% (the ``detectable`` column), under the
planted 30%. The over-time cases are series of one process: the transient
12 windows of 90 s, the step 16 of 30 s (designs chosen for power, see
bench/record_regressions.py).
"""

from __future__ import annotations

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


#: Other planted changes of a case (the shift's decrease), for the share it plants.
ALSO_PLANTED = {"shift": [("main.shiftY", -0.30)]}


def _planted_share_change(res, case: str) -> float:
    """The relative change of the slowed function's share that the plant makes:
    (1 + p) / (1 + the total's planted change) - 1, the total's change being
    each planted change times its node's base share (cum)."""
    name, size = regdata.PLANTED[case]
    share = {r["label"]: r["cum_share_base"] for r in res.rows.to_pylist()}
    total = sum(p * share[n] for n, p in [(name, size), *ALSO_PLANTED.get(case, [])])
    return (1 + size) / (1 + total) - 1


@pytest.mark.parametrize("case", sorted(regdata.PLANTED))
def test_planted_is_first_significant_and_in_interval(store, case) -> None:
    name, _ = regdata.PLANTED[case]
    res = _compare(store, case)
    assert res.measure == "share"
    top = res.rows.to_pylist()[0]
    m = top["evidence_metric"]
    assert top["label"] == name, (case, top["label"])
    assert top["direction"] == "increase" and top[f"{m}_significant"]
    assert top[f"{m}_q"] <= 0.05
    size = _planted_share_change(res, case)
    assert top[f"{m}_rel_lo"] <= size <= top[f"{m}_rel_hi"], (
        size,
        top[f"{m}_rel_lo"],
        top[f"{m}_rel_hi"],
    )
    assert top["explained_by"] is None


def test_shared_helper_change_is_attributed_to_its_caller_edge(store) -> None:
    """main.viaB's cum rose and its flat did not: the edges into its callee
    main.helper split the helper's change by caller, and only viaB's carries it."""
    res = _compare(store, "helper")
    edges = {(e["caller"], e["callee"]): e for e in res.edges.to_pylist()}
    e = edges[("main.viaB", "main.helper")]
    size = _planted_share_change(res, "helper")
    assert e["significant"] and e["rel_lo"] <= size <= e["rel_hi"]
    for other in ("main.viaC", "main.viaD"):
        assert not edges[(other, "main.helper")]["significant"]


def test_shared_helper_is_grouped_under_its_caller(store) -> None:
    res = _compare(store, "helper")
    rows = {r["label"]: r for r in res.rows.to_pylist()}
    # The helper's own (flat) change is grouped under the caller that carries it.
    if rows["main.helper"]["direction"] == "increase":
        assert rows["main.helper"]["explained_by"] == "main.viaB"


def test_cost_shift_is_labelled_not_two_findings(store) -> None:
    res = _compare(store, "shift")
    rows = {r["label"]: r for r in res.rows.to_pylist()}
    assert rows["main.shiftX"]["shift_with"] == "main.shiftY"
    assert rows["main.shiftY"]["shift_with"] == "main.shiftX"
    assert rows["main.shiftY"]["direction"] == "decrease"
    assert any("cost shift: main.shiftY -> main.shiftX" in n for n in res.notes)


def _significant(res) -> list[tuple[str, str]]:
    rows = res.rows.to_pylist()
    return [
        (r["label"], r["direction"]) for r in rows if r["flat_significant"] or r["cum_significant"]
    ]


def test_more_load_is_no_finding(store) -> None:
    """30% more requests, the same code: no row changes (shares, the default)."""
    assert _significant(_compare(store, "load")) == []


def test_more_load_is_no_increase_per_request_but_one_per_second(store) -> None:
    """Per request no function got costlier. The recording's processes did serve
    a request about 6% cheaper at the higher rate (main.handle's cum), and some
    functions show that as a decrease; per second every handler is up."""
    per_request = _significant(_compare(store, "load", per=PER))
    assert not [s for s in per_request if s[1] == "increase"], per_request
    per_second = dict(_significant(_compare(store, "load", measure="rate")))
    work = ("main.ownWork", "main.otherWork", "main.shiftX", "main.shiftY", "main.viaB")
    assert all(per_second.get(f) == "increase" for f in work), per_second


@pytest.mark.slow
@pytest.mark.parametrize(("measure", "per"), [("share", None), ("rate", None), ("rate", PER)])
@pytest.mark.parametrize("instance", ["base", "busy"])
def test_aa_random_window_splits_are_quiet(store, instance, measure, per) -> None:
    """100 random 8/8 splits of one version's 16 windows: at most 5 have any
    significant row, on the quiet machine and beside 3 busy-looping processes."""
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store.select import Selection

    assert len(_ids_of(store, instance)) == 16
    alarms = 0
    for a, b in regdata.aa_splits(store, instance, 100):
        res = regressions(
            store,
            Selection(profile_ids=a),
            Selection(profile_ids=b),
            per=per,
            measure=measure,
            test=TEST,
        )
        sig = res.rows.column("flat_significant").to_numpy()
        sig = sig | res.rows.column("cum_significant").to_numpy()
        alarms += bool(sig.any())
    assert alarms <= 5, alarms


def _share_of(planted: float, share_before: float) -> float:
    """The change of a share that a function's planted change ``planted`` makes,
    the function holding ``share_before`` of the total."""
    return (1 + planted) / (1 + planted * share_before) - 1


def test_transient_went_away(store) -> None:
    """main.ownWork +30% in window 6 alone: the first finding, gone in window 7."""
    from pyproflab.analyses.regressions.over_time import over_time
    from pyproflab.store.select import Selection

    window, planted = regdata.OVER_TIME["transient"]
    res = over_time(store, Selection(service="regprog-transient"))
    first = res.findings().to_pylist()[0]
    assert first["label"] == "main.ownWork" and first["window"] == window, first
    assert first["status"] == "went away" and first["until_window"] == window + 1, first
    size = _share_of(planted, first["rate_before"])
    assert first["rel_lo"] <= size <= first["rel_hi"], (size, first)


def test_step_found_within_one_window(store) -> None:
    """main.ownWork +15% from window 8 on: the first finding, within a window of 8."""
    from pyproflab.analyses.regressions.over_time import over_time
    from pyproflab.store.select import Selection

    window, planted = regdata.OVER_TIME["step"]
    res = over_time(store, Selection(service="regprog-step"))
    first = res.findings().to_pylist()[0]
    assert first["label"] == "main.ownWork" and abs(first["window"] - window) <= 1, first
    assert first["status"] == "persisted", first
    size = _share_of(planted, first["rate_before"])
    assert first["rel_lo"] <= size <= first["rel_hi"], (size, first)


def test_cli_over_time_per_request(tmp_path, capsys) -> None:
    import json
    from datetime import datetime

    from pyproflab.cli import main

    regdata.store_of(tmp_path / "step.duckdb", ["step"]).close()
    argv = ["regressions", "--db", str(tmp_path / "step.duckdb"), "--over-time"]
    rc = main([*argv, "--service", "regprog-step", "--per", PER, "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(doc["windows"]) == 16 and doc["per"] == PER
    # Times as every JSON report writes them: ISO 8601.
    start = doc["windows"][0]["start"]
    assert datetime.fromisoformat(start).tzinfo is not None and "T" in start
    rc = main([*argv, "--service", "regprog-step", "--base", "version=v1"])
    assert rc == 2 and "drop --base/--new" in capsys.readouterr().err
    rc = main(argv)
    assert rc == 2 and "needs --service" in capsys.readouterr().err
    rc = main([*argv, "--service", "regprog-step", "--per", "nosuch"])  # a mistyped counter
    err = capsys.readouterr().err
    assert rc == 2 and "counter 'nosuch' (--per, per=): no metric samples" in err
