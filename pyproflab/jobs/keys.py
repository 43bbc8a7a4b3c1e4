"""What each key of a job file may hold: its type and its range, one table per section.

Rules:

- A job file is checked against these tables before anything runs (no source
  is read, no store opened): an unknown key, a missing required key, a value
  of the wrong type or out of range is one ``UsageError`` naming the file,
  the section and the key, what the key must hold and what it got.
- Types are TOML's: a boolean is not a number (``wait = true`` is refused),
  an integer key refuses ``64.5`` and ``"64"``, a number must be finite
  (``inf``, ``nan`` and ``1e308`` days are refused by the ranges). A size is
  read as ``gogc``'s (``2GiB``), a time as the selection's (ISO or ``7d``).
- The keys of an analysis's options take their types, ranges and choices from
  its options object (``analyses.options``: regressions' ``fdr`` in (0, 1),
  ``resamples`` from 100), so a bad value stops the job at once instead of
  skipping every service at run time, and no range is written twice.
- Each section's table lists every field of its dataclass in ``jobs.spec``
  (a test holds them equal), so a new option cannot go unchecked. A table can
  take its rules from elsewhere (an analysis's options object, a source
  kind's declared keys) by being built from them here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from pyproflab.analyses.options import PgoOptions
from pyproflab.errors import ProflabError, UsageError


def _size(v: Any) -> None:
    from pyproflab.analyses.gogc import parse_size

    if not isinstance(v, str):
        raise ValueError("a size such as 2GiB")
    n = parse_size(v)
    if not (math.isfinite(n) and 0 < n < 2**63):
        raise ValueError("a size between 1 byte and 8 EiB")


def _budget(v: Any) -> None:
    """A budget as gogc reads one (``Budget.parse``, the one reading of it): a size,
    or a multiple of the current peak such as ``2.5x``."""
    from pyproflab.analyses.gogc import Budget

    if not isinstance(v, str):
        raise ValueError("a size such as 2GiB, or a multiple of the current peak such as 2.5x")
    if v.strip().lower().endswith("x"):
        Budget.parse(v)
    else:
        _size(v)


def _time(v: Any) -> None:
    from pyproflab.store.select import parse_time

    if isinstance(v, date) and not isinstance(v, datetime):
        raise ValueError("a time (ISO, or a duration ago such as 7d)")
    if not isinstance(v, str | datetime):
        raise ValueError("a time (ISO, or a duration ago such as 7d)")
    parse_time(v)


def _gogc_list(v: Any) -> None:
    if not isinstance(v, list) or not v:
        raise ValueError('a list of GOGC values (1 to 10000, or "off")')
    for x in v:
        if x == "off":
            continue
        if isinstance(x, bool) or not isinstance(x, int | float) or not 1 <= x <= 10_000:
            raise ValueError('a list of GOGC values (1 to 10000, or "off")')


@dataclass(frozen=True)
class Rule:
    """What one key holds. ``kind``: string, integer, number, boolean, names
    (a string or a list of strings), strings (a list), labels (a table of
    strings), choice (one of ``choices``), or ``check`` (a function that
    raises ``ValueError`` with what the key must be). Numbers lie in
    [``low``, ``high``] (``low`` excluded when ``above``, ``high`` when ``below``)."""

    kind: str
    low: float | None = None
    high: float | None = None
    above: bool = False
    below: bool = False
    choices: tuple[str, ...] = ()
    required: bool = False
    check: Callable[[Any], None] | None = None

    def expected(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "strings" and self.choices:
            return "a list of " + ", ".join(self.choices)
        noun = {
            "string": "a non-empty string",
            "integer": "an integer",
            "number": "a number",
            "boolean": "true or false",
            "names": "a string or a list of strings",
            "strings": "a list of strings",
            "labels": "a table of strings (key = value)",
        }.get(self.kind, f"a {self.kind}")
        if self.low is None and self.high is None:
            return noun
        lo = f"{'above' if self.above else 'at least'} {self.low:g}"
        if self.high is None:
            return f"{noun} {lo}"
        if self.low is None:
            return f"{noun} up to {self.high:g}"
        lo = f"above {self.low:g}" if self.above else f"from {self.low:g}"
        hi = f"below {self.high:g}" if self.below else f"up to {self.high:g}"
        return f"{noun} {lo}, {hi}"

    def problem(self, v: Any) -> str | None:
        """Why ``v`` does not fit (the text after the key), or None."""
        if self.check is not None:
            try:
                self.check(v)
            except (ValueError, ProflabError) as e:
                return f"must be {e}" if isinstance(e, ValueError) else str(e)
            return None
        return None if self._fits(v) else f"must be {self.expected()}"

    def _fits(self, v: Any) -> bool:
        k = self.kind
        if k == "string":
            return isinstance(v, str) and v != ""
        if k == "boolean":
            return isinstance(v, bool)
        if k == "choice":
            return isinstance(v, str) and v in self.choices
        if k == "names":
            return isinstance(v, str) or (
                isinstance(v, list) and bool(v) and all(isinstance(x, str) for x in v)
            )
        if k == "strings":
            return isinstance(v, list) and all(
                isinstance(x, str) and (not self.choices or x in self.choices) for x in v
            )
        if k == "labels":
            return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
        if isinstance(v, bool) or not isinstance(v, int | float):
            return False
        if k == "integer" and not isinstance(v, int):
            return False
        if not math.isfinite(v):
            return False
        if self.low is not None and (v <= self.low if self.above else v < self.low):
            return False
        return self.high is None or (v < self.high if self.below else v <= self.high)


def check_table(raw: Any, rules: Mapping[str, Rule], where: str) -> dict[str, Any]:
    """``raw`` (a parsed TOML table) checked against ``rules``: returned as it
    is, or the first problem raised as one ``UsageError`` starting with ``where``."""
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: must be a table")
    extra = sorted(set(raw) - set(rules))
    if extra:
        known = ", ".join(sorted(rules))
        raise UsageError(f"{where}: unknown key {extra[0]!r} (known: {known})")
    for key, rule in rules.items():
        if key not in raw:
            if rule.required:
                raise UsageError(f"{where}: {key} is required ({rule.expected()})")
            continue
        problem = rule.problem(raw[key])
        if problem is not None:
            raise UsageError(f"{where}: {key} {problem} (got {_shown(raw[key])})")
    return raw


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


DAY = 86_400.0
TEXT, FLAG = Rule("string"), Rule("boolean")

JOB: dict[str, Rule] = {
    "name": Rule("string", required=True),
    "store": Rule("string", required=True),
    "output": Rule("string", required=True),
    "wait": Rule("number", 0, 30 * DAY),
    "formats": Rule("strings", choices=("json", "text", "html")),
}

SELECTION: dict[str, Rule] = {
    "service": Rule("names"),
    "version": Rule("names"),
    "instance": Rule("names"),
    "profile_type": Rule("names"),
    "since": Rule("time", check=_time),
    "until": Rule("time", check=_time),
    "labels": Rule("labels"),
}


_KINDS = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _option_rule(cls: Any, name: str) -> Rule:
    """The rule of an analysis's option, from its options object (``analyses.options``):
    its type, range and choices, written there once."""
    accepted, _ = cls.kind(name)
    m = cls.meta(name)
    if m["choices"] is not None:
        return Rule("choice", choices=tuple(map(str, m["choices"])))
    if len(accepted) == 1 and (kind := _KINDS.get(next(iter(accepted)))) is not None:
        return Rule(kind, m["low"], m["high"], above=m["low_open"], below=m["high_open"])

    def check(v: Any) -> None:  # a field of more than one type (sample_index)
        why = cls.problem(name, v)
        if why is not None:
            raise ValueError(why.removeprefix("must be "))

    return Rule("option", check=check)


def _regressions() -> dict[str, Rule]:
    from pyproflab.analyses.options import RANK_BY, RegressionsOptions
    from pyproflab.workflows import ORDERS

    own = {
        "enabled": FLAG,
        "profile_type": TEXT,
        "order": Rule("choice", choices=tuple(ORDERS)),
        "metric": Rule("choice", choices=RANK_BY),
        "threshold_pct": Rule("number", 0, 1e6),
        "over_time": FLAG,
        "over_time_since": Rule("time", check=_time),
    }
    # Every other key is an option of the analysis (``metric`` is its rank_by).
    names = [n for n in RegressionsOptions.names() if n != "rank_by"]
    return own | {n: _option_rule(RegressionsOptions, n) for n in names}


GOGC: dict[str, Rule] = {
    "enabled": FLAG,
    "budget": Rule("budget", check=_budget),
    "headroom": Rule("number", 0, 1, below=True),
    "candidates": Rule("gogc", check=_gogc_list),
}

PGO: dict[str, Rule] = {
    "enabled": FLAG,
    "top": _option_rule(PgoOptions, "top"),
    "version": Rule("choice", choices=("newest", "all")),
    "verify": FLAG,
}

RETENTION: dict[str, Rule] = {
    "max_age_days": Rule("number", 0, 36_500, above=True),
    "metrics": FLAG,
    "keep_runs": Rule("integer", 0, 1_000_000),
}


def rules(section: str) -> dict[str, Rule]:
    """The rules of a section: job, selection, regressions, gogc, pgo, retention
    (``[[source]]``'s are each kind's own: ``jobs.source_kinds``)."""
    if section == "regressions":
        return _regressions()
    return {
        "job": JOB,
        "selection": SELECTION,
        "gogc": GOGC,
        "pgo": PGO,
        "retention": RETENTION,
    }[section]
