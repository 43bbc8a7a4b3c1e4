"""Validation of parsed pprof sub-messages, exactly as strict as pprof.

Rules (pprof's postDecode and CheckValid): mapping, function and location ids
are non-zero and unique; every sample has one value per sample type and
every location id it lists exists; every line of a location names an
existing function (function id 0 included: pprof refuses "a line with nil
function"). String indexes are checked where pprof resolves them: mapping
filename and build id, function names and filename, label keys, a label's
str when non-zero and its num_unit only for a numeric label. A location's
mapping id that names no mapping is *not* an error (pprof drops the link; the
decoders store 0). The first broken rule raises ``InvalidProfileError``.

This is the reference implementation; ``fast`` checks the same rules in bulk.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyproflab._proto import profile_pb2
from pyproflab.decode.common import malformed, string_at


def validate(
    *,
    samples: Sequence[profile_pb2.Sample],
    mappings: Sequence[profile_pb2.Mapping],
    locations: Sequence[profile_pb2.Location],
    functions: Sequence[profile_pb2.Function],
    strings: list[str],
    num_sample_types: int,
    source: str,
) -> None:
    def check_str(index: int, what: str) -> None:
        string_at(strings, index, what, source=source)

    mapping_ids: set[int] = set()
    for m in mappings:
        check_str(m.filename, f"mapping {m.id} filename")
        check_str(m.build_id, f"mapping {m.id} build_id")
    for f in functions:
        check_str(f.name, f"function {f.id} name")
        check_str(f.system_name, f"function {f.id} system_name")
        check_str(f.filename, f"function {f.id} filename")
    for i, smp in enumerate(samples):
        for lb in smp.label:
            check_str(lb.key, f"sample {i} label key")
            if lb.str:
                check_str(lb.str, f"sample {i} label str")
            elif lb.num_unit:
                check_str(lb.num_unit, f"sample {i} label num_unit")

    location_ids = {loc.id for loc in locations}
    for i, smp in enumerate(samples):
        if len(smp.value) != num_sample_types:
            raise malformed(
                source,
                f"mismatch: sample {i} has {len(smp.value)} values vs. {num_sample_types} types",
            )
        for lid in smp.location_id:
            if lid not in location_ids:
                raise malformed(source, f"sample {i} has nil location (no location id {lid})")

    for m in mappings:
        if m.id == 0:
            raise malformed(source, "found mapping with reserved ID=0")
        if m.id in mapping_ids:
            raise malformed(source, f"multiple mappings with same id: {m.id}")
        mapping_ids.add(m.id)
    function_ids: set[int] = set()
    for f in functions:
        if f.id == 0:
            raise malformed(source, "found function with reserved ID=0")
        if f.id in function_ids:
            raise malformed(source, f"multiple functions with same id: {f.id}")
        function_ids.add(f.id)
    seen_locations: set[int] = set()
    for loc in locations:
        if loc.id == 0:
            raise malformed(source, "found location with reserved id=0")
        if loc.id in seen_locations:
            raise malformed(source, f"multiple locations with same id: {loc.id}")
        seen_locations.add(loc.id)
        for ln in loc.line:
            if ln.function_id not in function_ids:
                raise malformed(
                    source,
                    f"location id: {loc.id} has a line with nil function "
                    f"(function id {ln.function_id})",
                )
