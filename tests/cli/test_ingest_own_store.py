"""``pyproflab ingest --db S.duckdb .`` walks past its own store: the store file
and what it keeps beside it (``Store.own_files``: ``.wal``, ``.lock``, DuckDB's
``.tmp`` spill folder) are no inputs, so they are neither read nor refused,
wherever they sit in the folder walked; any other file is still refused.
Before, each run listed the store, its WAL and its lock as 3 refused files.
Named outright, they are refused as the store's own (alone: one line, exit 2,
the store untouched), and a folder holding only them is not called empty."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pyproflab.cli import main
from pyproflab.keying.paths import expand_paths
from pyproflab.store import Store

GO = Path(__file__).parents[1] / "testdata" / "go"


def _folder(tmp_path: Path, store_at: str) -> tuple[Path, Path]:
    """A folder holding one profile, one file that is not a profile, and a store
    (at ``store_at`` inside it) with DuckDB's spill folder beside it."""
    top = tmp_path / "top"
    (top / "sub").mkdir(parents=True)
    shutil.copy(GO / "cpu.pb.gz", top / "cpu.pb.gz")
    (top / "notes.txt").write_text("not a profile\n")
    db = top / store_at
    Store.open(db).close()
    Path(f"{db}.tmp").mkdir()
    (Path(f"{db}.tmp") / "duckdb_temp_block-1.block").write_bytes(b"\x00" * 64)
    return top, db


@pytest.mark.parametrize("store_at", ["S.duckdb", "sub/S.duckdb"])
def test_ingest_of_the_folder_holding_the_store_reports_only_other_files(
    tmp_path, capsys, monkeypatch, store_at
):
    top, db = _folder(tmp_path, store_at)
    monkeypatch.chdir(top)
    assert main(["ingest", "--db", store_at, "--workers", "1", "."]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "1 new, 0 already present, 1 refused"
    assert [line.split(":")[0] for line in err.strip().splitlines()] == ["refused ./notes.txt"]
    with Store.open(db, read_only=True) as store:
        assert store.counts()["profiles"] == 1


@pytest.mark.parametrize("store_at", ["S.duckdb", "sub/S.duckdb"])
@pytest.mark.parametrize("how", ["relative", "absolute", "through a link"])
def test_the_walk_lists_no_file_of_the_store(tmp_path, monkeypatch, store_at, how):
    top, db = _folder(tmp_path, store_at)
    with Store.open(db) as store:
        skip = store.own_files()
    # What a killed writer leaves beside its store (an open store has them too).
    Path(f"{db}.wal").write_bytes(b"\x00" * 64)
    Path(f"{db}.lock").write_text("{}")
    walked = {"relative": ".", "absolute": str(top), "through a link": str(tmp_path / "link")}[how]
    (tmp_path / "link").symlink_to(top, target_is_directory=True)
    monkeypatch.chdir(top)
    files, datasets, refused = expand_paths([walked], skip=[os.path.relpath(s) for s in skip])
    assert sorted(Path(f).name for f in files) == ["cpu.pb.gz", "notes.txt"]
    assert (datasets, refused) == ([], [])
    # Without the store's files to skip, the walk lists them all (the check can fail).
    files, _, _ = expand_paths([walked])
    assert len(files) == 2 + 4  # the store, its WAL, its lock, and the spill folder's block


def test_the_store_named_outright_is_still_refused(tmp_path, capsys):
    top, db = _folder(tmp_path, "S.duckdb")
    assert main(["ingest", "--db", str(db), str(db), str(top / "cpu.pb.gz")]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "1 new, 0 already present, 1 refused"
    # Not "not a pprof profile (starts with byte 0x95)": true, but not why.
    assert err == f"refused {db}: the store's own file; ingest does not read its own store\n"


@pytest.mark.parametrize(
    "named, what",
    [(["S.duckdb"], "the store itself"), (["S.duckdb", "S.duckdb.wal"], "the store's own files")],
)
def test_the_store_named_alone_is_one_line_and_left_as_it_was(
    tmp_path, capsys, monkeypatch, named, what
):
    """Read, it was refused as 'not a pprof profile' under a summary (two lines)
    and the store file was rewritten by the open."""
    _, db = _folder(tmp_path, "S.duckdb")
    Path(f"{db}.wal").write_bytes(b"")  # a side file to name (DuckDB reads an empty one)
    monkeypatch.chdir(db.parent)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in db.parent.iterdir() if p.is_file()}
    assert main(["ingest", "--db", "S.duckdb", *named]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"pyproflab: error: {' '.join(named)}: {what} (--db S.duckdb); "
        "ingest does not read its own store; nothing stored\n"
    )
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in db.parent.iterdir() if p.is_file()}
    assert after == before


@pytest.mark.parametrize(
    "beside, why",
    [
        ([], "only the store itself, which ingest skips"),
        ([".keep", "x.json"], "only the store itself and hidden files or .json sidecars, which "
         "ingest skips"),
    ],
)  # fmt: skip
def test_a_folder_holding_only_the_store_is_not_called_empty(
    tmp_path, capsys, monkeypatch, beside, why
):
    """It said 'only: no profile files found (empty folder)'."""
    only = tmp_path / "only"
    only.mkdir()
    Store.open(only / "S.duckdb").close()
    for name in beside:
        (only / name).write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", "--db", "only/S.duckdb", "only"]) == 2
    assert capsys.readouterr().err == f"pyproflab: error: only: no profile files found ({why})\n"
    # A folder that holds nothing is still called empty (the check can tell them apart).
    (tmp_path / "empty").mkdir()
    assert main(["ingest", "--db", "only/S.duckdb", "empty"]) == 2
    assert capsys.readouterr().err == (
        "pyproflab: error: empty: no profile files found (empty folder)\n"
    )
