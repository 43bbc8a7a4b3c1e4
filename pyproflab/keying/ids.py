"""Content-derived 64-bit ids for the store's dedup tables.

Rules: an id depends only on the content of what it names, never on a
profile's own ids, the order of ingest, the process or the DuckDB version,
so the same function, mapping, location, stack or label set seen in any
number of profiles gets the same id, and a batch can be keyed before it
touches the database. Ids are never 0 (0 means "none": no mapping, no
labels), except ``label_set_ids`` of an empty label list, which is 0.

Every id is blake2b (8 bytes, little endian) of a canonical encoding of the
whole content, so nobody can choose content that takes a given id (version 1
used an invertible numeric hash for locations and stacks: a crafted address
could steer a location onto any id):

- functions, mappings, label sets: a length-prefixed encoding (``_Encoder``).
- locations: the 64-bit words (mapping id, address, is_folded, number of
  lines) then (function id, line, column) per line, in order.
- stacks: the words (length, location ids leaf first). Equal stacks are found
  first by a fast numpy hash and checked element by element, so blake2b runs
  once per distinct stack.

With the C extensions the ids of content this process hashed before come from
a cache that compares the content byte for byte (``digests``): the same ids,
blake2b run once per distinct content.

64 bits still collide by chance (~n^2/2^65 for n distinct items) and could be
searched for; the store therefore checks every id it already holds against the
content it is given (``ingest.refuse_collisions``) and refuses a mismatch.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import struct
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa

from pyproflab.arrays import list_parts, to_numpy
from pyproflab.keying.digests import DigestCache, Entries
from pyproflab.keying.quick_hash import combine, list_hash, same_lists
from pyproflab.native import optional_extension

U64 = np.uint64
# Seeds of the fast in-profile grouping hashes (never stored).
_SEED_LINES = U64(0x4C494E4553000000)  # "LINES"
_SEED_STACK = U64(0x535441434B000000)  # "STACK"


# The C extension that hashes many segments in one call (``_blake.c``);
# PYPROFLAB_PURE_KEYS=1 forces hashlib. Both give the same ids
# (tests/keying/test_ids_fast.py).
_blake = optional_extension("pyproflab.keying._blake", "PYPROFLAB_PURE_KEYS")

#: This process's ids of content it has hashed (``digests``), consulted on the C
#: path only: hashlib's path hashes every row, to the same ids.
CACHE = DigestCache()


def _nonzero(ids: np.ndarray) -> np.ndarray:
    return np.where(ids == 0, U64(1), ids)


def list_values(arr: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """(flat values, offsets) of a list array, slices and chunks handled."""
    offsets, values = list_parts(arr)
    return values, offsets


def u64(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An integer column as uint64 (a view when it is one chunk of uint64). Not
    through ``combine_chunks``, which imports pandas for a column of no chunks."""
    return to_numpy(arr).astype(U64, copy=False)


def remap(local_ids: np.ndarray, from_ids: np.ndarray, to_ids: np.ndarray) -> np.ndarray:
    """Translate ``local_ids`` through the pairs (from_ids[i] -> to_ids[i]); 0 stays 0.

    Every nonzero local id must be in ``from_ids`` (the decoder checked references).
    """
    local_ids = np.asarray(local_ids, dtype=U64)
    if len(from_ids) == 0:
        return np.zeros(len(local_ids), dtype=U64)
    order = np.argsort(from_ids, kind="stable")
    sorted_from = from_ids[order]
    pos = np.searchsorted(sorted_from, local_ids)
    pos = np.minimum(pos, len(sorted_from) - 1)
    out = to_ids[order][pos]
    return np.where(local_ids == 0, U64(0), out)


# --- blake2b over a canonical encoding --------------------------------------------


class _Encoder:
    """Canonical bytes: every field length-prefixed or fixed width, so no two
    different field lists encode the same."""

    __slots__ = ("parts",)

    def __init__(self, tag: bytes):
        self.parts = [tag]

    def s(self, v: str | None) -> _Encoder:
        if v is None:
            self.parts.append(b"\xff")
        else:
            b = v.encode("utf-8", "surrogatepass")
            self.parts.append(b"\x00" + struct.pack("<Q", len(b)) + b)
        return self

    def i(self, v: int) -> _Encoder:
        self.parts.append(struct.pack("<q", v))
        return self

    def u(self, v: int) -> _Encoder:
        self.parts.append(struct.pack("<Q", v))
        return self

    def digest(self) -> int:
        d = hashlib.blake2b(b"".join(self.parts), digest_size=8).digest()
        return int.from_bytes(d, "little") or 1


# Functions repeat across the profiles of a fleet (same binaries): remember the
# ids of recent ones. Bounded; cleared whole when full (cheap, and rare).
_FUNCTION_CACHE: dict[tuple[str, str, str, int], int] = {}
_FUNCTION_CACHE_MAX = 1 << 20
_FN_HEAD = struct.Struct("<QQQq")


def _function_id(name: str, system_name: str, filename: str, start_line: int) -> int:
    a, b, c = (x.encode("utf-8", "surrogatepass") for x in (name, system_name, filename))
    data = b"F1" + _FN_HEAD.pack(len(a), len(b), len(c), start_line) + a + b + c
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") or 1


def function_ids(functions: pa.Table, columns: list[Column] | None = None) -> np.ndarray:
    """Ids of a PROFILE_FUNCTIONS table's rows: pprof's function key
    (name, system_name, filename, start_line), encoded as ``_function_id`` does.
    ``columns``: the table's ``function_columns`` when the caller has them."""
    return function_keys(functions, columns)[0]


def function_keys(
    functions: pa.Table, columns: list[Column] | None = None
) -> tuple[np.ndarray, Entries | None]:
    """(``function_ids``, the rows' ``CACHE`` entries or None when not cached)."""
    if _blake is not None and functions.num_rows:
        columns = columns if columns is not None else function_columns(functions)
        if columns is not None:
            strings = [(off, data) for data, off in columns[:3]]
            start = columns[3][0]
            return CACHE.ids("functions", columns, lambda r: _function_ids_fast(strings, start, r))
    return _function_ids_slow(functions), None


def _function_ids_slow(functions: pa.Table) -> np.ndarray:
    """``function_ids`` row by row (null strings, or no C extension)."""
    cols = [
        functions.column(c).to_pylist() for c in ("name", "system_name", "filename", "start_line")
    ]
    cache = _FUNCTION_CACHE
    if len(cache) > _FUNCTION_CACHE_MAX:
        cache.clear()
    out = []
    for key in zip(*cols, strict=True):
        fid = cache.get(key)
        if fid is None:
            fid = cache[key] = _function_id(*key)
        out.append(fid)
    return np.array(out, dtype=U64)


StringParts = tuple[np.ndarray, np.ndarray]  # (int64 offsets, n+1; uint8 bytes)
#: One column of a table's rows: (values, int64 starts: n+1); row k is
#: ``values[starts[k]:starts[k+1]]`` (what ``sent`` compares byte for byte).
Column = tuple[np.ndarray, np.ndarray]


def function_columns(functions: pa.Table) -> list[Column] | None:
    """Every field of each function row as Columns: the bytes of its three strings
    (name, system_name, filename), then its start line (one uint64 word); None when
    a string column has nulls (``function_ids`` then takes the per-row path)."""
    strings = [string_parts(functions.column(c)) for c in ("name", "system_name", "filename")]
    if any(s is None for s in strings):
        return None
    start = u64(functions.column("start_line"))
    one_each = np.arange(functions.num_rows + 1, dtype=np.int64)
    return [(data, off) for off, data in strings] + [(start, one_each)]  # type: ignore[misc]


def string_parts(arr: pa.Array | pa.ChunkedArray) -> StringParts | None:
    """(offsets, bytes) of a string column without nulls, offsets rebased to 0;
    None for anything else (the caller takes the per-row path)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count or not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        return None
    width = np.int32 if pa.types.is_string(arr.type) else np.int64
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(
        off_buf, dtype=width, count=len(arr) + 1, offset=arr.offset * width().itemsize
    )
    offsets = offsets.astype(np.int64)
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    )
    return offsets - offsets[0], data[offsets[0] : offsets[-1]]


def _function_ids_fast(
    strings: list[StringParts], start_line: np.ndarray, rows: np.ndarray | None = None
) -> np.ndarray:
    """``_function_id`` of every row (or of ``rows``) in one call of ``_blake`` (it
    lays out each row's bytes as ``_function_id`` does, in a scratch buffer)."""
    out = np.empty(len(start_line), dtype=U64)
    parts = [x for off, data in strings for x in (off, np.ascontiguousarray(data))]
    line = np.ascontiguousarray(start_line.view(np.int64))
    assert _blake is not None, "called on the C path only (function_keys)"
    _blake.hash_functions(*parts, line, out, *_rows_arg(rows))
    return _nonzero(out if rows is None else out[rows])


def _rows_arg(rows: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """The optional ``rows`` argument of ``_blake``'s hash_* (none: every row)."""
    return () if rows is None else (np.ascontiguousarray(rows, dtype=np.int64),)


MAPPING_COLUMNS = (
    "memory_start",
    "memory_limit",
    "file_offset",
    "filename",
    "build_id",
    "has_functions",
    "has_filenames",
    "has_line_numbers",
    "has_inline_frames",
)


def mapping_ids(mappings: pa.Table) -> np.ndarray:
    """Ids of a PROFILE_MAPPINGS table's rows: every field but the profile's own id."""
    cols = [mappings.column(c).to_pylist() for c in MAPPING_COLUMNS]
    out = np.empty(mappings.num_rows, dtype=U64)
    for k, (start, limit, off, fname, bid, hf, hfn, hl, hi) in enumerate(zip(*cols, strict=True)):
        flags = int(hf) | int(hfn) << 1 | int(hl) << 2 | int(hi) << 3
        out[k] = _Encoder(b"M1").u(start).u(limit).u(off).s(fname).s(bid).u(flags).digest()
    return out


def _blake_rows(
    words: np.ndarray, bounds: np.ndarray, person: bytes, rows: np.ndarray | None = None
) -> np.ndarray:
    """blake2b (8 bytes, little endian, never 0) of each slice ``words[bounds[k]:
    bounds[k+1]]`` of a uint64 array (or of the slices ``rows``, C only), its
    words little endian. All rows in one call of the C extension when built; else
    hashlib per row, each row's hasher a copy of one set up with the digest size
    and personalisation (half the time of passing those keywords to a new hasher
    per row, measured on 15,000 stacks)."""
    if _blake is not None:
        out = np.empty(len(bounds) - 1, dtype=U64)
        data = np.ascontiguousarray(words, dtype="<u8")
        byte_bounds = np.asarray(bounds, dtype=np.int64) * 8
        _blake.hash_segments(data, byte_bounds, person, out, *_rows_arg(rows))
        return _nonzero(out if rows is None else out[rows])
    assert rows is None, "a subset of rows is hashed on the C path only"
    buf = memoryview(np.ascontiguousarray(words, dtype="<u8").tobytes())
    b = (np.asarray(bounds, dtype=np.int64) * 8).tolist()
    base = hashlib.blake2b(digest_size=8, person=person)
    digests: list[bytes] = []
    for start, end in itertools.pairwise(b):
        h = base.copy()
        h.update(buf[start:end])
        digests.append(h.digest())
    return _nonzero(np.frombuffer(b"".join(digests), dtype="<u8").astype(U64))


def location_ids(
    locations: pa.Table, mapping_content: np.ndarray, function_content: np.ndarray
) -> np.ndarray:
    """Ids of a PROFILE_LOCATIONS table's rows, given the content ids of their
    mapping_id (0 for none) and of each line's function_id (flattened lines).

    blake2b of every field: (mapping id, address, is_folded, number of lines)
    then (function id, line, column) per line in order, as 64-bit words
    (``location_words``).
    """
    return location_ids_of_words(*location_words(locations, mapping_content, function_content))


def location_ids_of_words(words: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``location_ids`` from the locations' ``location_words``."""
    return location_keys(words, starts)[0]


_LOCATION_PERSON = b"pyproflab-loc1"


def location_keys(words: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, Entries | None]:
    """(``location_ids_of_words``, the rows' ``CACHE`` entries or None when not cached)."""
    if _blake is None:
        return _blake_rows(words, starts, _LOCATION_PERSON), None
    words = np.ascontiguousarray(words, dtype="<u8")
    starts = np.asarray(starts, dtype=np.int64)
    hash_rows = functools.partial(_blake_rows, words, starts, _LOCATION_PERSON)
    return CACHE.ids("locations", [(words, starts)], hash_rows)


def location_words(
    locations: pa.Table, mapping_content: np.ndarray, function_content: np.ndarray
) -> Column:
    """(words, starts) of every location: row k is ``words[starts[k]:starts[k+1]]``,
    the 64-bit words (mapping id, address, is_folded, number of lines) then
    (function id, line, column) per line. Every field of a location is in them, so
    two locations are equal exactly when their words are (``sent`` compares them)."""
    lines_values, offsets = list_values(locations.column("lines"))
    offsets = np.asarray(offsets, dtype=np.int64)
    n = locations.num_rows
    lengths = np.diff(offsets)
    # Row k starts at word 4k + 3*(lines before it): a 4-word head, then 3 per line.
    starts = 4 * np.arange(n + 1, dtype=np.int64) + 3 * (
        np.concatenate([[0], np.cumsum(lengths)]) if n else np.zeros(1, np.int64)
    )
    words = np.empty(int(starts[-1]), dtype=U64)
    head = starts[:-1]
    words[head] = np.asarray(mapping_content, dtype=U64)
    words[head + 1] = u64(locations.column("address"))
    words[head + 2] = u64(locations.column("is_folded"))
    words[head + 3] = lengths.astype(U64)
    if len(lines_values):
        # Line j of row k is at 4k + 3*(lines before row k) + 4 + 3*(j - lines
        # before row k) = 4(k + 1) + 3j.
        pos = 4 * np.repeat(np.arange(1, n + 1), lengths) + 3 * np.arange(len(lines_values))
        words[pos] = np.asarray(function_content, dtype=U64)
        words[pos + 1] = u64(lines_values.field("line"))
        words[pos + 2] = u64(lines_values.field("column"))
    return words, starts


def gather(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices of the segments ``[starts[i], starts[i] + lengths[i])``, end to end."""
    if not len(lengths):
        return np.zeros(0, np.int64)
    begin = np.cumsum(lengths) - lengths
    return np.repeat(starts - begin, lengths) + np.arange(int(lengths.sum()))


_STACK_PERSON = b"pyproflab-stack1"


def stack_ids(location_content_flat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Ids of stacks given their location content ids (flattened, leaf first).

    blake2b of the list of location ids (the length first), as 64-bit words.
    With the C extension every list is looked up in ``CACHE`` and the others
    hashed in one call. Without it, equal lists are grouped by a fast polynomial
    hash and hashed once; a group's members are checked element by element
    against its first list, and a member that differs (a fast-hash collision) is
    hashed on its own.
    """
    return stack_keys(location_content_flat, offsets)[0]


def stack_keys(
    location_content_flat: np.ndarray, offsets: np.ndarray
) -> tuple[np.ndarray, Entries | None]:
    """(``stack_ids``, the lists' ``CACHE`` entries or None when not cached)."""
    flat = np.asarray(location_content_flat, dtype=U64)
    offsets = np.asarray(offsets, dtype=np.int64)
    flat = flat[offsets[0] : offsets[-1]] if len(offsets) else flat[:0]
    offsets = offsets - (offsets[0] if len(offsets) else 0)
    n = len(offsets) - 1
    if n <= 0:
        return np.zeros(0, dtype=U64), None
    if _blake is not None:
        # Equal lists are not grouped first: blake2b is a function of the bytes, and
        # the cache answers repeats more cheaply than a grouping would.
        flat = np.ascontiguousarray(flat, dtype="<u8")
        return CACHE.ids("stacks", [(flat, offsets)], functools.partial(_c_lists, flat, offsets))
    return _stack_ids_grouped(flat, offsets), None


def _c_lists(flat: np.ndarray, offsets: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """``stack_ids`` of every list (or of ``rows``) in one call of ``_blake``."""
    out = np.empty(len(offsets) - 1, dtype=U64)
    assert _blake is not None, "called on the C path only (stack_keys)"
    _blake.hash_lists(flat, offsets, _STACK_PERSON, out, *_rows_arg(rows))
    return _nonzero(out if rows is None else out[rows])


def _stack_ids_grouped(flat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``stack_ids`` by hashlib, each distinct list once (``stack_ids``' rule)."""
    n = len(offsets) - 1
    quick = list_hash(flat, offsets, _SEED_STACK)
    _, first, inverse = np.unique(quick, return_index=True, return_inverse=True)
    rep = first[inverse.reshape(-1)]
    alone = ~same_lists(flat, offsets, rep)
    rep = np.where(alone, np.arange(n), rep)
    todo = np.unique(rep)
    lengths = np.diff(offsets)
    # Hash each distinct list as (length, ids...).
    sizes = lengths[todo] + 1
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    words = np.empty(int(bounds[-1]), dtype=U64)
    words[bounds[:-1]] = lengths[todo].astype(U64)
    owner = np.repeat(np.arange(len(todo)), lengths[todo])
    rank = np.arange(len(owner)) - np.repeat(
        np.cumsum(lengths[todo]) - lengths[todo], lengths[todo]
    )
    words[bounds[:-1][owner] + 1 + rank] = flat[offsets[todo][owner] + rank]
    hashed = _blake_rows(words, bounds, _STACK_PERSON)
    out = np.empty(n, dtype=U64)
    out[todo] = hashed
    return out[rep]


LabelTuple = tuple[str, str | None, int | None, str | None]


def canonical_labels(labels: Iterable[dict | LabelTuple]) -> list[LabelTuple]:
    """pprof's label-set identity: string labels before numeric ones, keys sorted,
    the order of values under one key kept (a stable sort)."""
    rows: list[LabelTuple] = [
        (d["key"], d["str"], d["num"], d["num_unit"]) if isinstance(d, dict) else d for d in labels
    ]
    return sorted(rows, key=lambda r: (r[2] is not None, r[0]))


def label_set_id(canonical: Sequence[LabelTuple]) -> int:
    """The id of a canonical label list (``canonical_labels``); 0 when empty."""
    if not canonical:
        return 0
    e = _Encoder(b"S1").u(len(canonical))
    for key, s, num, unit in canonical:
        e.s(key)
        if num is None:
            e.u(0).s(s)
        else:
            e.u(1).i(num).s(unit)
    return e.digest()


def raw_label_keys(labels_col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A per-sample hash of its label list as written (order included), to find the
    distinct label lists of one profile without a Python loop per sample. Only
    meaningful within one profile; 0 for no labels."""
    import pyarrow.compute as pc  # ingest only; a query run does without its 30 ms

    values, offsets = list_values(labels_col)
    n = len(offsets) - 1
    if len(values) == 0:
        return np.zeros(n, dtype=U64)
    parts = []
    for name in ("key", "str", "num_unit"):
        enc = pc.dictionary_encode(values.field(name))
        idx = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        parts.append(idx)
    num = values.field("num")
    num_valid = num.is_valid().to_numpy(zero_copy_only=False)
    num_v = num.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return raw_label_keys_of(parts, num_v, num_valid, offsets)


def raw_label_keys_of(
    parts: list[np.ndarray], num_v: np.ndarray, num_valid: np.ndarray, offsets: np.ndarray
) -> np.ndarray:
    """``raw_label_keys`` from the labels' fields: the dictionary codes of key, str
    and num_unit (-1 for null), num (0 for null) and whether num is set, and each
    sample's offsets into them. Each sample's key is its own labels' alone."""
    h = combine(
        combine(combine(parts[0].astype(U64), parts[1].astype(U64)), parts[2].astype(U64)),
        combine(num_v.astype(U64), num_valid.astype(U64)),
    )
    keys = list_hash(h, offsets, _SEED_LINES)
    lengths = np.diff(offsets)
    return np.where(lengths == 0, U64(0), _nonzero(keys))


def store_row_ids(table_name: str, rows: pa.Table) -> np.ndarray:
    """The content ids of a dedup table's rows in store form (references already
    content ids), to check ids that come from outside, such as a Parquet dataset."""
    if table_name == "functions":
        return function_ids(rows)
    if table_name == "mappings":
        return mapping_ids(rows)
    if table_name == "locations":
        lines, _ = list_values(rows.column("lines"))
        return location_ids(rows, u64(rows.column("mapping_id")), u64(lines.field("function_id")))
    if table_name == "stacks":
        values, offsets = list_values(rows.column("location_ids"))
        return stack_ids(u64(values), offsets)
    if table_name == "label_sets":
        out = [label_set_id(canonical_labels(x)) for x in rows.column("labels").to_pylist()]
        return np.array(out, dtype=U64)
    raise ValueError(f"no content ids for table {table_name!r}")
