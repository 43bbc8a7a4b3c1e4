"""The questions every front end asks the same way: the CLI, ``Lab``, jobs, the
HTML report and the demo call these, so that each has one answer.

- Which versions a service has (``versions``): the versions of its profiles in
  the selection (of one profile type when given), oldest first: by the time
  the version's first profile was taken (``order="time"``; the time a profile
  was taken is ``select.TAKEN_AT``), or by first ingest (``order="ingest"``).
  Profiles without a version are not a version.
- Versions that started *together* cannot be told apart by time: a fleet
  rolling out a canary, or a collection round over instances of two versions,
  takes their first profiles within milliseconds, in whatever order the
  requests finished. Two versions are together when their first profiles
  overlap in time (each counted as at least ``TOGETHER_S`` long, for
  snapshots of no duration). Together, they are ordered by name, runs of
  digits compared as numbers (v2 before v10, 1.9 before 1.10), a semantic
  version's pre-release before its release (v1.10.0-rc.1 before v1.10.0), and the
  ``Ordering`` keeps which were together. By ingest, versions whose first
  profiles came in one ingest (the same ``ingested_at``: an ingest stores
  files in path order, not by age) are ordered among themselves by time,
  and those together by name.
- Which versions to compare (``comparison``): the newest version against the
  one before it: a new release is judged against its predecessor, not against
  whatever happened to be stored first. With more than two versions the
  comparison says which it left out; when the two were together, it says
  they were ordered by name.
- Narrowing a selection (``narrow``): the fields given (not None) replace the
  selection's, the rest are kept.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pyproflab.store import queries
from pyproflab.store.connection import Store
from pyproflab.store.select import Selection

ORDERS = ("time", "ingest")
#: The least time a first profile is taken to cover, when ordering by time.
TOGETHER_S = 1.0


@dataclass(frozen=True)
class Ordering:
    """A service's versions oldest first (``names``), and the groups of them
    that started together and were ordered by name (``together``)."""

    names: list[str] = field(default_factory=list)
    together: list[list[str]] = field(default_factory=list)

    def tied(self, a: str, b: str) -> bool:
        return any(a in g and b in g for g in self.together)


def versions(
    store: Store, selection: Selection, profile_type: str | None = None, order: str = "time"
) -> dict[str | None, Ordering]:
    """service (None: profiles without one) -> its versions, oldest first."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, not {order!r}")
    rows = queries.versions(store, selection, profile_type).to_pylist()
    by_service: dict[str | None, list[dict]] = {}
    for row in rows:
        by_service.setdefault(row["service"], []).append(row)
    return {svc: _order(vs, order) for svc, vs in by_service.items()}


def _order(rows: list[dict], order: str) -> Ordering:
    """Rows of one service's versions (``queries.versions``) oldest first, in
    runs that started together, each run in name order."""
    batches = [rows]
    if order == "ingest":
        batches = []
        for row in sorted(rows, key=lambda r: r["first_id"]):
            if not batches or row["first_ingested_at"] != batches[-1][-1]["first_ingested_at"]:
                batches.append([])
            batches[-1].append(row)
    groups = [sorted(g, key=_natural) for batch in batches for g in _together(batch)]
    return Ordering([v for g in groups for v in g], [g for g in groups if len(g) > 1])


def _together(rows: list[dict]) -> list[list[str]]:
    """The versions of ``rows`` by their first profile's time, in runs whose
    first profiles overlap."""
    groups: list[list[str]] = []
    end = None  # when the current run's first profiles end
    for row in sorted(rows, key=lambda r: (r["first_taken"], r["first_id"])):
        span = timedelta(seconds=max(row["first_duration_nanos"] / 1e9, TOGETHER_S))
        if end is not None and row["first_taken"] < end:
            groups[-1].append(row["version"])
            end = max(end, row["first_taken"] + span)
        else:
            groups.append([row["version"]])
            end = row["first_taken"] + span
    return groups


# A semantic version (Go's module versions): MAJOR.MINOR.PATCH, a pre-release, build data.
_SEMVER = re.compile(r"^(v?\d+\.\d+\.\d+)(?:-([0-9A-Za-z.-]+))?(\+[0-9A-Za-z.-]+)?$")


def _natural(name: str) -> list:
    """A version's sort key: runs of digits as numbers, the rest as text; a
    semantic version's pre-release before its release (v1.10.0-rc.1 before
    v1.10.0, as semver and Go order them), not after it as its longer text."""
    m = _SEMVER.match(name)
    if m is None:
        return _digits_as_numbers(name)
    core, pre, build = m.groups()
    tail = [(-1, 0, ""), *_digits_as_numbers(pre)] if pre else [(2, 0, "")]
    return _digits_as_numbers(core) + tail + _digits_as_numbers(build or "")


def _digits_as_numbers(text: str) -> list:
    return [
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text)
    ]


@dataclass(frozen=True)
class Comparison:
    """Which two versions to compare, and a note when others were left out."""

    base: str
    new: str
    note: str | None = None


def comparison(ordering: Ordering) -> Comparison | None:
    """The newest version against the one before it (``ordering``: oldest
    first); None with fewer than two versions."""
    ordered = ordering.names
    if len(ordered) < 2:
        return None
    base, new = ordered[-2], ordered[-1]
    notes = []
    if len(ordered) > 2:
        older = ", ".join(ordered[:-2])
        notes.append(
            f"{len(ordered)} versions; comparing the newest with the one before it "
            f"({base} -> {new}); left out: {older}"
        )
    if ordering.tied(base, new):
        notes.append(
            f"{base} and {new} started together (their first profiles overlap in time), so which "
            f"is newer is taken from their names: {base} -> {new}; to compare the other "
            f"way, name the sides (regressions --base version={new} --new version={base})"
        )
    return Comparison(base, new, "; ".join(notes) or None)


def unversioned(store: Store, selection: Selection, profile_type: str | None = None) -> list:
    """The services of the selection none of whose profiles (of ``profile_type``)
    carries a version, in name order: nothing ``versions`` can compare."""
    t = store.profiles(narrow(selection, profile_type=profile_type))
    pairs = list(zip(t.column("service").to_pylist(), t.column("version").to_pylist(), strict=True))
    versioned = {svc for svc, ver in pairs if ver is not None}
    return sorted({svc for svc, _ in pairs} - versioned, key=lambda s: (s is not None, s or ""))


def narrow(selection: Selection, **fields: Any) -> Selection:
    """``selection`` with the given fields (those not None) replaced."""
    return dataclasses.replace(selection, **{k: v for k, v in fields.items() if v is not None})
