"""A damaged store (issue 35, finding 8): a block whose checksum no longer
matches stops every command that reads it with one line naming the store, exit
2; ``report`` never exits 0 with its sections skipped for it, and writes no
file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.store_helpers import make_profile

from pyproflab.cli import main
from pyproflab.errors import StoreIOError
from pyproflab.store import Store
from pyproflab.store.ingest import ProfileMeta, ingest

NAME = "main.aVeryDistinctiveFunctionNameToDamage0123456789"


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("damaged") / "good.duckdb"
    with Store.open(str(db)) as s:
        ingest(
            s,
            [
                (
                    make_profile([([NAME, "main.main"], [5, 50])], time_nanos=(i + 1) * 10**15),
                    ProfileMeta(service="svc", instance=f"i{i}"),
                )
                for i in range(3)
            ],
        )
    return db


@pytest.fixture
def damaged(good: Path, tmp_path: Path) -> Path:
    """The store with 8 bytes of the block holding the function names overwritten
    (DuckDB keeps a checksum per block: the whole block no longer reads)."""
    db = Path(shutil.copy(good, tmp_path / "bad.duckdb"))
    data = bytearray(db.read_bytes())
    at = data.find(NAME.encode())
    assert at > 0, "the name is stored as is (uncompressed) in a block"
    data[at : at + 8] = b"XXXXXXXX"
    db.write_bytes(bytes(data))
    return db


def _one_line(capsys, db: Path) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert str(db) in err[0] and "checksum" in err[0]
    return err[0]


def test_report_of_a_damaged_store_is_exit_2_and_writes_nothing(damaged, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", "--db", str(damaged), "-o", str(out)]) == 2
    _one_line(capsys, damaged)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.duckdb"]


def test_top_of_a_damaged_store_is_exit_2(damaged, capsys):
    assert main(["top", "--db", str(damaged), "--type", "cpu"]) == 2
    _one_line(capsys, damaged)


def test_the_store_error_says_it_comes_from_the_file(damaged):
    with Store.open(str(damaged), read_only=True) as s, pytest.raises(StoreIOError):
        s.sql("SELECT name FROM functions").to_pylist()


GCTRACE = Path(__file__).resolve().parents[1] / "testdata" / "gc" / "gctrace-go1.26.log"


def test_ingest_gc_into_a_store_damaged_where_it_does_not_read_is_exit_2(damaged, capsys):
    """ingest-gc reads and writes only the GC tables, never the damaged block of
    function names: the store is checked before anything is committed, so it
    stops with one line naming the store and adds no GC cycle."""
    argv = ["ingest-gc", str(GCTRACE), "--format", "gctrace", "--db", str(damaged)]
    assert main([*argv, "--service", "s", "--process-start", "2025-03-01T12:00:00Z"]) == 2
    _one_line(capsys, damaged)
    with Store.open(str(damaged), read_only=True) as s:
        assert s.sql("SELECT count(*) AS n FROM gc_cycles").to_pylist() == [{"n": 0}]


def test_ingest_gc_into_a_good_store_is_exit_0(good, tmp_path, capsys):
    db = Path(shutil.copy(good, tmp_path / "copy.duckdb"))
    argv = ["ingest-gc", str(GCTRACE), "--format", "gctrace", "--db", str(db)]
    assert main([*argv, "--service", "s", "--process-start", "2025-03-01T12:00:00Z"]) == 0
    assert "20 new" in capsys.readouterr().out
