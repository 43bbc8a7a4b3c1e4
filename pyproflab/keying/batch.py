"""Many profiles keyed at once: the rows ``key_profile`` gives each, with each
stage run once over the batch (issue 32: a pushed profile holds ~16 samples
and ~40 locations, so keying one was almost all fixed cost per call, ~4 ms;
the serve ingester keys ~300 a second at 1,000 instances).

Rules:

- ``key_profiles(profiles, metas, hashes)`` is ``[key_profile(p, m, h,
  with_content=False) ...]``: the same rows in the same order, each profile's
  tables its own (slices of the batch's); its ``nbytes`` is its rows' share of
  the batch's bytes.
- How: the profiles' tables are put end to end, each profile's own ids moved
  past the ids of the profiles before it (0, "none", stays 0), so no two
  profiles share an id; what the samples reference is kept (each profile's
  first mapping too), keyed once (ids depend only on content), and cut back
  per profile. A profile's stacks are its distinct ones in the order they
  first occur in it, and its label sets those of its distinct label lists in
  the order of their in-profile keys (``ids.raw_label_keys``, computed from each
  profile's own dictionary codes), as ``key_profile`` keeps them.
- Profiles whose tables cannot be put end to end (other schemas, ids too large
  to move) are keyed one by one with ``key_profile``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.arrays import from_numpy, list_parts, to_numpy
from pyproflab.keying import ids
from pyproflab.keying.keys import (
    KeyedProfile,
    ProfileMeta,
    key_definitions,
    key_profile,
    list_array,
    profile_row,
    referenced,
    remap_local,
)
from pyproflab.model import Profile

U64 = ids.U64
#: Moved ids stay below this (an id past it is a profile not written by Go:
#: keyed on its own).
_ID_ROOM = 1 << 62


def key_profiles(
    profiles: Sequence[Profile],
    metas: Sequence[ProfileMeta],
    hashes: Sequence[str],
    *,
    now: datetime,
) -> list[KeyedProfile]:
    """Each profile's ``key_profile`` rows, keyed as one batch (module rules).
    Raises what ``key_profile`` raises (``StoreError`` for a bad profile type)."""
    joined = _join(profiles) if len(profiles) > 1 else None
    if joined is None:
        return [
            key_profile(p, m, h, now=now, with_content=False)
            for p, m, h in zip(profiles, metas, hashes, strict=True)
        ]
    whole, bases, first_mappings = joined
    locs, functions, mappings = referenced(whole, first_mappings)
    d = key_definitions(locs, functions, mappings)
    n = len(profiles)
    cut = {
        "functions": _cuts(_owners(functions, bases["functions"]), n),
        "mappings": _cuts(_owners(mappings, bases["mappings"]), n),
        "locations": _cuts(_owners(locs, bases["locations"]), n),
    }
    sample_cuts = np.concatenate([[0], np.cumsum([p.samples.num_rows for p in profiles])])
    stack_of, stacks, stack_cuts = _key_stacks(whole.samples, sample_cuts, d.loc_local, d.loc_ids)
    label_of, label_sets, label_cuts = _key_label_sets(profiles, whole.samples, sample_cuts)
    samples = pa.table(
        [
            from_numpy(stack_of, pa.uint64()),
            from_numpy(label_of, pa.uint64()),
            whole.samples.column("values"),
        ],
        names=["stack_id", "label_set_id", "values"],
    )
    mapping_ids = ids.u64(d.mappings.column(0))
    tables = [
        (samples, sample_cuts), (d.functions, cut["functions"]), (d.mappings, cut["mappings"]),
        (d.locations, cut["locations"]), (stacks, stack_cuts), (label_sets, label_cuts),
    ]  # fmt: skip
    shares = sum((_shares(t, c) for t, c in tables[1:]), _shares(*tables[0]))
    out = []
    for k, (p, meta, digest) in enumerate(zip(profiles, metas, hashes, strict=True)):
        m0, m1 = cut["mappings"][k : k + 2]
        row = profile_row(p, meta, digest, None, now, mapping_ids[m0 : min(m1, m0 + 1)])
        out.append(
            KeyedProfile(
                digest,
                row,
                _slice(samples, sample_cuts, k),
                _slice(d.functions, cut["functions"], k),
                _slice(d.mappings, cut["mappings"], k),
                _slice(d.locations, cut["locations"], k),
                _slice(stacks, stack_cuts, k),
                _slice(label_sets, label_cuts, k),
                measured=int(shares[k]),
            )
        )
    return out


def _shares(table: pa.Table, cuts: np.ndarray) -> np.ndarray:
    """Each profile's share of ``table``'s bytes, by its rows (``KeyedProfile.nbytes``
    of a slice, without measuring each slice: 7 of them were a sixth of keying)."""
    rows = np.diff(cuts)
    return rows * table.nbytes // max(table.num_rows, 1)


def _slice(table: pa.Table, cuts: np.ndarray, k: int) -> pa.Table:
    start = int(cuts[k])
    return table.slice(start, int(cuts[k + 1]) - start)


def _cuts(owner: np.ndarray, n: int) -> np.ndarray:
    """Row offsets (n + 1) of each profile's rows, the rows in profile order."""
    return np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n))]).astype(np.int64)


def _owners(table: pa.Table, bases: np.ndarray) -> np.ndarray:
    """The profile of each row, from its moved id (profile k's ids are its own
    plus ``bases[k]``, and its own are at least 1)."""
    moved = ids.u64(table.column("id"))
    return np.searchsorted(bases, moved, side="left") - 1


def _moved(local: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Ids moved by their profile's base; 0 ("none") stays 0."""
    return np.where(local == 0, U64(0), local + base)


Joined = tuple[Profile, dict[str, np.ndarray], np.ndarray]


def _join(profiles: Sequence[Profile]) -> Joined | None:
    """One Profile of the tables of ``profiles`` end to end, their ids moved past
    those of the profiles before (module rules); each table's bases, and the row
    of each profile's first mapping. None when they cannot be joined."""
    parts = {
        "functions": [p.functions for p in profiles],
        "mappings": [p.mappings for p in profiles],
        "locations": [p.locations for p in profiles],
    }
    bases: dict[str, np.ndarray] = {}
    counts: dict[str, np.ndarray] = {}
    for name, tables in parts.items():
        tops = [int(ids.u64(t.column("id")).max()) if t.num_rows else 0 for t in tables]
        if sum(tops) + len(tops) >= _ID_ROOM:
            return None
        bases[name] = np.concatenate([[0], np.cumsum([t + 1 for t in tops])[:-1]]).astype(U64)
        counts[name] = np.array([t.num_rows for t in tables], dtype=np.int64)
    try:
        joined = {name: pa.concat_tables(ts).combine_chunks() for name, ts in parts.items()}
        samples = pa.concat_tables([p.samples for p in profiles]).combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    per_row = {name: np.repeat(bases[name], counts[name]) for name in parts}
    functions = _with_ids(joined["functions"], per_row["functions"])
    mappings = _with_ids(joined["mappings"], per_row["mappings"])
    locations = _moved_locations(joined["locations"], per_row, bases, counts)
    sample_counts = np.array([p.samples.num_rows for p in profiles], dtype=np.int64)
    samples = _moved_samples(samples, np.repeat(bases["locations"], sample_counts))
    first = np.concatenate([[0], np.cumsum(counts["mappings"])[:-1]])[counts["mappings"] > 0]
    whole = Profile(
        sample_types=[], samples=samples, locations=locations, functions=functions,
        mappings=mappings,
    )  # fmt: skip
    return whole, bases, first


def _with_ids(table: pa.Table, base: np.ndarray) -> pa.Table:
    moved = ids.u64(table.column("id")) + base
    return table.set_column(0, table.schema.field(0), from_numpy(moved, pa.uint64()))


def _moved_locations(
    locs: pa.Table,
    per_row: dict[str, np.ndarray],
    bases: dict[str, np.ndarray],
    counts: dict[str, np.ndarray],
) -> pa.Table:
    """Locations with their own, mapping and (each line's) function ids moved."""
    offsets, lines = list_parts(locs.column("lines"))
    map_base = np.repeat(bases["mappings"], counts["locations"])
    fn_base = np.repeat(np.repeat(bases["functions"], counts["locations"]), np.diff(offsets))
    fn = _moved(ids.u64(lines.field("function_id")), fn_base)
    moved_lines = pa.StructArray.from_arrays(
        [from_numpy(fn, pa.uint64()), lines.field("line"), lines.field("column")],
        fields=list(schema.LINE),
    )
    return pa.table(
        [
            from_numpy(ids.u64(locs.column("id")) + per_row["locations"], pa.uint64()),
            from_numpy(_moved(ids.u64(locs.column("mapping_id")), map_base)),
            locs.column("address"),
            locs.column("is_folded"),
            list_array(offsets, moved_lines),
        ],
        schema=schema.PROFILE_LOCATIONS,
    )


def _moved_samples(samples: pa.Table, base: np.ndarray) -> pa.Table:
    """Samples with their location ids moved (``base``: one per sample)."""
    offsets, values = list_parts(samples.column("location_ids"))
    moved = ids.u64(values) + np.repeat(base, np.diff(offsets))
    return samples.set_column(
        0,
        samples.schema.field(0),
        list_array(offsets, from_numpy(moved, pa.uint64())),
    )


def _key_stacks(
    samples: pa.Table, sample_cuts: np.ndarray, loc_local: np.ndarray, loc_ids: np.ndarray
) -> tuple[np.ndarray, pa.Table, np.ndarray]:
    """(each sample's stack id, STORE_STACKS rows of each profile's distinct stacks
    in the order they first occur in it, the profiles' row offsets in them), as
    ``keys._key_stacks`` keys one profile."""
    loc_values, loc_offsets = ids.list_values(samples.column("location_ids"))
    flat = remap_local(ids.u64(loc_values), loc_local, loc_ids)
    n = len(sample_cuts) - 1
    if not samples.num_rows:
        empty = pa.table(
            [pa.nulls(0, f.type) for f in schema.STORE_STACKS], schema=schema.STORE_STACKS
        )
        return np.zeros(0, U64), empty, np.zeros(n + 1, np.int64)
    stack_of, entries = ids.stack_keys(flat, loc_offsets)
    owner = np.repeat(np.arange(n), np.diff(sample_cuts))
    first = _first_rows(owner, stack_of, entries, n)
    starts = loc_offsets[:-1][first]
    lengths = loc_offsets[1:][first] - starts
    stacks = pa.table(
        [
            from_numpy(stack_of[first], pa.uint64()),
            list_array(
                np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                from_numpy(flat[ids.gather(starts, lengths)], pa.uint64()),
            ),
        ],
        schema=schema.STORE_STACKS,
    )
    return stack_of, stacks, _cuts(owner[first], n)


def _first_rows(owner: np.ndarray, stack_of: np.ndarray, entries, n: int) -> np.ndarray:
    """The sorted rows each profile keeps (``keys._first_occurrences`` per profile):
    every row of a profile whose stacks' cache entries are all different (or with
    one sample), else the first row of each of its stack ids."""
    rows = np.arange(len(owner))
    order = np.lexsort((rows, stack_of, owner))
    o, s = owner[order], stack_of[order]
    new = np.concatenate([[True], (o[1:] != o[:-1]) | (s[1:] != s[:-1])])
    keep = np.zeros(len(owner), dtype=bool)
    keep[order[new]] = True
    if entries is not None and len(entries.codes):
        codes = entries.codes
        corder = np.lexsort((codes, owner))
        co, cc = owner[corder], codes[corder]
        dup = (co[1:] == co[:-1]) & (cc[1:] == cc[:-1])
        every = np.ones(n, dtype=bool)
        every[co[1:][dup]] = False
        keep |= every[owner]
    else:
        keep |= (np.bincount(owner, minlength=n) <= 1)[owner]
    return rows[keep]


#: label set ids by canonical labels (the content they are a hash of); bounded
_LABEL_SET_IDS: dict[tuple, int] = {}
_LABEL_SET_IDS_MAX = 1 << 16


def _label_set_id(canon: list[ids.LabelTuple]) -> int:
    key = tuple(canon)
    sid = _LABEL_SET_IDS.get(key)
    if sid is None:
        if len(_LABEL_SET_IDS) >= _LABEL_SET_IDS_MAX:
            _LABEL_SET_IDS.clear()
        sid = _LABEL_SET_IDS[key] = ids.label_set_id(canon)
    return sid


def _filled(arr: pa.Array, fill: int) -> tuple[np.ndarray, np.ndarray]:
    """(an integer array's values as int64, nulls as ``fill``; which are valid), as
    ``fill_null`` and ``is_valid`` give them, from its buffers."""
    n = len(arr)
    if not arr.null_count:
        return to_numpy(arr).astype(np.int64), np.ones(n, dtype=bool)
    dtype = np.dtype(arr.type.to_pandas_dtype())
    validity, data = arr.buffers()[:2]
    values = np.frombuffer(data, dtype=dtype, count=n, offset=arr.offset * dtype.itemsize)
    bits = np.frombuffer(validity, dtype=np.uint8)
    valid = np.unpackbits(bits, count=arr.offset + n, bitorder="little")[arr.offset :].view(bool)
    return np.where(valid, values.astype(np.int64), np.int64(fill)), valid


def _raw_keys(profiles: Sequence[Profile], sample_cuts: np.ndarray) -> np.ndarray:
    """``ids.raw_label_keys`` of every profile's samples, end to end (each from the
    profile's own dictionary codes, as it computes them)."""
    import pyarrow.compute as pc

    parts: list[list[np.ndarray]] = [[], [], [], [], []]
    offsets = [np.zeros(1, np.int64)]
    total = 0
    for p in profiles:
        if not p.samples.num_rows:
            continue
        off, values = list_parts(p.samples.column("labels"))
        offsets.append(off[1:] + total)
        total += len(values)
        if not len(values):
            continue
        for i, name in enumerate(("key", "str", "num_unit")):
            f = values.field(name)
            enc = f if pa.types.is_dictionary(f.type) else pc.dictionary_encode(f)
            parts[i].append(_filled(enc.indices, -1)[0])
        num, valid = _filled(values.field("num"), 0)
        parts[3].append(num)
        parts[4].append(valid)
    n = int(sample_cuts[-1])
    if not total:
        return np.zeros(n, dtype=U64)
    cols = [np.concatenate(x) for x in parts]
    return ids.raw_label_keys_of(cols[:3], cols[3], cols[4], np.concatenate(offsets))


def _key_label_sets(
    profiles: Sequence[Profile], samples: pa.Table, sample_cuts: np.ndarray
) -> tuple[np.ndarray, pa.Table, np.ndarray]:
    """(each sample's label set id, 0 for none; STORE_LABEL_SETS rows of each
    profile; the profiles' row offsets in them), as ``keys._key_label_sets`` keys
    one profile: per profile, its distinct raw keys in order, each one's first
    label list made canonical and hashed, each set once."""
    n = len(profiles)
    raw = _raw_keys(profiles, sample_cuts)
    owner = np.repeat(np.arange(n), np.diff(sample_cuts))
    rows = np.arange(len(raw))
    order = np.lexsort((rows, raw, owner))
    o, r = owner[order], raw[order]
    new = np.concatenate([[True], (o[1:] != o[:-1]) | (r[1:] != r[:-1])]) if len(r) else r > 0
    g_owner, g_raw, g_first = o[new], r[new], order[new]
    labelled = np.flatnonzero(g_raw != 0)
    lists = samples.column("labels").take(from_numpy(g_first[labelled])).to_pylist()
    set_of = np.zeros(len(g_raw), dtype=U64)
    seen: set[tuple[int, int]] = set()
    set_ids, set_labels, set_owner = [], [], []
    for g, labels in zip(labelled.tolist(), lists, strict=True):
        canon = ids.canonical_labels(labels)
        sid = set_of[g] = _label_set_id(canon)
        who = int(g_owner[g])
        if sid and (who, sid) not in seen:
            seen.add((who, sid))
            set_ids.append(sid)
            set_owner.append(who)
            set_labels.append(
                [dict(zip(("key", "str", "num", "num_unit"), c, strict=True)) for c in canon]
            )
    label_of = np.zeros(len(raw), dtype=U64)
    label_of[order] = set_of[np.cumsum(new) - 1]
    if not set_ids:
        empty = [pa.nulls(0, f.type) for f in schema.STORE_LABEL_SETS]
        table = pa.table(empty, schema=schema.STORE_LABEL_SETS)
    else:
        table = pa.table(
            [pa.array(set_ids, pa.uint64()), pa.array(set_labels, pa.list_(schema.LABEL))],
            schema=schema.STORE_LABEL_SETS,
        )
    return label_of, table, _cuts(np.array(set_owner, dtype=np.int64), n)
