"""Profile files -> the Parquet dataset of ``pyproflab export --parquet``, on Spark.

``ingest_dataset(spark, paths, directory)`` writes the layout of
``store/parquet.py`` (hive-partitioned profiles and samples by service and date,
the five dedup tables whole, the marker with counts and every file's sha256),
equal to an export of a DuckDB store that ingested the same files in the same
order with ``ingest_paths``. Rules:

- Files are listed by ``expand_paths`` (local or shared paths; the same order
  as ``pyproflab ingest``). Each Spark task reads, hashes, decodes and keys its
  files with pyproflab's own ``prepare_file`` (same metadata rules: defaults,
  path template, sidecar) and stages each keyed profile as one file.
- Profile ids are given on the driver in file order, as the store gives them:
  1, 2, ... to the first file of each content hash; a later file with a stored
  hash is ``present``; a file that cannot be read is refused with its reason
  and writes nothing. ``row_order`` (the store's sample rowid) counts samples in
  profile id order.
- Dedup rows (functions, mappings, locations, stacks, label sets) are shuffled
  by content id; the first occurrence in (profile id, row) order is kept and
  the table is written in that order. The same rows as the store's; its own
  row order of these tables differs from one ingest to the next (an anti-join
  inserts them), so they are equal as sets keyed by id.
- The dataset is written in a hidden sibling folder holding ``PARTIAL`` and
  renamed into place when whole; on any failure it is removed and one line is
  raised: ``directory`` is a whole dataset or absent.

- Two different rows with one 64-bit content id (a collision) fail the whole
  ingest, naming the id (the store refuses just the profile that collides).

Not done here: object-store prefixes (s3://...) as input or output.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.engines import spark_arrow as sa
from pyproflab.engines import spark_files as sf
from pyproflab.errors import StoreError, UsageError
from pyproflab.keying.paths import PARTIAL
from pyproflab.newfiles import create_temp_dir
from pyproflab.store.ingest import FileJob, KeyedProfile, ProfileMeta, expand_paths, prepare_file
from pyproflab.store.parquet import finish_dataset

# (table, id column, STORE schema), in the order export writes them.
DEDUP = (
    ("stacks", "stack_id", schema.STORE_STACKS),
    ("locations", "location_id", schema.STORE_LOCATIONS),
    ("functions", "function_id", schema.STORE_FUNCTIONS),
    ("mappings", "mapping_id", schema.STORE_MAPPINGS),
    ("label_sets", "label_set_id", schema.STORE_LABEL_SETS),
)
STAGED = pa.schema(
    [
        ("idx", pa.int64()),
        ("content_hash", pa.string()),
        ("reason", pa.string()),
        ("num_samples", pa.int64()),
        ("service", pa.string()),
        ("service_dir", pa.string()),
        ("date", pa.string()),
        ("staged", pa.string()),
    ]
)
FRESH = pa.schema(
    [
        ("profile_id", pa.int64()),
        ("row_base", pa.int64()),
        ("service", pa.string()),
        ("service_dir", pa.string()),
        ("date", pa.string()),
        ("staged", pa.string()),
    ]
)


@dataclass
class SparkIngestSummary:
    """What ``ingest_dataset`` wrote: counts per table, and the files it refused."""

    path: str
    counts: dict[str, int]
    present: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"wrote {self.counts['profiles']} profiles, {self.counts['samples']} samples to "
            f"{self.path}; {self.present} already present, {len(self.refused)} refused"
        )


def ingest_dataset(
    spark: Any,
    paths: Iterable[str | os.PathLike],
    directory: str | os.PathLike,
    defaults: ProfileMeta | None = None,
    *,
    path_template: str | None = None,
    max_bytes: int | None = None,
) -> SparkIngestSummary:
    """Decode and key ``paths`` on Spark and write the dataset at ``directory``
    (new, or an empty folder); see the module docstring for the rules."""
    from pyproflab.decode import DEFAULT_MAX_BYTES

    files, datasets, refused = expand_paths(paths)
    if datasets:
        raise UsageError(f"{datasets[0]}: a Parquet dataset is not an input of a Spark ingest")
    out = Path(directory).absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise StoreError(f"{out}: exists and is not an empty folder")
    job = FileJob(
        defaults or ProfileMeta(),
        path_template,
        max_bytes or DEFAULT_MAX_BYTES,
        np.zeros(0, np.uint64),
    )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = create_temp_dir(out.parent, f".{out.name[:100]}.", PARTIAL)
        stage = Path(
            tempfile.mkdtemp(prefix=f".{out.name[:100]}.", suffix=".staging", dir=out.parent)
        )
    except OSError as e:
        raise StoreError(f"{out}: cannot create ({e.strerror or e})") from None
    try:
        (tmp / PARTIAL).write_text("a Spark ingest in progress or interrupted\n", encoding="utf-8")
        staged = _stage(spark, files, job, str(stage))
        summary = _assign_ids(staged, files, str(out))
        summary.refused[:0] = list(refused)
        written = _write_dedup(spark, summary.fresh, str(tmp)) + _write_partitions(
            spark, summary.fresh, str(tmp)
        )
        _finish(tmp, out, summary, written)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, KeyboardInterrupt | SystemExit | UsageError):
            raise
        raise StoreError(f"{out}: Spark ingest failed, nothing written ({_reason(e)})") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return summary


def _reason(e: BaseException) -> str:
    text = str(e).strip()
    for line in text.splitlines():  # a Python error in a task: its last line says what
        if "Error" in line and ":" in line:
            text = line.strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


# --- stage 1: every file read, decoded and keyed in a Spark task ------------------------


def _stage(spark: Any, files: list[str], job: FileJob, stage: str) -> list[dict[str, Any]]:
    """One STAGED row per file, in file order (an action: the files are keyed once)."""
    if not files:
        return []
    sc = spark.sparkContext
    n = max(1, min(len(files), sc.defaultParallelism * 4))
    # Absolute: a task's working folder is not the driver's.
    listed = [(i, os.path.abspath(f)) for i, f in enumerate(files)]
    df = spark.createDataFrame(sc.parallelize(listed, n), "idx long, path string")
    now = datetime.now(UTC)
    rows = df.mapInArrow(_stage_files(job, now, stage), sa.spark_type(STAGED)).toArrow()
    return sorted(rows.to_pylist(), key=lambda r: r["idx"])


def _stage_files(job: FileJob, now: datetime, stage: str):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for idx, path in zip(
                batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True
            ):
                yield pa.RecordBatch.from_pylist(
                    [_stage_one(job, now, stage, idx, path)], schema=STAGED
                )

    return run


def _stage_one(job: FileJob, now: datetime, stage: str, idx: int, path: str) -> dict[str, Any]:
    out = prepare_file(job, path, now)
    if not isinstance(out, KeyedProfile):
        return {"idx": idx, "reason": getattr(out, "reason", "not keyed")}
    row = dict(out.row, profile_id=0)
    tables = {
        "profile": pa.Table.from_pylist([row], schema=schema.STORE_PROFILES),
        "samples": out.samples,
        **{name: getattr(out, name) for name, _, _ in DEDUP},
    }
    staged = os.path.join(stage, f"{idx}.arrows")
    sa.write_staged(staged, tables)
    return {
        "idx": idx,
        "content_hash": out.content_hash,
        "num_samples": out.samples.num_rows,
        "service": row["service"],
        "service_dir": service_dir(row["service"]),
        "date": taken_date(row),
        "staged": staged,
    }


def service_dir(service: str | None) -> str | None:
    """The folder name of a service, as export's SERVICE_DIR: the name, or past 80
    bytes ``sha256-<hex>``; None for none (the hive default partition)."""
    if service is None:
        return None
    raw = service.encode()
    if len(raw) <= 80:
        return service
    import hashlib

    return "sha256-" + hashlib.sha256(raw).hexdigest()


def taken_date(row: dict[str, Any]) -> str:
    """The UTC day the profile was taken (select.TAKEN_AT): time, else window start, else ingest."""
    t = row["time"] or row["window_start"] or row["ingested_at"]
    return t.astimezone(UTC).strftime("%Y-%m-%d")


# --- on the driver: profile ids in file order --------------------------------------------


@dataclass
class _Plan(SparkIngestSummary):
    fresh: list[dict[str, Any]] = field(default_factory=list)


def _assign_ids(staged: list[dict[str, Any]], files: list[str], path: str) -> _Plan:
    """Ids 1, 2, ... to the first file of each content hash, as the store's ingest."""
    plan = _Plan(path, {})
    seen: set[str] = set()
    row_base = 0
    for r in staged:
        if r["reason"] is not None:
            plan.refused.append((files[r["idx"]], r["reason"]))
        elif r["content_hash"] in seen:
            plan.present += 1
        else:
            seen.add(r["content_hash"])
            plan.fresh.append(
                {
                    **{k: r[k] for k in FRESH.names if k in r},
                    "profile_id": len(seen),
                    "row_base": row_base,
                }
            )
            row_base += r["num_samples"]
    plan.counts = {"profiles": len(plan.fresh), "samples": row_base}
    return plan


def _fresh_df(spark: Any, fresh: list[dict[str, Any]]) -> Any:
    table = pa.Table.from_pylist(fresh, schema=FRESH)
    n = max(1, min(len(fresh), spark.sparkContext.defaultParallelism * 4))
    return spark.createDataFrame(table, schema=sa.spark_type(FRESH)).repartition(n)


# --- the dedup tables: shuffled by id, first occurrence kept, one file each ----------------


def _write_dedup(spark: Any, fresh: list[dict[str, Any]], root: str) -> list[dict[str, Any]]:
    written: list[dict[str, Any]] = []
    df = _fresh_df(spark, fresh).select("profile_id", "staged") if fresh else None
    for name, id_col, table_schema in DEDUP:
        rows: list[dict[str, Any]] = []
        if df is not None:
            exploded_schema = pa.schema(
                [pa.field("profile_id", pa.int64()), pa.field("pos", pa.int64())]
                + list(table_schema)
            )
            exploded = df.mapInArrow(
                _explode(name, exploded_schema), sa.spark_type(exploded_schema)
            )
            rows = write_first_rows(exploded, name, id_col, table_schema, root)
        if not rows:  # no rows reached a task: the file still exists, empty, as export's
            rows = [sf.write_table(root, f"{name}.parquet", table_schema.empty_table())]
        written += rows
    return written


def write_first_rows(
    exploded: Any, name: str, id_col: str, table_schema: pa.Schema, root: str
) -> list[dict[str, Any]]:
    """Write ``name.parquet``: per id, the row first in (profile_id, pos) order, in that
    order. An id whose rows differ in content (a 64-bit collision; xxhash64 of the
    content differs) fails the write, so the ingest, naming the id."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_id = Window.partitionBy(id_col)
    content = F.xxhash64(*[c for c in table_schema.names if c != id_col])
    kept = (
        exploded.withColumn("_h", content)
        .withColumn("_clash", F.min("_h").over(by_id) != F.max("_h").over(by_id))
        .withColumn("_n", F.row_number().over(by_id.orderBy("profile_id", "pos")))
        .where("_n = 1")
        .drop("_n", "_h")
    )
    ordered = kept.repartition(1).sortWithinPartitions("profile_id", "pos")
    writer = sf.write_one(root, f"{name}.parquet", table_schema)
    return ordered.mapInArrow(writer, sa.spark_type(sf.WRITTEN)).toArrow().to_pylist()


def _explode(name: str, out_schema: pa.Schema):
    signed = sa.signed_schema(out_schema)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for pid, staged in zip(
                batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True
            ):
                t = sa.read_staged(staged, (name,))[name]
                if t.num_rows == 0:
                    continue
                t = t.add_column(0, "pos", pa.array(np.arange(t.num_rows, dtype=np.int64)))
                t = t.add_column(
                    0, "profile_id", pa.array(np.full(t.num_rows, pid, dtype=np.int64))
                )
                yield from sa.reinterpret(t, signed).to_batches()

    return run


# --- profiles and samples: one task per (service, date) partition, profile id order --------


def _write_partitions(spark: Any, fresh: list[dict[str, Any]], root: str) -> list[dict[str, Any]]:
    if not fresh:
        return []
    df = _fresh_df(spark, fresh)
    n = max(1, min(len(fresh), spark.sparkContext.defaultParallelism * 4))
    parts = df.repartition(n, "service_dir", "date").sortWithinPartitions(
        "service_dir", "date", "profile_id"
    )
    return (
        parts.mapInArrow(sf.partition_writer(root), sa.spark_type(sf.WRITTEN)).toArrow().to_pylist()
    )


# --- the marker, and the rename into place -------------------------------------------------


def _finish(tmp: Path, out: Path, summary: _Plan, written: list[dict[str, Any]]) -> None:
    counts = dict(summary.counts)
    for name, _, _ in DEDUP:
        counts[name] = sum(w["rows"] for w in written if w["path"] == f"{name}.parquet")
    summary.counts = {k: counts[k] for k in ("profiles", "samples", *(n for n, _, _ in DEDUP))}
    files = {
        w["path"]: {"bytes": w["bytes"], "sha256": w["sha256"]}
        for w in sorted(written, key=lambda w: w["path"])
    }
    finish_dataset(tmp, out, summary.counts, files)
