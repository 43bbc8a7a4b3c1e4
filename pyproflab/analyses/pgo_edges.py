"""The call edges the Go compiler takes from a PGO profile, and its hot cutoff.

Rules (Go's ``cmd/internal/pgo.FromPProf`` and ``internal/profile.NewGraph``,
the code ``go tool preprofile`` and ``go build -pgo`` run):

- The weight of a sample is its value of the *first* sample type that is
  ``samples/count`` or ``cpu/nanoseconds``; samples of weight 0 are skipped.
- Only the two leaf locations of a stack make edges (location 1 then 0,
  each location's lines from the outermost to the innermost inlined frame).
  A node is (address, line, function name, start line); consecutive distinct
  nodes make an edge caller -> callee, each node pair once per sample.
- An edge is named (caller name, call-site offset = line - caller's start
  line, callee name); the total weight is the sum of all edge weights.
- Edges are sorted by weight (descending), then caller, callee, offset.
  The compiler's hot call sites are the shortest prefix whose cumulative
  weight exceeds 99% of the total (the edge that crosses the line included),
  as ``inline.hotNodesFromCDF`` computes it.
- The compiler needs start lines: if no node of the graph has one, Go
  refuses the profile.

``compute_edges`` does this in Python; ``preprofile_edges`` runs
``go tool preprofile`` and parses its ``GO PREPROFILE V1`` output, so the
tests can check one against the other.

Preemption (``fold_preemption``): a sample whose leaf is
``runtime.asyncPreempt`` makes an edge from the interrupted function to
``runtime.asyncPreempt`` at the interrupted line. It is not a call: the
profiling signal was delivered as the preemption handler started, so the
CPU time is the interrupted function's (on a busy machine, where goroutines
are preempted often, such samples reach a fifth of a profile). The compiler
takes the edge as it takes any (``pgo.FromPProf`` filters nothing): it
counts in the total and the 99% cutoff, marks the interrupted line as a hot
call site (``inline.PGOInlinePrologue``) and, as a callee without IR at that
line, can stop the devirtualization of an interface call there
(``devirtualize.findHotConcreteCallee``). Folding drops that leaf frame, so
the sample counts for the interrupted function as the leaf and the edge
becomes the real call into it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.compute as pc

from pyproflab.analyses.options import PgoOptions
from pyproflab.arrays import list_parts, to_numpy
from pyproflab.errors import UsageError
from pyproflab.model import Profile

PREEMPT_FUNCTION = "runtime.asyncPreempt"
# The compiler's default -d=pgoinlinecdfthreshold.
HOT_CDF_PERCENT = 99.0
PREPROFILE_HEADER = "GO PREPROFILE V1"
CPU_VALUE_TYPES = (("samples", "count"), ("cpu", "nanoseconds"))


@dataclass(frozen=True)
class EdgeKey:
    """One named call edge: ``caller`` calls ``callee`` at line start+``offset``."""

    caller: str
    callee: str
    offset: int

    def __str__(self) -> str:
        return f"{self.caller} -> {self.callee} (+{self.offset})"


@dataclass(frozen=True)
class Edge:
    """An edge with its weight, cumulative share (%, edges sorted) and hotness."""

    key: EdgeKey
    weight: int
    share: float  # weight / total, percent
    cum_share: float  # cumulative over the sorted edges, percent
    hot: bool  # inside the compiler's 99% cutoff

    @property
    def caller(self) -> str:
        return self.key.caller

    @property
    def callee(self) -> str:
        return self.key.callee

    @property
    def offset(self) -> int:
        return self.key.offset


@dataclass
class EdgeSet:
    """All edges of a profile as the compiler sees them, sorted, with the cutoff applied."""

    edges: list[Edge] = field(default_factory=list)
    total: int = 0
    seen_start_line: bool = True
    source: str = "python"  # "python" or "preprofile"

    @property
    def hot(self) -> list[Edge]:
        return [e for e in self.edges if e.hot]

    def weights(self) -> dict[EdgeKey, int]:
        return {e.key: e.weight for e in self.edges}

    def __len__(self) -> int:
        return len(self.edges)


def value_index(profile: Profile) -> int:
    """Index of the sample type the compiler weighs by, or -1 (Go rejects the profile)."""
    for i, st in enumerate(profile.sample_types):
        if (st.type, st.unit) in CPU_VALUE_TYPES:
            return i
    return -1


def build_edge_set(
    weights: dict[EdgeKey, int],
    *,
    seen_start_line: bool = True,
    source: str = "python",
    cdf_percent: float = HOT_CDF_PERCENT,
) -> EdgeSet:
    """Sort ``weights`` as the compiler does and mark the hot prefix."""
    keys = sorted(weights, key=lambda k: (-weights[k], k.caller, k.callee, k.offset))
    total = sum(weights.values())
    edges: list[Edge] = []
    cum = 0
    crossed = False
    for k in keys:
        w = weights[k]
        cum += w
        # float(value)/float(total)*100, exactly the compiler's WeightInPercentage.
        share = float(w) / float(total) * 100 if total else 0.0
        cum_share = float(cum) / float(total) * 100 if total else 0.0
        edges.append(Edge(k, w, share, cum_share, hot=not crossed))
        if cum_share > cdf_percent:
            crossed = True  # this edge is the last hot one
    return EdgeSet(edges, total, seen_start_line, source)


def compute_edges(profile: Profile, *, cdf_percent: float = HOT_CDF_PERCENT) -> EdgeSet:
    """The compiler's named call edges of ``profile`` (see the module rules)."""
    weights: dict[EdgeKey, int] = {}
    seen_start = False
    for w, keys, start in sample_edges(profile):
        seen_start = seen_start or start
        for k in keys:
            weights[k] = weights.get(k, 0) + w
    weights = {k: w for k, w in weights.items() if w != 0}
    return build_edge_set(weights, seen_start_line=seen_start, cdf_percent=cdf_percent)


def sample_edges(profile: Profile):
    """Per sample, in order: (weight, the edge keys it adds weight to, whether a
    node it weighs has a start line). Samples of weight 0 add nothing."""
    idx = value_index(profile)
    if idx < 0:
        raise UsageError(
            "profile has no samples/count or cpu/nanoseconds sample type: Go rejects it"
        )
    funcs = profile.functions.to_pydict()
    fn_info = {
        fid: (name, start)
        for fid, name, start in zip(funcs["id"], funcs["name"], funcs["start_line"], strict=True)
    }
    locs = profile.locations.to_pydict()
    # location id -> its nodes, innermost first (a node: address, line, name, start line).
    loc_nodes: dict[int, list[tuple[int, int, str, int]]] = {}
    for lid, addr, lines in zip(locs["id"], locs["address"], locs["lines"], strict=True):
        nodes = []
        for ln in lines or [None]:
            if ln is None or not ln["function_id"] or ln["function_id"] not in fn_info:
                nodes.append((addr, 0, "", 0))  # Go: NodeInfo{Address} only
            else:
                name, start = fn_info[ln["function_id"]]
                nodes.append((addr, int(ln["line"]), name, int(start)))
        loc_nodes[lid] = nodes

    s = profile.samples
    if s.num_rows == 0:
        return
    n_types = len(profile.sample_types)
    _, flat = list_parts(s.column("values"))
    if len(flat) == s.num_rows * n_types:  # numpy: pc.list_element would import pandas
        vals = to_numpy(flat).reshape(s.num_rows, n_types)[:, idx].tolist()
    else:
        vals = pc.list_element(s.column("values"), idx).to_pylist()
    stacks = s.column("location_ids").to_pylist()
    for w, stack in zip(vals, stacks, strict=True):
        if not w or not stack:
            yield w, [], False
            continue
        seen_node: set[tuple] = set()
        seen_edge: set[tuple] = set()
        keys: list[EdgeKey] = []
        parent = None
        for i in range(min(1, len(stack) - 1), -1, -1):
            for n in reversed(loc_nodes.get(stack[i], [])):
                saw = n in seen_node
                seen_node.add(n)
                pair = (n, parent)
                if (not saw or pair not in seen_edge) and parent is not None and n != parent:
                    seen_edge.add(pair)
                    keys.append(EdgeKey(parent[2], n[2], parent[1] - parent[3]))
                parent = n
        # Go looks for a start line among the graph's nodes (those with weight).
        yield w, keys, any(n[3] != 0 for n in seen_node)


def fold_preemption(profile: Profile) -> tuple[Profile, int, int]:
    """``profile`` with every leaf ``runtime.asyncPreempt`` frame of a stack of two
    or more dropped (module rules), the number of samples folded and their weight
    (the compiler's sample type)."""
    import dataclasses

    import numpy as np
    import pyarrow as pa

    from pyproflab.arrays import from_numpy

    f = profile.functions.to_pydict()
    pre = {fid for fid, name in zip(f["id"], f["name"], strict=True) if name == PREEMPT_FUNCTION}
    if not pre:
        return profile, 0, 0
    locs = profile.locations.to_pydict()
    pre_locs = [
        lid
        for lid, lines in zip(locs["id"], locs["lines"], strict=True)
        if any(ln["function_id"] in pre for ln in lines or [])
    ]
    s = profile.samples
    offsets, values = list_parts(s.column("location_ids"))
    lengths = np.diff(offsets)
    ids = to_numpy(values)
    first = np.where(lengths > 0, ids[np.minimum(offsets[:-1], max(len(ids) - 1, 0))], 0)
    drop = (lengths >= 2) & np.isin(first, np.asarray(pre_locs, dtype=ids.dtype))
    if not drop.any():
        return profile, 0, 0
    keep = np.ones(len(ids), dtype=bool)
    keep[offsets[:-1][drop]] = False
    new_offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths - drop, out=new_offsets[1:])
    id_type = s.schema.field("location_ids").type
    folded = pa.ListArray.from_arrays(
        from_numpy(new_offsets), from_numpy(ids[keep], id_type.value_type)
    ).cast(id_type)
    idx = value_index(profile)
    weight = 0
    if idx >= 0:
        n = len(profile.sample_types)
        _, flat = list_parts(s.column("values"))
        vals = to_numpy(flat).reshape(s.num_rows, n)[:, idx] if s.num_rows else np.zeros(0)
        weight = int(vals[drop].sum())
    samples = s.set_column(0, "location_ids", folded)
    return dataclasses.replace(profile, samples=samples), int(drop.sum()), weight


# --- go tool preprofile ------------------------------------------------------------


def go_binary() -> str | None:
    """The ``go`` command ($GO, else PATH), or None."""
    env = os.environ.get("GO")
    if env and Path(env).is_file():
        return env
    return shutil.which("go")


def parse_preprofile(text: str, *, cdf_percent: float = HOT_CDF_PERCENT) -> EdgeSet:
    """Parse ``go tool preprofile`` output: the header, then caller, callee,
    "offset weight" lines per edge (already sorted by the compiler's order)."""
    lines = text.split("\n")
    if not lines or lines[0] != PREPROFILE_HEADER:
        raise UsageError(f"not a preprofile output (no {PREPROFILE_HEADER!r} header)")
    body = lines[1:]
    if body and body[-1] == "":
        body = body[:-1]
    if len(body) % 3:
        raise UsageError("truncated preprofile output")
    weights: dict[EdgeKey, int] = {}
    for i in range(0, len(body), 3):
        off, w = body[i + 2].split()
        k = EdgeKey(body[i], body[i + 1], int(off))
        weights[k] = weights.get(k, 0) + int(w)
    return build_edge_set(weights, source="preprofile", cdf_percent=cdf_percent)


def preprofile_edges(
    path: str | os.PathLike, *, go: str | None = None, timeout: float = 300
) -> EdgeSet:
    """Run ``go tool preprofile -i PATH`` and parse its edges.

    Raises ``UsageError`` with Go's message when preprofile rejects the file,
    and ``FileNotFoundError`` when Go is not installed.
    """
    go = go or go_binary()
    if go is None:
        raise FileNotFoundError("go")
    with tempfile.TemporaryDirectory(prefix="pyproflab-preprofile-") as tmp:
        out = Path(tmp) / "edges.txt"
        env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="")
        res = subprocess.run(
            [go, "tool", "preprofile", "-i", os.fspath(path), "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
        if res.returncode != 0:
            msg = (res.stderr or res.stdout).strip().splitlines()
            raise UsageError(f"go tool preprofile rejects {path}: {msg[-1] if msg else 'failed'}")
        return parse_preprofile(out.read_text(encoding="utf-8"))


def read_edges(path: str | os.PathLike) -> EdgeSet:
    """Edges of a file: a preprofile output, else a pprof profile (computed in Python)."""
    p = Path(path)
    try:
        with p.open("rb") as f:  # closed here: left open, -X dev warned of it
            head = f.read(len(PREPROFILE_HEADER))
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None
    if head == PREPROFILE_HEADER.encode():
        return parse_preprofile(p.read_text(encoding="utf-8"))
    from pyproflab.decode import read_profile

    profile = read_profile(p)  # its errors name the file
    try:
        return compute_edges(profile)
    except UsageError as e:  # which of the two files of a diff
        raise UsageError(f"{path}: {e}") from None


def usable_edges(path: str | os.PathLike, asked: str) -> EdgeSet:
    """``read_edges(path)``, refused (a ``UsageError`` naming ``path``, ``asked``
    saying what the command takes) when ``go build -pgo`` rejects the profile
    (no start line) or builds with it as without PGO: no call edge, as in a
    CPU profile without samples or with single-frame ones (a 0-byte file, or
    one without a CPU sample type, is refused by ``read_edges``)."""
    edges = read_edges(path)
    if not edges.total:
        raise UsageError(
            f"{path}: no call edges (no samples, or single-frame ones): "
            f"go build -pgo optimizes nothing with it ({asked})"
        )
    if not edges.seen_start_line:
        raise UsageError(
            f"{path}: no function has a start line: go build -pgo rejects it ({asked})"
        )
    return edges


# --- diff --------------------------------------------------------------------------


@dataclass
class EdgeChange:
    """A hot edge in one or both profiles: weights and shares (None where absent)."""

    key: EdgeKey
    old_weight: int | None
    new_weight: int | None
    old_share: float | None
    new_share: float | None
    old_hot: bool
    new_hot: bool

    @property
    def delta_share(self) -> float:
        return (self.new_share or 0.0) - (self.old_share or 0.0)


@dataclass
class EdgeDiff:
    """Hot edges added, removed and re-weighted between two PGO profiles.

    Rules: an edge is *added* when hot in NEW but not in OLD, *removed* when
    hot in OLD but not in NEW, *re-weighted* when hot in both and its share of
    the total weight moved by at least ``min_change`` percentage points
    (shares, not raw weights: two profiles' totals differ).
    """

    old_total: int
    new_total: int
    added: list[EdgeChange]
    removed: list[EdgeChange]
    reweighted: list[EdgeChange]
    unchanged: int
    min_change: float
    old_hot: int = 0
    new_hot: int = 0
    old_name: str = "OLD"  # how the text names the two sides
    new_name: str = "NEW"

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.reweighted)

    def __str__(self) -> str:
        from pyproflab.display import render

        return render(self, "text")

    def __repr__(self) -> str:
        return (
            f"EdgeDiff({self.old_name} -> {self.new_name}: {len(self.added)} added, "
            f"{len(self.removed)} removed, {len(self.reweighted)} re-weighted hot edges)"
        )


def diff_edges(
    old: EdgeSet, new: EdgeSet, *, min_change: float = PgoOptions.min_change
) -> EdgeDiff:
    """Compare the hot edges of two edge sets (see ``EdgeDiff``)."""
    PgoOptions.build(min_change=min_change)  # NaN or negative: one UsageError line
    o = {e.key: e for e in old.edges}
    n = {e.key: e for e in new.edges}

    def change(k: EdgeKey) -> EdgeChange:
        a, b = o.get(k), n.get(k)
        return EdgeChange(
            k,
            a.weight if a else None,
            b.weight if b else None,
            a.share if a else None,
            b.share if b else None,
            bool(a and a.hot),
            bool(b and b.hot),
        )

    old_hot = {e.key for e in old.edges if e.hot}
    new_hot = {e.key for e in new.edges if e.hot}
    added = [change(k) for k in _ordered(new.edges, new_hot - old_hot)]
    removed = [change(k) for k in _ordered(old.edges, old_hot - new_hot)]
    both = [change(k) for k in _ordered(new.edges, new_hot & old_hot)]
    rew = [c for c in both if abs(c.delta_share) >= min_change]
    rew.sort(key=lambda c: -abs(c.delta_share))
    return EdgeDiff(
        old.total,
        new.total,
        added,
        removed,
        rew,
        len(both) - len(rew),
        min_change,
        len(old_hot),
        len(new_hot),
    )


def _ordered(edges: Iterable[Edge], keys: set[EdgeKey]) -> list[EdgeKey]:
    return [e.key for e in edges if e.key in keys]
