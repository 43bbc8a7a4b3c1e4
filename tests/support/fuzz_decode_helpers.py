"""Helpers of tests/decode/test_fuzz_decode.py that other test modules use too
(cut out of it by scripts/relayout_tests.py: no test module imports another)."""

from __future__ import annotations

import random

from support.profile_builders import varint


def _fields(buf: bytes) -> list[tuple[int, int, int, int]]:
    """Top-level (start, number, wire, payload_start) of a protobuf, as far as it parses."""
    out, i = [], 0
    try:
        while i < len(buf):
            start = i
            tag, i = _read_varint(buf, i)
            wire = tag & 7
            if wire == 0:
                _, i = _read_varint(buf, i)
            elif wire == 2:
                n, j = _read_varint(buf, i)
                out.append((start, tag >> 3, wire, i))
                i = j + n
                continue
            elif wire == 1:
                i += 8
            elif wire == 5:
                i += 4
            else:
                break
            out.append((start, tag >> 3, wire, i))
    except IndexError:
        pass
    return out


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    x = shift = 0
    while True:
        b = buf[i]
        i += 1
        x |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80 or shift > 70:
            return x, i


def bit_flips(r: random.Random, a: bytes, _b: bytes) -> bytes:
    d = bytearray(a)
    for _ in range(r.randint(1, 8)):
        i = r.randrange(len(d))
        d[i] ^= 1 << r.randrange(8)
    return bytes(d)


def truncate(r: random.Random, a: bytes, _b: bytes) -> bytes:
    return a[: r.randrange(len(a))]


def splice(r: random.Random, a: bytes, b: bytes) -> bytes:
    if r.random() < 0.5:  # at field boundaries: both halves parse as fields
        fa, fb = _fields(a), _fields(b)
        if fa and fb:
            return a[: r.choice(fa)[0]] + b[r.choice(fb)[0] :]
    return a[: r.randrange(len(a))] + b[r.randrange(len(b)) :]


def corrupt_varint(r: random.Random, a: bytes, _b: bytes) -> bytes:
    i = r.randrange(len(a))
    junk = r.choice(
        [
            b"\xff" * r.randint(9, 12),
            b"\x80" * r.randint(5, 11),
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
            b"\x80",
        ]
    )
    return a[:i] + junk + a[i + r.randint(0, 2) :]


def huge_length(r: random.Random, a: bytes, _b: bytes) -> bytes:
    fs = [f for f in _fields(a) if f[2] == 2]
    if not fs:
        return bit_flips(r, a, _b)
    start, number, _, payload = r.choice(fs)
    _, after = _read_varint(a, payload)
    size = r.choice(
        [1 << 31, (1 << 63) - 1, (1 << 64) - 1, len(a), len(a) - payload + 1, 1 << 40, 0x7FFFFFFF]
    )
    return a[:payload] + varint(size) + a[after:]


def junk(r: random.Random, a: bytes, _b: bytes) -> bytes:
    i = r.randrange(len(a) + 1)
    return a[:i] + r.randbytes(r.randint(1, 64)) + a[i:]


MUTATORS = [bit_flips, truncate, splice, corrupt_varint, huge_length, junk]


def mutated_cases(seed: int, seeds: list[bytes], count: int = 150):
    """(case number, input) pairs: each a seed input put through one to three
    mutations (the second input of a splice also from ``seeds``); deterministic."""
    r = random.Random(seed)
    for case in range(count):
        a, b = r.choice(seeds), r.choice(seeds)
        data = a
        for _ in range(r.choice([1, 1, 2, 3])):
            data = r.choice(MUTATORS)(r, data or a, b)
        yield case, data
