"""The reference decoder: every sub-message parsed by upb, tables built from lists.

Slow and plain on purpose: it states pprof's rules one object at a time, and
tests check that the fast decoder (``fast``) gives the very same Profile on
every input. The fast decoder also falls back to it for wire forms it does not
handle (fixed-width or oddly laid out unknown fields).

Rules beyond ``validate``: a label with a non-zero str is a string label (its
num and unit are ignored); otherwise it is numeric if num or num_unit is set;
a label with neither is dropped, as pprof does.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from google.protobuf.message import DecodeError

from pyproflab import schema
from pyproflab._proto import profile_pb2
from pyproflab.decode.common import metadata
from pyproflab.decode.lite import TopLevel, check_unknown_fields, strip_invalid_numbers
from pyproflab.decode.validate import validate
from pyproflab.errors import CorruptProfileError
from pyproflab.model import Profile

_KNOWN = {
    "Sample": frozenset({1, 2, 3}),
    "Label": frozenset({1, 2, 3, 4}),
    "Mapping": frozenset(range(1, 11)),
    "Location": frozenset(range(1, 6)),
    "Line": frozenset({1, 2, 3}),
    "Function": frozenset(range(1, 6)),
}


# Message-typed fields: Sample.label, Location.line.
_NESTED = {"Sample": frozenset({3}), "Location": frozenset({4})}


def _parse_all(raws: Sequence[bytes], cls, nested: str | None, *, source: str) -> list:
    name = cls.DESCRIPTOR.name
    out = []
    for i, raw in enumerate(raws):
        msg = cls()
        try:
            msg.ParseFromString(raw)
        except DecodeError as e:
            # Field number 0 or past 2**29 - 1: upb refuses it, pprof skips it
            # (lite.strip_invalid_numbers).
            stripped = strip_invalid_numbers(raw, _NESTED.get(name, frozenset()))
            try:
                if stripped is None:
                    raise
                msg.ParseFromString(stripped)
            except DecodeError:
                raise CorruptProfileError(
                    source, f"not a valid pprof protobuf ({name.lower()} {i}: {e})"
                ) from None
        check_unknown_fields(msg, _KNOWN[name], source=source, what=f"{name} {i}")
        if nested is not None:
            for child in getattr(msg, nested):
                child_name = child.DESCRIPTOR.name
                check_unknown_fields(
                    child, _KNOWN[child_name], source=source, what=f"{child_name} in {name} {i}"
                )
        out.append(msg)
    return out


def decode_reference(top: TopLevel, *, source: str) -> Profile:
    """The Profile of one top level: each sub-message parsed, checked for unknown
    fields and validated, then one table per kind (see the module rules)."""
    meta = metadata(top, source=source)
    samples = _parse_all(top.samples, profile_pb2.Sample, "label", source=source)
    mappings = _parse_all(top.mappings, profile_pb2.Mapping, None, source=source)
    locations = _parse_all(top.locations, profile_pb2.Location, "line", source=source)
    functions = _parse_all(top.functions, profile_pb2.Function, None, source=source)
    st = top.strings
    validate(
        samples=samples,
        mappings=mappings,
        locations=locations,
        functions=functions,
        strings=st,
        num_sample_types=len(meta["sample_types"]),
        source=source,
    )
    return Profile(
        samples=_samples_table(samples, st),
        locations=_locations_table(locations, {m.id for m in mappings}),
        functions=_functions_table(functions, st),
        mappings=_mappings_table(mappings, st),
        **meta,
    )


def _samples_table(samples: list, st: list[str]) -> pa.Table:
    """PROFILE_SAMPLES: a label with a non-zero str is a string label (num and unit
    ignored); else numeric if num or num_unit is set; else dropped, as pprof does."""
    labels: list[list[dict]] = []
    for smp in samples:
        row = []
        for lb in smp.label:
            if lb.str:
                row.append({"key": st[lb.key], "str": st[lb.str], "num": None, "num_unit": None})
            elif lb.num or lb.num_unit:
                unit = st[lb.num_unit] if lb.num_unit else None
                row.append({"key": st[lb.key], "str": None, "num": lb.num, "num_unit": unit})
        labels.append(row)
    return pa.table(
        {
            "location_ids": [list(s.location_id) for s in samples],
            "values": [list(s.value) for s in samples],
            "labels": labels,
        },
        schema=schema.PROFILE_SAMPLES,
    )


def _locations_table(locations: list, mapping_ids: set[int]) -> pa.Table:
    """PROFILE_LOCATIONS: a link to a mapping that does not exist becomes 0 (pprof
    drops it); lines keep their order (the innermost inlined frame first)."""
    return pa.table(
        {
            "id": [loc.id for loc in locations],
            # pprof drops a link to a mapping that does not exist.
            "mapping_id": [
                loc.mapping_id if loc.mapping_id in mapping_ids else 0 for loc in locations
            ],
            "address": [loc.address for loc in locations],
            "is_folded": [loc.is_folded for loc in locations],
            "lines": [
                [
                    {"function_id": ln.function_id, "line": ln.line, "column": ln.column}
                    for ln in loc.line
                ]
                for loc in locations
            ],
        },
        schema=schema.PROFILE_LOCATIONS,
    )


def _functions_table(functions: list, st: list[str]) -> pa.Table:
    """PROFILE_FUNCTIONS: string indexes resolved through the string table."""
    return pa.table(
        {
            "id": [f.id for f in functions],
            "name": [st[f.name] for f in functions],
            "system_name": [st[f.system_name] for f in functions],
            "filename": [st[f.filename] for f in functions],
            "start_line": [f.start_line for f in functions],
        },
        schema=schema.PROFILE_FUNCTIONS,
    )


def _mappings_table(mappings: list, st: list[str]) -> pa.Table:
    """PROFILE_MAPPINGS: string indexes resolved through the string table."""
    return pa.table(
        {
            "id": [m.id for m in mappings],
            "memory_start": [m.memory_start for m in mappings],
            "memory_limit": [m.memory_limit for m in mappings],
            "file_offset": [m.file_offset for m in mappings],
            "filename": [st[m.filename] for m in mappings],
            "build_id": [st[m.build_id] for m in mappings],
            "has_functions": [m.has_functions for m in mappings],
            "has_filenames": [m.has_filenames for m in mappings],
            "has_line_numbers": [m.has_line_numbers for m in mappings],
            "has_inline_frames": [m.has_inline_frames for m in mappings],
        },
        schema=schema.PROFILE_MAPPINGS,
    )
