"""Parquet export and import: layout, round trip, idempotence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.store_helpers import canonical, label, make_profile
from support.testenv import CORPUS, SKIP_NO_CORPUS

from pyproflab.arrays import uninterned
from pyproflab.errors import StoreError
from pyproflab.store import Selection, Store
from pyproflab.store.ingest import DATASET_MARKER, ProfileMeta, ingest, ingest_paths
from pyproflab.store.parquet import export_parquet, import_parquet, is_dataset


def _fill(store: Store) -> None:
    items = []
    for i in range(4):
        rows = [
            (["main.work", "main.main"], [1, 10 * (i + 1)], [label("r", f"x{i % 2}")]),
            ([f"main.f{i}", "main.main"], [2, 5]),
        ]
        items.append(
            (
                make_profile(rows, time_nanos=(1_700_000_000 + 86400 * i) * 10**9),
                ProfileMeta(service=None if i == 3 else f"svc{i % 2}", labels={"k": str(i)}),
            )
        )
    ingest(store, items)
    if CORPUS.is_dir():
        ingest_paths(store, [CORPUS / "parca/pkg/query/testdata/many"], ProfileMeta(service="m"))


def test_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    with Store.open(":memory:") as a, Store.open(tmp_path / "b.duckdb") as b:
        _fill(a)
        summary = export_parquet(a, out)
        assert summary.counts == a.counts() and is_dataset(out)
        marker = json.loads((out / DATASET_MARKER).read_text())
        assert marker["format"] == "pyproflab-parquet"
        assert (out / "profiles" / "service=svc0").is_dir()
        assert (out / "samples" / "service=svc1").is_dir()
        assert (out / "functions.parquet").is_file()

        report = ingest_paths(b, [out])  # detected as a dataset by its marker
        assert (report.new, report.present) == (a.counts()["profiles"], 0)
        assert b.counts() == a.counts()
        again = import_parquet(b, out)
        assert (again.new, again.present) == (0, a.counts()["profiles"])
        assert b.counts() == a.counts()

        cols = [c for c in a.profiles().column_names if c != "ingested_at"]
        assert a.profiles().select(cols).equals(b.profiles().select(cols))
        for pid in a.profiles().column("profile_id").to_pylist():
            pa_, pb = a.profile(pid), b.profile(pid)
            assert uninterned(pa_.samples).equals(uninterned(pb.samples)) and pa_.locations.equals(
                pb.locations
            )
        for sel in (Selection(profile_type="cpu"), Selection(service="svc0")) + (
            (Selection(service="m"),) if CORPUS.is_dir() else ()
        ):
            ma, mb = a.merged_profile(sel), b.merged_profile(sel)
            assert canonical(ma) == canonical(mb)
            assert uninterned(ma.samples).equals(uninterned(mb.samples))


def test_import_into_store_with_some_profiles(tmp_path: Path) -> None:
    with Store.open(":memory:") as a, Store.open(":memory:") as b:
        _fill(a)
        export_parquet(a, tmp_path / "ds")
        ingest(b, [(make_profile([(["main.zzz"], [1, 1])]), ProfileMeta())])
        first = a.profile(1)
        ingest(b, [(first, ProfileMeta())])  # not the same bytes: a digest of the content
        report = import_parquet(b, tmp_path / "ds")
        assert report.new + report.present == a.counts()["profiles"]
        assert b.counts()["profiles"] == 2 + report.new


def test_export_refuses_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("hi")
    with Store.open(":memory:") as s, pytest.raises(StoreError, match="not an empty folder"):
        export_parquet(s, tmp_path)


def test_export_empty_store_and_import(tmp_path: Path) -> None:
    with Store.open(":memory:") as a, Store.open(":memory:") as b:
        export_parquet(a, tmp_path / "e")
        report = import_parquet(b, tmp_path / "e")
        assert (report.new, report.present) == (0, 0)


def test_not_a_dataset(tmp_path: Path) -> None:
    with Store.open(":memory:") as s, pytest.raises(StoreError, match="not a pyproflab"):
        import_parquet(s, tmp_path)


@pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_NO_CORPUS)
def test_export_from_read_only_store(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with Store.open(db) as s:
        _fill(s)
    with Store.open(db, read_only=True) as s:
        export_parquet(s, tmp_path / "ds")
    assert is_dataset(tmp_path / "ds")
