"""Ingest through worker processes: the same store as in one process, batches
bounded, files already stored never decoded, gzip bombs one at a time per worker."""

from __future__ import annotations

import gzip
import os
import platform
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from support.gen_profiles import derive_cpu_profiles
from support.testenv import CORPUS, REPO, SKIP_NO_CORPUS

import pyproflab.store.ingest as ingest_mod
from pyproflab.store import Store
from pyproflab.store.connection import EVICTION_ROOM
from pyproflab.store.ingest import POOL_MIN_FILES, ingest_paths

SOURCES = (
    "google-pprof/internal/report/testdata/sample.cpu",
    "parca/pkg/query/testdata/fib.pb.gz",
)
TABLES = ("functions", "mappings", "locations", "stacks", "label_sets", "samples")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    if not CORPUS.is_dir():
        pytest.skip(SKIP_NO_CORPUS)
    out = tmp_path_factory.mktemp("fleet")
    return derive_cpu_profiles([CORPUS / s for s in SOURCES], POOL_MIN_FILES + 4, out)


def dump(store: Store) -> dict[str, list]:
    """Every stored row, ordered (profiles without the ingest time)."""
    out = {
        "profiles": store.sql(
            "SELECT * EXCLUDE (ingested_at) FROM profiles ORDER BY profile_id"
        ).to_pylist()
    }
    for t in TABLES:
        out[t] = store.sql(f"SELECT * FROM {t} ORDER BY ALL").to_pylist()
    return out


@pytest.mark.corpus
def test_pool_stores_what_one_process_stores(
    fleet: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same store from one process, from a pool, and with every row sent
    (no worker leaving out what it sent before: ``SENT_BYTES`` 0)."""
    dumps = []
    for workers, sent_bytes in ((1, ingest_mod.SENT_BYTES), (2, ingest_mod.SENT_BYTES), (2, 0)):
        monkeypatch.setattr(ingest_mod, "SENT_BYTES", sent_bytes)
        with Store.open(tmp_path / f"w{workers}-{sent_bytes}.duckdb") as store:
            report = ingest_paths(store, [fleet[0].parent], workers=workers, batch_size=5)
            assert (report.new, report.present, report.refused) == (len(fleet), 0, [])
            dumps.append(dump(store))
    assert dumps[0] == dumps[1] == dumps[2]
    assert len(dumps[0]["profiles"]) == len(fleet)


@pytest.mark.corpus
def test_reingest_changes_nothing_and_decodes_nothing(
    fleet: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store.open(tmp_path / "s.duckdb") as store:
        ingest_paths(store, [fleet[0].parent], workers=2)
        before = dump(store)

        def no_decode(*args, **kwargs):
            raise AssertionError("a stored file was decoded again")

        # In this process only (workers=1): the pool's workers are other processes.
        monkeypatch.setattr("pyproflab.decode.decode_bytes", no_decode)
        report = ingest_paths(store, [fleet[0].parent], workers=1)
        assert (report.new, report.present, report.refused) == (0, len(fleet), [])
        assert dump(store) == before


@pytest.mark.corpus
def test_batches_are_bounded(
    fleet: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each transaction holds at most batch_size profiles, whatever the file count."""
    sizes = _batch_sizes(monkeypatch)
    with Store.open(tmp_path / "s.duckdb") as store:
        report = ingest_paths(store, [fleet[0].parent], workers=2, batch_size=3)
    assert report.new == len(fleet)
    assert max(sizes) == 3 and sum(sizes) == len(fleet)


def test_bad_batch_size_is_refused(tmp_path: Path) -> None:
    from pyproflab.errors import StoreError

    with Store.open(":memory:") as store, pytest.raises(StoreError, match="batch size"):
        ingest_paths(store, [tmp_path], batch_size=0)


def _batch_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of profiles of each store_keyed call (one per transaction)."""
    sizes: list[int] = []
    real = ingest_mod.store_keyed

    def spy(store, keyed):
        sizes.append(len(keyed))
        return real(store, keyed)

    monkeypatch.setattr(ingest_mod, "store_keyed", spy)
    return sizes


def _keyed_bytes(files: list[Path]) -> list[int]:
    """The keyed bytes of each file, prepared as ingest prepares it."""
    job = ingest_mod.FileJob(ingest_mod.ProfileMeta(), None, 1 << 30, np.zeros(0, np.uint64))
    out = []
    for f in files:
        keyed = ingest_mod.prepare_file(job, str(f), datetime.now(UTC))
        assert isinstance(keyed, ingest_mod.KeyedProfile)
        out.append(keyed.nbytes)
    return out


@pytest.mark.corpus
@pytest.mark.parametrize("workers", [1, 2])
def test_a_batch_closes_when_its_bytes_reach_the_budget(
    fleet: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """With a byte budget of about three profiles and no count limit, each batch
    takes files in order until its keyed rows reach the budget: the batches are
    exactly the ones the per-file sizes give, and every profile is stored once.
    Every profile is sent whole here (no ``SentMemory``): with a pool, which rows
    a worker leaves out depends on which files it took."""
    monkeypatch.setattr(ingest_mod, "SENT_BYTES", 0)
    files = sorted(fleet)
    sizes_each = _keyed_bytes(files)
    budget = sum(sizes_each[:3]) - 1
    expected, count, held = [], 0, 0
    for n in sizes_each:
        count, held = count + 1, held + n
        if held >= budget:
            expected.append(count)
            count, held = 0, 0
    if count:
        expected.append(count)
    assert len(expected) >= 3  # the budget, not the file count, cut the batches
    sizes = _batch_sizes(monkeypatch)
    with Store.open(tmp_path / "s.duckdb") as store:
        report = ingest_paths(
            store, files, workers=workers, batch_size=len(files) + 1, batch_bytes=budget
        )
        stored = store.sql("SELECT count(*) FROM profiles").column(0)[0].as_py()
    assert sizes == expected
    assert (report.new, stored) == (len(files), len(files))


@pytest.mark.corpus
def test_a_profile_over_the_byte_budget_is_a_batch_of_its_own(
    fleet: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A profile is never split and a batch is never empty: a one-byte budget
    stores one profile per transaction, and the store equals a one-batch ingest."""
    sizes = _batch_sizes(monkeypatch)
    with Store.open(tmp_path / "one.duckdb") as store:
        ingest_paths(store, fleet, workers=2, batch_bytes=1)
        small = dump(store)
    assert sizes == [1] * len(fleet)
    with Store.open(tmp_path / "all.duckdb") as store:
        ingest_paths(store, fleet, workers=2, batch_size=len(fleet), batch_bytes=1 << 40)
        assert dump(store) == small
    assert sizes[len(fleet) :] == [len(fleet)]


@pytest.mark.corpus
def test_a_bad_file_in_a_byte_bounded_batch_is_refused_whole(
    fleet: list[Path], tmp_path: Path
) -> None:
    """A file that cannot be decoded writes nothing; the batches around it store
    every other profile."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    for f in fleet:
        (folder / f.name).write_bytes(f.read_bytes())
    bad = folder / sorted(f.name for f in fleet)[len(fleet) // 2]
    bad.write_bytes(gzip.compress(b"\x0a\xff\xff not a profile"))
    with Store.open(tmp_path / "s.duckdb") as store:
        report = ingest_paths(store, [folder], workers=2, batch_bytes=1 << 16)
        sources = store.sql("SELECT source FROM profiles").column(0).to_pylist()
    assert [p for p, _ in report.refused] == [str(bad)]
    assert report.new == len(fleet) - 1
    assert str(bad.resolve()) not in sources and len(sources) == len(fleet) - 1


def _memory_limit(store: Store) -> str:
    return store.sql("SELECT current_setting('memory_limit')").column(0)[0].as_py()


@pytest.mark.corpus
def test_duckdb_memory_is_limited_while_batches_are_stored(
    fleet: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every batch is stored under writer_memory(batch_bytes) (DuckDB would otherwise
    keep the blocks it wrote cached up to 80% of RAM); the limit is put back after."""
    import duckdb

    seen: list[str] = []
    real = ingest_mod.store_keyed

    def spy(store, keyed):
        seen.append(_memory_limit(store))
        return real(store, keyed)

    monkeypatch.setattr(ingest_mod, "store_keyed", spy)
    con = duckdb.connect()
    con.execute(f"SET memory_limit = '{ingest_mod.writer_memory(64 << 20) >> 10}KiB'")
    expected = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    with Store.open(tmp_path / "s.duckdb") as store:
        before = _memory_limit(store)
        ingest_paths(store, fleet, workers=1, batch_size=4, batch_bytes=64 << 20)
        assert _memory_limit(store) == before != expected
    assert len(seen) == -(-len(fleet) // 4) and set(seen) == {expected}
    with Store.open(":memory:") as store:  # its data lives in that memory: left alone
        before = _memory_limit(store)
        with store.memory_limited(1 << 20):
            assert _memory_limit(store) == before


@pytest.mark.corpus
def test_duckdb_runs_on_one_thread_while_workers_take_the_cores(
    fleet: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a pool, every batch is stored with DuckDB on one thread, and its
    setting is put back after; without one, DuckDB keeps its threads."""
    seen: list[int] = []
    real = ingest_mod.store_keyed

    def spy(store, keyed):
        seen.append(_threads(store))
        return real(store, keyed)

    monkeypatch.setattr(ingest_mod, "store_keyed", spy)
    with Store.open(tmp_path / "s.duckdb") as store:
        store.execute("SET threads = 3")
        ingest_paths(store, fleet, workers=2, batch_size=4)
        assert _threads(store) == 3 and set(seen) == {1}
    seen.clear()
    with Store.open(tmp_path / "t.duckdb") as store:
        store.execute("SET threads = 3")
        ingest_paths(store, fleet, workers=1, batch_size=4)
        assert set(seen) == {3}


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="the workers' heap setting is glibc's (mallopt)",
)
def test_a_worker_keeps_freed_memory_for_the_next_file() -> None:
    """In a process like a worker (the setting is process-wide), glibc takes both values."""
    code = "from pyproflab.keying import prepare; print(prepare._keep_freed_memory())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.stdout.strip() == "True", out.stderr


_KEY_PROBE = """
import sys
from datetime import UTC, datetime
import numpy as np
from pyproflab.keying.keys import ProfileMeta
from pyproflab.keying.prepare import FileJob, _trimmed, prepare_file
from pyproflab.keying.sent import SentMemory
job = FileJob(ProfileMeta(), None, 1 << 30, np.zeros(0, np.uint64), 1 << 25)
sent = SentMemory(1 << 25)
kinds = {type(_trimmed(sent, prepare_file(job, f, datetime.now(UTC)))).__name__
         for f in sys.argv[1:]}
print(sorted(kinds), "pandas" in sys.modules)
"""


@pytest.mark.corpus
def test_a_worker_keys_profiles_without_loading_pandas(fleet: list[Path]) -> None:
    """pyarrow imports pandas on its first pa.array (half a second of each worker's
    first file): reading, keying and trimming profiles without labels never do."""
    files = [str(f) for f in fleet[:3]]
    out = subprocess.run(
        [sys.executable, "-c", _KEY_PROBE, *files], capture_output=True, text=True, cwd=REPO
    )
    assert out.stdout.split() == ["['KeyedProfile']", "False"], out.stderr[-2000:]


_INGEST_PROBE = """
import sys
from pyproflab.store.connection import Store
from pyproflab.store.ingest import ingest_paths
with Store.open(sys.argv[1]) as store:
    report = ingest_paths(store, sys.argv[2:], workers=1)
print(report.new, "pandas" in sys.modules)
"""


@pytest.mark.corpus
def test_ingest_stores_profiles_without_loading_pandas(fleet: list[Path], tmp_path: Path) -> None:
    """The writer's side too (ids of the batch, the profiles' rows, the samples):
    an ingest of profiles without labels never makes pyarrow import pandas."""
    files = [str(f) for f in fleet[:3]]
    db = str(tmp_path / "p.duckdb")
    out = subprocess.run(
        [sys.executable, "-c", _INGEST_PROBE, db, *files], capture_output=True, text=True, cwd=REPO
    )
    assert out.stdout.split() == ["3", "False"], out.stderr[-2000:]


_SCRIPT = """
import pyproflab
print("script started")
lab = pyproflab.open("s.duckdb")
print(lab.ingest("profiles", service="api", workers=2).new)
lab.close()
"""


def test_a_script_without_a_main_guard_ingests_with_a_pool(tmp_path: Path) -> None:
    """docs/python.md's calls in a plain script (no ``if __name__ == "__main__"``):
    the pool's workers run pyproflab's code only, never the script again (it did:
    each worker re-ran it, found the store locked, and the pool broke)."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    recorded = sorted((REPO / "tests" / "testdata" / "fleet_regressions").glob("*.pb.gz"))
    for f in recorded[:POOL_MIN_FILES]:
        (folder / f.name).write_bytes(f.read_bytes())
    (tmp_path / "script.py").write_text(_SCRIPT)
    out = subprocess.run(
        [sys.executable, "script.py"], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert (out.returncode, out.stdout) == (0, f"script started\n{POOL_MIN_FILES}\n"), out.stderr


def _threads(store: Store) -> int:
    return int(store.sql("SELECT current_setting('threads')").column(0)[0].as_py())


def test_bad_batch_bytes_is_refused(tmp_path: Path) -> None:
    from pyproflab.errors import StoreError

    with Store.open(":memory:") as store, pytest.raises(StoreError, match="batch bytes"):
        ingest_paths(store, [tmp_path], batch_bytes=0)


# --- gzip bombs ---------------------------------------------------------------------

BOMB = 48 << 20  # decompressed bytes of each bomb, under the cap below
CAP = 64 << 20


def _peak_rss_of_ingest(folder: Path, db: Path, workers: int) -> tuple[int, str]:
    """(largest peak RSS of the ingest process and its workers, stderr). Every bomb is
    refused (48 MiB of zeros is not a profile), so the run stored nothing: exit 2 and no
    store file (issue 34, defect 6)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyproflab", "ingest", str(folder), "--db", str(db)]
        + ["--max-bytes", str(CAP), "--workers", str(workers)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    err = proc.stderr.read().decode() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2, err[-2000:]
    assert not db.exists(), f"{db} was created although nothing was stored"
    return usage.ru_maxrss * 1024, err


@pytest.mark.parametrize("workers", [1, 2])
def test_gzip_bombs_are_decompressed_one_at_a_time(tmp_path: Path, workers: int) -> None:
    """Eight bombs, each under the per-file cap, cost about what one costs: a file is
    decompressed only when a worker takes it, and its bytes go before the next."""
    blob = gzip.compress(bytes(BOMB), compresslevel=1)
    one, eight = tmp_path / "one", tmp_path / "eight"
    one.mkdir()
    eight.mkdir()
    (one / "bomb-0.pb.gz").write_bytes(blob)
    for i in range(8):
        (eight / f"bomb-{i}.pb.gz").write_bytes(blob)
    peak_one, _ = _peak_rss_of_ingest(one, tmp_path / "one.duckdb", workers)
    peak_eight, err = _peak_rss_of_ingest(eight, tmp_path / "eight.duckdb", workers)
    assert err.count("refused") == 8, err[-2000:]
    assert err.count("not a pprof profile (starts with byte 0x00)") == 8, err[-2000:]
    # All eight at once would add 7 x 48 MiB (336 MiB) at least.
    assert peak_eight < peak_one + 2 * BOMB, (
        f"peak RSS {peak_eight >> 20} MiB for eight bombs, {peak_one >> 20} MiB for one"
    )


# --- progress -------------------------------------------------------------------------


def test_progress_logs_a_line_per_interval_off_a_terminal(capsys) -> None:
    from pyproflab.cli.common import Progress

    p = Progress("ingesting", enabled=False, interval=0.0, unit="file")
    for done in range(1, 4):
        p(done, 3)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("ingesting: 1/3 files, ") and "files/s" in lines[0]
    assert "left" in lines[0] and "left" not in lines[-1]


def test_progress_is_quiet_for_a_short_run_off_a_terminal(capsys) -> None:
    from pyproflab.cli.common import Progress

    p = Progress("ingesting", enabled=False, interval=60.0, unit="file")
    for done in range(1, 4):
        p(done, 3)
    assert capsys.readouterr().err == ""


def _cached_table_bytes(store: Store) -> int:
    rows = store.sql(
        "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag = 'BASE_TABLE'"
    )
    return int(rows.column(0)[0].as_py())


def test_cached_blocks_are_dropped_and_the_limit_kept(tmp_path: Path) -> None:
    """drop_cached_blocks (after each batch of an ingest) lets DuckDB evict the table
    blocks it cached down to EVICTION_ROOM, keeps the data and puts the memory
    limit back as it was."""
    with Store.open(tmp_path / "s.duckdb") as store:
        store.execute(
            "CREATE TABLE t AS SELECT range AS a, md5(range::VARCHAR) AS b FROM range(2000000)"
        )
        store.execute("CHECKPOINT")
        total = store.sql("SELECT sum(a), count(b) FROM t").to_pylist()
        before = _memory_limit(store)
        assert _cached_table_bytes(store) > 2 * EVICTION_ROOM  # the scan left blocks cached
        store.drop_cached_blocks()
        assert _cached_table_bytes(store) <= EVICTION_ROOM
        assert _memory_limit(store) == before
        assert store.sql("SELECT sum(a), count(b) FROM t").to_pylist() == total
    with Store.open(":memory:") as store:  # its data lives in that memory: left alone
        store.execute("CREATE TABLE t AS SELECT range AS a FROM range(1000)")
        store.drop_cached_blocks()
        assert store.sql("SELECT count(*) AS n FROM t").to_pylist() == [{"n": 1000}]


class _LimitSpy:
    """A connection stand-in that records each memory limit set, and the memory
    DuckDB held besides table blocks when it was set."""

    def __init__(self, con: object) -> None:
        self._con = con
        self.lowered: list[tuple[int, int]] = []

    def execute(self, query: str, *args: object) -> object:
        m = re.fullmatch(r"SET memory_limit = '(\d+)KiB'", query)
        if m:
            held = self._con.execute(
                "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()"
                " WHERE tag <> 'BASE_TABLE'"
            ).fetchall()[0][0]
            self.lowered.append((int(m.group(1)) << 10, int(held)))
        return self._con.execute(query, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self._con, name)


def test_dropping_blocks_leaves_room_for_the_next_statement(tmp_path: Path) -> None:
    """The limit drop_cached_blocks lowers to stays EVICTION_ROOM above what DuckDB
    holds besides table blocks: at 1 MiB, about one ingest in a hundred ended
    'Out of Memory Error: failed to allocate data of size 2.0 KiB (1.0 MiB/1.0 MiB
    used)', the statement putting the limit back failing too."""
    with Store.open(tmp_path / "s.duckdb") as store:
        store.execute("CREATE TEMP TABLE k AS SELECT range AS a FROM range(300000)")
        spy = _LimitSpy(store.con)
        store.con = spy
        store.drop_cached_blocks()
        [(low, held)] = spy.lowered
        assert held > 0
        assert low >= held + EVICTION_ROOM - (1 << 10)  # KiB rounding
        assert store.sql("SELECT count(*) AS n FROM k").to_pylist() == [{"n": 300000}]


class _Recorder:
    """A Writer stand-in: records batches, fails on the batch named ``fail``."""

    def __init__(self, fail: object = None) -> None:
        self.written: list[object] = []
        self.fail = fail
        self.store = Store.open(":memory:")

    def write(self, batch: object) -> None:
        if batch is self.fail:
            raise RuntimeError("disk full")
        self.written.append(batch)


def test_background_writes_keep_order_and_wait_for_the_batch_before() -> None:
    rec = _Recorder()
    with ingest_mod.BackgroundWrites(rec) as writes:  # type: ignore[arg-type]
        for n in range(5):
            writes.submit(n)  # type: ignore[arg-type]
            # every batch before is in; this one may be, or may still be written
            assert rec.written in (list(range(n)), list(range(n + 1)))
        writes.wait()
        assert rec.written == list(range(5))


def test_a_failed_background_write_is_raised_and_stops_the_rest() -> None:
    rec = _Recorder(fail=1)
    with pytest.raises(RuntimeError, match="disk full"):
        with ingest_mod.BackgroundWrites(rec) as writes:  # type: ignore[arg-type]
            writes.submit(0)  # type: ignore[arg-type]
            writes.submit(1)  # type: ignore[arg-type]
            writes.submit(2)  # type: ignore[arg-type]  # raises: 1 failed, 2 never starts
    assert rec.written == [0]


def test_the_end_of_the_block_waits_for_the_write_under_way() -> None:
    rec = _Recorder()
    with pytest.raises(KeyboardInterrupt):
        with ingest_mod.BackgroundWrites(rec) as writes:  # type: ignore[arg-type]
            writes.submit(0)  # type: ignore[arg-type]
            raise KeyboardInterrupt
    assert rec.written == [0]
