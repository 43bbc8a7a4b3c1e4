"""The in-memory model of one pprof profile.

A ``Profile`` is the decoded content of one pprof file: its metadata as plain
Python values and its samples, locations, functions and mappings as Arrow
tables with the ``schema.PROFILE_*`` schemas. It knows nothing of the store,
the analyses or the CLI above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa

from pyproflab import schema

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def time_of_nanos(nanos: int) -> datetime:
    """The UTC datetime of ``nanos`` since the epoch (a profile's ``time_nanos``),
    floored to the microsecond the store keeps. Exact integers, no float: rounded,
    a profile taken at 07:59:59.9999999 became 08:00:00 and fell on the wrong side
    of ``since``/``until`` 08:00."""
    return _EPOCH + timedelta(microseconds=nanos // 1000)


def nanos_of_time(t: datetime) -> int:
    """Nanoseconds since the epoch of an aware datetime, exactly (``t.timestamp() *
    1e9`` is a float a few hundred nanoseconds off, below the microsecond)."""
    return (t - _EPOCH) // _US * 1000


@dataclass(frozen=True)
class ValueType:
    """A measured quantity: ``type`` (e.g. ``cpu``) in ``unit`` (e.g. ``nanoseconds``)."""

    type: str
    unit: str

    def __str__(self) -> str:
        return f"{self.type}/{self.unit}"


@dataclass
class Profile:
    """One decoded pprof profile; every field of the format is kept.

    Rules: ``samples.values`` has ``len(sample_types)`` entries per row;
    ``default_sample_type`` is a sample type's ``type`` or ``""``; times are
    nanoseconds (since the epoch for ``time_nanos``).
    """

    sample_types: list[ValueType]
    samples: pa.Table
    locations: pa.Table
    functions: pa.Table
    mappings: pa.Table
    period_type: ValueType | None = None
    period: int = 0
    time_nanos: int = 0
    duration_nanos: int = 0
    comments: list[str] = field(default_factory=list)
    drop_frames: str = ""
    keep_frames: str = ""
    default_sample_type: str = ""
    doc_url: str = ""

    @property
    def num_samples(self) -> int:
        return self.samples.num_rows

    def __repr__(self) -> str:
        """One line: sample types, sizes, period, duration (the tables' schemas are
        long and say nothing about this profile)."""
        types = ", ".join(str(t) for t in self.sample_types) or "no sample types"
        parts = [
            f"[{types}]",
            f"{self.samples.num_rows} samples",
            f"{self.locations.num_rows} locations",
            f"{self.functions.num_rows} functions",
        ]
        if self.period_type is not None and self.period:
            parts.append(f"period {self.period} {self.period_type.unit}")
        if self.duration_nanos:
            parts.append(f"duration {self.duration_nanos / 1e9:.3g} s")
        return f"Profile({', '.join(parts)})"

    def default_sample_index(self) -> int:
        """The index pprof shows by default: ``default_sample_type`` if set, else the last."""
        if self.default_sample_type:
            for i, st in enumerate(self.sample_types):
                if st.type == self.default_sample_type:
                    return i
        return len(self.sample_types) - 1

    def total(self, index: int) -> int:
        """Sum of sample values of one sample type."""
        import pyarrow.compute as pc

        from pyproflab.arrays import list_parts, to_numpy

        n, k = self.samples.num_rows, len(self.sample_types)
        if n == 0:
            return 0
        # numpy over the flat values when every sample has one value a type (as the
        # decoder makes them): pc.sum would import pandas, seconds on a busy machine.
        _, flat = list_parts(self.samples.column("values"))
        if len(flat) == n * k and 0 <= index < k:
            return int(to_numpy(flat).astype(np.int64, copy=False).reshape(n, k)[:, index].sum())
        vals = pc.list_element(self.samples.column("values"), index)
        return int(pc.sum(vals).as_py() or 0)

    @classmethod
    def empty(cls, sample_types: list[ValueType] | None = None) -> Profile:
        return cls(
            sample_types=list(sample_types or []),
            samples=schema.PROFILE_SAMPLES.empty_table(),
            locations=schema.PROFILE_LOCATIONS.empty_table(),
            functions=schema.PROFILE_FUNCTIONS.empty_table(),
            mappings=schema.PROFILE_MAPPINGS.empty_table(),
        )
