"""The merge's C interner (pyproflab/_intern.c) against Arrow's hash encoding.

Rules checked: the extension is built and used in this installation (unless
``PYPROFLAB_PURE_MERGE`` is set); ``Numbering`` gives the same numbers and the
same new positions with and without it, batch after batch, for every kind of key
the merge makes (strings, sliced arrays, fixed-size binaries, ragged binaries,
64-bit ids), empty keys and batches included; keys are told apart by their bytes,
never by their hash (a table of many keys, keys that differ in one byte or only
in length); offsets that do not fit the data give ValueError, never a crash; the
C source compiles without warnings under -Wall -Wextra.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.testenv import assert_compiles_without_warnings

import pyproflab
from pyproflab.analyses import _arrays
from pyproflab.analyses._arrays import Numbering, key_bytes, ragged_keys, row_keys

SOURCE = Path(pyproflab.__file__).with_name("_intern.c")
needs_intern = pytest.mark.skipif(
    _arrays._intern is None, reason="the _intern C extension is not built"
)


def _pure() -> Numbering:
    n = Numbering()
    n._interner = None
    return n


def _same(batches: list[pa.Array]) -> None:
    fast, slow = Numbering(), _pure()
    for keys in batches:
        (c1, n1), (c2, n2) = fast.number(keys), slow.number(keys)
        assert c1.tolist() == c2.tolist()
        assert n1.tolist() == n2.tolist()
        assert len(fast) == len(slow)


def test_the_extension_is_used_here() -> None:
    if os.environ.get("PYPROFLAB_PURE_MERGE", "") not in ("", "0"):
        pytest.skip("PYPROFLAB_PURE_MERGE forces the Arrow path")
    assert _arrays._intern is not None, "pyproflab._intern was not built"
    assert Numbering()._interner is not None


@needs_intern
def test_strings_in_batches_number_alike() -> None:
    _same(
        [
            pa.array(["a", "b", "a", "", "c"]),
            pa.array(["c", "d", "", "é", "a"]),
            pa.array([], pa.string()),
            pa.array(["x", "y", "x", "z"]).slice(1),
            pa.array(["z", "q", "y"], pa.large_string()).cast(pa.string()),
        ]
    )


@needs_intern
def test_every_kind_of_merge_key_numbers_alike() -> None:
    rng = np.random.default_rng(7)
    ids = [pa.array(rng.integers(0, 60, 800).astype(np.uint64)) for _ in range(3)]
    _same([ids[0], ids[1].slice(5), ids[2]])
    rows = [row_keys([rng.integers(0, 4, 400), rng.integers(0, 5, 400)]) for _ in range(3)]
    _same([rows[0], rows[1], rows[2].slice(3, 100)])
    ragged = []
    for _ in range(3):
        cuts = np.sort(rng.integers(0, 300, 121)).astype(np.int64)
        cuts[0] = 0
        ragged.append(ragged_keys(rng.integers(0, 3, 300), cuts))
    _same(ragged)


@needs_intern
def test_many_keys_grow_the_table() -> None:
    # Growth of the table, the offsets and the arena, many times over.
    batches = [
        pa.array([f"k{i % 90_000}" for i in range(k, k + 40_000)])
        for k in range(0, 200_000, 40_000)
    ]
    _same(batches)


@needs_intern
def test_keys_apart_by_bytes() -> None:
    # One byte apart, or only longer by zero bytes: all distinct.
    keys = pa.array(
        [b"", b"\x00", b"\x00\x00", b"a" * 100, b"a" * 99 + b"b", b"a" * 101], pa.binary()
    )
    codes, new = Numbering().number(keys)
    assert codes.tolist() == [0, 1, 2, 3, 4, 5]
    assert new.tolist() == [0, 1, 2, 3, 4, 5]


@needs_intern
@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.binary(max_size=12), max_size=30), min_size=1, max_size=4))
def test_random_binary_batches_number_alike(batches: list[list[bytes]]) -> None:
    _same([pa.array(b, pa.binary()) for b in batches])


@needs_intern
def test_offsets_that_do_not_fit_are_refused() -> None:
    inner = _arrays._intern.Interner(os.urandom(16))  # type: ignore[union-attr]
    out = np.empty(4, np.int64)
    for offsets in ([0, 5], [3, 1], [-1, 2], []):
        with pytest.raises(ValueError):
            inner.number(b"abcd", np.array(offsets, np.int64), out, out.copy())
    with pytest.raises(ValueError):
        inner.number(b"abcd", np.array([0, 1, 2], np.int64), np.empty(1, np.int64), out)
    with pytest.raises(ValueError):
        _arrays._intern.Interner(b"short")  # type: ignore[union-attr]
    assert inner.number(b"ab", np.array([0], np.int64), out, out.copy()) == 0  # no keys
    assert len(inner) == 0


def test_null_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="null"):
        key_bytes(pa.array(["a", None]))


def test_the_source_compiles_without_warnings() -> None:
    assert_compiles_without_warnings(SOURCE)
