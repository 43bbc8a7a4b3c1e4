"""pprof's graph engine: nodes, inline-frame expansion, flat/cum values and edges.

What ``go tool pprof`` builds before any report (``internal/graph``), shared by
``top``, regressions, GC categories, flame graphs and PGO. The rules, in order:

- Sample index and total: ``resolve_sample_index`` takes ``-sample_index`` by
  number or name (``inuse_`` prefix optional), default ``default_sample_type``
  else the last type. ``compute_total`` sums |value| over all samples; when some
  samples carry the label ``pprof::base=true``, only those count.
- Nodes (``build_nodes``): one per distinct key at a granularity. functions:
  name only; lines: name, file and line; files: file only. A node is keyed by
  (name, file, line, and only when the name is empty the function's start line
  and the mapping's file). Lines without a function and locations without lines
  become nodes named ``[basename of mapping file]`` or ``<unknown>``. File names
  lose a ``/proc/self/cwd/`` prefix and are cleaned like Go's ``filepath.Clean``.
- Frames (``expand_frames``): each location of a counted sample expands into
  one frame per line, leaf first; every line but a location's last is an
  inlined frame.
- Values (``node_values``): every frame of a sample adds the sample's value to
  its node's cum once per sample (recursion counts once), the leaf frame to
  flat. Nodes whose flat and cum are both zero are not present.
- Edges (``with_edges``): each (caller, callee) pair adds once per sample; an
  edge is inline when the callee is an inlined frame of its location in every
  sample.
- Order (``sorted_nodes``): by |flat| (or |cum|), then printable name.

Every function here takes and returns NumPy arrays indexed by node id, so that
an analysis can keep a subset of nodes (``kept``) and rebuild the values, as
pprof does when ``-nodecount`` cuts rows.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from pyproflab.analyses._arrays import IdIndex, to_np
from pyproflab.arrays import equal_strings, from_strings, list_parts
from pyproflab.errors import UsageError
from pyproflab.model import Profile

Granularity = Literal["functions", "lines", "files"]
GRANULARITIES: tuple[str, ...] = ("functions", "lines", "files")


# --- helpers with Go's semantics --------------------------------------------------


def go_clean(path: str) -> str:
    """Go's ``filepath.Clean`` (on a Unix system)."""
    if not path:
        return "."
    out = posixpath.normpath(path)
    if out.startswith("//"):  # POSIX keeps two leading slashes; Go does not
        out = "/" + out.lstrip("/")
    return out


def go_base(path: str) -> str:
    """Go's ``filepath.Base``."""
    if not path:
        return "."
    stripped = path.rstrip("/")
    if not stripped:
        return "/"
    return stripped.rsplit("/", 1)[-1]


def trim_file_name(path: str) -> str:
    """pprof's default source-path trimming: drop a ``/proc/self/cwd/`` prefix."""
    for prefix in ("/proc/self/cwd/./", "/proc/self/cwd/"):
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path


def resolve_sample_index(profile: Profile, sample_index: int | str | None) -> int:
    """The sample type index pprof uses for ``-sample_index`` (number, name, or default)."""
    types = profile.sample_types
    if not types:
        raise UsageError("profile has no samples (no sample types)")
    if sample_index is None or sample_index == "":
        return profile.default_sample_index()
    if isinstance(sample_index, str):
        text = sample_index.strip()
        if text.lstrip("+-").isdigit():
            sample_index = int(text)
    if isinstance(sample_index, int) and not isinstance(sample_index, bool):
        if not 0 <= sample_index < len(types):
            raise UsageError(
                f"sample_index {sample_index} is outside the range [0..{len(types) - 1}]"
                f" (the sample types: {', '.join(t.type for t in types)})"
            )
        return sample_index
    name = str(sample_index)
    bare = name.removeprefix("inuse_")
    for i, st in enumerate(types):
        if st.type in (name, bare):
            return i
    raise UsageError(f"sample_index {name!r} must be one of: {[t.type for t in types]}")


def sample_values(profile: Profile, index: int) -> np.ndarray:
    """Value ``index`` of every sample, as int64."""
    if profile.samples.num_rows == 0:
        return np.zeros(0, dtype=np.int64)
    offsets, flat = list_parts(profile.samples.column("values"))
    values = to_np(flat, np.int64)
    at = offsets[:-1] + index
    present = at < offsets[1:]  # a null or short value list counts as 0
    if present.all():
        return values[at]
    out = np.zeros(len(at), dtype=np.int64)
    out[present] = values[at[present]]
    return out


def diff_base_mask(profile: Profile) -> np.ndarray | None:
    """Samples labelled ``pprof::base=true`` (None when there are none)."""
    offsets, labels = list_parts(profile.samples.column("labels"))
    if len(labels) == 0:
        return None
    import pyarrow.compute as pc  # only for labelled profiles: 30 ms to import

    # Scalars made from Arrow arrays: a Python str would make pyarrow import pandas.
    key, value = from_strings(["pprof::base", "true"])
    hit = pc.and_(
        equal_strings(labels.field("key"), key), equal_strings(labels.field("str"), value)
    )
    hit = to_np(pc.and_kleene(hit, pc.is_valid(hit)), bool)  # null (no str) is no hit
    if not hit.any():
        return None
    sample_of = np.repeat(np.arange(profile.samples.num_rows), np.diff(offsets))
    return np.bincount(sample_of[hit], minlength=profile.samples.num_rows) > 0


def compute_total(profile: Profile, index: int) -> int:
    """pprof's report total: sum of |value|, or of the diff-base samples when any are
    labelled ``pprof::base`` and their sum is positive."""
    v = np.abs(sample_values(profile, index))
    total = int(v.sum(dtype=np.int64))
    base = diff_base_mask(profile)
    if base is not None:
        diff_total = int(v[base].sum(dtype=np.int64))
        if diff_total > 0:
            return diff_total
    return total


# --- nodes ------------------------------------------------------------------------


@dataclass
class Nodes:
    """Node of every (location, line) slot, and what each node prints as."""

    loc_slot_off: np.ndarray  # per location row: first slot
    loc_nslots: np.ndarray  # per location row: slots (lines, at least 1)
    slot_node: np.ndarray  # per slot: node id
    slot_inline: np.ndarray  # per slot: an inlined frame (not the location's last line)
    name: list[str]
    file: list[str]
    start_line: list[int]
    lineno: list[int]
    objfile: list[str]
    _labels: dict[int, str] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.name)

    def label(self, n: int) -> str:
        got = self._labels.get(n)
        if got is None:
            got = self._labels[n] = self._make_label(n)
        return got

    def _make_label(self, n: int) -> str:
        parts = [self.name[n]] if self.name[n] else []
        if self.lineno[n]:
            parts.append(f"{self.file[n]}:{self.lineno[n]}")
        elif self.file[n]:
            parts.append(self.file[n])
        elif self.name[n]:
            pass
        elif self.objfile[n]:
            parts.append(f"[{go_base(self.objfile[n])}]")
        else:
            parts.append("<unknown>")
        return " ".join(parts)

    def sprint(self, n: int) -> str:
        """Go's ``fmt.Sprint`` of the node info: pprof's last tie-breaker."""
        return (
            f"{{{self.name[n]}  0 {self.file[n]} {self.start_line[n]} {self.lineno[n]} 0 "
            f"{self.objfile[n]}}}"
        )


def _function_keys(
    funcs, keep_name: bool, keep_file: bool
) -> tuple[np.ndarray, list[tuple[str, str, int]]]:
    """Per function row (and one more entry for "no function"): the code of its
    key (name, file, start line) after aggregation, and the keys by code (code 0:
    no function). Python over the functions only."""
    fkeys: dict[tuple[str, str, int], int] = {("", "", 0): 0}
    fcode_list: list[int] = []
    for name, fname, start in zip(
        funcs.column("name").to_pylist(),
        funcs.column("filename").to_pylist(),
        funcs.column("start_line").to_pylist(),
        strict=True,
    ):
        name = name if keep_name else ""
        fname = go_clean(trim_file_name(fname)) if keep_file and fname else ""
        key = (name, fname, start if not name else 0)
        fcode_list.append(fkeys.setdefault(key, len(fkeys)))
    return np.array(fcode_list + [0], dtype=np.int64), list(fkeys)


def build_nodes(profile: Profile, granularity: str) -> Nodes:
    """The nodes of ``profile`` at ``granularity`` (functions, lines or files), keyed
    as the module rules say, and the node of every (location, line) slot."""
    keep_name = granularity in ("functions", "lines")
    keep_file = granularity in ("lines", "files")
    keep_line = granularity == "lines"

    funcs = profile.functions
    fcode, fkey_list = _function_keys(funcs, keep_name, keep_file)
    fname_empty = np.array([k[0] == "" for k in fkey_list], dtype=bool)

    maps = profile.mappings
    objs: dict[str, int] = {"": 0}
    mcode = np.array(
        [objs.setdefault(f, len(objs)) for f in maps.column("filename").to_pylist()] + [0],
        dtype=np.int64,
    )
    obj_list = list(objs)

    locs = profile.locations
    nloc = locs.num_rows
    loc_mrow = IdIndex(to_np(maps.column("id"), np.uint64)).rows(
        to_np(locs.column("mapping_id"), np.uint64)
    )
    loc_obj = mcode[loc_mrow]

    line_off, lines = list_parts(locs.column("lines"))
    nlines = np.diff(line_off)
    nslots = np.maximum(nlines, 1)
    slot_off = np.zeros(nloc + 1, dtype=np.int64)
    np.cumsum(nslots, out=slot_off[1:])
    nslot_total = int(slot_off[-1])
    slot_loc = np.repeat(np.arange(nloc), nslots)
    slot_f = np.zeros(nslot_total, dtype=np.int64)  # function key code, 0 = none
    slot_line = np.zeros(nslot_total, dtype=np.int64)
    if len(lines):
        loc_of_line = np.repeat(np.arange(nloc), nlines)
        pos = np.arange(len(lines)) - line_off[loc_of_line]
        dest = slot_off[loc_of_line] + pos
        frow = IdIndex(to_np(funcs.column("id"), np.uint64)).rows(
            to_np(lines.field("function_id"), np.uint64)
        )
        slot_f[dest] = fcode[frow]
        if keep_line:
            # A line without a function keeps no line number (pprof's nodeInfo).
            slot_line[dest] = np.where(frow >= 0, to_np(lines.field("line"), np.int64), 0)
    slot_obj = np.where(fname_empty[slot_f], loc_obj[slot_loc], 0)
    slot_inline = (np.arange(nslot_total) - slot_off[slot_loc]) != (nslots[slot_loc] - 1)

    # One int64 key per slot: (function key, objfile, line number).
    slot_key = slot_f * np.int64(len(obj_list)) + slot_obj
    if keep_line and nslot_total:
        lvals, linv = np.unique(slot_line, return_inverse=True)
        slot_key = slot_key * np.int64(len(lvals)) + linv.reshape(-1)
    _, first, inverse = np.unique(slot_key, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    uniq = np.stack([slot_f[first], slot_obj[first], slot_line[first]], axis=1)
    names, files, starts, lnos, objfiles = [], [], [], [], []
    for f, o, ln in uniq.tolist():
        name, fname, start = fkey_list[f]
        names.append(name)
        files.append(fname)
        starts.append(start)
        lnos.append(ln)
        objfiles.append(obj_list[o] if name == "" else "")
    return Nodes(
        slot_off[:-1],
        nslots,
        inverse.astype(np.int64),
        slot_inline,
        names,
        files,
        starts,
        lnos,
        objfiles,
    )


# --- frames and the graph -----------------------------------------------------------


@dataclass
class Frames:
    """Frames of the samples that count, leaf first within each sample."""

    sample: np.ndarray  # index into w
    node: np.ndarray
    inline: np.ndarray
    w: np.ndarray  # per counted sample: its value


def expand_frames(profile: Profile, nodes: Nodes, w_all: np.ndarray, keep: np.ndarray) -> Frames:
    offsets, flat = list_parts(profile.samples.column("location_ids"))
    sel = np.flatnonzero(keep)
    w = w_all[sel]
    counts = np.diff(offsets)[sel]
    n_entries = int(counts.sum())
    # int32 indexes where they fit: these arrays have one entry per frame (millions),
    # and half the bytes is most of the time.
    idx_t = np.int32 if max(n_entries, len(sel)) < 2**31 else np.int64
    entry_sample = np.repeat(np.arange(len(sel), dtype=idx_t), counts)
    all_locs = to_np(flat, np.uint64)
    if len(sel) == len(w_all):  # every sample counts: its entries are all of them
        loc_ids = all_locs
    else:
        # Entries (sample, location) of the kept samples, in file order (leaf first).
        starts = offsets[:-1][sel]
        entry_pos = np.arange(n_entries, dtype=np.int64) - np.repeat(
            np.cumsum(counts) - counts, counts
        )
        entry_idx = np.repeat(starts, counts) + entry_pos
        loc_ids = all_locs[entry_idx] if n_entries else np.zeros(0, np.uint64)
    loc_rows = IdIndex(to_np(profile.locations.column("id"), np.uint64)).rows(loc_ids)
    if (loc_rows < 0).any():
        known = loc_rows >= 0  # pprof refuses such profiles; the decoder does too
        entry_sample, loc_rows = entry_sample[known], loc_rows[known]
    k = nodes.loc_nslots[loc_rows]
    first_slot = nodes.loc_slot_off[loc_rows]
    if (k == 1).all():  # no inlined frames: one frame per entry
        return Frames(entry_sample, nodes.slot_node[first_slot], nodes.slot_inline[first_slot], w)
    nframes = int(k.sum())
    fr_entry = np.repeat(np.arange(len(loc_rows), dtype=np.int64), k)
    fr_pos = np.arange(nframes) - np.repeat(np.cumsum(k) - k, k)
    slot = first_slot[fr_entry] + fr_pos
    return Frames(entry_sample[fr_entry], nodes.slot_node[slot], nodes.slot_inline[slot], w)


@dataclass
class Graph:
    flat: np.ndarray
    cum: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_weight: np.ndarray
    edge_inline: np.ndarray


def kept_frames(fr: Frames, kept: np.ndarray | None):
    """(sample, node, inline) of the frames whose node is kept (all if ``kept`` is None)."""
    if kept is None:
        return fr.sample, fr.node, fr.inline
    m = kept[fr.node]
    return fr.sample[m], fr.node[m], fr.inline[m]


def node_values(fr: Frames, n_nodes: int, kept: np.ndarray | None) -> Graph:
    """pprof's newGraph over the frames, flat and cum only; nodes outside ``kept``
    are left out. ``with_edges`` adds the edges: choosing which nodes to keep
    needs only flat and cum, and the edges cost more than both.
    """
    flat = np.zeros(n_nodes, dtype=np.int64)
    cum = np.zeros(n_nodes, dtype=np.int64)
    e = np.zeros(0, dtype=np.int64)
    if len(fr.node) == 0:
        return Graph(flat, cum, e, e, e, np.zeros(0, bool))
    # Flat goes to the leaf frame (the first of each sample), if that node is kept.
    first = np.ones(len(fr.sample), dtype=bool)
    first[1:] = fr.sample[1:] != fr.sample[:-1]
    leaf_s, leaf_n = fr.sample[first], fr.node[first]
    if kept is not None:
        ok = kept[leaf_n]
        leaf_s, leaf_n = leaf_s[ok], leaf_n[ok]
    np.add.at(flat, leaf_n, fr.w[leaf_s])
    sample, node, _ = kept_frames(fr, kept)
    # Cum: each (sample, node) pair once.
    # Keys are sample-major, so a stable sort (which exploits runs) is fastest.
    pair = np.sort(sample.astype(np.int64) * n_nodes + node, kind="stable")
    firsts = np.ones(len(pair), dtype=bool)
    firsts[1:] = pair[1:] != pair[:-1]
    upair = pair[firsts]
    np.add.at(cum, upair % n_nodes, fr.w[upair // n_nodes])
    return Graph(flat, cum, e, e, e, np.zeros(0, bool))


def with_edges(g: Graph, fr: Frames, n_nodes: int, kept: np.ndarray | None) -> Graph:
    """``g`` (made by ``node_values`` with the same ``kept``) with its edges."""
    if len(fr.node) == 0:
        return g
    sample, node, inline = kept_frames(fr, kept)
    src, dst, weight, inl = count_edges(sample, node, inline, fr.w, n_nodes)
    return Graph(g.flat, g.cum, src, dst, weight, inl)


def count_edges(
    sample: np.ndarray, node: np.ndarray, inline: np.ndarray, w: np.ndarray, n_nodes: int
):
    """(caller, callee, weight, inline) per edge, as pprof's newGraph counts them."""
    ns = len(w)
    # Edges: caller is the next frame toward the root within the same sample.
    same = sample[1:] == sample[:-1]
    child, parent = node[:-1][same], node[1:][same]
    e_s, e_inl = sample[:-1][same], inline[:-1][same]
    ok = child != parent
    child, parent, e_s, e_inl = child[ok], parent[ok], e_s[ok], e_inl[ok]
    edge = parent.astype(np.int64) * n_nodes + child
    n_edge_ids = n_nodes * n_nodes
    if ns * n_edge_ids * 2 >= 2**62:  # keys would overflow: number the edges densely
        uniq_e, edge = np.unique(edge, return_inverse=True)
        n_edge_ids = len(uniq_e)
    else:
        uniq_e = None
    # Edge-major keys: one sort both finds each (sample, edge) once and groups
    # the edges (no argsort and inverse of a second unique).
    key = edge * ns + e_s
    # Each (sample, edge) counts once; its inline flag is the one of its first
    # occurrence from the root. Sorting (key, flag) finds both; only keys seen
    # with both flags need their occurrences ordered.
    kf = np.sort(key * 2 + e_inl)
    kf = kf[np.concatenate(([True], kf[1:] != kf[:-1]))] if len(kf) else kf
    ukey, uflag = kf >> 1, (kf & 1).astype(bool)
    dup = np.zeros(len(ukey), dtype=bool)
    if len(ukey) > 1:
        dup[1:] = ukey[1:] == ukey[:-1]
    if dup.any():
        amb = ukey[dup]
        where = np.flatnonzero(np.isin(key, amb))
        # The occurrence nearest the root is the last in leaf-first order.
        _, last = np.unique(key[where][::-1], return_index=True)
        resolved = dict(
            zip(key[where][::-1][last].tolist(), e_inl[where][::-1][last].tolist(), strict=True)
        )
        keepu = np.ones(len(ukey), dtype=bool)
        keepu[np.flatnonzero(dup) - 1] = False  # drop the first of each pair
        ukey, uflag = ukey[keepu], uflag[keepu]
        fix = np.isin(ukey, amb)
        uflag[fix] = [resolved[k] for k in ukey[fix].tolist()]
    edge_r, s_r = ukey // ns, ukey % ns
    if len(edge_r) == 0:
        e = np.zeros(0, dtype=np.int64)
        return e, e, e, np.zeros(0, bool)
    starts = np.flatnonzero(np.concatenate(([True], edge_r[1:] != edge_r[:-1])))
    uedge = edge_r[starts]
    # Sums over the groups by differences of running sums: most edges are a
    # group of one, where reduceat pays a call per group.
    ends = np.append(starts[1:], len(edge_r))
    run = np.concatenate(([0], np.cumsum(w[s_r])))
    weight = run[ends] - run[starts]
    # An edge is inline when every sample's occurrence of it is.
    plain = np.concatenate(([0], np.cumsum(~uflag, dtype=np.int64)))
    inline_edge = plain[ends] == plain[starts]
    if uniq_e is not None:
        uedge = uniq_e[uedge]
    return uedge // n_nodes, uedge % n_nodes, weight, inline_edge


def sorted_nodes(nodes: Nodes, ids: np.ndarray, g: Graph, cum_sort: bool) -> list[int]:
    """pprof's FlatNameOrder / CumNameOrder. pprof treats distinct nodes with one
    printable name as equal (their order is then unspecified); we break such ties
    by |cum| (|flat|) and the node info's Go-printed form."""
    flat, cum = g.flat, g.cum
    id_list = ids.tolist()
    labels = [nodes.label(n) for n in id_list]
    seen: dict[str, int] = {}
    for lbl in labels:
        seen[lbl] = seen.get(lbl, 0) + 1
    a_flat = np.abs(flat[ids]).tolist()
    a_cum = np.abs(cum[ids]).tolist()
    first, second = (a_cum, a_flat) if cum_sort else (a_flat, a_cum)
    keys = [
        (-f, lbl, -c, nodes.sprint(n) if seen[lbl] > 1 else "", n)
        for n, lbl, f, c in zip(id_list, labels, first, second, strict=True)
    ]
    keys.sort()
    return [k[-1] for k in keys]


def present_nodes(g: Graph, kept: np.ndarray | None) -> np.ndarray:
    on = (g.flat != 0) | (g.cum != 0)
    if kept is not None:
        on &= kept
    return np.flatnonzero(on)
