"""The shallow top-level view of a pprof message that both decode paths start from.

Rules (pprof's, from its profile/proto.go and profile/encode.go):

- upb splits the top level only (``proto/profile_lite.proto``): sub-messages
  and strings stay raw bytes, so they can be decoded in bulk.
- A known field with the wrong wire type, or a group anywhere, is an error
  (pprof's "type mismatch" / "unknown wire type"); unknown fields with a
  varint, fixed or length-delimited wire type are skipped, field number 0
  included (upb refuses it, pprof skips it: it is stripped and parsed again).
  upb keeps a copy of every unknown field it parses (its buffer doubling as it
  grows: 64 MiB of them cost 128 MiB more), so with the C extension the
  unknown top-level fields are dropped before upb sees the message
  (``_wire.known_fields``, which checks their wire types, so a message it
  passes needs no check after upb); a message with anything unusual in it is
  parsed whole, as before, and its error reported.
- A second ``time_nanos`` after a non-zero one means two profiles were
  concatenated: an error, as in pprof.
- ``string_table[0]`` must be ``""``. Strings that are not valid UTF-8 (pprof
  does not check) are kept with U+FFFD replacing the bad bytes.
- With the C extension, a top level that ``known_fields`` would pass is split
  by ``_wire.split_top`` instead: the payloads of the repeated message and
  string fields are copied into one buffer (``RawMessages``: a start and a
  length each, no object per message), and upb parses only the few scalar
  fields left. Anything else, or a rest that upb refuses, goes the upb way
  above, so both ways give the same TopLevel and the same errors
  (``PYPROFLAB_UPB_TOP_LEVEL=1`` forces the upb way, for tests that compare).

The descriptor is built here at run time instead of committing protoc output
(which would not pass ruff); tests/decode/test_proto_bindings.py checks it equals
protoc's reading of proto/profile_lite.proto.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from pyproflab.errors import CorruptProfileError, InvalidProfileError
from pyproflab.native import optional_extension

_wire = optional_extension("pyproflab.decode._wire", "PYPROFLAB_PURE_DECODE")
# The one-pass split of the top level (None: upb splits it; see the module rules).
_split_top = (
    _wire.split_top
    if _wire is not None and os.environ.get("PYPROFLAB_UPB_TOP_LEVEL", "") in ("", "0")
    else None
)

_F = descriptor_pb2.FieldDescriptorProto
_REPEATED, _OPTIONAL = _F.LABEL_REPEATED, _F.LABEL_OPTIONAL
_BYTES, _INT64 = _F.TYPE_BYTES, _F.TYPE_INT64

# (name, number, label, type, proto3 optional) exactly as in proto/profile_lite.proto.
LITE_FIELDS: list[tuple[str, int, int, int, bool]] = [
    ("sample_type", 1, _REPEATED, _BYTES, False),
    ("sample", 2, _REPEATED, _BYTES, False),
    ("mapping", 3, _REPEATED, _BYTES, False),
    ("location", 4, _REPEATED, _BYTES, False),
    ("function", 5, _REPEATED, _BYTES, False),
    ("string_table", 6, _REPEATED, _BYTES, False),
    ("drop_frames", 7, _OPTIONAL, _INT64, False),
    ("keep_frames", 8, _OPTIONAL, _INT64, False),
    ("time_nanos", 9, _REPEATED, _INT64, False),
    ("duration_nanos", 10, _OPTIONAL, _INT64, False),
    ("period_type", 11, _OPTIONAL, _BYTES, True),
    ("period", 12, _OPTIONAL, _INT64, False),
    ("comment", 13, _REPEATED, _INT64, False),
    ("default_sample_type", 14, _OPTIONAL, _INT64, False),
    ("doc_url", 15, _OPTIONAL, _INT64, False),
]
PROFILE_FIELD_NUMBERS = frozenset(number for _, number, *_ in LITE_FIELDS)
WIRE_START_GROUP = 3


def lite_file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of proto/profile_lite.proto, built by hand."""
    fd = descriptor_pb2.FileDescriptorProto(
        name="profile_lite.proto", package="pyproflab.lite", syntax="proto3"
    )
    msg = fd.message_type.add(name="ProfileLite")
    for name, number, label, typ, optional in LITE_FIELDS:
        field = msg.field.add(name=name, number=number, label=label, type=typ)
        if optional:
            # proto3 `optional` is a synthetic one-field oneof named "_<field>".
            field.proto3_optional = True
            field.oneof_index = len(msg.oneof_decl)
            msg.oneof_decl.add(name=f"_{name}")
    return fd


_pool = descriptor_pool.DescriptorPool()
_pool.Add(lite_file_descriptor())
ProfileLite = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName("pyproflab.lite.ProfileLite")
)


class RawMessages(Sequence[bytes]):
    """The payloads of one repeated field as segments of one buffer: message i
    is ``buf[start[i] : start[i] + length[i]]`` (int64 arrays). Reading one
    makes a bytes object; the fast decoder reads them all in place
    (``_wire.*_at``)."""

    def __init__(self, buf: bytes | bytearray, start: np.ndarray, length: np.ndarray):
        self.buf, self.start, self.length = buf, start, length

    def __len__(self) -> int:
        return int(self.start.size)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        start = int(self.start[index])
        return bytes(self.buf[start : start + int(self.length[index])])

    def __iter__(self) -> Iterator[bytes]:
        buf = self.buf
        for start, length in zip(self.start.tolist(), self.length.tolist(), strict=True):
            yield bytes(buf[start : start + length])


@dataclass
class TopLevel:
    """The top level of one profile: raw sub-messages, resolved strings, scalars."""

    sample_types: Sequence[bytes]
    samples: Sequence[bytes]
    mappings: Sequence[bytes]
    locations: Sequence[bytes]
    functions: Sequence[bytes]
    raw_strings: Sequence[bytes]
    drop_frames: int
    keep_frames: int
    time_nanos: int
    duration_nanos: int
    period_type: bytes | None
    period: int
    comments: list[int]
    default_sample_type: int
    doc_url: int
    _strings: list[str] | None = None

    def string(self, index: int) -> str:
        """One string, decoded like ``strings`` (IndexError when out of range)."""
        if not 0 <= index < len(self.raw_strings):
            raise IndexError(index)
        if self._strings is not None:
            return self._strings[index]
        return decode_strings([self.raw_strings[index]])[0]

    @property
    def strings(self) -> list[str]:
        """The string table as Python strings (decoded on first use: the fast path
        builds its Arrow strings straight from ``raw_strings``)."""
        if self._strings is None:
            self._strings = decode_strings(self.raw_strings)
        return self._strings


def check_unknown_fields(msg, known: frozenset[int], *, source: str, what: str) -> None:
    """Refuse what pprof refuses among the fields upb did not recognise.

    upb keeps a known field sent with the wrong wire type as an unknown field;
    pprof refuses it. pprof also refuses groups, which upb would skip.
    """
    for field in UnknownFieldSet(msg):
        if field.field_number in known:
            raise CorruptProfileError(
                source,
                f"not a valid pprof protobuf (type mismatch: {what} field "
                f"{field.field_number} has wire type {field.wire_type})",
            )
        if field.wire_type == WIRE_START_GROUP:
            raise CorruptProfileError(
                source, f"not a valid pprof protobuf (unknown wire type 3 in {what})"
            )


# Wire types each Profile field may use (bit w set: wire type w), as upb takes
# them: length-delimited messages and strings, singular varints, and packed or
# unpacked repeated varints (time_nanos, comment).
_LEN, _VARINT = 1 << 2, 1 << 0
_PROFILE_WIRES = bytes(
    [0]
    + [
        _LEN if typ == _BYTES else (_VARINT | _LEN if label == _REPEATED else _VARINT)
        for _, _, label, typ, _ in sorted(LITE_FIELDS, key=lambda f: f[1])
    ]
)
_ANY_WIRE_BUT_GROUPS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 5)


def _scan_fields(buf: bytes | bytearray, allowed: bytes) -> tuple[int, int] | None:
    """The first field of ``buf`` whose wire type ``allowed`` does not permit
    (numbers past the table: any but groups); one pass, no object per field."""
    if _wire is not None:
        return _wire.scan_fields(buf, allowed)
    pos, end = 0, len(buf)
    while pos < end:
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        mask = allowed[number] if number < len(allowed) else _ANY_WIRE_BUT_GROUPS
        if not mask >> wire & 1:
            return number, wire
        if wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 2:
            n, pos = _varint(buf, pos)
            pos += n
        else:
            pos += 8 if wire == 1 else 4
    return None


def _varint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return out, pos


# Protobuf's largest field number. upb refuses a field numbered 0 or past it;
# pprof (go tool pprof, the oracle) skips either like any unknown field.
MAX_FIELD_NUMBER = (1 << 29) - 1


def strip_invalid_numbers(
    buf: bytes | bytearray, nested: frozenset[int] = frozenset()
) -> bytes | None:
    """``buf`` without its fields numbered 0 or past ``MAX_FIELD_NUMBER``, which
    upb refuses and pprof skips like any unknown field; fields numbered in
    ``nested`` are messages whose own fields are stripped too. None when ``buf``
    is not a sequence of fields (or has no such field): the parser's own error
    then stands. Only called after upb refused a message, so well-formed
    profiles never pay for it."""
    out: list[bytes | bytearray] = []
    pos, end, keep_from, changed = 0, len(buf), 0, False
    try:
        while pos < end:
            start = pos
            tag, pos = _varint(buf, pos)
            number, wire = tag >> 3, tag & 7
            if wire == 0:
                _, pos = _varint(buf, pos)
            elif wire == 2:
                n, body = _varint(buf, pos)
                pos = body + n
                if number in nested:
                    inner = strip_invalid_numbers(buf[body:pos])
                    if inner is not None:
                        out.append(buf[keep_from:start])
                        out.append(_encode_varint(tag) + _encode_varint(len(inner)) + inner)
                        keep_from, changed = pos, True
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                return None
            if pos > end:
                return None
            if number == 0 or number > MAX_FIELD_NUMBER:
                out.append(buf[keep_from:start])
                keep_from, changed = pos, True
    except IndexError:
        return None
    if not changed:
        return None
    out.append(buf[keep_from:])
    return b"".join(out)


def _encode_varint(x: int) -> bytes:
    out = bytearray()
    while x >= 0x80:
        out.append(x & 0x7F | 0x80)
        x >>= 7
    out.append(x)
    return bytes(out)


def check_unknown_top_level(msg, raw: bytes | bytearray, *, source: str) -> None:
    """``check_unknown_fields`` for the top level, without materialising the
    unknown fields (a few bytes each, so millions fit in a small file): only
    when upb kept any (its size shrinks without them), the raw bytes are
    scanned once for the first field pprof would refuse."""
    size = msg.ByteSize()
    msg.DiscardUnknownFields()
    if msg.ByteSize() == size:
        return
    bad = _scan_fields(raw, _PROFILE_WIRES)
    if bad is None:
        return
    number, wire = bad
    if number not in PROFILE_FIELD_NUMBERS:
        raise CorruptProfileError(
            source, "not a valid pprof protobuf (unknown wire type 3 in Profile)"
        )
    raise CorruptProfileError(
        source,
        f"not a valid pprof protobuf (type mismatch: Profile field {number} has wire type {wire})",
    )


def decode_strings(raw: Sequence[bytes]) -> list[str]:
    try:
        return [s.decode() for s in raw]
    except UnicodeDecodeError:
        return [s.decode("utf-8", "replace") for s in raw]


# The repeated fields split_top copies out, by field number (slot 1 to 6):
# sample_type, sample, mapping, location, function, string_table.
REPEATED_IN_PLACE = (
    "sample_types", "samples", "mappings", "locations", "functions", "raw_strings",
)  # fmt: skip
_SLOTS = bytes(range(len(REPEATED_IN_PLACE) + 1))


def parse_top_level(raw: bytes | bytearray, *, source: str) -> TopLevel:
    """Split the top level and apply pprof's top-level rules: in one pass in C
    when it can, else with upb (see the module rules)."""
    top = _split_in_place(raw, source=source) if _split_top is not None else None
    return top if top is not None else _parse_with_upb(raw, source=source)


def _split_in_place(raw: bytes | bytearray, *, source: str) -> TopLevel | None:
    """The top level with ``split_top``: the repeated message and string fields
    as ``RawMessages`` of one copy of their payloads (not of ``raw``, so the
    caller frees it at once, unknown fields and all, and the allocator reuses
    it: holding a decompressed bytearray through the decode made every later
    file's arrays fault their pages in again, +4 ms a file), the rest (scalars)
    parsed by upb. None when split_top declines or upb refuses the rest (a
    malformed packed time_nanos or comment): the upb way then reports it as it
    always has."""
    assert _split_top is not None
    split = _split_top(raw, _PROFILE_WIRES, _SLOTS)
    if split is None:
        return None
    data, positions, counts, rest = split
    msg = ProfileLite()
    try:
        msg.ParseFromString(rest)
    except DecodeError:
        return None
    pos = np.frombuffer(positions, dtype=np.int64).reshape(2, -1)
    bounds = np.cumsum((0, *counts)).tolist()
    repeated = {
        name: RawMessages(
            data, pos[0, bounds[i] : bounds[i + 1]], pos[1, bounds[i] : bounds[i + 1]]
        )
        for i, name in enumerate(REPEATED_IN_PLACE)
    }
    return _top_level(msg, repeated, source=source)


def _parse_with_upb(raw: bytes | bytearray, *, source: str) -> TopLevel:
    """Split the top level with upb and apply pprof's top-level rules."""
    # The same message to pprof, its unknown fields (already checked) dropped;
    # None: parsed whole, and its unknown fields checked after.
    known = _wire.known_fields(raw, _PROFILE_WIRES) if _wire is not None else None
    if known is not None:
        raw = known
    msg = ProfileLite()
    try:
        msg.ParseFromString(raw)
    except DecodeError as e:
        stripped = strip_invalid_numbers(raw)
        try:
            if stripped is None:
                raise
            msg.ParseFromString(stripped)
            raw = stripped
        except DecodeError:
            raise CorruptProfileError(source, f"not a valid pprof protobuf ({e})") from None
    if known is None:
        check_unknown_top_level(msg, raw, source=source)
    repeated = {
        "sample_types": list(msg.sample_type),
        "samples": list(msg.sample),
        "mappings": list(msg.mapping),
        "locations": list(msg.location),
        "functions": list(msg.function),
        "raw_strings": list(msg.string_table),
    }
    return _top_level(msg, repeated, source=source)


def _top_level(msg, repeated: Mapping[str, Sequence[bytes]], *, source: str) -> TopLevel:
    """The TopLevel of ``msg``'s scalars and the ``repeated`` fields, after
    pprof's top-level rules (in this order: both ways report the same first
    error)."""
    times = list(msg.time_nanos)
    if any(times[:-1]):
        raise CorruptProfileError(source, "concatenated profiles detected (time_nanos set twice)")
    raw_strings = repeated["raw_strings"]
    if not raw_strings or raw_strings[0] != b"":
        raise InvalidProfileError(source, "malformed profile: string_table[0] must be ''")
    return TopLevel(
        sample_types=repeated["sample_types"],
        samples=repeated["samples"],
        mappings=repeated["mappings"],
        locations=repeated["locations"],
        functions=repeated["functions"],
        raw_strings=raw_strings,
        drop_frames=msg.drop_frames,
        keep_frames=msg.keep_frames,
        time_nanos=times[-1] if times else 0,
        duration_nanos=msg.duration_nanos,
        period_type=msg.period_type if msg.HasField("period_type") else None,
        period=msg.period,
        comments=list(msg.comment),
        default_sample_type=msg.default_sample_type,
        doc_url=msg.doc_url,
    )
