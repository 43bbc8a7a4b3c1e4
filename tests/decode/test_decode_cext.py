"""The fast decoder's C extension (pyproflab/decode/_wire.c) against its numpy path.

Rules checked: the extension is built and used in this installation (unless
``PYPROFLAB_PURE_DECODE`` is set); on every corpus profile and on mutated and
hand-made hostile inputs, both paths give the same Tokens and Fields (the C walk
goes message by message: the numpy Fields are compared in that order) or both
hand over to the reference decoder, and ``decode_bytes`` gives the same Profile
or the same error; arrays that do not fit together give ValueError, never a
crash; the C source compiles without warnings under -Wall -Wextra.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import random
from pathlib import Path

import numpy as np
import pytest
from support.decode_helpers import assert_each_file, same_profile
from support.fuzz_decode_helpers import mutated_cases
from support.profile_builders import field, minimal, varint
from support.testenv import (
    CORPUS,
    SKIP_NO_CORPUS,
    assert_compiles_without_warnings,
    corpus_id,
    corpus_proto_files,
)

from pyproflab.decode import decode_bytes, fast
from pyproflab.decode.lite import parse_top_level
from pyproflab.errors import ProfileError

PURE = os.environ.get("PYPROFLAB_PURE_DECODE", "") not in ("", "0")
IN_USE = fast._wire  # what decoding uses in this installation and environment


def _built():
    try:
        from pyproflab.decode import _wire
    except ImportError:
        return None
    return _wire


WIRE = IN_USE or _built()  # compared with numpy even when PYPROFLAB_PURE_DECODE is set
needs_wire = pytest.mark.skipif(WIRE is None, reason="the C extension is not built")
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_NO_CORPUS)
KINDS = ("samples", "locations", "functions", "mappings")
SOURCE = Path(fast.__file__).with_name("_wire.c")


# --- the two paths ------------------------------------------------------------------


@pytest.fixture(autouse=True)
def c_path(monkeypatch):
    """Every test runs on the C path where there is one (numpy_path leaves it)."""
    if WIRE is not None:
        monkeypatch.setattr(fast, "_wire", WIRE)


def numpy_path(monkeypatch, fn, *args):
    with monkeypatch.context() as m:
        m.setattr(fast, "_wire", None)
        return fn(*args)


def outcome(fn, *args):
    """fn's result, or the exception it handed over or raised (a fault escapes)."""
    try:
        return fn(*args)
    except (fast._HandToReference, ProfileError) as e:
        return e


def message_major(f: fast.Fields) -> list[np.ndarray]:
    """The numpy walk's fields in the C walk's order: message by message, each
    message's in order."""
    order = np.argsort(f.message, kind="stable")
    return [c[order] for c in (f.message, f.number, f.wire, f.tag, f.next)]


def assert_same_fields(c: fast.Fields, n: fast.Fields) -> None:
    assert c.count == n.count
    assert c.ordered and (c.message[1:] >= c.message[:-1]).all()
    for a, b in zip((c.message, c.number, c.wire, c.tag, c.next), message_major(n), strict=True):
        assert a.dtype == b.dtype
        assert np.array_equal(a, b)


def assert_same_walks(monkeypatch, messages: list[bytes]) -> None:
    """walk_messages, then the nested walks of field 3 (labels) and 4 (lines), agree."""
    c = outcome(fast.walk_messages, messages)
    n = outcome(numpy_path, monkeypatch, fast.walk_messages, messages)
    if isinstance(c, Exception) or isinstance(n, Exception):
        assert type(c) is type(n), f"{c!r} vs {n!r}"
        return
    (ctok, cf), (ntok, nf) = c, n
    assert ctok.size == ntok.size
    assert np.array_equal(ctok.values, ntok.values)
    assert np.array_equal(ctok.ends, ntok.ends)
    assert_same_fields(cf, nf)
    numbers = (1, 2, 3, 4, 5)
    cvals = outcome(cf.last_values, ctok, numbers)
    nvals = outcome(numpy_path, monkeypatch, nf.last_values, ntok, numbers)
    if isinstance(cvals, Exception) or isinstance(nvals, Exception):
        assert type(cvals) is type(nvals)
    else:
        for k, a, b in zip(numbers, cvals, nvals, strict=True):
            assert np.array_equal(a, b)
            assert np.array_equal(cf.last_value(ctok, k), b)
    for number in (1, 2):
        crep = outcome(cf.repeated_varints, ctok, number)
        nrep = outcome(numpy_path, monkeypatch, nf.repeated_varints, ntok, number)
        if isinstance(crep, Exception) or isinstance(nrep, Exception):
            assert type(crep) is type(nrep), f"{crep!r} vs {nrep!r}"
        else:
            for a, b in zip(crep, nrep, strict=True):
                assert a.dtype == b.dtype and np.array_equal(a, b)
    for number in (3, 4):
        ckids = outcome(cf.children, ctok, number)
        nkids = outcome(numpy_path, monkeypatch, nf.children, ntok, number)
        if isinstance(ckids, Exception) or isinstance(nkids, Exception):
            assert type(ckids) is type(nkids)
            continue
        for a, b in zip(ckids, nkids, strict=True):
            assert np.array_equal(a, b)
        cw = outcome(fast.walk, ctok, *ckids[1:])
        nw = outcome(numpy_path, monkeypatch, fast.walk, ntok, *nkids[1:])
        if isinstance(cw, Exception) or isinstance(nw, Exception):
            assert type(cw) is type(nw), f"{cw!r} vs {nw!r}"
        else:
            assert_same_fields(cw, nw)


def assert_same_decode(monkeypatch, data: bytes) -> None:
    c = outcome(decode_bytes, data)
    n = outcome(numpy_path, monkeypatch, decode_bytes, data)
    if isinstance(c, Exception) or isinstance(n, Exception):
        assert type(c) is type(n) and str(c) == str(n), f"{c!r} vs {n!r}"
    else:
        same_profile(c, n)


def assert_same(monkeypatch, data: bytes) -> None:
    raw = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    try:
        top = parse_top_level(raw, source="<test>")
    except ProfileError:
        top = None
    if top is not None:
        for kind in KINDS:
            assert_same_walks(monkeypatch, getattr(top, kind))
    assert_same_decode(monkeypatch, data)


# --- built and used -------------------------------------------------------------------


@pytest.mark.skipif(PURE, reason="PYPROFLAB_PURE_DECODE is set: the numpy path is forced")
def test_the_extension_is_built_and_used(monkeypatch) -> None:
    assert IN_USE is not None, "pyproflab.decode._wire did not import: was it built?"
    calls: list[str] = []

    class Spy:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(IN_USE, name)

    from pyproflab.decode import lite

    monkeypatch.setattr(fast, "_wire", Spy())
    decode_bytes(minimal().SerializeToString())
    # The top level split in place (lite.split_top) is read in place too.
    split = "split_at" if lite._split_top is not None else "split"
    assert {split, "walk", "repeated", "last_values"} <= set(calls)
    # Locations and functions read in one pass each (direct.py); samples tried
    # first, and walked since they have labels.
    assert {"samples_at", "locations_at", "functions_at"} <= set(calls)


@pytest.mark.parametrize(
    ("module", "env"),
    [
        ("pyproflab.decode._wire", "PYPROFLAB_PURE_DECODE"),
        ("pyproflab.keying._blake", "PYPROFLAB_PURE_KEYS"),
    ],
)
def test_pure_switch(monkeypatch, module, env) -> None:
    """The environment switch forces the pure path; 0 or unset loads the
    extension when it was built."""
    from pyproflab.native import optional_extension

    monkeypatch.setenv(env, "1")
    assert optional_extension(module, env) is None
    monkeypatch.setenv(env, "0")
    built = importlib.util.find_spec(module) is not None
    assert (optional_extension(module, env) is not None) == built


def test_the_source_compiles_without_warnings() -> None:
    assert_compiles_without_warnings(SOURCE)


# --- the same results ---------------------------------------------------------------


@needs_wire
@needs_corpus
@pytest.mark.corpus
def test_corpus_profiles_walk_and_decode_alike(monkeypatch) -> None:
    check = lambda data: assert_same(monkeypatch, data)  # noqa: E731
    assert_each_file(corpus_proto_files(), check, corpus_id)


def _seeds() -> list[bytes]:
    out = [minimal().SerializeToString()]
    for path in corpus_proto_files():
        if path.stat().st_size < 64 << 10:
            data = path.read_bytes()
            out.append(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    return out[:16]


@needs_wire
@pytest.mark.parametrize("seed", range(4))
def test_mutated_inputs_walk_and_decode_alike(monkeypatch, seed: int) -> None:
    for case, data in mutated_cases(seed, _seeds()):
        try:
            assert_same(monkeypatch, data)
        except AssertionError as e:
            raise AssertionError(f"seed {seed} case {case}: {e}") from None


# Sub-messages that the bulk walk hands over, each in the numpy walk's words.
HAND_OVERS = {
    "varint longer than 10 bytes": [b"\x08" + b"\xff" * 10 + b"\x01"],
    "buffer ends inside a varint": [field(1, 0, 1) + b"\x08\x80"],
    "message ends inside a varint": [field(1, 0, 1) + b"\x10\x80", b"\x01" + field(2, 0, 1)],
    "field ends inside a varint": [field(1, 2, b"\x96") + b"\x01"],
    "truncated field": [field(1, 0, 1) + b"\x10"],
    "fixed64 field": [field(1, 1, b"\x00" * 8)],
    "fixed32 field": [field(1, 5, b"\x00" * 4)],
    "group": [b"\x0b\x0c"],
    "field number 0": [field(0, 0, 1)],
    "field longer than its message": [b"\x0a\x05\x01\x02"],
    "field one byte past its message": [b"\x0a\x03\x01\x02", field(1, 0, 1)],
    "field length past 2**63": [b"\x0a" + varint((1 << 64) - 1) + b"\x01"],
}


@needs_wire
@pytest.mark.parametrize("name", HAND_OVERS)
def test_hand_overs_are_the_same(monkeypatch, name: str) -> None:
    messages = [field(1, 0, 7), *HAND_OVERS[name]]
    with pytest.raises(fast._HandToReference):
        fast.walk_messages(messages)
    with pytest.raises(fast._HandToReference):
        numpy_path(monkeypatch, fast.walk_messages, messages)
    # Inside a sample, as a label or as the whole sample: the same Profile or error.
    for wrap in (lambda m: field(3, 2, m), lambda m: m):
        p = minimal()
        data = p.SerializeToString() + b"".join(field(2, 2, wrap(m)) for m in messages)
        assert_same(monkeypatch, data)


@needs_wire
def test_nested_hand_overs_are_the_same(monkeypatch) -> None:
    """The same bad fields inside labels (a nested walk)."""
    for bad in HAND_OVERS.values():
        sample = (
            field(1, 0, 1) + field(2, 0, 1) + field(2, 0, 1) + b"".join(field(3, 2, m) for m in bad)
        )
        assert_same(monkeypatch, minimal().SerializeToString() + field(2, 2, sample))


@needs_wire
def test_ten_byte_varints_wrap_like_upb(monkeypatch) -> None:
    for x in (0, 1, 127, 128, 2**63, 2**64 - 1):
        for last in (b"\x01", b"\x7f"):  # bits past the 64th are dropped
            messages = [field(1, 0, x), b"\x08" + b"\xff" * 9 + last]
            assert_same_walks(monkeypatch, messages)
    tok, _ = fast.walk_messages([b"\x08" + b"\xff" * 9 + b"\x7f"])
    assert int(tok.values[1]) == 2**64 - 1


@needs_wire
def test_field_arrays_grow_and_the_walk_resumes(monkeypatch) -> None:
    """More fields than the first guess (4 per message) and past the one-pass bound."""
    r = random.Random(5)
    messages = [
        b"".join(field(r.randrange(1, 12), 0, r.randrange(1 << 40)) for _ in range(r.randrange(12)))
        for _ in range(20_000)
    ]
    assert_same_walks(monkeypatch, messages)
    tok, f = fast.walk_messages(messages)
    assert f.message.size > 4 * len(messages) + 64
    nested = [field(3, 2, b"".join(messages[i : i + 8])) for i in range(0, len(messages), 8)]
    assert_same_walks(monkeypatch, nested)


@needs_wire
def test_edge_shapes(monkeypatch) -> None:
    for messages in (
        [],
        [b""],
        [b"", b"", b""],
        [b"", field(1, 0, 1), b""],
        [field(1, 2, b"")],
        [field(1, 2, b""), field(1, 2, b"") + field(2, 0, 3)],
        [field(3, 2, b"") + field(3, 2, field(1, 0, 1))],
        [field(1, 2, varint(1) + varint(300) + varint(2**63)) + field(1, 0, 5)],
    ):
        assert_same_walks(monkeypatch, messages)


# --- hostile arguments to the extension itself ----------------------------------------


@needs_wire
def test_arrays_that_do_not_fit_are_refused() -> None:
    i64, u64 = fast.I64, fast.U64
    tok, _ = fast.walk_messages([field(1, 0, 1), field(2, 2, b"\x01\x02")])
    cols = fast._field_columns(4)
    first = np.array([0, 2], dtype=i64)
    end = np.array([2, 6], dtype=i64)
    end_byte = np.array([2, 6], dtype=i64)
    for bad in (
        (first, np.array([2, 99], dtype=i64), end_byte),  # past the varints
        (np.array([-5, 2], dtype=i64), end, end_byte),  # negative
        (first, end[:1], end_byte),  # sizes differ
    ):
        with pytest.raises(ValueError):
            WIRE.walk(tok.values, tok.ends, *bad, *cols, 0, 0)
    with pytest.raises(ValueError):
        WIRE.walk(tok.values, tok.ends, first, end, end_byte, *cols, 5, 0)  # m past the end
    with pytest.raises(ValueError):
        WIRE.walk(tok.values, tok.ends, first, end, end_byte, *cols, 0, 99)  # k past the end
    with pytest.raises(ValueError):
        WIRE.walk(tok.values, tok.ends, first, end, end_byte, *cols[:4], cols[0][:1], 0, 0)
    # A nonsensical end byte: nothing read out of bounds (here: a field too long).
    k, _ = WIRE.walk(tok.values, tok.ends, first, end, np.array([2, 5], dtype=i64), *cols, 0, 0)
    assert k < 0
    with pytest.raises(TypeError):
        WIRE.count_ends([b"ok", "text"])
    size, count = WIRE.count_ends([b"\x08\x01"])
    vals, ends = np.empty(count, dtype=u64), np.empty(count + 1, dtype=i64)
    with pytest.raises(ValueError):  # values and ends of different sizes
        WIRE.split([b"\x08\x01"], vals, ends, np.empty(1, i64), np.empty(2, i64), *cols, 0, 0)
    k, m, n = WIRE.split([b"\x08\x01"], vals, ends[:count], np.empty(1, i64), np.empty(2, i64),
                         *cols, 0, 0)  # fmt: skip
    assert (k, m, n) == (1, 1, count)
    short = np.empty(count - 1, dtype=u64), np.empty(count - 1, dtype=i64)
    k, _, _ = WIRE.split([b"\x08\x01"], *short, np.empty(1, i64), np.empty(2, i64), *cols, 0, 0)
    assert k < 0  # room for fewer varints than there are: never written past
    with pytest.raises(ValueError):  # runs past the values
        WIRE.gather(
            tok.values,
            np.array([0], dtype=i64),
            np.array([tok.values.size - 1], dtype=i64),
            np.array([5], dtype=i64),
            np.empty(2, dtype=i64),
            np.empty(5, dtype=u64),
        )
    fcols = (np.array([1, 0], dtype=i64), np.array([1, 1], dtype=u64), np.zeros(2, np.int8))
    fcols += (np.array([0, 0], dtype=i64), np.array([2, 2], dtype=i64))
    for bad_cols, offsets, out in (
        (fcols, np.empty(3, dtype=i64), np.empty(0, dtype=u64)),  # messages decreasing
        (fcols, np.empty(0, dtype=i64), np.empty(0, dtype=u64)),  # no offsets
        ((*fcols[:3], np.array([0, 99], dtype=i64), fcols[4]), np.empty(3, i64), np.empty(0, u64)),
        (fcols[:4] + (fcols[4][:1],), np.empty(3, dtype=i64), np.empty(0, dtype=u64)),
    ):
        with pytest.raises(ValueError):
            WIRE.repeated(tok.values, *bad_cols, 1, offsets, out)
    ok_cols = (np.array([0, 1], dtype=i64), *fcols[1:])
    assert WIRE.repeated(tok.values, *ok_cols, 1, np.empty(3, i64), np.empty(0, u64)) == 2
    with pytest.raises(ValueError):  # out too small
        WIRE.repeated(tok.values, *ok_cols, 1, np.empty(3, i64), np.empty(1, u64))
    with pytest.raises(ValueError):  # owners decreasing
        WIRE.gather(
            tok.values,
            np.array([1, 0], dtype=i64),
            np.array([0, 0], dtype=i64),
            np.array([1, 1], dtype=i64),
            np.empty(3, dtype=i64),
            np.empty(2, dtype=u64),
        )
    with pytest.raises(ValueError):  # a field's tag past the varints
        WIRE.last_values(
            tok.values,
            np.array([0], dtype=i64),
            np.array([1], dtype=u64),
            np.array([0], dtype=np.int8),
            np.array([tok.values.size], dtype=i64),
            np.array([1], dtype=i64),
            np.zeros((1, 1), dtype=u64),
        )


# --- unknown top-level fields, dropped before upb parses (lite.py, _wire.known_fields) ----

TOP_LEVEL_FIELDS = {
    "varint": field(100, 0, 5),
    "fixed64": field(101, 1, b"\x00" * 8),
    "fixed32": field(102, 5, b"\x00" * 4),
    "bytes": field(103, 2, b"abc"),
    "field number 0": field(0, 0, 1),
    "the largest field number": field(2**29 - 1, 0, 1),
    "a field number past 2**29 - 1": varint(2**29 << 3) + varint(1),
    "a group": varint(100 << 3 | 3) + varint(100 << 3 | 4),
    "wire type 6": varint(100 << 3 | 6) + varint(1),
    "a varint longer than 10 bytes": varint(100 << 3) + b"\xff" * 10 + b"\x01",
    "bytes past the end": varint(100 << 3 | 2) + varint(5) + b"ab",
    "a known field with the wrong wire type": field(12, 2, b"\x01"),
    "a known field only": field(12, 0, 7),
}


@needs_wire
@pytest.mark.parametrize("name", TOP_LEVEL_FIELDS)
def test_top_level_fields_decode_alike_with_and_without_dropping(monkeypatch, name) -> None:
    """Before, between and after the known fields: the same Profile or the same
    error whether the unknown fields are dropped in C or parsed by upb."""
    from pyproflab.decode import lite

    known = minimal().SerializeToString()
    extra = TOP_LEVEL_FIELDS[name]
    middle = len(field(1, 2, minimal().sample_type[0].SerializeToString()))  # after one field
    for data in (extra + known, known[:middle] + extra + known[middle:], known + extra):
        c = outcome(decode_bytes, data)
        with monkeypatch.context() as m:
            m.setattr(lite, "_wire", None)
            n = outcome(decode_bytes, data)
        if isinstance(c, Exception) or isinstance(n, Exception):
            assert type(c) is type(n) and str(c) == str(n), f"{c!r} vs {n!r}"
        else:
            same_profile(c, n)


@needs_wire
def test_known_fields_drops_only_unknown_ones() -> None:
    from pyproflab.decode import lite

    known = minimal().SerializeToString()
    table = lite._PROFILE_WIRES
    assert WIRE.known_fields(known, table) is known  # nothing to drop: no copy
    unknown = field(100, 0, 1) * 1000 + field(0, 2, b"x" * 50)
    assert WIRE.known_fields(unknown + known + unknown, table) == known
    assert WIRE.known_fields(bytearray(known + unknown), table) == known
    for odd in ("a group", "wire type 6", "bytes past the end", "a field number past 2**29 - 1"):
        assert WIRE.known_fields(known + unknown + TOP_LEVEL_FIELDS[odd], table) is None
