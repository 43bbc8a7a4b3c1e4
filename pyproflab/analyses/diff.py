"""A profile minus a base profile, as ``go tool pprof -diff_base=BASE`` / ``-base=BASE``.

Rules (pprof's ``fetchProfiles``, re-expressed):

- The base's samples get the label ``pprof::base=true`` (``-diff_base`` only;
  it replaces any label of that key), then every value is negated; samples
  whose values are all zero are dropped.
- The source and the negated base are merged by pprof's merge rules (one
  sample per stack and label set): a stack in both appears twice, once with
  the base label, so ``top`` can take its total from the base
  (``-diff_base``: percentages are shares of the base) while ``-base``
  subtracts the base in place.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from pyproflab.arrays import list_parts, to_numpy
from pyproflab.errors import UsageError
from pyproflab.model import Profile

BASE_LABEL = {"key": "pprof::base", "str": "true", "num": None, "num_unit": None}


def negate(profile: Profile) -> Profile:
    """Every sample value times -1; samples left all zero are dropped."""
    offsets, flat = list_parts(profile.samples.column("values"))
    values = -to_numpy(flat).astype(np.int64)
    n = profile.samples.num_rows
    row = np.repeat(np.arange(n), np.diff(offsets))
    keep = np.bincount(row, weights=values != 0, minlength=n) > 0
    col = profile.samples.schema.get_field_index("values")
    field = profile.samples.schema.field(col)
    arr = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, pa.int64()))
    samples = profile.samples.set_column(col, field, arr.cast(field.type))
    return dataclasses.replace(profile, samples=samples.filter(pa.array(keep, pa.bool_())))


def label_base(profile: Profile) -> Profile:
    """Every sample labelled ``pprof::base=true`` (an existing label of that key replaced)."""
    labels = [
        [lb for lb in ls if lb["key"] != BASE_LABEL["key"]] + [BASE_LABEL]
        for ls in profile.samples.column("labels").to_pylist()
    ]
    col = profile.samples.schema.get_field_index("labels")
    field = profile.samples.schema.field(col)
    samples = profile.samples.set_column(col, field, pa.array(labels, field.type))
    return dataclasses.replace(profile, samples=samples)


def with_base(
    source: Profile, *, diff_base: Profile | None = None, base: Profile | None = None
) -> Profile:
    """``source`` minus ``diff_base`` (pprof's -diff_base) or ``base`` (-base), as
    is with neither; both is a ``UsageError`` (pprof takes one)."""
    if diff_base is not None and base is not None:
        raise UsageError("give diff_base or base, not both")
    other = diff_base if diff_base is not None else base
    if other is None:
        return source
    return subtract(source, other, diff_base=base is None)


def subtract(source: Profile, base: Profile, *, diff_base: bool = True) -> Profile:
    """``source`` minus ``base`` (see the module rules); ``diff_base=False`` is ``-base``."""
    from pyproflab.analyses.merge import merge

    if diff_base:
        base = label_base(base)
    return merge([source, negate(base)])
