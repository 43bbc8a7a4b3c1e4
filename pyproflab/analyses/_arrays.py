"""NumPy views of a Profile's Arrow tables, shared by the analyses, and keys built
as arrays (the merge numbers its mappings, functions, locations and samples with
them)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from pyproflab.arrays import to_numpy
from pyproflab.native import optional_extension

# The C interner (PYPROFLAB_PURE_MERGE=1 forces Arrow's hash encoding, same numbers).
_intern = optional_extension("pyproflab._intern", "PYPROFLAB_PURE_MERGE")


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


# --- keys as arrays ---------------------------------------------------------------
#
# pprof merges with hash maps keyed by strings, one location at a time. Here every
# key is a binary row built with numpy, and Arrow's hash encoding numbers the
# distinct keys in the order they first appear: that is pprof's order of ids.


class Numbering:
    """Distinct keys numbered 0, 1, … in order of first appearance, across batches.

    Each distinct key is kept once (its bytes), so memory grows with the distinct
    keys, not with the batches. With the C extension (``_intern.c``) a batch
    costs its own keys only; without it the keys seen so far are hashed again,
    with Arrow's hash encoding, in front of every new batch. Keys are equal when
    their bytes are: both give the same numbers."""

    def __init__(self) -> None:
        self.seen: pa.Array | None = None
        self._interner = _intern.Interner(os.urandom(16)) if _intern is not None else None

    def __len__(self) -> int:
        if self._interner is not None:
            return len(self._interner)
        return 0 if self.seen is None else len(self.seen)

    def number(self, keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """(each key's number; positions in ``keys`` of keys never seen before)."""
        if self._interner is not None:
            data, offsets = key_bytes(keys)
            codes = np.empty(len(keys), dtype=np.int64)
            new = np.empty(len(keys), dtype=np.int64)
            fresh = self._interner.number(data, offsets, codes, new)
            return codes, new[:fresh]
        import pyarrow.compute as pc  # not at import: it costs CLI start-up time

        n0 = len(self)
        both = keys if self.seen is None else pa.concat_arrays([self.seen, keys])
        enc = pc.dictionary_encode(both)
        self.seen = enc.dictionary
        codes = to_np(enc.indices, np.int64)[n0:]
        # Numbers are handed out in order, so a key is new where its number exceeds
        # every number before it.
        if not len(codes):
            return codes, np.zeros(0, np.int64)
        before = np.maximum.accumulate(np.concatenate([[n0 - 1], codes[:-1]]))
        return codes, np.flatnonzero(codes > before)


def key_bytes(keys: pa.Array) -> tuple[pa.Buffer | bytes, np.ndarray]:
    """(data, int64 offsets: len + 1) of an array's keys, each key its value's
    bytes: strings and binaries as stored, fixed-size binaries and fixed-width
    numbers as their bytes. Nulls are refused (no key column has them)."""
    if keys.null_count:
        raise ValueError("keys must not be null")
    t, n, at = keys.type, len(keys), keys.offset
    bufs = keys.buffers()
    if (
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or (pa.types.is_large_binary(t))
    ):
        wide = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        dtype = np.int64 if wide else np.int32
        offsets = np.frombuffer(bufs[1], dtype=dtype, count=at + n + 1)[at:].astype(np.int64)
        return (bufs[2] if bufs[2] is not None else b""), offsets
    if pa.types.is_fixed_size_binary(t) or (pa.types.is_primitive(t) and t.bit_width % 8 == 0):
        width = t.byte_width
        offsets = (np.arange(n + 1, dtype=np.int64) + at) * width
        return (bufs[1] if bufs[1] is not None else b""), offsets
    raise TypeError(f"no byte keys for {t}")


def row_keys(columns: list[np.ndarray]) -> pa.Array:
    """One fixed-width binary key per row of 64-bit integer columns."""
    m = np.ascontiguousarray(np.stack([c.view(np.int64) for c in columns], axis=1))
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(8 * m.shape[1]), len(m), [None, pa.py_buffer(m)]
    )


def ragged_keys(words: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """One binary key per row of 64-bit ``words`` cut at ``offsets`` (rows + 1)."""
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(),
        len(offsets) - 1,
        [None, pa.py_buffer(offsets.astype(np.int64) * 8), pa.py_buffer(words.view(np.int64))],
    )


def lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """values[i] where keys[i] == query, else 0 (keys unique, non-negative)."""
    if not len(keys):
        return np.zeros(len(query), dtype=values.dtype)
    top = int(keys.max())
    if top <= 4 * len(keys) + 1024:
        # Ids are small and dense in practice (1..n): a table beats a search.
        table = np.zeros(top + 2, dtype=values.dtype)
        table[keys] = values
        return table[np.minimum(query, top + 1)]
    srt = np.argsort(keys)
    keys, values = keys[srt], values[srt]
    pos = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    return np.where(keys[pos] == query, values[pos], 0)


def ragged_positions(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each element of rows cut at ``offsets``: (its row, its position in the row)."""
    counts = np.diff(offsets)
    row = np.repeat(np.arange(len(counts)), counts)
    return row, np.arange(int(offsets[-1])) - offsets[:-1][row]
