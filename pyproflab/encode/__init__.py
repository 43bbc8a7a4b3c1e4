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
from pathlib import Path

import numpy as np
import pyarrow as pa

from pyproflab._proto import profile_pb2
from pyproflab.arrays import from_numpy, from_strings, list_parts, to_numpy
from pyproflab.encode import wire
from pyproflab.errors import UsageError
from pyproflab.model import Profile
from pyproflab.newfiles import create_temp_file

__all__ = ["encode_profile", "write_profile"]

# gzip level 6 is Go's default; mtime=0 makes the output reproducible.
GZIP_LEVEL = 6


def encode_profile(profile: Profile, *, gzip: bool = True) -> bytes:
    """The pprof protobuf of ``profile`` (gzipped unless ``gzip=False``).

    Samples, locations and functions are written with numpy (``encode.wire``),
    the few other fields with the generated protobuf class; the bytes equal a
    serialization of the whole message by the protobuf library."""
    st = _Strings(profile)
    head = profile_pb2.Profile()
    for t, u in zip(st.types[0::2], st.types[1::2], strict=True):
        head.sample_type.add(type=t, unit=u)
    maps = profile_pb2.Profile()
    for m, (fname, bid) in zip(
        profile.mappings.to_pylist(),
        zip(st.mappings[0::2], st.mappings[1::2], strict=True),
        strict=True,
    ):
        maps.mapping.add(
            id=m["id"],
            memory_start=m["memory_start"],
            memory_limit=m["memory_limit"],
            file_offset=m["file_offset"],
            filename=fname,
            build_id=bid,
            has_functions=m["has_functions"],
            has_filenames=m["has_filenames"],
            has_line_numbers=m["has_line_numbers"],
            has_inline_frames=m["has_inline_frames"],
        )
    data = b"".join(
        [
            head.SerializeToString(),
            _samples(profile, st.labels).encode(),
            maps.SerializeToString(),
            _locations(profile.locations).encode(),
            _functions(profile.functions, st.functions).encode(),
            _tail(profile, st).SerializeToString(),
        ]
    )
    if gzip:
        data = gzip_module.compress(data, compresslevel=GZIP_LEVEL, mtime=0)
    return data


class _Strings:
    """The string table: ``""`` first, then every string in the order it is met
    (sample types, labels, mappings, functions, metadata), once each; the
    indices of each part's strings, in that part's order (None: index 0)."""

    def __init__(self, p: Profile) -> None:
        import pyarrow.compute as pc

        labels = _chunk(p.samples.column("labels")).flatten()
        is_str = labels.field("str").is_valid()
        label_text = pc.if_else(is_str, labels.field("str"), labels.field("num_unit"))
        f = p.functions
        meta = [p.drop_frames, p.keep_frames]
        if p.period_type is not None:
            meta += [p.period_type.type, p.period_type.unit]
        meta += [*p.comments, p.default_sample_type, p.doc_url]
        parts = [
            from_strings([""] + [x for t in p.sample_types for x in (t.type, t.unit)]),
            _interleave([labels.field("key"), label_text]),
            _interleave([_chunk(p.mappings.column(c)) for c in ("filename", "build_id")]),
            _interleave([_chunk(f.column(c)) for c in ("name", "system_name", "filename")]),
            from_strings(meta),
        ]
        parts = [x.cast(pa.large_string()) for x in parts]
        enc = pc.dictionary_encode(pa.concat_arrays(parts))
        self.table: list[str] = enc.dictionary.to_pylist()
        idx = to_np(enc.indices, np.int64)
        cut = np.cumsum([0] + [len(x) for x in parts])
        pieces = [idx[a:b] for a, b in zip(cut[:-1], cut[1:], strict=True)]
        self.types = pieces[0][1:].tolist()
        self.labels = pieces[1]  # key, then str (or num_unit where str is null), per label
        self.mappings = pieces[2].tolist()
        self.functions = pieces[3]
        self.meta = pieces[4].tolist()


def _interleave(columns: list[pa.Array]) -> pa.Array:
    """Row 0 of every column, then row 1 of every column, …"""
    n, k = len(columns[0]), len(columns)
    both = pa.concat_arrays([c.cast(pa.large_string()) for c in columns])
    order = (np.arange(k)[None, :] * n + np.arange(n)[:, None]).reshape(-1)
    return both.take(from_numpy(order))


def _samples(p: Profile, label_strings: np.ndarray) -> wire.Stream:
    s = p.samples
    loc_offs, loc_flat = list_parts(_chunk(s.column("location_ids")))
    val_offs, val_flat = list_parts(_chunk(s.column("values")))
    lab_offs, labels = list_parts(_chunk(s.column("labels")))
    is_str = to_np(labels.field("str").is_valid(), bool)
    num = to_np(labels.field("num"), np.int64)
    label = wire.join(
        wire.scalar(1, label_strings[0::2]),
        wire.scalar(2, np.where(is_str, label_strings[1::2], 0)),
        wire.scalar(3, np.where(is_str, 0, num)),
        wire.scalar(4, np.where(is_str, 0, label_strings[1::2])),
    )
    sample = wire.join(
        wire.packed(1, loc_offs, to_np(loc_flat, np.uint64)),
        wire.packed(2, val_offs, to_np(val_flat, np.int64)),
        wire.group(lab_offs, wire.wrap(3, label)),
    )
    return wire.wrap(2, sample)


def _locations(locs: pa.Table) -> wire.Stream:
    line_offs, lines = list_parts(_chunk(locs.column("lines")))
    line = wire.join(
        wire.scalar(1, to_np(lines.field("function_id"), np.uint64)),
        wire.scalar(2, to_np(lines.field("line"), np.int64)),
        wire.scalar(3, to_np(lines.field("column"), np.int64)),
    )
    loc = wire.join(
        wire.scalar(1, to_np(locs.column("id"), np.uint64)),
        wire.scalar(2, to_np(locs.column("mapping_id"), np.uint64)),
        wire.scalar(3, to_np(locs.column("address"), np.uint64)),
        wire.group(line_offs, wire.wrap(4, line)),
        wire.scalar(5, to_np(locs.column("is_folded"), np.int64)),
    )
    return wire.wrap(4, loc)


def _functions(f: pa.Table, strings: np.ndarray) -> wire.Stream:
    fn = wire.join(
        wire.scalar(1, to_np(f.column("id"), np.uint64)),
        wire.scalar(2, strings[0::3]),
        wire.scalar(3, strings[1::3]),
        wire.scalar(4, strings[2::3]),
        wire.scalar(5, to_np(f.column("start_line"), np.int64)),
    )
    return wire.wrap(5, fn)


def _tail(p: Profile, st: _Strings) -> profile_pb2.Profile:
    """String table and the metadata fields (numbers 6 to 15)."""
    msg = profile_pb2.Profile()
    meta = iter(st.meta)
    msg.string_table.extend(st.table)
    msg.drop_frames = next(meta)
    msg.keep_frames = next(meta)
    msg.time_nanos = p.time_nanos
    msg.duration_nanos = p.duration_nanos
    if p.period_type is not None:
        msg.period_type.SetInParent()  # present even when both strings are empty
        msg.period_type.type = next(meta)
        msg.period_type.unit = next(meta)
    msg.period = p.period
    msg.comment.extend(next(meta) for _ in p.comments)
    msg.default_sample_type = next(meta)
    msg.doc_url = next(meta)
    return msg


def to_np(arr: pa.Array | pa.ChunkedArray, dtype: type) -> np.ndarray:
    """An integer or bool column as numpy (a null as 0)."""
    if arr.null_count:
        import pyarrow.compute as pc

        # Not fill_null(0): a scalar from a Python value makes pyarrow import pandas.
        zeros = from_numpy(np.zeros(len(arr), dtype=np.uint8)).cast(arr.type)
        arr = pc.coalesce(arr, zeros)
    return to_numpy(arr).astype(dtype, copy=False)


def _chunk(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def write_profile(profile: Profile, path: str | os.PathLike, *, gzip: bool = True) -> Path:
    """Write ``profile`` to ``path`` atomically; return the path."""
    target = Path(path)
    # Said here: the temporary file's FileNotFoundError named a file the user never chose.
    if not target.parent.is_dir():
        raise UsageError(f"{path}: folder {target.parent} does not exist")
    if target.is_dir():
        raise UsageError(f"{path}: is a directory")
    data = encode_profile(profile, gzip=gzip)
    fd, tmp = create_temp_file(target.parent, f".{target.name}.", ".tmp")
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
