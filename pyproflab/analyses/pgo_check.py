"""Is a PGO profile still true of today's source? (``pyproflab pgo check``)

The compiler matches a profile to source by name and line offset only
(``cmd/compile/internal/pgoir``, ``inline.PGOInlinePrologue``): a hot edge
(caller, callee, offset) marks the line ``start(caller) + offset`` of the
function named ``caller`` as a hot call site, and a callee named in a hot edge
gets the hot inlining budget (2,000 instead of 80). An interface call is
devirtualized to the hottest profiled callee at its line. So after a refactor
a hot edge still *applies* exactly when the compiler still acts on it.

Rules, per hot edge (the compiler's 99% cutoff, ``pgo_edges``):

1. *outside*: the caller is not a function of the module under ``--source``
   (standard library, dependencies): not checked, not counted.
2. *runtime*: the callee is in the runtime (``runtime.asyncPreempt``, which is
   preemption, or a helper the compiler inserts, such as ``runtime.mallocgc``)
   and the line holds no explicit call to it: not a call in the source, so
   neither counted nor checked. *closure of an inlined copy*: the caller is
   a closure copied when its function was inlined (``main.F.G.func1`` for
   ``main.G.func1`` inlined into F; numbered among F's closures, so any
   ``main.F.G.funcN`` when G has a closure): the compiler makes that copy
   after it has matched the profile, so it never applies such an edge, fresh
   or not; not counted either.
3. Every other hot edge is checked and counted, by weight:
   - *applies*: the caller exists (by linker name) and the line at its
     offset holds a call to the callee (same name; for ``x.M()``, the same
     method name, as types are not known);
   - *applies elsewhere*: the line holds no call to the callee but one the
     compiler still acts on, as it matches lines, not callees: a call to
     another callee named in a hot edge (it gets the hot budget), or
     ``x.M()`` where M is an interface method's name (the call may be an
     interface call) and another edge at the same line goes to a method M
     (it is devirtualized to it);
   - *not applied*: the caller is gone (renamed, moved), or the offset falls
     outside it, or the line holds no call, or only calls to callees no hot
     edge names (a renamed or moved callee gets no hot budget).
4. Generic functions appear in profiles under their shape names
   (``pkg.F[go.shape.int]``), which the compiler matches; the source knows no
   shapes, so names are compared with type arguments left out.
5. Start lines do not decide anything: the compiler uses offsets from the
   function's current start, so lines added above a function change nothing.
   A moved start line (profile against source) is reported per edge.
6. The share that applies is (applies + applies elsewhere) / checked weight.
   Verdict: ``current`` at or above ``current_at`` (90%), ``stale`` below
   ``stale_below`` (50%: most of the profile no longer matches, the question
   of golang/go#70291), ``aging`` between.

The source is read by the Go helper (``pyproflab-go pgo index``, go/parser):
names, start and end lines, and the calls on each line.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pyproflab.analyses.options import Options, option
from pyproflab.analyses.pgo_edges import HOT_CDF_PERCENT, Edge, EdgeSet, usable_edges
from pyproflab.display import render
from pyproflab.errors import UsageError

APPLIES, ELSEWHERE = "applies", "applies elsewhere"
CALLER_GONE, OUTSIDE_FUNC = "caller gone", "offset outside the caller"
NO_CALL, COLD_CALL = "no call at the line", "calls no hot callee"
OUTSIDE, RUNTIME = "outside the module", "runtime (not a call)"
COPY = "closure of an inlined copy"
APPLIED = (APPLIES, ELSEWHERE)
NOT_COUNTED = (OUTSIDE, RUNTIME, COPY)
RUNTIME_PACKAGES = ("runtime",)
RUNTIME_PREFIXES = ("internal/runtime/", "runtime/internal/")


@dataclass(frozen=True)
class CheckOptions(Options):
    """What ``check`` takes (defaults: the compiler's cutoff, the verdict bounds),
    percentages, each checked (``analyses.options``)."""

    current_at: float = option(90.0, low=0, high=100)
    stale_below: float = option(50.0, low=0, high=100)
    cdf_percent: float = option(HOT_CDF_PERCENT, low=0, high=100, low_open=True)


@dataclass(frozen=True)
class EdgeCheck:
    """One hot edge against the source: its status and what was found."""

    edge: Edge
    status: str
    file: str | None = None  # the caller's file (module-relative)
    line: int | None = None  # start(caller) + offset, in today's source
    calls: tuple[str, ...] = ()  # what the line calls
    target: str | None = None  # the hot callee the line's call goes to
    caller_moved: int | None = None  # today's start line - the profile's
    callee_state: str | None = None  # for a callee in the module: found, moved N, gone

    @property
    def counted(self) -> bool:
        return self.status not in NOT_COUNTED

    @property
    def applied(self) -> bool:
        return self.status in APPLIED


@dataclass
class PgoCheckResult:
    """Every hot edge of a profile checked against a module's source."""

    profile: str
    source: str
    module: str
    checks: list[EdgeCheck]
    total_weight: int  # all edges, as the compiler totals them
    options: CheckOptions = field(default_factory=CheckOptions)

    def weight(self, statuses: Iterable[str] | None = None) -> int:
        """Hot weight of the counted edges (of ``statuses`` when given)."""
        want = set(statuses) if statuses is not None else None
        return sum(
            c.edge.weight for c in self.checks if c.counted and (want is None or c.status in want)
        )

    @property
    def checked_weight(self) -> int:
        return self.weight()

    @property
    def share(self) -> float | None:
        """Percent of the checked hot weight the compiler still applies."""
        total = self.checked_weight
        return 100.0 * self.weight(APPLIED) / total if total else None

    @property
    def intact_share(self) -> float | None:
        """Percent of the checked hot weight whose line still calls its own callee."""
        total = self.checked_weight
        return 100.0 * self.weight([APPLIES]) / total if total else None

    @property
    def verdict(self) -> str:
        s = self.share
        if s is None:
            return "unknown"
        if s >= self.options.current_at:
            return "current"
        return "stale" if s < self.options.stale_below else "aging"

    def by_status(self) -> dict[str, tuple[int, int]]:
        """status -> (hot edges, their weight), every status seen."""
        out: dict[str, tuple[int, int]] = {}
        for c in self.checks:
            n, w = out.get(c.status, (0, 0))
            out[c.status] = (n + 1, w + c.edge.weight)
        return out

    def __repr__(self) -> str:
        s = self.share
        share = "no checked edges" if s is None else f"{s:.1f}% applies"
        return f"PgoCheckResult({self.verdict}: {share}, {len(self.checks)} hot edges)"

    def __str__(self) -> str:
        return render(self, "text")

    def _repr_html_(self) -> str:
        return render(self, "html")


# --- the source index (Go helper) -----------------------------------------------------


def index_source(source: str | os.PathLike) -> dict:
    """The module's functions and calls, from ``pyproflab-go pgo index``."""
    from pyproflab.gohelper import helper_binary

    src = os.fspath(source)
    if not Path(src).is_dir():
        raise UsageError(f"{src}: not a directory (--source takes a Go module's root)")
    binary = helper_binary("pyproflab pgo check")
    done = subprocess.run(
        [os.fspath(binary), "pgo", "index", "-source", src],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["failed"]
        raise UsageError(lines[-1].removeprefix("pyproflab-go pgo: "))
    return json.loads(done.stdout)


# --- names ----------------------------------------------------------------------------


def without_type_args(name: str, shown: str = "") -> str:
    """``name`` with every outermost ``[...]`` replaced by ``shown``."""
    flat, depth = [], 0
    for ch in name:
        if ch == "[":
            depth += 1
            if depth == 1:
                flat.append(shown)
        elif ch == "]":
            depth = max(depth - 1, 0)
        elif depth == 0:
            flat.append(ch)
    return "".join(flat)


def generic_key(name: str) -> str:
    """How a function is looked up: its type arguments shown as ``[...]``."""
    return without_type_args(name, "[...]") if "[" in name else name


def split_symbol(name: str) -> tuple[str, list[str]]:
    """(package prefix, the dotted parts after it) of a linker symbol name (type
    arguments left out, so their dots do not split)."""
    s = without_type_args(name)
    slash = s.rfind("/")
    dot = s.find(".", slash + 1)
    if dot < 0:
        return s, []
    return s[:dot], s[dot + 1 :].split(".")


def _closure_part(p: str) -> bool:
    return p.isdigit() or (p.startswith("func") and p[4:].isdigit())


def method_name(name: str) -> str | None:
    """The method's name when ``name`` is a method (``pkg.T.M``, ``pkg.(*T).M``)."""
    _, parts = split_symbol(name)
    if len(parts) >= 2 and not _closure_part(parts[1]) and parts[0] != "init":
        return parts[1].removesuffix("-fm")
    return None


def is_runtime(name: str) -> bool:
    pkg, _ = split_symbol(name)
    return pkg in RUNTIME_PACKAGES or pkg.startswith(RUNTIME_PREFIXES)


def _call_matches(call: dict, callee: str) -> bool:
    kind, name = call["kind"], call["name"]
    if kind in ("func", "closure"):
        return without_type_args(name) == without_type_args(callee)
    if kind == "method":
        return method_name(callee) == name
    return kind == "indirect" and method_name(callee) is None


def _show_call(call: dict) -> str:
    if call["kind"] == "method":
        return f".{call['name']}()"
    return f"{call['name'] or '(indirect)'}()"


# --- the check ------------------------------------------------------------------------


def check(
    profile: str | os.PathLike,
    source: str | os.PathLike,
    options: CheckOptions | None = None,
    *,
    index: dict | None = None,
) -> PgoCheckResult:
    """Check ``profile``'s hot edges against the module at ``source`` (module rules).

    ``profile`` is a pprof file (a default.pgo) or ``go tool preprofile``
    output; ``index`` (from ``index_source``) skips running the Go helper."""
    options = options or CheckOptions()
    edges = usable_edges(profile, "pgo check takes the profile go build -pgo reads")
    if options.cdf_percent != HOT_CDF_PERCENT:
        from pyproflab.analyses.pgo_edges import build_edge_set

        edges = build_edge_set(edges.weights(), cdf_percent=options.cdf_percent)
    starts = _profile_start_lines(profile)
    idx = index if index is not None else index_source(source)
    checks = check_edges(edges, idx, starts)
    return PgoCheckResult(
        os.fspath(profile), os.fspath(source), idx["module"], checks, edges.total, options
    )


def _profile_start_lines(path: str | os.PathLike) -> dict[str, int]:
    """Function name -> start line from a pprof profile (empty for preprofile text)."""
    from pyproflab.analyses.pgo_edges import PREPROFILE_HEADER

    with open(path, "rb") as f:
        if f.read(len(PREPROFILE_HEADER)) == PREPROFILE_HEADER.encode():
            return {}
    from pyproflab.decode import read_profile

    fn = read_profile(path).functions.to_pydict()
    out: dict[str, int] = {}
    for name, start in zip(fn["name"], fn["start_line"], strict=True):
        if start:
            out.setdefault(name, int(start))
    return out


@dataclass
class _Context:
    funcs: dict[str, dict]
    prefixes: set[str]
    hot_callees: list[str]  # sorted
    at_site: dict[tuple[str, int], set[str]]  # (caller, offset) -> callees, every edge
    interface_methods: set[str]


def check_edges(edges: EdgeSet, index: dict, starts: dict[str, int]) -> list[EdgeCheck]:
    """Each hot edge of ``edges`` against the source ``index`` (module rules)."""
    at_site: dict[tuple[str, int], set[str]] = {}
    for e in edges.edges:
        at_site.setdefault((e.caller, e.offset), set()).add(e.callee)
    ctx = _Context(
        {f["name"]: f for f in index["functions"]},
        {p["prefix"] for p in index["packages"]},
        sorted({e.callee for e in edges.hot}),
        at_site,
        set(index.get("interface_methods") or ()),
    )
    return [_check_one(e, ctx, starts) for e in edges.hot]


def _acts_elsewhere(e: Edge, at: list[dict], ctx: _Context) -> str | None:
    """The callee the compiler acts on at this line instead of ``e.callee``."""
    for c in at:
        if c["kind"] == "method" and c["name"] in ctx.interface_methods:
            pool = sorted(ctx.at_site.get((e.caller, e.offset), ()))
        elif c["kind"] in ("func", "method", "closure"):
            pool = ctx.hot_callees
        else:
            continue
        for h in pool:
            if h != e.callee and _call_matches(c, h):
                return h
    return None


def _check_one(e: Edge, ctx: _Context, starts: dict[str, int]) -> EdgeCheck:
    funcs, prefixes = ctx.funcs, ctx.prefixes
    if split_symbol(e.caller)[0] not in prefixes:
        return EdgeCheck(e, OUTSIDE)
    callee_state = _callee_state(e.callee, funcs, prefixes, starts)
    fn = funcs.get(generic_key(e.caller))
    if fn is None:
        if is_runtime(e.callee):
            status = RUNTIME
        elif _inlined_copy(e.caller, funcs):
            status = COPY
        else:
            status = CALLER_GONE
        return EdgeCheck(e, status, callee_state=callee_state)
    moved = fn["start"] - starts[e.caller] if e.caller in starts else None
    line = fn["start"] + e.offset
    at = [c for c in fn["calls"] if c["line"] == line]
    shown = tuple(_show_call(c) for c in at)
    base = dict(file=fn["file"], line=line, calls=shown, caller_moved=moved)
    own = any(_call_matches(c, e.callee) for c in at)
    if is_runtime(e.callee) and not own:
        return EdgeCheck(e, RUNTIME, callee_state=callee_state, **base)
    if not fn["start"] <= line <= fn["end"]:
        return EdgeCheck(e, OUTSIDE_FUNC, callee_state=callee_state, **base)
    if own:
        return EdgeCheck(e, APPLIES, target=e.callee, callee_state=callee_state, **base)
    if not at:
        return EdgeCheck(e, NO_CALL, callee_state=callee_state, **base)
    other = _acts_elsewhere(e, at, ctx)
    if other is not None:
        return EdgeCheck(e, ELSEWHERE, target=other, callee_state=callee_state, **base)
    return EdgeCheck(e, COLD_CALL, callee_state=callee_state, **base)


def _inlined_copy(name: str, funcs: dict) -> bool:
    """Whether ``name`` is a closure of the source under a longer name: the copy
    inlining made (``pkg.F.G.func2`` when ``pkg.G`` has a closure). The copy is
    numbered among the closures of the function it was inlined into, not as in
    ``G`` (go tool nm on a build: ``main.(*api).search.optionalFilters.hasTag.func2``
    for the one closure of ``hasTag``, ``main.hasTag.func1``), so only its owner
    is matched."""
    pkg, parts = split_symbol(name)
    closure = next((i for i, p in enumerate(parts) if _closure_part(p)), None)
    if closure is None or closure < 2:
        return False
    owners = {_closure_owner(f) for f in funcs}
    return any(
        generic_key(f"{pkg}.{'.'.join(parts[i:closure])}") in owners for i in range(1, closure)
    )


def _closure_owner(name: str) -> str | None:
    """``pkg.G`` for a closure ``pkg.G.func1`` (or ``pkg.G.func1.2``), else None."""
    pkg, parts = split_symbol(name)
    closure = next((i for i, p in enumerate(parts) if _closure_part(p)), None)
    return generic_key(f"{pkg}.{'.'.join(parts[:closure])}") if closure else None


def _callee_state(callee: str, funcs: dict, prefixes: set[str], starts: dict[str, int]) -> str:
    if split_symbol(callee)[0] not in prefixes:
        return "outside the module"
    fn = funcs.get(generic_key(callee))
    if fn is None:
        return "gone"
    if callee in starts and fn["start"] != starts[callee]:
        return f"moved {fn['start'] - starts[callee]:+d} lines"
    return "found"
