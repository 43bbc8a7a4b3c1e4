"""The store lock and what DuckDB 2.0 allows other processes while a store is open.

Measured (and asserted here): a read-write open holds DuckDB's exclusive file
lock, so no other process can open the file at all, read-write or read-only,
until it closes; read-only opens share the file with each other and keep
writers out. pyproflab turns each refusal into one line: "store is busy
(held by pid N since T: command)".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyproflab.errors import StoreError
from pyproflab.store import Store
from pyproflab.store.lock import StoreLock, lock_path, read_holder

REPO = Path(__file__).resolve().parents[2]

HOLD = """
import sys, time
from pyproflab.store import Store
if sys.argv[2] == "duckdb":  # DuckDB's own writer (a notebook, the DuckDB CLI)
    import duckdb
    s = duckdb.connect(sys.argv[1])
else:
    s = Store.open(sys.argv[1], read_only=sys.argv[2] == "ro")
print("held", flush=True)
if float(sys.argv[3]) < 0:
    sys.stdin.readline()  # until the test says "go"
else:
    time.sleep(float(sys.argv[3]))
s.close()
"""


def hold(db: Path, seconds: float, mode: str = "rw") -> subprocess.Popen:
    """Another process holding the store (``rw``, ``ro`` or ``duckdb``: a
    read-write connection of DuckDB's own, outside pyproflab) for ``seconds``
    (below 0: until a line on its stdin)."""
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db), mode, str(seconds)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = p.stdout.readline()
    assert line.strip() == "held", p.stderr.read()
    return p


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "s.duckdb"
    Store.open(path).close()
    return path


def test_second_writer_is_busy_at_once(db, monkeypatch):
    holder = hold(db, 30)
    try:
        # "At once": the open never waits (no poll's sleep), whatever the machine's load.
        waits: list[float] = []
        monkeypatch.setattr(time, "sleep", waits.append)
        with pytest.raises(StoreError) as e:
            Store.open(db)
        monkeypatch.undo()
        assert waits == []
        msg = str(e.value)
        assert f"store is busy (held by pid {holder.pid} since " in msg
        # Only a command that has --wait suggests it (cli/job.py adds the hint).
        assert msg.endswith("; try again later")
        assert str(e.value.with_hint()).endswith("; try again later or pass --wait SECONDS")
    finally:
        holder.kill()
        holder.wait()


def test_writer_waits_for_the_holder(db, monkeypatch):
    # The holder lets go once the writer has polled once (it timed a 1 s hold
    # with 0.5 s < took, which a test read late under load could fail).
    holder = hold(db, -1)
    real_sleep, waits = time.sleep, []

    def sleep(seconds: float) -> None:
        if not waits:
            holder.stdin.write("go\n")
            holder.stdin.flush()
        waits.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    with Store.open(db, wait=600) as s:  # 600 s bounds a hang only
        assert s.lock is not None and s.lock.held
        assert s.lock.took_over is None  # the holder let go cleanly
    monkeypatch.undo()
    assert waits  # it waited for the holder, not refused
    holder.wait()


def test_wait_gives_up(db):
    holder = hold(db, 30)
    try:
        t = time.monotonic()
        with pytest.raises(StoreError, match=r"store is busy .* gave up after waiting 0.5 s"):
            Store.open(db, wait=0.5)
        assert 0.4 < time.monotonic() - t < 60  # waited its 0.5 s; 60 bounds a hang
    finally:
        holder.kill()
        holder.wait()


def test_stale_lock_of_killed_process_is_taken_over(db):
    holder = hold(db, 30)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    held = read_holder(db)
    assert held and held["pid"] == holder.pid  # its record is still there
    with Store.open(db) as s:
        assert s.lock.took_over["pid"] == holder.pid
        assert read_holder(db)["pid"] == os.getpid()
    assert read_holder(db) is None
    assert not Path(lock_path(db)).exists()  # deleted on release: no empty file stays


TRY_LOCK = """
import sys
from pyproflab.errors import StoreError
from pyproflab.store.lock import StoreLock
try:
    StoreLock(sys.argv[1]).acquire()
except StoreError as e:
    print("busy" if "store is busy" in str(e) else e)
else:
    print("locked")
"""


def test_a_waiter_on_a_deleted_lock_file_locks_the_file_now_there(db):
    """The holder deletes the lock file as it lets go; a process that waited on
    that file must not hold a lock nobody else sees: while it holds the store,
    a third process is refused."""
    holder = hold(db, 2)
    try:
        with Store.open(db, wait=60) as s:
            assert s.lock.held
            assert Path(lock_path(db)).exists()
            res = subprocess.run(
                [sys.executable, "-c", TRY_LOCK, str(db)],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=REPO,
            )
            assert res.stdout.strip() == "busy", res.stdout + res.stderr
    finally:
        holder.kill()
        holder.wait()
    assert not Path(lock_path(db)).exists()


def test_reader_during_a_writer_gets_busy_message(db):
    holder = hold(db, 30)
    try:
        with pytest.raises(StoreError, match=f"store is busy \\(held by pid {holder.pid} since"):
            Store.open(db, read_only=True)
        # The CLI: one line, exit 2.
        res = subprocess.run(
            [sys.executable, "-m", "pyproflab", "profiles", "--db", str(db)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        assert res.returncode == 2
        assert f"store is busy (held by pid {holder.pid}" in res.stderr
        assert "Traceback" not in res.stderr
    finally:
        holder.kill()
        holder.wait()


def test_readers_share_and_keep_writers_out(db):
    reader = hold(db, 30, "ro")
    try:
        with Store.open(db, read_only=True) as s:  # a second reader: fine
            assert s.counts()["profiles"] == 0
        with pytest.raises(StoreError, match=f"busy \\(held by pid {reader.pid}: open by a reader"):
            Store.open(db)
        assert read_holder(db) is None  # the refused writer left no record behind
    finally:
        reader.kill()
        reader.wait()
    with Store.open(db, wait=5):
        pass


def test_lock_is_shared_within_a_process(db):
    with Store.open(db) as a, Store.open(db) as b:
        assert a.lock.held and b.lock.held
    assert read_holder(db) is None
    lock = StoreLock(db).acquire()
    lock.release()
    lock.release()  # twice is harmless


def test_job_against_busy_store(tmp_path, db):
    """`pyproflab job run` on a busy store: exit 2 at once, or waits with --wait."""
    job = tmp_path / "job.toml"
    (tmp_path / "drop").mkdir()
    job.write_text(
        f'[job]\nname="j"\nstore="{db}"\noutput="{tmp_path / "out"}"\n'
        f'[[source]]\nkind="drop"\npath="{tmp_path / "drop"}"\n'
    )
    # Held far longer than the job could take on a loaded machine: exit 2 means
    # it did not wait (no timing asserted).
    holder = hold(db, 60)
    try:
        res = subprocess.run(
            [sys.executable, "-m", "pyproflab", "job", "run", str(job)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        assert res.returncode == 2, res.stderr
        assert f"store is busy (held by pid {holder.pid} since" in res.stderr
        assert "or pass --wait SECONDS" in res.stderr  # job has --wait
    finally:
        holder.kill()
        holder.wait()
    holder = hold(db, 2)  # lets go while the job waits (or before it starts)
    try:
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "pyproflab",
                "job",
                "run",
                str(job),
                "--wait",
                "30",
                "--summary",
                str(tmp_path / "s.json"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        assert res.returncode == 0, res.stderr
        assert json.loads((tmp_path / "s.json").read_text())["run_id"] == 1
    finally:
        holder.kill()
        holder.wait()


def test_a_writer_kept_out_by_a_duckdb_writer_says_writing(db):
    """A writer refused by DuckDB's lock was told 'open by a reader' whoever held
    it: with the store open read-write in another process's duckdb.connect,
    'pyproflab ingest' said 'held by pid N: open by a reader in DuckDB'
    (helper-87)."""
    holder = hold(db, 30, "duckdb")
    try:
        with pytest.raises(StoreError, match=f"busy \\(held by pid {holder.pid}: open for writing"):
            Store.open(db)
        assert read_holder(db) is None
    finally:
        holder.kill()
        holder.wait()
