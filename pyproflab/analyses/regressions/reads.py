"""Where ``regressions`` reads profiles: the seam between an engine and the statistics.

The stages ask a ``ProfileReads`` for the few answers that grow with the
fleet: the selected profiles' headers, per (profile, stack) sums, per
(profile, node) flat and cum, and rows of the dedup tables. Everything after
them (node paths, units, tests, intervals, order, grouping) is the same code
for every engine, so two engines that answer alike give the same result row
for row. ``StoreReads`` answers from the DuckDB store (``store/regressions.py``);
``engines.spark_regressions`` from the Parquet dataset on Spark.

Rules every engine's answers follow (the store's are the reference):

- ``selected_profiles``: one dict per profile the selection matches, by
  profile id: the columns of ``store.merge.HEADER_COLUMNS`` (ids as Python
  ints), ``service``, ``instance`` and ``content_hash``.
- ``stack_sums``: per (profile, stack) with samples, ``profile_id``,
  ``stack_id`` (uint64), ``v`` the sum of the value at the profile's 1-based
  position and ``a`` the sum of its absolute values (int64); by profile id,
  and within a profile stacks in the order of their first sample.
- ``value_total``: the sum over the profiles' samples of |value| at the
  1-based positions (a float).
- ``node_sums``: per (p, node) of ``values`` (p, stack_id, v) joined with
  ``incidence`` (stack_id, node, leaf), ``flat`` the sum of ``v`` where the
  node is the leaf (0 if never) and ``cum`` the sum over every stack holding
  it (int64); ordered by (p, node).
- ``fetch``: ``store.merge.Fetch``, the rows of a dedup table by id.
- ``counter_samples``: (service, instance, time, value) of a counter, summed
  over its label sets per instance and time, in time order (for ``per``, and
  ``process_cpu_seconds_total`` for ``analyses.cpu_coverage``); no rows when
  the source holds no metric samples at all.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import pyarrow as pa


class ProfileReads(ABC):
    """What the regression stages read (see the module docstring for the rules)."""

    #: Names the source in errors (the store's path, the dataset's folder).
    name: str

    @abstractmethod
    def selected_profiles(self, selection: Any) -> list[dict[str, Any]]: ...

    @abstractmethod
    def stack_sums(self, pids: np.ndarray, positions: list[int]) -> pa.Table: ...

    @abstractmethod
    def value_total(self, pids: np.ndarray, positions: list[int]) -> float: ...

    @abstractmethod
    def node_sums(self, values: pa.Table, incidence: pa.Table) -> pa.Table: ...

    @abstractmethod
    def fetch(self, table: str, id_col: str, wanted: np.ndarray) -> pa.Table: ...

    @abstractmethod
    def counter_samples(self, metric: str, services: list[str | None]) -> pa.Table: ...


class StoreReads(ProfileReads):
    """The DuckDB store's answers: the queries of ``store/regressions.py``."""

    def __init__(self, store: Any):
        self.store = store
        self.name = store.name

    def selected_profiles(self, selection: Any) -> list[dict[str, Any]]:
        from pyproflab.store import regressions as q

        return q.selected_profiles(self.store, selection)

    def stack_sums(self, pids: np.ndarray, positions: list[int]) -> pa.Table:
        from pyproflab.store import regressions as q

        return q.stack_sums(self.store, pids, positions)

    def value_total(self, pids: np.ndarray, positions: list[int]) -> float:
        from pyproflab.store import regressions as q

        return q.value_total(self.store, pids, positions)

    def node_sums(self, values: pa.Table, incidence: pa.Table) -> pa.Table:
        from pyproflab.store import regressions as q

        return q.node_sums(self.store, values, incidence)

    def fetch(self, table: str, id_col: str, wanted: np.ndarray) -> pa.Table:
        from pyproflab.store.merge import store_fetch

        return store_fetch(self.store, table, id_col, wanted)

    def counter_samples(self, metric: str, services: list[str | None]) -> pa.Table:
        from pyproflab.store import regressions as q

        return q.counter_samples(self.store, metric, services)


def reads_of(source: Any) -> ProfileReads:
    """``source`` if it is a ``ProfileReads`` (another engine's), else the
    store's reads of it (a DuckDB ``Store``)."""
    return source if isinstance(source, ProfileReads) else StoreReads(source)
