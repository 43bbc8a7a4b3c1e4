"""The questions every front end asks the same way: the CLI, ``Lab``, jobs, the
HTML report and the demo call these, so that each has one answer.

- Which versions a service has (``versions``): the versions of its profiles in
  the selection (of one profile type when given), oldest first: by the time
  the version's first profile was taken (``order="time"``; the time a profile
  was taken is ``select.TAKEN_AT``), or by first ingest (``order="ingest"``).
  Profiles without a version are not a version.
- Which versions to compare (``comparison``): the newest version against the
  one before it: a new release is judged against its predecessor, not against
  whatever happened to be stored first. With more than two versions the
  comparison says which it left out.
- Narrowing a selection (``narrow``): the fields given (not None) replace the
  selection's, the rest are kept.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pyproflab.store import queries
from pyproflab.store.connection import Store
from pyproflab.store.select import Selection

ORDERS = ("time", "ingest")


def versions(
    store: Store, selection: Selection, profile_type: str | None = None, order: str = "time"
) -> dict[str | None, list[str]]:
    """service (None: profiles without one) -> its versions, oldest first."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, not {order!r}")
    t = queries.versions(store, selection, profile_type, order)
    out: dict[str | None, list[str]] = {}
    for svc, ver in zip(t.column(0).to_pylist(), t.column(1).to_pylist(), strict=True):
        out.setdefault(svc, []).append(ver)
    return out


def unversioned(store: Store, selection: Selection, profile_type: str | None = None) -> list:
    """The services of the selection none of whose profiles (of ``profile_type``)
    carries a version, in name order: nothing ``versions`` can compare."""
    t = store.profiles(narrow(selection, profile_type=profile_type))
    pairs = list(zip(t.column("service").to_pylist(), t.column("version").to_pylist(), strict=True))
    versioned = {svc for svc, ver in pairs if ver is not None}
    return sorted({svc for svc, _ in pairs} - versioned, key=lambda s: (s is not None, s or ""))


@dataclass(frozen=True)
class Comparison:
    """Which two versions to compare, and a note when others were left out."""

    base: str
    new: str
    note: str | None = None


def comparison(ordered: list[str]) -> Comparison | None:
    """The newest version against the one before it (``ordered``: oldest first);
    None with fewer than two versions."""
    if len(ordered) < 2:
        return None
    base, new = ordered[-2], ordered[-1]
    note = None
    if len(ordered) > 2:
        older = ", ".join(ordered[:-2])
        note = (
            f"{len(ordered)} versions; comparing the newest with the one before it "
            f"({base} -> {new}); left out: {older}"
        )
    return Comparison(base, new, note)


def narrow(selection: Selection, **fields: Any) -> Selection:
    """``selection`` with the given fields (those not None) replaced."""
    return dataclasses.replace(selection, **{k: v for k, v in fields.items() if v is not None})
