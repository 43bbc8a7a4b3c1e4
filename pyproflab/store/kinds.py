"""One kind of profile out of a selection that mixes several.

pprof merges only profiles of one period type with sample types in common; a
store usually holds every type (cpu, heap, allocs, goroutine, ...), so a
selection without a type would fail to merge. Rules of ``one_kind``:

- A selection that names a profile type or profile ids is the user's choice:
  it is returned unchanged (a merge error then says what is wrong).
- The selected profiles are grouped by kind: (profile_type, period type,
  period unit, sample types). With ``sample`` (a sample type name such as ``cpu`` or
  ``alloc_space``), only kinds holding that sample type count; when none does, a
  UsageError names the sample types there are.
- One kind: unchanged. Several: the CPU profiles (the kind most questions are
  about), else the kind with the most profiles (ties: by name); the selection
  gets that profile type, plus the profile ids when other kinds share the type
  (e.g. another runtime's CPU profiles with another period type).
- Whenever the selection narrows, a one-line note says what was chosen and how
  to choose otherwise (or, when the sample type held by one kind alone chose it,
  says so and asks for no choice); kinds are listed by count, then name. Callers
  show it (the CLI on stderr, the Python API as a
  ``SelectionNarrowed`` warning, the report as a section note).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING

from pyproflab.errors import UsageError

if TYPE_CHECKING:
    from pyproflab.store.connection import Store
    from pyproflab.store.select import Selection


class SelectionNarrowed(UserWarning):
    """A selection mixing profile kinds was narrowed to one kind."""


_KIND_COLUMNS = "p.profile_id, p.profile_type, p.period_type, p.period_unit, p.sample_types"


def _names(groups: dict[tuple, list[int]]) -> dict[tuple, str]:
    """Each kind's name: its profile type, with its period and sample types only
    when another kind has the same profile type."""
    per_type: dict[str, int] = {}
    for k in groups:
        per_type[k[0]] = per_type.get(k[0], 0) + 1
    return {
        k: k[0] if per_type[k[0]] == 1 else f"{k[0]} ({k[1]}/{k[2]}: {','.join(k[3])})"
        for k in groups
    }


def one_kind(
    store: Store, selection: Selection, *, sample: str | int | None = None, force: bool = False
) -> tuple[Selection, str | None]:
    """The selection narrowed to one kind of profile, and a note when it narrowed
    (see the module rules). ``force``: narrow a selection naming a profile type
    too (a report section that asks for "cpu" wants one mergeable kind of it)."""
    if selection.profile_ids is not None:
        return selection, None
    if selection.profile_type is not None and not force:
        return selection, None
    rows = store.sql(*selection.query(_KIND_COLUMNS)).to_pylist()
    groups: dict[tuple, list[int]] = {}
    for r in rows:
        types = tuple(t["type"] for t in r["sample_types"])
        key = (r["profile_type"], r["period_type"], r["period_unit"], types)
        groups.setdefault(key, []).append(r["profile_id"])
    if len(groups) <= 1:
        return selection, None
    fits = [k for k in groups if not isinstance(sample, str) or sample in k[3]]
    if not fits:
        # No kind holds it: merging them all would fail on their period types instead.
        have = sorted({t for k in groups for t in k[3]})
        raise UsageError(
            f"sample type {sample!r}: no selected profile has it (they have: {', '.join(have)})"
        )
    chosen = min(fits, key=lambda k: (k[0] != "cpu", -len(groups[k]), tuple(map(str, k))))
    ids = groups[chosen]
    same_type = [k for k in groups if k[0] == chosen[0]]
    narrowed = dataclasses.replace(
        selection,
        profile_type=chosen[0],
        profile_ids=ids if len(same_type) > 1 else None,
    )
    names = _names(groups)
    kinds = ", ".join(
        f"{names[k]} {len(v)}"
        for k, v in sorted(groups.items(), key=lambda kv: (-len(kv[1]), names[kv[0]]))
    )
    # A sample type only one kind holds already chose: nothing is left to choose.
    why = (
        f", the only ones with sample type {sample!r}"
        if isinstance(sample, str) and len(fits) == 1
        else " (choose with --type / profile_type=)"
    )
    note = (
        f"the selection mixes profile types ({kinds}): using the {len(ids)} "
        f"{names[chosen]} profiles{why}"
    )
    return narrowed, note


def one_kind_warn(
    store: Store, selection: Selection, *, sample: str | int | None = None
) -> Selection:
    """``one_kind`` for the Python API: the note becomes a ``SelectionNarrowed`` warning."""
    narrowed, note = one_kind(store, selection, sample=sample)
    if note:
        warnings.warn(note, SelectionNarrowed, stacklevel=4)
    return narrowed
