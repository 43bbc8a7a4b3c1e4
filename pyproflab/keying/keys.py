"""One profile turned into store rows keyed by content (pure: no database).

Rules: only what the samples reference is kept (as pprof's merge compacts),
plus the first mapping, which pprof takes for the main binary. Every id is
derived from content (``ids``): functions and mappings by blake2b of their
fields, locations by their content with references already rewritten to
content ids, stacks by their locations' ids, label sets by their canonical
labels. So a batch is keyed before it touches the database, and the same
function seen in a thousand profiles is one row.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import InitVar, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.arrays import from_numpy
from pyproflab.keying import ids
from pyproflab.keying.digests import Entries
from pyproflab.keying.profile_types import profile_type_of
from pyproflab.model import Profile, time_of_nanos


@dataclass
class ProfileMeta:
    """What the profile itself does not say: who it came from and when.

    ``profile_type``, when set, overrides the type inferred from the content.
    """

    service: str | None = None
    version: str | None = None
    instance: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    source: str | None = None
    window_start: datetime | None = None
    window_end: datetime | None = None
    profile_type: str | None = None

    def updated(self, other: ProfileMeta | dict[str, Any]) -> ProfileMeta:
        """A copy with the set fields of ``other`` taking over (labels merged)."""
        items = other.__dict__ if isinstance(other, ProfileMeta) else other
        out = replace(self, labels=dict(self.labels))
        for f in fields(self):
            v = items.get(f.name)
            if v is None:
                continue
            if f.name == "labels":
                out.labels.update({str(k): str(x) for k, x in v.items()})
            else:
                setattr(out, f.name, v)
        return out


@dataclass
class KeyedProfile:
    """One profile turned into store rows, ids content-derived, profile_id unset."""

    content_hash: str
    row: dict[str, Any]
    samples: pa.Table  # stack_id, label_set_id, values
    functions: pa.Table
    mappings: pa.Table
    locations: pa.Table
    stacks: pa.Table
    label_sets: pa.Table
    #: content hashes of the earlier files whose rows this one relies on, its own
    #: having been left out as sent already (``sent.SentMemory``); empty: none left out
    relies_on: frozenset[str] = frozenset()
    #: bytes of the rows above (what a batch holds of the profile), measured where
    #: they are built: a worker's count travels with them, so batches are cut the
    #: same in a pool and in one process.
    nbytes: int = field(init=False)
    #: the content of the functions, locations and stacks rows as ``sent`` compares
    #: it (``ids.Column`` lists; None for functions with null strings), built while
    #: keying so trimming does not build it again. Local to the process that keyed:
    #: ``SentMemory.trim`` drops it, and it is never pickled.
    content: dict[str, list[ids.Column] | None] | None = field(
        default=None, repr=False, compare=False
    )
    #: the functions, locations and stacks rows' entries in this process's digest
    #: cache (``digests.Entries``; None for a table not cached), kept with
    #: ``content`` and dropped as it is: ``SentMemory.trim`` matches rows by them.
    entries: dict[str, Entries | None] | None = field(default=None, repr=False, compare=False)
    #: ``nbytes`` when the caller measured it (rows cut from a batch's: their share)
    measured: InitVar[int | None] = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "content": None, "entries": None}

    def __post_init__(self, measured: int | None) -> None:
        if measured is not None:
            self.nbytes = measured
            return
        tables = (
            self.samples,
            self.functions,
            self.mappings,
            self.locations,
            self.stacks,
            self.label_sets,
        )
        self.nbytes = sum(t.nbytes for t in tables)


def _ts(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def profile_digest(profile: Profile) -> str:
    """A content hash for a Profile given without its bytes: sha256 over its
    metadata and its tables in Arrow IPC form (files use their bytes instead)."""
    h = hashlib.sha256(b"pyproflab-profile-v1\0")
    head = {
        "sample_types": [[st.type, st.unit] for st in profile.sample_types],
        "period_type": [profile.period_type.type, profile.period_type.unit]
        if profile.period_type
        else None,
        "period": profile.period,
        "time_nanos": profile.time_nanos,
        "duration_nanos": profile.duration_nanos,
        "comments": profile.comments,
        "drop_frames": profile.drop_frames,
        "keep_frames": profile.keep_frames,
        "default_sample_type": profile.default_sample_type,
        "doc_url": profile.doc_url,
    }
    h.update(json.dumps(head, sort_keys=True).encode())
    for table in (profile.samples, profile.locations, profile.functions, profile.mappings):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table.combine_chunks())
        h.update(sink.getvalue().to_pybytes())
    return h.hexdigest()


def referenced(
    profile: Profile, kept_mappings: np.ndarray | None = None
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(locations, functions, mappings) of ``profile`` that its samples reference;
    the first mapping (or the rows ``kept_mappings``) is always kept."""
    loc_values, _ = ids.list_values(profile.samples.column("location_ids"))
    locs = profile.locations
    if locs.num_rows:
        used = _used(ids.u64(locs.column("id")), ids.u64(loc_values))
        if not used.all():
            locs = locs.filter(from_numpy(used))
    lines, _ = ids.list_values(locs.column("lines"))
    functions = profile.functions
    if functions.num_rows:
        used = _used(ids.u64(functions.column("id")), ids.u64(lines.field("function_id")))
        if not used.all():
            functions = functions.filter(from_numpy(used))
    mappings = profile.mappings
    if mappings.num_rows:
        used = _used(ids.u64(mappings.column("id")), ids.u64(locs.column("mapping_id")))
        used[0 if kept_mappings is None else kept_mappings] = True
        if not used.all():
            mappings = mappings.filter(from_numpy(used))
    return locs, functions, mappings


def _used(table_ids: np.ndarray, refs: np.ndarray) -> np.ndarray:
    """Which of ``table_ids`` occur in ``refs``. A profile's ids are small (1..n),
    so a mark table serves; otherwise a sort (np.isin, np.unique: far slower)."""
    if not len(refs) or not len(table_ids):
        return np.zeros(len(table_ids), dtype=bool)
    top = int(table_ids.max())
    if top <= 4 * len(table_ids) + 1024:
        mark = np.zeros(top + 1, dtype=bool)
        mark[_index(refs) if int(refs.max()) <= top else refs[refs <= top]] = True
        return mark[_index(table_ids)]
    refs = _distinct(refs)
    pos = np.minimum(np.searchsorted(refs, table_ids), len(refs) - 1)
    return refs[pos] == table_ids


def remap_local(local_ids: np.ndarray, from_ids: np.ndarray, to_ids: np.ndarray) -> np.ndarray:
    """``ids.remap`` (local ids to content ids, 0 stays 0) by a table when the
    profile's ids are small, as they are (1..n); a search otherwise."""
    top = int(from_ids.max()) if len(from_ids) else 0
    if len(from_ids) and top <= 4 * len(from_ids) + 1024:
        table = np.zeros(top + 2, dtype=ids.U64)
        table[_index(from_ids)] = to_ids
        table[0] = 0
        # One pass, no max first: "clip" sends an id past the table (a uint64 from
        # 2**63 up reads as negative, and goes to 0) to a slot that holds 0.
        return np.take(table, _index(local_ids), mode="clip")
    return ids.remap(local_ids, from_ids, to_ids)


def _index(small: np.ndarray) -> np.ndarray:
    """uint64 values known to be below 2**63 as int64 (no copy): numpy indexes with
    int64 directly, but checks and converts every uint64 index first (7 ms of
    380,000 stack entries)."""
    return np.asarray(small, dtype=ids.U64).view(np.int64)


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort: numpy 2's hashing np.unique is slower here)."""
    s = np.sort(values)
    return s[np.concatenate([[True], s[1:] != s[:-1]])] if len(s) else s


def _first_rows(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, the row of each one's first occurrence)."""
    order = np.argsort(values, kind="stable")
    s = values[order]
    start = np.concatenate([[True], s[1:] != s[:-1]]) if len(s) else np.zeros(0, bool)
    return s[start], order[start]


def list_array(offsets: np.ndarray, values: pa.Array) -> pa.ListArray:
    return pa.ListArray.from_arrays(from_numpy(offsets.astype(np.int32), pa.int32()), values)


@dataclass
class KeyedDefinitions:
    """A profile's functions, mappings and locations that its samples keep, as store
    rows keyed by content, with what ``key_profile`` needs of them: the locations'
    own and content ids, and the rows' content."""

    functions: pa.Table
    mappings: pa.Table
    locations: pa.Table
    loc_local: np.ndarray
    loc_ids: np.ndarray
    content: dict[str, list[ids.Column] | None]
    entries: dict[str, Entries | None]


def key_definitions(locs: pa.Table, functions: pa.Table, mappings: pa.Table) -> KeyedDefinitions:
    """Functions and mappings (blake2b of their content), then locations (their
    references rewritten to content ids, then hashed)."""
    fn_columns = ids.function_columns(functions)
    fn_ids, fn_entries = ids.function_keys(functions, fn_columns)
    fn_local = ids.u64(functions.column("id"))
    map_local, map_ids = ids.u64(mappings.column("id")), ids.mapping_ids(mappings)
    loc_local, loc_ids, locations, (loc_words, loc_entries) = _key_locations(
        locs, (fn_local, fn_ids), (map_local, map_ids)
    )
    return KeyedDefinitions(
        pa.table(
            [from_numpy(fn_ids, pa.uint64())] + functions.columns[1:], schema=schema.STORE_FUNCTIONS
        ),
        pa.table(
            [from_numpy(map_ids, pa.uint64())] + mappings.columns[1:], schema=schema.STORE_MAPPINGS
        ),
        locations,
        loc_local,
        loc_ids,
        {"functions": fn_columns, "locations": [loc_words]},
        {"functions": fn_entries, "locations": loc_entries},
    )


def key_profile(
    profile: Profile,
    meta: ProfileMeta,
    content_hash: str,
    *,
    type_hint: str | None = None,
    now: datetime | None = None,
    with_content: bool = True,
) -> KeyedProfile:
    """Turn one profile into store rows keyed by content (pure: no database).

    Only what the samples reference is kept (as pprof's merge compacts), plus
    the first mapping, which pprof takes for the main binary. The stages:
    functions and mappings (blake2b of their content), locations (their
    references rewritten to content ids, then hashed), stacks, label sets,
    and the profile's own row. ``with_content``: keep the rows' content
    (``KeyedProfile.content``) for ``SentMemory.trim``.
    """
    d = key_definitions(*referenced(profile))
    samples = profile.samples
    stack_of, stacks, (stack_locs, stack_entries) = _key_stacks(samples, d.loc_local, d.loc_ids)
    label_of, label_sets = _key_label_sets(samples)
    out_samples = pa.table(
        {
            "stack_id": from_numpy(stack_of, pa.uint64()),
            "label_set_id": from_numpy(label_of, pa.uint64()),
            "values": samples.column("values"),
        },
    )
    keyed = KeyedProfile(
        content_hash,
        profile_row(profile, meta, content_hash, type_hint, now),
        out_samples,
        d.functions,
        d.mappings,
        d.locations,
        stacks,
        label_sets,
    )
    if with_content:
        keyed.content = {**d.content, "stacks": [stack_locs]}
        keyed.entries = {**d.entries, "stacks": stack_entries}
    return keyed


IdMap = tuple[np.ndarray, np.ndarray]  # (a profile's own ids, their content ids)
#: the content of a table's rows as ``sent`` compares it, and their cache entries
Content = tuple[ids.Column, Entries | None]


def _key_locations(
    locs: pa.Table, fns: IdMap, maps: IdMap
) -> tuple[np.ndarray, np.ndarray, pa.Table, Content]:
    """(local ids, content ids, STORE_LOCATIONS rows, their ``ids.location_words``
    and cache entries) of ``locs``: their mapping and function references
    rewritten to content ids first, so equal content hashes equal."""
    loc_local = ids.u64(locs.column("id"))
    loc_mapping = remap_local(ids.u64(locs.column("mapping_id")), *maps)
    lines_values, line_offsets = ids.list_values(locs.column("lines"))
    line_fn = remap_local(ids.u64(lines_values.field("function_id")), *fns)
    words = ids.location_words(locs, loc_mapping, line_fn)
    loc_ids, entries = ids.location_keys(*words)
    lines = pa.StructArray.from_arrays(
        [
            from_numpy(line_fn, pa.uint64()),
            lines_values.field("line"),
            lines_values.field("column"),
        ],
        fields=list(schema.LINE),
    )
    locations = pa.table(
        [
            from_numpy(loc_ids, pa.uint64()),
            from_numpy(loc_mapping, pa.uint64()),
            locs.column("address"),
            locs.column("is_folded"),
            list_array(line_offsets, lines),
        ],
        schema=schema.STORE_LOCATIONS,
    )
    return loc_local, loc_ids, locations, (words, entries)


def _key_stacks(
    samples: pa.Table, loc_local: np.ndarray, loc_ids: np.ndarray
) -> tuple[np.ndarray, pa.Table, Content]:
    """(each sample's stack id, STORE_STACKS rows of the distinct stacks in the order
    they first occur, their location ids as an ``ids.Column`` and their cache
    entries): blake2b of each sample's location content ids."""
    loc_values, loc_offsets = ids.list_values(samples.column("location_ids"))
    flat = remap_local(ids.u64(loc_values), loc_local, loc_ids)
    stack_of, entries = (
        ids.stack_keys(flat, loc_offsets) if samples.num_rows else (np.zeros(0, ids.U64), None)
    )
    first = _first_occurrences(stack_of, entries)
    if first is None:  # every sample has a stack of its own, as a Go profile's do
        uniq_stacks, uniq_offsets, uniq_flat = stack_of, loc_offsets, flat
        row_entries = entries
    else:
        uniq_stacks = stack_of[first]
        starts = loc_offsets[:-1][first]
        lengths = loc_offsets[1:][first] - starts
        uniq_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        uniq_flat = flat[ids.gather(starts, lengths)]
        row_entries = entries.take(first) if entries is not None else None
    stacks = pa.table(
        [
            from_numpy(uniq_stacks, pa.uint64()),
            list_array(uniq_offsets, from_numpy(uniq_flat, pa.uint64())),
        ],
        schema=schema.STORE_STACKS,
    )
    return stack_of, stacks, ((uniq_flat, uniq_offsets), row_entries)


def _first_occurrences(stack_of: np.ndarray, entries: Entries | None) -> np.ndarray | None:
    """The row where each distinct stack first occurs, in row order; None when every
    row's stack is distinct. The cache's entries are small numbers, equal exactly
    when the content is, so a count tells that without a sort (the sort and the
    gather after it were 6 ms of a large profile's keying)."""
    if entries is not None and len(entries.codes):
        if int(np.bincount(entries.codes).max()) == 1:
            return None
    elif len(stack_of) <= 1:
        return None
    _, first = _first_rows(stack_of)
    return np.sort(first)


def _key_label_sets(samples: pa.Table) -> tuple[np.ndarray, pa.Table]:
    """(each sample's label set id, 0 for none; STORE_LABEL_SETS rows): distinct
    label lists found by a vectorized key, then each distinct one made canonical
    and hashed once."""
    raw = ids.raw_label_keys(samples.column("labels")) if samples.num_rows else np.zeros(0, ids.U64)
    label_of = np.zeros(samples.num_rows, dtype=ids.U64)
    set_ids: list[int] = []
    set_labels: list[list[dict]] = []
    if raw.any():
        uniq_raw, first_raw = _first_rows(raw)
        labels_col = samples.column("labels")
        set_of_raw = np.zeros(len(uniq_raw), dtype=ids.U64)
        seen: set[int] = set()
        rows = labels_col.take(from_numpy(first_raw.astype(np.int64))).to_pylist()
        for k, (rk, row) in enumerate(zip(uniq_raw, rows, strict=True)):
            if rk == 0:
                continue
            canon = ids.canonical_labels(row)
            sid = ids.label_set_id(canon)
            set_of_raw[k] = sid
            if sid and sid not in seen:
                seen.add(sid)
                set_ids.append(sid)
                set_labels.append(
                    [dict(zip(("key", "str", "num", "num_unit"), c, strict=True)) for c in canon]
                )
        label_of = set_of_raw[np.searchsorted(uniq_raw, raw)]
    if not set_ids:
        # Built from nulls: pa.array of Python lists, and Schema.empty_table, make
        # pyarrow import pandas, half a second of a worker's first file.
        empty = [pa.nulls(0, f.type) for f in schema.STORE_LABEL_SETS]
        return label_of, pa.table(empty, schema=schema.STORE_LABEL_SETS)
    label_sets = pa.table(
        [pa.array(set_ids, pa.uint64()), pa.array(set_labels, pa.list_(schema.LABEL))],
        schema=schema.STORE_LABEL_SETS,
    )
    return label_of, label_sets


def profile_row(
    profile: Profile,
    meta: ProfileMeta,
    content_hash: str,
    type_hint: str | None,
    now: datetime | None,
    main_mapping: np.ndarray | None = None,
) -> dict[str, Any]:
    """The profile's STORE_PROFILES row (profile_id unset); ``main_mapping``: the
    content id of its first mapping (none: no mappings), when the caller has it."""
    if main_mapping is None:
        main_mapping = ids.mapping_ids(profile.mappings.slice(0, 1))
    pt = profile.period_type
    return {
        "content_hash": content_hash,
        "service": meta.service,
        "version": meta.version,
        "instance": meta.instance,
        "profile_type": profile_type_of(profile, meta.profile_type, type_hint or meta.source),
        "labels": list(meta.labels.items()) if meta.labels else None,
        "time": time_of_nanos(profile.time_nanos) if profile.time_nanos else None,
        "time_nanos": profile.time_nanos,
        "duration_nanos": profile.duration_nanos,
        "period": profile.period,
        "period_type": pt.type if pt else None,
        "period_unit": pt.unit if pt else None,
        "sample_types": [{"type": st.type, "unit": st.unit} for st in profile.sample_types],
        "default_sample_type": profile.default_sample_type,
        "comments": list(profile.comments),
        "drop_frames": profile.drop_frames,
        "keep_frames": profile.keep_frames,
        "doc_url": profile.doc_url,
        "window_start": _ts(meta.window_start),
        "window_end": _ts(meta.window_end),
        "source": meta.source,
        "ingested_at": now or datetime.now(UTC),
        "num_samples": profile.samples.num_rows,
        "main_mapping_id": int(main_mapping[0]) if len(main_mapping) else 0,
    }
