"""The reference for pyproflab.encode: the profile built as one protobuf message
with the generated class, field by field, and serialized by the protobuf library
(the writer's code before it wrote samples, locations and functions with numpy).
tests/encode/test_encode.py checks that the writer's bytes equal these."""

from __future__ import annotations

from pyproflab._proto import profile_pb2
from pyproflab.model import Profile


class _StringTable:
    def __init__(self) -> None:
        self.index: dict[str, int] = {"": 0}

    def __call__(self, text: str | None) -> int:
        if text is None:
            return 0
        i = self.index.get(text)
        if i is None:
            i = self.index[text] = len(self.index)
        return i

    def strings(self) -> list[str]:
        return list(self.index)


def upb_encode(profile: Profile) -> bytes:
    """The pprof protobuf of ``profile``, one message built field by field."""
    msg = profile_pb2.Profile()
    s = _StringTable()
    for vt in profile.sample_types:
        msg.sample_type.add(type=s(vt.type), unit=s(vt.unit))

    samples = profile.samples
    loc_ids = samples.column("location_ids").to_pylist()
    values = samples.column("values").to_pylist()
    labels = samples.column("labels").to_pylist()
    for locs, vals, lbls in zip(loc_ids, values, labels, strict=True):
        smp = msg.sample.add()
        smp.location_id.extend(locs)
        smp.value.extend(vals)
        for lb in lbls:
            if lb["str"] is not None:
                smp.label.add(key=s(lb["key"]), str=s(lb["str"]))
            else:
                smp.label.add(key=s(lb["key"]), num=lb["num"] or 0, num_unit=s(lb["num_unit"]))

    for m in profile.mappings.to_pylist():
        msg.mapping.add(
            id=m["id"],
            memory_start=m["memory_start"],
            memory_limit=m["memory_limit"],
            file_offset=m["file_offset"],
            filename=s(m["filename"]),
            build_id=s(m["build_id"]),
            has_functions=m["has_functions"],
            has_filenames=m["has_filenames"],
            has_line_numbers=m["has_line_numbers"],
            has_inline_frames=m["has_inline_frames"],
        )

    loc = profile.locations
    for lid, mid, addr, folded, lines in zip(
        loc.column("id").to_pylist(),
        loc.column("mapping_id").to_pylist(),
        loc.column("address").to_pylist(),
        loc.column("is_folded").to_pylist(),
        loc.column("lines").to_pylist(),
        strict=True,
    ):
        lm = msg.location.add(id=lid, mapping_id=mid, address=addr, is_folded=folded)
        for ln in lines:
            lm.line.add(function_id=ln["function_id"], line=ln["line"], column=ln["column"])

    for f in profile.functions.to_pylist():
        msg.function.add(
            id=f["id"],
            name=s(f["name"]),
            system_name=s(f["system_name"]),
            filename=s(f["filename"]),
            start_line=f["start_line"],
        )

    msg.drop_frames = s(profile.drop_frames)
    msg.keep_frames = s(profile.keep_frames)
    msg.time_nanos = profile.time_nanos
    msg.duration_nanos = profile.duration_nanos
    if profile.period_type is not None:
        msg.period_type.SetInParent()  # present even when both strings are empty
        msg.period_type.type = s(profile.period_type.type)
        msg.period_type.unit = s(profile.period_type.unit)
    msg.period = profile.period
    msg.comment.extend(s(c) for c in profile.comments)
    msg.default_sample_type = s(profile.default_sample_type)
    msg.doc_url = s(profile.doc_url)
    msg.string_table.extend(s.strings())

    return msg.SerializeToString()
