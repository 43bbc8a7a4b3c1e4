"""The one-call inflate of one-member gzip files (``_inflate.c``, libdeflate)
gives what zlib-ng's stream gives, or hands the file to the stream: the same
bytes for every good file, the same error for every bad one."""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import pytest
from support.fuzz_decode_helpers import mutated_cases
from support.profile_builders import minimal
from support.testenv import assert_compiles_without_warnings

from pyproflab.decode import pprof
from pyproflab.errors import ProfileError

pytestmark = pytest.mark.skipif(
    pprof._inflate is None,
    reason="pyproflab.decode._inflate is not built (libdeflate-dev missing at install: "
    "scripts/install-build-deps.sh installs it)",
)

TESTDATA = Path(__file__).parent.parent / "testdata"
CORPUS = Path(__file__).parents[3] / "shared" / "corpus"
GOOD = minimal().SerializeToString()


def both_ways(data: bytes, max_bytes: int = pprof.DEFAULT_MAX_BYTES, monkeypatch=None):
    """(what decompress gives with the whole-file path, without it): bytes or the
    error's type and text."""

    def run() -> object:
        try:
            return bytes(pprof.decompress(data, source="in.gz", max_bytes=max_bytes))
        except ProfileError as e:
            return (type(e), str(e))

    with_whole = run()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pprof, "_inflate", None)
        streamed = run()
    return with_whole, streamed


def gzip_files() -> list[Path]:
    files = [p for root in (TESTDATA, CORPUS) if root.exists() for p in root.rglob("*")]
    return sorted(p for p in files if p.is_file() and p.read_bytes()[:2] == pprof.GZIP_MAGIC)


def test_every_gzipped_profile_inflates_the_same_and_takes_the_whole_path() -> None:
    files = gzip_files()
    assert len(files) >= 20
    answered = []
    real = pprof._inflate.whole

    def whole(data: bytes, size: int) -> bytes | None:
        out = real(data, size)
        answered.append(out is not None)
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pprof._inflate, "whole", whole)
        for path in files:
            a, b = both_ways(path.read_bytes())
            assert a == b, path
    # Not a path that always hands over: real files are one member.
    assert sum(answered) >= len(files) // 2


def test_the_whole_path_answers_only_for_exactly_one_member() -> None:
    one = gzip.compress(GOOD)
    assert pprof._inflate.whole(one, len(GOOD)) == GOOD
    assert pprof._inflate.whole(one, len(GOOD) + 1) is None  # a stated size too large
    assert pprof._inflate.whole(one, len(GOOD) - 1) is None  # too small
    assert pprof._inflate.whole(one + gzip.compress(GOOD), len(GOOD)) is None  # two members
    assert pprof._inflate.whole(one + b"\0", len(GOOD)) is None  # a byte after it
    assert pprof._inflate.whole(one[:-1], len(GOOD)) is None  # truncated
    assert pprof._inflate.whole(one, 0) is None


def test_odd_files_give_the_streams_answer() -> None:
    half = len(GOOD) // 2
    one = gzip.compress(GOOD)
    crafted = [
        one,
        gzip.compress(GOOD[:half]) + gzip.compress(GOOD[half:]),  # two members: both read
        gzip.compress(GOOD) + gzip.compress(GOOD),  # the same member twice
        gzip.compress(GOOD[:half]) + gzip.compress(GOOD[:half]),
        one + b"junk",
        one + b"\0\0\0\0",
        # junk whose last 8 bytes repeat the member's own trailer
        one + b"xx" + one[-8:],
        one[:-4] + struct.pack("<I", len(GOOD) + 7),  # a trailer that lies about the size
        one[:-8] + struct.pack("<I", zlib.crc32(GOOD) ^ 1) + one[-4:],  # bad CRC
        gzip.compress(b""),
        one[:10] + one[10:20],
    ]
    for data in crafted:
        a, b = both_ways(data)
        assert a == b, data[:40]


def test_the_cap_holds_on_the_whole_path() -> None:
    data = gzip.compress(b"\0" * (1 << 20))
    for cap in (1 << 20, (1 << 20) - 1, 1000):
        a, b = both_ways(data, max_bytes=cap)
        assert a == b
    with_whole, _ = both_ways(data, max_bytes=1000)
    assert isinstance(with_whole, tuple) and "cap" in with_whole[1]


def test_mutated_files_give_the_streams_answer() -> None:
    seeds = [gzip.compress(GOOD), gzip.compress(GOOD * 3, compresslevel=1)]
    for case, data in mutated_cases(11, seeds, 400):
        a, b = both_ways(bytes(data))
        assert a == b, case


def test_the_source_compiles_without_warnings() -> None:
    assert_compiles_without_warnings(Path(pprof.__file__).with_name("_inflate.c"))
