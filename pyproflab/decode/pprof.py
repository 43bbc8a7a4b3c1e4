"""From pprof protobuf bytes to a ``Profile`` of Arrow tables.

Rules: gzip is recognised by its magic bytes, never by the file name; the
decompressed size is capped (``max_bytes``) so a gzip bomb cannot exhaust
memory; the profile is validated as strictly as pprof does before any table
is built (see ``validate``). Every failure is a ``ProfileError`` naming the
source.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pyarrow as pa
from google.protobuf.message import DecodeError

from pyproflab import schema
from pyproflab._proto import profile_pb2
from pyproflab.errors import (
    CorruptProfileError,
    NotAProfileError,
    TooLargeError,
)
from pyproflab.model import Profile, ValueType

DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB of decompressed protobuf

GZIP_MAGIC = b"\x1f\x8b"


def read_profile(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Profile:
    """Read and decode the pprof file at ``path``."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise NotAProfileError(source, "no such file") from None
    except IsADirectoryError:
        raise NotAProfileError(source, "is a directory, not a profile") from None
    except OSError as e:
        raise NotAProfileError(source, f"cannot read: {e.strerror or e}") from None
    return decode_bytes(data, source=source, max_bytes=max_bytes)


def decode_bytes(
    data: bytes, *, source: str = "<bytes>", max_bytes: int = DEFAULT_MAX_BYTES
) -> Profile:
    """Decode pprof bytes (gzipped or not) into a validated ``Profile``."""
    raw = decompress(data, source=source, max_bytes=max_bytes)
    msg = parse_message(raw, source=source)
    return from_message(msg, source=source)


def decompress(data: bytes, *, source: str, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Return the protobuf bytes: gunzipped if ``data`` starts with the gzip magic.

    Decompression stops as soon as the output would pass ``max_bytes``.
    Concatenated gzip members are read like ``gzip -d`` does.
    """
    if not data:
        raise NotAProfileError(source, "empty file, not a profile")
    if not data.startswith(GZIP_MAGIC):
        if len(data) > max_bytes:
            raise TooLargeError(source, f"profile is larger than the cap of {max_bytes} bytes")
        return data
    out = bytearray()
    rest = data
    while rest.startswith(GZIP_MAGIC):
        d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            chunk = d.decompress(rest, max_bytes + 1 - len(out))
            out += chunk
            if len(out) > max_bytes:
                raise TooLargeError(
                    source,
                    f"decompressed size passes the cap of {max_bytes} bytes "
                    "(a gzip bomb, or raise max_bytes)",
                )
            if not d.eof:
                # unconsumed_tail holds input we were not allowed to inflate yet.
                if d.unconsumed_tail:
                    raise TooLargeError(
                        source,
                        f"decompressed size passes the cap of {max_bytes} bytes "
                        "(a gzip bomb, or raise max_bytes)",
                    )
                raise CorruptProfileError(source, "truncated gzip stream")
        except zlib.error as e:
            raise CorruptProfileError(source, f"corrupt gzip stream ({e})") from None
        rest = d.unused_data
    if rest.strip(b"\x00"):
        raise CorruptProfileError(source, "trailing garbage after the gzip stream")
    if not out:
        raise NotAProfileError(source, "empty gzip stream, not a profile")
    return bytes(out)


def parse_message(raw: bytes, *, source: str) -> profile_pb2.Profile:
    msg = profile_pb2.Profile()
    try:
        msg.ParseFromString(raw)
    except DecodeError as e:
        raise CorruptProfileError(source, f"not a valid pprof protobuf ({e})") from None
    return msg


def from_message(msg: profile_pb2.Profile, *, source: str) -> Profile:
    """Build the Arrow tables of a parsed (and validated) message."""
    from pyproflab.decode.validate import validate

    validate(msg, source=source)
    st = list(msg.string_table)

    def s(i: int) -> str:
        return st[i]

    sample_types = [ValueType(s(v.type), s(v.unit)) for v in msg.sample_type]

    loc_ids: list[list[int]] = []
    values: list[list[int]] = []
    labels: list[list[dict]] = []
    for smp in msg.sample:
        loc_ids.append(list(smp.location_id))
        values.append(list(smp.value))
        if smp.label:
            labels.append(
                [
                    {
                        "key": st[lb.key],
                        "str": st[lb.str] if lb.str else None,
                        "num": None if lb.str else lb.num,
                        "num_unit": st[lb.num_unit] if lb.num_unit else None,
                    }
                    for lb in smp.label
                ]
            )
        else:
            labels.append([])
    samples = pa.table(
        {"location_ids": loc_ids, "values": values, "labels": labels},
        schema=schema.PROFILE_SAMPLES,
    )

    locations = pa.table(
        {
            "id": [loc.id for loc in msg.location],
            "mapping_id": [loc.mapping_id for loc in msg.location],
            "address": [loc.address for loc in msg.location],
            "is_folded": [loc.is_folded for loc in msg.location],
            "lines": [
                [
                    {"function_id": ln.function_id, "line": ln.line, "column": ln.column}
                    for ln in loc.line
                ]
                for loc in msg.location
            ],
        },
        schema=schema.PROFILE_LOCATIONS,
    )
    functions = pa.table(
        {
            "id": [f.id for f in msg.function],
            "name": [st[f.name] for f in msg.function],
            "system_name": [st[f.system_name] for f in msg.function],
            "filename": [st[f.filename] for f in msg.function],
            "start_line": [f.start_line for f in msg.function],
        },
        schema=schema.PROFILE_FUNCTIONS,
    )
    mappings = pa.table(
        {
            "id": [m.id for m in msg.mapping],
            "memory_start": [m.memory_start for m in msg.mapping],
            "memory_limit": [m.memory_limit for m in msg.mapping],
            "file_offset": [m.file_offset for m in msg.mapping],
            "filename": [st[m.filename] for m in msg.mapping],
            "build_id": [st[m.build_id] for m in msg.mapping],
            "has_functions": [m.has_functions for m in msg.mapping],
            "has_filenames": [m.has_filenames for m in msg.mapping],
            "has_line_numbers": [m.has_line_numbers for m in msg.mapping],
            "has_inline_frames": [m.has_inline_frames for m in msg.mapping],
        },
        schema=schema.PROFILE_MAPPINGS,
    )
    period_type = None
    if msg.HasField("period_type"):
        period_type = ValueType(s(msg.period_type.type), s(msg.period_type.unit))
    return Profile(
        sample_types=sample_types,
        samples=samples,
        locations=locations,
        functions=functions,
        mappings=mappings,
        period_type=period_type,
        period=msg.period,
        time_nanos=msg.time_nanos,
        duration_nanos=msg.duration_nanos,
        comments=[st[c] for c in msg.comment],
        drop_frames=st[msg.drop_frames],
        keep_frames=st[msg.keep_frames],
        default_sample_type=st[msg.default_sample_type],
        doc_url=st[msg.doc_url],
    )
