"""Selections, and merged_profile against pprof's merge rules and `go tool pprof -proto`."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.profile_builders import HEADER_FIELDS
from support.store_helpers import canonical, check_ids, label, make_profile
from support.testenv import CORPUS, SKIP_NO_CORPUS

from pyproflab.errors import StoreError, UsageError
from pyproflab.model import ValueType
from pyproflab.store import Selection, Store
from pyproflab.store.ingest import ProfileMeta, ingest, ingest_paths
from pyproflab.store.select import parse_time

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def test_parse_time() -> None:
    assert parse_time("72h", now=NOW) == NOW - timedelta(hours=72)
    # The help texts say "72h ago"; typed as written, it was "bad time '72h ago'".
    assert (
        parse_time("72h ago", now=NOW)
        == parse_time(" 72h  ago ", now=NOW)
        == NOW - timedelta(hours=72)
    )
    assert parse_time("30m", now=NOW) == NOW - timedelta(minutes=30)
    assert parse_time("7d", now=NOW) == NOW - timedelta(days=7)
    assert parse_time("2026-11-01T10:00") == datetime(2026, 11, 1, 10, tzinfo=UTC)
    assert parse_time("2026-11-01T10:00+01:00") == datetime(2026, 11, 1, 9, tzinfo=UTC)
    assert parse_time(datetime(2026, 1, 1)) == datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(UsageError, match="bad time"):
        parse_time("yesterday-ish")
    # Past datetime's years once in UTC (OverflowError from astimezone).
    for late in ("9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"):
        with pytest.raises(UsageError, match=re.escape(f"bad time '{late}': in UTC it passes")):
            parse_time(late)


def test_from_kv() -> None:
    sel = Selection.from_kv(
        ["version=v1", "region=eu", "type=cpu", "service=a", "service=b", "since=1h"]
    )
    assert sel.version == "v1" and sel.profile_type == "cpu" and sel.service == ["a", "b"]
    assert sel.labels == {"region": "eu"} and sel.since == "1h"
    with pytest.raises(UsageError, match="selection expects KEY=VALUE"):
        Selection.from_kv(["oops"])


def test_from_kv_names_its_flag_and_a_bare_version() -> None:
    # `regressions --base v1` said "selection expects KEY=VALUE, got 'v1'":
    # neither the option nor how to select a version.
    with pytest.raises(UsageError) as e:
        Selection.from_kv(["v1"], "--base")
    assert str(e.value) == "--base expects KEY=VALUE, got 'v1' (a version: --base version=v1)"
    with pytest.raises(UsageError) as e:
        Selection.from_kv(["=x"], "--new")
    assert str(e.value) == "--new expects KEY=VALUE, got '=x'"


def test_where_binds_everything() -> None:
    where, params = Selection(
        service="x'--", labels={"k": "v"}, profile_ids=[1, 2], until="2026-01-01"
    ).where()
    assert "x'--" not in where and params[0] == "x'--"
    assert where.count("?") == len(params)
    assert Selection().where() == ("TRUE", [])


@pytest.fixture
def fleet():
    """Six CPU profiles: 2 services x 3 instances, an hour apart, labels by region."""
    with Store.open(":memory:") as store:
        base = int(datetime(2026, 11, 1, 10, tzinfo=UTC).timestamp()) * 10**9
        items = []
        for i in range(6):
            p = make_profile(
                [
                    (["main.work", "main.main"], [1, 10 * (i + 1)]),
                    ([f"main.f{i % 2}", "main.main"], [2, 5]),
                ],
                time_nanos=base + i * 3600 * 10**9,
            )
            meta = ProfileMeta(
                service="api" if i < 3 else "db",
                version=f"v{i % 2}",
                instance=f"pod-{i}",
                labels={"region": "eu" if i % 3 else "us"},
            )
            items.append((p, meta))
        ingest(store, items)
        yield store


@pytest.mark.parametrize(
    ("sel", "expected"),
    [
        (Selection(), [1, 2, 3, 4, 5, 6]),
        (Selection(service="api"), [1, 2, 3]),
        (Selection(service=["api", "db"], version="v1"), [2, 4, 6]),
        (Selection(instance="pod-4"), [5]),
        (Selection(labels={"region": "us"}), [1, 4]),
        (Selection(since="2026-11-01T12:00"), [3, 4, 5, 6]),
        (Selection(since="2026-11-01T11:00", until="2026-11-01T13:00"), [2, 3]),
        (Selection(profile_ids=[2, 5, 99]), [2, 5]),
        (Selection(profile_type="heap"), []),
        (Selection(since="1h"), []),
    ],
)
def test_profiles_selection(fleet: Store, sel: Selection, expected: list[int]) -> None:
    assert fleet.profiles(sel).column("profile_id").to_pylist() == expected


def test_merged_profile_sums_by_stack_and_labels(fleet: Store) -> None:
    m = fleet.merged_profile(Selection(service="api"))
    check_ids(m)
    got = canonical(m)
    sums = {tuple(f for _, _, lines in key[0] for f, _ in lines): v for key, v in got.items()}
    assert sums == {
        ("main.work", "main.main"): (3, 60),
        ("main.f0", "main.main"): (4, 10),
        ("main.f1", "main.main"): (2, 5),
    }
    assert m.duration_nanos == 3 * 10**9
    assert m.time_nanos == fleet.profiles(Selection(service="api")).column("time_nanos")[0].as_py()


def test_empty_selection_raises(fleet: Store) -> None:
    with pytest.raises(StoreError, match="no profiles match service=nope"):
        fleet.merged_profile(Selection(service="nope"))


def test_merge_header_rules() -> None:
    """pprof's combineHeaders after CompatibilizeSampleTypes."""
    with Store.open(":memory:") as store:
        a = make_profile(
            [(["main.a"], [1, 10, 100])],
            period=5,
            time_nanos=40,  # taken first: the first profile of the merge
            sample_types=[
                ValueType("samples", "count"),
                ValueType("cpu", "nanoseconds"),
                ValueType("extra", "count"),
            ],
            comments=["x", "y"],
        )
        b = make_profile(
            [(["main.a"], [20, 2]), (["main.b"], [0, 0])],
            period=9,
            time_nanos=50,
            sample_types=[ValueType("cpu", "nanoseconds"), ValueType("samples", "count")],
            comments=["y", "z"],
            default_sample_type="cpu",
        )
        ingest(store, [(b, ProfileMeta()), (a, ProfileMeta())])  # by time, not by id
        m = store.merged_profile()
        assert m.sample_types == [ValueType("samples", "count"), ValueType("cpu", "nanoseconds")]
        assert m.period == 9 and m.time_nanos == 40 and m.duration_nanos == 2 * 10**9
        assert m.comments == ["x", "y", "z"]
        assert m.default_sample_type == "samples"  # a was rewritten by compatibilize
        assert canonical(m, merge=False)[0][1] == (3, 30)
        assert m.num_samples == 1  # the all-zero sample is dropped
        only = store.merged_profile(sample_types=["cpu"])
        assert only.sample_types == [ValueType("cpu", "nanoseconds")]
        with pytest.raises(StoreError, match="extra"):
            store.merged_profile(sample_types=["extra"])
        c = make_profile([(["main.a"], [1, 1])], period_type=ValueType("space", "bytes"))
        ingest(store, [(c, ProfileMeta())])
        with pytest.raises(StoreError, match="period types"):
            store.merged_profile()


def test_merge_keeps_labels_apart() -> None:
    with Store.open(":memory:") as store:
        rows = [
            (["main.a"], [1, 1], [label("r", "eu")]),
            (["main.a"], [1, 1]),
            (["main.a"], [1, 1], [label("r", "eu")]),
        ]
        ingest(store, [(make_profile(rows), ProfileMeta())])
        m = store.merged_profile()
        assert sorted(v for _, v in canonical(m).items()) == [(1, 1), (2, 2)]


# --- against go tool pprof -------------------------------------------------------------

MANY = CORPUS / "parca/pkg/query/testdata/many"
CPU_FILES = [
    CORPUS / "google-pprof/internal/proftest/testdata/large.cpu",
    CORPUS / "pyroscope/pkg/pprof/testdata/gotruncatefix/cpu_go_truncated_1.pb.gz",
    CORPUS / "pyroscope/pkg/og/convert/pprof/testdata/cpu-exemplars.pb.gz",
    CORPUS / "parca/pkg/query/testdata/profile-with-labels.pb.gz",
]


@pytest.mark.corpus
@pytest.mark.parametrize(
    "files",
    [
        pytest.param(lambda: sorted(MANY.glob("*.pb.gz")), id="parca-many-heap"),
        pytest.param(lambda: CPU_FILES, id="cpu-mixed-types-labels"),
    ],
)
def test_merged_profile_equals_pprof_merge(files, pprof, tmp_path: Path) -> None:
    from support import pprof_oracle as oracle

    from pyproflab.decode import read_profile

    if not CORPUS.is_dir():
        pytest.skip(SKIP_NO_CORPUS)
    paths = files()
    with Store.open(":memory:") as store:
        ingest_paths(store, paths)
        ours = store.merged_profile()
    theirs = read_profile(oracle.merge_proto(paths, tmp_path / "merged.pb.gz"))
    check_ids(ours)
    for attr in HEADER_FIELDS:
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert canonical(ours) == canonical(theirs)
    assert ours.num_samples == theirs.num_samples


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"service": 5}, r"service=5: expected a string or a list of strings"),
        ({"version": ["v1", 2]}, r"version=\['v1', 2\]: expected a string or a list"),
        ({"labels": "team=x"}, r"labels='team=x': expected a dict"),
        ({"since": 5}, r"since=5: expected a datetime, an ISO time"),
    ],
)
def test_selection_refuses_wrong_types(kwargs: dict, message: str) -> None:
    # They failed later: AttributeError 'str' object has no attribute 'items',
    # TypeError 'int' object is not iterable.
    with pytest.raises(UsageError, match=message):
        Selection(**kwargs).where()


def test_selection_of() -> None:
    sel = Selection(version="v1")
    assert Selection.of(sel) is sel
    assert Selection.of({"version": "v1"}) == sel
    assert Selection.of(None) == Selection()
    with pytest.raises(UsageError, match=r"^base='v1': expected a Selection or a dict"):
        Selection.of("v1", "base")
    with pytest.raises(UsageError, match=r"^new: unknown key 'verison' \(keys: service, "):
        Selection.of({"verison": "v1"}, "new")


def test_window_ending_before_it_starts_is_refused(fleet: Store) -> None:
    with pytest.raises(UsageError, match=r"^until='2h' is before since='1h' .* ends before"):
        Selection(since="1h", until="2h").where(now=NOW)
    with pytest.raises(UsageError, match="ends before it starts"):
        fleet.profiles(Selection(since="2026-11-01T13:00", until="2026-11-01T11:00"))
    assert Selection(since="2h", until="1h").where(now=NOW)[1] == [
        NOW - timedelta(hours=2),
        NOW - timedelta(hours=1),
    ]


@pytest.mark.parametrize("sub_us", [999_999_999, 999_999_500, 1_999])
def test_a_profile_taken_just_before_an_instant_stays_before_it(sub_us: int) -> None:
    # time_nanos / 1e9 as a float, rounded to the microsecond, stored a profile taken
    # at 07:59:59.999999999 as 08:00:00: --until 08:00 left it out and --since 08:00
    # took it, though it was taken before 08:00.
    at = datetime(2026, 11, 1, 8, tzinfo=UTC)
    taken = (int(at.timestamp()) - 1) * 10**9 + sub_us
    with Store.open(":memory:") as store:
        p = make_profile([(["main.f"], [1, 1])], time_nanos=taken)
        ingest(store, [(p, ProfileMeta(service="s", instance="i"))])
        stored = store.profiles(Selection()).column("time")[0].as_py()
        before = store.profiles(Selection(until="2026-11-01T08:00Z"))
        after = store.profiles(Selection(since="2026-11-01T08:00Z"))
    assert stored == at - timedelta(seconds=1) + timedelta(microseconds=sub_us // 1000)
    assert (before.num_rows, after.num_rows) == (1, 0)
