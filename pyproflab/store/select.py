"""Which profiles of the store a question is about.

Rules: every field that is set narrows the selection (AND); ``None`` means
any. ``service``, ``version``, ``instance`` and ``profile_type`` take one
value or a list of values. ``since`` is inclusive and ``until`` exclusive,
compared with the time the profile was taken: its ``time`` (pprof
time_nanos, floored to the microsecond), else its collection
``window_start``, else when it was ingested (a profile with time_nanos 0 and
no window is selected by when it was stored; one stamped in the future, by
that time). Times are datetimes (naive ones are UTC), ISO strings
(``2026-11-01T10:00``; a date alone is its midnight; UTC unless they give an
offset, ``Z`` or ``-08:00``, whatever the machine's time zone; fractions below
the microsecond are dropped), or durations ago (``30m``, ``72h``, ``7d``,
``2w``, ``45s``, or ``72h ago``); epoch numbers are refused. ``labels`` are
metadata labels (sidecar, ``--label``), all of which must match.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from pyproflab.errors import StoreError, UsageError

# The time a profile was taken, as SQL over profiles p.
TAKEN_AT = "coalesce(p.time, p.window_start, p.ingested_at)"

_AGO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
# A time as a duration ago: "72h", or "72h ago" as the help texts write it.
_AGO_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])(?:\s+ago)?\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

StrOrList = str | Sequence[str] | None


def parse_duration(value: str) -> timedelta:
    """A duration written ``90s``, ``5m``, ``2h``, ``7d`` or ``1w``; UsageError otherwise."""
    m = _AGO.match(value)
    if not m:
        raise UsageError(f"bad duration {value!r}: expected a number and s, m, h, d or w (90s, 1h)")
    try:
        return timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})
    except OverflowError:
        raise UsageError(f"bad duration {value!r}: too long") from None


def parse_time(value: datetime | str, *, now: datetime | None = None) -> datetime:
    """An aware UTC datetime from a datetime, an ISO string, or a duration ago (``72h``)."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        m = _AGO_TIME.match(value)
        if m:
            now = now or datetime.now(UTC)
            try:
                return now - timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})
            except (OverflowError, ValueError):
                raise UsageError(
                    f"bad time {value!r}: reaches before year 1 (the earliest is "
                    f"{(now - datetime(1, 1, 2, tzinfo=UTC)).days}d ago)"
                ) from None
        try:
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(
                f"bad time {value!r}: expected ISO time (2026-11-01T10:00) or a duration "
                "ago (30m, 72h, 7d)"
            ) from None
    else:
        raise UsageError(f"bad time {value!r}: expected a datetime or a string")
    try:
        return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    except OverflowError:
        raise UsageError(f"bad time {value!r}: in UTC it passes the years 1 to 9999") from None


def _values(v: StrOrList) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, str):
        return [v]
    return [str(x) for x in v]


@dataclass
class Selection:
    """A filter over the store's profiles (see the module docstring for the rules)."""

    service: StrOrList = None
    version: StrOrList = None
    instance: StrOrList = None
    profile_type: StrOrList = None
    since: datetime | str | None = None
    until: datetime | str | None = None
    labels: dict[str, str] | None = None
    profile_ids: list[int] | None = None

    KEYS = ("service", "version", "instance", "profile_type", "since", "until")

    def __post_init__(self) -> None:
        # A notebook's slip (service=5, labels="team=x") is refused here in one line,
        # not later as an AttributeError or TypeError deep in the query.
        for key in ("service", "version", "instance", "profile_type"):
            v = getattr(self, key)
            if v is None or isinstance(v, str):
                continue
            if not isinstance(v, (list, tuple, set, frozenset)) or not all(
                isinstance(x, str) for x in v
            ):
                raise UsageError(f"{key}={v!r}: expected a string or a list of strings")
        for key in ("since", "until"):
            v = getattr(self, key)
            if v is not None and not isinstance(v, (str, datetime)):
                raise UsageError(
                    f"{key}={v!r}: expected a datetime, an ISO time (2026-11-01T10:00) "
                    "or a duration ago (30m, 72h, 7d)"
                )
        if self.labels is not None and not isinstance(self.labels, Mapping):
            raise UsageError(f"labels={self.labels!r}: expected a dict such as {{'team': 'x'}}")

    @classmethod
    def of(cls, value: Selection | Mapping[str, Any] | None, name: str = "selection") -> Selection:
        """A ``Selection`` as given, or built from a dict of its fields (None: all);
        anything else, or a dict with a key that is no field, is a UsageError naming
        ``name`` (the argument) and what it accepts."""
        if value is None:
            return cls()
        if isinstance(value, Selection):
            return value
        accepted = ", ".join(f.name for f in fields(cls))
        if not isinstance(value, Mapping):
            raise UsageError(
                f"{name}={value!r}: expected a Selection or a dict such as "
                f"{{'version': 'v1'}} (keys: {accepted})"
            )
        unknown = sorted(str(k) for k in value if k not in {f.name for f in fields(cls)})
        if unknown:
            raise UsageError(f"{name}: unknown key {unknown[0]!r} (keys: {accepted})")
        return cls(**value)

    @classmethod
    def from_kv(cls, items: Iterable[str], flag: str = "selection") -> Selection:
        """From ``KEY=VALUE`` strings: known keys (service, version, instance,
        profile_type or type, since, until, profile_id) set fields, any other key is a
        metadata label. A key given twice for a field selects any of its values.
        An item without ``=`` is a UsageError naming ``flag`` (the option it came
        from); a bare word is most often a version (``--base v1``), so it says how
        to select one."""
        known: dict[str, list[str]] = {}
        labels: dict[str, str] = {}
        ids: list[int] = []
        for item in items:
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or not key:
                hint = f" (a version: {flag} version={key})" if key and not sep else ""
                raise UsageError(f"{flag} expects KEY=VALUE, got {item!r}{hint}")
            if key == "type":
                key = "profile_type"
            if key in ("profile_id", "profile_ids"):
                try:
                    ids += [int(x) for x in value.split(",") if x.strip()]
                except ValueError:
                    raise UsageError(f"profile_id expects integers, got {value!r}") from None
            elif key in cls.KEYS:
                known.setdefault(key, []).append(value)
            else:
                labels[key] = value
        kwargs: dict[str, Any] = {}
        for key, vals in known.items():
            if key in ("since", "until"):
                if len(vals) > 1:
                    raise UsageError(f"{key} given more than once")
                kwargs[key] = vals[0]
            else:
                kwargs[key] = vals[0] if len(vals) == 1 else vals
        return cls(**kwargs, labels=labels or None, profile_ids=ids or None)

    def query(
        self,
        columns: str = "p.*",
        *,
        order_by: str | None = "p.profile_id",
        now: datetime | None = None,
    ) -> tuple[str, list[Any]]:
        """A complete query over the store's ``profiles p`` that this selection picks,
        and its bound parameters: ``SELECT columns FROM profiles p WHERE ... ORDER BY``.
        Store modules use it whole or as a subquery (``p.profile_id IN (...)``);
        ``columns`` and ``order_by`` are SQL the store writes, never user values."""
        where, params = self.where(now=now)
        order = f" ORDER BY {order_by}" if order_by else ""
        return f"SELECT {columns} FROM profiles p WHERE {where}{order}", params

    def where(self, *, now: datetime | None = None) -> tuple[str, list[Any]]:
        """A SQL boolean over ``profiles p`` and its bound parameters, in order (the
        condition of ``query``; prefer ``query``, which is a complete query)."""
        parts: list[str] = []
        params: list[Any] = []
        for col in ("service", "version", "instance", "profile_type"):
            vals = _values(getattr(self, col))
            if vals is None:
                continue
            if len(vals) == 1:
                parts.append(f"p.{col} = ?")
                params.append(vals[0])
            else:
                parts.append(f"list_contains(?::VARCHAR[], p.{col})")
                params.append(vals)
        now = now or datetime.now(UTC)  # one now: since=2h and until=1h are an hour apart
        since = None if self.since is None else parse_time(self.since, now=now)
        until = None if self.until is None else parse_time(self.until, now=now)
        if since is not None and until is not None and until < since:
            raise UsageError(
                f"until={self.until!r} is before since={self.since!r} ({until:%Y-%m-%d %H:%M:%S} "
                f"< {since:%Y-%m-%d %H:%M:%S} UTC): the window ends before it starts"
            )
        if since is not None:
            parts.append(f"{TAKEN_AT} >= ?")
            params.append(since)
        if until is not None:
            parts.append(f"{TAKEN_AT} < ?")
            params.append(until)
        for key, value in (self.labels or {}).items():
            parts.append("map_extract_value(p.labels, ?) = ?")
            params += [str(key), str(value)]
        if self.profile_ids is not None:
            parts.append("list_contains(?::BIGINT[], p.profile_id)")
            params.append([int(i) for i in self.profile_ids])
        return (" AND ".join(parts) if parts else "TRUE"), params

    @property
    def everything(self) -> bool:
        """No field is set: the selection is every profile."""
        return all(getattr(self, f.name) is None for f in fields(self))

    def describe(self) -> str:
        """The set fields as ``key=value`` words (for messages)."""
        words = []
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None:
                continue
            if isinstance(v, dict):
                words += [f"{k}={x}" for k, x in v.items()]
            elif isinstance(v, (list, tuple)):
                words.append(f"{f.name}={','.join(map(str, v))}")
            else:
                words.append(f"{f.name}={v}")
        return " ".join(words) if words else "(everything)"


def no_profiles(store: Any, selection: Selection, hint: str = "") -> StoreError:
    """The error of a selection that matches no profile: ``no profiles in
    STORE`` for the whole store, else ``no profiles match SELECTION``, then
    ``(STORE holds no profiles)`` when it holds none (a misspelled path to
    ``open()`` makes a new, empty store). ``hint`` follows in parentheses."""
    if selection.everything:
        said = f"no profiles in {store.name}"
    else:
        (n,) = store.sql("SELECT count(*) AS n FROM profiles").column("n").to_pylist()
        empty = f" ({store.name} holds no profiles)" if n == 0 else ""
        said = f"no profiles match {selection.describe()}{empty}"
    return StoreError(f"{said} ({hint})" if hint else said)
