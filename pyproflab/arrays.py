"""NumPy <-> Arrow for plain columns, without pyarrow's detour through pandas.

pyarrow imports pandas (about a quarter of a second) the first time
``pa.array``, ``Array.to_numpy`` or ``np.asarray(array)`` runs, to check for
pandas objects. A CLI run that reads a store or a file and prints a table never
needs pandas, so the paths such runs take convert through these functions,
which read and write the Arrow buffers directly.

Rules: ``to_numpy`` is a zero-copy, read-only view for integer and float
columns without nulls (as pyarrow's own zero-copy conversion is), a fresh array
for booleans; anything else (nulls, strings, nested types) goes through
pyarrow's ``to_numpy``. ``from_numpy`` copies only when the input is not a
contiguous array of the target type. ``from_rows`` builds a table from Python
rows (the store's profile rows) as ``pa.Table.from_pylist`` does, for the
types it lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa


def _fixed_width(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def to_numpy(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values of a flat Arrow column as a NumPy array."""
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks == 1:
            arr = arr.chunk(0)
        elif arr.num_chunks == 0:
            return np.zeros(0, dtype=arr.type.to_pandas_dtype())
        else:
            return np.concatenate([to_numpy(chunk) for chunk in arr.chunks])
    t = arr.type
    n = len(arr)
    if arr.null_count == 0 and (_fixed_width(t) or pa.types.is_boolean(t)):
        dtype = np.dtype(t.to_pandas_dtype())
        if n == 0:
            return np.zeros(0, dtype=dtype)
        data = arr.buffers()[1]
        if pa.types.is_boolean(t):
            bits = np.frombuffer(data, dtype=np.uint8)
            return np.unpackbits(bits, count=arr.offset + n, bitorder="little")[arr.offset :].view(
                bool
            )
        return np.frombuffer(data, dtype=dtype, count=n, offset=arr.offset * dtype.itemsize)
    return arr.to_numpy(zero_copy_only=False)


def from_numpy(values, type: pa.DataType | None = None, *, mask=None) -> pa.Array:  # noqa: A002
    """A flat NumPy array (or sequence) as an Arrow array of ``type`` (default: the
    array's own dtype); ``mask`` True marks a null."""
    if type is None:
        values = np.asarray(values)
        type = pa.from_numpy_dtype(values.dtype)  # noqa: A001
    if pa.types.is_boolean(type):
        data = pa.py_buffer(np.packbits(np.asarray(values, dtype=bool), bitorder="little"))
    elif _fixed_width(type):
        data = pa.py_buffer(np.ascontiguousarray(values, dtype=type.to_pandas_dtype()))
    else:
        raise TypeError(f"from_numpy takes integer, float or bool types, not {type}")
    n = len(values)
    validity = None
    null_count = 0
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        null_count = int(np.count_nonzero(mask))
        if null_count:
            validity = pa.py_buffer(np.packbits(~mask, bitorder="little"))
    return pa.Array.from_buffers(type, n, [validity, data], null_count=null_count)


def list_parts(arr: pa.ListArray | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """(offsets, values) of a list column: offsets (len + 1, int64, from 0) into the
    values of its lists only. Slices and chunks are handled; a null list counts as
    empty."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    if arr.null_count:
        import pyarrow.compute as pc

        lengths = to_numpy(pc.list_value_length(arr).fill_null(0))
        offsets = np.zeros(len(arr) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return offsets, arr.flatten()
    # Not arr.flatten(), which imports pyarrow.compute (30 ms) on first use.
    offsets = to_numpy(arr.offsets).astype(np.int64)
    start, end = int(offsets[0]), int(offsets[-1])
    values = arr.values.slice(start, end - start)
    return (offsets - start if start else offsets), values


def from_strings(values: Sequence[str | None]) -> pa.Array:
    """A list of Python strings (None for null) as an Arrow string array."""
    encoded = [b"" if v is None else v.encode() for v in values]
    n = len(encoded)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=n), out=offsets[1:])
    data = pa.py_buffer(b"".join(encoded))
    nulls = [v is None for v in values]
    mask = np.fromiter(nulls, dtype=bool, count=n)
    null_count = int(mask.sum())
    validity = pa.py_buffer(np.packbits(~mask, bitorder="little")) if null_count else None
    if offsets[-1] >= 2**31:
        raise ValueError("from_strings: over 2 GiB of text does not fit an Arrow string array")
    return pa.StringArray.from_buffers(
        n, pa.py_buffer(offsets.astype(np.int32)), data, validity, null_count
    )


def empty_lists(n: int, value_type: pa.DataType) -> pa.Array:
    """``n`` empty lists of ``value_type``."""
    offsets = from_numpy(np.zeros(n + 1, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.nulls(0, value_type))


def equal_strings(arr: pa.Array, value: pa.Scalar) -> pa.Array:
    """``arr == value`` (null where ``arr`` is null) for a string array or an
    interned (dictionary) one: an interned array is compared on its dictionary,
    then looked up by index, so shared strings are never expanded."""
    import pyarrow.compute as pc

    if pa.types.is_dictionary(arr.type):
        return pc.equal(arr.dictionary, value).take(arr.indices)
    return pc.equal(arr, value)


def _plain_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _plain_type(t.value_type)
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_plain_type(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct(
            [t.field(i).with_type(_plain_type(t.field(i).type)) for i in range(t.num_fields)]
        )
    return t


def uninterned(table: pa.Table) -> pa.Table:
    """``table`` with every interned (dictionary) string spelled out: equal
    content then compares equal whatever string table it was interned into.
    For comparisons and small outputs only: it copies every shared string."""
    target = pa.schema([f.with_type(_plain_type(f.type)) for f in table.schema])
    return table if target.equals(table.schema) else table.cast(target)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UNIT = {
    "s": timedelta(seconds=1),
    "ms": timedelta(milliseconds=1),
    "us": timedelta(microseconds=1),
}


def from_rows(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema)`` without pandas, for the types store rows
    use: integers, strings, timestamps (s, ms, us; a naive datetime is UTC, as in
    pyarrow), and lists, structs and maps of them. A missing key is null; a type
    not listed is a ``TypeError`` (add it here, and to the test, on purpose)."""
    return pa.table(
        [from_values([row.get(f.name) for row in rows], f.type) for f in schema], schema=schema
    )


def from_values(values: Sequence[Any], type: pa.DataType) -> pa.Array:  # noqa: A002
    """Python values (None: null) as an Arrow array of ``type`` (``from_rows``' types)."""
    if pa.types.is_string(type):
        return from_strings(values)
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    if pa.types.is_integer(type):
        dtype = type.to_pandas_dtype()
        data = np.fromiter((0 if v is None else v for v in values), dtype=dtype, count=len(values))
        return from_numpy(data, type, mask=nulls)
    if pa.types.is_timestamp(type) and type.unit in _UNIT:
        ticks = [0 if v is None else _ticks(v, _UNIT[type.unit]) for v in values]
        return from_numpy(np.array(ticks, dtype=np.int64), pa.int64(), mask=nulls).view(type)
    if pa.types.is_struct(type):
        children = [
            from_values([None if v is None else v.get(f.name) for v in values], f.type)
            for f in type
        ]
        return pa.StructArray.from_arrays(children, fields=list(type), mask=_mask(nulls))
    if pa.types.is_map(type):
        pairs = [
            [] if v is None else list(v.items() if isinstance(v, Mapping) else v) for v in values
        ]
        offsets = _offsets(pairs, nulls)
        keys = from_values([k for p in pairs for k, _ in p], type.key_type)
        items = from_values([x for p in pairs for _, x in p], type.item_type)
        return pa.MapArray.from_arrays(offsets, keys, items, type=type)
    if pa.types.is_list(type):
        lists = [[] if v is None else list(v) for v in values]
        flat = from_values([x for v in lists for x in v], type.value_type)
        return pa.ListArray.from_arrays(_offsets(lists, nulls), flat, type=type)
    raise TypeError(f"from_values does not build {type}")


def _ticks(value: datetime, unit: timedelta) -> int:
    """Whole ``unit``s since the epoch, exactly (no float), naive meaning UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // unit


def _offsets(lists: Sequence[Sequence[Any]], nulls: np.ndarray) -> pa.Array:
    """int32 list offsets, null where the list is null (a null offset marks a null list)."""
    ends = np.cumsum(np.fromiter(map(len, lists), dtype=np.int64, count=len(lists)))
    offsets = np.concatenate([[0], ends])
    if offsets[-1] >= 2**31:
        raise ValueError("from_values: over 2**31 list items do not fit an Arrow list")
    mask = np.concatenate([nulls, [False]])
    return from_numpy(offsets.astype(np.int32), pa.int32(), mask=mask)


def _mask(nulls: np.ndarray) -> pa.Array | None:
    return from_numpy(nulls, pa.bool_()) if nulls.any() else None


#: a chunk smaller than this on average is joined to its neighbours (``few_chunks``)
SMALL_CHUNK = 64 << 10


def few_chunks(table: pa.Table) -> pa.Table:
    """``table`` with its chunks combined when they are many and small on average
    (under ``SMALL_CHUNK`` bytes): DuckDB scans a registered table a chunk at a
    time, and hundreds of one-profile chunks cost it more than one copy."""
    chunks = max((c.num_chunks for c in table.columns), default=0)
    if chunks > 1 and table.nbytes < SMALL_CHUNK * chunks:
        return table.combine_chunks()
    return table
