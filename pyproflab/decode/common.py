"""What both decode paths share: the profile's metadata and pprof's error wording.

Rules: sample types, the period type, comments, drop/keep frames, the default
sample type and the doc URL are string-table indexes that must be in range
(pprof's getString); a ValueType is a tiny message parsed with upb and held
to the same wire rules as the rest (see ``lite.check_unknown_fields``).
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError

from pyproflab._proto import profile_pb2
from pyproflab.decode.lite import TopLevel, check_unknown_fields
from pyproflab.errors import CorruptProfileError, InvalidProfileError
from pyproflab.model import ValueType

VALUE_TYPE_FIELDS = frozenset({1, 2})


def malformed(source: str, problem: str) -> InvalidProfileError:
    return InvalidProfileError(source, f"malformed profile: {problem}")


def string_at(strings: list[str] | TopLevel, index: int, what: str, *, source: str) -> str:
    """``strings[index]``, or pprof's error when the index is out of range."""
    size = len(strings.raw_strings) if isinstance(strings, TopLevel) else len(strings)
    if not 0 <= index < size:
        raise malformed(
            source, f"{what} refers to string {index}, outside the string table of {size}"
        )
    return strings.string(index) if isinstance(strings, TopLevel) else strings[index]


def parse_value_type(raw: bytes, strings: TopLevel, what: str, *, source: str) -> ValueType:
    msg = profile_pb2.ValueType()
    try:
        msg.ParseFromString(raw)
    except DecodeError as e:
        raise CorruptProfileError(source, f"not a valid pprof protobuf ({what}: {e})") from None
    check_unknown_fields(msg, VALUE_TYPE_FIELDS, source=source, what=what)
    return ValueType(
        string_at(strings, msg.type, f"{what}.type", source=source),
        string_at(strings, msg.unit, f"{what}.unit", source=source),
    )


def metadata(top: TopLevel, *, source: str) -> dict[str, Any]:
    """Profile keyword arguments other than the four tables."""
    st = top

    def s(index: int, what: str) -> str:
        return string_at(st, index, what, source=source)

    sample_types = [
        parse_value_type(raw, st, f"sample_type[{i}]", source=source)
        for i, raw in enumerate(top.sample_types)
    ]
    if not sample_types and top.samples:
        raise malformed(source, "missing sample type information")
    period_type = None
    if top.period_type is not None:
        period_type = parse_value_type(top.period_type, st, "period_type", source=source)
    return {
        "sample_types": sample_types,
        "period_type": period_type,
        "period": top.period,
        "time_nanos": top.time_nanos,
        "duration_nanos": top.duration_nanos,
        "comments": [s(c, f"comment[{i}]") for i, c in enumerate(top.comments)],
        "drop_frames": s(top.drop_frames, "drop_frames"),
        "keep_frames": s(top.keep_frames, "keep_frames"),
        "default_sample_type": s(top.default_sample_type, "default_sample_type"),
        "doc_url": s(top.doc_url, "doc_url"),
    }
