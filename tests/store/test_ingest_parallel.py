"""Ingest through worker processes: the same store as in one process, batches
bounded, files already stored never decoded, gzip bombs one at a time per worker."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.gen_profiles import derive_cpu_profiles
from support.testenv import CORPUS, REPO, SKIP_NO_CORPUS

import pyproflab.store.ingest as ingest_mod
from pyproflab.store import Store
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
def test_pool_stores_what_one_process_stores(fleet: list[Path], tmp_path: Path) -> None:
    dumps = []
    for workers in (1, 2):
        with Store.open(tmp_path / f"w{workers}.duckdb") as store:
            report = ingest_paths(store, [fleet[0].parent], workers=workers, batch_size=5)
            assert (report.new, report.present, report.refused) == (len(fleet), 0, [])
            dumps.append(dump(store))
    assert dumps[0] == dumps[1]
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
    sizes: list[int] = []
    real = ingest_mod.store_keyed

    def spy(store, keyed):
        sizes.append(len(keyed))
        return real(store, keyed)

    monkeypatch.setattr(ingest_mod, "store_keyed", spy)
    with Store.open(tmp_path / "s.duckdb") as store:
        report = ingest_paths(store, [fleet[0].parent], workers=2, batch_size=3)
    assert report.new == len(fleet)
    assert max(sizes) == 3 and sum(sizes) == len(fleet)


def test_bad_batch_size_is_refused(tmp_path: Path) -> None:
    from pyproflab.errors import StoreError

    with Store.open(":memory:") as store, pytest.raises(StoreError, match="batch size"):
        ingest_paths(store, [tmp_path], batch_size=0)


# --- gzip bombs ---------------------------------------------------------------------

BOMB = 48 << 20  # decompressed bytes of each bomb, under the cap below
CAP = 64 << 20


def _peak_rss_of_ingest(folder: Path, db: Path, workers: int) -> tuple[int, str]:
    """(largest peak RSS of the ingest process and its workers, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyproflab", "ingest", str(folder), "--db", str(db)]
        + ["--max-bytes", str(CAP), "--workers", str(workers)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    err = proc.stderr.read().decode() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, err[-2000:]
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
