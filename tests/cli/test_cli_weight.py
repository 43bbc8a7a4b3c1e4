"""What a CLI run loads: `top` over a store or a file needs neither pandas (a quarter
of a second: pyarrow loads it on the first ``pa.array`` or ``to_numpy``, see
pyproflab.arrays) nor, over a store, protobuf; ingesting one trace needs neither
pandas nor ingest's fork server (136 MiB of processes for no pool). Checked by
module and process, not by time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import json, sys
from multiprocessing import forkserver
from pyproflab.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "loaded": [m for m in ("pandas", "google.protobuf")
                                           if m in sys.modules]
                  + (["forkserver"] if forkserver._forkserver._forkserver_pid else [])}))
"""


def _loaded(*args: str) -> tuple[int, list[str]]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["code"], result["loaded"]


@pytest.fixture(scope="module")
def store_and_file(go_profiles: dict[str, Path], tmp_path_factory) -> tuple[Path, Path]:
    db = tmp_path_factory.mktemp("weight") / "s.duckdb"
    cpu = go_profiles["cpu"]
    subprocess.run(
        [sys.executable, "-m", "pyproflab", "ingest", str(cpu), "--db", str(db)],
        check=True,
        capture_output=True,
    )
    return db, cpu


@pytest.mark.parametrize("fmt", ["csv", "text", "json"])
def test_top_over_a_store_loads_neither_pandas_nor_protobuf(store_and_file, fmt, tmp_path):
    db, _ = store_and_file
    code, loaded = _loaded("top", "--db", str(db), "--format", fmt, "-o", str(tmp_path / "out"))
    assert code == 0
    assert loaded == []
    assert (tmp_path / "out").stat().st_size > 0


@pytest.mark.parametrize("granularity", ["functions", "lines"])
def test_top_of_a_file_does_not_load_pandas(store_and_file, granularity, tmp_path):
    _, cpu = store_and_file
    code, loaded = _loaded(
        "top", str(cpu), "--granularity", granularity, "--format", "csv", "-o", str(tmp_path / "o")
    )
    assert code == 0
    assert "pandas" not in loaded


def test_ingesting_one_trace_loads_no_pandas_and_starts_no_fork_server(tmp_path):
    trace = Path(__file__).parents[1] / "testdata" / "traces" / "mutex.trace"
    code, loaded = _loaded("ingest", str(trace), "--db", str(tmp_path / "t.duckdb"), "--strict")
    assert code == 0
    assert [m for m in loaded if m != "google.protobuf"] == []
