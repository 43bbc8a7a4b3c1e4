"""``_wire.split_top`` against a plain Python model of its contract (its
docstring in _wire.c), output for output.

Rules checked: for every profile of the repo's test data and of the public
corpus, hand-made top levels (payloads of every length around the C fast
path's edges: one- and two-byte lengths, three-byte ones, 32-byte copies,
payloads ending the buffer, slots interleaved so that a copy past a payload
could land in another slot's bytes) and seeded mutations, split_top gives
exactly the model's (data, positions, counts, rest), or None when the model
refuses. test_top_split.py checks the same inputs end to end against upb.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from support.decode_helpers import assert_each_file, data_files, small_recordings
from support.fuzz_decode_helpers import mutated_cases
from support.profile_builders import field, minimal, varint
from support.testenv import CORPUS, corpus_files, corpus_id

from pyproflab.decode import lite

TESTDATA = Path(__file__).resolve().parent.parent / "testdata"
pytestmark = pytest.mark.skipif(lite._wire is None, reason="the C extension is not built or is off")
MAX_SLOTS = 16


def _varint(buf: bytes, pos: int) -> tuple[int, int] | None:
    """(value, next position), None past the end or past 10 bytes."""
    out = 0
    for n in range(10):
        if pos >= len(buf):
            return None
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << (7 * n)
        if b < 0x80:
            return out, pos
    return None


def _field(buf: bytes, pos: int) -> tuple[int, int, int, int] | None:
    """(number, wire, payload start, end) of the field at pos; None where
    next_field in _wire.c refuses."""
    got = _varint(buf, pos)
    if got is None:
        return None
    tag, pos = got
    number, wire = tag >> 3, tag & 7
    if number > 2**29 - 1 or wire not in (0, 1, 2, 5):
        return None
    if wire == 0:
        got = _varint(buf, pos)
        return None if got is None else (number, wire, pos, got[1])
    if wire in (1, 5):
        end = pos + (8 if wire == 1 else 4)
        return None if end > len(buf) else (number, wire, pos, end)
    got = _varint(buf, pos)
    if got is None or got[0] > len(buf) - got[1]:
        return None
    return number, wire, got[1], got[1] + got[0]


def model(buf: bytes, allowed: bytes, slots: bytes):
    """What split_top's docstring says it returns."""
    per_slot: list[list[bytes]] = [[] for _ in range(MAX_SLOTS)]
    rest, pos = bytearray(), 0
    while pos < len(buf):
        got = _field(buf, pos)
        if got is None:
            return None
        number, wire, payload, end = got
        if 0 < number < len(allowed) and allowed[number]:
            if not allowed[number] >> wire & 1:
                return None
            slot = slots[number] if number < len(slots) else 0
            if slot and wire != 2:
                return None
            if slot:
                per_slot[slot - 1].append(buf[payload:end])
            else:
                rest += buf[pos:end]
        pos = end
    payloads = [p for s in per_slot for p in s]
    starts = np.cumsum([0] + [len(p) for p in payloads])[:-1]
    lengths = [len(p) for p in payloads]
    positions = np.array([*starts, *lengths], dtype=np.int64).tobytes()
    counts = tuple(len(s) for s in per_slot)
    return b"".join(payloads), positions, counts, bytes(rest)


def assert_as_modelled(buf: bytes) -> None:
    args = (lite._PROFILE_WIRES, lite._SLOTS)
    want, got = model(buf, *args), lite._wire.split_top(buf, *args)
    if want is None or got is None:
        assert got is want
        return
    data, positions, counts, rest = got
    assert (bytes(data), bytes(positions), counts, bytes(rest)) == want


def _raw(data: bytes) -> bytes:
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (OSError, EOFError):
            return data
    return data


def _check(data: bytes) -> None:
    assert_as_modelled(_raw(data))


def test_repo_test_data_splits_as_modelled() -> None:
    assert_each_file(data_files(TESTDATA), _check, name=lambda p: p.relative_to(TESTDATA))


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the public corpus is not beside the repo")
@pytest.mark.corpus
def test_corpus_splits_as_modelled() -> None:
    assert_each_file(corpus_files(), _check, name=corpus_id)


# Payload lengths around the fast path's edges: one-byte lengths (< 128), the
# fixed 32-byte copy (<= 32), two-byte lengths (< 16384), three-byte ones.
LENGTHS = (0, 1, 2, 30, 31, 32, 33, 63, 127, 128, 129, 255, 16383, 16384, 70_000)


def _payload(n: int, seed: int) -> bytes:
    return bytes((seed * 31 + i * 7) & 0xFF for i in range(n))


def test_payload_lengths_split_as_modelled() -> None:
    known = minimal().SerializeToString()
    for i, n in enumerate(LENGTHS):
        p = _payload(n, i)
        for number in (2, 5, 6, 100):  # samples, functions, strings, unknown
            f = field(number, 2, p)
            for buf in (f, known + f, f + known, f + f[:-1], f[:-1], f + field(12, 0, 7)):
                assert_as_modelled(buf)


def test_interleaved_slots_split_as_modelled() -> None:
    """Short payloads of one slot between another's: a copy of 32 bytes for a
    short payload must never touch the next slot's bytes."""
    parts = []
    for i in range(64):
        n = LENGTHS[i % len(LENGTHS)] % 200
        parts.append(field(6, 2, _payload(n % 40, i)))
        parts.append(field(2 + i % 4, 2, _payload(n, i + 1)))
        if i % 5 == 0:
            parts.append(field(12, 0, 1 << (i % 64)))  # a varint of 1 to 10 bytes
        if i % 7 == 0:
            parts.append(field(100 + i, 0, i))
    buf = b"".join(parts)
    for cut in (len(buf), len(buf) - 1, len(buf) - 2, len(buf) - 33):
        assert_as_modelled(buf[:cut])
    assert_as_modelled(b"".join(reversed(parts)))


def test_odd_tags_split_as_modelled() -> None:
    cases = [
        b"\x32",  # a tag and nothing
        b"\x32\x05ab",  # a length past the end
        b"\x32\x80",  # a length cut in its varint
        b"\x32\x80\x80",
        b"\x32\x80\x01" + b"x" * 127,  # a two-byte length one short
        b"\x32\x80\x00",  # a two-byte zero
        b"\x32\x81\x80\x00" + b"x",  # a three-byte one
        b"\x60\x80",  # a varint field cut
        b"\x60\xff\x01",  # a two-byte varint
        b"\x60" + b"\xff" * 10 + b"\x01",  # eleven bytes
        b"\x62\x01\x01",  # period as bytes
        b"\x12\x01",  # a sample cut
        b"\x10\x01",  # a sample as a varint
        b"\x00\x01\x32\x00",  # field number 0
        b"\x02\x01x\x32\x00",
        b"\x0b\x0c",  # a group
        varint(2 << 3 | 2) + varint(2**40),
        varint(2**29 << 3) + b"\x01",
        varint((2**29 - 1) << 3) + b"\x01",
    ]
    for buf in cases:
        for pre in (b"", b"\x32\x00", field(6, 2, b"y" * 40)):
            assert_as_modelled(pre + buf)


def _seeds() -> list[bytes]:
    return ([minimal().SerializeToString()] + small_recordings(TESTDATA))[:24]


@pytest.mark.parametrize("seed", range(8))
def test_mutated_top_levels_split_as_modelled(seed: int) -> None:
    for case, data in mutated_cases(seed, _seeds(), count=300):
        try:
            assert_as_modelled(data)
        except AssertionError as e:
            raise AssertionError(f"seed {seed} case {case}: {e}") from None
