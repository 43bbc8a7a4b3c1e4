"""Merge profiles in memory as ``go tool pprof -proto A B …`` does.

Steps and rules (pprof's ``combineProfiles``):

1. ``sample_types.compatibilize_sample_types``: keep the sample types every
   profile has (rules there).
2. ``sample_types.scale_profiles``: convert values to common units (rules there).
3. ``Merge``: period types and sample types must then be equal. Header: period
   is the maximum, time the earliest (pprof's loop, which favours non-zero
   values), duration the sum, comments de-duplicated, default type / doc URL /
   drop and keep frames from the first profile that has them.
   Samples whose values are all zero are dropped. Mappings are de-duplicated by
   (size rounded up to 4 KiB, offset, build id or else file), functions by
   (start line, name, system name, file), locations by (address relative to
   the mapping, mapping, lines, folded), samples by (locations, labels), whose
   values are then added. Ids are given in order of first use, as pprof does.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.analyses._arrays import (
    IdIndex,
    Numbering,
    lookup,
    ragged_keys,
    ragged_positions,
    row_keys,
    to_np,
)
from pyproflab.analyses.sample_types import (
    compatibilize_sample_types,
    scale_profiles,
    values_matrix,
)
from pyproflab.arrays import from_numpy, from_strings, list_parts
from pyproflab.errors import UsageError
from pyproflab.model import Profile


def merge(profiles: list[Profile]) -> Profile:
    """One profile combining ``profiles`` exactly as pprof merges them (see module rules)."""
    if not profiles:
        raise UsageError("no profiles to merge")
    profiles = compatibilize_sample_types(list(profiles))
    profiles = scale_profiles(profiles)
    return _merge(profiles)


# --- the merge itself ---------------------------------------------------------------


def _check_compatible(a: Profile, b: Profile) -> None:
    pa_, pb = a.period_type, b.period_type
    if (pa_ is None) != (pb is None) or (pa_ is not None and pa_ != pb):
        raise UsageError(f"incompatible period types {pa_} and {pb}")
    if a.sample_types != b.sample_types:
        raise UsageError(
            f"incompatible sample types {[str(t) for t in a.sample_types]} and "
            f"{[str(t) for t in b.sample_types]}"
        )


def _header(srcs: list[Profile]) -> dict:
    for s in srcs[1:]:
        _check_compatible(srcs[0], s)
    time_nanos = duration = period = 0
    comments: list[str] = []
    seen: set[str] = set()
    default = doc = ""
    for s in srcs:
        if time_nanos == 0 or s.time_nanos < time_nanos:
            time_nanos = s.time_nanos
        duration += s.duration_nanos
        if period == 0 or period < s.period:
            period = s.period
        for c in s.comments:
            if c not in seen:
                seen.add(c)
                comments.append(c)
        default = default or s.default_sample_type
        doc = doc or s.doc_url
    first = srcs[0]
    return dict(
        sample_types=list(first.sample_types),
        period_type=first.period_type,
        period=period,
        time_nanos=time_nanos,
        duration_nanos=duration,
        comments=comments,
        drop_frames=first.drop_frames,
        keep_frames=first.keep_frames,
        default_sample_type=default,
        doc_url=doc,
    )


def _label_key(labels: list[dict]) -> tuple:
    """Canonical labels as pprof keys samples: string labels by key (values in
    order), numeric labels by key with their units; empty labels dropped."""
    strs: dict[str, list[str]] = {}
    nums: dict[str, list[int]] = {}
    units: dict[str, list[str]] = {}
    for lb in labels:
        key = lb["key"]
        if lb["str"] is not None and lb["str"] != "":
            strs.setdefault(key, []).append(lb["str"])
        elif (lb["num"] or 0) != 0 or lb["num_unit"]:
            vals = nums.setdefault(key, [])
            if lb["num_unit"]:
                u = units.setdefault(key, [])
                u.extend([""] * (len(vals) - len(u)))
                u.append(lb["num_unit"])
            vals.append(lb["num"] or 0)
    for key, u in units.items():
        u.extend([""] * (len(nums[key]) - len(u)))
    return (
        tuple((k, tuple(strs[k])) for k in sorted(strs)),
        tuple((k, tuple(nums[k]), tuple(units.get(k, ()))) for k in sorted(nums)),
    )


# --- the merge itself -----------------------------------------------------------------


class _Mappings:
    """pprof's mapping table while merging; profiles hold few mappings, so rows are
    mapped one by one, in order of first use."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.keys: dict[tuple, int] = {}

    def map(self, m: dict | None) -> tuple[int, int]:
        """(merged mapping id or 0, address offset)."""
        if m is None:
            return 0, 0
        size = m["memory_limit"] - m["memory_start"]
        size = (size + 0xFFF) - ((size + 0xFFF) % 0x1000)
        key = (size & 0xFFFFFFFFFFFFFFFF, m["file_offset"], m["build_id"] or m["filename"])
        mid = self.keys.get(key)
        if mid is not None:
            return mid, self.rows[mid - 1]["memory_start"] - m["memory_start"]
        mid = len(self.rows) + 1
        self.rows.append({**m, "id": mid})
        self.keys[key] = mid
        return mid, 0

    def table(self) -> pa.Table:
        """The merged mappings as a table. Built from arrays: pyarrow's first table or
        array from Python objects imports pandas, most of a second of a CLI run."""
        out = []
        for field in schema.PROFILE_MAPPINGS:
            values = [m[field.name] for m in self.rows]
            if pa.types.is_string(field.type):
                out.append(from_strings(values))
            else:
                dtype = bool if pa.types.is_boolean(field.type) else np.uint64
                out.append(from_numpy(np.array(values, dtype=dtype), field.type))
        return pa.Table.from_arrays(out, schema=schema.PROFILE_MAPPINGS)

    def starts(self) -> np.ndarray:
        """Merged mappings' start addresses, indexed by merged id (0: none)."""
        return np.array([0] + [m["memory_start"] for m in self.rows], dtype=np.uint64)


_FAKE_MAPPING = {
    "id": 1,
    "memory_start": 0,
    "memory_limit": 0,
    "file_offset": 0,
    "filename": "",
    "build_id": "",
    "has_functions": False,
    "has_filenames": False,
    "has_line_numbers": False,
    "has_inline_frames": False,
}


def _with_fake_mapping(p: Profile) -> Profile:
    """pprof reads a profile without mappings as one with a single empty mapping
    (start, limit, offset 0) holding every location; merged, that mapping joins
    others of size 0 and offset 0, and so do their locations."""
    if p.mappings.num_rows or not p.locations.num_rows:
        return p
    locs = p.locations
    mids = to_np(locs.column("mapping_id"), np.uint64)
    locs = locs.set_column(
        1, schema.PROFILE_LOCATIONS.field("mapping_id"), from_numpy(np.where(mids == 0, 1, mids))
    )
    mappings = pa.Table.from_pylist([_FAKE_MAPPING], schema=schema.PROFILE_MAPPINGS)
    return dataclasses.replace(p, locations=locs, mappings=mappings)


@dataclasses.dataclass
class _Part:
    """One source profile's share of the merge, in pprof's order of first use."""

    kept: np.ndarray  # rows of the samples pprof keeps (some value non-zero)
    loc_ids: np.ndarray  # its known location ids, in order of first use by those
    loc_offsets: np.ndarray  # lines of loc_ids[i]: line_*[loc_offsets[i]:loc_offsets[i+1]]
    mapping: np.ndarray  # merged mapping id of each location (0: none)
    address: np.ndarray  # address moved onto the merged mapping
    folded: np.ndarray
    fn_rows: np.ndarray  # each line's function as a row of the source's functions (-1: none)
    line: np.ndarray
    column: np.ndarray


def _part(src: Profile, mappings: _Mappings) -> _Part:
    values = values_matrix(src)
    kept = np.flatnonzero((values != 0).any(axis=1)) if values.size else np.zeros(0, np.int64)
    offsets, flat = list_parts(src.samples.column("location_ids"))
    # Locations in order of first use by the kept samples (pprof maps them lazily).
    used = to_np(flat, np.uint64)[np.repeat(_mask(kept, len(offsets) - 1), np.diff(offsets))]
    loc_ids = _in_first_use_order(used)
    rows = IdIndex(to_np(src.locations.column("id"), np.uint64)).rows(loc_ids)
    loc_ids, rows = loc_ids[rows >= 0], rows[rows >= 0]
    locs = src.locations.take(from_numpy(rows))

    if not mappings.rows and src.mappings.num_rows:
        mappings.map(src.mappings.slice(0, 1).to_pylist()[0])
    mapping, offset = _map_mappings(src, to_np(locs.column("mapping_id"), np.uint64), mappings)
    loc_offsets, lines = list_parts(locs.column("lines"))
    fn_ids = to_np(lines.field("function_id"), np.uint64)
    return _Part(
        kept=kept,
        loc_ids=loc_ids,
        loc_offsets=loc_offsets,
        mapping=mapping,
        address=to_np(locs.column("address"), np.uint64) + offset.view(np.uint64),
        folded=to_np(locs.column("is_folded"), np.int64),
        fn_rows=IdIndex(to_np(src.functions.column("id"), np.uint64)).rows(fn_ids),
        line=to_np(lines.field("line"), np.int64),
        column=to_np(lines.field("column"), np.int64),
    )


def _in_first_use_order(ids: np.ndarray) -> np.ndarray:
    """The distinct ``ids`` in order of first appearance."""
    if len(ids) and int(ids.max()) <= 4 * len(ids) + 1024:
        # Small dense ids (the usual 1..n): first positions in a table.
        first = np.full(int(ids.max()) + 1, len(ids), dtype=np.int64)
        np.minimum.at(first, ids, np.arange(len(ids)))
        present = np.flatnonzero(first < len(ids))
        return present[np.argsort(first[present], kind="stable")].astype(np.uint64)
    return ids[Numbering().number(from_numpy(ids))[1]]


def _mask(rows: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[rows] = True
    return out


def _map_mappings(
    src: Profile, mapping_ids: np.ndarray, mappings: _Mappings
) -> tuple[np.ndarray, np.ndarray]:
    """Each location's merged mapping id and address offset; the source's mappings
    are mapped in the order its locations first use them."""
    by_id = {m["id"]: m for m in src.mappings.to_pylist()}
    _, first = np.unique(mapping_ids, return_index=True)
    order = mapping_ids[np.sort(first)]
    mapped = [mappings.map(by_id.get(mid)) for mid in order.tolist()]
    mids = np.array([m for m, _ in mapped], dtype=np.int64)
    offsets = np.array([o for _, o in mapped], dtype=np.int64)
    return lookup(order, mids, mapping_ids), lookup(order, offsets, mapping_ids)


def _location_keys(p: _Part, fids: np.ndarray, starts: np.ndarray) -> pa.Array:
    """pprof's location key as binary rows: (address relative to the mapping,
    mapping, folded, last line's column) then per line (slot kind, slot, line).
    pprof's line slots overlap: line i's function slot holds line i-1's column
    when line i has no function (empty for the first line), so it is kept so."""
    n, offs = len(p.mapping), p.loc_offsets
    key_addr = np.where(p.mapping != 0, p.address - starts[p.mapping], p.address)
    has_lines = offs[1:] > offs[:-1]
    last_col = np.zeros(n, dtype=np.int64)
    if len(p.column):  # locations without any line (addresses only) have none
        last_col = np.where(has_lines, p.column[np.maximum(offs[1:] - 1, 0)], 0)
    row, pos = ragged_positions(offs)
    prev_col = np.concatenate([[0], p.column[:-1]])
    kind = ((fids != 0) | (pos > 0)).astype(np.int64)
    slot = np.where(fids != 0, fids.view(np.int64), np.where(pos > 0, prev_col, 0))
    starts_w = 4 * np.arange(n + 1) + 3 * offs
    words = np.empty(int(starts_w[-1]), dtype=np.int64)
    for i, col in enumerate((key_addr.view(np.int64), p.mapping, p.folded, last_col)):
        words[starts_w[:-1] + i] = col
    at = starts_w[:-1][row] + 4 + 3 * pos
    words[at], words[at + 1], words[at + 2] = kind, slot, p.line
    return ragged_keys(words, starts_w)


class _Merger:
    """pprof's merge, one source profile at a time. Every table is keyed with
    ``Numbering``, so memory grows with the merged profile, not with the sources."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.mappings = _Mappings()
        self.strings = {c: Numbering() for c in ("name", "system_name", "filename")}
        self.functions, self.locations, self.samples = Numbering(), Numbering(), Numbering()
        self.function_rows: list[pa.Table] = []
        self.location_rows: list[pa.Table] = []
        self.sample_locs: list[pa.Array] = []
        self.sample_labels: list[pa.Array] = []
        self.values = np.zeros((k, 0), dtype=np.int64)  # one contiguous row per type
        self.label_ids: dict[tuple, int] = {}

    def add(self, src: Profile) -> None:
        src = _with_fake_mapping(src)
        part = _part(src, self.mappings)
        fids = self._functions(src, part.fn_rows)
        self._samples(src, part, self._locations(part, fids))

    def _functions(self, src: Profile, fn_rows: np.ndarray) -> np.ndarray:
        """Each line's merged function id (0: none); a function is keyed by (start
        line, name, system name, file name)."""
        f = src.functions
        strings = [num.number(_chunk(f.column(c)))[0] for c, num in self.strings.items()]
        keys = row_keys([to_np(f.column("start_line"), np.int64), *strings])
        used = fn_rows >= 0
        codes, new = self.functions.number(keys.take(from_numpy(fn_rows[used])))
        if len(new):
            self.function_rows.append(f.take(from_numpy(fn_rows[used][new])))
        fids = np.zeros(len(fn_rows), dtype=np.uint64)
        fids[used] = codes + 1
        return fids

    def _locations(self, p: _Part, fids: np.ndarray) -> np.ndarray:
        """Each location's merged id; a new location's row is its first use's."""
        codes, new = self.locations.number(_location_keys(p, fids, self.mappings.starts()))
        if len(new):
            lines = pa.StructArray.from_arrays(
                [from_numpy(fids), from_numpy(p.line), from_numpy(p.column)],
                fields=list(schema.LINE),
            )
            lines = pa.ListArray.from_arrays(from_numpy(p.loc_offsets, pa.int32()), lines)
            self.location_rows.append(
                pa.Table.from_arrays(
                    [
                        from_numpy((codes[new] + 1).astype(np.uint64)),
                        from_numpy(p.mapping[new].astype(np.uint64)),
                        from_numpy(p.address[new]),
                        from_numpy(p.folded[new].astype(bool)),
                        lines.take(from_numpy(new)),
                    ],
                    schema=schema.PROFILE_LOCATIONS,
                )
            )
        return (codes + 1).astype(np.uint64)

    def _samples(self, src: Profile, part: _Part, merged: np.ndarray) -> None:
        """Kept samples keyed by (merged location ids without unknown ones, labels);
        values added to the first sample with the same key."""
        offs, flat = list_parts(src.samples.column("location_ids"))
        counts = np.diff(offs)
        flat = to_np(flat, np.uint64)[np.repeat(_mask(part.kept, len(counts)), counts)]
        ids = lookup(part.loc_ids, merged, flat)
        counts = counts[part.kept]
        row = np.repeat(np.arange(len(counts)), counts)
        ids, row = ids[ids != 0], row[ids != 0]
        sample_offs = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(np.bincount(row, minlength=len(counts)), out=sample_offs[1:])
        labels = _chunk(src.samples.column("labels")).take(from_numpy(part.kept))
        # Key words: the sample's location ids, then its label set's number.
        words = np.empty(len(ids) + len(counts), dtype=np.int64)
        words[np.arange(len(ids)) + row] = ids.view(np.int64)
        words[sample_offs[1:] + np.arange(len(counts))] = _label_ids(labels, self.label_ids)
        codes, new = self.samples.number(
            ragged_keys(words, sample_offs + np.arange(len(counts) + 1))
        )
        if len(new):
            locs = pa.ListArray.from_arrays(from_numpy(sample_offs, pa.int32()), from_numpy(ids))
            self.sample_locs.append(locs.take(from_numpy(new)))
            self.sample_labels.append(labels.take(from_numpy(new)))
            grown = np.zeros((self.k, len(self.samples)), dtype=np.int64)
            grown[:, : self.values.shape[1]] = self.values
            self.values = grown
        vals = values_matrix(src)[part.kept]
        for j in range(self.k):
            np.add.at(self.values[j], codes, vals[:, j])

    def result(self, header: dict) -> Profile:
        n, k = self.values.shape[1], self.k
        samples = pa.Table.from_arrays(
            [
                _concat(self.sample_locs, schema.PROFILE_SAMPLES.field("location_ids").type),
                pa.ListArray.from_arrays(
                    from_numpy(np.arange(n + 1, dtype=np.int64) * k, pa.int32()),
                    from_numpy(np.ascontiguousarray(self.values.T).reshape(-1), pa.int64()),
                ),
                _concat(self.sample_labels, schema.PROFILE_SAMPLES.field("labels").type),
            ],
            schema=schema.PROFILE_SAMPLES,
        )
        functions = _concat_tables(self.function_rows, schema.PROFILE_FUNCTIONS)
        ids = from_numpy(np.arange(1, functions.num_rows + 1, dtype=np.uint64))
        return Profile(
            samples=samples,
            locations=_concat_tables(self.location_rows, schema.PROFILE_LOCATIONS),
            functions=functions.set_column(0, schema.PROFILE_FUNCTIONS.field("id"), ids),
            mappings=self.mappings.table(),
            **header,
        )


def _merge(srcs: list[Profile]) -> Profile:
    header = _header(srcs)
    merger = _Merger(len(header["sample_types"]))
    for src in srcs:
        merger.add(src)
    result = merger.result(header)
    if (merger.values == 0).all(axis=0).any():
        # Samples that cancelled out: pprof merges the result once more to drop them.
        return _merge([result])
    return result


def _chunk(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _concat(arrays: list[pa.Array], type_: pa.DataType) -> pa.Array:
    return pa.concat_arrays(arrays) if arrays else pa.array([], type_)


def _concat_tables(tables: list[pa.Table], schema_: pa.Schema) -> pa.Table:
    if not tables:
        return schema_.empty_table()
    return pa.concat_tables(tables).combine_chunks()


def _label_ids(labels: pa.Array, known: dict[tuple, int]) -> np.ndarray:
    """Each sample's label set numbered (0: none); only labelled samples go through
    Python. Empty labels count as none, as pprof drops them on reading."""
    lengths = np.diff(list_parts(labels)[0])
    out = np.zeros(len(lengths), dtype=np.int64)
    for i in np.flatnonzero(lengths).tolist():
        key = _label_key(labels[i].as_py())
        if key != ((), ()):
            out[i] = known.setdefault(key, len(known) + 1)
    return out
