"""The one-pass split of the top level (``_wire.split_top``, lite.py) against upb's.

Rules checked: every profile of the repo's test data and of the public corpus,
and mutated and hand-made hostile top levels, give the same TopLevel (each
repeated field message for message, every scalar) and the same Profile (every
table equal, interned columns included), or the same error word for word,
whether the top level is split in C or by upb (``lite._split_top`` set to None,
as ``PYPROFLAB_UPB_TOP_LEVEL=1`` does); segments outside their buffer are
refused by every ``_wire.*_at`` function with ValueError, never a crash.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.decode_helpers import assert_each_file, data_files, same_profile, small_recordings
from support.fuzz_decode_helpers import mutated_cases
from support.profile_builders import HEADER_FIELDS, PROFILE_TABLES, field, minimal, varint
from support.testenv import CORPUS, corpus_files, corpus_id

from pyproflab.decode import decode_bytes, lite
from pyproflab.decode.pprof import decompress
from pyproflab.errors import ProfileError

TESTDATA = Path(__file__).resolve().parent.parent / "testdata"
SPLIT = lite._split_top
needs_split = pytest.mark.skipif(SPLIT is None, reason="the C extension is not built or is off")
pytestmark = needs_split
REPEATED = lite.REPEATED_IN_PLACE
SCALARS = (
    "drop_frames", "keep_frames", "time_nanos", "duration_nanos", "period_type", "period",
    "comments", "default_sample_type", "doc_url",
)  # fmt: skip


def outcome(fn, *args):
    from pyproflab.decode.fast import _HandToReference

    try:
        return fn(*args)
    except (ProfileError, _HandToReference) as e:
        return e


def both_ways(monkeypatch, fn, *args):
    """fn's outcome with the top level split in C, then by upb."""
    monkeypatch.setattr(lite, "_split_top", SPLIT)
    c = outcome(fn, *args)
    with monkeypatch.context() as m:
        m.setattr(lite, "_split_top", None)
        u = outcome(fn, *args)
    return c, u


def assert_same_error_or(c, u, same) -> None:
    if isinstance(c, Exception) or isinstance(u, Exception):
        assert type(c) is type(u) and str(c) == str(u), f"{c!r} vs {u!r}"
    else:
        same(c, u)


def same_top(c: lite.TopLevel, u: lite.TopLevel) -> None:
    for name in REPEATED:
        assert list(getattr(c, name)) == list(getattr(u, name)), name
    for name in SCALARS:
        assert getattr(c, name) == getattr(u, name), name


def same_tables(c, u) -> None:
    same_profile(c, u)
    for name in PROFILE_TABLES:
        assert getattr(c, name).equals(getattr(u, name)), name
    for name in HEADER_FIELDS:
        assert getattr(c, name) == getattr(u, name), name


def assert_same(monkeypatch, data: bytes) -> None:
    """The same TopLevel and the same Profile (or error) both ways."""
    try:
        raw = decompress(data, source="<test>", max_bytes=64 << 20)
    except ProfileError:
        raw = None
    if raw:
        c, u = both_ways(monkeypatch, lambda: lite.parse_top_level(raw, source="<test>"))
        assert_same_error_or(c, u, same_top)
    c, u = both_ways(monkeypatch, lambda: decode_bytes(data, source="<test>"))
    assert_same_error_or(c, u, same_tables)


# --- every profile we have ------------------------------------------------------------


def test_repo_test_data_splits_alike(monkeypatch) -> None:
    check = lambda data: assert_same(monkeypatch, data)  # noqa: E731
    assert_each_file(data_files(TESTDATA), check, lambda path: path.relative_to(TESTDATA))


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the public corpus is not beside the repo")
@pytest.mark.corpus
def test_corpus_splits_alike(monkeypatch) -> None:
    assert_each_file(corpus_files(), lambda data: assert_same(monkeypatch, data), corpus_id)


def test_well_formed_profiles_are_split_in_c(monkeypatch) -> None:
    top = lite.parse_top_level(minimal().SerializeToString(), source="<test>")
    assert all(isinstance(getattr(top, name), lite.RawMessages) for name in REPEATED)


# --- hostile top levels ----------------------------------------------------------------

KNOWN = minimal().SerializeToString()
STRINGS = b"".join(field(6, 2, s.encode()) for s in minimal().string_table)
ODD_FIELDS = {
    "unknown varint": field(100, 0, 5),
    "unknown fixed64": field(101, 1, b"\x00" * 8),
    "unknown fixed32": field(102, 5, b"\x00" * 4),
    "unknown bytes": field(103, 2, b"abc"),
    "field number 0": field(0, 0, 1),
    "field number 0, bytes": field(0, 2, b"xy"),
    "the largest field number": field(2**29 - 1, 0, 1),
    "a field number past 2**29 - 1": varint(2**29 << 3) + varint(1),
    "a group": varint(100 << 3 | 3) + varint(100 << 3 | 4),
    "a known group": varint(2 << 3 | 3) + varint(2 << 3 | 4),
    "wire type 6": varint(100 << 3 | 6) + varint(1),
    "a varint longer than 10 bytes": varint(100 << 3) + b"\xff" * 10 + b"\x01",
    "a ten-byte varint": field(12, 0, 0)[:-1] + b"\xff" * 9 + b"\x01",
    "bytes past the end": varint(100 << 3 | 2) + varint(5) + b"ab",
    "a sample past the end": varint(2 << 3 | 2) + varint(50) + b"ab",
    "a sample as a varint": field(2, 0, 1),
    "a string as fixed32": field(6, 5, b"abcd"),
    "period as bytes": field(12, 2, b"\x01"),
    "period as fixed64": field(12, 1, b"\x00" * 8),
    "time_nanos twice": field(9, 0, 5) + field(9, 0, 6),
    "time_nanos zero then set": field(9, 0, 0) + field(9, 0, 6),
    "time_nanos packed": field(9, 2, varint(5) + varint(6)),
    "time_nanos packed, cut in a varint": field(9, 2, b"\x85"),
    "comments packed": field(13, 2, varint(1) + varint(2)),
    "comments packed, cut in a varint": field(13, 2, varint(1) + b"\x80"),
    "a comment out of range": field(13, 0, 99),
    "a second period_type": field(11, 2, field(1, 0, 1)),
    "a bad period_type": field(11, 2, b"\xff"),
    "a sample type past the string table": field(1, 2, field(1, 0, 99)),
    "a string table not starting with ''": field(6, 2, b"x"),
    "a truncated tag": b"\x80",
    "an empty sample": field(2, 2, b""),
    "a sample with a bad varint": field(2, 2, b"\x08" + b"\xff" * 11),
}


@pytest.mark.parametrize("name", ODD_FIELDS)
def test_odd_top_level_fields_split_alike(monkeypatch, name) -> None:
    """Before, between and after the known fields, and with no string table."""
    extra = ODD_FIELDS[name]
    middle = len(field(1, 2, minimal().sample_type[0].SerializeToString()))
    cases = (
        extra + KNOWN,
        KNOWN[:middle] + extra + KNOWN[middle:],
        KNOWN + extra,
        extra,
        STRINGS + extra,
    )
    for data in cases:
        assert_same(monkeypatch, data)


def _seeds() -> list[bytes]:
    return ([KNOWN] + small_recordings(TESTDATA))[:24]


@pytest.mark.parametrize("seed", range(4))
def test_mutated_top_levels_split_alike(monkeypatch, seed: int) -> None:
    for case, data in mutated_cases(seed, _seeds()):
        try:
            assert_same(monkeypatch, data)
        except AssertionError as e:
            raise AssertionError(f"seed {seed} case {case}: {e}") from None


# --- split_top and the *_at functions -----------------------------------------------------


def test_split_top_copies_each_payload_once() -> None:
    buf = bytearray(field(100, 0, 1) + KNOWN + field(2, 2, b"\x08\x07"))
    data, positions, counts, rest = SPLIT(buf, lite._PROFILE_WIRES, lite._SLOTS)
    msg = minimal()
    want = [
        [m.SerializeToString() for m in msg.sample_type],
        [m.SerializeToString() for m in msg.sample] + [b"\x08\x07"],
        [m.SerializeToString() for m in msg.mapping],
        [m.SerializeToString() for m in msg.location],
        [m.SerializeToString() for m in msg.function],
        [s.encode() for s in msg.string_table],
    ]
    assert counts == tuple(len(w) for w in want) + (0,) * (16 - len(want))
    pos = np.frombuffer(positions, dtype=np.int64).reshape(2, -1)
    got = [bytes(data[s : s + n]) for s, n in zip(*pos.tolist(), strict=True)]
    assert got == [m for w in want for m in w]
    assert data == b"".join(got)  # only the payloads, slot by slot
    assert rest == field(11, 2, msg.period_type.SerializeToString()) + field(12, 0, msg.period)


def test_split_top_declines_what_it_does_not_take() -> None:
    for name in ("a group", "wire type 6", "bytes past the end", "a sample as a varint"):
        assert SPLIT(KNOWN + ODD_FIELDS[name], lite._PROFILE_WIRES, lite._SLOTS) is None
    assert SPLIT(b"", lite._PROFILE_WIRES, lite._SLOTS) == (b"", b"", (0,) * 16, b"")
    with pytest.raises(ValueError):
        SPLIT(KNOWN, lite._PROFILE_WIRES, bytes([0, 17]))


def test_segments_outside_the_buffer_are_refused() -> None:
    from pyproflab.decode import _wire

    buf = b"\x08\x01\x10\x02"
    i64 = np.int64
    for start, length in ((-1, 1), (0, 5), (4, 1), (3, -1), (2**62, 2**62)):
        segs = (buf, np.array([0, start], dtype=i64), np.array([2, length], dtype=i64))
        with pytest.raises(ValueError):
            _wire.count_ends_at(*segs)
        with pytest.raises(ValueError):
            _wire.join_at(*segs, np.empty(3, dtype=i64))
        cols = (np.empty(4, i64), np.empty(4, np.uint64), np.empty(4, np.int8))
        cols += (np.empty(4, i64), np.empty(4, i64))
        with pytest.raises(ValueError):
            _wire.split_at(
                *segs, np.empty(4, np.uint64), np.empty(4, i64), np.empty(2, i64),
                np.empty(3, i64), *cols, 0, 0,
            )  # fmt: skip
    with pytest.raises(ValueError):
        _wire.count_ends_at(buf, np.zeros(2, dtype=i64), np.zeros(3, dtype=i64))


def test_tokens_counted_first_walk_alike(monkeypatch) -> None:
    """Sub-messages past fast.TOKENS_PER_BYTE_MAX bytes are counted before they
    are tokenized: the same Tokens and Fields as with room for a varint per byte."""
    from pyproflab.decode import fast

    for data in _seeds()[:8]:
        try:
            top = lite.parse_top_level(data, source="<test>")
        except ProfileError:
            continue
        for kind in REPEATED[1:5]:
            messages = getattr(top, kind)
            want = outcome(fast.walk_messages, messages)
            with monkeypatch.context() as m:
                m.setattr(fast, "TOKENS_PER_BYTE_MAX", 0)
                got = outcome(fast.walk_messages, messages)
            if isinstance(want, Exception) or isinstance(got, Exception):
                assert type(want) is type(got)
                continue
            for a, b in zip(want, got, strict=True):
                for name in vars(a):
                    x, y = getattr(a, name), getattr(b, name)
                    assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, name
