"""The kinds of a job's ``[[source]]`` tables: one table, each kind with its keys.

Rules:

- ``KINDS`` maps a kind's name to its ``Kind``: the keys a ``[[source]]`` of
  that kind may have (``Key``: type, default, required, range, choices, and
  whether it is a path, resolved against the job file's folder) and the
  function that runs it (``jobs/sources.py``).
- ``check(raw, where, base)`` turns one ``[[source]]`` table into a
  ``SourceSpec``: a known kind; no key the kind does not declare (a typo must
  not silently disable a setting); every required key; each value checked by
  its ``jobs.keys.Rule`` (TOML's types: an int is not a bool, a float may be
  written as an int; within its range or choices); defaults filled; paths
  resolved. Every problem is one ``UsageError`` naming the file, the table and
  the key (``keys.check_table``'s wording).
- Secrets are never keys: a kind that needs one names the environment
  variable holding it (``*_env`` keys), read when the source runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyproflab.errors import UsageError
from pyproflab.jobs.keys import Rule, check_table
from pyproflab.sources.targets import KNOWN_TYPES


@dataclass(frozen=True)
class Key:
    """One key of a ``[[source]]`` table. ``type``: str, int, float, bool, list
    (of strings) or dict (string to string)."""

    name: str
    type: type
    default: Any = None
    required: bool = False
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    path: bool = False
    help: str = ""
    #: raises ValueError saying what the value must be (then it decides alone)
    check: Callable[[Any], None] | None = None

    def rule(self) -> Rule:
        """The key's rule in the job file's schema (``jobs.keys``)."""
        if self.choices is not None:
            return Rule("choice", choices=tuple(map(str, self.choices)))
        kind = {str: "string", int: "integer", float: "number", bool: "boolean",
                list: "strings", dict: "labels"}[self.type]  # fmt: skip
        return Rule(kind, self.low, self.high, check=self.check)


def _profile_types(v: Any) -> None:
    """A collect source's ``types``: names ``--types`` takes (any case; [] is the default)."""
    if not isinstance(v, list) or not all(
        isinstance(x, str) and x.strip().lower() in KNOWN_TYPES for x in v
    ):
        raise ValueError("a list of " + ", ".join(KNOWN_TYPES))


@dataclass(frozen=True)
class Kind:
    """A kind of source: its name, what it reads, its keys and its runner (the
    name of a function of ``jobs/sources.py``, looked up when it runs)."""

    name: str
    help: str
    keys: tuple[Key, ...]
    runner: str

    def key(self, name: str) -> Key | None:
        return next((k for k in self.keys if k.name == name), None)


@dataclass
class SourceSpec:
    """One checked ``[[source]]`` table: its kind and the value of every key the
    kind declares (defaults filled). Keys read as attributes: ``spec.path``."""

    kind: str
    options: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        if name == "options":  # not set yet (unpickling): never look it up in itself
            raise AttributeError(name)
        try:
            return self.options[name]
        except KeyError:
            raise AttributeError(f"a {self.kind} source has no key {name!r}") from None


# Keys several kinds share.
_META = (
    Key("service", str, help="service of every profile (a path template may set it)"),
    Key("version", str),
    Key("instance", str),
    Key("labels", dict, default={}),
)
_BATCH = Key("batch_size", int, 64, low=1, high=100_000, help="profiles per transaction")
_PULL = (
    Key("since", str, "24h", help="how far back each run looks: 90m, 24h, 7d, or an ISO time"),
    Key("timeout", float, 30.0, low=0.1, high=3600, help="seconds per request"),
    Key("retries", int, 3, low=0, high=20, help="retries of a 429, 5xx or network fault"),
    Key("max_mib", int, 256, low=1, high=4096, help="largest response body, MiB"),
    _BATCH,
)

KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "drop",
            "new files in a folder (files handled before are skipped)",
            (
                Key("path", str, required=True, path=True),
                Key("path_template", str),
                *_META,
                Key("min_age_seconds", float, 0.0, low=0, high=86_400 * 365),
                _BATCH,
            ),
            "drop_source",
        ),
        Kind(
            "parquet",
            "an exported dataset (pyproflab export --parquet)",
            (Key("path", str, required=True, path=True),),
            "parquet_source",
        ),
        Kind(
            "collect",
            "one collection window from live Go services (pyproflab collect)",
            (
                Key("targets", str, required=True, path=True),
                Key("seconds", int, 10, low=1, high=3600),
                Key("types", list, check=_profile_types),
                Key("archive", str, path=True),
                Key("metrics_interval", float, 2.0, low=0, high=3600),
                Key("timeout", float, 10.0, low=0.1, high=3600),
                Key("retries", int, 2, low=0, high=20),
            ),
            "collect_source",
        ),
        Kind(
            "datadog",
            "the profiles of a Datadog query (keys from DD_API_KEY, DD_APP_KEY)",
            (
                Key("query", str, required=True),
                Key("site", str),
                Key("top", int, low=1, high=10_000),
                Key("types", list, ["cpu"]),
                Key("instance_tag", str, "host"),
                Key("any_runtime", bool, False),
                Key("base_url", str),
                *_PULL,
            ),
            "pull_source",
        ),
        Kind(
            "pyroscope",
            "merged profiles per series and window from Grafana Pyroscope",
            (
                Key("url", str, required=True),
                Key("query", str, required=True),
                Key("step", str, "1h", help="one profile per series per window"),
                Key("tenant", str),
                Key("auth_env", str),
                Key("go_pgo", int, low=1, high=1000),
                Key("legacy", bool, False),
                *_PULL,
            ),
            "pull_source",
        ),
        Kind(
            "parca",
            "merged profiles per series and window from Parca",
            (
                Key("url", str, required=True),
                Key("query", str, required=True),
                Key("step", str, "1h"),
                Key("auth_env", str),
                *_PULL,
            ),
            "pull_source",
        ),
    )
}


def resolve(base: Path, value: str) -> str:
    """``value`` (``~`` and ``$VARS`` expanded) as a path; a relative one under ``base``."""
    p = Path(os.path.expandvars(os.path.expanduser(value)))
    return str(p if p.is_absolute() else base / p)


def _kind_rule() -> Rule:
    return Rule("choice", choices=tuple(KINDS), required=True)


def rules(kind: Kind) -> dict[str, Rule]:
    """The rules of a ``[[source]]`` table of ``kind`` (its ``kind`` key too)."""
    return {"kind": _kind_rule()} | {k.name: k.rule() for k in kind.keys}


def check(raw: Any, where: str, base: Path) -> SourceSpec:
    """One ``[[source]]`` table as a ``SourceSpec`` (see the module rules)."""
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: must be a table")
    name = raw.get("kind")
    kind = KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        rule = _kind_rule()
        if "kind" not in raw:
            raise UsageError(f"{where}: kind is required ({rule.expected()})")
        raise UsageError(f"{where}: kind {rule.problem(raw['kind'])} (got {raw['kind']!r})")
    extra = sorted(set(raw) - {"kind"} - {k.name for k in kind.keys})
    if extra:
        known = ", ".join(k.name for k in kind.keys)
        raise UsageError(f"{where}: unknown key {extra[0]!r} for a {kind.name} source ({known})")
    for key in kind.keys:
        if key.required and key.name not in raw:
            raise UsageError(f"{where}: a {kind.name} source needs {key.name}")
    check_table(raw, rules(kind), where)
    options: dict[str, Any] = {}
    for key in kind.keys:
        if key.name not in raw:
            options[key.name] = key.default.copy() if isinstance(key.default, dict) else key.default
            continue
        value: Any = float(raw[key.name]) if key.type is float else raw[key.name]
        options[key.name] = resolve(base, value) if key.path else value
    return SourceSpec(kind.name, options)
