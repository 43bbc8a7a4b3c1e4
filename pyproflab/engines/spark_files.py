"""The dataset's Parquet files, written by Spark tasks with pyarrow (spark_ingest).

Rules: each file has the schema ``export_parquet`` gives it (uint64 ids stay
UINT64, which Spark's own writer cannot keep) and the export's name:
``T.parquet`` for a dedup table, ``T/service=S/date=D/data_0.parquet`` for
profiles and samples, S and D percent-encoded as DuckDB's hive partitions
(``__HIVE_DEFAULT_PARTITION__`` for no service). Every writer returns a
WRITTEN row per file (path, bytes, sha256, rows) for the dataset's marker.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.engines import spark_arrow as sa

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
# Rows buffered per Parquet row group of samples (profiles are written per partition).
ROW_GROUP = 1 << 17


WRITTEN = pa.schema(
    [("path", pa.string()), ("bytes", pa.int64()), ("sha256", pa.string()), ("rows", pa.int64())]
)
# The files' schemas, as export writes them (profiles: service is the folder name).
PROFILES_FILE = pa.schema(
    [f for f in schema.STORE_PROFILES if f.name != "service"]
    + [
        pa.field("service", pa.string()),
        pa.field("service_name", pa.string()),
        pa.field("date", pa.string()),
    ]
)
SAMPLES_FILE = pa.schema(
    list(schema.STORE_SAMPLES) + [pa.field("row_order", pa.int64(), nullable=False)]
)


def write_one(root: str, target: str, table_schema: pa.Schema):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq

        path = os.path.join(root, target)
        n = 0
        with pq.ParquetWriter(path, table_schema) as w:
            for batch in batches:
                _refuse_clash(batch, target)
                w.write_table(sa.reinterpret(pa.Table.from_batches([batch]), table_schema))
                n += batch.num_rows
        size, digest = sa.file_digest(path)
        yield pa.RecordBatch.from_pylist(
            [{"path": target, "bytes": size, "sha256": digest, "rows": n}], schema=WRITTEN
        )

    return run


def _refuse_clash(batch: pa.RecordBatch, target: str) -> None:
    """Raise when a row's ``_clash`` says its id names other content too."""
    if "_clash" not in batch.schema.names:
        return
    clash = batch.column("_clash").to_numpy(zero_copy_only=False)
    if clash.any():
        bad = batch.column(2)[int(np.flatnonzero(clash)[0])].as_py()  # the id, after pos
        raise ValueError(
            f"{target}: id {bad & (2**64 - 1)} names two different rows (a 64-bit content "
            "id collision); refused"
        )


def write_table(root: str, target: str, table: pa.Table) -> dict[str, Any]:
    import pyarrow.parquet as pq

    path = os.path.join(root, target)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path)
    size, digest = sa.file_digest(path)
    return {"path": target, "bytes": size, "sha256": digest, "rows": table.num_rows}


def partition_dir(service_dir: str | None, date: str) -> str:
    """``service=S/date=D`` as DuckDB names hive partitions (percent-encoded, UTF-8)."""
    s = HIVE_NULL if service_dir is None else urllib.parse.quote(service_dir, safe="")
    return f"service={s}/date={urllib.parse.quote(date, safe='')}"


def partition_writer(root: str):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        part: _Partition | None = None
        for batch in batches:
            for r in batch.to_pylist():
                if part is None or (r["service_dir"], r["date"]) != part.key:
                    if part is not None:
                        yield from part.close()
                    part = _Partition(root, (r["service_dir"], r["date"]))
                part.add(r)
        if part is not None:
            yield from part.close()

    return run


class _Partition:
    """The profiles and samples files of one (service, date), written in profile id order."""

    def __init__(self, root: str, key: tuple[str | None, str]):
        self.root, self.key = root, key
        self.sub = partition_dir(*key)
        self.profiles: list[pa.Table] = []
        self.samples: list[pa.Table] = []
        self.buffered = 0
        self.writer: Any = None
        self.sample_rows = 0

    def add(self, r: dict[str, Any]) -> None:
        tables = sa.read_staged(r["staged"], ("profile", "samples"))
        p = tables["profile"]
        p = p.set_column(
            p.schema.get_field_index("profile_id"),
            "profile_id",
            pa.array([r["profile_id"]], pa.int64()),
        )
        p = p.drop_columns(["service"]).append_column(
            "service", pa.array([r["service_dir"]], pa.string())
        )
        p = p.append_column("service_name", pa.array([r["service"]], pa.string()))
        self.profiles.append(p.append_column("date", pa.array([r["date"]], pa.string())))
        s = tables["samples"]
        if s.num_rows:
            n = s.num_rows
            s = s.add_column(0, "profile_id", pa.array(np.full(n, r["profile_id"], dtype=np.int64)))
            s = s.append_column("row_order", pa.array(np.arange(n, dtype=np.int64) + r["row_base"]))
            self.samples.append(s.cast(SAMPLES_FILE))
            self.buffered += n
            if self.buffered >= ROW_GROUP:
                self._flush()

    def _flush(self) -> None:
        import pyarrow.parquet as pq

        if not self.samples:
            return
        if self.writer is None:
            path = os.path.join(self.root, "samples", self.sub, "data_0.parquet")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            self.writer = pq.ParquetWriter(path, SAMPLES_FILE)
        table = pa.concat_tables(self.samples)
        self.writer.write_table(table)
        self.sample_rows += table.num_rows
        self.samples, self.buffered = [], 0

    def close(self) -> Iterator[pa.RecordBatch]:
        self._flush()
        out = []
        if self.writer is not None:
            self.writer.close()
            target = f"samples/{self.sub}/data_0.parquet"
            size, digest = sa.file_digest(os.path.join(self.root, target))
            out.append({"path": target, "bytes": size, "sha256": digest, "rows": self.sample_rows})
        profiles = pa.concat_tables(self.profiles).cast(PROFILES_FILE)
        out.append(write_table(self.root, f"profiles/{self.sub}/data_0.parquet", profiles))
        yield pa.RecordBatch.from_pylist(out, schema=WRITTEN)
