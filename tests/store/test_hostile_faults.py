"""Issue 17, finding 7 and the fault-injection rule: a write error at any step of
ingest, export or taking the lock leaves the store exactly as it was, and every
such error (and an absurd duration) is one line with exit code 2."""

from __future__ import annotations

import errno
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.hostile_faults_helpers import _Fault
from support.store_helpers import make_profile

from pyproflab.cli import main
from pyproflab.errors import StoreError
from pyproflab.store import Store
from pyproflab.store.ingest import ProfileMeta, ingest
from pyproflab.store.lock import StoreLock, lock_path
from pyproflab.store.parquet import export_parquet

TABLES = ("profiles", "samples", "stacks", "locations", "functions", "mappings", "label_sets")


def _fingerprint(db: Path) -> dict[str, tuple]:
    """Row count and an order-free hash of every row, per table."""
    with Store.open(str(db), read_only=True) as s:
        return {
            t: tuple(
                s.sql(f"SELECT count(*), coalesce(sum(hash(x)), 0) FROM {t} x")
                .to_pylist()[0]
                .values()
            )
            for t in TABLES
        }


def _items(n: int, base: int) -> list:
    return [
        (
            make_profile(
                [([f"f{base + i}.leaf", "main.main"], [i + 1, 10])],
                time_nanos=(base + i + 1) * 10**15,
            ),
            ProfileMeta(service=f"s{i % 2}"),
        )
        for i in range(n)
    ]


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    db = tmp_path / "seed.duckdb"
    with Store.open(str(db)) as s:
        ingest(s, _items(2, 0))
    return db


def _count_statements(db: Path, action, monkeypatch) -> int:
    with Store.open(str(db)) as s:
        f = _Fault(0)
        with monkeypatch.context() as m:
            f.install(m)
            action(s)
    return f.calls


def test_a_write_error_at_each_step_of_ingest_leaves_the_store_as_before(
    seeded: Path, tmp_path: Path, monkeypatch
) -> None:
    def action(s):
        ingest(s, _items(3, 100))

    n = _count_statements(shutil.copy(seeded, tmp_path / "count.duckdb"), action, monkeypatch)
    assert n >= 5  # begin, the inserts, commit
    for k in range(1, n + 1):
        db = Path(shutil.copy(seeded, tmp_path / f"k{k}.duckdb"))
        before = _fingerprint(db)
        with Store.open(str(db)) as s:
            f = _Fault(k)
            with monkeypatch.context() as m:
                f.install(m)
                with pytest.raises(StoreError) as e:
                    action(s)
            assert f.fired and "\n" not in str(e.value)
        assert _fingerprint(db) == before, f"statement {k} of {n}"


def test_a_write_error_at_each_step_of_export_leaves_no_dataset(
    seeded: Path, tmp_path: Path, monkeypatch
) -> None:
    n = _count_statements(seeded, lambda s: export_parquet(s, tmp_path / "full"), monkeypatch)
    for k in range(1, n + 1):
        out = tmp_path / "out" / f"k{k}"
        with Store.open(str(seeded)) as s:
            f = _Fault(k)
            with monkeypatch.context() as m:
                f.install(m)
                try:
                    export_parquet(s, out)
                except StoreError as e:
                    assert "\n" not in str(e)
                else:
                    assert not f.fired  # a read-only statement may be retried... never here
        assert not out.exists() or (out / "_pyproflab_dataset.json").is_file()
        leftovers = [p for p in out.parent.iterdir() if p.name.startswith(".")]
        assert leftovers == []


def test_a_full_disk_while_writing_the_lock_file(tmp_path: Path, monkeypatch, capsys) -> None:
    db = tmp_path / "s.duckdb"
    with Store.open(str(db)):
        pass
    Path(lock_path(db)).write_text('{"pid": 999999999, "command": "a killed run"}')
    before = Path(lock_path(db)).read_bytes()

    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("pyproflab.store.lock.os.pwrite", full)
    with pytest.raises(StoreError, match="cannot write the lock file .*: No space left on device"):
        StoreLock(db).acquire()
    assert Path(lock_path(db)).read_bytes() == before
    profile = Path(__file__).parents[1] / "testdata" / "go" / "cpu.pb.gz"
    code = main(["ingest", str(profile), "--db", str(db)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "No space left on device" in err


def test_an_absurd_duration_is_one_line(seeded: Path, capsys) -> None:
    code = main(["top", "--db", str(seeded), "--type", "cpu", "--since", "99999999999d"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "bad time '99999999999d': reaches before year 1" in err


def test_a_busy_store_suggests_wait(seeded: Path) -> None:
    # The holder keeps the store until its stdin closes (before: 60 s, and the
    # ingest beside it, a new process, had 60 s too: a slow start outlived the hold).
    code = (
        "import sys\nfrom pyproflab.store.lock import StoreLock\n"
        f"StoreLock({str(seeded)!r}, command='holder').acquire()\n"
        "print('ok', flush=True)\nsys.stdin.read()"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "ok"
        r = subprocess.run(
            [sys.executable, "-m", "pyproflab", "ingest", str(seeded.parent), "--db", str(seeded)],
            capture_output=True,
            text=True,
            timeout=300,  # bounds a hang only
        )
        assert r.returncode == 2 and "store is busy" in r.stderr, r.stderr
        assert r.stderr.strip().endswith("or pass --wait SECONDS")  # every command has it
    finally:
        holder.kill()
        holder.wait()


def test_a_negative_max_bytes_is_a_usage_error(tmp_path: Path, capsys) -> None:
    (tmp_path / "p.pb").write_bytes(b"\x0a\x00")
    code = main(
        ["ingest", str(tmp_path / "p.pb"), "--db", str(tmp_path / "s.duckdb"), "--max-bytes", "-1"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.endswith("--max-bytes must be a whole number >= 1, not -1")
