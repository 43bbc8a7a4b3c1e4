"""The digest cache of content ids (keying/digests.py, issue 14).

Rules checked: on real profiles (the recorded ones, the public corpus, and
profiles made of overlapping halves of them, as a fleet's are) every keyed table
is the same with the cache, with it disabled, on the hashlib path (forced by
the environment too), in either order, a second time (every row from the cache)
and after the cache is cleared mid-way; rows are told apart by the exact bytes
of their columns, a column boundary included; the cache is bounded (cleared
whole past half of ``max_bytes``, so it never holds more than that plus twice
one lookup); a lookup whose hashing fails leaves nothing behind; ``SentMemory``
trimming by the cache's entries drops exactly what trimming by content drops,
and after a clear drops nothing sent in an older generation; ``_blake``'s
``rows`` argument hashes those rows only.
"""

from __future__ import annotations

import functools
import os
import pickle
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from support.testenv import CORPUS, RECORDED_GO

from pyproflab.decode import decode_bytes
from pyproflab.keying import digests, ids
from pyproflab.keying.keys import KeyedProfile, ProfileMeta, key_profile
from pyproflab.keying.sent import SentMemory
from pyproflab.model import Profile

needs_c = pytest.mark.skipif(
    ids._blake is None or digests._intern is None,
    reason="the C extensions pyproflab.keying._blake and pyproflab._intern are not built",
)

RECORDED = ["cpu.pb.gz", "heap.pb.gz", "mutex.pb.gz", "goroutine.pb.gz", "notesd-cpu0.pb.gz"]
CORPUS_FILES = [
    "parca/pkg/query/testdata/profile1.pb.gz",
    "pyroscope/pkg/og/convert/pprof/testdata/heap.pb.gz",
    "pyroscope/pkg/og/convert/pprof/testdata/cpu-exemplars.pb.gz",
    "google-pprof/internal/proftest/testdata/large.cpu",
]
TABLES = ("samples", "functions", "mappings", "locations", "stacks", "label_sets")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _halves(name: str, profile: Profile) -> list[tuple[str, Profile]]:
    """Two profiles of overlapping random halves of ``profile``'s samples (a fleet:
    the same functions and locations, many of the same stacks)."""
    rng = np.random.default_rng(len(name))
    n = profile.samples.num_rows
    out = []
    for k in range(2):
        keep = np.sort(rng.choice(n, size=max(1, n // 2), replace=False))
        out.append((f"{name}/half{k}", replace(profile, samples=profile.samples.take(keep))))
    return out


@functools.cache
def _profiles() -> tuple[tuple[str, Profile], ...]:
    paths = {f"recorded/{name}": RECORDED_GO / name for name in RECORDED}
    if CORPUS.is_dir():
        paths.update({name: CORPUS / name for name in CORPUS_FILES})
    out: list[tuple[str, Profile]] = []
    for name, path in paths.items():
        profile = decode_bytes(Path(path).read_bytes(), source=str(path))
        out += [(name, profile), *_halves(name, profile)]
    return tuple(out)


def _key(name: str, profile: Profile) -> KeyedProfile:
    return key_profile(profile, ProfileMeta(), name, now=NOW)


def _tables(keyed: KeyedProfile) -> list:
    return [getattr(keyed, t) for t in TABLES]


def _assert_same(got: dict[str, KeyedProfile], want: dict[str, KeyedProfile]) -> None:
    assert got.keys() == want.keys()
    for name, keyed in got.items():
        for table, a, b in zip(TABLES, _tables(keyed), _tables(want[name]), strict=True):
            assert a.equals(b), f"{name}: {table}"
        assert keyed.row == want[name].row


@functools.cache
def _uncached() -> dict[str, KeyedProfile]:
    """Every profile keyed with the cache disabled: the reference ids."""
    saved = ids.CACHE
    ids.CACHE = digests.DigestCache(0)
    try:
        return {name: _key(name, p) for name, p in _profiles()}
    finally:
        ids.CACHE = saved


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch) -> digests.DigestCache:
    """A fresh cache of the default bound as this process's."""
    fresh = digests.DigestCache()
    monkeypatch.setattr(ids, "CACHE", fresh)
    return fresh


def test_the_corpus_and_the_recordings_are_here() -> None:
    assert len(_profiles()) >= 3 * len(RECORDED)
    if not CORPUS.is_dir():
        pytest.skip(f"public pprof corpus not found at {CORPUS}")
    assert len(_profiles()) == 3 * (len(RECORDED) + len(CORPUS_FILES))


@needs_c
def test_ids_are_the_same_with_and_without_the_cache_in_either_order(cache) -> None:
    want = _uncached()
    forward = {name: _key(name, p) for name, p in _profiles()}
    _assert_same(forward, want)
    backward = {name: _key(name, p) for name, p in reversed(_profiles())}
    _assert_same(backward, want)
    fresh = digests.DigestCache()
    ids.CACHE = fresh
    _assert_same({name: _key(name, p) for name, p in reversed(_profiles())}, want)


@needs_c
def test_a_second_pass_takes_every_id_from_the_cache(cache, monkeypatch) -> None:
    want = _uncached()
    for name, p in _profiles():
        _key(name, p)
    held = cache.nbytes

    def no_hashing(*args, **kwargs):
        raise AssertionError("hashed content the cache holds")

    for fn in ("hash_functions", "hash_segments", "hash_lists"):
        monkeypatch.setattr(ids._blake, fn, no_hashing)
    _assert_same({name: _key(name, p) for name, p in _profiles()}, want)
    assert cache.nbytes == held


@needs_c
def test_ids_are_the_same_after_the_cache_is_cleared_midway(cache) -> None:
    want, profiles = _uncached(), _profiles()
    got = {name: _key(name, p) for name, p in profiles[: len(profiles) // 2]}
    generations = {k.generation for k in cache._kinds.values()}
    cache.clear()
    assert cache.nbytes == 0
    got.update({name: _key(name, p) for name, p in profiles})
    _assert_same(got, want)
    assert not generations & {k.generation for k in cache._kinds.values()}


def test_the_hashlib_path_gives_the_same_ids_and_no_entries(monkeypatch, cache) -> None:
    monkeypatch.setattr(ids, "_blake", None)
    pure = {name: _key(name, p) for name, p in _profiles()}
    _assert_same(pure, _uncached())
    assert all(set(k.entries.values()) == {None} for k in pure.values() if k.entries)
    assert cache.nbytes == 0


@needs_c
def test_the_cache_is_bounded_and_cleared_whole(monkeypatch) -> None:
    """Past half of ``max_bytes`` the cache is cleared before the next lookup: it
    never holds more than the bound plus twice one lookup, and ids do not change."""
    largest = max(_profiles(), key=lambda item: item[1].samples.num_rows)
    one = digests.DigestCache()
    monkeypatch.setattr(ids, "CACHE", one)
    _key(*largest)
    bound = digests.DigestCache(max_bytes=one.nbytes // 2)
    monkeypatch.setattr(ids, "CACHE", bound)
    seen, generations = [], set()
    real_ids = digests.DigestCache.ids

    def watched(self, kind, columns, hash_rows):
        out = real_ids(self, kind, columns, hash_rows)
        seen.append(self.nbytes)
        generations.update(k.generation for k in self._kinds.values())
        return out

    monkeypatch.setattr(digests.DigestCache, "ids", watched)
    for _ in range(2):
        _assert_same({name: _key(name, p) for name, p in _profiles()}, _uncached())
    assert max(seen) <= bound.max_bytes + 2 * one.nbytes
    assert len(generations) > 3  # cleared, and more than once


def test_the_default_bound_and_a_disabled_cache() -> None:
    assert digests.DigestCache().max_bytes == digests.MAX_BYTES == 64 * 2**20
    off = digests.DigestCache(0)
    assert not off.enabled
    rows = []
    got, entries = off.ids("x", [(np.arange(3, dtype=np.uint64), np.arange(4))], rows.append)
    assert entries is None and rows == [None]


@needs_c
def test_a_failed_hashing_leaves_nothing_behind() -> None:
    cache = digests.DigestCache()
    column = [(np.arange(4, dtype=np.uint64), np.array([0, 1, 3, 4]))]

    def fail(rows):
        raise MemoryError

    with pytest.raises(MemoryError):
        cache.ids("k", column, fail)
    assert cache.nbytes == 0
    out, entries = cache.ids("k", column, lambda rows: np.asarray(rows, np.uint64) + 7)
    assert out.tolist() == [7, 8, 9] and entries is not None
    assert entries.codes.tolist() == [0, 1, 2]


@needs_c
def test_rows_are_told_apart_by_the_bytes_of_their_columns() -> None:
    """("ab", "c") and ("a", "bc") are two rows: a column boundary is content."""
    assert digests._intern is not None
    inner = digests._intern.Interner(os.urandom(16))
    a = np.frombuffer(b"abaab", np.uint8)
    b = np.frombuffer(b"cbcc", np.uint8)
    # rows: ("ab","c"), ("a","bc"), ("ab","c"), ("", "")... as byte offsets
    a_off = np.array([0, 2, 3, 5, 5], np.int64)
    b_off = np.array([0, 1, 3, 4, 4], np.int64)
    codes, new = np.empty(4, np.int64), np.empty(4, np.int64)
    fresh = inner.number_rows([(a, a_off), (b, b_off)], codes, new)
    assert codes.tolist() == [0, 1, 0, 2] and new[:fresh].tolist() == [0, 1, 3]
    # The same keys laid out by hand (lengths, then bytes) number alike.
    laid = [b"\x02" + bytes(7) + b"\x01" + bytes(7) + b"abc", b"\x01" + bytes(7) + b"\x02"]
    laid[1] += bytes(7) + b"abc"
    other = digests._intern.Interner(os.urandom(16))
    data = b"".join(laid)
    offsets = np.array([0, len(laid[0]), len(data)], np.int64)
    assert other.number(data, offsets, codes, new) == 2
    assert other.number_rows([(a[:3], a_off[:3]), (b[:3], b_off[:3])], codes, new) == 0
    assert codes[:2].tolist() == [0, 1]


@needs_c
def test_number_rows_refuses_columns_that_do_not_fit() -> None:
    assert digests._intern is not None
    inner = digests._intern.Interner(os.urandom(16))
    out = np.empty(4, np.int64)
    data = np.zeros(4, np.uint8)
    for columns in (
        [(data, np.array([0, 5], np.int64))],
        [(data, np.array([3, 1], np.int64))],
        [(data, np.array([0, 1], np.int64)), (data, np.array([0, 1, 2], np.int64))],
        [],
        [(data, np.array([0, 1], np.int64))] * 9,
    ):
        with pytest.raises(ValueError):
            inner.number_rows(columns, out, out.copy())
    with pytest.raises(ValueError):
        inner.number_rows([(data, np.arange(4, dtype=np.int64))], out[:1], out.copy())
    assert len(inner) == 0 and inner.nbytes > 0


def _trim_both(keyed: KeyedProfile, by_entries: SentMemory, by_content: SentMemory):
    bare = replace(keyed)
    bare.content, bare.entries = keyed.content, None
    return by_entries.trim(keyed), by_content.trim(bare)


@needs_c
def test_trimming_by_entries_drops_what_trimming_by_content_drops(cache) -> None:
    by_entries, by_content = SentMemory(1 << 30), SentMemory(1 << 30)
    dropped = 0
    for name, p in _profiles():
        keyed = _key(name, p)
        assert keyed.entries is not None and keyed.entries["stacks"] is not None
        assert pickle.loads(pickle.dumps(keyed)).entries is None
        a, b = _trim_both(keyed, by_entries, by_content)
        assert a.entries is None and a.relies_on == b.relies_on
        for table in ("functions", "locations", "stacks"):
            assert getattr(a, table).equals(getattr(b, table)), f"{name}: {table}"
            dropped += getattr(keyed, table).num_rows - getattr(a, table).num_rows
    assert dropped > 0
    assert by_entries.nbytes < by_content.nbytes  # entries, not content, are held


@needs_c
def test_after_a_clear_rows_sent_in_an_older_generation_are_sent_again(cache) -> None:
    by_entries, by_content = SentMemory(1 << 30), SentMemory(1 << 30)
    (name, profile), (half, part) = _profiles()[0], _profiles()[1]
    by_entries.trim(_key(name, profile))
    cache.clear()
    again = by_entries.trim(_key(half, part))
    for table in ("functions", "locations", "stacks"):
        assert getattr(again, table).num_rows == getattr(_key(half, part), table).num_rows
    assert not again.relies_on
    # The content path still knows them; the entries path sends more, never less.
    by_content.trim(_key(name, profile))
    assert by_content.trim(_key(half, part)).relies_on == {name}


@needs_c
def test_blake_hashes_only_the_rows_asked_for() -> None:
    rng = np.random.default_rng(5)
    lens = rng.integers(0, 40, 300)
    flat = rng.integers(0, 2**64, int(lens.sum()), dtype=np.uint64)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    rows = np.array([299, 0, 17, 17, 150], np.int64)
    full = np.empty(300, np.uint64)
    ids._blake.hash_lists(flat, offsets, b"p", full)
    part = np.zeros(300, np.uint64)
    ids._blake.hash_lists(flat, offsets, b"p", part, rows)
    assert part[rows].tolist() == full[rows].tolist()
    assert np.count_nonzero(part) == len(set(rows.tolist()))
    ids._blake.hash_segments(flat, offsets * 8, b"q", full)
    ids._blake.hash_segments(flat, offsets * 8, b"q", part, rows)
    assert part[rows].tolist() == full[rows].tolist()
    for bad in (np.array([300], np.int64), np.array([-1], np.int64), b"abc"):
        with pytest.raises(ValueError):
            ids._blake.hash_lists(flat, offsets, b"p", part, bad)
        with pytest.raises(ValueError):
            ids._blake.hash_segments(flat, offsets * 8, b"q", part, bad)


_PRINT_IDS = """
import sys
from datetime import UTC, datetime
from pyproflab.decode import decode_bytes
from pyproflab.keying import digests, ids
from pyproflab.keying.keys import ProfileMeta, key_profile
keyed = key_profile(decode_bytes(open(sys.argv[1], 'rb').read()), ProfileMeta(), 'h')
print(ids._blake is None, digests._intern is None, ids.CACHE.enabled)
for table in ('functions', 'locations', 'stacks'):
    print(getattr(keyed, table).column(0).to_pylist())
"""


def test_the_pure_path_forced_by_the_environment_gives_the_same_ids() -> None:
    path = RECORDED_GO / "cpu.pb.gz"
    runs = {}
    for pure in ("1", "0"):
        env = {**os.environ, "PYPROFLAB_PURE_KEYS": pure}
        done = subprocess.run(
            [sys.executable, "-c", _PRINT_IDS, str(path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        runs[pure] = done.stdout.splitlines()
    assert runs["1"][0] == "True True False"
    assert runs["1"][1:] == runs["0"][1:]
