"""Write a ``Profile`` back to pprof protobuf (gzipped by default).

Rules:

- The string table is rebuilt: ``""`` first, then every string in the order
  it is met (sample types, labels, mappings, functions, metadata), once each.
- Every field is kept: sample types, default sample type, period and period
  type (written whenever it is not None, even empty), time, duration,
  comments, drop/keep frames, doc URL; mappings with their has_* flags;
  locations with is_folded and every line with its column; functions with
  system name and start line; string labels, and numeric labels with num_unit.
- Decoding what is written gives an equal Profile, and ``go tool pprof -raw``
  prints the same as for the original file.
- ``write_profile`` is atomic: a temporary file in the target's directory,
  then ``os.replace``; a failed write leaves no partial file behind.
"""

from __future__ import annotations

import gzip as gzip_module
import os
import tempfile
from pathlib import Path

from pyproflab._proto import profile_pb2
from pyproflab.model import Profile

__all__ = ["encode_profile", "write_profile"]

# gzip level 6 is Go's default; mtime=0 makes the output reproducible.
GZIP_LEVEL = 6


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


def encode_profile(profile: Profile, *, gzip: bool = True) -> bytes:
    """The pprof protobuf of ``profile`` (gzipped unless ``gzip=False``)."""
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

    data = msg.SerializeToString()
    if gzip:
        data = gzip_module.compress(data, compresslevel=GZIP_LEVEL, mtime=0)
    return data


def write_profile(profile: Profile, path: str | os.PathLike, *, gzip: bool = True) -> Path:
    """Write ``profile`` to ``path`` atomically; return the path."""
    target = Path(path)
    data = encode_profile(profile, gzip=gzip)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
