"""The table paths of keying (``keys._remap``, ``keys._used``) against their
search paths (``ids.remap``, ``np.isin``): a profile's ids are small, so keying
looks them up in a table; the answers must be the search's, and ids outside the
table must never index past it."""

from __future__ import annotations

import numpy as np
import pytest

from pyproflab.store import ids, keys


def _case(rng: np.random.Generator, n: int, refs: int) -> tuple[np.ndarray, np.ndarray]:
    """(a table's ids: 1..n shuffled, or spread ids; references into them, 0 included)."""
    if rng.random() < 0.5:
        table = rng.permutation(np.arange(1, n + 1, dtype=ids.U64))
    else:
        table = rng.choice(np.arange(1, 6 * n + 2, dtype=ids.U64), size=n, replace=False)
    local = rng.choice(np.concatenate([table, [ids.U64(0)]]), size=refs)
    return table, local.astype(ids.U64)


@pytest.mark.parametrize("seed", range(40))
def test_remap_by_table_equals_the_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    table, local = _case(rng, int(rng.integers(1, 3000)), int(rng.integers(0, 5000)))
    content = rng.integers(1, 2**63, size=len(table), dtype=np.int64).astype(ids.U64)
    got = keys._remap(local, table, content)
    assert got.dtype == ids.U64
    np.testing.assert_array_equal(got, ids.remap(local, table, content))


def test_remap_sends_ids_outside_the_table_to_zero() -> None:
    table = np.arange(1, 101, dtype=ids.U64)
    content = table * ids.U64(7)
    local = np.array([0, 1, 100, 101, 102, 10**6, 2**63, 2**64 - 1], dtype=ids.U64)
    got = keys._remap(local, table, content)
    assert got.tolist() == [0, 7, 700, 0, 0, 0, 0, 0]


@pytest.mark.parametrize("seed", range(40))
def test_used_by_table_equals_isin(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    table, refs = _case(rng, int(rng.integers(1, 3000)), int(rng.integers(0, 5000)))
    outside = np.array([2**63, 2**64 - 1, 10**7], dtype=ids.U64)
    refs = np.concatenate([refs, outside[: int(rng.integers(0, 4))]])
    np.testing.assert_array_equal(keys._used(table, refs), np.isin(table, refs))
