"""GC CPU by category from a CPU profile's stacks, after the Go GC guide.

The guide (https://go.dev/doc/gc-guide, "Identifying costs") names the
functions whose cumulative time is GC cost: ``runtime.gcBgMarkWorker`` (mark
workers), ``runtime.gcAssistAlloc`` (mark assists) and ``runtime.mallocgc``
(allocation). ``GC_CATEGORIES`` adds write barriers, sweeping, the scavenger
and stop-the-world/other GC work, each as one regular expression over frames.

Rules:

- A category *matches* a sample when any frame of the sample matches its
  regex, with pprof's ``-focus`` semantics (function name, file name or
  mapping file; unanchored search; see ``filters``). So a category's *plain*
  value (``plain_cpu``) equals the "Showing nodes accounting for X" of
  ``go tool pprof -top -nodefraction=0 -focus=REGEX -sample_index=cpu``.
- Plain values overlap (an assist runs inside ``mallocgc``). The *exclusive*
  value (``cpu``) assigns every sample to the first matching category in the
  fixed priority order of ``GC_CATEGORIES``, so exclusive values add up
  without double counting; their sum over the profile total is the profile's
  GC share ("profile view").
- Shares are of pprof's report total (sum of |value| of every sample, before
  any filter). ``samples`` is the sum of the ``samples/count`` sample type
  when the profile has one (the number of profiling ticks), else the number of
  sample rows with a non-zero value.
- The value type is ``cpu`` when the profile has it, else the profile's
  default; the unit is reported (Go CPU profiles: nanoseconds).
- The regexes use the common subset of Python ``re`` and Go RE2, so the same
  text can be handed to ``go tool pprof -focus``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from pyproflab.analyses import filters
from pyproflab.analyses.graph import compute_total, resolve_sample_index, sample_values
from pyproflab.analyses.rows import RowsResult
from pyproflab.display import render
from pyproflab.model import Profile, ValueType


@dataclass(frozen=True)
class GcCategory:
    """One GC cost category: a name, a regex over frames, what it stands for."""

    name: str
    regex: str
    description: str


# In priority order: a sample goes to the first category that matches it.
# Why this order: the three mark-worker modes are told apart by the drain
# function the worker runs (Go >= 1.20); whatever else a worker does (its
# loop, mark termination it triggers) is "mark_worker_other". Assists,
# sweeping, scavenging and GC starts run *inside* mallocgc (allocation pays
# for them), so they rank before "allocation", which keeps only the
# allocator's own work.
GC_CATEGORIES: tuple[GcCategory, ...] = (
    GcCategory(
        "mark_dedicated",
        r"^runtime\.gcDrainMarkWorkerDedicated$",
        "dedicated mark worker (a whole P for the GC)",
    ),
    GcCategory(
        "mark_fractional",
        r"^runtime\.gcDrainMarkWorkerFractional$",
        "fractional mark worker (the 25% target's remainder)",
    ),
    GcCategory(
        "mark_idle",
        r"^runtime\.gcDrainMarkWorkerIdle$",
        "idle-priority mark worker (otherwise idle P)",
    ),
    GcCategory(
        "mark_worker_other",
        r"^runtime\.gcBgMarkWorker",
        "rest of runtime.gcBgMarkWorker (worker loop, mark termination it runs)",
    ),
    GcCategory(
        "mark_assist",
        r"^runtime\.gcAssistAlloc",
        "mark assists: allocating goroutines doing mark work",
    ),
    GcCategory(
        "write_barrier",
        r"^runtime\.(?:gcWriteBarrier|wbBufFlush|bulkBarrierPreWrite|bulkBarrierBitmap"
        r"|typeBitsBulkBarrier|wbZero|wbMove)",
        "write barriers and their buffer flushes",
    ),
    GcCategory(
        "sweep",
        r"^runtime\.(?:bgsweep|sweepone|deductSweepCredit|\(\*sweepLocked\)\.sweep"
        r"|\(\*mheap\)\.reclaim)",
        "sweeping: background (bgsweep) and proportional, paid by allocation",
    ),
    GcCategory(
        "scavenge",
        r"^runtime\.(?:bgscavenge|\(\*scavengerState\)|\(\*pageAlloc\)\.scavenge)",
        "returning memory to the OS (background scavenger, allocation-paid)",
    ),
    GcCategory(
        "stw_other",
        r"^runtime\.(?:gcStart|gcMarkDone|gcMarkTermination|GC)(?:\.|$)",
        "GC start, mark termination and stop-the-world phases, runtime.GC",
    ),
    GcCategory(
        "allocation",
        r"^runtime\.mallocgc",
        "the allocator itself (runtime.mallocgc and its size-class variants)",
    ),
)

CATEGORY_NAMES: tuple[str, ...] = tuple(c.name for c in GC_CATEGORIES)

ROWS_SCHEMA = pa.schema(
    [
        pa.field("category", pa.string(), nullable=False),
        pa.field("priority", pa.int32(), nullable=False),
        pa.field("cpu", pa.int64(), nullable=False),  # exclusive, in `unit`
        pa.field("share", pa.float64(), nullable=False),  # exclusive / total
        pa.field("samples", pa.int64(), nullable=False),  # exclusive
        pa.field("plain_cpu", pa.int64(), nullable=False),  # like pprof -focus=regex
        pa.field("plain_share", pa.float64(), nullable=False),
        pa.field("plain_samples", pa.int64(), nullable=False),
        pa.field("regex", pa.string(), nullable=False),
        pa.field("description", pa.string(), nullable=False),
    ]
)


@dataclass
class GcCategoriesResult(RowsResult):
    """GC CPU of one profile by category (see the module rules).

    ``rows`` has ``ROWS_SCHEMA``, one row per category in priority order;
    ``gc`` is the sum of the exclusive values, ``gc_share`` = ``gc / total``.
    """

    rows: pa.Table
    total: int
    gc: int
    sample_type: ValueType
    total_samples: int
    categories: tuple[GcCategory, ...] = field(default=GC_CATEGORIES)

    @property
    def gc_share(self) -> float:
        return self.gc / self.total if self.total else 0.0

    @property
    def unit(self) -> str:
        return self.sample_type.unit

    def value(self, category: str, *, plain: bool = False) -> int:
        """The exclusive (or plain) value of one category."""
        names = self.rows.column("category").to_pylist()
        try:
            i = names.index(category)
        except ValueError:
            raise KeyError(category) from None
        return int(self.rows.column("plain_cpu" if plain else "cpu")[i].as_py())

    def _repr_html_(self) -> str:
        return render(self, "html")

    def __repr__(self) -> str:
        return (
            f"GcCategoriesResult(gc={self.gc} of {self.total} {self.unit}, "
            f"share={self.gc_share:.2%})"
        )


def _value_index(profile: Profile, sample_index: int | str | None) -> int:
    if sample_index is None:
        if any(st.type == "cpu" for st in profile.sample_types):
            return resolve_sample_index(profile, "cpu")
        return profile.default_sample_index()
    return resolve_sample_index(profile, sample_index)


def gc_categories(
    profile: Profile,
    *,
    sample_index: int | str | None = None,
    categories: tuple[GcCategory, ...] = GC_CATEGORIES,
) -> GcCategoriesResult:
    """GC CPU of ``profile`` per category: exclusive by priority, and plain (pprof -focus)."""
    from pyproflab.analyses.sample_types import compatibilize_sample_types

    profile = compatibilize_sample_types([profile])[0]
    index = _value_index(profile, sample_index)
    total = compute_total(profile, index)
    # pprof prunes drop_frames before it focuses; do the same.
    work = filters.remove_uninteresting(profile)
    values = sample_values(work, index)
    count_index = next(
        (
            i
            for i, st in enumerate(work.sample_types)
            if st.type == "samples" and st.unit == "count"
        ),
        None,
    )
    counts = (
        sample_values(work, count_index)
        if count_index is not None
        else (values != 0).astype(np.int64)
    )

    assigned = np.zeros(len(values), dtype=bool)
    cols: dict[str, list] = {name: [] for name in ROWS_SCHEMA.names}
    denom = float(total) if total else 1.0
    for prio, cat in enumerate(categories):
        mask = filters.sample_mask(work, focus=cat.regex)
        if mask is None:  # an empty regex matches nothing here, by definition
            mask = np.zeros(len(values), dtype=bool)
        mine = mask & ~assigned
        assigned |= mask
        cpu = int(values[mine].sum(dtype=np.int64))
        plain = int(values[mask].sum(dtype=np.int64))
        cols["category"].append(cat.name)
        cols["priority"].append(prio)
        cols["cpu"].append(cpu)
        cols["share"].append(cpu / denom if total else 0.0)
        cols["samples"].append(int(counts[mine].sum(dtype=np.int64)))
        cols["plain_cpu"].append(plain)
        cols["plain_share"].append(plain / denom if total else 0.0)
        cols["plain_samples"].append(int(counts[mask].sum(dtype=np.int64)))
        cols["regex"].append(cat.regex)
        cols["description"].append(cat.description)
    rows = pa.table(cols, schema=ROWS_SCHEMA)
    return GcCategoriesResult(
        rows=rows,
        total=total,
        gc=int(sum(cols["cpu"])),
        sample_type=profile.sample_types[index],
        total_samples=int(counts.sum(dtype=np.int64)),
        categories=tuple(categories),
    )
