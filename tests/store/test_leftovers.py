"""Leftovers (issue 35, finding 9): a re-run of an export removes the hidden
folders killed exports left; a failed ``-o`` write leaves no temporary file; an
ingest stopped by a full disk says how many profiles it stored."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from support.store_helpers import make_profile

from pyproflab.cli import common
from pyproflab.encode import encode_profile
from pyproflab.errors import StoreError, UsageError
from pyproflab.store import Store
from pyproflab.store.connection import Store as StoreClass
from pyproflab.store.ingest import PARTIAL, ProfileMeta, ingest, ingest_paths
from pyproflab.store.parquet import export_parquet


def _store(tmp_path: Path) -> Path:
    db = tmp_path / "s.duckdb"
    with Store.open(str(db)) as s:
        ingest(s, [(make_profile([(["main.a"], [1, 10])]), ProfileMeta(service="x"))])
    return db


def _killed_export(db: Path, out: Path) -> None:
    code = (
        "import os\n"
        "import pyproflab.store.parquet as pp\n"
        "pp._manifest = lambda d: os._exit(9)\n"
        "from pyproflab.store import Store\n"
        f"with Store.open({str(db)!r}) as s:\n"
        f"    pp.export_parquet(s, {str(out)!r})\n"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 9


def test_an_export_removes_what_killed_exports_left(tmp_path: Path) -> None:
    db = _store(tmp_path)
    out = tmp_path / "out" / "ds"
    _killed_export(db, out)
    _killed_export(db, out)  # removes the first one's folder: its writer is gone
    assert len(list((tmp_path / "out").iterdir())) == 1
    # One written by this pyproflab's earlier versions (no pid), one still writing
    # (pid 1 never exits), one of another dataset.
    old = tmp_path / "out" / f".ds.old{PARTIAL}"
    live = tmp_path / "out" / f".ds.live{PARTIAL}"
    other = tmp_path / "out" / f".other.x{PARTIAL}"
    for p, text in ((old, "an export\n"), (live, "an export\npid 1\n"), (other, "x\n")):
        p.mkdir()
        (p / PARTIAL).write_text(text)
    assert len(list((tmp_path / "out").iterdir())) == 4
    with Store.open(str(db), read_only=True) as s:
        export_parquet(s, out)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        ["ds", live.name, other.name]
    )


def test_a_failed_output_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch) -> None:
    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(common.os, "replace", full)
    with pytest.raises(UsageError, match=r"out.txt: cannot write: No space left on device"):
        common.write_output("text", str(tmp_path / "out.txt"))
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_output_write_leaves_no_temporary_file(tmp_path, monkeypatch) -> None:
    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(common.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        common.write_output("text", str(tmp_path / "out.txt"))
    assert list(tmp_path.iterdir()) == []


def test_an_ingest_stopped_by_a_full_disk_says_how_many_it_stored(tmp_path, monkeypatch):
    files = tmp_path / "in"
    files.mkdir()
    for i in range(6):
        p = make_profile([([f"main.f{i}"], [1, 10])], time_nanos=(i + 1) * 10**15)
        (files / f"p{i}.pb.gz").write_bytes(encode_profile(p))
    real, commits = StoreClass._run, []

    def run(store, query, params=None):
        if isinstance(query, str) and query.strip().upper() == "COMMIT":
            commits.append(query)
            if len(commits) == 3:
                raise duckdb.IOException("No space left on device")
        return real(store, query, params)

    db = tmp_path / "s.duckdb"
    with Store.open(str(db)) as s, pytest.raises(StoreError) as e:
        monkeypatch.setattr(StoreClass, "_run", run)
        ingest_paths(s, [files], batch_size=2, workers=1)
    msg = str(e.value)
    assert "\n" not in msg and "No space left on device" in msg
    monkeypatch.setattr(StoreClass, "_run", real)
    with Store.open(str(db), read_only=True) as s:
        stored = s.sql("SELECT count(*) FROM profiles").column(0)[0].as_py()
    assert stored == 4 and "4 new profiles of the 6 files were stored before it" in msg
    assert os.path.exists(db)
