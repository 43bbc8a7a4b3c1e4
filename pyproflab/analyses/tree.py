"""``tree`` and ``peek``: each node with its callers and callees, as ``go tool pprof
-tree`` and ``-peek=REGEX`` print them (pprof's ``printTree``).

Rules, re-expressed:

- The nodes and their order are top's (``analyses.top``): the same total,
  filters, node cuts and sort. ``tree`` uses pprof's defaults, nodecount 80,
  node fraction 0.005 and edge fraction 0.001; ``peek`` trims nothing (pprof
  turns -trim off for it: every node and edge).
- ``peek`` keeps the nodes whose printable name matches the regex (search
  anywhere in the name, as Go's ``MatchString``); no match is an error.
- A node's callers are its incoming edges, its callees its outgoing ones,
  among the edges of the shown nodes' graph (edges bridge cut nodes) whose
  |weight| reaches the edge cutoff, or that lead to a node left out of the
  graph for a flat and cum of 0 (a diff that cancels): pprof trims only the
  edges into the graph's nodes, so it prints those whatever their weight.
  Each list is ordered by |weight| descending, then the caller's printable
  name, then the callee's. (pprof compares the signed weights first, so in a
  diff two edges of one |weight| and opposite signs come in an order that
  changes from run to run of ``go tool pprof``; ours is the order above.)
- An edge's share is its weight over its node's cum; it is ``(inline)`` when
  the callee is an inlined frame in every sample where the edge occurs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pyproflab.analyses.filters import compile_regex
from pyproflab.analyses.options import TreeOptions
from pyproflab.analyses.top import TopResult, top_graph
from pyproflab.display import render
from pyproflab.errors import UsageError
from pyproflab.model import Profile


@dataclass
class Edge:
    """One caller or callee of a tree entry."""

    name: str  # the other end's printable name
    weight: int
    inline: bool


@dataclass
class TreeEntry:
    """One node of the tree with its callers and callees, in pprof's order."""

    name: str
    flat: int
    cum: int
    callers: list[Edge] = field(default_factory=list)
    callees: list[Edge] = field(default_factory=list)


@dataclass
class TreeResult:
    """``top``'s facts (header, rows of every node shown) and the tree entries.

    ``entries`` are the nodes printed (for ``peek``, those matching ``symbol``),
    in top's row order; ``sum`` in pprof's text runs over them only.
    """

    top: TopResult
    entries: list[TreeEntry]
    symbol: str | None = None

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        what = f"peek {self.symbol!r}" if self.symbol else "tree"
        return f"TreeResult({what}, {self.top.sample_type}, {len(self.entries)} nodes)"

    def __str__(self) -> str:
        """The text ``go tool pprof -tree`` (or ``-peek``) prints."""
        return render(self, "text")

    def _repr_html_(self) -> str:
        return render(self, "html")


def tree(
    profile: Profile,
    options: TreeOptions | None = None,
    /,
    *,
    symbol: str | None = None,
    **keywords: Any,
) -> TreeResult:
    """Callers and callees of every shown node (see the module rules).

    The options are ``options.TreeOptions``: ``top``'s (sample_index,
    granularity, cum_sort, focus, ignore, hide, show, show_from, tagfocus, ...)
    with pprof's -tree defaults for nodecount, node_fraction and edge_fraction;
    an options object, or its fields as keywords, or both. ``symbol``: print
    only the nodes whose name matches this regex.
    """
    rx = compile_regex("peek", symbol)
    tg = top_graph(profile, TreeOptions.build(options, **keywords))
    g, nodes = tg.graph, tg.nodes
    # pprof trims the edges into the graph's nodes only: an edge into a node whose
    # flat and cum are both 0 (left out of the graph, as where a diff cancels)
    # stays whatever its weight, zero included.
    in_graph = np.zeros(nodes.count, dtype=bool)
    in_graph[tg.order] = True
    strong = (np.abs(g.edge_weight) >= tg.edge_cutoff) | ~in_graph[g.edge_dst]
    src, dst = g.edge_src[strong].tolist(), g.edge_dst[strong].tolist()
    weight, inline = g.edge_weight[strong].tolist(), g.edge_inline[strong].tolist()
    incoming: dict[int, list[tuple[int, int, bool]]] = {}
    outgoing: dict[int, list[tuple[int, int, bool]]] = {}
    for s, d, w, inl in zip(src, dst, weight, inline, strict=True):
        incoming.setdefault(d, []).append((s, w, inl))
        outgoing.setdefault(s, []).append((d, w, inl))
    entries = []
    for n in tg.order:
        name = nodes.label(n)
        if rx is not None and not rx.search(name):
            continue
        callers = sorted(
            (-abs(w), nodes.label(s), name, w, inl) for s, w, inl in incoming.get(n, [])
        )
        callees = sorted(
            (-abs(w), name, nodes.label(d), w, inl) for d, w, inl in outgoing.get(n, [])
        )
        entries.append(
            TreeEntry(
                name,
                int(g.flat[n]),
                int(g.cum[n]),
                [Edge(c[1], c[3], c[4]) for c in callers],
                [Edge(c[2], c[3], c[4]) for c in callees],
            )
        )
    if rx is not None and not entries:
        raise UsageError(f"no matches found for regexp: {symbol}")
    return TreeResult(tg.result, entries, symbol or None)


def peek(profile: Profile, regex: str, **options) -> TreeResult:
    """Callers and callees of the nodes matching ``regex``, as ``go tool pprof
    -peek=REGEX``: nothing is trimmed (every node and edge counts)."""
    if not regex:
        raise UsageError("peek needs a regular expression")
    options.update(nodecount=0, node_fraction=0.0, edge_fraction=0.0)
    return tree(profile, symbol=regex, **options)
