"""``regressions`` over the Parquet dataset on Spark: the store's analysis, Spark's sums.

``SparkReads`` is the Spark engine's ``analyses.regressions.reads.ProfileReads``:
``analyses.regressions.regressions`` given it runs every stage as it does on
the store (node paths, units, tests, intervals, order), and only the reads
that grow with the fleet run on Spark. Rules (those of ``ProfileReads``, on
the dataset's files):

- The profiles are ``SparkDataset.profiles(selection)``, by profile id.
- Per (profile, stack): the selected samples summed by Spark at each
  profile's position of the sample type, stacks in the order of their first
  sample (``row_order``, the store's rowid), as the store orders them.
- Per (profile, node): the (profile, stack) sums and the stack -> node
  incidence the driver built are joined and summed by Spark (the product of
  profiles, stacks and their frames is the part that grows).
- Rows of the dedup tables come from ``SparkDataset``'s fetch.
- ``per=COUNTER`` reads the counter from the dataset's ``metric_samples``
  (summed per service, instance and time by Spark, as the store's query); a
  dataset without them (format 2, or written by spark ingest) is refused in
  one line before any Spark job.

So the result equals the store's on the same profiles (``tests/engines``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from pyproflab.analyses.regressions.reads import ProfileReads
from pyproflab.engines import spark_arrow as sa
from pyproflab.errors import UsageError
from pyproflab.schema import COUNTER_SAMPLES, TIMESTAMP_UTC

NODE_SUMS = pa.schema([(c, pa.int64()) for c in ("p", "node", "flat", "cum")])


class SparkReads(ProfileReads):
    """The regression stages' reads of a ``SparkDataset`` (module docstring)."""

    def __init__(self, dataset: Any):
        self.dataset = dataset
        self.spark = dataset.spark
        self.name = dataset.name

    def selected_profiles(self, selection: Any) -> list[dict[str, Any]]:
        return self.dataset.header_rows(selection, ("service", "instance", "content_hash"))

    def _values_at(self, pids: np.ndarray, positions: list[int]) -> Any:
        """The selected profiles' samples with ``x``, the value at each
        profile's 1-based position, and ``stack_id`` as int64 bits."""
        from pyspark.sql import functions as F

        sel = pa.table(
            {"profile_id": pa.array(pids, pa.int64()), "i": pa.array(positions, pa.int32())}
        )
        samples = self.dataset.samples().select(
            "profile_id", sa.long_id("stack_id"), "values", "row_order"
        )
        joined = samples.join(F.broadcast(self.spark.createDataFrame(sel)), "profile_id")
        return joined.withColumn("x", F.element_at("values", F.col("i")))

    def stack_sums(self, pids: np.ndarray, positions: list[int]) -> pa.Table:
        from pyspark.sql import functions as F

        grouped = (
            self._values_at(pids, positions)
            .groupBy("profile_id", "stack_id")
            .agg(
                F.sum("x").cast("long").alias("v"),
                F.sum(F.abs("x")).cast("long").alias("a"),
                F.min("row_order").alias("first_row"),
            )
            .orderBy("profile_id", "first_row")
        )
        t = grouped.select("profile_id", "stack_id", "v", "a").toArrow()
        return t.set_column(1, "stack_id", _unsigned(t.column("stack_id")))

    def value_total(self, pids: np.ndarray, positions: list[int]) -> float:
        from pyspark.sql import functions as F

        got = self._values_at(pids, positions).agg(F.sum(F.abs("x")).cast("double").alias("v"))
        return float(got.toArrow().column("v")[0].as_py() or 0.0)

    def node_sums(self, values: pa.Table, incidence: pa.Table) -> pa.Table:
        from pyspark.sql import functions as F

        if values.num_rows == 0 or incidence.num_rows == 0:
            return NODE_SUMS.empty_table()
        to_spark = self.spark.createDataFrame
        v = to_spark(sa.reinterpret(values, sa.signed_schema(values.schema)))
        i = to_spark(sa.reinterpret(incidence, sa.signed_schema(incidence.schema)))
        sums = (
            v.join(i, "stack_id")
            .groupBy("p", "node")
            .agg(
                F.sum(F.when(F.col("leaf"), F.col("v")).otherwise(F.lit(0)))
                .cast("long")
                .alias("flat"),
                F.sum("v").cast("long").alias("cum"),
            )
            .orderBy("p", "node")
        )
        return sums.toArrow()

    def fetch(self, table: str, id_col: str, wanted: np.ndarray) -> pa.Table:
        return self.dataset.fetch(table, id_col, wanted)

    def counter_samples(self, metric: str, services: list[str | None]) -> pa.Table:
        from pyspark.sql import functions as F

        if not self.dataset.has_table("metric_samples"):  # as the store: no rows
            return COUNTER_SAMPLES.empty_table()
        names = [s for s in services if s is not None]
        rows = self.dataset.metric_samples().where(
            (F.col("metric") == metric) & F.col("service").isin(names)
        )
        t = (
            rows.groupBy("service", "instance", "time")
            .agg(F.sum("value").alias("value"))
            .orderBy("service", "instance", "time")
            .toArrow()
        )
        return pa.table(
            {
                "service": t.column("service").cast(pa.string()),
                "instance": t.column("instance").cast(pa.string()),
                "time": t.column("time").cast(TIMESTAMP_UTC),
                "value": t.column("value").cast(pa.float64()),
            }
        )


def refuse_per(dataset: Any, counter: str | None) -> None:
    """A counter as the rates' denominator needs the dataset's metric samples:
    refused in one line when it has none."""
    if counter and not dataset.has_table("metric_samples"):
        raise UsageError(
            f"per={counter} needs metric samples, which the dataset {dataset.name} does not "
            "hold (exported before pyproflab's dataset format 3, or written by spark "
            "ingest); export the store again, or run regressions with per on the store"
        )


def _unsigned(col: pa.ChunkedArray) -> pa.Array:
    return pa.array(col.to_numpy().astype(np.int64).view(np.uint64))
