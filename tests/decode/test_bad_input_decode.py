"""Inputs that are not good profiles: each gives a ProfileError subclass whose
text is one line naming the source. Fast: the gzip bomb is built from one
compressed 64 MiB member repeated, and stopped by the size cap."""

from __future__ import annotations

import gzip
import json
import random
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest
from support.profile_builders import minimal

from pyproflab.decode import decode_bytes, read_profile
from pyproflab.errors import (
    CorruptProfileError,
    InvalidProfileError,
    NotAProfileError,
    ProfileError,
    TooLargeError,
)

GOOD = minimal().SerializeToString()
GOOD_GZ = gzip.compress(GOOD)


def refused(data: bytes, error: type[ProfileError] = ProfileError, **kw) -> ProfileError:
    with pytest.raises(error) as e:
        decode_bytes(data, source="input.pb.gz", **kw)
    text = str(e.value)
    assert text.startswith("input.pb.gz: ") and "\n" not in text, text
    return e.value


def test_good_inputs_decode() -> None:
    assert decode_bytes(GOOD).num_samples == decode_bytes(GOOD_GZ).num_samples == 2


def test_empty() -> None:
    refused(b"", NotAProfileError)
    refused(gzip.compress(b""), NotAProfileError)


def test_truncated_gzip() -> None:
    for cut in (3, 10, len(GOOD_GZ) // 2, len(GOOD_GZ) - 4):
        refused(GOOD_GZ[:cut], CorruptProfileError)


def test_bytes_after_the_gzip_stream() -> None:
    refused(GOOD_GZ + b"junk", CorruptProfileError)
    refused(GOOD_GZ + b"\0\0\0\0", CorruptProfileError)  # Go's reader refuses these too


def test_concatenated_gzip_members_are_one_stream() -> None:
    half = len(GOOD) // 2
    # Split on a field boundary is not needed: gzip members join byte streams.
    data = gzip.compress(GOOD[:half]) + gzip.compress(GOOD[half:])
    assert decode_bytes(data).num_samples == 2


def test_truncated_raw() -> None:
    for cut in range(1, len(GOOD) - 1, 7):
        refused(GOOD[:cut], ProfileError)


def test_bit_flips_never_escape_as_other_errors() -> None:
    rng = random.Random(7)
    for _ in range(300):
        data = bytearray(GOOD)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        try:
            decode_bytes(bytes(data), source="input.pb.gz")
        except ProfileError as e:
            assert str(e).startswith("input.pb.gz: ") and "\n" not in str(e)


def test_random_bytes() -> None:
    rng = random.Random(1)
    for size in (1, 2, 17, 1000, 100_000):
        refused(rng.randbytes(size))
    refused(b"\x1f\x8b" + rng.randbytes(100), CorruptProfileError)


def test_json_and_text_are_not_profiles() -> None:
    refused(json.dumps({"samples": [1, 2, 3]}).encode(), NotAProfileError)
    refused(b"hello world\n", NotAProfileError)
    refused(gzip.compress(b'{"a": 1}'), NotAProfileError)
    refused(b"<html><body>404</body></html>", NotAProfileError)


def test_a_parquet_file_is_named_as_one(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [1, 2, 3]}), tmp_path / "functions.parquet")
    e = refused((tmp_path / "functions.parquet").read_bytes(), NotAProfileError)
    assert str(e).endswith("(a Parquet file: ingest reads a dataset by its folder)"), e


def test_a_go_execution_trace_is_named_as_one(tmp_path: Path) -> None:
    # `pyproflab top trace.out` said "a gzip-compressed Go execution trace ...
    # (gunzip it first)" of a trace that was not gzipped.
    trace = Path(__file__).resolve().parents[1] / "testdata" / "traces" / "mutex.trace"
    with pytest.raises(NotAProfileError) as e:
        read_profile(trace)
    plain = str(e.value)
    assert plain.startswith(f"{trace}: not a pprof profile") and "\n" not in plain, plain
    assert "pyproflab trace" in plain and "gzip" not in plain, plain
    gz = tmp_path / "trace.out.gz"
    gz.write_bytes(gzip.compress(trace.read_bytes()))
    with pytest.raises(NotAProfileError) as e:
        read_profile(gz)
    assert "gzip-compressed Go execution trace" in str(e.value), e.value


def test_gzip_bomb_is_stopped_by_the_cap() -> None:
    member = gzip.compress(bytes(64 << 20), compresslevel=9, mtime=0)  # 64 MiB -> ~64 KiB
    bomb = member * 64  # 4 GiB once inflated
    tracemalloc.start()
    start = time.process_time()  # CPU time: a loaded machine stretches wall-clock time
    try:
        refused(bomb, TooLargeError, max_bytes=16 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.process_time() - start < 2  # stopped at 16 MiB, not after 4 GiB
    assert peak < 64 << 20, f"peak {peak} bytes"


def test_cap_also_applies_to_raw_and_across_members() -> None:
    refused(GOOD, TooLargeError, max_bytes=len(GOOD) - 1)
    decode_bytes(GOOD, max_bytes=len(GOOD))
    refused(gzip.compress(GOOD) + gzip.compress(GOOD), TooLargeError, max_bytes=len(GOOD) + 1)


def test_corrupt_deflate_data() -> None:
    raw = zlib.compress(GOOD)
    refused(
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + raw[2:-4] + b"\x00" * 8, CorruptProfileError
    )


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(NotAProfileError, match="no such file"):
        read_profile(tmp_path / "nope.pb.gz")
    with pytest.raises(NotAProfileError, match="directory"):
        read_profile(tmp_path)


def test_invalid_profile_names_source(tmp_path: Path) -> None:
    msg = minimal()
    msg.function[0].id = 0
    path = tmp_path / "bad.pb"
    path.write_bytes(msg.SerializeToString())
    with pytest.raises(InvalidProfileError) as e:
        read_profile(path)
    assert str(e.value) == f"{path}: malformed profile: found function with reserved ID=0"
