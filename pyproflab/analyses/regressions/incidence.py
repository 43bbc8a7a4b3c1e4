"""Stage 2 of ``regressions``: per profile and node (and caller -> callee edge)
the exact flat and cum values (rule 2 of ``pyproflab.analyses.regressions``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pyproflab.analyses import filters
from pyproflab.analyses.graph import build_nodes, expand_frames
from pyproflab.analyses.regressions.reads import ProfileReads
from pyproflab.analyses.regressions.selection import count_scale
from pyproflab.errors import UsageError
from pyproflab.model import Profile


@dataclass
class Incidence:
    labels: list[str]
    names: list[str]
    files: list[str | None]
    lines: list[int | None]
    stack_ids: np.ndarray  # distinct store stack ids, in profile order
    pair_stack: np.ndarray  # (stack, node) pairs: index into stack_ids
    pair_node: np.ndarray
    pair_leaf: np.ndarray
    paths: list[list[int]]  # per stack: nodes root first
    edges: list[tuple[int, int]]  # distinct (caller, callee) node pairs
    edge_stack: np.ndarray  # (stack, edge) pairs
    edge_index: np.ndarray


@dataclass
class NodeValues:
    """Exact per-profile values: ``pp`` (profile position), ``node``, ``flat``,
    ``cum`` (long, non-zero pairs); ``edge_*`` the same for edges (cum only)."""

    inc: Incidence
    pp: np.ndarray
    node: np.ndarray
    flat: np.ndarray
    cum: np.ndarray
    edge_pp: np.ndarray
    edge: np.ndarray
    edge_cum: np.ndarray
    totals: np.ndarray  # per profile: sum of |value|
    stack_order: np.ndarray
    stack_base: np.ndarray
    stack_new: np.ndarray

    def sums(self, metric: str, group: np.ndarray, n_groups: int) -> np.ndarray:
        """(nodes, groups) sums of ``metric`` (flat, cum or edge_cum: then the
        rows are edges) over the profiles of each group; ``group`` gives a
        group per profile (its side, window or unit)."""
        pp, key = (self.edge_pp, self.edge) if metric == "edge_cum" else (self.pp, self.node)
        rows = len(self.inc.edges) if metric == "edge_cum" else len(self.inc.labels)
        out = np.zeros((rows, n_groups))
        np.add.at(out, (key, group[pp]), getattr(self, metric).astype(float))
        return out


def _incidence_table(stack_ids: np.ndarray, nodes: np.ndarray, leaf: np.ndarray) -> pa.Table:
    """(stack_id, node, leaf) rows for ``ProfileReads.node_sums``."""
    return pa.table(
        {
            "stack_id": pa.array(stack_ids, pa.uint64()),
            "node": pa.array(nodes, pa.int64()),
            "leaf": pa.array(leaf),
        }
    )


def noinlines(profile: Profile) -> Profile:
    """Each location keeps only its last (outermost) line, as pprof's -noinlines."""
    import pyarrow.compute as pc

    from pyproflab import schema

    col = profile.locations.column("lines").combine_chunks()
    n = pc.list_value_length(col).fill_null(0).to_numpy(zero_copy_only=False)
    keep = np.minimum(n, 1)
    starts = n.cumsum() - 1
    flat = col.flatten()
    take = starts[n > 0]
    offsets = np.zeros(len(n) + 1, np.int32)
    np.cumsum(keep, out=offsets[1:])
    lines = pa.ListArray.from_arrays(pa.array(offsets), flat.take(pa.array(take)))
    field = schema.PROFILE_LOCATIONS.field("lines")
    idx = profile.locations.schema.get_field_index("lines")
    locs = profile.locations.set_column(idx, field, lines.cast(field.type))
    return dataclasses.replace(profile, locations=locs)


def _edges(paths: list[list[int]]) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray]:
    """Distinct caller -> callee pairs and the distinct (stack, edge) pairs."""
    ids: dict[tuple[int, int], int] = {}
    pairs: set[tuple[int, int]] = set()
    for s, path in enumerate(paths):
        for a, b in zip(path, path[1:], strict=False):
            if a != b:  # direct recursion is no call between two nodes
                pairs.add((s, ids.setdefault((a, b), len(ids))))
    ordered = sorted(pairs)
    return (
        list(ids),
        np.array([p[0] for p in ordered], np.int64),
        np.array([p[1] for p in ordered], np.int64),
    )


def incidence(
    reads: ProfileReads,
    stack_ids: np.ndarray,
    header: dict,
    main_mapping: int,
    granularity: str,
    inlines: bool,
) -> Incidence:
    """Node paths of the distinct stacks, via ``analyses.graph`` (their rows
    fetched through ``reads``)."""
    from pyproflab.store.merge import assemble_rows

    n = len(stack_ids)
    values = pa.ListArray.from_arrays(
        pa.array(np.arange(n + 1, dtype=np.int32)), pa.array(np.ones(n, np.int64))
    )
    no_labels = np.zeros(n, np.uint64)
    prof = assemble_rows(
        reads.fetch, reads.name, stack_ids, no_labels, values, header, main_mapping
    )
    work = filters.remove_uninteresting(prof)
    if not inlines:
        work = noinlines(work)
    nodes = build_nodes(work, granularity)
    fr = expand_frames(work, nodes, np.ones(n, np.int64), np.ones(n, bool))
    nn = max(nodes.count, 1)
    first = np.ones(len(fr.sample), bool)
    first[1:] = fr.sample[1:] != fr.sample[:-1]
    leaf = np.full(n, -1, np.int64)
    leaf[fr.sample[first]] = fr.node[first]
    pair = np.unique(fr.sample.astype(np.int64) * nn + fr.node)
    ps, pn = pair // nn, pair % nn
    # Frames are leaf first within each stack; paths are root first.
    paths: list[list[int]] = [[] for _ in range(n)]
    for s, nd in zip(fr.sample.tolist(), fr.node.tolist(), strict=True):
        paths[s].append(nd)
    for p in paths:
        p.reverse()
    edges, edge_stack, edge_index = _edges(paths)
    labels = [nodes.label(i) for i in range(nodes.count)]
    with_file = granularity in ("lines", "files")
    return Incidence(
        labels=labels,
        names=[nodes.name[i] or labels[i] for i in range(nodes.count)],
        files=[(nodes.file[i] or None) if with_file else None for i in range(nodes.count)],
        lines=[
            (nodes.lineno[i] or None) if granularity == "lines" else None
            for i in range(nodes.count)
        ],
        stack_ids=stack_ids,
        pair_stack=ps,
        pair_node=pn,
        pair_leaf=leaf[ps] == pn,
        paths=paths,
        edges=edges,
        edge_stack=edge_stack,
        edge_index=edge_index,
    )


def node_values(reads: ProfileReads, sides, granularity: str, inlines: bool) -> NodeValues:
    """One pass over the selected samples: per (profile, node) flat and cum, and
    per (profile, edge) the value through the edge, exact, summed by the engine
    behind ``reads`` (SQL in the store, or Spark)."""
    positions = [idx[sides.sample_index] + 1 for idx in sides.index_lists]
    agg = reads.stack_sums(sides.pids, positions)
    if agg.num_rows == 0:
        raise UsageError("the selected profiles have no samples")
    pos_of = {int(p): i for i, p in enumerate(sides.pids.tolist())}
    a_prof = np.array([pos_of[p] for p in agg.column("profile_id").to_pylist()], np.int64)
    # In the sides' order (the data's), not the engine's (profile ids: ingest order).
    order = np.argsort(a_prof, kind="stable")
    a_prof = a_prof[order]
    a_stack = agg.column("stack_id").to_numpy().astype(np.uint64)[order]
    a_v = agg.column("v").to_numpy()[order]
    a_abs = agg.column("a").to_numpy()[order]
    totals = np.bincount(a_prof, weights=a_abs.astype(float), minlength=len(sides.pids))
    sides.count_scale = count_scale(reads, sides, float(totals.sum()))
    nz = a_v != 0
    uniq, first = np.unique(a_stack[nz], return_index=True)
    stack_order = uniq[np.argsort(first, kind="stable")]
    one_type = dict(sides.header, sample_types=[sides.sample_type])
    one_type["default_sample_type"] = sides.sample_type.type
    inc = incidence(
        reads, stack_order, one_type, sides.rows[0]["main_mapping_id"], granularity, inlines
    )
    values = pa.table(
        {
            "p": pa.array(a_prof[nz]),
            "stack_id": pa.array(a_stack[nz], pa.uint64()),
            "v": pa.array(a_v[nz], pa.int64()),
        }
    )
    stacks = stack_order[inc.pair_stack], stack_order[inc.edge_stack]
    pn = reads.node_sums(values, _incidence_table(stacks[0], inc.pair_node, inc.pair_leaf))
    no_leaf = np.zeros(len(inc.edge_index), bool)
    pe = reads.node_sums(values, _incidence_table(stacks[1], inc.edge_index, no_leaf))
    spos = {int(s): i for i, s in enumerate(stack_order.tolist())}
    s_idx = np.array([spos[int(s)] for s in a_stack[nz].tolist()], np.int64)
    newmask = sides.is_new[a_prof[nz]]
    s_new = np.bincount(s_idx[newmask], weights=a_v[nz][newmask], minlength=len(stack_order))
    s_base = np.bincount(s_idx[~newmask], weights=a_v[nz][~newmask], minlength=len(stack_order))
    col = lambda t, c: t.column(c).to_numpy().astype(np.int64)  # noqa: E731
    return NodeValues(
        inc=inc,
        pp=col(pn, "p"),
        node=col(pn, "node"),
        flat=col(pn, "flat"),
        cum=col(pn, "cum"),
        edge_pp=col(pe, "p"),
        edge=col(pe, "node"),
        edge_cum=col(pe, "cum"),
        totals=totals,
        stack_order=stack_order,
        stack_base=s_base.astype(np.int64),
        stack_new=s_new.astype(np.int64),
    )
