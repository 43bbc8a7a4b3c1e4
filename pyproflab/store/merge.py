"""Profiles out of the store: one stored profile, or a selection merged.

The merge follows pprof (profile/merge.go ``Merge`` after
``CompatibilizeSampleTypes``, as ``go tool pprof`` does with several inputs):

- profiles are taken in the order the data fixes, by time taken, then
  content hash (pprof takes its arguments' order; a store's profile ids are
  the order they were ingested in, and the same profiles ingested in another
  order gave other bytes);
- sample types: those present (by type name) in every selected profile, in
  the order of the first; a common type whose unit
  differs, or a differing period type, is an error;
- samples with the same stack and label set are one sample, values summed
  (in SQL); samples whose values are all zero are dropped;
- period: the largest; duration: the sum; time_nanos: pprof's rule (the
  smallest, where a zero is replaced by the next non-zero); comments: each
  distinct one once, in order; default_sample_type and doc_url: the first
  non-empty (after pprof's compatibilize step); drop/keep_frames: the first's.

Differences from pprof, by design: mappings are the stored ones (pprof also
unifies mappings of one binary loaded at different addresses, ASLR); the
merged profile's ids are renumbered 1..n in order of first appearance, with
the first profile's main mapping first.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.arrays import empty_lists, from_numpy, to_numpy
from pyproflab.errors import StoreError
from pyproflab.keying import ids
from pyproflab.model import Profile, ValueType

if TYPE_CHECKING:
    from pyproflab.store.select import Selection


class Store(Protocol):
    """What reading profiles back needs of a store (``connection.Store`` has it):
    a name for errors, SQL with bound parameters, and Arrow tables made visible to
    SQL for a block. A protocol, so that the connection, which offers
    ``merged_profile`` and ``profile`` as methods, is the only one to import the other."""

    name: str

    def sql(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> pa.Table: ...

    def registered(self, **tables: pa.Table) -> AbstractContextManager[None]: ...


HEADER_COLUMNS = (
    "profile_id, sample_types, period_type, period_unit, period, time_nanos, duration_nanos, "
    "comments, drop_frames, keep_frames, default_sample_type, doc_url, main_mapping_id"
)


def _vt(t: str | None, u: str | None) -> ValueType | None:
    return None if t is None and u is None else ValueType(t or "", u or "")


# --- headers (pprof's combineHeaders after compatibilizeSampleTypes) ---------------


def _period(kind: str | None, unit: str | None) -> str:
    return f"{kind}/{unit}" if kind or unit else "none"


def merge_headers(
    rows: list[dict[str, Any]], keep: Sequence[str] | None = None
) -> tuple[dict[str, Any], list[list[int]]]:
    """The merged header and, per profile, the index of each kept sample type."""
    first = rows[0]
    ptype = (first["period_type"], first["period_unit"])
    for r in rows[1:]:
        if (r["period_type"], r["period_unit"]) != ptype:
            raise StoreError(
                "cannot merge profiles with different period types: "
                f"{_period(*ptype)} (profile {first['profile_id']}) and "
                f"{_period(r['period_type'], r['period_unit'])} (profile {r['profile_id']}); "
                "narrow the selection to profiles of one period type (by service, "
                "instance or profile id: profiles of one profile type can differ in it, "
                "such as heap profiles of Go and of another runtime)"
            )
    counts: dict[str, int] = {}
    for r in rows:
        for t in {st["type"] for st in r["sample_types"]}:
            counts[t] = counts.get(t, 0) + 1
    common = [st["type"] for st in first["sample_types"] if counts[st["type"]] == len(rows)]
    if keep is not None:
        missing = [t for t in keep if t not in common]
        if missing:
            raise StoreError(
                f"sample type {missing[0]!r} is not in every selected profile "
                f"(common: {', '.join(common) or 'none'})"
            )
        common = list(keep)
    if not common:
        raise StoreError("the selected profiles have no sample type in common")
    units = {st["type"]: st["unit"] for st in first["sample_types"]}
    index_lists: list[list[int]] = []
    time_nanos = duration = period = 0
    comments: list[str] = []
    seen: set[str] = set()
    default = doc_url = ""
    for r in rows:
        types = [st["type"] for st in r["sample_types"]]
        idx = [types.index(t) for t in common]
        for t, i in zip(common, idx, strict=True):
            if r["sample_types"][i]["unit"] != units[t]:
                raise StoreError(
                    f"cannot merge: sample type {t} is in {units[t]} in profile "
                    f"{first['profile_id']} but in {r['sample_types'][i]['unit']} in profile "
                    f"{r['profile_id']}"
                )
        index_lists.append(idx)
        dst = r["default_sample_type"]
        if idx != list(range(len(types))):  # pprof rewrites only a profile it changes
            dst = dst if dst in common else common[0]
        # pprof's rule, quirk included: a later zero time replaces a non-zero one.
        if time_nanos == 0 or r["time_nanos"] < time_nanos:
            time_nanos = r["time_nanos"]
        duration += r["duration_nanos"]
        if period == 0 or period < r["period"]:
            period = r["period"]
        for c in r["comments"]:
            if c not in seen:
                seen.add(c)
                comments.append(c)
        default = default or dst
        doc_url = doc_url or r["doc_url"]
    header = dict(
        sample_types=[ValueType(t, units[t]) for t in common],
        period_type=_vt(*ptype),
        period=period,
        time_nanos=time_nanos,
        duration_nanos=duration,
        comments=comments,
        drop_frames=first["drop_frames"],
        keep_frames=first["keep_frames"],
        default_sample_type=default,
        doc_url=doc_url,
    )
    return header, index_lists


# --- from store rows to a Profile --------------------------------------------------


def _first_appearance(values: np.ndarray) -> np.ndarray:
    """The distinct values in order of first appearance."""
    if len(values) == 0:
        return values
    uniq, first = np.unique(values, return_index=True)
    return uniq[np.argsort(first, kind="stable")]


def _renumber(content_ids: np.ndarray, order: np.ndarray) -> np.ndarray:
    """New ids 1..n for ``content_ids`` given the distinct ids in their new order; 0 stays 0."""
    return ids.remap(content_ids, order, np.arange(1, len(order) + 1, dtype=ids.U64))


def store_fetch(store: Store, table: str, id_col: str, wanted: np.ndarray) -> pa.Table:
    """The rows of a dedup table whose id is in ``wanted`` (one per id)."""
    if len(wanted) == 0:
        return store.sql(f"SELECT * FROM {table} LIMIT 0")
    keys = pa.Table.from_arrays([from_numpy(wanted, pa.uint64())], names=[id_col])
    with store.registered(_pyproflab_ids=keys):
        t = store.sql(f"SELECT t.* FROM {table} t SEMI JOIN _pyproflab_ids k USING ({id_col})")
    # Duplicates cannot be inserted by ingest, but stay safe for hand-edited stores.
    if t.num_rows != len(wanted):
        _, first = np.unique(ids.u64(t.column(id_col)), return_index=True)
        t = t.take(from_numpy(first))
    return t


# Rows of a dedup table by id: (table, id column, wanted ids) -> the rows, one per
# id found, in any order; an empty table of the table's schema for none. The store
# reads its own tables (``store_fetch``); other engines give their own (engines/spark_query).
Fetch = Callable[[str, str, np.ndarray], pa.Table]


def assemble(
    store: Store,
    stack_id: np.ndarray,
    label_set_id: np.ndarray,
    values: pa.Array,
    header: dict[str, Any],
    main_mapping_id: int,
) -> Profile:
    """A Profile from samples keyed by store ids (``assemble_rows`` over the store)."""
    fetch = functools.partial(store_fetch, store)
    return assemble_rows(fetch, store.name, stack_id, label_set_id, values, header, main_mapping_id)


def assemble_rows(
    fetch: Fetch,
    name: str,
    stack_id: np.ndarray,
    label_set_id: np.ndarray,
    values: pa.Array,
    header: dict[str, Any],
    main_mapping_id: int,
) -> Profile:
    """A Profile from samples keyed by store ids: fetch only what they reference,
    renumber ids 1..n (first appearance), and build the PROFILE_* tables. ``name``
    names the rows' source in errors."""
    s_flat, s_offsets = _sample_stacks(fetch, name, stack_id)
    # Locations, functions and mappings, each in first appearance over the samples.
    loc_order = _first_appearance(s_flat)
    locs = _fetch_in_order(fetch, "locations", "location_id", loc_order)
    lines_flat, line_offsets = ids.list_values(locs.column("lines"))
    line_fn = ids.u64(lines_flat.field("function_id"))
    loc_mapping = ids.u64(locs.column("mapping_id"))
    fn_order = _first_appearance(line_fn[line_fn != 0])
    fns = _fetch_in_order(fetch, "functions", "function_id", fn_order)
    map_seq = np.concatenate([np.array([main_mapping_id], dtype=ids.U64), loc_mapping])
    map_order = _first_appearance(map_seq[map_seq != 0])
    maps = fetch("mappings", "mapping_id", map_order)
    map_cid = ids.u64(maps.column("mapping_id"))
    if len(map_cid) < len(map_order):  # an unknown main mapping only: drop it
        map_order = map_order[np.isin(map_order, map_cid)]
    maps = maps.take(from_numpy(np.argsort(map_cid)[np.searchsorted(np.sort(map_cid), map_order)]))

    samples = pa.table(
        [
            pa.ListArray.from_arrays(
                from_numpy(s_offsets, pa.int32()),
                from_numpy(_renumber(s_flat, loc_order), pa.uint64()),
            ),
            values,
            _sample_labels(fetch, label_set_id),
        ],
        schema=schema.PROFILE_SAMPLES,
    )
    new_lines = pa.StructArray.from_arrays(
        [
            from_numpy(_renumber(line_fn, fn_order), pa.uint64()),
            lines_flat.field("line"),
            lines_flat.field("column"),
        ],
        fields=list(schema.LINE),
    )
    locations = pa.table(
        [
            from_numpy(np.arange(1, len(loc_order) + 1, dtype=ids.U64)),
            from_numpy(_renumber(loc_mapping, map_order), pa.uint64()),
            locs.column("address"),
            locs.column("is_folded"),
            pa.ListArray.from_arrays(from_numpy(line_offsets, pa.int32()), new_lines),
        ],
        schema=schema.PROFILE_LOCATIONS,
    )
    functions = pa.table(
        [from_numpy(np.arange(1, len(fn_order) + 1, dtype=ids.U64))] + fns.columns[1:],
        schema=schema.PROFILE_FUNCTIONS,
    )
    mappings = pa.table(
        [from_numpy(np.arange(1, len(map_order) + 1, dtype=ids.U64))] + maps.columns[1:],
        schema=schema.PROFILE_MAPPINGS,
    )
    return Profile(
        samples=samples, locations=locations, functions=functions, mappings=mappings, **header
    )


def _sample_stacks(fetch: Fetch, name: str, stack_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(location content ids of every sample's stack, flat; their list offsets), in
    sample order. ``StoreError`` when a stack is missing (an inconsistent store)."""
    uniq_stacks = np.unique(stack_id)
    stacks = fetch("stacks", "stack_id", uniq_stacks)
    st_ids = ids.u64(stacks.column("stack_id"))
    st_flat, st_offsets = ids.list_values(stacks.column("location_ids"))
    st_flat = ids.u64(st_flat)
    if len(st_ids) != len(uniq_stacks):
        raise StoreError(
            f"{name}: store is inconsistent: samples reference "
            f"{len(uniq_stacks) - len(st_ids)} missing stacks"
        )
    # Order stacks as the samples first use them, so location ids follow sample order.
    st_sort = np.argsort(st_ids)
    stack_pos = (
        st_sort[np.searchsorted(st_ids[st_sort], stack_id)]
        if len(st_ids)
        else np.zeros(0, np.int64)
    )
    stack_lists = pa.ListArray.from_arrays(
        from_numpy(st_offsets, pa.int32()), from_numpy(st_flat, pa.uint64())
    )
    sample_stacks = (
        stack_lists.take(from_numpy(stack_pos)) if len(stack_id) else empty_lists(0, pa.uint64())
    )
    s_flat, s_offsets = ids.list_values(sample_stacks)
    return ids.u64(s_flat), s_offsets


def _fetch_in_order(fetch: Fetch, table: str, id_col: str, order: np.ndarray) -> pa.Table:
    """The rows of ``table`` whose ids are ``order`` (distinct), in that order."""
    rows = fetch(table, id_col, np.sort(order))
    cid = ids.u64(rows.column(id_col))
    return rows.take(from_numpy(np.argsort(cid)[np.searchsorted(np.sort(cid), order)]))


def _sample_labels(fetch: Fetch, label_set_id: np.ndarray) -> pa.Array:
    """Each sample's labels (PROFILE_LABEL lists; empty for label set 0)."""
    wanted_sets = np.unique(label_set_id[label_set_id != 0])
    sets = fetch("label_sets", "label_set_id", wanted_sets)
    set_cid = ids.u64(sets.column("label_set_id"))
    # Interned before the take: a label set shared by many samples is not copied.
    set_lists = pa.concat_arrays(
        [
            empty_lists(1, schema.PROFILE_LABEL),
            sets.column("labels").combine_chunks().cast(pa.list_(schema.PROFILE_LABEL)),
        ]
    )
    all_set_ids = np.concatenate([np.zeros(1, ids.U64), set_cid])
    set_sort = np.argsort(all_set_ids)
    set_pos = set_sort[np.searchsorted(all_set_ids[set_sort], label_set_id)]
    if not len(label_set_id):
        return empty_lists(0, schema.PROFILE_LABEL)
    return set_lists.take(from_numpy(set_pos))


def _header_rows(store: Store, selection: Selection) -> list[dict[str, Any]]:
    from pyproflab.store.select import TAKEN_AT

    order = f"{TAKEN_AT}, p.time_nanos, p.content_hash"
    return store.sql(*selection.query(HEADER_COLUMNS, order_by=order)).to_pylist()


def merged_profile(
    store: Store, selection: Selection | None = None, *, sample_types: Sequence[str] | None = None
) -> Profile:
    """One profile merging the selected profiles (see the module docstring)."""
    from pyproflab.store.select import Selection, no_profiles

    selection = selection or Selection()
    rows = _header_rows(store, selection)
    if not rows:
        raise no_profiles(store, selection)
    header, index_lists = merge_headers(rows, sample_types)
    k = len(header["sample_types"])

    # Per profile, the 1-based position of each kept sample type in its values.
    sel = pa.table(
        {
            "profile_id": from_numpy([r["profile_id"] for r in rows], pa.int64()),
            "o": from_numpy(np.arange(len(rows)), pa.int64()),
            **{
                f"i{j}": from_numpy([idx[j] + 1 for idx in index_lists], pa.int32())
                for j in range(k)
            },
        }
    )
    sums = ", ".join(f'sum(s."values"[sel.i{j}])::BIGINT AS v{j}' for j in range(k))
    nonzero = " OR ".join(f"v{j} <> 0" for j in range(k))
    lo, hi = min(r["profile_id"] for r in rows), max(r["profile_id"] for r in rows)
    # The BETWEEN lets DuckDB skip row groups by their min/max (samples are
    # stored in profile_id order); the join does the exact selection.
    query = (
        f"SELECT s.stack_id, s.label_set_id, {sums}, min((sel.o, s.rowid)) AS first_row "
        "FROM samples s JOIN _pyproflab_sel sel ON s.profile_id = sel.profile_id "
        "WHERE s.profile_id BETWEEN ? AND ? "
        f"GROUP BY s.stack_id, s.label_set_id HAVING {nonzero} ORDER BY first_row"
    )
    with store.registered(_pyproflab_sel=sel):
        merged = store.sql(query, [lo, hi])
    n = merged.num_rows
    cols = [to_numpy(merged.column(f"v{j}")) for j in range(k)]
    flat_values = np.column_stack(cols).ravel() if n else np.zeros(0, np.int64)
    values = pa.ListArray.from_arrays(
        from_numpy(np.arange(0, n * k + 1, k, dtype=np.int32)), from_numpy(flat_values, pa.int64())
    )
    return assemble(
        store,
        ids.u64(merged.column("stack_id")),
        ids.u64(merged.column("label_set_id")),
        values,
        header,
        rows[0]["main_mapping_id"],
    )


def stored_profile(store: Store, profile_id: int) -> Profile:
    """One stored profile, samples in file order, metadata as stored."""
    from pyproflab.store.select import Selection

    rows = _header_rows(store, Selection(profile_ids=[int(profile_id)]))
    if not rows:
        raise StoreError(f"no profile with id {profile_id}")
    r = rows[0]
    header = dict(
        sample_types=[ValueType(st["type"], st["unit"]) for st in r["sample_types"]],
        period_type=_vt(r["period_type"], r["period_unit"]),
        period=r["period"],
        time_nanos=r["time_nanos"],
        duration_nanos=r["duration_nanos"],
        comments=list(r["comments"]),
        drop_frames=r["drop_frames"],
        keep_frames=r["keep_frames"],
        default_sample_type=r["default_sample_type"],
        doc_url=r["doc_url"],
    )
    s = store.sql(
        'SELECT stack_id, label_set_id, "values" FROM samples WHERE profile_id = ? ORDER BY rowid',
        [int(profile_id)],
    )
    values = s.column("values").combine_chunks().cast(pa.list_(pa.int64()))
    return assemble(
        store,
        ids.u64(s.column("stack_id")),
        ids.u64(s.column("label_set_id")),
        values,
        header,
        r["main_mapping_id"],
    )


__all__ = ["assemble", "assemble_rows", "merge_headers", "merged_profile", "stored_profile"]
