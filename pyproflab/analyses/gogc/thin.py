"""A long gctrace log, thinned to what the model needs (issue 35, finding 7).

Rules:

- The model's figures are means over a run's cycles, its rate the gc numbers
  over the time they span, its GOGC read from consecutive cycles. So a run
  keeps blocks of ``BLOCK`` consecutive cycles, every ``stride``-th block of
  it, the stride the least power of two that leaves at most ``PER_RUN``
  cycles: the blocks spread evenly over the run, the means and the rate stay
  what they were, and a setting held for a stride's worth of blocks is still
  seen. A run of ``PER_RUN`` cycles or fewer is kept whole.
- A run is the rows with the same ``instance``, ``source``, ``incarnation``
  and ``run`` (those present), a cycle's place in it its row order.
- ``Thinner`` does this while a log is read, a batch at a time: strides only
  double, so what it drops early the final stride would drop too, and memory
  stays a few times ``PER_RUN`` per run.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

BLOCK = 50
PER_RUN = 2_000
_POS = "_thin_pos"
_OF = b"pyproflab.thinned_of"
_KEYS = ("instance", "source", "incarnation", "run")


def _keys(t: pa.Table) -> list[tuple]:
    cols = [t.column(k).to_pylist() for k in _KEYS if k in t.column_names]
    return list(zip(*cols, strict=True)) if cols else [()] * t.num_rows


def _stride(cycles: int) -> int:
    stride, blocks = 1, -(-cycles // BLOCK)
    while -(-blocks // stride) * BLOCK > PER_RUN:
        stride *= 2
    return stride


class Thinner:
    """Cycles fed a batch at a time (in log order), thinned (module rules)."""

    def __init__(self) -> None:
        self.seen: dict[tuple, int] = {}
        self.kept: list[pa.Table] = []
        self.rows = 0

    def add(self, t: pa.Table) -> None:
        pos = np.empty(t.num_rows, np.int64)
        for i, k in enumerate(_keys(t)):
            pos[i] = self.seen.get(k, 0)
            self.seen[k] = pos[i] + 1
        self.kept.append(t.append_column(_POS, pa.array(pos)))
        self.rows += t.num_rows
        if self.rows > 4 * PER_RUN * max(len(self.seen), 1):
            self.kept = [self._thinned(pa.concat_tables(self.kept))]
            self.rows = self.kept[0].num_rows

    def _thinned(self, t: pa.Table) -> pa.Table:
        strides = np.array([_stride(self.seen[k]) for k in _keys(t)], np.int64)
        block = t.column(_POS).to_numpy() // BLOCK
        return t.filter(pa.array(block % strides == 0))

    def table(self) -> pa.Table:
        """The thinned cycles, in log order, without the helper column."""
        if not self.kept:
            return pa.table({})
        t = self._thinned(pa.concat_tables(self.kept)).drop_columns([_POS])
        return t.replace_schema_metadata({**(t.schema.metadata or {}), _OF: str(self.cycles)})

    @property
    def cycles(self) -> int:
        return sum(self.seen.values())


def thin_cycles(t: pa.Table) -> pa.Table:
    """``t`` thinned (module rules); its schema's metadata says of how many
    cycles (``thinned_note``)."""
    if t.num_rows == 0:
        return t
    th = Thinner()
    th.add(t)
    return th.table()


def thinned_note(t: pa.Table) -> str | None:
    """The note saying cycles were thinned; None when they were not."""
    of = int((t.schema.metadata or {}).get(_OF, b"0"))
    kept = t.num_rows
    if kept >= of:
        return None
    return (
        f"gctrace: modelled on {kept:,} of {of:,} cycles (blocks of {BLOCK} consecutive "
        f"cycles spread evenly over each run, at most {PER_RUN:,} a run)"
    )
