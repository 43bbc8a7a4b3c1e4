"""Ingest: content ids, profile types, atomic batches, files, sidecars, templates."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from support.profile_builders import HEADER_FIELDS
from support.store_helpers import canonical, check_ids, label, make_profile
from support.testenv import CORPUS, SKIP_NO_CORPUS

import pyproflab.store.ingest as ingest_mod
from pyproflab.keying import ids
from pyproflab.keying.profile_types import infer_profile_type
from pyproflab.model import ValueType
from pyproflab.store import Store
from pyproflab.store.ingest import (
    ProfileMeta,
    compile_template,
    ingest,
    ingest_paths,
)

CPU_GZ = CORPUS / "parca/pkg/query/testdata/profile1.pb.gz"
HEAP_GZ = CORPUS / "pyroscope/pkg/og/convert/pprof/testdata/heap.pb.gz"
HEAP_RAW = CORPUS / "pyroscope/pkg/og/convert/pprof/testdata/heap.pb"
LABELS_GZ = CORPUS / "pyroscope/pkg/og/convert/pprof/testdata/cpu-exemplars.pb.gz"

needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_NO_CORPUS)


@pytest.fixture
def store():
    with Store.open(":memory:") as s:
        yield s


# --- ids -----------------------------------------------------------------------------


# Ids are stored in every store: they must never change across runs, platforms,
# numpy or DuckDB releases. If one of these fails, stores already written would
# no longer dedup against new ingests: do not "fix" the constant.
PINNED_FUNCTION_ID = 0xBB83C85BDE1A3FCA
PINNED_STACK_ID = 0x95E3E079F13070B3
PINNED_LABEL_SET_ID = 0x8E5AEA44402F24C7
PINNED_MAPPING_ID = 0x92D85A6A8B3A62C9


def test_ids_are_pinned() -> None:
    p = make_profile([(["main.work"], [1, 10])])
    assert (
        int(ids.function_ids(p.functions)[0])
        == ids._function_id("main.work", "main.work", "main.go", 10)
        == PINNED_FUNCTION_ID
    )
    assert (
        int(
            ids.mapping_ids(
                p.mappings.set_column(2, "memory_limit", pa.array([8192], pa.uint64())).set_column(
                    1, "memory_start", pa.array([4096], pa.uint64())
                )
            )[0]
        )
        == PINNED_MAPPING_ID
    )
    assert (
        int(ids.stack_ids(np.array([1, 2, 3], dtype=np.uint64), np.array([0, 3]))[0])
        == PINNED_STACK_ID
    )
    canon = ids.canonical_labels([label("k", "v"), label("n", 3, "bytes")])
    assert ids.label_set_id(canon) == PINNED_LABEL_SET_ID
    assert ids.label_set_id([]) == 0


def test_stack_ids_vectorized_match_one_by_one() -> None:
    rng = np.random.default_rng(7)
    lists = [
        list(rng.integers(1, 2**63, size=int(n), dtype=np.uint64))
        for n in rng.integers(0, 12, size=300)
    ]
    lists += [lists[5], lists[5][::-1], []]
    flat = np.array([x for lst in lists for x in lst], dtype=np.uint64)
    offsets = np.cumsum([0] + [len(lst) for lst in lists])
    together = ids.stack_ids(flat, offsets)
    alone = [
        int(ids.stack_ids(np.array(lst, dtype=np.uint64), np.array([0, len(lst)]))[0])
        for lst in lists
    ]
    assert [int(x) for x in together] == alone
    assert alone[-3] == alone[5]
    if lists[5] != lists[5][::-1]:
        assert alone[-2] != alone[5]
    assert len(set(alone[:300])) == len({tuple(lst) for lst in lists[:300]})
    assert 0 not in alone


def test_ids_ignore_the_profiles_own_ids(store: Store) -> None:
    rows = [(["main.leaf", "main.mid", "main.main"], [1, 10]), (["main.mid", "main.main"], [2, 20])]
    a = make_profile(rows, id_base=1)
    b = make_profile(rows, id_base=50, time_nanos=1)  # other ids and header: another profile
    ingest(store, [(a, ProfileMeta())])
    before = store.counts()
    ingest(store, [(b, ProfileMeta())])
    after = store.counts()
    assert after["profiles"] == 2 and after["samples"] == 4
    for t in ("stacks", "locations", "functions", "mappings"):
        assert after[t] == before[t], t


def test_label_sets_are_canonical(store: Store) -> None:
    x = [label("region", "eu"), label("bytes", 5, "bytes"), label("span", "1")]
    y = [label("span", "1"), label("bytes", 5, "bytes"), label("region", "eu")]
    p = make_profile([(["main.a"], [1, 1], x), (["main.a"], [1, 1], y), (["main.a"], [1, 1])])
    ingest(store, [(p, ProfileMeta())])
    t = store.sql("SELECT label_set_id, count(*) AS n FROM samples GROUP BY 1 ORDER BY 1")
    assert t.to_pylist()[0] == {"label_set_id": 0, "n": 1}
    assert t.num_rows == 2 and t.column("n").to_pylist()[1] == 2
    stored = store.sql("SELECT labels FROM label_sets").column(0).to_pylist()[0]
    assert [lb["key"] for lb in stored] == ["region", "span", "bytes"]  # strings, then numbers


# --- profile types ---------------------------------------------------------------------


def vts(*names: str) -> list[ValueType]:
    return [ValueType(*n.split("/")) for n in names]


HEAP4 = vts("alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes")


@pytest.mark.parametrize(
    ("types", "period", "kwargs", "expected"),
    [
        (vts("samples/count", "cpu/nanoseconds"), ValueType("cpu", "nanoseconds"), {}, "cpu"),
        (HEAP4, ValueType("space", "bytes"), {}, "heap"),
        (HEAP4, ValueType("space", "bytes"), {"default_sample_type": "inuse_space"}, "heap"),
        (HEAP4, ValueType("space", "bytes"), {"default_sample_type": "alloc_space"}, "allocs"),
        (vts("goroutine/count"), ValueType("goroutine", "count"), {}, "goroutine"),
        (vts("threadcreate/count"), ValueType("threadcreate", "count"), {}, "threadcreate"),
        (
            vts("contentions/count", "delay/nanoseconds"),
            ValueType("contentions", "count"),
            {"hint": "/x/mutex.pb.gz"},
            "mutex",
        ),
        (
            vts("contentions/count", "delay/nanoseconds"),
            ValueType("contentions", "count"),
            {"hint": "block"},
            "block",
        ),
        (
            vts("contentions/count", "delay/nanoseconds"),
            ValueType("contentions", "count"),
            {"leaf_functions": ["sync.(*Mutex).Unlock"]},
            "mutex",
        ),
        (
            vts("contentions/count", "delay/nanoseconds"),
            ValueType("contentions", "count"),
            {"leaf_functions": ["runtime.chanrecv1"]},
            "block",
        ),
        (vts("samples/count", "wall/microseconds"), ValueType("wall", "microseconds"), {}, "wall"),
        (
            vts("samples/count", "time/nanoseconds"),
            ValueType("wallclock", "nanoseconds"),
            {},
            "wall",
        ),
        (vts("samples/count"), ValueType("", "milliseconds"), {}, "other"),
        ([("samples", "count"), ("cpu", "nanoseconds")], ("cpu", "nanoseconds"), {}, "cpu"),
    ],
)
def test_infer_profile_type(types, period, kwargs, expected) -> None:
    assert infer_profile_type(types, period, **kwargs) == expected


@needs_corpus
def test_profile_types_of_corpus_files(store: Store) -> None:
    files = {
        "cpu": CPU_GZ,
        "heap": HEAP_GZ,
        "allocs": CORPUS / "parca/pkg/parca/testdata/alloc_objects.pb.gz",
        "block": CORPUS / "dd-trace-go/profiler/internal/fastdelta/testdata/block.after.pprof",
        "wall": CORPUS / "pyroscope/pkg/og/convert/pprof/testdata/nodejs-wall.pb.gz",
    }
    report = ingest_paths(store, list(files.values()))
    assert report.new == len(files) and not report.refused
    got = {
        r["source"]: r["profile_type"]
        for r in store.sql("SELECT source, profile_type FROM profiles").to_pylist()
    }
    assert {str(Path(k).resolve()) for k in got} == {str(p.resolve()) for p in files.values()}
    for kind, path in files.items():
        assert got[str(path.resolve())] == kind, path


# --- one transaction per batch -------------------------------------------------------


def test_failed_batch_leaves_store_exactly_as_before(store: Store, monkeypatch) -> None:
    ingest(store, [(make_profile([(["main.a", "main.main"], [1, 10])]), ProfileMeta())])
    before = store.counts()

    def boom(*args, **kwargs):
        raise RuntimeError("disk on fire")

    # Fails after the dedup tables and samples were written, before profiles.
    monkeypatch.setattr(ingest_mod, "_insert_profiles", boom)
    batch = [
        (make_profile([(["main.b", f"main.f{i}"], [i, 10])], time_nanos=i), ProfileMeta())
        for i in range(1, 4)
    ]
    with pytest.raises(RuntimeError, match="disk on fire"):
        ingest(store, batch)
    assert store.counts() == before
    monkeypatch.undo()
    report = ingest(store, batch)
    assert report.new == 3 and store.counts()["profiles"] == before["profiles"] + 3


def test_in_memory_profile_round_trip(store: Store) -> None:
    rows = [
        (["main.leaf", "main.mid", "main.main"], [1, 10], [label("k", "v")]),
        (["main.mid", "main.main"], [2, 20]),
        (["main.leaf", "main.mid", "main.main"], [3, 30]),  # same stack, no labels
        (["main.leaf", "main.mid", "main.main"], [4, 40], [label("k", "v")]),  # not merged
    ]
    p = make_profile(rows, comments=["hello"], default_sample_type="cpu")
    r1 = ingest(store, [(p, ProfileMeta(service="api", labels={"region": "eu"}))])
    r2 = ingest(store, [(p, ProfileMeta(service="other"))])
    assert (r1.new, r1.present, r2.new, r2.present) == (1, 0, 0, 1)
    back = store.profile(r1.profile_ids[0])
    check_ids(back)
    assert canonical(back, merge=False) == canonical(p, merge=False)  # file order kept
    for attr in HEADER_FIELDS:
        assert getattr(back, attr) == getattr(p, attr), attr
    meta = store.profiles().to_pylist(maps_as_pydicts="strict")[0]
    assert meta["service"] == "api" and meta["labels"] == {"region": "eu"}
    assert meta["profile_type"] == "cpu" and meta["num_samples"] == 4


# --- from files -------------------------------------------------------------------------


@needs_corpus
def test_gzipped_and_raw_are_one_profile(store: Store, tmp_path: Path) -> None:
    raw = tmp_path / "cpu.pb"
    raw.write_bytes(gzip.decompress(CPU_GZ.read_bytes()))
    regz = tmp_path / "cpu-again.pb.gz"
    regz.write_bytes(gzip.compress(raw.read_bytes(), compresslevel=1))
    report = ingest_paths(store, [CPU_GZ, raw, regz])
    assert (report.new, report.present, report.refused) == (1, 2, [])
    assert store.counts()["profiles"] == 1
    again = ingest_paths(store, [raw])
    assert again.summary() == "0 new, 1 already present, 0 refused"


@needs_corpus
def test_corpus_heap_gz_and_raw_copies(store: Store) -> None:
    report = ingest_paths(store, [HEAP_GZ, HEAP_RAW])
    assert (report.new, report.present) == (1, 1)


@needs_corpus
def test_bad_files_are_refused_and_others_stored(store: Store, tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(CPU_GZ, d / "a.pb.gz")
    (d / "b.pb.gz").write_bytes(b"\x1f\x8b" + b"garbage" * 10)
    (d / "c.txt").write_text("hello\n")
    (d / "empty").write_bytes(b"")
    (d / ".hidden").write_bytes(b"x")
    calls: list[tuple[int, int]] = []
    report = ingest_paths(
        store,
        [d, tmp_path / "nope.pb.gz", str(tmp_path / "zz*.pb")],
        progress=lambda done, total: calls.append((done, total)),
    )
    assert report.new == 1
    refused = dict(report.refused)
    assert set(refused) == {
        str(d / "b.pb.gz"),
        str(d / "c.txt"),
        str(d / "empty"),
        str(tmp_path / "nope.pb.gz"),
        str(tmp_path / "zz*.pb"),
    }
    assert all(reason and "\n" not in reason for reason in refused.values())
    assert calls and calls[-1] == (4, 4)
    assert store.counts()["profiles"] == 1


@needs_corpus
def test_max_bytes_refuses(store: Store) -> None:
    report = ingest_paths(store, [CPU_GZ], max_bytes=1000)
    assert report.new == 0 and len(report.refused) == 1
    assert store.counts()["profiles"] == 0


@needs_corpus
def test_sidecar_and_template(store: Store, tmp_path: Path) -> None:
    base = tmp_path / "api" / "v1.2" / "pod-7"
    base.mkdir(parents=True)
    shutil.copy(CPU_GZ, base / "cpu-20261101T1000.pb.gz")
    shutil.copy(LABELS_GZ, base / "cpu-20261101T1100.pb.gz")
    (base / "cpu-20261101T1100.pb.gz.json").write_text(
        json.dumps({"instance": "pod-7b", "labels": {"region": "eu"}})
    )
    report = ingest_paths(
        store,
        [tmp_path],
        ProfileMeta(service="default", labels={"team": "x"}),
        path_template="{service}/{version}/{instance}/{type}-{time}.pb.gz",
    )
    assert (report.new, report.refused) == (2, [])
    rows = store.sql(
        "SELECT service, version, instance, labels FROM profiles ORDER BY instance"
    ).to_pylist(maps_as_pydicts="strict")
    assert rows == [
        {"service": "api", "version": "v1.2", "instance": "pod-7", "labels": {"team": "x"}},
        {
            "service": "api",
            "version": "v1.2",
            "instance": "pod-7b",
            "labels": {"team": "x", "region": "eu"},
        },
    ]


def test_template_regex() -> None:
    rx = compile_template("{service}/{version}/{type}-{time}.pb.gz")
    m = rx.search("/data/api/v1/cpu-2026-11-01T10:00.pb.gz")
    assert m and m.groupdict() == {
        "service": "api",
        "version": "v1",
        "type": "cpu",
        "time": "2026-11-01T10:00",
    }
    assert rx.search("api/cpu-1.pb.gz") is None  # too few folders
    assert rx.search("/a/b/cpu.pb.gz") is None  # no "-" for {type}-{time}


@needs_corpus
def test_template_mismatch_and_bad_sidecar_refuse(store: Store, tmp_path: Path) -> None:
    shutil.copy(CPU_GZ, tmp_path / "x.pb.gz")
    report = ingest_paths(store, [tmp_path / "x.pb.gz"], path_template="{service}/{type}.pprof")
    assert report.new == 0 and "template" in report.refused[0][1]
    (tmp_path / "x.pb.gz.json").write_text("{not json")
    report = ingest_paths(store, [tmp_path / "x.pb.gz"])
    assert report.new == 0 and "sidecar" in report.refused[0][1]
    assert store.counts()["profiles"] == 0


def test_sidecar_values_are_strings_or_numbers(tmp_path: Path) -> None:
    from pyproflab.keying.paths import sidecar_meta

    side = tmp_path / "x.pb.gz.json"
    side.write_text('{"service": "api", "version": 2, "labels": {"zone": "a", "shard": 7}}')
    meta = sidecar_meta(str(tmp_path / "x.pb.gz"))
    assert meta == {"service": "api", "version": "2", "labels": {"zone": "a", "shard": "7"}}
    # str() would have stored "['x']", "None" and "True" as the values.
    bad = {
        '{"version": ["x"]}': 'version must be a string or a number, not ["x"]',
        '{"labels": {"b": null}}': "label 'b' must be a string or a number, not null",
        '{"instance": true}': "instance must be a string or a number, not true",
        # 1e400 is JSON's infinity: str() stored it as "inf".
        '{"service": 1e400}': "service must be a finite number, not inf",
        '{"labels": {"x": -1e400}}': "label 'x' must be a finite number, not -inf",
        "[" * 100_000 + "]" * 100_000: "not JSON we read (nested too deeply)",
        # In UTC, past datetime's years: the store's conversion raised OverflowError.
        '{"window_start": "9999-12-31T23:59:59-01:00"}': "bad window_start '9999-12-31T23",
        '{"window_end": "0001-01-01T00:00:00+01:00"}': "bad window_end '0001-01-01T00",
    }
    for doc, why in bad.items():
        side.write_text(doc)
        with pytest.raises(ValueError, match=re.escape(f"sidecar {side}: {why}")):
            sidecar_meta(str(tmp_path / "x.pb.gz"))


@needs_corpus
def test_labels_profile_round_trip(store: Store) -> None:
    from pyproflab.decode import read_profile

    report = ingest_paths(store, [LABELS_GZ])
    original = read_profile(LABELS_GZ)
    back = store.profile(report.profile_ids[0])
    check_ids(back)
    assert canonical(back, merge=False) == canonical(original, merge=False)
    assert store.counts()["label_sets"] > 1


def test_an_interrupted_ingest_says_how_many_it_stored(tmp_path):
    """Ctrl-C (or SIGTERM) mid-ingest printed "pyproflab: interrupted" alone,
    though the batches before it were committed (24 of 247 files' profiles in a
    store after Ctrl-C at 3 s): the user could not tell what the store now held.
    The interrupt says how many new profiles were stored, as a store error does."""
    src = Path(__file__).parents[1] / "testdata" / "fleet_regressions"
    files = sorted(src.glob("*.pb.gz"))[:6]
    seen = []

    def stop_at_three(done: int, total: int) -> None:
        seen.append(done)
        if done == 3:
            raise KeyboardInterrupt

    with Store.open(tmp_path / "s.duckdb") as s:
        with pytest.raises(KeyboardInterrupt) as got:
            ingest_paths(s, files, progress=stop_at_three, batch_size=1, workers=1)
        stored = s.sql("SELECT count(*) FROM profiles").column(0)[0].as_py()
    assert seen[-1] == 3 and stored == 3
    assert str(got.value) == (
        "3 new profiles of the 6 files were stored before it (each batch whole): "
        "ingest again to add the rest"
    )
