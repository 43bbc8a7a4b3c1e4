"""Questions over the Parquet dataset on Spark, answered with the store's result objects.

``SparkDataset(spark, path)`` (``pyproflab.open_spark``) reads a dataset that
``pyproflab export --parquet`` or ``engines.spark_ingest`` wrote. Rules:

- The selection is the store's ``Selection`` with the same meaning (service is
  the profile's own name, ``service_name`` in the files; since/until compare the
  time the profile was taken).
- ``merged_profile`` is the store's merge (``store.merge``) with Spark doing the
  part that grows with the fleet: the samples of the selected profiles grouped
  by (stack, label set), values summed per kept sample type, all-zero groups
  dropped, ordered by their first sample (``row_order``, the store's rowid).
  Only the merged groups and the rows they reference come to the driver, where
  the store's ``merge_headers`` and ``assemble_rows`` build the Profile; so the
  Profile, and ``top`` of it, equal the DuckDB store's.
- A selection of several kinds of profile (types or sample types) is refused
  with the kinds found; select one with profile_type.
- ``regressions`` is the store's analysis (``analyses.regressions``) reading
  through ``engines.spark_regressions``: Spark sums the samples per (profile,
  stack) and per (profile, node), the driver runs the statistics, so the
  RegressionsResult equals the store's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.engines import spark_arrow as sa
from pyproflab.errors import StoreError, UsageError
from pyproflab.model import Profile
from pyproflab.store.merge import HEADER_COLUMNS, assemble_rows, merge_headers
from pyproflab.store.parquet import read_marker
from pyproflab.store.select import Selection, parse_time

if TYPE_CHECKING:
    from pyproflab.analyses.options import RegressionsOptions
    from pyproflab.analyses.regressions import RegressionsResult

DEDUP_SCHEMAS = {
    "stacks": schema.STORE_STACKS,
    "locations": schema.STORE_LOCATIONS,
    "functions": schema.STORE_FUNCTIONS,
    "mappings": schema.STORE_MAPPINGS,
    "label_sets": schema.STORE_LABEL_SETS,
}
_HEADER = [c.strip() for c in HEADER_COLUMNS.split(",")]


class SparkDataset:
    """A pyproflab Parquet dataset read by Spark (see the module docstring)."""

    def __init__(self, spark: Any, path: str | os.PathLike):
        self.spark = spark
        self.path = Path(path).absolute()  # the JVM resolves relative paths from its own cwd
        check_dataset(self.path)
        self.name = str(self.path)

    def _read(self, sub: str) -> Any:
        # Files only, no partition discovery: the profiles files carry service
        # and date themselves (service_name is the real name), samples need none.
        return self.spark.read.option("recursiveFileLookup", "true").parquet(str(self.path / sub))

    def samples(self) -> Any:
        """Every sample row (a Spark DataFrame; ids as the files hold them)."""
        return self._read("samples")

    def has_table(self, table: str) -> bool:
        """Whether the dataset holds ``table`` (one written whole, ``T.parquet``)."""
        return (self.path / f"{table}.parquet").is_file()

    def metric_samples(self) -> Any:
        """Every ``metric_samples`` row (a Spark DataFrame); a dataset without
        them is refused in one line."""
        if not self.has_table("metric_samples"):
            raise UsageError(f"{self.name}: the dataset holds no metric samples")
        return self.spark.read.parquet(str(self.path / "metric_samples.parquet"))

    def profiles(self, selection: Selection | None = None) -> Any:
        """The selected profiles' rows (a Spark DataFrame; ``service`` is the real name)."""

        p = (
            self._read("profiles")
            .drop("service", "date")
            .withColumnRenamed("service_name", "service")
        )
        cond = _condition(selection or Selection())
        return p.where(cond) if cond is not None else p

    def header_rows(
        self, selection: Selection | None = None, extra: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """The selected profiles' ``store.merge.HEADER_COLUMNS`` and ``extra``
        columns, one dict per profile by profile id (ids as Python ints)."""
        return _header_rows(self.profiles(selection), extra)

    def merged_profile(
        self, selection: Selection | None = None, *, sample_types: Sequence[str] | None = None
    ) -> Profile:
        """One profile merging the selected profiles, as ``Store.merged_profile``
        (profiles in the same order: by time taken, then content hash)."""
        selection = selection or Selection()
        taken = ("time", "window_start", "ingested_at", "content_hash")
        rows = sorted(
            self.header_rows(selection, taken),
            key=lambda r: (
                r["time"] or r["window_start"] or r["ingested_at"],
                r["time_nanos"],
                r["content_hash"],
            ),
        )
        if not rows:
            raise StoreError(f"no profiles match {selection.describe()}")
        _one_kind(self.profiles(selection))
        header, index_lists = merge_headers(rows, sample_types)
        merged = self._merged_samples(rows, index_lists, len(header["sample_types"]))
        k = len(header["sample_types"])
        n = merged.num_rows
        cols = [merged.column(f"v{j}").to_numpy() for j in range(k)]
        flat = np.column_stack(cols).ravel() if n else np.zeros(0, np.int64)
        values = pa.ListArray.from_arrays(
            pa.array(np.arange(0, n * k + 1, k, dtype=np.int32)), pa.array(flat, pa.int64())
        )
        return assemble_rows(
            self.fetch,
            self.name,
            _u64(merged.column("stack_id")),
            _u64(merged.column("label_set_id")),
            values,
            header,
            int(rows[0]["main_mapping_id"]),
        )

    def top(self, selection: Selection | None = None, **options: Any) -> Any:
        """``analyses.top.top`` of the merged selection: the same TopResult as the store's."""
        from pyproflab.analyses.top import top

        return top(self.merged_profile(selection), **options)

    def regressions(
        self, base: Any, new: Any, options: RegressionsOptions | None = None, /, **keywords: Any
    ) -> RegressionsResult:
        """``analyses.regressions.regressions`` of the ``base`` and ``new``
        selections (``Selection``s or dicts of their fields) and its options
        (an options object, keywords, or both), with its sums on Spark
        (``engines.spark_regressions``): the store's RegressionsResult; ``per``
        reads the dataset's metric samples."""
        from pyproflab.analyses.options import RegressionsOptions
        from pyproflab.analyses.regressions import regressions
        from pyproflab.engines.spark_regressions import SparkReads, refuse_per

        opts = RegressionsOptions.build(options, **keywords)
        refuse_per(self, opts.per)  # before any Spark job
        return regressions(SparkReads(self), base, new, opts)

    def _merged_samples(self, rows: list[dict], index_lists: list[list[int]], k: int) -> pa.Table:
        """(stack_id, label_set_id, v0..vk-1) of the merge, in first-sample order."""
        from pyspark.sql import functions as F

        sel = pa.table(
            {
                "profile_id": pa.array([r["profile_id"] for r in rows], pa.int64()),
                "o": pa.array(np.arange(len(rows)), pa.int64()),
                **{
                    f"i{j}": pa.array([idx[j] + 1 for idx in index_lists], pa.int32())
                    for j in range(k)
                },
            }
        )
        sel_df = self.spark.createDataFrame(sel)
        s = self.samples().select(
            "profile_id", sa.long_id("stack_id"), sa.long_id("label_set_id"), "values", "row_order"
        )
        joined = s.join(F.broadcast(sel_df), "profile_id")
        sums = [
            F.sum(F.element_at("values", F.col(f"i{j}"))).cast("long").alias(f"v{j}")
            for j in range(k)
        ]
        grouped = joined.groupBy("stack_id", "label_set_id").agg(
            *sums, F.min(F.struct("o", "row_order")).alias("first_row")
        )
        nonzero = F.lit(False)
        for j in range(k):
            nonzero = nonzero | (F.col(f"v{j}") != 0)
        return grouped.where(nonzero).orderBy("first_row").toArrow()

    def cpu_profile_seconds(self, selection: Selection) -> list[dict[str, Any]]:
        """``store.cpu_coverage.cpu_profile_seconds`` on Spark: the selected
        profiles with a ``cpu``/``nanoseconds`` sample type, each with ``cpu_ns``,
        that value summed over its samples (0 when none), by profile id."""
        from pyspark.sql import functions as F

        types = "transform(sample_types, t -> concat(t.type, '/', t.unit))"
        at = F.expr(f"array_position({types}, 'cpu/nanoseconds')").alias("i")
        cols = ["profile_id", "service", "instance", "time_nanos", "duration_nanos", "period"]
        p = self.profiles(selection).select(*cols, at).where(F.col("i") > 0)
        s = self.samples().select("profile_id", "values")
        cpu = F.coalesce(F.sum(F.element_at("values", F.col("i").cast("int"))), F.lit(0))
        t = p.join(s, "profile_id", "left").groupBy(*cols).agg(cpu.cast("long").alias("cpu_ns"))
        return t.orderBy("profile_id").toArrow().to_pylist()

    def fetch(self, table: str, id_col: str, wanted: np.ndarray) -> pa.Table:
        """The rows of a dedup table whose id is in ``wanted`` (``store.merge.Fetch``)."""
        from pyspark.sql import functions as F

        target = DEDUP_SCHEMAS[table]
        if len(wanted) == 0:
            return target.empty_table()
        keys = pa.table({id_col: pa.array(np.asarray(wanted, np.uint64).view(np.int64))})
        key_df = self.spark.createDataFrame(keys)
        rows = self.spark.read.parquet(str(self.path / f"{table}.parquet"))
        rows = rows.withColumn(id_col, sa.long_id(id_col)).join(
            F.broadcast(key_df), id_col, "left_semi"
        )
        got = rows.toArrow()
        return _to_store(got, target)


def _to_store(t: pa.Table, target: pa.Schema) -> pa.Table:
    """Spark's rows of a dedup table in the store's schema: the int64 id as uint64,
    nested DECIMAL(20,0) ids (Parquet UINT64 as Spark reads it) as uint64."""
    cols = []
    for f in target:
        col = t.column(f.name)
        if pa.types.is_int64(col.type) and pa.types.is_uint64(f.type):
            col = col.cast(pa.uint64(), safe=False)
        cols.append(col.cast(f.type))
    return pa.Table.from_arrays(cols, schema=target)


def _u64(col: pa.ChunkedArray) -> np.ndarray:
    return col.to_numpy().astype(np.int64).view(np.uint64)


def check_dataset(d: Path) -> None:
    """Refuse, in one line, a folder that is not a dataset this pyproflab reads
    (the export's rule, ``read_marker``; the files' checksums are checked by
    ``import_parquet``, not on every query)."""
    read_marker(d)


def _condition(sel: Selection) -> Any:
    """The Spark condition of a Selection (None: everything); same rules as ``Selection.where``."""
    from pyspark.sql import functions as F

    parts = []
    for col in ("service", "version", "instance", "profile_type"):
        vals = getattr(sel, col)
        if vals is not None:
            parts.append(
                F.col(col).isin([vals] if isinstance(vals, str) else [str(v) for v in vals])
            )
    taken = F.coalesce(F.col("time"), F.col("window_start"), F.col("ingested_at"))
    if sel.since is not None:
        parts.append(taken >= F.lit(parse_time(sel.since)))
    if sel.until is not None:
        parts.append(taken < F.lit(parse_time(sel.until)))
    for key, value in (sel.labels or {}).items():
        parts.append(F.element_at(F.col("labels"), F.lit(str(key))) == F.lit(str(value)))
    if sel.profile_ids is not None:
        parts.append(F.col("profile_id").isin([int(i) for i in sel.profile_ids]))
    out = None
    for p in parts:
        out = p if out is None else out & p
    return out


def _header_rows(profiles: Any, extra: Sequence[str] = ()) -> list[dict[str, Any]]:
    cols = [sa.long_id(c) if c == "main_mapping_id" else c for c in (*_HEADER, *extra)]
    t = profiles.select(*cols).orderBy("profile_id").toArrow()
    rows = t.to_pylist()
    for r in rows:
        r["main_mapping_id"] = int(np.int64(r["main_mapping_id"]).view(np.uint64))
    return rows


def _one_kind(profiles: Any) -> None:
    """Refuse a selection of several kinds of profile (the store narrows; here, say so)."""
    kinds = (
        profiles.select("profile_type", "period_type", "period_unit", "sample_types.type")
        .distinct()
        .toArrow()
    )
    if kinds.num_rows > 1:
        names = sorted({f"{r['profile_type']}" for r in kinds.to_pylist()})
        raise UsageError(
            f"the selection holds {kinds.num_rows} kinds of profile ({', '.join(names)}); "
            "select one with profile_type (or type=) so they can be merged"
        )


def open_spark(spark: Any, path: str | os.PathLike) -> SparkDataset:
    """A SparkDataset on the dataset at ``path``."""
    return SparkDataset(spark, path)
