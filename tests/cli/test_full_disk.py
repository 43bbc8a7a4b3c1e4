"""A write that fails for want of room is one line naming the file and the real
cause, exit 2, and the store holds only whole work.

The full disk is a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored): a write
past it fails with EFBIG as one past a full disk fails with ENOSPC, at the same
byte every run, with no mount and no root. The limits were measured with
helper-87's 20 MiB tmpfs, where the same commands failed the same way.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pyproflab.store import Store

TESTDATA = Path(__file__).resolve().parents[1] / "testdata"
REPO = Path(__file__).resolve().parents[2]


def _limited(nbytes: int):
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))

    return preexec


def _cli(nbytes: int, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pyproflab", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        preexec_fn=_limited(nbytes),
        env=env,
    )


def _counts(db: Path) -> dict[str, int]:
    with Store.open(db, read_only=True) as store:
        return store.counts()


def test_a_checkpoint_on_a_full_disk_says_so(tmp_path):
    """The 64 profiles are committed (to the WAL); the checkpoint after them fails
    to grow the store file. The next statement (a cleanup resetting DuckDB's
    threads) was refused as 'database has been invalidated' and that line was
    all the user saw (helper-87: the same on a full 20 MiB tmpfs)."""
    db = tmp_path / "s.duckdb"
    res = _cli(1 << 20, "ingest", str(TESTDATA / "fleet_regressions"), "--db", str(db))
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"pyproflab: error: {db}: "), lines[0]
    assert "File too large" in lines[0] and "invalidated" not in lines[0], lines[0]
    # What it says was stored is there, whole, once the room is back.
    assert "64 new profiles of the 64 files were stored" in lines[0]
    assert _counts(db)["profiles"] == 64


def test_ingest_gc_with_a_full_tmpdir_is_one_line_and_stores_nothing(tmp_path):
    """GC rows are staged in Parquet under TMPDIR; a failed write there was a
    traceback ('an internal error (a bug ...)') from pyarrow's OSError."""
    db = tmp_path / "s.duckdb"
    Store.open(db).close()
    before = _counts(db)
    prom = tmp_path / "m.prom"
    with prom.open("w") as f:
        f.write("# TYPE go_memstats_heap_alloc_bytes gauge\n")
        for i in range(200_000):  # staged: several MiB, past the limit below
            f.write(f'go_memstats_heap_alloc_bytes{{pod="p{i % 50}"}} {i * 7919} {i * 1000}\n')
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    limit = max(os.path.getsize(db), 1 << 20)
    env = {**os.environ, "TMPDIR": str(tmp)}
    args = ["ingest-gc", str(prom), "--format", "prom", "--instance", "i", "--db", str(db)]
    res = _cli(limit, *args, env=env)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"pyproflab: error: {tmp}/pyproflab-stage-"), lines[0]
    assert lines[0].endswith("cannot stage rows under TMPDIR: File too large"), lines[0]
    assert _counts(db) == before
    assert list(tmp.iterdir()) == []  # the stage is removed


def test_a_spill_with_no_room_names_the_spill_folder(tmp_path):
    """DuckDB spills to ``STORE.tmp`` up to max_temp_directory_size, by default
    the free space of its disk. With no room its first line is 'Out of Memory
    Error: failed to offload data block', and that was the whole message (a
    StoreError): on a 20 MiB tmpfs with 3 MiB free, 'pyproflab ingest-gc big.prom
    --db /tmp/h87full/t.duckdb' said '... (2.8 MiB/2.9 MiB used).' and no more.
    The limit is set here as the full disk would set it."""
    from pyproflab.errors import StoreIOError

    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        store.execute("SET max_temp_directory_size = '1MiB'")
        store.execute("SET memory_limit = '16MiB'")
        store.execute("SET threads = 1")
        with pytest.raises(StoreIOError) as e:
            store.execute(
                "CREATE TABLE t AS SELECT range AS i, md5(range::VARCHAR) AS h "
                "FROM range(3000000) ORDER BY h"
            )
    line = str(e.value)
    assert "\n" not in line
    assert line.startswith(f"{db}: statement failed: Out of Memory Error: failed to offload")
    assert line.endswith(
        f"({db}.tmp, DuckDB's spill folder, is at max_temp_directory_size: "
        "by default the free space on its disk)"
    )
