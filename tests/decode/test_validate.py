"""pprof's validity rules (postDecode + CheckValid), held by both decoders alike."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.profile_builders import minimal

from pyproflab._proto import profile_pb2
from pyproflab.decode import decode_bytes
from pyproflab.errors import InvalidProfileError

Edit = Callable[[profile_pb2.Profile], object]

BROKEN: dict[str, tuple[Edit, str]] = {
    "string_table[0] not empty": (lambda p: p.string_table.__setitem__(0, "x"), "string_table"),
    "no string table": (lambda p: p.ClearField("string_table"), "string_table"),
    "mapping id 0": (lambda p: setattr(p.mapping[0], "id", 0), "mapping with reserved ID=0"),
    "duplicate mapping": (lambda p: p.mapping.add(id=1), "multiple mappings with same id: 1"),
    "function id 0": (lambda p: setattr(p.function[1], "id", 0), "function with reserved ID=0"),
    "duplicate function": (lambda p: p.function.add(id=2), "multiple functions with same id"),
    "location id 0": (lambda p: p.location.add(id=0), "location with reserved id=0"),
    "duplicate location": (lambda p: p.location.add(id=2), "multiple locations with same id"),
    "line function 0": (lambda p: setattr(p.location[0].line[0], "function_id", 0), "nil function"),
    "line function missing": (
        lambda p: setattr(p.location[0].line[0], "function_id", 9),
        "nil function",
    ),
    "sample location missing": (lambda p: p.sample[0].location_id.append(42), "nil location"),
    "sample location 0": (lambda p: p.sample[0].location_id.append(0), "nil location"),
    "too few values": (lambda p: p.sample[1].value.pop(), "mismatch"),
    "too many values": (lambda p: p.sample[1].value.append(3), "mismatch"),
    "no sample types": (lambda p: p.ClearField("sample_type"), "missing sample type"),
    "sample type string": (lambda p: setattr(p.sample_type[0], "unit", 99), "string 99"),
    "period type string": (lambda p: setattr(p.period_type, "type", -1), "string -1"),
    "function name string": (lambda p: setattr(p.function[0], "name", 500), "string 500"),
    "function filename string": (lambda p: setattr(p.function[0], "filename", 12), "string 12"),
    "mapping filename": (lambda p: setattr(p.mapping[0], "filename", 12), "string 12"),
    "mapping build id": (lambda p: setattr(p.mapping[0], "build_id", -3), "string -3"),
    "label key": (lambda p: setattr(p.sample[0].label[0], "key", 12), "string 12"),
    "label str": (lambda p: setattr(p.sample[0].label[0], "str", 12), "string 12"),
    "numeric label unit": (lambda p: setattr(p.sample[0].label[1], "num_unit", 12), "string 12"),
    "comment": (lambda p: p.comment.append(12), "string 12"),
    "drop frames": (lambda p: setattr(p, "drop_frames", 12), "string 12"),
    "default sample type": (lambda p: setattr(p, "default_sample_type", 12), "string 12"),
    "doc url": (lambda p: setattr(p, "doc_url", 12), "string 12"),
}


@pytest.mark.parametrize("method", ["fast", "reference"])
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_rule_is_refused(case: str, method: str) -> None:
    edit, expected = BROKEN[case]
    msg = minimal()
    edit(msg)
    with pytest.raises(InvalidProfileError, match=expected) as e:
        decode_bytes(msg.SerializeToString(), source="made.pb", method=method)  # type: ignore[arg-type]
    assert str(e.value).startswith("made.pb: malformed profile")
    assert "\n" not in str(e.value)


ACCEPTED: dict[str, Edit] = {
    # pprof resolves a string label's unit never, and drops a link to a missing mapping.
    "string label with bad unit": lambda p: setattr(p.sample[0].label[0], "num_unit", 99),
    "location with missing mapping": lambda p: setattr(p.location[0], "mapping_id", 5),
    "location without lines": lambda p: p.location.add(id=3),
    "unused function": lambda p: p.function.add(id=10, name=5),
    "no samples, no types": lambda p: (p.ClearField("sample"), p.ClearField("sample_type")),
    "huge ids": lambda p: (
        setattr(p.location[1], "id", 1 << 63),
        p.sample[1].location_id.__setitem__(0, 1 << 63),
        p.sample[0].location_id.__setitem__(1, 1 << 63),
    ),
}


@pytest.mark.parametrize("method", ["fast", "reference"])
@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_what_pprof_accepts_is_accepted(case: str, method: str) -> None:
    msg = minimal()
    ACCEPTED[case](msg)
    decode_bytes(msg.SerializeToString(), method=method)  # type: ignore[arg-type]
