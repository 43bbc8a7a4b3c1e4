"""Writing profiles into the store.

Rules:

- A batch is one transaction: every profile of it is stored, or none is
  (any exception rolls the whole batch back; the store is as it was).
- A profile is identified by ``content_hash``: the sha256 of its
  decompressed protobuf bytes, so a re-gzipped copy is the same profile.
  Storing a profile already present is a no-op reported as ``present``
  (its metadata is not changed).
- Functions, mappings, locations, stacks and label sets are keyed by
  content-derived ids (``ids``) and inserted only when new (an anti-join
  against the table), so each is stored once for the whole store.
- ``ingest_paths`` refuses a file it cannot read (a ``ProfileError``, a bad
  sidecar, a path that does not match the template) with a one-line
  reason and still stores the others; a refused file writes nothing.

Metadata comes, lowest priority first, from the ``defaults`` given, a
path template, and a sidecar ``FILE.json`` next to the profile.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import itertools
import json
import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyproflab import schema
from pyproflab.errors import IdCollisionError, ProfileError, StoreError, UsageError
from pyproflab.model import Profile
from pyproflab.store import ids
from pyproflab.store.connection import Store
from pyproflab.store.ingest_report import DATASET_MARKER, PARTIAL, IngestReport
from pyproflab.store.profile_types import PROFILE_TYPES, infer_profile_type
from pyproflab.store.queries import refuse_collisions

BATCH_SIZE = 64

Progress = Callable[[int, int], None]


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


# --- one profile, keyed by content (no database) -----------------------------------


@dataclass
class _Keyed:
    """One profile turned into store rows, ids content-derived, profile_id unset."""

    content_hash: str
    row: dict[str, Any]
    samples: pa.Table  # stack_id, label_set_id, values
    functions: pa.Table
    mappings: pa.Table
    locations: pa.Table
    stacks: pa.Table
    label_sets: pa.Table


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


def _leaf_functions(profile: Profile) -> list[str]:
    """Names of the innermost function of every sample's leaf location."""
    loc_ids = profile.samples.column("location_ids").combine_chunks()
    firsts = pc.list_element(loc_ids.filter(pc.greater(pc.list_value_length(loc_ids), 0)), 0)
    wanted = set(firsts.to_pylist())
    names = dict(
        zip(
            profile.functions.column("id").to_pylist(),
            profile.functions.column("name").to_pylist(),
            strict=True,
        )
    )
    out = []
    for lid, lines in zip(
        profile.locations.column("id").to_pylist(),
        profile.locations.column("lines").to_pylist(),
        strict=True,
    ):
        if lid in wanted and lines:
            out.append(names.get(lines[0]["function_id"], ""))
    return out


def _profile_type(profile: Profile, meta: ProfileMeta, hint: str | None) -> str:
    if meta.profile_type:
        if meta.profile_type not in PROFILE_TYPES:
            raise StoreError(
                f"unknown profile type {meta.profile_type!r} (one of {', '.join(PROFILE_TYPES)})"
            )
        return meta.profile_type
    types = [st.type.lower() for st in profile.sample_types]
    leaves = _leaf_functions(profile) if "contentions" in types else None
    return infer_profile_type(
        profile.sample_types,
        profile.period_type,
        default_sample_type=profile.default_sample_type,
        hint=hint or meta.source,
        leaf_functions=leaves,
    )


def _referenced(profile: Profile) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(locations, functions, mappings) of ``profile`` that its samples reference;
    the first mapping is always kept."""
    loc_values, _ = ids._list_parts(profile.samples.column("location_ids"))
    locs = profile.locations
    if locs.num_rows:
        used = _used(ids._u64(locs.column("id")), ids._u64(loc_values))
        if not used.all():
            locs = locs.filter(pa.array(used))
    lines, _ = ids._list_parts(locs.column("lines"))
    functions = profile.functions
    if functions.num_rows:
        used = _used(ids._u64(functions.column("id")), ids._u64(lines.field("function_id")))
        if not used.all():
            functions = functions.filter(pa.array(used))
    mappings = profile.mappings
    if mappings.num_rows:
        used = _used(ids._u64(mappings.column("id")), ids._u64(locs.column("mapping_id")))
        used[0] = True
        if not used.all():
            mappings = mappings.filter(pa.array(used))
    return locs, functions, mappings


def _used(table_ids: np.ndarray, refs: np.ndarray) -> np.ndarray:
    """Which of ``table_ids`` occur in ``refs``. A profile's ids are small (1..n),
    so a mark table serves; otherwise a sort (np.isin, np.unique: far slower)."""
    if not len(refs) or not len(table_ids):
        return np.zeros(len(table_ids), dtype=bool)
    top = int(table_ids.max())
    if top <= 4 * len(table_ids) + 1024:
        mark = np.zeros(top + 1, dtype=bool)
        mark[refs[refs <= top]] = True
        return mark[table_ids]
    refs = _distinct(refs)
    pos = np.minimum(np.searchsorted(refs, table_ids), len(refs) - 1)
    return refs[pos] == table_ids


def _remap(local_ids: np.ndarray, from_ids: np.ndarray, to_ids: np.ndarray) -> np.ndarray:
    """``ids.remap`` (local ids to content ids, 0 stays 0) by a table when the
    profile's ids are small, as they are (1..n); a search otherwise."""
    if len(from_ids) and int(from_ids.max()) <= 4 * len(from_ids) + 1024:
        table = np.zeros(int(from_ids.max()) + 2, dtype=ids.U64)
        table[from_ids] = to_ids
        table[0] = 0
        return table[np.minimum(np.asarray(local_ids, dtype=ids.U64), len(table) - 1)]
    return ids.remap(local_ids, from_ids, to_ids)


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


def _list_array(offsets: np.ndarray, values: pa.Array) -> pa.ListArray:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32), pa.int32()), values)


def key_profile(
    profile: Profile,
    meta: ProfileMeta,
    content_hash: str,
    *,
    type_hint: str | None = None,
    now: datetime | None = None,
) -> _Keyed:
    """Turn one profile into store rows keyed by content (pure: no database).

    Only what the samples reference is kept (as pprof's merge compacts), plus
    the first mapping, which pprof takes for the main binary.
    """
    locs, functions, mappings = _referenced(profile)
    main_mapping = ids.mapping_ids(profile.mappings.slice(0, 1))

    # Functions and mappings: blake2b of their content.
    fn_local = ids._u64(functions.column("id"))
    fn_ids = ids.function_ids(functions)
    map_local = ids._u64(mappings.column("id"))
    map_ids = ids.mapping_ids(mappings)

    # Locations: rewrite their references to content ids, then hash.
    loc_local = ids._u64(locs.column("id"))
    loc_mapping = _remap(ids._u64(locs.column("mapping_id")), map_local, map_ids)
    lines_values, line_offsets = ids._list_parts(locs.column("lines"))
    line_fn = _remap(ids._u64(lines_values.field("function_id")), fn_local, fn_ids)
    loc_ids = ids.location_ids(locs, loc_mapping, line_fn)
    lines = pa.StructArray.from_arrays(
        [pa.array(line_fn, pa.uint64()), lines_values.field("line"), lines_values.field("column")],
        fields=list(schema.LINE),
    )
    locations = pa.table(
        [
            pa.array(loc_ids, pa.uint64()),
            pa.array(loc_mapping, pa.uint64()),
            locs.column("address"),
            locs.column("is_folded"),
            _list_array(line_offsets, lines),
        ],
        schema=schema.STORE_LOCATIONS,
    )

    # Stacks: the polynomial hash of each sample's location content ids.
    samples = profile.samples
    loc_values, loc_offsets = ids._list_parts(samples.column("location_ids"))
    flat = _remap(ids._u64(loc_values), loc_local, loc_ids)
    stack_of = ids.stack_ids(flat, loc_offsets) if samples.num_rows else np.zeros(0, ids.U64)
    uniq_stacks, first = _first_rows(stack_of)
    all_stacks = _list_array(loc_offsets, pa.array(flat, pa.uint64()))
    stacks = pa.table(
        [pa.array(uniq_stacks, pa.uint64()), all_stacks.take(pa.array(first))],
        schema=schema.STORE_STACKS,
    )

    # Label sets: distinct label lists found by a vectorized key, then each
    # distinct one made canonical and hashed once.
    raw = ids.raw_label_keys(samples.column("labels")) if samples.num_rows else np.zeros(0, ids.U64)
    label_of = np.zeros(samples.num_rows, dtype=ids.U64)
    set_ids: list[int] = []
    set_labels: list[list[dict]] = []
    if raw.any():
        uniq_raw, first_raw = _first_rows(raw)
        labels_col = samples.column("labels")
        set_of_raw = np.zeros(len(uniq_raw), dtype=ids.U64)
        seen: set[int] = set()
        for k, (rk, row) in enumerate(zip(uniq_raw, first_raw, strict=True)):
            if rk == 0:
                continue
            canon = ids.canonical_labels(labels_col[int(row)].as_py())
            sid = ids.label_set_id(canon)
            set_of_raw[k] = sid
            if sid and sid not in seen:
                seen.add(sid)
                set_ids.append(sid)
                set_labels.append(
                    [dict(zip(("key", "str", "num", "num_unit"), c, strict=True)) for c in canon]
                )
        label_of = set_of_raw[np.searchsorted(uniq_raw, raw)]
    label_sets = pa.table(
        [pa.array(set_ids, pa.uint64()), pa.array(set_labels, pa.list_(schema.LABEL))],
        schema=schema.STORE_LABEL_SETS,
    )

    functions = pa.table(
        [pa.array(fn_ids, pa.uint64())] + functions.columns[1:], schema=schema.STORE_FUNCTIONS
    )
    mappings = pa.table(
        [pa.array(map_ids, pa.uint64())] + mappings.columns[1:], schema=schema.STORE_MAPPINGS
    )
    out_samples = pa.table(
        {
            "stack_id": pa.array(stack_of, pa.uint64()),
            "label_set_id": pa.array(label_of, pa.uint64()),
            "values": samples.column("values"),
        },
    )

    pt = profile.period_type
    row = {
        "content_hash": content_hash,
        "service": meta.service,
        "version": meta.version,
        "instance": meta.instance,
        "profile_type": _profile_type(profile, meta, type_hint),
        "labels": list(meta.labels.items()) if meta.labels else None,
        "time": datetime.fromtimestamp(profile.time_nanos / 1e9, UTC)
        if profile.time_nanos
        else None,
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
        "num_samples": samples.num_rows,
        "main_mapping_id": int(main_mapping[0]) if len(main_mapping) else 0,
    }
    return _Keyed(
        content_hash, row, out_samples, functions, mappings, locations, stacks, label_sets
    )


# --- a batch, in one transaction ---------------------------------------------------

# (store table, id column, _Keyed attribute) of the dedup tables, in insert order.
DEDUP_TABLES = (
    ("functions", "function_id", "functions"),
    ("mappings", "mapping_id", "mappings"),
    ("locations", "location_id", "locations"),
    ("stacks", "stack_id", "stacks"),
    ("label_sets", "label_set_id", "label_sets"),
)


def _new_rows(store: Store, table_name: str, id_col: str, tables: list[pa.Table]) -> pa.Table:
    """The rows of ``tables`` (one per profile) whose id is neither in the store
    nor earlier in the batch: ids are compared first, so only new rows are copied."""
    id_arrays = [ids._u64(t.column(id_col)) for t in tables]
    all_ids = np.concatenate(id_arrays) if id_arrays else np.zeros(0, ids.U64)
    uniq, first = np.unique(all_ids, return_index=True)
    if len(uniq):
        refuse_collisions(store, table_name, id_col, tables)
        with store.registered(_pyproflab_ids=pa.table({id_col: pa.array(uniq, pa.uint64())})):
            fresh = store.sql(
                f"SELECT k.{id_col} FROM _pyproflab_ids k ANTI JOIN {table_name} t USING ({id_col})"
            )
        keep = np.isin(uniq, ids._u64(fresh.column(0)))
        first = np.sort(first[keep])
    bounds = np.cumsum([0] + [len(a) for a in id_arrays])
    owner = np.searchsorted(bounds, first, side="right") - 1
    pieces = [tables[o].take(pa.array(first[owner == o] - bounds[o])) for o in np.unique(owner)]
    return pa.concat_tables(pieces) if pieces else tables[0].schema.empty_table()


def _insert_new(store: Store, table_name: str, id_col: str, rows: pa.Table) -> None:
    """Insert rows whose id the table does not have yet (the anti-join again guards
    against a writer on another connection of this process)."""
    if rows.num_rows == 0:
        return
    with store.registered(_pyproflab_new=rows):
        store.execute(
            f"INSERT INTO {table_name} BY NAME SELECT n.* FROM _pyproflab_new n "
            f"ANTI JOIN {table_name} t USING ({id_col})"
        )


def _insert_samples(store: Store, samples: pa.Table) -> None:
    with store.registered(_pyproflab_samples=samples):
        store.execute("INSERT INTO samples BY NAME SELECT * FROM _pyproflab_samples")


def _insert_profiles(store: Store, profiles: pa.Table) -> None:
    with store.registered(_pyproflab_profiles=profiles):
        store.execute("INSERT INTO profiles BY NAME SELECT * FROM _pyproflab_profiles")


def existing_hashes(store: Store, hashes: Sequence[str]) -> dict[str, int]:
    """content_hash -> profile_id of those already in the store."""
    if not hashes:
        return {}
    t = store.sql(
        "SELECT content_hash, profile_id FROM profiles "
        "WHERE list_contains(?::VARCHAR[], content_hash)",
        [list(hashes)],
    )
    return dict(zip(t.column(0).to_pylist(), t.column(1).to_pylist(), strict=True))


def store_keyed(store: Store, keyed: Sequence[_Keyed]) -> IngestReport:
    """Write keyed profiles in one transaction; those whose content_hash is
    present (in the store, or earlier in ``keyed``) are skipped."""
    report = IngestReport()
    if not keyed:
        return report
    with store.transaction():
        present = existing_hashes(store, [k.content_hash for k in keyed])
        next_id = (
            int(store.sql("SELECT coalesce(max(profile_id), 0) FROM profiles").column(0)[0].as_py())
            + 1
        )
        fresh: list[_Keyed] = []
        for k in keyed:
            if k.content_hash in present:
                report.present += 1
                continue
            k.row["profile_id"] = next_id
            present[k.content_hash] = next_id
            report.profile_ids.append(next_id)
            next_id += 1
            fresh.append(k)
        report.new = len(fresh)
        if not fresh:
            return report
        for table_name, id_col, attr in DEDUP_TABLES:
            rows = _new_rows(store, table_name, id_col, [getattr(k, attr) for k in fresh])
            _insert_new(store, table_name, id_col, rows)
        samples = pa.table(
            [
                pa.array(
                    np.concatenate(
                        [
                            np.full(k.samples.num_rows, k.row["profile_id"], dtype=np.int64)
                            for k in fresh
                        ]
                    )
                ),
                pa.chunked_array(
                    [c for k in fresh for c in k.samples.column("stack_id").chunks], pa.uint64()
                ),
                pa.chunked_array(
                    [c for k in fresh for c in k.samples.column("label_set_id").chunks], pa.uint64()
                ),
                pa.chunked_array(
                    [c for k in fresh for c in k.samples.column("values").chunks],
                    pa.list_(pa.int64()),
                ),
            ],
            schema=schema.STORE_SAMPLES,
        )
        _insert_samples(store, samples)
        profiles = pa.Table.from_pylist([k.row for k in fresh], schema=schema.STORE_PROFILES)
        _insert_profiles(store, profiles)
    return report


def ingest(
    store: Store,
    items: Iterable[tuple[Profile, ProfileMeta]],
    *,
    content_hashes: Sequence[str | None] | None = None,
) -> IngestReport:
    """Store a batch of (Profile, ProfileMeta) in ONE transaction: all or nothing.

    ``content_hashes`` (sha256 hex of each file's decompressed bytes) identify the
    profiles; without them a digest of the decoded content is used.
    """
    items = list(items)
    hashes = list(content_hashes) if content_hashes is not None else [None] * len(items)
    if len(hashes) != len(items):
        raise ValueError("content_hashes must have one entry per profile")
    now = datetime.now(UTC)
    keyed = [
        key_profile(p, m, h or profile_digest(p), now=now)
        for (p, m), h in zip(items, hashes, strict=True)
    ]
    return store_keyed(store, keyed)


# --- from paths -------------------------------------------------------------------

_GLOB_CHARS = re.compile(r"[*?\[]")
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class TemplateMatch:
    """The fields of a path matched by a template (``groupdict`` as ``re`` has)."""

    def __init__(self, fields: dict[str, str]):
        self._fields = fields

    def groupdict(self) -> dict[str, str]:
        return dict(self._fields)


class PathTemplate:
    """A compiled path template: a linear-time matcher, no regex backtracking.

    The template's ``/``-separated parts match the LAST parts of a path, one
    to one. Within a part, literals match themselves; a field takes the
    shortest non-empty text up to the first place the next literal occurs
    (a part's last literal is anchored at the part's end), as the lazy regex
    this replaces did; a field followed directly by another takes one
    character. Taking the earliest occurrence is always safe: a later field
    can absorb any text but ``/``, so if some split matches, this one does.
    Each literal costs one ``str.find``, so matching is linear in the path for
    a fixed template (the regex took 68 s on one 251-byte name). A field used
    twice must match the same text in both places (compared after the split).
    """

    def __init__(self, template: str):
        self.template = template
        self.parts: list[list[tuple[bool, str]]] = []  # (is_field, name or literal)
        self.names: list[str] = []
        for part in template.split("/"):
            tokens: list[tuple[bool, str]] = []
            pos = 0
            for m in _FIELD.finditer(part):
                if m.start() > pos:
                    tokens.append((False, part[pos : m.start()]))
                tokens.append((True, m.group(1)))
                if m.group(1) not in self.names:
                    self.names.append(m.group(1))
                pos = m.end()
            if pos < len(part) or not tokens:
                tokens.append((False, part[pos:]))
            self.parts.append(tokens)

    def search(self, path: str) -> TemplateMatch | None:
        comps = path.split("/")
        if len(comps) < len(self.parts):
            return None
        found: dict[str, str] = {}
        for tokens, text in zip(self.parts, comps[len(comps) - len(self.parts) :], strict=True):
            if not _match_part(tokens, text, found):
                return None
        return TemplateMatch({n: found[n] for n in self.names})


def _match_part(tokens: list[tuple[bool, str]], text: str, found: dict[str, str]) -> bool:
    """Match one path part, adding its fields to ``found`` (see ``PathTemplate``)."""
    pos, n = 0, len(tokens)
    last_literal = max((i for i, (f, _) in enumerate(tokens) if not f), default=-1)
    for i, (is_field, value) in enumerate(tokens):
        if not is_field:
            if not text.startswith(value, pos):
                return False
            pos += len(value)
            continue
        if i == n - 1:
            end = len(text)
        elif tokens[i + 1][0]:
            end = pos + 1  # another field follows: take one character
        elif i + 1 == last_literal and i + 1 == n - 1:
            end = len(text) - len(tokens[i + 1][1])  # the suffix is anchored at the end
        else:
            end = text.find(tokens[i + 1][1], pos + 1)
            if end < 0:
                return False
        if end <= pos or end > len(text):
            return False
        got = text[pos:end]
        if found.setdefault(value, got) != got:
            return False
        pos = end
    return pos == len(text)


def compile_template(template: str) -> PathTemplate:
    """A path template as a matcher against the END of a file's path.

    ``{name}`` matches a non-empty part of one path component (no ``/``);
    everything else is literal. Fields ``service``, ``version``, ``instance``
    fill metadata; ``type`` is a hint for the profile type (it only decides
    between mutex and block, which Go writes identically); ``time`` is
    informational (matched, not stored); any other name becomes a metadata label.
    """
    return PathTemplate(template)


def _template_meta(rx: PathTemplate, path: str) -> tuple[dict[str, Any], str | None] | None:
    m = rx.search(Path(path).as_posix())
    if m is None:
        return None
    meta: dict[str, Any] = {"labels": {}}
    hint = None
    for name, value in m.groupdict().items():
        if name in ("service", "version", "instance"):
            meta[name] = value
        elif name == "type":
            hint = value
        elif name != "time":
            meta["labels"][name] = value
    return meta, hint


def _sidecar(path: str) -> dict[str, Any] | None:
    """The metadata of ``path + '.json'``, if there is one (raises ValueError if bad)."""
    side = path + ".json"
    if not os.path.isfile(side):
        return None
    try:
        with open(side, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"sidecar {side}: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"sidecar {side}: expected a JSON object")
    out: dict[str, Any] = {}
    for key in ("service", "version", "instance", "profile_type"):
        if data.get(key) is not None:
            out[key] = str(data[key])
    labels = data.get("labels") or {}
    if not isinstance(labels, dict):
        raise ValueError(f"sidecar {side}: labels must be an object")
    out["labels"] = {str(k): str(v) for k, v in labels.items()}
    for key in ("window_start", "window_end"):
        if data.get(key):
            try:
                out[key] = datetime.fromisoformat(str(data[key]).replace("Z", "+00:00"))
            except ValueError:
                raise ValueError(f"sidecar {side}: bad {key} {data[key]!r}") from None
    return out


def expand_paths(
    paths: Iterable[str | os.PathLike],
) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """(profile files, Parquet dataset folders, refused) from files, folders and globs.

    Folders are walked (sorted); hidden files and ``*.json`` (sidecars) are skipped
    there. A folder holding ``_pyproflab_dataset.json`` is a Parquet dataset.
    """
    files: list[str] = []
    datasets: list[str] = []
    refused: list[tuple[str, str]] = []

    def add_dir(d: str) -> None:
        if os.path.isfile(os.path.join(d, DATASET_MARKER)):
            datasets.append(d)
            return
        for root, dirs, names in os.walk(d):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            if os.path.isfile(os.path.join(root, PARTIAL)):
                refused.append((root, "an interrupted Parquet export, not profiles; skipped"))
                dirs[:] = []
                continue
            if os.path.isfile(os.path.join(root, DATASET_MARKER)):
                datasets.append(root)
                dirs[:] = []
                continue
            for n in sorted(names):
                if not n.startswith(".") and not n.endswith(".json"):
                    files.append(os.path.join(root, n))

    for p in paths:
        s = os.fspath(p)
        if os.path.isdir(s):
            add_dir(s)
        elif os.path.exists(s):
            files.append(s)
        elif _GLOB_CHARS.search(s):
            matches = sorted(glob.glob(s, recursive=True))
            if not matches:
                refused.append((s, "no files match"))
            for mpath in matches:
                if os.path.isdir(mpath):
                    add_dir(mpath)
                elif not mpath.endswith(".json"):
                    files.append(mpath)
        else:
            refused.append((s, "no such file or folder"))
    seen: set[str] = set()
    unique = []
    for f in files:
        key = os.path.abspath(f)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique, datasets, refused


def _read_raw(path: str, max_bytes: int) -> tuple[bytes, str]:
    """The decompressed protobuf bytes of a file and their sha256 (ProfileError if unreadable)."""
    from pyproflab.decode.pprof import decompress
    from pyproflab.errors import NotAProfileError, TooLargeError

    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            raise TooLargeError(path, f"file is larger than the cap of {max_bytes} bytes")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise NotAProfileError(path, f"cannot read: {e.strerror or e}") from None
    raw = decompress(data, source=path, max_bytes=max_bytes)
    return raw, hashlib.sha256(raw).hexdigest()


def ingest_paths(
    store: Store,
    paths: Iterable[str | os.PathLike],
    defaults: ProfileMeta | None = None,
    *,
    path_template: str | None = None,
    max_bytes: int | None = None,
    progress: Progress | None = None,
    batch_size: int = BATCH_SIZE,
    workers: int | None = None,
) -> IngestReport:
    """Ingest profile files (files, folders, globs; exported Parquet datasets too).

    Files are read, hashed, decoded and keyed by ``workers`` processes (default:
    one per core; in this process when there are few files), a window of files
    at a time, and stored by this process ``batch_size`` profiles per
    transaction: memory is bounded by the batch and the window, whatever the
    number of files, and each worker holds one decompressed file at a time.
    ``progress(done, total)`` is called after every file. A file that cannot be
    read is refused with its one-line reason; the others are still stored.
    """
    from pyproflab.decode import DEFAULT_MAX_BYTES

    if max_bytes is not None and max_bytes < 1:
        raise UsageError(f"max_bytes must be >= 1, not {max_bytes}")
    if batch_size < 1:
        raise StoreError(f"batch size must be at least 1 (got {batch_size})")
    files, datasets, refused = expand_paths(paths)
    report = IngestReport(refused=list(refused))
    job = FileJob(
        defaults or ProfileMeta(),
        path_template,
        max_bytes or DEFAULT_MAX_BYTES,
        known_hash_prefixes(store),
    )
    batch: list[_Keyed] = []
    for done, (path, prepared) in enumerate(_prepared(files, job, workers, batch_size), 1):
        result: _Keyed | _Present | _Refused | None = prepared
        if isinstance(result, _Present):
            result = _check_present(store, job, path, result, batch, report)
        if isinstance(result, _Refused):
            report.refused.append((path, result.reason))
        elif isinstance(result, _Keyed):
            batch.append(result)
        if len(batch) >= batch_size:
            _store_batch(store, batch, report)
            batch = []
        if progress:
            progress(done, len(files))
    _store_batch(store, batch, report)

    for d in datasets:
        from pyproflab.store.parquet import import_parquet

        report.add(import_parquet(store, d))
    return report


def _store_batch(store: Store, batch: list[_Keyed], report: IngestReport) -> None:
    """One transaction for the batch; on an id collision, one per profile, so only
    the profile that collides is refused."""
    try:
        report.add(store_keyed(store, batch))
    except IdCollisionError:
        for k in batch:
            try:
                report.add(store_keyed(store, [k]))
            except IdCollisionError as e:
                report.refused.append((str(k.row.get("source") or k.content_hash), str(e)))


# --- preparing one file (in a worker process) ------------------------------------------


@dataclass(frozen=True)
class FileJob:
    """What turning a file into keyed rows needs (sent once to each worker)."""

    defaults: ProfileMeta
    path_template: str | None
    max_bytes: int
    known: np.ndarray  # sorted first 64 bits of the store's content hashes


@dataclass
class _Present:
    """The file's content hash may be stored already: it was not decoded."""

    digest: str


@dataclass
class _Refused:
    reason: str


def known_hash_prefixes(store: Store) -> np.ndarray:
    """The first 64 bits of every stored content hash, sorted: 8 bytes a profile,
    so workers can skip stored files without asking the database."""
    hashes = store.sql("SELECT content_hash FROM profiles").column(0).to_pylist()
    out = []
    for h in hashes:
        try:
            out.append(int(h[:16], 16))
        except (TypeError, ValueError):
            continue
    return np.sort(np.array(out, dtype=np.uint64))


def _maybe_known(known: np.ndarray, digest: str) -> bool:
    if not len(known):
        return False
    prefix = np.uint64(int(digest[:16], 16))
    pos = int(np.searchsorted(known, prefix))
    return pos < len(known) and known[pos] == prefix


def prepare_file(job: FileJob, path: str, now: datetime) -> _Keyed | _Present | _Refused:
    """Read, hash, decode and key one file (pure: no database). A file whose hash
    may be stored already is not decoded; the writer checks the whole hash."""
    from pyproflab.decode import decode_bytes

    try:
        meta, hint = _file_meta(job, path)
        raw, digest = _read_raw(path, job.max_bytes)
        if _maybe_known(job.known, digest):
            return _Present(digest)
        profile = decode_bytes(raw, source=path, max_bytes=job.max_bytes)
        del raw  # the decompressed bytes go before keying allocates
        return key_profile(profile, meta, digest, type_hint=hint, now=now)
    except ProfileError as e:
        return _Refused(e.problem)
    except (StoreError, ValueError) as e:
        return _Refused(str(e))


def _file_meta(job: FileJob, path: str) -> tuple[ProfileMeta, str | None]:
    """Metadata of one file: defaults, then its path template, then its sidecar."""
    meta = job.defaults.updated({"source": os.path.abspath(path)})
    hint = None
    if job.path_template is not None:
        tm = _template_meta(_compiled(job.path_template), path)
        if tm is None:
            raise ValueError(f"path does not match the template {job.path_template!r}")
        meta, hint = meta.updated(tm[0]), tm[1]
    side = _sidecar(path)
    if side is not None:
        meta = meta.updated(side)
    return meta, hint


@functools.lru_cache(maxsize=8)
def _compiled(template: str) -> PathTemplate:
    return compile_template(template)


def _check_present(
    store: Store,
    job: FileJob,
    path: str,
    result: _Present,
    batch: list[_Keyed],
    report: IngestReport,
) -> _Keyed | _Refused | None:
    """A file a worker skipped: counted present if its whole hash is stored (or
    waiting in the batch), else (64 bits alike by chance) prepared here."""
    if existing_hashes(store, [result.digest]) or any(
        k.content_hash == result.digest for k in batch
    ):
        report.present += 1
        return None
    out = prepare_file(replace(job, known=np.zeros(0, np.uint64)), path, datetime.now(UTC))
    assert not isinstance(out, _Present)
    return out


# --- the worker pool ---------------------------------------------------------------------

# Below this many files a pool costs more to start than it saves.
POOL_MIN_FILES = 8

_JOB: FileJob | None = None


def _init_worker(job: FileJob) -> None:
    global _JOB
    _JOB = job


def _prepare_in_worker(path: str, now: datetime) -> _Keyed | _Present | _Refused:
    assert _JOB is not None
    return prepare_file(_JOB, path, now)


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _prepared(
    files: list[str], job: FileJob, workers: int | None, window: int
) -> Iterator[tuple[str, _Keyed | _Present | _Refused]]:
    """(path, prepared result) for every file, in order. With a pool, at most
    ``window`` files (and at least two per worker) are in flight, so results
    waiting for the writer stay bounded."""
    now = datetime.now(UTC)
    workers = default_workers() if workers is None else workers
    if workers <= 1 or len(files) < POOL_MIN_FILES:
        for path in files:
            yield path, prepare_file(job, path, now)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # forkserver: workers do not inherit this process's DuckDB connection or threads.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["pyproflab.store.ingest"])
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(job,))
    try:
        pending: deque = deque()
        todo = iter(files)
        for path in itertools.islice(todo, max(window, 2 * workers)):
            pending.append((path, pool.submit(_prepare_in_worker, path, now)))
        while pending:
            path, future = pending.popleft()
            result = future.result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append((nxt, pool.submit(_prepare_in_worker, nxt, now)))
            yield path, result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
