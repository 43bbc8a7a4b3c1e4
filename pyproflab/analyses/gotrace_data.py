"""The traces an analysis reads: from one trace file, or a store selection.

Rules:

- ``TraceData.traces`` has one row per trace (``store.traces.TRACE_KEYS``:
  trace_id, service, version, instance, time, duration_ns, source); each of
  ``tables`` (``schema.TRACE_TABLES`` by name) has those traces' rows with
  their trace_id first. A file is trace 1, its instance its file name.
- Only the tables asked for are read: a file is read by the helper once, with
  ``-only`` those tables; a store selection reads each table with one query.
- ``stack(trace_id, stack_id)`` is the stack's function names, leaf first
  ("" for none), from the ``stacks`` table when it was read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pyarrow as pa

from pyproflab import schema
from pyproflab.decode.gotrace import check_trace_file, meta_of, read_trace
from pyproflab.display import render
from pyproflab.errors import UsageError
from pyproflab.store.connection import Store
from pyproflab.store.select import Selection
from pyproflab.store.traces import select_traces, trace_tables

_KEYS = pa.schema(
    [
        pa.field("trace_id", pa.int64()),
        pa.field("service", pa.string()),
        pa.field("version", pa.string()),
        pa.field("instance", pa.string()),
        pa.field("time", schema.TIMESTAMP_UTC),
        pa.field("duration_ns", pa.int64()),
        pa.field("source", pa.string()),
    ]
)


@dataclass
class TraceData:
    traces: pa.Table
    tables: dict[str, pa.Table]
    _stacks: dict[tuple[int, int], list[str]] | None = field(default=None, repr=False)

    @classmethod
    def from_file(cls, path: str | os.PathLike, tables: list[str]) -> TraceData:
        minor = check_trace_file(path)
        got, _ = read_trace(path, only=[*tables, "meta"], needed_by="pyproflab trace")
        meta = meta_of(minor, got.get("meta"))
        if meta.wall_start_ns is not None:
            start = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(
                microseconds=meta.wall_start_ns // 1000
            )
        else:
            start = datetime.fromtimestamp(Path(path).stat().st_mtime, UTC)
        key = {"trace_id": 1, "instance": Path(path).name, "time": start}
        key.update(duration_ns=meta.duration_ns, source=str(path))
        keys = pa.Table.from_pylist([key], _KEYS)
        with_ids = {}
        for name in tables:
            t = got[name]
            with_ids[name] = t.add_column(0, "trace_id", pa.array([1] * t.num_rows, pa.int64()))
        return cls(keys, with_ids)

    @classmethod
    def from_store(cls, store: Store, selection: Selection | None, tables: list[str]) -> TraceData:
        keys = select_traces(store, selection)
        if not keys.num_rows:
            sel = selection or Selection()
            if sel.everything:  # not "no traces match (everything)"
                raise UsageError(
                    f"{store.name} holds no traces (`pyproflab ingest TRACE` stores one; "
                    "or give a trace FILE)"
                )
            raise UsageError(f"{store.name}: no traces match {sel.describe()}")
        ids = keys.column("trace_id").to_pylist()
        return cls(keys, trace_tables(store, ids, tables))

    def key(self, trace_id: int) -> dict:
        """The trace's key row as a dict."""
        for row in self.traces.to_pylist():
            if row["trace_id"] == trace_id:
                return row
        raise KeyError(trace_id)

    def stack(self, trace_id: int, stack_id: int) -> list[str]:
        """The stack's function names, leaf first (module rules)."""
        if self._stacks is None:
            self._stacks = {}
            st = self.tables.get("stacks")
            if st is not None:
                for tid, sid, frames in zip(
                    st.column("trace_id").to_pylist(),
                    st.column("stack_id").to_pylist(),
                    st.column("frames").to_pylist(),
                    strict=True,
                ):
                    self._stacks[(tid, sid)] = [f["func"] for f in frames]
        return self._stacks.get((trace_id, stack_id), [])


class TraceAnswer:
    """Mixin of an execution-trace answer: a dataclass (``repr=False``) of Arrow
    tables, and one-line findings for some.

    Rules: ``TABLES`` names its tables in the order reports print them, ``MAIN``
    the one that is its answer (CSV's default, ``to_pandas``), ``FINDINGS`` the
    attribute holding its findings (None: it has none). In a notebook it shows
    its findings and tables (``reports.gotrace``); its repr counts them."""

    MAIN: ClassVar[str]
    TABLES: ClassVar[tuple[str, ...]]
    FINDINGS: ClassVar[str | None] = None

    def findings_list(self) -> list[str]:
        return list(getattr(self, self.FINDINGS)) if self.FINDINGS else []

    def __len__(self) -> int:
        return self.to_arrow().num_rows

    def to_arrow(self) -> pa.Table:
        return getattr(self, self.MAIN)

    def to_pandas(self):
        return self.to_arrow().to_pandas()

    def _repr_html_(self) -> str:
        return render(self, "html")

    def __str__(self) -> str:
        return render(self, "text")

    def __repr__(self) -> str:
        tables = ", ".join(f"{n} {getattr(self, n).num_rows} rows" for n in self.TABLES)
        found = f"; {len(self.findings_list())} findings" if self.FINDINGS else ""
        return f"{type(self).__name__}({tables}{found})"
