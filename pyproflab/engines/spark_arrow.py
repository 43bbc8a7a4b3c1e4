"""Arrow on both sides of Spark: types Spark can hold, and one profile's staged rows.

Rules:

- Spark has no unsigned integers. Content ids (uint64) cross into Spark as the
  int64 of the same 64 bits (``signed``) and come back as uint64 the same way
  (``unsigned``), so an id is never changed, only reinterpreted. Parquet files
  written by DuckDB keep UINT64, which Spark reads as DECIMAL(20,0);
  ``long_id`` turns such a column into the same int64 bits.
- A keyed profile is staged between Spark stages as one file of length-prefixed
  Arrow IPC streams (``pack``/``unpack``), so Spark moves paths, not the rows of
  every table, and a task holds one profile's rows at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Any

import pyarrow as pa


def signed(t: pa.DataType) -> pa.DataType:
    """``t`` with every uint64 (at any depth) as int64."""
    if pa.types.is_uint64(t):
        return pa.int64()
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, signed(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(signed(t.key_type), signed(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, signed(f.type), f.nullable) for f in t])
    return t


def signed_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, signed(f.type), f.nullable) for f in schema])


def reinterpret(table: pa.Table, target: pa.Schema) -> pa.Table:
    """``table`` cast to ``target``, an int64/uint64 change keeping the 64 bits
    (an unsafe integer cast wraps; nothing else in these tables is narrowed)."""
    return table.select(target.names).cast(target, safe=False)


def spark_type(schema: pa.Schema) -> Any:
    """The Spark StructType of an Arrow schema (uint64 taken as int64)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(signed_schema(schema))


def long_id(column: str) -> Any:
    """A Spark column: the int64 bits of a uint64 id read from Parquet as DECIMAL(20,0)."""
    from pyspark.sql import functions as F

    c = f"`{column}`"
    # BD: decimal literals (2**63 and 2**64 do not fit Spark's long literals).
    expr = f"CAST(IF({c} >= {2**63}BD, {c} - {2**64}BD, {c}) AS BIGINT)"
    return F.expr(expr).alias(column)


# --- one profile's staged rows ---------------------------------------------------------

_HEAD = struct.Struct("<I")


def pack(tables: dict[str, pa.Table]) -> bytes:
    """Tables as one blob: a JSON header of (name, length), then each IPC stream."""
    blobs = []
    for t in tables.values():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t)
        blobs.append(sink.getvalue())
    head = json.dumps([[n, b.size] for n, b in zip(tables, blobs, strict=True)]).encode()
    return _HEAD.pack(len(head)) + head + b"".join(b.to_pybytes() for b in blobs)


def unpack(data: bytes, names: tuple[str, ...] | None = None) -> dict[str, pa.Table]:
    """The tables ``pack`` wrote (only ``names`` if given)."""
    buf = pa.py_buffer(data)
    (n,) = _HEAD.unpack_from(data, 0)
    pos = _HEAD.size + n
    out = {}
    for name, size in json.loads(data[_HEAD.size : pos]):
        if names is None or name in names:
            out[name] = pa.ipc.open_stream(buf.slice(pos, size)).read_all()
        pos += size
    return out


def write_staged(path: str, tables: dict[str, pa.Table]) -> None:
    with open(path, "wb") as f:
        f.write(pack(tables))


def read_staged(path: str, names: tuple[str, ...] | None = None) -> dict[str, pa.Table]:
    with open(path, "rb") as f:
        return unpack(f.read(), names)


def file_digest(path: str) -> tuple[int, str]:
    """(size, sha256 hex) of a written file, for the dataset marker."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return os.path.getsize(path), h.hexdigest()
