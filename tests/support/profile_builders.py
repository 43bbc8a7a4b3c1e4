"""Small hand-made pprof messages for the decode, validate and bad-input tests."""

from __future__ import annotations

import dataclasses

from pyproflab._proto import profile_pb2
from pyproflab.model import Profile


def minimal() -> profile_pb2.Profile:
    """A valid profile: 1 mapping, 2 functions, 2 locations, 2 samples, 2 sample types."""
    p = profile_pb2.Profile()
    p.string_table.extend(
        [
            "",
            "samples",
            "count",
            "cpu",
            "nanoseconds",
            "main",
            "main.go",
            "bin",
            "runtime.f",
            "k",
            "v",
            "bytes",
        ]
    )
    p.sample_type.add(type=1, unit=2)
    p.sample_type.add(type=3, unit=4)
    p.period_type.type, p.period_type.unit = 3, 4
    p.period = 10_000_000
    p.mapping.add(id=1, memory_start=0x1000, memory_limit=0x9000, filename=7, has_functions=True)
    p.function.add(id=1, name=5, system_name=5, filename=6, start_line=3)
    p.function.add(id=2, name=8, filename=6)
    loc = p.location.add(id=1, mapping_id=1, address=0x1234)
    loc.line.add(function_id=2, line=7, column=2)
    loc.line.add(function_id=1, line=9)
    p.location.add(id=2, mapping_id=1, address=0x1300).line.add(function_id=1, line=4)
    s = p.sample.add(location_id=[1, 2], value=[1, 10_000_000])
    s.label.add(key=9, str=10)
    s.label.add(key=9, num=42, num_unit=11)
    p.sample.add(location_id=[2], value=[2, -5])
    return p


def varint(x: int) -> bytes:
    x &= (1 << 64) - 1
    out = bytearray()
    while x >= 0x80:
        out.append(x & 0x7F | 0x80)
        x >>= 7
    out.append(x)
    return bytes(out)


def field(number: int, wire: int, payload: bytes | int) -> bytes:
    """One protobuf field: a varint for wire 0, raw bytes for wires 1 and 5,
    length-prefixed bytes for wire 2."""
    tag = varint(number << 3 | wire)
    if wire == 0:
        return tag + varint(int(payload))
    assert isinstance(payload, bytes)
    if wire in (1, 5):
        return tag + payload
    return tag + varint(len(payload)) + payload


# The Profile fields besides its four Arrow tables (sample types, period, time,
# comments, frames, doc_url ...): what a comparison of two profiles checks beside
# the tables. Derived from the dataclass, so a new field is compared everywhere.
PROFILE_TABLES = ("samples", "locations", "functions", "mappings")
HEADER_FIELDS = tuple(f.name for f in dataclasses.fields(Profile) if f.name not in PROFILE_TABLES)


def label_bomb(value_bytes: int, samples: int) -> bytes:
    """``samples`` samples sharing one label whose value is ``value_bytes`` long
    (issue 17: a small file that costs gigabytes if each sample copies it)."""
    p = minimal()
    p.string_table.append("x" * value_bytes)
    big = len(p.string_table) - 1
    del p.sample[:]
    for _ in range(samples):
        p.sample.add(location_id=[1], value=[1, 1]).label.add(key=9, str=big)
    return p.SerializeToString()


def unknown_field_bomb(unknown_bytes: int) -> bytes:
    """A valid profile followed by ``unknown_bytes`` of unknown varint fields."""
    return minimal().SerializeToString() + field(100, 0, 1) * (unknown_bytes // 3)
