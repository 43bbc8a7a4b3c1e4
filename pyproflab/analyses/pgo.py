"""A fleet's CPU profiles turned into a ``default.pgo`` for ``go build -pgo``.

Rules, in the order they apply:

1. Selection (store): the profiles of the selection that have a CPU sample
   type, ranked by CPU cores (CPU time / duration), the top ``top`` (5) kept,
   as datadog-pgo does; ``all=True`` keeps them all. Files: every file given.
2. Stripping: only ``samples/count`` and ``cpu/nanoseconds`` are kept (in
   that order, the first one the compiler weighs by); labels are dropped;
   samples whose values are all zero are dropped. Function names, system
   names, files, start lines, line numbers, inline frames, mappings and
   addresses are kept. Inputs without a CPU sample type are skipped (noted).
3. Weighting (golang/go#64487): ``none`` adds the profiles as ``go tool
   pprof -proto`` merges them, so a long or busy instance dominates.
   ``duration`` normalises each profile by its duration: every value of
   profile *i* is multiplied by the integer
   ``f_i = round(RATE_RESOLUTION * max_duration / duration_i)``, so a 10 s
   and a 60 s profile count per second, not per length. ``instance`` makes
   each instance count once: all values of instance *i*'s profiles are
   multiplied by ``f_i = round(RATE_RESOLUTION * max_W / W_i)``, ``W_i``
   being the instance's total CPU weight (the compiler's sample type), so
   every instance brings the same weight however long it ran, however many
   profiles it has and however busy it was (a file is an instance of its
   own; a stored profile's instance is its service and ``instance``,
   ``service/instance``, so two services' ``pod-0`` are two instances; with
   one of them, that one).
   Multiplying by integers keeps every value an exact integer (dividing would
   round small samples to zero); the compiler only uses shares of the total,
   so the common factor changes nothing, and since every ``f_i >=
   RATE_RESOLUTION`` (1000) the ratio ``f_i / f_j`` is within 0.1% of the
   exact one. ``sum`` and ``rate`` are the old names of ``none`` and
   ``duration``.
4. Merging: pprof's merge (``analyses.merge``).
5. Preemption (``fold_preempt``, on by default): leaf ``runtime.asyncPreempt``
   frames are dropped, so those samples count for the function they
   interrupted (``pgo_edges.fold_preemption`` says why: not a call edge).
6. Safeguards: functions on the safeguard list are *renamed* to
   ``NAME + SAFEGUARD_SUFFIX`` (name and system name). The compiler matches
   profile functions by exact linker name; a name with a space cannot be a
   Go symbol, so it matches nothing and the function is never optimized by
   profile. Renaming instead of deleting keeps every sample, so the total
   weight and the 99% hot-callsite cutoff of all other edges stay as they
   were. A suffix (not a prefix) keeps the name sorting beside its package
   in pprof views.
7. Trimming (optional, ``trim_leaf=K``): stacks are cut to their K leaf
   locations. The compiler takes edges from the two leaf locations only, so
   K >= 2 never changes them; the edges are computed before and after and
   the trimming is not applied (with a note) when they differ. With
   ``max_edges=N`` the profile keeps its N heaviest edges
   (``pgo_trim.trim_edges``, whose report says what went); without it, a
   profile of more than ``pgo_trim.EDGES_WARNING`` edges gets a note on
   what its size costs the build.
8. Refusal: no profile is produced when Go would reject or silently ignore
   it: an input that cannot be read (zero-byte, not a profile), no input
   with a CPU sample type (e.g. heap only), no samples, zero total weight,
   no function with a start line (Go rejects it), no call edges (Go ignores
   it). ``PgoResult.refusal`` says why; ``write`` raises ``PgoRefusedError``.

Longer than 500 lines: the eight rules above are applied here in their order,
from selecting profiles to refusing a profile Go would reject. The profile
transforms (``strip_profile``, ``apply_safeguards``, ``trim_profile``,
``validate``: about 150 lines) and ``PgoResult`` (about 120) are the seams a
split would cut along.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyproflab.analyses.options import PGO_WEIGHT_ALIASES, PGO_WEIGHTS, PgoOptions
from pyproflab.analyses.pgo_edges import (
    CPU_VALUE_TYPES,
    EdgeSet,
    compute_edges,
    fold_preemption,
    go_binary,
    preprofile_edges,
)
from pyproflab.analyses.pgo_trim import EDGES_WARNING, TrimReport, trim_edges
from pyproflab.arrays import empty_lists, from_numpy
from pyproflab.display import render
from pyproflab.errors import ProfileError, ProflabError, UsageError
from pyproflab.model import Profile

if TYPE_CHECKING:
    from pyproflab.store.connection import Store
    from pyproflab.store.select import Selection

DEFAULT_SAFEGUARDS: tuple[str, ...] = (
    "runtime.gopark",  # golang/go#74045: a hang
    "google.golang.org/grpc/internal/transport.(*loopyWriter).processData",  # golang/go#65532
)
SAFEGUARD_SUFFIX = " [pgo-safeguard]"
RATE_RESOLUTION = 1000
# The defaults and names are ``PgoOptions``' (analyses.options), written there once.
DEFAULT_TOP = PgoOptions.top
WEIGHTS, WEIGHT_ALIASES = PGO_WEIGHTS, PGO_WEIGHT_ALIASES
_INT64_MAX = 2**63 - 1


class PgoRefusedError(ProflabError):
    """The PGO profile would be rejected or silently ignored by Go; nothing written."""


@dataclass
class PgoInput:
    """One chosen input profile and its facts (``cores``: CPU time / duration)."""

    label: str
    profile: Profile | None = None
    duration_nanos: int = 0
    cpu_nanos: int = 0
    samples: int = 0
    factor: int = 1  # the --weight duration/instance multiplier (1 for none)
    instance: str = ""  # who ran it (--weight instance); "" means the label

    @property
    def cores(self) -> float | None:
        return self.cpu_nanos / self.duration_nanos if self.duration_nanos else None


@dataclass
class PgoResult:
    """The PGO profile (``profile``; None when refused) and everything about how it was made."""

    profile: Profile | None
    inputs: list[PgoInput]
    edges: EdgeSet = field(default_factory=EdgeSet)
    refusal: str | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (input, why)
    notes: list[str] = field(default_factory=list)
    weight: str = "none"
    safeguards: tuple[str, ...] = DEFAULT_SAFEGUARDS
    fold_preempt: bool = True
    preempt_folded: tuple[int, int] = (0, 0)  # samples, their weight
    safeguarded: dict[str, int] = field(default_factory=dict)  # name -> edge weight renamed
    trim_leaf: int | None = None  # asked
    trimmed: bool = False  # applied
    max_edges: int | None = None
    trim_report: TrimReport | None = None
    candidates: int = 0  # profiles the selection matched (store)
    output: str | None = None
    verified: EdgeSet | None = None  # from go tool preprofile on the written file
    verify_note: str | None = None

    @property
    def ok(self) -> bool:
        return self.refusal is None

    @property
    def total_weight(self) -> int:
        return self.edges.total

    def write(self, path: str | os.PathLike, *, verify: bool = True, gzip: bool = True) -> Path:
        """Write the profile atomically (temp file, then rename) and, when Go is
        installed and ``verify``, check its edges with ``go tool preprofile``.

        Raises ``PgoRefusedError`` (nothing written) when the result is refused.
        """
        from pyproflab.encode import write_profile

        if self.refusal is not None or self.profile is None:
            raise PgoRefusedError(f"not writing {os.fspath(path)}: {self.refusal}")
        try:
            out = write_profile(self.profile, path, gzip=gzip)
        except OSError as e:
            raise UsageError(f"{os.fspath(path)}: cannot write: {e.strerror or e}") from None
        self.output = os.fspath(out)
        if verify:
            self.verify(out)
        return out

    def verify(self, path: str | os.PathLike | None = None) -> EdgeSet | None:
        """Run ``go tool preprofile`` on ``path`` (default: the written output) and
        compare its edges with ours; sets ``verified`` and ``verify_note``."""
        path = path or self.output
        if path is None:
            raise UsageError("nothing written to verify")
        if go_binary() is None:
            self.verify_note = "not verified: Go is not installed"
            return None
        try:
            got = preprofile_edges(path)
        except UsageError as e:
            self.verify_note = f"not verified: {e}"
            return None
        self.verified = got
        if got.weights() != self.edges.weights():
            self.verify_note = (
                "MISMATCH: go tool preprofile reports other edges than pyproflab computed"
            )
        else:
            self.verify_note = (
                f"verified with go tool preprofile: {len(got)} edges, "
                f"{len(got.hot)} inside the 99% cutoff"
            )
        return got

    def to_pandas(self):
        """The edges as a DataFrame (caller, callee, offset, weight, share, cum_share, hot)."""
        return self.edges_table().to_pandas()

    def to_arrow(self) -> pa.Table:
        """The edges as ``to_pandas`` has them, as an Arrow table."""
        return self.edges_table()

    def edges_table(self) -> pa.Table:
        e = self.verified or self.edges
        return pa.table(
            {
                "caller": [x.caller for x in e.edges],
                "callee": [x.callee for x in e.edges],
                "offset": pa.array([x.offset for x in e.edges], pa.int64()),
                "weight": pa.array([x.weight for x in e.edges], pa.int64()),
                "share": pa.array([x.share for x in e.edges], pa.float64()),
                "cum_share": pa.array([x.cum_share for x in e.edges], pa.float64()),
                "hot": pa.array([x.hot for x in e.edges], pa.bool_()),
            }
        )

    def diff(
        self, previous: PgoResult | str | os.PathLike, *, min_change: float = PgoOptions.min_change
    ):
        """Hot edges added, removed and re-weighted since ``previous`` (another result,
        or a default.pgo / preprofile file): an ``EdgeDiff``; ``print`` it for the text."""
        from pyproflab.analyses.pgo_edges import diff_edges, read_edges

        # A refused side has no edges: diffing it reported every hot edge as added
        # or removed, a change that is not there.
        for side, res in (("this", self), ("previous", previous)):
            if isinstance(res, PgoResult) and res.refusal is not None:
                raise PgoRefusedError(f"no diff: {side} PGO profile was refused: {res.refusal}")
        if isinstance(previous, PgoResult):
            old, old_name = previous.verified or previous.edges, "previous"
        else:
            old, old_name = read_edges(previous), os.fspath(previous)
        new_name = self.output or "this profile"
        d = diff_edges(old, self.verified or self.edges, min_change=min_change)
        d.old_name, d.new_name = old_name, new_name
        return d

    def __repr__(self) -> str:
        if self.refusal is not None:
            return f"PgoResult(refused: {self.refusal})"
        out = f", written to {self.output}" if self.output else ""
        return (
            f"PgoResult({len(self.inputs)} CPU profiles, {len(self.edges)} call edges, "
            f"{len(self.edges.hot)} hot{out})"
        )

    def _repr_html_(self) -> str:
        return render(self, "html")

    def __str__(self) -> str:
        """The text ``pyproflab pgo`` prints (``print(lab.pgo())``)."""
        return render(self, "text")


# --- entry points --------------------------------------------------------------------


def pgo(
    store: Store,
    selection: Selection | None = None,
    *,
    top: int | None = DEFAULT_TOP,
    all: bool = False,
    **options: Any,
) -> PgoResult:  # noqa: A002
    """The PGO profile of the selection's top ``top`` CPU profiles by CPU cores
    (all of them with ``all=True``). Options: see ``build_pgo``. A note
    (``analyses.cpu_coverage``) when the inputs hold clearly less CPU than their
    processes used."""
    from pyproflab.analyses.cpu_coverage import notes_for
    from pyproflab.store.select import Selection

    _check_options(top, {**options, "all": all})
    chosen, candidates, notes = select_profiles(
        store, selection or Selection(), top=None if all else top
    )
    inputs = []
    for pid, label, instance in chosen:
        inputs.append(PgoInput(label, store.profile(pid), instance=instance))
    result = build_pgo(inputs, **options)
    result.candidates = candidates
    result.notes[:0] = notes
    if chosen:  # the inputs' cores are low by as much as they missed of the CPU used
        result.notes += notes_for(store, Selection(profile_ids=[pid for pid, _, _ in chosen]))
    if not chosen and result.refusal is not None:
        desc = (selection or Selection()).describe()
        result.refusal = f"no CPU profiles match the selection ({desc})"
    return result


def _check_options(top: int | None, options: dict[str, Any]) -> None:
    """A keyword ``pgo`` does not take, or a value outside its option's rule, is one
    line naming it (``top=0`` was refused as if no CPU profile matched)."""
    known = {"top", "all", "safeguards", *PgoOptions.names()} - {"min_change"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(f"unknown option {unknown[0]!r} (known: {', '.join(sorted(known))})")
    if not isinstance(options.get("all", False), bool):  # all="no" was all of them
        raise UsageError(f"all={options['all']!r}: expected True or False")
    checked = {k: v for k, v in options.items() if k not in ("safeguards", "all")}
    PgoOptions.build(**checked, **({} if top is None else {"top": top}))


def pgo_files(paths: Iterable[str | os.PathLike], **options: Any) -> PgoResult:
    """The PGO profile of the given files; an unreadable file refuses the whole run.

    With ``weight="none"`` the files are read, stripped and merged on every core
    (``analyses.merge_files``: equal to merging them in order); the other
    weightings need every total before weighing, so they read them here one
    by one."""
    labels = [os.fspath(p) for p in paths]
    if not labels:
        raise UsageError("no profiles given")
    if _weight_name(options.get("weight", PgoOptions.weight)) != "none":
        return _pgo_files_in_order(labels, **options)
    from pyproflab.analyses.merge_files import merge_files

    # An empty file is refused by name, unless an earlier file cannot be read.
    empty = next((i for i, p in enumerate(labels) if _is_empty(p)), len(labels))
    done = merge_files(labels[:empty], prepare=_strip_file)
    inputs = [inp for inp, _ in done.infos if inp is not None]
    if done.error is not None:
        return _refused(inputs, options, str(done.error))
    if empty < len(labels):
        return _refused(inputs, options, f"{labels[empty]}: empty file (0 bytes), not a profile")
    res = _new_result([], **options)
    for inp, why in done.infos:
        if inp is None:
            res.skipped.append(why)
        else:
            res.inputs.append(inp)
    if _refuse_inputs(res, [rows for inp, rows in done.infos if inp is not None]):
        return res
    assert done.profile is not None
    return _finish(res, done.profile)


def _is_empty(path: str) -> bool:
    try:
        return Path(path).is_file() and Path(path).stat().st_size == 0
    except OSError:
        return False  # reading it says why


def _strip_file(label: str, profile: Profile) -> tuple[Profile | None, tuple]:
    """merge_files' prepare for pgo: the stripped profile (None when it has no CPU
    type or no sample left) and (input facts or None, rows left or why skipped)."""
    stripped = strip_profile(profile)
    if stripped is None:
        types = ", ".join(str(t) for t in profile.sample_types) or "none"
        return None, (None, (label, f"no CPU sample type (has {types})"))
    inp = PgoInput(
        label,
        None,
        duration_nanos=profile.duration_nanos,
        cpu_nanos=_cpu_nanos(stripped),
        samples=profile.num_samples,
    )
    rows = stripped.num_samples
    return (stripped if rows else None), (inp, rows)


def _pgo_files_in_order(labels: list[str], **options: Any) -> PgoResult:
    """pgo_files reading every file here, in order, before anything else."""
    from pyproflab.decode import read_profile

    inputs: list[PgoInput] = []
    for label in labels:
        try:
            if _is_empty(label):
                return _refused(inputs, options, f"{label}: empty file (0 bytes), not a profile")
            prof = read_profile(label)
        except ProfileError as e:
            return _refused(inputs, options, str(e))
        except OSError as e:
            return _refused(inputs, options, f"{label}: cannot read: {e.strerror or e}")
        inputs.append(PgoInput(label, prof))
    return build_pgo(inputs, **options)


def _refused(inputs: list[PgoInput], options: dict, why: str) -> PgoResult:
    weight = _weight_name(options.get("weight", "none"))
    return PgoResult(None, inputs, refusal=why, weight=weight)


# --- selection -----------------------------------------------------------------------


def select_profiles(
    store: Store, selection: Selection, *, top: int | None = DEFAULT_TOP
) -> tuple[list[tuple[int, str, str]], int, list[str]]:
    """(profile_id, label, instance) of the chosen profiles, the number of CPU
    candidates, notes (instance: ``service/instance``, or the one of them it has).

    Candidates: selected profiles with a ``samples/count`` or ``cpu/nanoseconds``
    sample type. Ranked by CPU cores (cpu/nanoseconds total, else samples ×
    period, over duration), highest first, ties newest first; profiles
    without a duration rank last. ``top=None`` keeps all.
    """
    rows = (
        store.profiles(selection)
        .select(
            [
                "profile_id",
                "service",
                "instance",
                "time",
                "duration_nanos",
                "period",
                "sample_types",
            ]
        )
        .to_pylist()
    )
    cands: list[dict] = []
    for r in rows:
        types = [(st["type"], st["unit"]) for st in r["sample_types"]]
        if ("cpu", "nanoseconds") in types:
            r["idx"], r["mult"] = types.index(("cpu", "nanoseconds")) + 1, 1
        elif ("samples", "count") in types:
            r["idx"], r["mult"] = types.index(("samples", "count")) + 1, max(r["period"], 1)
        else:
            continue
        cands.append(r)
    notes: list[str] = []
    if len(rows) > len(cands):
        notes.append(
            f"{len(rows) - len(cands)} selected profiles have no CPU sample type: left out"
        )
    if not cands:
        return [], 0, notes
    idx = pa.table(
        {
            "profile_id": pa.array([r["profile_id"] for r in cands], pa.int64()),
            "idx": pa.array([r["idx"] for r in cands], pa.int64()),
        }
    )
    from pyproflab.store import queries

    totals = queries.value_sums(store, idx).to_pylist()
    total_of = {t["profile_id"]: int(t["v"] or 0) for t in totals}
    for r in cands:
        r["cpu"] = total_of.get(r["profile_id"], 0) * r["mult"]
        r["cores"] = r["cpu"] / r["duration_nanos"] if r["duration_nanos"] else None
    no_dur = sum(r["cores"] is None for r in cands)
    if no_dur:
        notes.append(f"{no_dur} CPU profiles have no duration: ranked last")
    cands.sort(
        key=lambda r: (
            r["cores"] is None,
            -(r["cores"] or 0.0),
            -(r["time"].timestamp() if r["time"] else 0.0),
            r["profile_id"],
        )
    )
    chosen = cands if top is None else cands[: max(top, 0)]
    out = []
    for r in chosen:
        who = "/".join(x for x in (r["service"], r["instance"]) if x)
        label = f"profile {r['profile_id']}" + (f" ({who})" if who else "")
        # The instance's name alone would make two services' pod-0 one instance.
        out.append((r["profile_id"], label, who or label))
    return out, len(cands), notes


# --- the pipeline --------------------------------------------------------------------


def build_pgo(
    inputs: Sequence[PgoInput],
    *,
    weight: str = PgoOptions.weight,
    safeguards: Iterable[str] | None = None,
    trim_leaf: int | None = PgoOptions.trim_leaf,
    fold_preempt: bool = PgoOptions.fold_preempt,
    max_edges: int | None = PgoOptions.max_edges,
) -> PgoResult:
    """Strip, weigh, merge, fold, safeguard, trim and validate (the module rules)."""
    from pyproflab.analyses.merge import merge

    res = _new_result(
        inputs,
        weight=weight,
        safeguards=safeguards,
        trim_leaf=trim_leaf,
        fold_preempt=fold_preempt,
        max_edges=max_edges,
    )
    kept: list[PgoInput] = []
    for inp in res.inputs:
        assert inp.profile is not None
        stripped = strip_profile(inp.profile)
        if stripped is None:
            types = ", ".join(str(t) for t in inp.profile.sample_types) or "none"
            res.skipped.append((inp.label, f"no CPU sample type (has {types})"))
            continue
        inp.samples = inp.profile.num_samples
        inp.duration_nanos = inp.profile.duration_nanos
        inp.cpu_nanos = _cpu_nanos(stripped)
        inp.profile = stripped
        kept.append(inp)
    res.inputs = kept
    if _refuse_inputs(res, [i.profile.num_samples for i in kept if i.profile is not None]):
        return res

    profiles = [i.profile for i in kept if i.profile is not None and i.profile.num_samples]
    if res.weight != "none":
        try:
            profiles = _weigh([i for i in kept if i.profile and i.profile.num_samples], res.weight)
        except PgoRefusedError as e:
            res.refusal = str(e)
            return res
    return _finish(res, merge(profiles))


def _new_result(
    inputs: Sequence[PgoInput],
    *,
    weight: str = PgoOptions.weight,
    safeguards: Iterable[str] | None = None,
    trim_leaf: int | None = PgoOptions.trim_leaf,
    fold_preempt: bool = PgoOptions.fold_preempt,
    max_edges: int | None = PgoOptions.max_edges,
) -> PgoResult:
    """An empty result for ``inputs`` with its options checked."""
    weight = _weight_name(weight)
    if trim_leaf is not None and trim_leaf < 1:
        raise UsageError(f"--trim-leaf must be at least 1, not {trim_leaf}")
    if max_edges is not None and max_edges < 1:
        raise UsageError(f"--max-edges must be at least 1, not {max_edges}")
    guards = tuple(DEFAULT_SAFEGUARDS if safeguards is None else safeguards)
    return PgoResult(
        None,
        list(inputs),
        weight=weight,
        safeguards=guards,
        trim_leaf=trim_leaf,
        fold_preempt=fold_preempt,
        max_edges=max_edges,
    )


def _weight_name(weight: str) -> str:
    """The weighting's name (old names accepted); a usage error for others."""
    name = WEIGHT_ALIASES.get(weight, weight)
    if name not in WEIGHTS:
        raise UsageError(f"weight must be one of {', '.join(WEIGHTS)}, not {weight!r}")
    return name


def _refuse_inputs(res: PgoResult, stripped_rows: list[int]) -> bool:
    """Set the refusal when the kept inputs (``res.inputs``, with their stripped
    profiles' row counts) cannot make a profile; True if refused."""
    kept = res.inputs
    if not kept:
        why = "; ".join(f"{lbl}: {w}" for lbl, w in res.skipped) or "no inputs"
        res.refusal = "no input has a CPU sample type (samples/count or cpu/nanoseconds): " + why
    elif sum(i.samples for i in kept) == 0:
        names = ", ".join(i.label for i in kept[:3]) + (" …" if len(kept) > 3 else "")
        verb = "holds" if len(kept) == 1 else "hold"
        res.refusal = f"no samples: the {_n(len(kept), 'CPU profile')} ({names}) {verb} none"
    elif all(rows == 0 for rows in stripped_rows):
        res.refusal = (
            f"zero total weight: {_n(sum(i.samples for i in kept), 'sample')}, all with value 0"
        )
    return res.refusal is not None


def _finish(res: PgoResult, merged: Profile) -> PgoResult:
    """Fold preemption, safeguard, trim and validate the merged profile into ``res``."""
    if res.fold_preempt:
        merged, n, w = fold_preemption(merged)
        res.preempt_folded = (n, w)
    merged, res.safeguarded = apply_safeguards(merged, res.safeguards)
    edges = compute_edges(merged)
    trim_leaf = res.trim_leaf
    if trim_leaf is not None:
        trimmed = trim_profile(merged, trim_leaf)
        t_edges = compute_edges(trimmed)
        if _same_edges(edges, t_edges):
            merged, edges, res.trimmed = trimmed, t_edges, True
        else:
            res.notes.append(
                f"not trimmed: cutting stacks to {_n(trim_leaf, 'leaf frame')} would change "
                "the compiler's hot edges (it reads the two leaf locations)"
            )
    if res.max_edges is not None:
        merged, edges, res.trim_report = trim_edges(merged, res.max_edges, edges)
    elif len(edges) > EDGES_WARNING:
        res.notes.append(
            f"{len(edges)} call edges: a build with a new profile recompiles every package "
            "and each compile reads every edge (bench/bench_pgo.py measures the cost); "
            "--max-edges N keeps the N heaviest"
        )
    res.profile, res.edges = merged, edges
    res.refusal = validate(merged, edges)
    if res.refusal is not None:
        res.profile = None
    return res


def strip_profile(profile: Profile) -> Profile | None:
    """Only the CPU sample types (samples/count first), no labels, no all-zero
    samples; None when the profile has no CPU sample type."""
    types = profile.sample_types
    keep = [
        next(i for i, st in enumerate(types) if (st.type, st.unit) == want)
        for want in CPU_VALUE_TYPES
        if any((st.type, st.unit) == want for st in types)
    ]
    if not keep:
        return None
    s = profile.samples
    if s.num_rows:
        from pyproflab.analyses.sample_types import values_matrix

        # Arrays throughout: one pass over the values, no Python list per sample.
        matrix = np.ascontiguousarray(values_matrix(profile)[:, keep])
        n, w = matrix.shape
        values = pa.ListArray.from_arrays(
            from_numpy(np.arange(0, (n + 1) * w, w, dtype=np.int32)),
            from_numpy(matrix.reshape(-1), pa.int64()),
        )
        samples = pa.table(
            {
                "location_ids": s.column("location_ids").combine_chunks(),
                "values": values,
                "labels": empty_lists(n, s.schema.field("labels").type.value_type),
            },
            schema=s.schema,
        ).filter(from_numpy((matrix != 0).any(axis=1)))
    else:
        samples = s
    default = profile.default_sample_type
    kept_types = [types[i] for i in keep]
    if default not in {t.type for t in kept_types}:
        default = "cpu" if any(t.type == "cpu" for t in kept_types) else ""
    return dataclasses.replace(
        profile, sample_types=kept_types, samples=samples, default_sample_type=default
    )


def _cpu_nanos(p: Profile) -> int:
    for i, st in enumerate(p.sample_types):
        if (st.type, st.unit) == ("cpu", "nanoseconds"):
            return p.total(i)
    return p.total(0) * max(p.period, 1)


def weight_factors(inputs: Sequence[PgoInput], weight: str) -> list[int]:
    """Each input's integer multiplier under ``weight`` (module rule 3)."""
    weight = _weight_name(weight)
    if weight == "none":
        return [1] * len(inputs)
    if weight == "duration":
        missing = [i.label for i in inputs if i.duration_nanos <= 0]
        if missing:
            raise PgoRefusedError(
                f"--weight duration needs each profile's duration; none in "
                f"{', '.join(missing[:3])}"
                + (" …" if len(missing) > 3 else "")
                + " (use --weight none or instance)"
            )
        dmax = max(i.duration_nanos for i in inputs)
        return [max(1, round(RATE_RESOLUTION * dmax / i.duration_nanos)) for i in inputs]
    totals: dict[str, int] = {}
    for i in inputs:
        assert i.profile is not None
        key = i.instance or i.label
        totals[key] = totals.get(key, 0) + i.profile.total(0)
    wmax = max(totals.values())
    return [
        max(1, round(RATE_RESOLUTION * wmax / totals[i.instance or i.label]))
        if totals[i.instance or i.label]
        else 1
        for i in inputs
    ]


def _weigh(inputs: list[PgoInput], weight: str) -> list[Profile]:
    """Each profile's values multiplied by its ``weight_factors`` factor."""
    out = []
    for inp, f in zip(inputs, weight_factors(inputs, weight), strict=True):
        p = inp.profile
        assert p is not None
        inp.factor = f
        biggest = max(p.total(k) for k in range(len(p.sample_types)))
        if biggest * f > _INT64_MAX // 2:
            raise PgoRefusedError(f"{inp.label}: --weight {weight} would overflow int64")
        vals = p.samples.column("values").combine_chunks()
        scaled = pa.ListArray.from_arrays(
            vals.offsets, pc.multiply(vals.flatten(), pa.scalar(f, pa.int64()))
        )
        out.append(
            dataclasses.replace(
                p,
                samples=p.samples.set_column(
                    1, "values", scaled.cast(p.samples.schema.field("values").type)
                ),
            )
        )
    return out


def apply_safeguards(profile: Profile, names: Iterable[str]) -> tuple[Profile, dict[str, int]]:
    """Rename the functions named in ``names`` (see rule 5); return the profile and,
    per renamed function, the weight of the compiler edges it is in."""
    guard = set(names)
    if not guard:
        return profile, {}
    f = profile.functions
    nm = f.column("name").to_pylist()
    sysn = f.column("system_name").to_pylist()
    hit = {n for n in nm if n in guard}
    if not hit:
        return profile, {}
    new_nm = [n + SAFEGUARD_SUFFIX if n in guard else n for n in nm]
    new_sys = [
        s + SAFEGUARD_SUFFIX if (s in guard or n in guard) and s else s
        for n, s in zip(nm, sysn, strict=True)
    ]
    f = f.set_column(f.schema.get_field_index("name"), "name", pa.array(new_nm, pa.string()))
    f = f.set_column(
        f.schema.get_field_index("system_name"), "system_name", pa.array(new_sys, pa.string())
    )
    out = dataclasses.replace(profile, functions=f)
    edges = compute_edges(out)
    weights: dict[str, int] = {}
    for name in sorted(hit):
        renamed = name + SAFEGUARD_SUFFIX
        weights[name] = sum(e.weight for e in edges.edges if renamed in (e.caller, e.callee))
    return out, weights


def trim_profile(profile: Profile, k: int) -> Profile:
    """Stacks cut to their ``k`` leaf locations, then re-merged (equal stacks added,
    unused locations and functions dropped)."""
    from pyproflab.analyses.merge import merge

    s = profile.samples
    ids = s.column("location_ids").to_pylist()
    cut = pa.array([x[:k] for x in ids], s.schema.field("location_ids").type)
    trimmed = dataclasses.replace(profile, samples=s.set_column(0, "location_ids", cut))
    return merge([trimmed])


def _same_edges(a: EdgeSet, b: EdgeSet) -> bool:
    return a.weights() == b.weights() and [e.key for e in a.hot] == [e.key for e in b.hot]


def validate(profile: Profile, edges: EdgeSet) -> str | None:
    """Why Go would reject or ignore ``profile`` (None when it is fine)."""
    if profile.num_samples == 0:
        return "no samples: every sample of the inputs has value 0"
    idx = next(
        (i for i, st in enumerate(profile.sample_types) if (st.type, st.unit) in CPU_VALUE_TYPES),
        -1,
    )
    if idx < 0:
        return "no CPU sample type (samples/count or cpu/nanoseconds)"
    if profile.total(idx) == 0:
        return "zero total weight"
    if not edges.seen_start_line:
        return (
            "missing start_line: no sampled function has Function.start_line "
            "(Go rejects the profile; Go 1.20+ programs write start lines)"
        )
    if edges.total == 0:
        return (
            "zero total weight of call edges: every sample has a single frame, "
            "so Go would accept the profile and optimize nothing"
        )
    return None


def _n(k: int, what: str) -> str:
    return f"{k} {what}{'' if k == 1 else 's'}"
