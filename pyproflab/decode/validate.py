"""Validation of a parsed pprof message, as strict as pprof's own checks.

Rules: ``string_table[0] == ""``; every string index is in range; mapping,
location and function ids are non-zero and unique; every referenced id
exists; every sample has one value per sample type. The first broken rule
raises ``InvalidProfileError`` naming the source and the offending item.
"""

from __future__ import annotations

from pyproflab._proto import profile_pb2
from pyproflab.errors import InvalidProfileError


def validate(msg: profile_pb2.Profile, *, source: str) -> None:
    def bad(problem: str) -> InvalidProfileError:
        return InvalidProfileError(source, f"malformed profile: {problem}")

    nstr = len(msg.string_table)
    if nstr == 0 or msg.string_table[0] != "":
        raise bad("string_table[0] must be the empty string")

    def check_str(i: int, what: str) -> None:
        if i < 0 or i >= nstr:
            raise bad(f"{what} refers to string {i}, outside the string table of {nstr}")

    for i, vt in enumerate(msg.sample_type):
        check_str(vt.type, f"sample_type[{i}].type")
        check_str(vt.unit, f"sample_type[{i}].unit")
    if msg.HasField("period_type"):
        check_str(msg.period_type.type, "period_type.type")
        check_str(msg.period_type.unit, "period_type.unit")
    for name in ("drop_frames", "keep_frames", "default_sample_type", "doc_url"):
        check_str(getattr(msg, name), name)
    for i, c in enumerate(msg.comment):
        check_str(c, f"comment[{i}]")

    mapping_ids: set[int] = set()
    for m in msg.mapping:
        if m.id == 0:
            raise bad("found mapping with reserved ID=0")
        if m.id in mapping_ids:
            raise bad(f"multiple mappings with same id: {m.id}")
        mapping_ids.add(m.id)
        check_str(m.filename, f"mapping {m.id} filename")
        check_str(m.build_id, f"mapping {m.id} build_id")

    function_ids: set[int] = set()
    for f in msg.function:
        if f.id == 0:
            raise bad("found function with reserved ID=0")
        if f.id in function_ids:
            raise bad(f"multiple functions with same id: {f.id}")
        function_ids.add(f.id)
        check_str(f.name, f"function {f.id} name")
        check_str(f.system_name, f"function {f.id} system_name")
        check_str(f.filename, f"function {f.id} filename")

    location_ids: set[int] = set()
    for loc in msg.location:
        if loc.id == 0:
            raise bad("found location with reserved id=0")
        if loc.id in location_ids:
            raise bad(f"multiple locations with same id: {loc.id}")
        location_ids.add(loc.id)
        if loc.mapping_id and loc.mapping_id not in mapping_ids:
            raise bad(f"location {loc.id} refers to mapping {loc.mapping_id}, which does not exist")
        for ln in loc.line:
            if ln.function_id == 0:
                # pprof accepts a line without a function only if it is the
                # zero value; a line pointing nowhere is an error.
                raise bad(f"location {loc.id} has a line with function id 0")
            if ln.function_id not in function_ids:
                raise bad(
                    f"location {loc.id} refers to function {ln.function_id}, which does not exist"
                )

    ntypes = len(msg.sample_type)
    for i, smp in enumerate(msg.sample):
        if len(smp.value) != ntypes:
            raise bad(
                f"sample {i} has {len(smp.value)} values, "
                f"but the profile has {ntypes} sample types"
            )
        for lid in smp.location_id:
            if lid == 0:
                raise bad(f"sample {i} refers to location id 0")
            if lid not in location_ids:
                raise bad(f"sample {i} refers to location {lid}, which does not exist")
        for lb in smp.label:
            check_str(lb.key, f"sample {i} label key")
            check_str(lb.str, f"sample {i} label str")
            check_str(lb.num_unit, f"sample {i} label num_unit")
