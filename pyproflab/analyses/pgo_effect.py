"""What PGO changed between two builds (``pyproflab pgo effect``).

``pgo_effect(store, before, after)`` compares the stored profiles of two
builds (two selections, e.g. ``version=v1`` and ``version=v1-pgo``), and reads
the compiler's own list of what PGO did from a build log.

Rules:

1. CPU: the regressions analysis (``analyses.regressions``, rates per second,
   or per unit of work with ``per``, a stored counter such as requests; its
   default quasi-Poisson test) on the CPU profiles of each side gives the
   functions whose CPU changed, with intervals; the total's change (cores,
   or CPU seconds per unit of work) is the ratio of the sides' rates
   sum(CPU time) / sum(duration or work), with a Welch interval over the
   profiles (``stats.ratio_variance``, delta method on the log of the
   ratio; ``confidence``, 95%). A build that does the same work for less CPU
   shows per unit of work even when its load changed between the builds.
2. Memory, the side golang/go#65532 reports (PGO grew goroutine stacks and
   memory): the same total's change, per profile (a level, not a rate), of
   the heap in use and allocated (heap profiles: ``inuse_space``,
   ``alloc_space``), the goroutines (goroutine profiles), and the goroutine
   stack memory (``go_memstats_stack_inuse_bytes`` samples stored for the
   CPU profiles' instances inside their windows, one mean per window); and
   the CPU of stack growth (``runtime.newstack`` and ``runtime.copystack``,
   from the CPU comparison's rows). A kind the selections do not hold is
   left out with a note.
3. The compiler's decisions: every line of a ``go build -pgo=PROFILE
   -gcflags=-m -d=pgodebug=1`` log that records a PGO-driven decision, as
   printed: ``hot-budget check allows inlining`` (inlined with the hot budget
   only PGO gives), ``hot-big check disallows inlining`` (a hot call site in
   a function too big), ``PGO devirtualizing interface call`` and
   ``... function call``. One row per distinct line, in the order first
   printed, with how many times it was printed (a call inlined into several
   callers' copies is printed again). ``build_log`` runs that build over the
   module's packages. A build log read from a file (``read_build_log``) holds
   compiler output: a ``# package`` line, a ``FILE.go:LINE:COL:`` message or
   a decision; a file with a NUL byte (a binary) or none of those lines is
   refused, so "no PGO decision" is said only of a log PGO decided nothing in.
   For the same reason ``build_log`` refuses, before building, a profile Go
   rejects or builds with as without PGO (``pgo_edges.usable_edges``: a
   0-byte file, no CPU sample type, no call edges).
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pyproflab.analyses.options import Options, option
from pyproflab.display import render
from pyproflab.errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa

    from pyproflab.analyses.regressions.result import RegressionsResult
    from pyproflab.store.connection import Store
    from pyproflab.store.select import Selection

STACK_FUNCTIONS = ("runtime.newstack", "runtime.copystack")
STACK_METRIC = "go_memstats_stack_inuse_bytes"
_POS = r"(\S+?):(\d+):(\d+)"
_HOT = re.compile(
    r"^hot-(budget check allows|big check disallows) inlining for call (.+) \(cost (\d+)\) "
    rf"at {_POS} in (?:big )?function (.+)$"
)
_DEVIRT = re.compile(rf"^{_POS}: PGO devirtualizing (interface|function) call (.+) to (.+)$")
# A line the Go compiler prints in a build: a package header or a positioned message.
_COMPILER = re.compile(r"^(# \S|\S+\.go:\d+:\d+: )", re.M)


@dataclass(frozen=True)
class EffectOptions(Options):
    """What ``pgo_effect`` takes: the interval's confidence, the CPU rows kept,
    the counter of work CPU is divided by (None: per second). Each is checked
    (``analyses.options``: confidence=2 gave intervals of nothing, top=-1 cut rows)."""

    confidence: float = option(0.95, low=0, high=1, low_open=True, high_open=True)
    top: int = option(10, low=0)
    per: str | None = None


@dataclass(frozen=True)
class Change:
    """One measure on both sides and its relative change with an interval."""

    what: str
    unit: str
    before: float
    after: float
    rel: float
    lo: float
    hi: float
    n_before: int
    n_after: int

    @property
    def significant(self) -> bool:
        return bool(self.lo > 0 or self.hi < 0)


@dataclass(frozen=True)
class Decision:
    """One PGO-driven decision the compiler printed (rule 3)."""

    kind: str  # inline, not inlined (big caller), devirtualize interface / function call
    file: str
    line: int
    column: int
    callee: str  # the inlined callee, or the devirtualized call expression
    caller: str | None = None  # inlines: the function inlined into
    target: str | None = None  # devirtualizations: the concrete callee
    cost: int | None = None
    count: int = 1


@dataclass
class PgoEffect:
    """The two builds compared, and the compiler's PGO decisions."""

    before: str
    after: str
    cpu: Change | None = None
    cpu_rows: list[dict[str, Any]] = field(default_factory=list)
    stack_rows: list[dict[str, Any]] = field(default_factory=list)
    memory: list[Change] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    regressions: RegressionsResult | None = None
    notes: list[str] = field(default_factory=list)
    options: EffectOptions = field(default_factory=EffectOptions)

    def compiler_lines(self) -> list[str]:
        """The decisions as the compiler printed them, each as many times."""
        out = []
        for d in self.decisions:
            pos = f"{d.file}:{d.line}:{d.column}"
            if d.kind.startswith("devirtualize"):
                via = d.kind.split()[1]
                line = f"{pos}: PGO devirtualizing {via} call {d.callee} to {d.target}"
            else:
                verb = "budget check allows" if d.kind == "inline" else "big check disallows"
                big = "" if d.kind == "inline" else "big "
                line = (
                    f"hot-{verb} inlining for call {d.callee} (cost {d.cost}) at {pos} "
                    f"in {big}function {d.caller}"
                )
            out += [line] * d.count
        return out

    def decisions_table(self) -> pa.Table:
        """The compiler's decisions as an Arrow table (one row per decision)."""
        import pyarrow as pa

        cols = [f.name for f in dataclasses.fields(Decision)]
        return pa.table({c: [getattr(d, c) for d in self.decisions] for c in cols})

    def __repr__(self) -> str:
        cpu = "no CPU" if self.cpu is None else f"CPU {self.cpu.rel:+.1%}"
        return f"PgoEffect({self.before} -> {self.after}: {cpu}, {len(self.decisions)} decisions)"

    def __str__(self) -> str:
        return render(self, "text")

    def _repr_html_(self) -> str:
        return render(self, "html")


# --- the compiler's decisions ---------------------------------------------------------


def parse_build_log(text: str) -> list[Decision]:
    """The PGO-driven decisions of a build log (rule 3)."""
    seen: dict[Decision, int] = {}
    rows: list[Decision] = []
    for line in text.splitlines():
        if m := _HOT.match(line):
            kind = "inline" if m.group(1) == "budget check allows" else "not inlined (big caller)"
            d = Decision(
                kind,
                m.group(4),
                int(m.group(5)),
                int(m.group(6)),
                m.group(2),
                caller=m.group(7),
                cost=int(m.group(3)),
            )
        elif m := _DEVIRT.match(line):
            d = Decision(
                f"devirtualize {m.group(4)} call",
                m.group(1),
                int(m.group(2)),
                int(m.group(3)),
                m.group(5),
                target=m.group(6),
            )
        else:
            continue
        if d in seen:
            rows[seen[d]] = dataclasses.replace(rows[seen[d]], count=rows[seen[d]].count + 1)
        else:
            seen[d] = len(rows)
            rows.append(d)
    return rows


def read_build_log(path: str | os.PathLike) -> str:
    """The text of the build log at ``path``; a UsageError naming it when it
    cannot be read or is not a build log (module rule 3)."""
    from pathlib import Path

    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None
    if b"\0" in data:
        raise UsageError(f"{path}: not a build log (binary data)")
    text = data.decode("utf-8", errors="replace")
    if not (_COMPILER.search(text) or parse_build_log(text)):
        raise UsageError(
            f"{path}: not a build log (no compiler output: expected the output of "
            "go build -pgo=PROFILE -gcflags=-m -d=pgodebug=1)"
        )
    return text


def build_log(
    source: str | os.PathLike,
    profile: str | os.PathLike,
    package: str = ".",
    *,
    go: str | None = None,
    timeout: float = 1800,
) -> str:
    """The output of ``go build -pgo=PROFILE -gcflags=MODULE/...=-m -d=pgodebug=1
    PACKAGE`` run in ``source`` (nothing written); a ``UsageError`` with Go's last
    line when the build fails."""
    from pyproflab.analyses.pgo_edges import go_binary, usable_edges

    go = go or go_binary()
    if go is None:
        raise UsageError("pgo effect --source needs Go on PATH to build with the profile")
    env = dict(os.environ, GOFLAGS="", GOWORK="off")
    src, prof = os.fspath(source), os.path.abspath(profile)
    if not os.path.isdir(src):  # Go runs in it: a missing one was a FileNotFoundError
        raise UsageError(f"{src}: not a directory (--source takes a Go module's root)")
    usable_edges(profile, "pgo effect builds with it")  # else Go builds without PGO, silently

    def run(args: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [go, *args], cwd=src, env=env, capture_output=True, text=True, timeout=timeout
        )

    mod = run(["list", "-m"])
    if mod.returncode != 0:
        raise UsageError(f"{src}: not a Go module: {(mod.stderr.strip().splitlines() or [''])[-1]}")
    flags = f"-gcflags={mod.stdout.strip()}/...=-m -d=pgodebug=1"
    done = run(["build", "-o", os.devnull, f"-pgo={prof}", flags, package])
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise UsageError(f"go build -pgo={prof} {package} in {src}: {last}")
    return done.stdout + done.stderr


# --- the two sides --------------------------------------------------------------------


def ratio_change(
    values: np.ndarray, durations: np.ndarray, is_after: np.ndarray, confidence: float
) -> tuple[float, float, float, float, float]:
    """(before, after, rel, lo, hi): the sides' ratios sum(v)/sum(d) and the
    relative change with a Welch interval on the log ratio (rule 1)."""
    import scipy.stats as sps

    from pyproflab.analyses import stats

    sides = []
    for mask in (~is_after, is_after):
        v, d = values[mask].astype(float), durations[mask].astype(float)
        r = v.sum() / d.sum()
        var = stats.ratio_variance(v[:, None], d)[0]
        sides.append((r, var, int(mask.sum())))
    (rb, vb, nb), (ra, va, na) = sides
    if rb <= 0 or ra <= 0:
        return rb, ra, float("nan"), float("nan"), float("nan")
    lb, la = vb / rb**2, va / ra**2  # variances of the logs (delta method)
    _, df = stats.welch_t(np.array([0.0]), np.array([lb]), np.array([la]), nb, na)
    q = float(sps.t.ppf(1 - (1 - confidence) / 2, df[0]))
    b = np.log(ra / rb)
    se = np.sqrt(lb + la)
    return (
        rb,
        ra,
        float(np.exp(b) - 1),
        float(np.exp(b - q * se) - 1),
        float(np.exp(b + q * se) - 1),
    )


def _with_type(sel: Selection, kind: str) -> Selection:
    return dataclasses.replace(sel, profile_type=kind)


def _compare(store, before, after, kind: str, sample: str | None, per: str | None = None):
    """The regressions result of one kind of profile, or None when a side has none."""
    from pyproflab.analyses.regressions import regressions

    b, a = _with_type(before, kind), _with_type(after, kind)
    if store.profiles(b).num_rows == 0 or store.profiles(a).num_rows == 0:
        return None
    return regressions(store, b, a, sample_index=sample, measure="rate", per=per)


def _total(result, what: str, unit: str, scale: float, opts: EffectOptions, work=None) -> Change:
    """The change of a comparison's per-profile totals (rules 1-2); ``work``:
    each profile's units of work (the denominators), else durations or 1."""
    p = result.profiles
    values = np.asarray(p.column("total").to_pylist(), float)
    is_after = np.asarray([s == "new" for s in p.column("side").to_pylist()])
    if work is not None:
        denominators = work
    elif result.rate:
        denominators = np.asarray(p.column("duration_s").to_pylist(), float)
    else:
        denominators = np.ones(len(values))
    rb, ra, rel, lo, hi = ratio_change(values, denominators, is_after, opts.confidence)
    per = "/s" if result.rate and unit != "cores" and work is None else ""
    n_b, n_a = int((~is_after).sum()), int(is_after.sum())
    return Change(what, unit + per, rb * scale, ra * scale, rel, lo, hi, n_b, n_a)


def _work(store, result, counter: str) -> np.ndarray:
    """Each compared profile's increase of ``counter`` (``regressions.units.per_work``)."""
    from pyproflab.analyses.regressions.reads import reads_of
    from pyproflab.analyses.regressions.units import per_work
    from pyproflab.store.select import Selection

    ids = result.profiles.column("profile_id").to_pylist()
    rows = store.profiles(Selection(profile_ids=ids)).to_pylist()
    by_id = {r["profile_id"]: r for r in rows}
    return per_work(reads_of(store), [by_id[i] for i in ids], counter)


def _rows(result, labels: tuple[str, ...] | None, top: int) -> list[dict[str, Any]]:
    keep = (
        "label",
        "cum_rate_base",
        "cum_rate_new",
        "cum_rel",
        "cum_rel_lo",
        "cum_rel_hi",
        "cum_q",
        "flat_rel",
        "flat_rel_lo",
        "flat_rel_hi",
        "direction",
    )
    rows = result.rows.select(list(keep)).to_pylist()
    if labels is not None:
        return [r for r in rows if r["label"] in labels]
    return rows[:top]


def _stack_memory(store, before, after, opts: EffectOptions) -> Change | None:
    """The mean goroutine stack memory per CPU profile window (rule 2)."""
    from pyproflab.store import queries

    values, is_after = [], []
    for flag, sel in ((False, before), (True, after)):
        windows = queries.profile_windows(store, _with_type(sel, "cpu"))
        if windows.num_rows == 0:
            return None
        windows = windows.append_column("key", windows.column("profile_id"))
        if "metric_samples" not in queries.table_names(store):
            return None
        got = queries.window_metric_samples(store, windows, [STACK_METRIC]).to_pylist()
        by: dict[int, list[float]] = {}
        for r in got:
            by.setdefault(r["key"], []).append(r["value"])
        values += [float(np.mean(v)) for v in by.values()]
        is_after += [flag] * len(by)
    if sum(is_after) == 0 or sum(not x for x in is_after) == 0:
        return None
    arr, mask = np.asarray(values), np.asarray(is_after)
    rb, ra, rel, lo, hi = ratio_change(arr, np.ones(len(arr)), mask, opts.confidence)
    return Change(
        "goroutine stacks", "bytes", rb, ra, rel, lo, hi, int((~mask).sum()), int(mask.sum())
    )


def pgo_effect(
    store: Store,
    before: Selection,
    after: Selection,
    options: EffectOptions | None = None,
    *,
    log: str | None = None,
) -> PgoEffect:
    """Compare the builds' stored profiles; ``log``: a build log (``build_log``)
    whose PGO decisions to list (module rules)."""
    opts = options or EffectOptions()
    # Said in this question's words: the comparisons below said "the base and the new".
    ids = [set(store.profiles(s).column("profile_id").to_pylist()) for s in (before, after)]
    if ids[0] & ids[1]:
        both = ids[0] & ids[1]
        raise UsageError(
            f"{len(both)} profiles are in both the before and the after selection "
            f"(e.g. profile {min(both)}); make the selections disjoint"
        )
    out = PgoEffect(before.describe(), after.describe(), options=opts)
    cpu = _compare(store, before, after, "cpu", "cpu", opts.per)
    if cpu is None:
        out.notes.append("no CPU profiles on one side: no CPU change")
    else:
        out.regressions = cpu
        if opts.per:
            work = _work(store, cpu, opts.per)
            out.cpu = _total(cpu, "CPU", f"s/{opts.per}", 1e-9, opts, work)
        else:
            out.cpu = _total(cpu, "CPU", "cores", 1e-9, opts)
        out.cpu_rows = _rows(cpu, None, opts.top)
        out.stack_rows = _rows(cpu, STACK_FUNCTIONS, opts.top)
    for kind, sample, what, unit in (
        ("heap", "inuse_space", "heap in use", "bytes"),
        ("heap", "alloc_space", "allocated", "bytes"),
        ("goroutine", None, "goroutines", "goroutines"),
    ):
        result = _compare(store, before, after, kind, sample)
        if result is None:
            out.notes.append(f"no {kind} profiles on one side: no {what}")
            continue
        out.memory.append(_total(result, what, unit, 1.0, opts))
    stacks = _stack_memory(store, before, after, opts)
    if stacks is None:
        out.notes.append(f"no {STACK_METRIC} samples inside both sides' CPU profile windows")
    else:
        out.memory.append(stacks)
    if log is not None:
        out.decisions = parse_build_log(log)
        if not out.decisions:  # said, so an empty list is not read as "PGO did nothing"
            out.notes.append(
                "the build log holds no PGO decision: it is the output of go build "
                "-pgo=PROFILE -gcflags=-m -d=pgodebug=1 (log= takes its text, or a Path)"
            )
    return out
