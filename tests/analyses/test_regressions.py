"""``regressions``: statistics, equality with ``go tool pprof -diff_base``, renderings, CLI.

Data: real Go CPU and heap profiles written by profgen (the ``go_profiles``
fixture), and synthetic fleets derived from them: each derived profile
redraws every sample's count from a Poisson law around the real profile's
mix at a few busy cores, with its own duration and load; on the "new" side
one function's leaf samples are scaled by 1.3 (the planted regression).
The demo-fleet acceptance is in test_regressions_fleet.py.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from support import pprof_oracle as oracle
from support.store_helpers import make_profile

PLANT = 1.3


# --- synthetic fleets -----------------------------------------------------------------


def _leaf_names(p) -> list[str]:
    fn = dict(
        zip(
            p.functions.column("id").to_pylist(),
            p.functions.column("name").to_pylist(),
            strict=True,
        )
    )
    locs = {r["id"]: r["lines"] for r in p.locations.to_pylist()}
    out = []
    for ids in p.samples.column("location_ids").to_pylist():
        lines = locs[ids[0]] if ids else []
        out.append(fn.get(lines[0]["function_id"], "") if lines else "")
    return out


def synth(
    template,
    rng: np.random.Generator,
    number: int,
    *,
    planted: str | None = None,
    factor: float = 1.0,
    cores: float = 4.0,
    seconds: float = 10.0,
    load: float = 1.0,
):
    """A profile with ``template``'s stacks: counts ~ Poisson(mix x cores x 100 Hz x duration),
    leaf samples of ``planted`` scaled by ``factor``; duration 0.6-1.4 x ``seconds``."""
    from pyproflab import schema

    counts = np.array([v[0] for v in template.samples.column("values").to_pylist()], float)
    mult = np.ones(len(counts))
    if planted:
        mult[np.array([n == planted for n in _leaf_names(template)])] = factor
    f = rng.uniform(0.6, 1.4)
    expected = counts / counts.sum() * cores * 100 * seconds * f * load * rng.lognormal(0, 0.05)
    drawn = rng.poisson(expected * mult)
    keep = np.flatnonzero(drawn > 0)
    sub = template.samples.take(pa.array(keep))
    vals = [[int(c), int(c) * template.period] for c in drawn[keep]]
    field = schema.PROFILE_SAMPLES.field("values")
    sub = sub.set_column(sub.schema.get_field_index("values"), field, pa.array(vals, field.type))
    return dataclasses.replace(
        template,
        samples=sub,
        duration_nanos=int(seconds * f * 1e9),
        time_nanos=template.time_nanos + number * 60_000_000_000,
        comments=[f"synthetic #{number}"],
    )


@pytest.fixture(scope="module")
def cpu_template(go_profiles):
    from pyproflab import read_profile

    return read_profile(go_profiles["cpu2"])


@pytest.fixture(scope="module")
def planted_name(cpu_template) -> str:
    """A main.* function with real flat time (not the hottest one), to slow down."""
    from pyproflab.analyses.top import top

    rows = top(cpu_template, sample_index="cpu").rows.to_pylist()
    mains = [r["name"] for r in rows if r["name"].startswith("main.") and r["flat"] > 0]
    assert len(mains) >= 2, rows
    return mains[1]


def _ingest(db, items) -> None:
    from pyproflab.store import Store
    from pyproflab.store.ingest import ProfileMeta, ingest

    with Store.open(db) as store:
        ingest(
            store,
            [
                (p, ProfileMeta(service="svc", version=v, instance=i, profile_type="cpu"))
                for p, v, i in items
            ],
        )


def planted_fleet(db: Path, template, planted_name: str, seed: int) -> Path:
    """v1: 12 profiles; v2: 9 profiles with the planted +30%."""
    rng = np.random.default_rng(seed)
    items = [(synth(template, rng, i), "v1", f"a{i}") for i in range(12)]
    items += [
        (synth(template, rng, 100 + i, planted=planted_name, factor=PLANT), "v2", f"b{i}")
        for i in range(9)
    ]
    _ingest(db, items)
    return db


@pytest.fixture(scope="module")
def planted_db(tmp_path_factory, cpu_template, planted_name) -> Path:
    return planted_fleet(
        tmp_path_factory.mktemp("regr") / "planted.duckdb", cpu_template, planted_name, 1
    )


# --- acceptance (synthetic): planted first, A/A quiet ------------------------------------


def test_interval_covers_the_planted_change(cpu_template, planted_name, tmp_path) -> None:
    """The 95% interval of the planted function's rate change holds the true +30% in at
    least 32 of 40 independent fleets. One fleet alone would miss it one time in twenty
    by construction. Measured coverage is about 93% (112 of 120 fleets over two
    templates); at 92% this test fails 0.4% of the time (binomial), while an interval
    covering 60% of the time fails it almost surely."""
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    covered = []
    for seed in range(40):
        db = planted_fleet(tmp_path / f"fleet{seed}.duckdb", cpu_template, planted_name, 100 + seed)
        with Store.open(db, read_only=True) as store:
            r = regressions(store, Selection(version="v1"), Selection(version="v2"), measure="rate")
        row = next(x for x in r.rows.to_pylist() if x["name"] == planted_name)
        covered.append(row["flat_rel_lo"] <= PLANT - 1 <= row["flat_rel_hi"])
    print(f"95% interval holds +30%: {sum(covered)} of {len(covered)} fleets")
    assert sum(covered) >= 32, covered


def test_planted_regression_first_and_significant(planted_db, planted_name) -> None:
    from pyproflab.analyses import stats
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    with Store.open(planted_db, read_only=True) as store:
        r = regressions(store, Selection(version="v1"), Selection(version="v2"), measure="rate")
    first = r.rows.slice(0, 1).to_pylist()[0]
    assert first["name"] == planted_name, r.to_pandas().head().to_string()
    assert first["flat_significant"] and first["flat_q"] <= 0.05
    assert first["flat_change_lo"] > 0
    assert r.statistics and r.rate and r.rate_unit == "cores"
    # One BH family: flat and cum of every tested node (the table flags both).
    d = r.to_pandas()
    q = stats.bh_adjust(np.concatenate([d.flat_p.to_numpy(), d.cum_p.to_numpy()]))
    np.testing.assert_allclose(q, np.concatenate([d.flat_q, d.cum_q]), equal_nan=True)
    assert d.flat_q.count() > 0 and d.cum_q.count() > 0
    assert (d.flat_significant == (d.flat_q <= 0.05)).all()
    assert (r.n_base, r.n_new) == (12, 9)
    with Store.open(planted_db, read_only=True) as store:
        shares = regressions(
            store, Selection(version="v1"), Selection(version="v2"), measure="share", resamples=300
        )
    first_share = shares.rows.slice(0, 1).to_pylist()[0]
    assert first_share["name"] == planted_name and first_share["flat_significant"]
    assert shares.rate_unit == "share" and 0 < first_share["flat_rate_new"] < 1
    # Nothing else in the top ten is significant (the rest of the mix is unchanged).
    others = r.rows.slice(1, 9).column("flat_significant").to_pylist()
    assert sum(others) <= 1, r.to_pandas().head(10).to_string()


def fixed_template():
    """A fixed CPU profile shape (so the A/A outcome does not depend on what profgen's
    sampling caught this session): 40 stacks over a small call tree, Zipf-like counts."""
    rng = np.random.default_rng(11)
    rows = []
    for i in range(40):
        depth = 2 + i % 4
        stack = (
            [f"main.f{i}"]
            + [f"main.g{(i * 7 + d) % 9}" for d in range(depth)]
            + ["main.main", "runtime.main"]
        )
        count = int(1000 / (i + 1)) + int(rng.integers(1, 5))
        rows.append((stack, [count, count * 10_000_000]))
    return make_profile(rows, duration_nanos=10_000_000_000)


def test_aa_random_instance_splits_are_quiet(tmp_path) -> None:
    """A/A: one version's instances split in two at random, 20 times (instances as units).

    8 + 8 instances: with 6 + 6 a permutation p-value cannot go below 2/924, and after
    the FDR correction no lone function could be significant (the A/A could not fail)."""
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    cpu_template = fixed_template()
    rng = np.random.default_rng(2)
    db = tmp_path / "aa.duckdb"
    # 16 instances x 3 profiles; each instance has its own load level.
    loads = rng.lognormal(0, 0.1, size=16)
    _ingest(
        db,
        [(synth(cpu_template, rng, i, load=loads[i // 3]), "v1", f"i{i // 3}") for i in range(48)],
    )
    noisy = []
    with Store.open(db, read_only=True) as store:
        for k in range(20):
            inst = np.random.default_rng(100 + k).permutation(16)
            a = [f"i{j}" for j in inst[:8]]
            b = [f"i{j}" for j in inst[8:]]
            r = regressions(
                store,
                Selection(instance=a),
                Selection(instance=b),
                unit="instance",
                resamples=400,
                seed=k,
            )
            d = r.to_pandas()
            assert r.n_units_base == r.n_units_new == 8
            assert not any("significant only alongside" in n for n in r.notes), r.notes
            if d.flat_significant.any() or d.cum_significant.any():
                noisy.append(k)
    assert len(noisy) <= 1, f"A/A splits with a significant change: {noisy}"


def test_time_windows_group_profiles_taken_together() -> None:
    from pyproflab.analyses.regressions import time_windows
    from pyproflab.errors import UsageError

    s = 1_000_000_000
    rows = [
        {"profile_id": i + 1, "time_nanos": 1000 * s + t, "duration_nanos": d}
        for i, (t, d) in enumerate(
            [
                (100 * s, 10 * s),
                (0, 10 * s),
                (int(0.3 * s), 10 * s),
                (4 * s, 10 * s),
                (5 * s, 10 * s),
                (100 * s + 1, 10 * s),
                (200 * s, 0),
            ]
        )
    ]
    # 0 and 0.3 s start the first window; 4 s is before its half (5 s), 5 s is not.
    assert time_windows(rows) == [2, 0, 0, 0, 1, 2, 3]
    rows[3]["time_nanos"] = 0  # pprof's "not set"
    with pytest.raises(UsageError, match="profile 4 has none"):
        time_windows(rows)


def test_window_units_are_collection_rounds(tmp_path, cpu_template) -> None:
    """unit="window" sums the profiles of each round (two instances at once) into one
    unit: the same statistics as naming each round's profiles as one instance."""
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    rng = np.random.default_rng(8)
    t0 = cpu_template.time_nanos
    by_window, by_label = [], []
    for r in range(12):
        for k, inst in enumerate(("a", "b")):
            p = synth(cpu_template, rng, 2 * r + k, load=rng.lognormal(0, 0.2))
            p = dataclasses.replace(p, time_nanos=t0 + r * 60_000_000_000 + k * 300_000_000)
            version = "v1" if r % 2 else "v2"
            by_window.append((p, version, inst))
            by_label.append((p, version, f"round{r}"))
    _ingest(tmp_path / "w.duckdb", by_window)
    _ingest(tmp_path / "l.duckdb", by_label)
    got = {}
    for name, unit in (("w", "window"), ("l", "instance")):
        with Store.open(tmp_path / f"{name}.duckdb", read_only=True) as store:
            got[name] = regressions(
                store, Selection(version="v1"), Selection(version="v2"), unit=unit, seed=3
            )
    w, lab = got["w"], got["l"]
    assert (w.n_units_base, w.n_units_new, w.n_base) == (6, 6, 12)
    assert "windows" in " ".join(w.notes)
    for col in ("flat_rate_new", "cum_rate_base", "flat_change_lo", "flat_p", "cum_q"):
        np.testing.assert_allclose(
            w.rows.column(col).to_numpy(zero_copy_only=False),
            lab.rows.column(col).to_numpy(zero_copy_only=False),
            equal_nan=True,
        )


# --- acceptance: equality with go tool pprof -diff_base -------------------------------


def _diff_equal(
    pprof,
    tmp_path: Path,
    db: Path,
    *,
    sample_index: str,
    unit: str,
    lines: bool = False,
    base_version: str = "v1",
    new_version: str = "v2",
) -> None:
    from pyproflab.analyses.regressions import regressions
    from pyproflab.encode import write_profile
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    base, new = Selection(version=base_version), Selection(version=new_version)
    with Store.open(db, read_only=True) as store:
        r = regressions(
            store,
            base,
            new,
            sample_index=sample_index,
            granularity="lines" if lines else "functions",
            resamples=100,
        )
        write_profile(store.merged_profile(base), tmp_path / "base.pb.gz")
        write_profile(store.merged_profile(new), tmp_path / "new.pb.gz")
    report = oracle.diff_top(
        tmp_path / "new.pb.gz",
        base=tmp_path / "base.pb.gz",
        sample_index=sample_index,
        unit=unit,
        lines=lines,
    )
    theirs = sorted((row.label, row.flat, row.cum) for row in report.rows)
    ours = sorted(
        (r_["label"], r_["flat_diff"], r_["cum_diff"])
        for r_ in r.rows.to_pylist()
        if r_["flat_diff"] or r_["cum_diff"]
    )
    assert ours == theirs
    assert report.total == r.total_base


@pytest.mark.parametrize("lines", [False, True], ids=["functions", "lines"])
def test_equals_pprof_diff_base_cpu(pprof, tmp_path, planted_db, lines) -> None:
    _diff_equal(pprof, tmp_path, planted_db, sample_index="cpu", unit="nanoseconds", lines=lines)


def test_equals_pprof_diff_base_heap(pprof, tmp_path, go_profiles) -> None:
    """Two real profiles per side (heap and allocs of one run; inuse_space is not a rate)."""
    import sys

    from pyproflab import read_profile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from support.gen_profiles import derive

    rng = __import__("random").Random(3)
    heap = read_profile(go_profiles["heap"])
    items = [(derive(heap, rng, i), "v1" if i < 2 else "v2", f"h{i}") for i in range(5)]
    db = tmp_path / "heap.duckdb"
    from pyproflab.store import Store
    from pyproflab.store.ingest import ProfileMeta, ingest

    with Store.open(db) as store:
        ingest(store, [(p, ProfileMeta(version=v, instance=i)) for p, v, i in items])
    _diff_equal(pprof, tmp_path, db, sample_index="alloc_space", unit="bytes")
    _diff_equal(pprof, tmp_path, db, sample_index="inuse_space", unit="bytes")


# --- behaviour ------------------------------------------------------------------------


def _tiny(db: Path, base_rows, new_rows, **kw) -> None:
    from pyproflab.store import Store
    from pyproflab.store.ingest import ProfileMeta, ingest

    with Store.open(db) as store:
        ingest(
            store,
            [
                (make_profile(rows, **kw), ProfileMeta(version=v, instance=f"{v}{i}"))
                for v, side in (("v1", base_rows), ("v2", new_rows))
                for i, rows in enumerate(side)
            ],
        )


def test_one_profile_per_side_is_the_plain_diff(tmp_path) -> None:
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    db = tmp_path / "one.duckdb"
    _tiny(
        db,
        [[(["main.a", "main.main"], [10, 100]), (["main.b", "main.main"], [5, 50])]],
        [[(["main.a", "main.main"], [20, 200]), (["main.b", "main.main"], [5, 50])]],
    )
    with Store.open(db, read_only=True) as store:
        r = regressions(store, Selection(version="v1"), Selection(version="v2"), measure="rate")
    assert not r.statistics
    assert any("no statistics are possible" in n for n in r.notes)
    rows = {x["label"]: x for x in r.rows.to_pylist()}
    assert rows["main.a"]["flat_diff"] == 100 and rows["main.a"]["rank"] == 1
    assert rows["main.main"]["cum_diff"] == 100 and rows["main.main"]["flat_diff"] == 0
    assert rows["main.a"]["flat_change"] == pytest.approx(100 / 1e9)  # cores over 1 s
    assert all(np.isnan(x["flat_p"]) and not x["flat_significant"] for x in rows.values())
    assert np.isnan(rows["main.a"]["flat_change_lo"])


def test_distribution_lists_base_then_new(tmp_path) -> None:
    """Notebook 02's strip chart of ``distribution`` read "new | base" left to right: the
    sides are computed new first. The base side's profiles come first, in the result's
    profile order, then the new side's."""
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    db = tmp_path / "two.duckdb"

    def side(n: int, a: int) -> list:
        return [
            [(["main.a", "main.main"], [a + i, 100]), (["main.b", "main.main"], [5, 50])]
            for i in range(n)
        ]

    _tiny(db, side(2, 10), side(3, 20))  # no two alike: equal profiles are stored once
    with Store.open(db, read_only=True) as store:
        r = regressions(store, Selection(version="v1"), Selection(version="v2"))
    d = r.distribution("main.a")
    assert d.column("side").to_pylist() == ["base"] * 2 + ["new"] * 3
    order = r.profiles.column("profile_id").to_pylist()
    for s in ("base", "new"):
        pairs = zip(d["profile_id"].to_pylist(), d["side"].to_pylist(), strict=True)
        ids = [p for p, x in pairs if x == s]
        assert ids == sorted(ids, key=order.index)


def test_unequal_durations_are_rates(tmp_path) -> None:
    """Same rate, different durations and counts: no change."""
    from pyproflab.analyses.regressions import regressions_of_profiles

    def mk(v, d):
        return make_profile([(["main.a", "main.main"], [v, v * 10])], duration_nanos=d)

    base = [mk(10, 1_000_000_000), mk(20, 2_000_000_000), mk(11, 1_000_000_000)]
    new = [mk(40, 4_000_000_000), mk(9, 1_000_000_000)]
    r = regressions_of_profiles(base, new, measure="rate")
    row = {x["label"]: x for x in r.rows.to_pylist()}["main.a"]
    assert row["flat_rate_base"] == pytest.approx(410 / 4 / 1e9)
    assert row["flat_rate_new"] == pytest.approx(490 / 5 / 1e9)
    assert not row["flat_significant"]
    assert r.duration_base == pytest.approx(4.0) and r.duration_new == pytest.approx(5.0)


def test_share_leaves_out_empty_profiles_and_says_so() -> None:
    """A profile with no samples has no shares: share mode leaves it out with a
    note (a live fleet's last window can be empty) and compares the rest."""
    from pyproflab.analyses.regressions import regressions_of_profiles
    from pyproflab.errors import UsageError

    def mk(a):
        return make_profile([(["main.a", "main.main"], [a, a * 10]), (["main.b"], [50, 500])])

    empty = make_profile([])
    full = regressions_of_profiles([mk(10), mk(11), mk(12)], [mk(20), mk(22)], measure="share")
    r = regressions_of_profiles(
        [mk(10), empty, mk(11), mk(12)], [mk(20), mk(22), empty], measure="share"
    )
    assert any("left out 1 base and 1 new profiles with no samples" in n for n in r.notes)
    assert (r.n_base, r.n_new) == (3, 2)
    assert r.rows.column("label").to_pylist() == full.rows.column("label").to_pylist()
    for key in ("flat_rate_base", "flat_rate_new", "flat_p"):
        got, want = r.rows.column(key).to_pylist(), full.rows.column(key).to_pylist()
        assert got == pytest.approx(want, nan_ok=True)
    with pytest.raises(UsageError, match="every profile of the new side is empty"):
        regressions_of_profiles([mk(10), mk(11)], [empty, empty], measure="share")


def test_non_rate_types_say_so(go_profiles) -> None:
    from pyproflab import read_profile
    from pyproflab.analyses.regressions import regressions_of_profiles

    heap = read_profile(go_profiles["heap"])
    r = regressions_of_profiles(
        [heap, heap], [heap, heap], sample_index="inuse_space", measure="rate"
    )
    assert not r.rate and r.rate_unit == "B"
    assert any("per-profile value" in n for n in r.notes)
    assert not r.rows.column("flat_significant").to_pylist().count(True)
    assert set(r.rows.column("flat_diff").to_pylist()) == {0}


def test_selections_must_match_and_be_disjoint(tmp_path) -> None:
    from pyproflab.analyses.regressions import regressions
    from pyproflab.errors import UsageError
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    db = tmp_path / "e.duckdb"
    _tiny(db, [[(["main.a"], [1, 10])]], [[(["main.a"], [2, 20])]])
    with Store.open(db, read_only=True) as store:
        with pytest.raises(UsageError, match="no profiles match the base"):
            regressions(store, Selection(version="nope"), Selection(version="v2"))
        with pytest.raises(UsageError, match="in both"):
            regressions(store, Selection(), Selection(version="v2"))


# --- stats helpers ----------------------------------------------------------------------


def test_stats_helpers() -> None:
    from pyproflab.analyses import stats

    p = stats.t_two_sided_p(np.array([2.0, 0.0, np.inf, 2.228]), np.array([10, 5, 3, 10]))
    assert p[0] == pytest.approx(0.07339, abs=1e-4)
    assert p[1] == 1.0 and p[2] == 0.0 and p[3] == pytest.approx(0.05, abs=1e-3)
    q = stats.bh_adjust(np.array([0.01, 0.04, 0.03, np.nan, 0.5]))
    assert q[:3] == pytest.approx([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3]) and np.isnan(q[3])
    v = np.array([[1.0], [2.0], [3.0]])
    assert stats.ratio_variance(v, np.ones(3))[0] == pytest.approx(np.var([1, 2, 3], ddof=1) / 3)


def test_permutation_p_is_exact_and_seeded() -> None:
    """Exact p equals a brute-force count over every split; random splits are close to
    it and repeat with the seed."""
    import itertools

    from pyproflab.analyses import stats

    rng = np.random.default_rng(5)
    values = rng.poisson(6, size=(9, 7)).astype(float)
    values[:4, 0] += 8  # a real difference in column 0
    durations = rng.uniform(5, 15, size=9)
    values *= durations[:, None] / 10
    is_new = np.zeros(9, bool)
    is_new[:4] = True
    p, splits, exact = stats.permutation_p(values, durations, is_new, 500, rng)
    assert exact and splits == 126

    def t_of(mask):
        a, b = values[mask], values[~mask]
        da, db = durations[mask], durations[~mask]
        t, _ = stats.welch_t(
            a.sum(0) / da.sum() - b.sum(0) / db.sum(),
            stats.ratio_variance(a, da),
            stats.ratio_variance(b, db),
            len(a),
            len(b),
        )
        return np.abs(t)

    t_obs = t_of(is_new)
    ge = np.zeros(values.shape[1])
    for combo in itertools.combinations(range(9), 4):
        mask = np.zeros(9, bool)
        mask[list(combo)] = True
        ge += t_of(mask) >= t_obs * (1 - 1e-9)
    np.testing.assert_allclose(p, ge / 126)
    assert p[0] <= 2 / 126
    p_mc, b, exact = stats.permutation_p(values, durations, is_new, 100, np.random.default_rng(1))
    assert not exact and b == 100
    assert np.abs(p_mc - p).max() < 0.15
    again, _, _ = stats.permutation_p(values, durations, is_new, 100, np.random.default_rng(1))
    np.testing.assert_array_equal(p_mc, again)


def test_permutation_p_holds_its_level_where_welch_does_not() -> None:
    """Per-unit values with two modes (a window with one more GC cycle than the next):
    with 5 + 5 units Welch's t from Student's t claims p <= 1e-3 several times too often;
    the permutation test never goes below its level."""
    from pyproflab.analyses import stats

    rng = np.random.default_rng(3)
    n, m = 10, 20_000
    values = np.where(rng.random((n, m)) < 0.5, 13.0, 20.0) + rng.normal(0, 1.5, (n, m))
    durations = np.ones(n)
    is_new = np.arange(n) >= 5
    a, b = values[is_new], values[~is_new]
    t, df = stats.welch_t(
        a.mean(0) - b.mean(0),
        stats.ratio_variance(a, durations[is_new]),
        stats.ratio_variance(b, durations[~is_new]),
        5,
        5,
    )
    welch = stats.t_two_sided_p(t, df)
    perm, splits, exact = stats.permutation_p(values, durations, is_new, 10_000, rng)
    assert exact and splits == 252
    assert np.mean(welch <= 1e-3) > 1.5e-3  # measured: about 2e-3
    assert perm.min() >= 2 / 252  # the smallest p of 252 mirrored splits
    for level in (0.05, 0.1, 0.2):
        # Binomial sd at m = 20,000 is at most 0.0029; exactness allows <= level.
        assert np.mean(perm <= level) <= level + 0.01, level


# --- renderings, figures, escaping, CLI -------------------------------------------------

EVIL = '<img src=x onerror="alert(1)">&'


@pytest.fixture(scope="module")
def evil_result():
    from pyproflab.analyses.regressions import regressions_of_profiles

    def mk(v):
        return make_profile(
            [([EVIL, "main.main"], [v, v * 10]), (["main.b", "main.main"], [5, 50])]
        )

    return regressions_of_profiles(
        [mk(10), mk(12), mk(11)], [mk(20), mk(22), mk(21)], resamples=200
    )


def test_renderings(evil_result) -> None:
    from pyproflab.reports import render

    text = render(evil_result, "text")
    # The default measure: shares, in percent; their changes in percentage points.
    assert "Type: cpu as share of the profiles' totals" in text and EVIL in text
    assert re.search(r"\+\d+(\.\d+)? pp ", text) and "totals: " in text
    doc = json.loads(render(evil_result, "json"))
    assert doc["rows"][0]["label"] == EVIL and doc["statistics"] is True
    assert doc["rows"][0]["flat_diff"] == 300
    csv_text = render(evil_result, "csv", top=1)
    assert csv_text.splitlines()[0].startswith("rank,name,")
    assert len(csv_text.splitlines()) == 2
    html_text = evil_result._repr_html_()
    assert EVIL not in html_text and "&lt;img src=x" in html_text
    assert "<img" not in render(evil_result, "html")
    df = evil_result.to_pandas()
    assert list(df.columns) == evil_result.to_arrow().column_names


def test_figures_escape_names(evil_result) -> None:
    pytest.importorskip("plotly")
    top = evil_result.figure_top()
    blob = top.to_json()
    # Escaped for plotly's pseudo-HTML: no tag survives; quotes stay as they
    # are (plotly would show "&quot;" literally).
    assert "<img" not in blob and "&lt;img" in blob and "&quot;" not in blob
    flame = evil_result.figure_flame()  # our flame graph: names as data, drawn as text
    assert EVIL in flame.data["names"]
    page = flame.html()
    assert "<img" not in page and "\\u003cimg" in page
    # Width from the new side: the root carries the whole new total; differential.
    assert flame.data["diff"] and flame.data["nodes"][0][2] == evil_result.total_new


def test_cli(planted_db, planted_name, capsys) -> None:
    from pyproflab.cli import main

    rc = main(
        [
            "regressions",
            "--db",
            str(planted_db),
            "--base",
            "version=v1",
            "--new",
            "version=v2",
            "--type",
            "cpu",
            "--format",
            "json",
            "--top",
            "3",
            "--resamples",
            "300",
        ]
    )
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rows"][0]["name"] == planted_name and len(doc["rows"]) == 3
    assert doc["base"]["profiles"] == 12 and doc["new"]["profiles"] == 9
    assert doc["test"] == "quasi-poisson" and doc["permutations"] == 0  # the default: no splits
    common = ["regressions", "--db", str(planted_db), "--base", "version=v1", "--new"]
    # Profiles a minute apart: each is its own window.
    rc = main(
        [
            *common,
            "version=v2",
            "--unit",
            "window",
            "--test",
            "permutation",
            "--permutations",
            "500",
            "--format",
            "json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and (doc["base"]["units"], doc["new"]["units"]) == (12, 9)
    assert doc["unit"] == "window" and doc["permutations"] == 500
    rc = main([*common, "version=v2", "--test", "welch", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["test"] == "welch" and doc["rows"][0]["flat_significant"]
    assert 0 < doc["rows"][0]["flat_change_lo"] < doc["rows"][0]["flat_change_hi"]
    rc = main([*common, "version=v2", "--permutations", "5"])
    assert rc == 2 and "permutations: must be a whole number >= 100" in capsys.readouterr().err
    rc = main(
        [
            "regressions",
            "--db",
            str(planted_db),
            "--base",
            "version=v1",
            "--new",
            "version=v2",
            "--granularity",
            "lines",
            "--resamples",
            "200",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "Ranked by evidence" in out
    rc = main(
        ["regressions", "--db", str(planted_db), "--base", "version=v1", "--new", "version=v9"]
    )
    assert rc == 2 and "no profiles match the new selection" in capsys.readouterr().err


def test_measure_auto_is_share_or_rate_per_work() -> None:
    """auto: shares, or rates when a work counter is given; share with a counter is
    refused (a share has no denominator to replace)."""
    from pyproflab.analyses.regressions import regressions_of_profiles
    from pyproflab.analyses.regressions.measure import resolve_measure
    from pyproflab.errors import UsageError

    assert resolve_measure("auto", None) == "share"
    assert resolve_measure("auto", "requests_total") == "rate"
    assert resolve_measure("rate", None) == "rate"
    with pytest.raises(UsageError, match="needs measure=rate or auto"):
        resolve_measure("share", "requests_total")
    with pytest.raises(UsageError, match="measure must be one of"):
        resolve_measure("cores", None)

    def mk(a, b, d):
        return make_profile(
            [(["main.a", "main.main"], [a, a * 10]), (["main.b"], [b, b * 10])], duration_nanos=d
        )

    # Twice the window and twice every value: as shares nothing moved; the totals'
    # note gives the unchanged rate per second.
    base = [mk(10, 50, 10**9), mk(12, 50, 10**9)]
    r = regressions_of_profiles(base, [mk(20, 100, 2 * 10**9), mk(24, 100, 2 * 10**9)])
    assert r.measure == "share" and r.rate_unit == "share"
    row = {x["label"]: x for x in r.rows.to_pylist()}["main.a"]
    assert row["flat_rate_base"] == pytest.approx(22 / 122)
    assert row["flat_rate_new"] == pytest.approx(44 / 244)
    assert not row["flat_significant"]
    assert any(n.startswith("totals: ") and "+0.0%" in n for n in r.notes), r.notes


def test_min_share_above_every_node_says_nothing_was_tested(planted_db) -> None:
    """A --min-share no node reaches leaves nothing to test: the note says so and how
    to change it (it printed 'detectable ... at level FDR/0')."""
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    with Store.open(planted_db, read_only=True) as store:
        r = regressions(store, Selection(version="v1"), Selection(version="v2"), min_share=1.0)
    notes = " | ".join(r.notes)
    assert "FDR/0" not in notes, notes
    assert "no node has >= 100.00% of the pooled total, so nothing was tested" in notes, notes
    assert not any(r.rows.column("flat_significant").to_pylist())
