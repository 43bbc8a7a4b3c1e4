"""The C hashing path of the content ids (keying/_blake.c) gives exactly the ids of
the hashlib path, on chosen edge cases and on real profiles.

Ids are stored: a store or a dataset written with one path must dedup against
ingests made with the other, so equality here is byte for byte."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from support.testenv import CORPUS, RECORDED_GO, SKIP_NO_CORPUS

from pyproflab.decode import decode_bytes
from pyproflab.keying import ids
from pyproflab.keying.keys import ProfileMeta, key_profile

needs_c = pytest.mark.skipif(
    ids._blake is None, reason="the C extension pyproflab.keying._blake is not built"
)

CORPUS_FILES = [
    "parca/pkg/query/testdata/profile1.pb.gz",
    "pyroscope/pkg/og/convert/pprof/testdata/heap.pb.gz",
    "pyroscope/pkg/og/convert/pprof/testdata/cpu-exemplars.pb.gz",
    "google-pprof/internal/proftest/testdata/large.cpu",
]
RECORDED = ["cpu.pb.gz", "heap.pb.gz", "mutex.pb.gz", "goroutine.pb.gz", "notesd-cpu0.pb.gz"]
KEYED_TABLES = ("samples", "functions", "mappings", "locations", "stacks", "label_sets")


def _hashlib_ids(data: bytes, bounds: np.ndarray, person: bytes) -> list[int]:
    return [
        int.from_bytes(hashlib.blake2b(data[a:b], digest_size=8, person=person).digest(), "little")
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
    ]


@needs_c
@pytest.mark.parametrize("person", [b"", b"pyproflab-loc1", b"pyproflab-stack1"])
def test_segments_equal_hashlib_at_every_block_edge(person: bytes) -> None:
    rng = np.random.default_rng(14)
    # Every length up to three blocks and a bit, then random ones.
    lens = np.concatenate([np.arange(0, 400), rng.integers(0, 3000, 300)])
    bounds = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    data = rng.integers(0, 256, int(bounds[-1]), dtype=np.uint8).tobytes()
    out = np.empty(len(lens), dtype=np.uint64)
    ids._blake.hash_segments(data, bounds, person, out)
    assert out.tolist() == _hashlib_ids(data, bounds, person)


@needs_c
def test_lists_and_functions_equal_hashlib_over_random_lengths() -> None:
    """hash_lists and hash_functions lay each row out in C before hashing it: rows
    of random lengths, 8 to about 600 bytes, across every block edge there."""
    rng = np.random.default_rng(23)
    lens = rng.integers(0, 75, 2000)
    flat = rng.integers(0, 2**64, int(lens.sum()), dtype=np.uint64)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    out = np.empty(len(lens), dtype=np.uint64)
    ids._blake.hash_lists(flat, offsets, b"pyproflab-stack1", out)
    for k in range(len(lens)):
        row = np.concatenate([np.array([lens[k]], "<u8"), flat[offsets[k] : offsets[k + 1]]])
        h = hashlib.blake2b(row.tobytes(), digest_size=8, person=b"pyproflab-stack1")
        assert int(out[k]) == int.from_bytes(h.digest(), "little")
    letters = "abcdefghijklmnopqrstuvwxyz./_é"
    words = ["".join(rng.choice(list(letters), int(n))) for n in rng.integers(0, 200, 1500)]
    table = pa.table(
        {
            "id": pa.array(range(500), pa.uint64()),
            "name": words[:500],
            "system_name": words[500:1000],
            "filename": words[1000:],
            "start_line": pa.array(rng.integers(-(2**40), 2**40, 500), pa.int64()),
        }
    )
    want = [ids._function_id(*row.values()) for row in table.drop_columns("id").to_pylist()]
    assert ids.function_ids(table).tolist() == want


@needs_c
def test_segments_refuse_bounds_outside_the_data() -> None:
    out = np.empty(1, dtype=np.uint64)
    with pytest.raises(ValueError, match="bounds"):
        ids._blake.hash_segments(b"abc", np.array([0, 4], np.int64), b"", out)
    with pytest.raises(ValueError, match="bounds"):
        ids._blake.hash_segments(b"abc", np.array([2, 1], np.int64), b"", out)
    with pytest.raises(ValueError, match="person"):
        ids._blake.hash_segments(b"abc", np.array([0, 1], np.int64), b"x" * 17, out)


@needs_c
def test_function_ids_equal_the_per_row_encoding() -> None:
    names = ["", "main.work", "日本.関数", "x" * 300, "a\x00b", "runtime.mallocgc"]
    table = pa.table(
        {
            "id": pa.array(range(1, 7), pa.uint64()),
            "name": names,
            "system_name": names[::-1],
            "filename": ["f.go", "", "/very/" * 30, "ü.go", "", "m.go"],
            "start_line": pa.array([0, 10, -1, 2**40, 7, 3], pa.int64()),
        }
    )
    want = [ids._function_id(*row.values()) for row in table.drop_columns("id").to_pylist()]
    for rows in (table, table.slice(2), pa.concat_tables([table.slice(0, 3), table.slice(3)])):
        got = ids.function_ids(rows)
        assert got.tolist() == want[len(want) - rows.num_rows :]
    large = table.cast(
        pa.schema(
            [f.with_type(pa.large_string()) if f.type == pa.string() else f for f in table.schema]
        )
    )
    assert ids.function_ids(large).tolist() == want


@needs_c
def test_stack_ids_equal_the_grouping_path(monkeypatch) -> None:
    rng = np.random.default_rng(17)
    lists = [
        list(rng.integers(1, 2**64, size=int(n), dtype=np.uint64)) for n in rng.integers(0, 40, 500)
    ]
    lists += [lists[3], lists[3][::-1], [], lists[7], [np.uint64(2**64 - 1)] * 20]
    flat = np.array([x for lst in lists for x in lst], dtype=np.uint64)
    offsets = np.cumsum([0] + [len(lst) for lst in lists])
    fast = ids.stack_ids(flat, offsets)
    # A slice of the lists, as the store hands over a chunk of a column.
    part = ids.stack_ids(flat, offsets[100:301])
    monkeypatch.setattr(ids, "_blake", None)
    assert fast.tolist() == ids.stack_ids(flat, offsets).tolist()
    assert part.tolist() == fast[100:300].tolist()
    assert fast[-5] == fast[3] and fast[-2] == fast[7]


def _profile_paths() -> list[Path]:
    paths = [RECORDED_GO / name for name in RECORDED]
    if CORPUS.is_dir():
        paths += [CORPUS / name for name in CORPUS_FILES]
    return paths


@needs_c
@pytest.mark.parametrize("path", _profile_paths(), ids=lambda p: p.name)
def test_keyed_profiles_are_identical_with_and_without_c(path: Path, monkeypatch) -> None:
    profile = decode_bytes(path.read_bytes(), source=str(path))
    now = datetime(2026, 1, 1, tzinfo=UTC)
    fast = key_profile(profile, ProfileMeta(), "h", now=now)
    monkeypatch.setattr(ids, "_blake", None)
    slow = key_profile(profile, ProfileMeta(), "h", now=now)
    assert fast.functions.num_rows and fast.stacks.num_rows
    for name in KEYED_TABLES:
        assert getattr(fast, name).equals(getattr(slow, name)), name
    assert fast.row == slow.row


def test_corpus_is_there_or_the_skip_says_so() -> None:
    if not CORPUS.is_dir():
        pytest.skip(SKIP_NO_CORPUS)
    assert all((CORPUS / name).is_file() for name in CORPUS_FILES)
