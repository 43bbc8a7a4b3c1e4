"""Fast 64-bit hashes that group equal rows within one profile (numpy, unkeyed):
never stored and never an id. A match only proposes rows to compare; the
rows themselves decide (``same_lists``), so a collision costs time, never a
wrong answer. The ids that are stored are blake2b (``ids``).
"""

from __future__ import annotations

import numpy as np

U64 = np.uint64
_M1 = U64(0xBF58476D1CE4E5B9)
_M2 = U64(0x94D049BB133111EB)
_GOLDEN = U64(0x9E3779B97F4A7C15)
# Odd multiplier of the stack polynomial; any odd constant is a unit mod 2^64.
_P = U64(0xD6E8FEB86659FD93)


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise on uint64 (wraps mod 2^64 by design)."""
    x = np.asarray(x, dtype=U64)
    with np.errstate(over="ignore"):
        x = x ^ (x >> U64(30))
        x = x * _M1
        x = x ^ (x >> U64(27))
        x = x * _M2
        x = x ^ (x >> U64(31))
    return x


def combine(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Fold ``v`` into running hashes ``h`` (order matters)."""
    with np.errstate(over="ignore"):
        return mix(np.asarray(h, dtype=U64) * _GOLDEN + mix(np.asarray(v).astype(U64)))


def list_hash(values: np.ndarray, offsets: np.ndarray, seed: np.uint64) -> np.ndarray:
    """One hash per list of a flattened list column: sum_i mix(v_i)·P^(n-1-i) mod 2^64,
    then mixed with the list length and ``seed``. ``offsets`` has n_lists+1 entries."""
    offsets = np.asarray(offsets, dtype=np.int64)
    starts, ends = offsets[:-1], offsets[1:]
    lengths = ends - starts
    n_lists = len(lengths)
    acc = np.zeros(n_lists, dtype=U64)
    if len(values):
        vals = mix(np.asarray(values, dtype=U64)[offsets[0] : offsets[-1]])
        rel_starts = starts - offsets[0]
        # Exponent of each element: distance from the end of its own list.
        exps = (np.repeat(rel_starts + lengths, lengths) - 1) - np.arange(len(vals))
        max_len = int(lengths.max()) if n_lists else 0
        powers = np.ones(max(max_len, 1), dtype=U64)
        with np.errstate(over="ignore"):
            for i in range(1, max_len):
                powers[i] = powers[i - 1] * _P
            terms = vals * powers[exps]
        nonempty = lengths > 0
        if nonempty.any():
            # reduceat sums each nonempty list: the elements from its start to the
            # next nonempty list's start are exactly its own (empty lists have none).
            sums = np.add.reduceat(terms, rel_starts[nonempty])
            acc[nonempty] = sums
    with np.errstate(over="ignore"):
        return mix(acc ^ mix(lengths.astype(U64) + seed))


# Samples verified per step when grouping equal stacks (bounds the index arrays).
_VERIFY_CHUNK = 1 << 22


def same_lists(flat: np.ndarray, offsets: np.ndarray, rep: np.ndarray) -> np.ndarray:
    """Per list i: is list i element-for-element equal to list rep[i]?"""
    starts, lengths = offsets[:-1], np.diff(offsets)
    same = lengths == lengths[rep]
    todo = np.flatnonzero(same & (lengths > 0) & (rep != np.arange(len(rep))))
    # Chunks of lists bounded by element count, so memory stays O(chunk).
    cum = np.cumsum(lengths[todo])
    cuts = (
        np.searchsorted(cum, np.arange(_VERIFY_CHUNK, int(cum[-1]), _VERIFY_CHUNK))
        if len(todo)
        else np.zeros(0, np.int64)
    )
    for part in np.split(todo, cuts):
        if not len(part):
            continue
        ln = lengths[part]
        owner = np.repeat(np.arange(len(part)), ln)
        rank = np.arange(len(owner)) - np.repeat(np.cumsum(ln) - ln, ln)
        a = flat[starts[part][owner] + rank]
        b = flat[starts[rep[part]][owner] + rank]
        bad = np.bincount(owner[a != b], minlength=len(part)) > 0
        same[part[bad]] = False
    return same
