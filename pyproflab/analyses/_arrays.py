"""NumPy views of a Profile's Arrow tables, shared by the analyses."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pyproflab.arrays import to_numpy


def to_np(arr: pa.Array | pa.ChunkedArray, dtype=None) -> np.ndarray:
    out = to_numpy(arr)
    return out.astype(dtype, copy=False) if dtype is not None else out


class IdIndex:
    """Maps ids (uint64) to row numbers of a table; unknown ids map to -1."""

    def __init__(self, ids: np.ndarray):
        ids = np.asarray(ids, dtype=np.uint64)
        self.n = len(ids)
        # The usual case: ids are 1..n in order, so the row is id-1.
        expected = np.arange(1, self.n + 1, dtype=np.uint64)
        self.dense = bool(self.n == 0 or np.array_equal(ids, expected))
        if not self.dense:
            self.order = np.argsort(ids, kind="stable")
            self.sorted = ids[self.order]

    def rows(self, query: np.ndarray) -> np.ndarray:
        query = np.asarray(query, dtype=np.uint64)
        if self.n == 0:
            return np.full(len(query), -1, dtype=np.int64)
        if self.dense:
            rows = query.astype(np.int64) - 1
            rows[(query == 0) | (query > self.n)] = -1
            return rows
        pos = np.searchsorted(self.sorted, query)
        pos_c = np.minimum(pos, self.n - 1)
        found = self.sorted[pos_c] == query
        return np.where(found, self.order[pos_c], -1).astype(np.int64)
