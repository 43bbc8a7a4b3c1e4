"""Spark `local[2]` against the DuckDB store on the same 1,000 profiles (issue 14).

Both engines ingest the same folder of small CPU profiles (derived from the test
program's, as the `fleet` section does) and answer fleet `top` over all of
them; each side runs in its own fresh process, and the times are taken inside
it, so Python's and the JVM's start-up are reported apart:

- DuckDB: ``ingest_paths`` into a new store (its worker processes, one per core),
  then ``top`` of the whole store;
- Spark: the session's start, ``ingest_dataset`` into a new Parquet dataset,
  then ``SparkDataset.top`` over it (the driver and ``local[2]``'s executors in
  one JVM, pyproflab's decoder in its Python workers).

The two tops are compared row by row (flat and cum of every function); the
ingest rate per core is the DuckDB rate over its workers, the figure the sizing
of a fleet's ingest needs. Timed on a machine whose two cores other work may
share: read the ratio, not the seconds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from bench.common import REPO, go_cpu_profiles

_DUCKDB = """
import json, sys, time
from pyproflab.analyses.top import top
from pyproflab.store import Store
from pyproflab.store.ingest import default_workers, ingest_paths
from pyproflab.store.merge import merged_profile
from pyproflab.store.select import Selection
t = time.perf_counter()
store = Store.open(sys.argv[2])
report = ingest_paths(store, [sys.argv[1]])
ingest = time.perf_counter() - t
times = []
for _ in range(int(sys.argv[3])):
    t = time.perf_counter()
    rows = top(merged_profile(store, Selection(profile_type="cpu")), sample_index="cpu").rows
    times.append(time.perf_counter() - t)
print(json.dumps({"ingest": ingest, "top": sorted(times)[len(times) // 2],
                  "workers": default_workers(), "rows": _rows(rows)}))
"""

_SPARK = """
import json, sys, time
t = time.perf_counter()
from pyproflab.engines.spark_session import local_session
spark = local_session("local[2]")
start = time.perf_counter() - t
import pyproflab
from pyproflab.engines.spark_ingest import ingest_dataset
from pyproflab.store.select import Selection
t = time.perf_counter()
ingest_dataset(spark, [sys.argv[1]], sys.argv[2])
ingest = time.perf_counter() - t
dataset = pyproflab.open_spark(spark, sys.argv[2])
times = []
for _ in range(int(sys.argv[3])):
    t = time.perf_counter()
    rows = dataset.top(Selection(profile_type="cpu"), sample_index="cpu").rows
    times.append(time.perf_counter() - t)
spark.stop()
print(json.dumps({"start": start, "ingest": ingest, "top": sorted(times)[len(times) // 2],
                  "rows": _rows(rows)}))
"""

# Every function's flat and cum, for comparing the two answers.
_ROWS = """
def _rows(rows):
    return sorted(zip(rows.column("name").to_pylist(), rows.column("flat").to_pylist(),
                      rows.column("cum").to_pylist()))
"""


def _run(code: str, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _ROWS + code, *args],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
        timeout=3600,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def spark_lines(files: list[Path], work: Path, runs: int) -> list[str]:
    """The comparison of the module docstring over ``files`` (one folder)."""
    folder, count = str(files[0].parent), len(files)
    db, dataset = work / "spark-vs.duckdb", work / "spark-vs-dataset"
    db.unlink(missing_ok=True)
    shutil.rmtree(dataset, ignore_errors=True)
    duck = _run(_DUCKDB, folder, str(db), str(runs))
    spark = _run(_SPARK, folder, str(dataset), str(runs))
    same = "equal" if duck["rows"] == spark["rows"] else "DIFFERENT"
    per_core = count / duck["ingest"] / duck["workers"]
    return [
        f"{f'ingest of {count} small profiles: Spark local[2] vs DuckDB':<58} "
        f"{spark['ingest']:8.2f}s vs {duck['ingest']:7.2f}s  ratio "
        f"{spark['ingest'] / duck['ingest']:6.1f}x  (Spark session start {spark['start']:.1f}s)",
        f"{f'top over {count} profiles: Spark vs DuckDB':<58} "
        f"{spark['top']:8.3f}s vs {duck['top']:7.3f}s  ratio {spark['top'] / duck['top']:6.1f}x"
        f"  (answers {same}: {len(duck['rows'])} functions)",
        f"  DuckDB ingest per core: {per_core:.1f} small profiles/s "
        f"({count / duck['ingest']:.1f}/s on {duck['workers']} worker(s))",
    ]


def section_spark(work: Path, runs: int, count: int = 1000) -> list[str]:
    """Spark against DuckDB on ``count`` small profiles (skipped without Java or pyspark)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return ["spark: skipped (the spark extra, pyspark, is not installed)"]
    if shutil.which("java") is None:
        return ["spark: skipped (no java on PATH)"]
    sys.path.insert(0, str(REPO / "tests"))
    from support.gen_profiles import derive_cpu_profiles

    files_dir = work / "spark-fleet"
    shutil.rmtree(files_dir, ignore_errors=True)
    files = derive_cpu_profiles(go_cpu_profiles(work), count, files_dir)
    return spark_lines(files, work, max(runs, 1))
