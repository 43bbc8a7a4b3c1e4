"""Issue 17, finding 5: import verifies the dataset; export is whole or absent."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.store_helpers import make_profile

from pyproflab.errors import StoreError
from pyproflab.store import Store
from pyproflab.store.ingest import PARTIAL, ProfileMeta, ingest, ingest_paths
from pyproflab.store.parquet import export_parquet, import_parquet


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    with Store.open(":memory:") as s:
        for i in range(3):
            p = make_profile([(["main.a", "main.main"], [i + 1, 10])], time_nanos=(i + 1) * 10**18)
            ingest(s, [(p, ProfileMeta(service=f"svc{i}"))])
        export_parquet(s, tmp_path / "ds")
    return tmp_path / "ds"


def _import_count(d: Path) -> int:
    with Store.open(":memory:") as s:
        import_parquet(s, d)
        return s.counts()["profiles"]


def test_a_whole_dataset_imports(dataset: Path) -> None:
    assert _import_count(dataset) == 3


@pytest.mark.parametrize("victim", ["samples", "locations.parquet", "functions.parquet"])
def test_a_dataset_with_files_removed_is_refused(dataset: Path, victim: str) -> None:
    target = dataset / victim
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with Store.open(":memory:") as s:
        with pytest.raises(StoreError, match="is missing: the dataset is partial; refused"):
            import_parquet(s, dataset)
        assert s.counts()["profiles"] == 0


def test_an_altered_or_added_file_is_refused(dataset: Path) -> None:
    path = dataset / "functions.parquet"
    t = pq.read_table(path)
    pq.write_table(t.set_column(1, "name", pa.array(["evil"] * t.num_rows)), path)
    with pytest.raises(StoreError, match="functions.parquet differs from the export"):
        _import_count(dataset)


def test_an_added_file_is_refused(dataset: Path) -> None:
    shutil.copy(dataset / "functions.parquet", dataset / "extra.parquet")
    with pytest.raises(StoreError, match="extra.parquet is not in the dataset marker"):
        _import_count(dataset)


def test_a_killed_export_leaves_no_dataset_and_ingest_skips_it(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with Store.open(str(db)) as s:
        ingest(s, [(make_profile([(["main.a"], [1, 10])]), ProfileMeta(service="x"))])
    code = (
        "import os, sys\n"
        "import pyproflab.store.parquet as pp\n"
        "real = pp._manifest\n"
        "def die(d):\n"
        "    os._exit(9)  # killed after the tables, before the marker\n"
        "pp._manifest = die\n"
        "from pyproflab.store import Store\n"
        f"with Store.open({str(db)!r}) as s:\n"
        f"    pp.export_parquet(s, {str(tmp_path / 'out' / 'ds')!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], timeout=120)
    assert done.returncode == 9
    assert not (tmp_path / "out" / "ds").exists()
    partial = [p for p in (tmp_path / "out").iterdir()]
    assert len(partial) == 1 and (partial[0] / PARTIAL).is_file()
    with Store.open(":memory:") as s:
        report = ingest_paths(s, [tmp_path / "out"])
        assert report.new == 0 and report.refused == []  # hidden: never walked
        report = ingest_paths(s, [partial[0]])
        assert report.new == 0
        assert [r[1] for r in report.refused] == [
            "an interrupted Parquet export, not profiles; skipped"
        ]


def test_a_failed_export_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    import pyproflab.store.parquet as pp

    def boom(d):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pp, "_manifest", boom)
    with Store.open(":memory:") as s:
        ingest(s, [(make_profile([(["main.a"], [1, 10])]), ProfileMeta(service="x"))])
        with pytest.raises(StoreError, match="export failed, nothing written"):
            export_parquet(s, tmp_path / "ds")
    assert list(tmp_path.iterdir()) == []


def test_a_service_name_too_long_for_a_folder_exports_and_comes_back(tmp_path: Path) -> None:
    name = "é/" * 100  # 300 bytes, 900 once percent-encoded
    with Store.open(":memory:") as s:
        ingest(s, [(make_profile([(["main.a"], [1, 10])]), ProfileMeta(service=name))])
        export_parquet(s, tmp_path / "ds")
    with Store.open(":memory:") as s:
        import_parquet(s, tmp_path / "ds")
        assert s.sql("SELECT service FROM profiles").column(0).to_pylist() == [name]
