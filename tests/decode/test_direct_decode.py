"""Samples, locations and functions read in one C pass each (``direct.py``,
``_wire.samples_at`` / ``locations_at`` / ``functions_at``) against the walk.

Rules checked: every profile of the repo's test data and of the public corpus,
hand-made odd sub-messages and seeded mutations give the same walked arrays
(values and dtypes) and the same Profile (every table equal), or the same error
word for word, with the direct path on and off (``fast.DIRECT``); the plain
shapes are taken by the direct path and the odd ones are declined to the walk;
segments outside their buffer and arrays that do not fit give ValueError.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import numpy as np
import pytest
from support.decode_helpers import assert_each_file, data_files, same_profile, small_recordings
from support.fuzz_decode_helpers import mutated_cases
from support.profile_builders import HEADER_FIELDS, PROFILE_TABLES, field, minimal, varint
from support.testenv import CORPUS, SKIP_NO_CORPUS, corpus_files, corpus_id

from pyproflab.decode import decode_bytes, direct, fast, lite
from pyproflab.decode.pprof import decompress
from pyproflab.errors import ProfileError

TESTDATA = Path(__file__).resolve().parent.parent / "testdata"
WIRE = fast._wire if fast._wire is not None and hasattr(fast._wire, "samples_at") else None
pytestmark = pytest.mark.skipif(WIRE is None, reason="the C extension is not built or is off")
I64, U64 = np.int64, np.uint64
U64_NONE = np.empty(0, dtype=U64)


def outcome(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except (ProfileError, fast._HandToReference) as e:
        return e


def both_ways(monkeypatch, fn, *args, **kwargs):
    """fn's outcome with the direct path, then with the walk only."""
    monkeypatch.setattr(fast, "DIRECT", True)
    on = outcome(fn, *args, **kwargs)
    with monkeypatch.context() as m:
        m.setattr(fast, "DIRECT", False)
        off = outcome(fn, *args, **kwargs)
    return on, off


def same_error_or(a, b, same) -> None:
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert type(a) is type(b) and str(a) == str(b), f"{a!r} vs {b!r}"
    else:
        same(a, b)


def same_array(a: np.ndarray, b: np.ndarray, what: str) -> None:
    assert a.dtype == b.dtype, what
    assert a.shape == b.shape, what
    assert np.array_equal(a, b), what


def same_fields(a, b) -> None:
    """Two walked kinds (a dataclass of arrays and dicts of arrays, or a dict)."""
    items = vars(a) if not isinstance(a, dict) else a
    for name, x in items.items():
        y = getattr(b, name) if not isinstance(b, dict) else b[name]
        if isinstance(x, dict):
            assert x.keys() == y.keys(), name
            for k in x:
                same_array(x[k], y[k], f"{name}[{k}]")
        elif isinstance(x, np.ndarray):
            same_array(x, y, str(name))
        else:
            assert x == y, name


def same_tables(a, b) -> None:
    same_profile(a, b)
    for name in PROFILE_TABLES:
        assert getattr(a, name).equals(getattr(b, name)), name
    for name in HEADER_FIELDS:
        assert getattr(a, name) == getattr(b, name), name


def walks(top: lite.TopLevel):
    """Each kind as _decode walks it (outcome per kind)."""
    nstr = len(top.raw_strings)
    ntypes = len(top.sample_types)
    return (
        lambda: fast._walk_samples(top, nstr, ntypes, source="<test>"),
        lambda: fast._walk_locations(top),
        lambda: fast._walk_functions(top),
    )


def assert_same(monkeypatch, data: bytes) -> None:
    """The same walked kinds and the same Profile (or error), direct path on and off."""
    try:
        raw = decompress(data, source="<test>", max_bytes=64 << 20)
        top = lite.parse_top_level(raw, source="<test>")
    except ProfileError:
        top = None
    if top is not None:
        for walk in walks(top):
            on, off = both_ways(monkeypatch, walk)
            same_error_or(on, off, same_fields)
    on, off = both_ways(monkeypatch, lambda: decode_bytes(data, source="<test>"))
    same_error_or(on, off, same_tables)


# --- every profile we have ---------------------------------------------------------------


def test_repo_test_data_decodes_alike(monkeypatch) -> None:
    check = lambda data: assert_same(monkeypatch, data)  # noqa: E731
    assert_each_file(data_files(TESTDATA), check, lambda path: path.relative_to(TESTDATA))


@pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_NO_CORPUS)
@pytest.mark.corpus
def test_corpus_decodes_alike(monkeypatch) -> None:
    assert_each_file(corpus_files(), lambda data: assert_same(monkeypatch, data), corpus_id)


def test_go_profiles_take_the_direct_path() -> None:
    """The recorded Go profiles without labels are read by the direct path, every kind."""
    for name in ("gcload.cpu.pb.gz", "block.pb.gz"):
        raw = gzip.decompress((TESTDATA / "go" / name).read_bytes())
        top = lite.parse_top_level(raw, source=name)
        assert len(top.samples) and len(top.locations) and len(top.functions)
        assert _direct(top, "samples") is not None, name
        assert _direct(top, "locations") is not None, name
        assert _direct(top, "functions") is not None, name


# --- hand-made sub-messages -----------------------------------------------------------------


def _base() -> bytes:
    """minimal() without its labels: every kind in its plain shape."""
    p = minimal()
    for s in p.sample:
        del s.label[:]
    return p.SerializeToString()


BASE = _base()
TOO_LONG = b"\xff" * 10 + b"\x01"  # an 11-byte varint
TEN_BYTES = varint(-5)  # a 10-byte varint: taken, wrapped as int64

# (top-level field number, payload of one more message, taken by the direct path)
SAMPLES = {
    "packed": (field(1, 2, varint(1) + varint(2)) + field(2, 2, varint(3) + varint(4)), True),
    "unpacked ids and values": (
        field(1, 0, 2) + field(1, 0, 1) + field(2, 0, 3) + field(2, 0, 4),
        True,
    ),
    "split packed runs": (
        field(1, 2, varint(1))
        + field(2, 0, 3)
        + field(1, 2, varint(2) + varint(1))
        + field(2, 2, varint(4)),
        True,
    ),
    "empty runs": (
        field(1, 2, b"")
        + field(1, 0, 1)
        + field(2, 2, b"")
        + field(2, 2, TEN_BYTES)
        + field(2, 0, 7),
        True,
    ),
    "ten-byte values": (field(1, 0, 1) + field(2, 0, -1) + field(2, 2, TEN_BYTES), True),
    "a two-byte tag": (b"\x88\x00" + varint(1) + field(2, 2, varint(1) + varint(2)), True),
    "no fields": (b"", True),
    "one value too few": (field(1, 0, 1) + field(2, 0, 3), True),
    "a location that does not exist": (field(1, 0, 9) + field(2, 2, b"\x01\x02"), True),
    "a label": (field(1, 0, 1) + field(2, 2, b"\x01\x02") + field(3, 2, field(1, 0, 9)), False),
    "an empty label": (field(3, 2, b"") + field(2, 2, b"\x01\x02"), False),
    "an unknown field": (field(2, 2, b"\x01\x02") + field(9, 0, 1), False),
    "an unknown bytes field": (field(2, 2, b"\x01\x02") + field(9, 2, b"ab"), False),
    "ids as fixed32": (field(1, 5, b"\x01\x00\x00\x00") + field(2, 2, b"\x01\x02"), False),
    "ids as fixed64": (field(1, 1, b"\x01" + b"\x00" * 7) + field(2, 2, b"\x01\x02"), False),
    "a group": (varint(1 << 3 | 3) + varint(1 << 3 | 4) + field(2, 2, b"\x01\x02"), False),
    "field number 0": (field(0, 0, 1) + field(2, 2, b"\x01\x02"), False),
    "a packed run ending in a varint": (field(1, 2, b"\x01\x81") + field(2, 2, b"\x01\x02"), False),
    "a packed run past the sample": (varint(1 << 3 | 2) + varint(5) + b"\x01\x02", False),
    "a varint too long": (field(1, 2, TOO_LONG) + field(2, 2, b"\x01\x02"), False),
    "an unpacked varint too long": (varint(1 << 3) + TOO_LONG, False),
    "a truncated value": (field(2, 2, b"\x01\x02") + b"\x08", False),
    "a truncated tag": (field(2, 2, b"\x01\x02") + b"\x88", False),
    "a value cut in a varint": (field(2, 2, b"\x01\x02") + b"\x08\x81", False),
}
LINE = field(1, 0, 1) + field(2, 0, 5)
LOCATIONS = {
    "plain": (field(1, 0, 3) + field(2, 0, 1) + field(3, 0, 0x99) + field(4, 2, LINE), True),
    "every field twice": (
        field(1, 0, 7)
        + field(1, 0, 3)
        + field(2, 0, 9)
        + field(2, 0, 1)
        + field(3, 0, 1)
        + field(3, 0, 2)
        + field(5, 0, 1)
        + field(5, 0, 0)
        + field(4, 2, LINE),
        True,
    ),
    "folded, no lines": (field(1, 0, 3) + field(5, 0, 1), True),
    "lines with every field twice": (
        field(1, 0, 3)
        + field(4, 2, field(1, 0, 9) + LINE + field(3, 0, 4) + field(2, 0, 6) + field(3, 0, 8)),
        True,
    ),
    "an empty line and many lines": (
        field(4, 2, b"") + field(1, 0, 3) + field(4, 2, LINE) * 5 + field(4, 2, field(3, 0, -1)),
        True,
    ),
    "no fields": (b"", True),
    "ten-byte fields": (field(1, 0, 3) + field(3, 0, -2) + field(4, 2, field(2, 0, -7)), True),
    "a line with a missing function": (field(1, 0, 3) + field(4, 2, field(1, 0, 77)), True),
    "a missing mapping": (field(1, 0, 3) + field(2, 0, 42), True),
    "an unknown field": (field(1, 0, 3) + field(6, 0, 1), False),
    "an unknown field in a line": (field(1, 0, 3) + field(4, 2, LINE + field(4, 0, 1)), False),
    "a bytes field in a line": (field(1, 0, 3) + field(4, 2, field(1, 2, b"\x01")), False),
    "field number 0 in a line": (field(1, 0, 3) + field(4, 2, field(0, 0, 1)), False),
    "a line as a varint": (field(1, 0, 3) + field(4, 0, 1), False),
    "an id as bytes": (field(1, 2, b"\x03"), False),
    "a line ending in a varint": (field(1, 0, 3) + field(4, 2, b"\x08\x81"), False),
    "a line cut after its tag": (field(1, 0, 3) + field(4, 2, b"\x08"), False),
    "a line past the location": (field(1, 0, 3) + varint(4 << 3 | 2) + varint(9) + b"\x08", False),
    "a varint too long in a line": (field(1, 0, 3) + field(4, 2, b"\x08" + TOO_LONG), False),
    "a truncated id": (b"\x08", False),
    "fixed64 address": (field(1, 0, 3) + field(3, 1, b"\x00" * 8), False),
}
FUNCTIONS = {
    "plain": (field(1, 0, 3) + field(2, 0, 5) + field(3, 0, 5) + field(4, 0, 6), True),
    "every field twice": (
        field(1, 0, 9)
        + field(1, 0, 3)
        + field(2, 0, 8)
        + field(2, 0, 5)
        + field(5, 0, 4)
        + field(5, 0, -3)
        + field(4, 0, 1)
        + field(4, 0, 6),
        True,
    ),
    "no fields": (b"", True),
    "a string past the table": (field(1, 0, 3) + field(2, 0, 99), True),
    "an unknown field": (field(1, 0, 3) + field(6, 0, 1), False),
    "a name as bytes": (field(1, 0, 3) + field(2, 2, b"\x05"), False),
    "field number 0": (field(0, 0, 1) + field(1, 0, 3), False),
    "a truncated name": (field(1, 0, 3) + b"\x10", False),
    "a name too long": (field(1, 0, 3) + varint(2 << 3) + TOO_LONG, False),
}
KINDS = {2: ("samples", SAMPLES), 4: ("locations", LOCATIONS), 5: ("functions", FUNCTIONS)}
CASES = [(number, name) for number, (_, cases) in KINDS.items() for name in cases]


def _direct(top: lite.TopLevel, kind: str):
    """What direct.py reads of one kind (None: declined)."""
    if kind == "samples":
        return direct.samples(WIRE, top.samples, len(top.sample_types))
    return getattr(direct, kind)(WIRE, getattr(top, kind))


@pytest.mark.parametrize(("number", "name"), CASES, ids=[f"{n}-{c}" for n, c in CASES])
def test_odd_sub_messages_decode_alike(monkeypatch, number: int, name: str) -> None:
    """One more sample, location or function, last, first, twice or alone; the
    plain shapes taken by the direct path, the others declined."""
    kind, cases = KINDS[number]
    payload, taken = cases[name]
    extra = field(number, 2, payload)
    assert_same(monkeypatch, extra)  # no string table
    for data in (BASE + extra, extra + BASE, BASE + extra + extra):
        assert_same(monkeypatch, data)
        top = lite.parse_top_level(data, source="<test>")
        assert (_direct(top, kind) is not None) == taken, data.hex()


def test_the_base_profile_takes_the_direct_path() -> None:
    top = lite.parse_top_level(BASE, source="<test>")
    for kind in ("samples", "locations", "functions"):
        assert _direct(top, kind) is not None, kind
    labelled = lite.parse_top_level(minimal().SerializeToString(), source="<test>")
    assert _direct(labelled, "samples") is None


def test_no_messages() -> None:
    empty = lite.RawMessages(b"", np.zeros(0, I64), np.zeros(0, I64))
    got = direct.samples(WIRE, empty, 2)
    assert got is not None
    for a, want in zip(got, (np.zeros(1, I64), np.zeros(0, U64)) * 2, strict=True):
        same_array(a, want, "samples")
    got = direct.locations(WIRE, empty)
    assert got is not None
    same_array(got[0], np.zeros((4, 0), U64), "scalars")
    same_array(got[1], np.zeros(1, I64), "line offsets")
    same_array(got[2], np.zeros((3, 0), U64), "lines")
    same_array(direct.functions(WIRE, empty), np.zeros((5, 0), U64), "functions")


# --- mutations ----------------------------------------------------------------------------


def _seeds() -> list[bytes]:
    return ([BASE, minimal().SerializeToString()] + small_recordings(TESTDATA))[:24]


@pytest.mark.parametrize("seed", range(4))
def test_mutated_profiles_decode_alike(monkeypatch, seed: int) -> None:
    for case, data in mutated_cases(100 + seed, _seeds()):
        try:
            assert_same(monkeypatch, data)
        except AssertionError as e:
            raise AssertionError(f"seed {seed} case {case}: {e}") from None


VALUES = [0, 1, 2, 5, 127, 128, 300, 2**35, 2**63, -1]
# The field numbers of each kind, often; others sometimes.
NUMBERS = {
    "samples": [1, 1, 2, 2, 3],
    "locations": [1, 2, 3, 4, 4, 5],
    "functions": [1, 2, 3, 4, 5],
}


def _random_field(r: random.Random, kind: str) -> bytes:
    number = r.choice(NUMBERS[kind]) if r.random() < 0.97 else r.choice([0, 6, 2**29 - 1])
    if r.random() < 0.03:
        return field(number, r.choice([1, 5]), b"\x01" * r.choice([4, 8]))
    if r.random() < (0.4 if kind == "samples" else 0.9 if number != 4 else 0.1):
        return field(number, 0, r.choice(VALUES))
    if kind == "samples" and number != 3:  # packed values
        payload = b"".join(varint(r.choice(VALUES)) for _ in range(r.randint(0, 4)))
    else:  # a nested message (a label or a line)
        fields = [field(r.randint(1, 4), 0, r.choice(VALUES)) for _ in range(r.randint(0, 3))]
        payload = b"".join(fields)
    return field(number, 2, payload)


def _random_message(r: random.Random, kind: str) -> bytes:
    data = b"".join(_random_field(r, kind) for _ in range(r.randint(0, 4)))
    if data and r.random() < 0.2:  # a byte changed, or cut off
        i = r.randrange(len(data))
        data = r.choice((data[:i] + bytes([r.randrange(256)]) + data[i + 1 :], data[:i]))
    return data


def _random_top(r: random.Random, kind: str) -> lite.TopLevel:
    """Random sub-messages of a kind (segments of a buffer with bytes before and
    after) in a top level."""
    messages = [_random_message(r, kind) for _ in range(r.randint(1, 4))]
    lengths = np.array([len(m) for m in messages], dtype=I64)
    starts = np.cumsum(lengths) - lengths
    raw = lite.RawMessages(b"junk" + b"".join(messages) + b"junk", starts + 4, lengths)
    types = [b"\x08\x01\x10\x02"] * r.randint(0, 3)
    return lite.TopLevel(
        sample_types=types, samples=raw, mappings=[], locations=raw, functions=raw,
        raw_strings=[b""] + [b"s"] * 8, drop_frames=0, keep_frames=0, time_nanos=0,
        duration_nanos=0, period_type=None, period=0, comments=[], default_sample_type=0,
        doc_url=0,
    )  # fmt: skip


def test_random_sub_messages_read_alike(monkeypatch) -> None:
    """Random sub-messages of each kind: the same arrays or error both ways, and
    the direct path takes a good share of them."""
    r = random.Random(14)
    taken = dict.fromkeys(("samples", "locations", "functions"), 0)
    for case in range(1000):
        for i, kind in enumerate(taken):
            top = _random_top(r, kind)
            on, off = both_ways(monkeypatch, walks(top)[i])
            try:
                same_error_or(on, off, same_fields)
            except AssertionError as e:
                raise AssertionError(f"case {case} {kind}: {e}") from None
            taken[kind] += _direct(top, kind) is not None and int(top.samples.length.sum()) > 0
    assert min(taken.values()) > 120, taken


def test_memory_is_bounded_by_the_bytes() -> None:
    """Many sample types and many empty samples: room for values is bounded by
    the samples' bytes, not samples x types."""
    import tracemalloc

    n = 100_000
    empty = lite.RawMessages(b"", np.zeros(n, I64), np.zeros(n, I64))
    tracemalloc.start()
    try:
        got = direct.samples(WIRE, empty, n)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got is not None and got[3].size == 0
    assert peak < 8 << 20, peak  # the offsets (2 x 0.8 MB); not 80 GB of values


# --- arrays that do not fit -------------------------------------------------------------------


def test_segments_outside_the_buffer_are_refused() -> None:
    buf = b"\x08\x01\x10\x02"
    for start, length in ((-1, 1), (0, 5), (4, 1), (3, -1), (2**62, 2**62)):
        segs = (buf, np.array([0, start], dtype=I64), np.array([2, length], dtype=I64))
        offsets = np.empty(3, I64)
        with pytest.raises(ValueError):
            WIRE.samples_at(*segs, offsets, np.empty(4, U64), offsets.copy(), np.empty(4, U64))
        with pytest.raises(ValueError):
            WIRE.locations_at(*segs, np.zeros(8, U64), offsets, np.zeros(6, U64))
        with pytest.raises(ValueError):
            WIRE.functions_at(*segs, np.zeros(10, U64))
    with pytest.raises(ValueError):
        WIRE.functions_at(buf, np.zeros(2, I64), np.zeros(3, I64), np.zeros(10, U64))


def _one(message: bytes) -> tuple:
    return message, np.array([0], dtype=I64), np.array([len(message)], dtype=I64)


def test_arrays_of_the_wrong_size_are_refused() -> None:
    segs = _one(field(1, 0, 1) + field(4, 2, LINE))
    with pytest.raises(ValueError):
        WIRE.samples_at(*segs, np.empty(1, I64), np.empty(1, U64), np.empty(2, I64), U64_NONE)
    with pytest.raises(ValueError):
        WIRE.locations_at(*segs, np.zeros(3, U64), np.empty(2, I64), np.zeros(3, U64))
    with pytest.raises(ValueError):
        WIRE.locations_at(*segs, np.zeros(4, U64), np.empty(2, I64), np.zeros(4, U64))
    with pytest.raises(ValueError):
        WIRE.functions_at(*segs, np.zeros(4, U64))
    with pytest.raises(ValueError):
        WIRE.functions_at(*segs, np.zeros(41, np.uint8))


def test_room_for_fewer_values_or_lines_declines() -> None:
    """Never a write past the arrays: too little room declines; just enough does."""
    segs = _one(field(1, 0, 1) + field(4, 2, LINE) + field(4, 2, LINE))
    for room, want in ((0, None), (1, None), (2, 2), (5, 2)):
        lines = np.full((3, room), 7, U64)  # each line zeroed before it is read
        got = WIRE.locations_at(*segs, np.zeros(4, U64), np.empty(2, I64), lines)
        assert got == want, room
        if want:
            assert lines[:, :2].tolist() == [[1, 1], [5, 5], [0, 0]]
            assert (lines[:, 2:] == 7).all()
    two_ids = _one(field(1, 2, b"\x81\x01\x02") + field(2, 0, 7))  # 3 bytes, 2 ids
    for room, want in ((0, None), (1, None), (2, (2, 1)), (3, (2, 1))):
        ids = np.zeros(room, U64)
        got = WIRE.samples_at(*two_ids, np.empty(2, I64), ids, np.empty(2, I64), np.zeros(1, U64))
        assert got == want, room
        if want:
            assert ids[:2].tolist() == [129, 2]
    no_room = WIRE.samples_at(
        *two_ids, np.empty(2, I64), np.zeros(2, U64), np.empty(2, I64), U64_NONE
    )
    assert no_room is None
