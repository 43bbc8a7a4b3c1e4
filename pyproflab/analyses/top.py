"""``top``: the flat and cumulative values of a profile's nodes, as ``go tool pprof -top``.

The graph itself (nodes, frames, values, edges, order) is ``analyses.graph``;
this module chooses the nodes shown, the markers and the rows.

``top(p, ...)`` equals ``go tool pprof -symbolize=none -top -nodefraction=0
-nodecount=1000000 [-lines|-files] -sample_index=I [-cum] [-focus=RE]
[-ignore=RE]`` row for row: the same printable names, flat and cum integers,
order, and ``(inline)``/``(partial-inline)`` markers.

The rules pprof follows, in its order:

1. Sample types whose name is not unique are dropped (``CompatibilizeSampleTypes``);
   the sample index is taken by number or name (``inuse_`` prefix optional),
   default ``default_sample_type`` else the last type.
2. The total is the sum of |value| over all samples, before any filter; if some
   samples carry the label ``pprof::base=true``, only those count.
3. ``drop_frames`` prunes frames; then focus/ignore drop samples (see filters).
4. Aggregation per granularity. functions: name only; lines: name, file and
   line; files: file only. A node is keyed by (name, file, line, and — only when
   the name is empty — the function's start line and the mapping's file).
   Lines without a function and locations without lines become nodes named
   ``[basename of mapping file]`` or ``<unknown>``. File names lose a
   ``/proc/self/cwd/`` prefix and are cleaned like Go's ``filepath.Clean``.
5. Graph: every frame of a sample with non-zero value adds the value to its
   node's cum once per sample (recursion counts once), the leaf frame to flat.
   Each (caller, callee) pair adds once per sample to an edge, which is inline
   when the callee is an inlined frame of its location (in every sample).
   Nodes whose flat and cum are both zero are not shown.
6. Edges lighter than ``edge_fraction`` of the graph's flat sum are dropped;
   a node is ``(inline)`` when its remaining incoming edges are all inline,
   ``(partial-inline)`` when some are.
7. Rows are sorted by |flat| (or |cum| with ``cum_sort``), then name. When
   ``nodecount`` cuts rows, the graph is rebuilt from the kept nodes only (so
   flat of a leaf that was cut is lost and edges bridge cut frames), as pprof does.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from pyproflab.analyses import filters
from pyproflab.analyses.graph import (
    Frames,
    Graph,
    Nodes,
    build_nodes,
    compute_total,
    expand_frames,
    go_base,
    node_values,
    present_nodes,
    resolve_sample_index,
    sample_values,
    sorted_nodes,
    with_edges,
)
from pyproflab.analyses.options import (
    FILTERS,
    PPROF_EDGE_FRACTION,
    PPROF_NODE_FRACTION,
    TopOptions,
)
from pyproflab.analyses.rows import NODE_FIELDS, RowsResult
from pyproflab.arrays import from_numpy, from_strings
from pyproflab.display import render
from pyproflab.model import Profile, ValueType

ROWS_SCHEMA = pa.schema(
    [
        pa.field("flat", pa.int64(), nullable=False),
        pa.field("flat_pct", pa.float64(), nullable=False),
        pa.field("sum_pct", pa.float64(), nullable=False),
        pa.field("cum", pa.int64(), nullable=False),
        pa.field("cum_pct", pa.float64(), nullable=False),
        *NODE_FIELDS,
        pa.field("inline", pa.string(), nullable=False),
    ]
)


@dataclass
class TopResult(RowsResult):
    """The rows of a top report plus the facts pprof prints above them.

    ``rows`` has ``ROWS_SCHEMA``: exact ``flat``/``cum`` integers in the sample
    type's unit, percentages of ``total`` (absolute, as pprof prints them),
    ``label`` as pprof prints the node, ``inline`` marker.
    """

    rows: pa.Table
    sample_type: ValueType
    sample_index: int
    total: int
    granularity: str
    nodecount: int | None
    cum_sort: bool
    shown_total: int  # flat sum of the rows shown
    node_count_before: int  # nodes before nodecount cut them
    dropped_nodes: int  # nodes below node_fraction
    node_fraction: float
    edge_fraction: float
    focus: str | None = None
    ignore: str | None = None
    file: str = ""  # base name of the first mapping's file
    build_id: str = ""
    comments: list[str] = field(default_factory=list)
    doc_url: str = ""
    time_nanos: int = 0
    duration_nanos: int = 0
    sample_types: list[ValueType] = field(default_factory=list)
    # pprof's other filters in effect (hide, show, show_from, tag{focus,ignore,show,hide}).
    filters: dict[str, str] = field(default_factory=dict)
    # What pprof does not say: the CPU profiles held clearly less CPU than their
    # processes used (analyses.cpu_coverage), when the front end could tell.
    notes: list[str] = field(default_factory=list)

    @property
    def active_filters(self) -> list[str]:
        """``name=value`` of each filter in effect, in the order pprof lists them."""
        given = {"focus": self.focus, "ignore": self.ignore, **self.filters}
        order = ("focus", "ignore", *FILTERS)
        return [f"{k}={given[k]}" for k in order if given.get(k)]

    def header_lines(self, value_format=None) -> list[str]:
        """The lines pprof prints above the table (see reports.top)."""
        return render(self, "header_lines", fmt=value_format)

    def _repr_html_(self) -> str:
        return render(self, "html", max_rows=200)

    def __repr__(self) -> str:
        return (
            f"TopResult({self.sample_type}, {self.granularity}, {self.rows.num_rows} rows, "
            f"total={self.total})"
        )

    def __str__(self) -> str:
        """The rows as ``go tool pprof -top`` prints them (``print(top(p))``)."""
        return render(self, "text")


def top(profile: Profile, options: TopOptions | None = None, /, **keywords: Any) -> TopResult:
    """Top nodes of ``profile`` exactly as ``go tool pprof -top`` computes them.

    The options are ``options.TopOptions`` (defaults and ranges there): an
    options object, or its fields as keywords, or both (keywords win).
    ``sample_index``: number or type name (default: the profile's default type,
    else the last). ``nodecount``: keep the first N rows (None or 0: all).
    ``focus``/``ignore``: Python regular expressions (see ``filters``).
    ``edge_fraction``/``node_fraction``: pprof's -edgefraction/-nodefraction.
    ``hide``/``show``/``show_from``/``tagfocus``/``tagignore``: pprof's options of
    those names (see ``pprof_filters``), applied like focus after the total is computed.
    ``tagshow``/``taghide`` change no value; they are listed among the active filters.
    """
    return top_graph(profile, TopOptions.build(options, **keywords)).result


@dataclass
class Prepared:
    """A profile ready for a report: pprof's total taken, then its filters applied."""

    profile: Profile  # after compatibilize_sample_types
    index: int
    total: int
    work: Profile  # drop_frames pruned, pprof's filters applied
    w_all: np.ndarray  # per sample of ``work``: the value at ``index``
    keep: np.ndarray  # per sample of ``work``: counted (non-zero, focus/ignore kept)
    filters: dict[str, str]  # pprof's filters given (besides focus/ignore)


def prepare(
    profile: Profile,
    sample_index: int | str | None,
    focus: str | None = None,
    ignore: str | None = None,
    **pprof_options: str | None,
) -> Prepared:
    """pprof's steps before any graph (rules 1-3 of the module docstring)."""
    from pyproflab.analyses.sample_types import compatibilize_sample_types

    profile = compatibilize_sample_types([profile])[0]
    index = resolve_sample_index(profile, sample_index)
    total = compute_total(profile, index)
    work = filters.remove_uninteresting(profile)
    mask = filters.sample_mask(work, focus, ignore)
    if any(pprof_options.values()):
        from pyproflab.analyses import pprof_filters

        # pprof decides focus/ignore on the locations' lines before hide/show change them.
        if mask is not None:
            work = dataclasses.replace(work, samples=work.samples.filter(pa.array(mask)))
            mask = None
        work = pprof_filters.apply(work, **pprof_options)
    w_all = sample_values(work, index)
    keep = w_all != 0
    if mask is not None:
        keep &= mask
    given = {k: v for k, v in pprof_options.items() if v}
    return Prepared(profile, index, total, work, w_all, keep, given)


@dataclass
class TopGraph:
    """A top report's result with the graph it was read from (for tree and peek)."""

    result: TopResult
    nodes: Nodes
    graph: Graph  # of the shown nodes, edges included
    order: list[int]  # node ids of the rows
    edge_cutoff: int  # |weight| an edge needs to count (pprof's -edgefraction)


def pprof_top(profile: Profile, nodecount: int | None = None, /, **keywords: Any) -> TopResult:
    """``top`` with pprof's command-line trimming (``options.PPROF_NODE_FRACTION``
    and ``PPROF_EDGE_FRACTION``) unless given: what ``pyproflab top --nodecount N``
    and ``go tool pprof -top -nodecount=N`` print, "Dropped N nodes" line included
    (``top``'s own default trims no node)."""
    keywords["nodecount"] = nodecount
    keywords.setdefault("node_fraction", PPROF_NODE_FRACTION)
    keywords.setdefault("edge_fraction", PPROF_EDGE_FRACTION)
    return top(profile, **keywords)


def top_graph(profile: Profile, opts: TopOptions) -> TopGraph:
    """``top`` with its options, keeping the graph: ``TopGraph``."""
    granularity, nodecount, cum_sort = opts.granularity, opts.nodecount, opts.cum_sort
    focus, ignore = opts.focus, opts.ignore
    node_fraction, edge_fraction = opts.node_fraction, opts.edge_fraction
    prep = prepare(profile, opts.sample_index, focus, ignore, **opts.filters())
    profile, index, total, work = prep.profile, prep.index, prep.total, prep.work
    nodes = build_nodes(work, granularity)
    frames = expand_frames(work, nodes, prep.w_all, prep.keep)
    shown_nodes = _shown_nodes(nodes, frames, node_fraction, nodecount, cum_sort)
    g, order = shown_nodes.graph, shown_nodes.order
    edge_cutoff = shown_nodes.edge_cutoff(edge_fraction)
    has_inline, has_plain = _inline_markers(g, nodes.count, edge_cutoff)
    rows = _rows(nodes, order, g, total, has_inline, has_plain, granularity)
    # An int64 sum, wrapping past 2**63 as pprof's does (the total wraps so too).
    shown = (sum(int(g.flat[i]) for i in order) + 2**63) % 2**64 - 2**63
    mappings = work.mappings
    first_map = mappings.slice(0, 1).to_pylist()[0] if mappings.num_rows else None
    result = TopResult(
        rows=rows,
        sample_type=profile.sample_types[index],
        sample_index=index,
        total=total,
        granularity=granularity,
        nodecount=nodecount or None,
        cum_sort=cum_sort,
        shown_total=shown,
        node_count_before=shown_nodes.before,
        dropped_nodes=shown_nodes.dropped,
        node_fraction=node_fraction,
        edge_fraction=edge_fraction,
        focus=focus or None,
        ignore=ignore or None,
        filters=prep.filters,
        file=go_base(first_map["filename"]) if first_map and first_map["filename"] else "",
        build_id=first_map["build_id"] if first_map else "",
        comments=list(profile.comments),
        doc_url=profile.doc_url,
        time_nanos=profile.time_nanos,
        duration_nanos=profile.duration_nanos,
        sample_types=list(profile.sample_types),
    )
    return TopGraph(result, nodes, g, order, edge_cutoff)


@dataclass
class _Shown:
    """The nodes a top report shows, in order, and the graph of those nodes."""

    graph: Graph
    order: list[int]
    total_value: int  # flat sum of every present node, before any cut
    before: int  # nodes present before nodecount cut them
    dropped: int  # nodes below node_fraction

    def edge_cutoff(self, edge_fraction: float) -> int:
        return abs(int(float(self.total_value) * edge_fraction))


def _shown_nodes(
    nodes: Nodes, frames: Frames, node_fraction: float, nodecount: int | None, cum_sort: bool
) -> _Shown:
    """pprof's node selection: drop nodes whose |cum| is under ``node_fraction`` of
    the flat sum, order them, keep the first ``nodecount``, rebuilding the graph
    from the kept nodes after each cut. Flat and cum decide the nodes kept; the
    edges (for the inline markers) come from the last graph only."""
    n = nodes.count
    g = node_values(frames, n, None)
    ids = present_nodes(g, None)
    total_value = int(g.flat[ids].sum())
    node_cutoff = abs(int(float(total_value) * node_fraction))
    dropped = 0
    kept: np.ndarray | None = None
    if node_cutoff > 0:
        big = ids[np.abs(g.cum[ids]) >= node_cutoff]
        if len(big) != len(ids):
            dropped = len(ids) - len(big)
            kept = np.zeros(n, dtype=bool)
            kept[big] = True
            g = node_values(frames, n, kept)
            ids = present_nodes(g, kept)
    before = len(ids)
    order = sorted_nodes(nodes, ids, g, cum_sort)
    if nodecount and nodecount < len(order):
        kept = np.zeros(n, dtype=bool)
        kept[order[:nodecount]] = True
        g = node_values(frames, n, kept)
        order = sorted_nodes(nodes, present_nodes(g, kept), g, cum_sort)
    return _Shown(with_edges(g, frames, n, kept), order, total_value, before, dropped)


def _inline_markers(g: Graph, n: int, edge_cutoff: int) -> tuple[np.ndarray, np.ndarray]:
    """Per node: (has an inline incoming edge, has a non-inline one), among the
    edges whose |weight| reaches the cutoff: ``(inline)`` when only the first,
    ``(partial-inline)`` when both."""
    strong = np.abs(g.edge_weight) >= edge_cutoff
    has_inline = np.zeros(n, dtype=bool)
    has_plain = np.zeros(n, dtype=bool)
    has_inline[g.edge_dst[strong & g.edge_inline]] = True
    has_plain[g.edge_dst[strong & ~g.edge_inline]] = True
    return has_inline, has_plain


def _rows(
    nodes: Nodes,
    order: list[int],
    g: Graph,
    total: int,
    has_inline: np.ndarray,
    has_plain: np.ndarray,
    granularity: str,
) -> pa.Table:
    idx = np.array(order, dtype=np.int64)
    flat_np, cum_np = g.flat[idx], g.cum[idx]
    running = np.cumsum(flat_np)
    denom = float(total) if total else 1.0
    scale = 100.0 / denom if total else 0.0
    labels = [nodes.label(i) for i in order]
    inline = [
        ("(partial-inline)" if has_plain[i] else "(inline)") if has_inline[i] else "" for i in order
    ]
    with_file = granularity in ("lines", "files")
    lines_shown = granularity == "lines"
    lineno = np.array([nodes.lineno[i] if lines_shown else 0 for i in order], np.int64)
    cols = [
        from_numpy(flat_np, pa.int64()),
        from_numpy(np.abs(flat_np / denom) * 100 if total else flat_np * scale, pa.float64()),
        from_numpy(np.abs(running / denom) * 100 if total else running * scale, pa.float64()),
        from_numpy(cum_np, pa.int64()),
        from_numpy(np.abs(cum_np / denom) * 100 if total else cum_np * scale, pa.float64()),
        from_strings([nodes.name[i] or lbl for i, lbl in zip(order, labels, strict=True)]),
        from_strings([(nodes.file[i] or None) if with_file else None for i in order]),
        from_numpy(lineno, pa.int64(), mask=lineno == 0),  # no line: null
        from_strings(labels),
        from_strings(inline),
    ]
    return pa.Table.from_arrays(cols, schema=ROWS_SCHEMA)


def format_time(nanos: int) -> str:
    """pprof's header time (local zone, ``2006-01-02 15:04:05 MST``)."""
    t = time.localtime(nanos // 1_000_000_000)
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", t)
