"""A per-process cache of content ids: content this process has hashed before
takes its id from here instead of blake2b (issue 14: a fleet's profiles repeat
most of their functions, locations and stacks from file to file).

Rules:

- A row's content is its columns (``ids.Column``: every field of the row, what
  ``sent`` compares). The cache finds a row by the exact bytes of its columns
  (``pyproflab._intern``: a keyed SipHash only finds candidates, the bytes
  decide), so it never answers with the id of other content, whatever collides.
- Each kind of row (functions, locations, stacks) has its own table: equal bytes
  of two kinds are different content with different ids.
- An id held here was computed by ``ids`` from the same bytes in this process,
  so ids are the same with the cache, without it, or after it was cleared.
- Bounded: before each lookup, when the bytes held (every kind's keys, their
  offsets, slots and ids, as allocated) pass half of ``max_bytes``, the whole
  cache is cleared: its arrays grow by doubling, so a lookup can at most double
  them, and the cache holds at most ``max_bytes`` plus twice the rows of one
  lookup (one profile's table), whatever the number of files.
- Each lookup also gives every row's entry (``Entries``): rows with the same
  entry of the same generation have equal content byte for byte. A clear starts
  new generations, never reused in the process (``sent`` trims by entries).
- Off (every row hashed, no entries) without the C extensions or with
  ``max_bytes`` 0; ``ids`` hashes with hashlib then (``PYPROFLAB_PURE_KEYS``).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pyproflab.native import optional_extension

# The interner is shared with the merge; PYPROFLAB_PURE_KEYS=1 turns the cache off
# along with the store's other C path (_blake.c).
_intern = optional_extension("pyproflab._intern", "PYPROFLAB_PURE_KEYS")

#: Default bound of one process's cache: a large CPU profile's rows (23,000
#: functions and locations, 15,000 stacks) take ~15 MiB of it, so it holds the
#: content of a binary or two before it is cleared.
MAX_BYTES = 64 * 2**20

Column = tuple[np.ndarray, np.ndarray]  # (values, int64 starts: rows + 1), as ids.Column
#: the ids (never 0) of the given rows (int64 row numbers; None: every row)
HashRows = Callable[[np.ndarray | None], np.ndarray]

_GENERATIONS = itertools.count(1)


@dataclass(frozen=True)
class Entries:
    """Each row's entry in one generation of a kind's table (module rules)."""

    generation: int
    codes: np.ndarray  # int64, one per row

    def take(self, rows: np.ndarray) -> Entries:
        return Entries(self.generation, self.codes[rows])


class _Kind:
    """One kind's table: the interned content and the id of each entry."""

    def __init__(self) -> None:
        assert _intern is not None
        self.interner = _intern.Interner(os.urandom(16))
        self.ids = np.zeros(1024, np.uint64)
        self.generation = next(_GENERATIONS)

    @property
    def nbytes(self) -> int:
        return int(self.interner.nbytes) + self.ids.nbytes

    def add(self, new_ids: np.ndarray) -> None:
        """The ids of the entries numbered last (``len(interner)`` counts them)."""
        n, held = len(self.interner), len(self.interner) - len(new_ids)
        if n > len(self.ids):
            grown = np.zeros(max(n, 2 * len(self.ids)), np.uint64)
            grown[:held] = self.ids[:held]
            self.ids = grown
        self.ids[held:n] = new_ids


class DigestCache:
    """Content ids of one process by exact content (module rules)."""

    def __init__(self, max_bytes: int = MAX_BYTES):
        self.max_bytes = max_bytes
        self._kinds: dict[str, _Kind] = {}

    @property
    def enabled(self) -> bool:
        return _intern is not None and self.max_bytes > 0

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes for k in self._kinds.values())

    def clear(self) -> None:
        self._kinds = {}

    def ids(
        self, kind: str, columns: list[Column], hash_rows: HashRows
    ) -> tuple[np.ndarray, Entries | None]:
        """(the id of every row, their entries): ids of content seen before from the
        cache, the others from ``hash_rows`` (then held). Without the cache every
        row is hashed and there are no entries."""
        if not self.enabled:
            return hash_rows(None), None
        if 2 * self.nbytes > self.max_bytes:  # a lookup may double every array
            self.clear()
        table = self._kinds.get(kind)
        if table is None:
            table = self._kinds[kind] = _Kind()
        n = len(columns[0][1]) - 1
        codes, new = np.empty(n, np.int64), np.empty(n, np.int64)
        try:
            fresh = table.interner.number_rows(_byte_columns(columns), codes, new)
            if fresh:
                new_ids = hash_rows(new[:fresh])
                if len(new_ids) != fresh:
                    raise ValueError(f"{kind}: {len(new_ids)} ids for {fresh} new rows")
                table.add(new_ids)
        except BaseException:
            # Keys may be interned without their ids: never answer with those.
            self.clear()
            raise
        return table.ids[codes], Entries(table.generation, codes)


def _byte_columns(columns: list[Column]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(contiguous values, int64 byte offsets) of each column, as the interner reads them."""
    out = []
    for values, starts in columns:
        values = np.ascontiguousarray(values)
        out.append((values, np.asarray(starts, dtype=np.int64) * values.itemsize))
    return out
