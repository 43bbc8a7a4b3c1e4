"""One options object per analysis: its fields, their defaults and ranges, in one place.

As pprof's ``report.Options``/``graph.Options``: an analysis takes one frozen
dataclass of options, and the front ends build it from their own inputs (the
CLI from its flags, ``Lab`` and the Python API from keywords, jobs from their
TOML keys); none of them writes a default or a range of its own. Rules:

- A field is declared with ``option(default, help=..., choices=..., low=...,
  high=...)``; its type is the annotation (``int``, ``float``, ``str``,
  ``bool``, ``X | None``, ``int | str | None``). ``low``/``high`` are
  inclusive unless ``low_open``/``high_open``.
- Building one checks every field: a value of the wrong type, outside its
  range or not among its choices is one ``UsageError`` line naming the field,
  e.g. ``fdr: must be a number in (0, 1), not 1.5``. A bool is not a number.
- ``schema()`` is the fields' metadata (type, default, range, choices, help)
  as a JSON-schema-like dict: what a job spec's schema takes for these keys.
- ``build(options=None, **keywords)``: an options object (or the defaults)
  with the keywords given replaced; an unknown keyword is a ``UsageError``
  naming it and the known ones.
- ``defaults()``: field name -> default, read from the class: the one place.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Self, TypedDict, TypeVar

from pyproflab.analyses.graph import GRANULARITIES
from pyproflab.errors import UsageError

T = TypeVar("T", bound="Options")


def option(
    default: Any,
    *,
    help: str = "",  # noqa: A002 (argparse's name)
    choices: Sequence[Any] | None = None,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    metavar: str | None = None,
) -> Any:
    """A field of an options dataclass with its default and its rule (module rules);
    ``help`` and ``metavar`` are what a command line shows for it."""
    meta = {
        "help": help,
        "metavar": metavar,
        "choices": tuple(choices) if choices is not None else None,
        "low": low,
        "high": high,
        "low_open": low_open,
        "high_open": high_open,
    }
    return dataclasses.field(default=default, metadata={"option": meta})


def _types(annotation: Any) -> tuple[set[type], bool]:
    """(the accepted types, None allowed) of a field's annotation."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = typing.get_args(annotation)
    else:
        args = (annotation,)
    return {a for a in args if a is not type(None)}, type(None) in args


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _range_text(m: dict[str, Any]) -> str:
    lo = "(" if m["low_open"] else "["
    hi = ")" if m["high_open"] else "]"
    a = "-inf" if m["low"] is None else _number(m["low"])
    b = "inf" if m["high"] is None else _number(m["high"])
    if m["high"] is None:
        return f"> {a}" if m["low_open"] else f">= {a}"
    if m["low"] is None:
        return f"< {b}" if m["high_open"] else f"<= {b}"
    return f"in {lo}{a}, {b}{hi}"


_KIND_NAMES = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}
_ABSTRACT = {bool: bool, int: numbers.Integral, float: numbers.Real, str: str}


def _problem(value: Any, accepted: set[type], none_ok: bool, m: dict[str, Any]) -> str | None:
    """Why ``value`` is not a valid value of the field, or None."""
    if value is None:
        return None if none_ok else "must be given"
    kind = None
    if not isinstance(value, bool) or bool in accepted:
        # numpy's integers and floats count as whole numbers and numbers.
        kind = next(
            (
                t
                for t in (bool, int, float, str)
                if t in accepted and isinstance(value, _ABSTRACT[t])
            ),
            None,
        )
    if kind is None:
        names = [_KIND_NAMES[t] for t in (bool, int, float, str) if t in accepted]
        return "must be " + " or ".join(names + (["None"] if none_ok else []))
    if m["choices"] is not None and value not in m["choices"]:
        return f"must be one of {', '.join(map(str, m['choices']))}"
    if kind in (int, float) and (m["low"] is not None or m["high"] is not None):
        v = float(value)
        bad = not math.isfinite(v)
        if m["low"] is not None:
            bad |= v <= m["low"] if m["low_open"] else v < m["low"]
        if m["high"] is not None:
            bad |= v >= m["high"] if m["high_open"] else v > m["high"]
        if bad:
            return f"must be {_KIND_NAMES[kind]} {_range_text(m)}"
    return None


@dataclasses.dataclass(frozen=True)
class Options:
    """Base of the options dataclasses (see the module rules)."""

    def __post_init__(self) -> None:
        for f, accepted, none_ok, m in self._checks():
            value = getattr(self, f)
            why = _problem(value, accepted, none_ok, m)
            if why is not None:
                raise UsageError(f"{f}: {why}, not {value!r}")

    @classmethod
    @functools.cache
    def _checks(cls) -> list[tuple[str, set[type], bool, dict[str, Any]]]:
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            accepted, none_ok = _types(hints[f.name])
            out.append((f.name, accepted, none_ok, f.metadata.get("option", _PLAIN)))
        return out

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Field name -> default (the one place they are written)."""
        return {f.name: f.default for f in dataclasses.fields(cls)}

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def kind(cls, name: str) -> tuple[set[type], bool]:
        """A field's accepted types and whether None is one of its values."""
        for f, accepted, none_ok, _ in cls._checks():
            if f == name:
                return accepted, none_ok
        raise KeyError(name)

    @classmethod
    def meta(cls, name: str) -> dict[str, Any]:
        """A field's rule (help, choices, low, high, ...)."""
        for f, _, _, m in cls._checks():
            if f == name:
                return m
        raise KeyError(name)

    @classmethod
    def problem(cls, name: str, value: Any) -> str | None:
        """Why ``value`` is not a valid value of the field ``name`` (``must be ...``), or None."""
        accepted, none_ok = cls.kind(name)
        return _problem(value, accepted, none_ok, cls.meta(name))

    @classmethod
    def build(cls, options: Self | None = None, /, **keywords: Any) -> Self:
        """``options`` (default: the defaults) with ``keywords`` replaced, checked."""
        unknown = sorted(set(keywords) - set(cls.names()))
        if unknown:
            raise UsageError(
                f"unknown option {unknown[0]!r} (known: {', '.join(sorted(cls.names()))})"
            )
        if options is None:
            return cls(**keywords)
        return dataclasses.replace(options, **keywords)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str = "") -> Self:
        """Options from a mapping (a job's TOML table): errors name ``where`` too."""
        try:
            return cls.build(**dict(data))
        except UsageError as e:
            raise UsageError(f"{where}: {e}" if where else str(e)) from None

    @classmethod
    def schema(cls) -> dict[str, dict[str, Any]]:
        """The fields as a JSON-schema-like dict: name -> type, default, range, enum, help."""
        names = {bool: "boolean", int: "integer", float: "number", str: "string"}
        out: dict[str, dict[str, Any]] = {}
        defaults = cls.defaults()
        for f, accepted, none_ok, m in cls._checks():
            kinds = sorted(names[t] for t in accepted if t in names)
            d: dict[str, Any] = {"type": kinds + (["null"] if none_ok else [])}
            d["default"] = defaults[f]
            if m["choices"] is not None:
                d["enum"] = list(m["choices"])
            if m["low"] is not None:
                d["exclusiveMinimum" if m["low_open"] else "minimum"] = m["low"]
            if m["high"] is not None:
                d["exclusiveMaximum" if m["high_open"] else "maximum"] = m["high"]
            if m["help"]:
                d["description"] = m["help"]
            out[f] = d
        return out

    def keywords(self) -> dict[str, Any]:
        """The fields as keywords (``analysis(..., **options.keywords())``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


_PLAIN = {
    "help": "",
    "metavar": None,
    "choices": None,
    "low": None,
    "high": None,
    "low_open": False,
    "high_open": False,
}


# --- the analyses' options -------------------------------------------------------------

#: pprof's command-line trimming (its driver's defaults for -nodefraction and
#: -edgefraction): what ``tree``/``peek`` and the ``top`` command use.
PPROF_NODE_FRACTION, PPROF_EDGE_FRACTION = 0.005, 0.001


class _Bounds(TypedDict):
    low: float
    high: float


_FRACTION: _Bounds = {"low": 0.0, "high": 1.0}
_REGEX = "REGEX"


@dataclasses.dataclass(frozen=True)
class TopOptions(Options):
    """``top``'s options (pprof's -top, -sample_index, -granularity, -nodecount,
    -cum, -nodefraction, -edgefraction and its filters)."""

    sample_index: int | str | None = option(
        None, metavar="NAME|N", help="sample type (default: the profile's default, else the last)"
    )
    granularity: str = option("functions", choices=GRANULARITIES)
    nodecount: int | None = option(
        None, low=0, metavar="N", help="keep the first N rows (None or 0: all)"
    )
    cum_sort: bool = option(False, help="sort by cumulative value")
    focus: str | None = option(
        None, metavar=_REGEX, help="only samples with a frame matching REGEX (Python re syntax)"
    )
    ignore: str | None = option(
        None, metavar=_REGEX, help="drop samples with a frame matching REGEX"
    )
    node_fraction: float = option(
        0.0, **_FRACTION, metavar="F", help="hide nodes below F of the total"
    )
    edge_fraction: float = option(
        PPROF_EDGE_FRACTION,
        **_FRACTION,
        metavar="F",
        help="edges below F of the total are left out",
    )
    # pprof's other filters (analyses.pprof_filters), in the order pprof lists them.
    hide: str | None = option(
        None, metavar=_REGEX, help="remove frames matching REGEX from the stacks"
    )
    show: str | None = option(
        None, metavar=_REGEX, help="keep only frames matching REGEX in the stacks"
    )
    show_from: str | None = option(
        None,
        metavar=_REGEX,
        help="drop the frames above (callers of) the first match from the root",
    )
    tagfocus: str | None = option(
        None,
        metavar="KEY=VALUE",
        help="only samples with this label (regexes, or a range: 1kb:, :64b)",
    )
    tagignore: str | None = option(
        None, metavar="KEY=VALUE", help="drop samples with this label (as --tagfocus)"
    )
    tagshow: str | None = option(
        None,
        metavar=_REGEX,
        help="keep only the labels whose key matches REGEX (as printed by traces)",
    )
    taghide: str | None = option(
        None, metavar=_REGEX, help="drop the labels whose key matches REGEX (as printed by traces)"
    )

    def filters(self) -> dict[str, str | None]:
        """pprof's filters besides focus/ignore, by name (``FILTERS``)."""
        return {name: getattr(self, name) for name in FILTERS}


#: pprof's sample, frame and label filters besides focus/ignore, in pprof's order.
FILTERS = ("hide", "show", "show_from", "tagfocus", "tagignore", "tagshow", "taghide")


@dataclasses.dataclass(frozen=True)
class TreeOptions(TopOptions):
    """``tree``'s and ``peek``'s: ``top``'s, with pprof's defaults for -tree."""

    nodecount: int | None = option(80, low=0, metavar="N", help="show at most N nodes (0: all)")
    node_fraction: float = option(
        PPROF_NODE_FRACTION, **_FRACTION, metavar="F", help="hide nodes below F of the total"
    )


MEASURES = ("auto", "rate", "share")
RANK_BY = ("evidence", "flat", "cum")
UNITS = ("profile", "instance", "window")
TESTS = ("quasi-poisson", "permutation", "welch")


@dataclasses.dataclass(frozen=True)
class _ChangeOptions(Options):
    """What ``regressions`` and ``over_time`` share."""

    sample_index: int | str | None = option(None, metavar="NAME|N", help="sample type")
    granularity: str = option("functions", choices=GRANULARITIES)
    fdr: float = option(0.05, low=0, high=1, low_open=True, high_open=True, metavar="Q")
    confidence: float = option(0.95, low=0, high=1, low_open=True, high_open=True, metavar="C")
    min_share: float = option(0.005, **_FRACTION, metavar="F", help="test nodes above F")
    seed: int = option(0)
    per: str | None = option(
        None,
        metavar="COUNTER",
        help="rates per unit of work: the increase of this counter (stored from "
        "/metrics, e.g. a request counter) over each profile's window",
    )
    measure: str = option(
        "auto",
        choices=MEASURES,
        help="shares of each profile's total (auto's choice without --per: load and "
        "machine speed cancel), or rates (per second, or per --per counter)",
    )


@dataclasses.dataclass(frozen=True)
class RegressionsOptions(_ChangeOptions):
    """``regressions``' options (see its module rules)."""

    resamples: int = option(2000, low=100, high=1_000_000, metavar="N")
    rank_by: str = option(
        "evidence",
        choices=RANK_BY,
        help="order: by the conservative end of the change's interval, increases "
        "first, or by |change| of flat or cum",
    )
    unit: str = option(
        "profile",
        choices=UNITS,
        help="independent unit of the statistics: each profile, each "
        "instance's profiles summed, or the profiles taken together summed",
    )
    inlines: bool = option(True, help="count inlined calls as frames of their own")
    test: str = option(
        "quasi-poisson", choices=TESTS, help="source of the p-values (see the description)"
    )
    permutations: int = option(10_000, low=100, metavar="N", help="at most N splits")


@dataclasses.dataclass(frozen=True)
class OverTimeOptions(_ChangeOptions):
    """``over_time``'s options (see its module rules)."""

    permutations: int = option(999, low=99, metavar="N", help="permutations per change point")


#: ``pgo``'s weightings of the merged profiles, and the old names they had.
PGO_WEIGHTS = ("none", "duration", "instance")
PGO_WEIGHT_ALIASES = {"sum": "none", "rate": "duration"}


@dataclasses.dataclass(frozen=True)
class PgoOptions(Options):
    """``pgo``'s: which profiles of a store (the ``top`` by CPU cores) and how they
    merge (``analyses.pgo``'s module rules; the safeguards are its keyword)."""

    top: int = option(
        5, low=1, high=100_000, metavar="N", help="a store's N profiles with the most CPU cores"
    )
    weight: str = option(
        "none",
        choices=PGO_WEIGHTS + tuple(PGO_WEIGHT_ALIASES),
        help="none: a plain sum, as pprof merges; duration: each profile per second; "
        "instance: each instance once (sum, rate: old names of none, duration)",
    )
    trim_leaf: int | None = option(
        None,
        low=1,
        metavar="K",
        help="cut stacks to K leaf frames when the hot edges stay the same",
    )
    fold_preempt: bool = option(True, help="samples in runtime.asyncPreempt count for their caller")
    max_edges: int | None = option(
        None, low=1, metavar="N", help="keep the N heaviest call edges (a smaller build)"
    )
    # How two PGO profiles' hot edges are compared (pgo diff, weights).
    min_change: float = option(
        0.1, low=0, metavar="PCT", help="smallest share move (percentage points) reported"
    )
