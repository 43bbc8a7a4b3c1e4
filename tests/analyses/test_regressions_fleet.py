"""Acceptance of ``regressions`` on the demo fleet, on one recorded live run.

tests/support/fleet_regressions.py runs the fleet (two notesd instances on v1, two
on v2, which plants about +30% CPU in ``fleet_harness.PLANTED_FUNCTION``), takes
16 rounds of CPU profiles from all four, and states the claims; it recorded one
run in tests/testdata/fleet_regressions. A live run is sampled and can miss a
claim by chance, so `make bench` measures the claims live and this test checks
them on the recording, where the answer is fixed:

1. v1 vs v2 ranks the planted function first and significant (by shares), and
   the planted size per second lies inside its 99% interval of relative change
   in CPU cores (by rates).
2. A/A: v1's rounds split in two at random 20 times: at most one split has a
   significant regression.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from support.fleet_regressions import (
    ROUNDS,
    Recording,
    aa_noisy_splits,
    ingest,
    planted_claim,
    v1_rounds,
)

RECORDED = Path(__file__).resolve().parents[1] / "testdata" / "fleet_regressions"


@pytest.fixture(scope="module")
def fleet_store(tmp_path_factory: pytest.TempPathFactory):
    from support.fleet_harness import PLANTED_FUNCTION

    rec = Recording.load(RECORDED)
    store = ingest(rec, tmp_path_factory.mktemp("fleet") / "fleet.duckdb")
    yield store, PLANTED_FUNCTION, rec.served_ratio
    store.close()


def test_recording_is_complete(fleet_store) -> None:
    store, *_ = fleet_store
    assert len(v1_rounds(store)) == ROUNDS
    n = store.sql("SELECT version, count(*) AS n FROM profiles GROUP BY version ORDER BY 1")
    assert n.to_pylist() == [{"version": "v1", "n": 2 * ROUNDS}, {"version": "v2", "n": 2 * ROUNDS}]


def test_planted_function_first(fleet_store) -> None:
    store, planted, served_ratio = fleet_store
    c = planted_claim(store, planted, served_ratio)
    print(f"\n{c}")
    assert c.top_name == planted and c.top_significant, c
    assert c.contained, c
    assert c.rate_rank <= 3, c


def test_aa_splits(fleet_store) -> None:
    store, *_ = fleet_store
    noisy = aa_noisy_splits(store)
    assert len(noisy) <= 1, f"splits with a significant regression: {noisy}"


@pytest.mark.parametrize("test", ["quasi-poisson", "permutation"])
def test_intervals_agree_with_the_selection(fleet_store, test) -> None:
    """Each selected (significant) row has an FCR interval of its relative change at
    1 - R q / m that leaves out 0 (for the quasi-Poisson test by construction, for
    the permutation test on this recording); no other row has one. The unadjusted
    interval of a row that is not selected may leave out 0: it is labelled so."""
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store.select import Selection

    store, planted, _ = fleet_store
    r = regressions(store, Selection(version="v1"), Selection(version="v2"), test=test)
    rows = r.rows.to_pylist()
    selected = [(x, m) for x in rows for m in ("flat", "cum") if x[f"{m}_significant"]]
    tests = sum(x[f"{m}_tested"] for x in rows for m in ("flat", "cum"))
    assert selected and any(x["name"] == planted for x, _ in selected)
    assert r.fcr_confidence == pytest.approx(1 - len(selected) * r.fdr / tests)
    for x, m in selected:
        lo, hi = x[f"{m}_rel_fcr_lo"], x[f"{m}_rel_fcr_hi"]
        assert lo <= x[f"{m}_rel"] <= hi
        assert lo > 0 or hi < 0, (x["label"], m, lo, hi)
    others = [x[f"{m}_rel_fcr_lo"] for x in rows for m in ("flat", "cum")]
    assert sum(not math.isnan(v) for v in others) == len(selected)


def test_example_job_finds_the_demo_plant(tmp_path) -> None:
    """examples/job.toml, as shipped (only its store and output moved into a
    temporary folder, its PGO and GOGC sections off: they do not decide the
    exit code), on the recorded fleet: one finding, the planted function, and
    exit code 1."""
    import dataclasses
    from datetime import UTC, datetime, timedelta

    from support.fleet_harness import PLANTED_FUNCTION

    from pyproflab.jobs import load_job
    from pyproflab.jobs.runner import run_job

    spec = load_job(Path(__file__).resolve().parents[2] / "examples" / "job.toml")
    (tmp_path / "incoming").mkdir()
    spec = dataclasses.replace(
        spec,
        store=str(tmp_path / "fleet.duckdb"),
        output=str(tmp_path / "out"),
        sources=[
            dataclasses.replace(
                spec.sources[0],
                options={**spec.sources[0].options, "path": str(tmp_path / "incoming")},
            )
        ],
        pgo=None,
        gogc=None,
    )
    store = ingest(Recording.load(RECORDED), Path(spec.store))
    last = store.sql("SELECT max(time_nanos) AS t FROM profiles").column("t")[0].as_py()
    store.close()
    # Retention keeps 30 days: run the job as of just after the recording.
    res = run_job(spec, now=datetime.fromtimestamp(last / 1e9, UTC) + timedelta(minutes=5))
    item = res.summary["regressions"][0]
    names = [f["name"] for f in item["findings"]]
    assert res.exit_code == 1 and names[:1] == [PLANTED_FUNCTION], (res.line, item)
    assert (item["base"], item["new"]) == ("v1", "v2")
