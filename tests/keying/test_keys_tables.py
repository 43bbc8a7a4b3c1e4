"""The table paths of keying (``keys.remap_local``, ``keys._used``) against their
search paths (``ids.remap``, ``np.isin``): a profile's ids are small, so keying
looks them up in a table; the answers must be the search's, and ids outside the
table must never index past it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pyproflab import schema
from pyproflab.keying import ids, keys


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
    got = keys.remap_local(local, table, content)
    assert got.dtype == ids.U64
    np.testing.assert_array_equal(got, ids.remap(local, table, content))


def test_remap_sends_ids_outside_the_table_to_zero() -> None:
    table = np.arange(1, 101, dtype=ids.U64)
    content = table * ids.U64(7)
    local = np.array([0, 1, 100, 101, 102, 10**6, 2**63, 2**64 - 1], dtype=ids.U64)
    got = keys.remap_local(local, table, content)
    assert got.tolist() == [0, 7, 700, 0, 0, 0, 0, 0]


@pytest.mark.parametrize("seed", range(40))
def test_used_by_table_equals_isin(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    table, refs = _case(rng, int(rng.integers(1, 3000)), int(rng.integers(0, 5000)))
    outside = np.array([2**63, 2**64 - 1, 10**7], dtype=ids.U64)
    refs = np.concatenate([refs, outside[: int(rng.integers(0, 4))]])
    np.testing.assert_array_equal(keys._used(table, refs), np.isin(table, refs))


def _words_per_row(rows: list[dict], mapping: list[int], fn: list[int]) -> list[int]:
    """``ids.location_words`` written out row by row: the format it documents."""
    out, j = [], 0
    for row, m in zip(rows, mapping, strict=True):
        out += [m, row["address"], int(row["is_folded"]), len(row["lines"])]
        for line in row["lines"]:
            out += [fn[j], line["line"] % 2**64, line["column"] % 2**64]
            j += 1
    return out


@pytest.mark.parametrize("seed", range(30))
def test_location_words_follow_the_documented_layout(seed: int) -> None:
    rng = np.random.default_rng(2000 + seed)
    n = int(rng.integers(0, 60))
    rows = [
        {
            "id": k + 1,
            "mapping_id": 1,
            "address": int(rng.integers(0, 2**63)),
            "is_folded": bool(rng.integers(0, 2)),
            "lines": [
                {"function_id": 1, "line": int(rng.integers(-5, 900)), "column": 0}
                for _ in range(int(rng.choice([0, 1, 1, 1, 2, 5])))
            ],
        }
        for k in range(n)
    ]
    table = pa.Table.from_pylist(rows, schema=schema.PROFILE_LOCATIONS)
    if n > 4 and seed % 2:  # a slice of a longer column, in two chunks
        table = pa.concat_tables([table.slice(1, 2), table.slice(3)])
        rows = rows[1:]
    mapping = [int(x) for x in rng.integers(0, 2**64, size=len(rows), dtype=np.uint64)]
    fn = [
        int(x)
        for x in rng.integers(0, 2**64, size=sum(len(r["lines"]) for r in rows), dtype=np.uint64)
    ]
    words, starts = ids.location_words(
        table, np.array(mapping, dtype=ids.U64), np.array(fn, dtype=ids.U64)
    )
    assert words.tolist() == _words_per_row(rows, mapping, fn)
    assert (
        starts.tolist()
        == [0] + np.cumsum([4 + 3 * len(r["lines"]) for r in rows], dtype=np.int64).tolist()
    )
