"""Go execution traces, read by the Go helper (``pyproflab-go trace``).

The helper parses a trace with golang.org/x/exp/trace, the reference parser
(cmd/trace runs the same code), and writes frames to its stdout:
``kind (1 byte) | name length (uint16 LE) | name | payload length (uint64 LE) |
payload``, where kind ``T`` is one Arrow IPC batch of the table named
(``schema.TRACE_TABLES``, plus a one-row ``meta``), ``P`` a gzipped pprof
profile named by its kind (net, sync, syscall, sched: equal to
``go tool trace -pprof=KIND``), and ``Z`` the end of the whole trace.

Rules:

- A trace is recognised by its header, ``go 1.N trace\\0\\0\\0``. Only the Go
  1.22+ format is read; an older one is refused in one line naming its version
  before the helper runs (so without Go too). A gzipped trace is read by no
  one: it is refused in one line saying so (``GZIPPED``).
- ``trace_parts`` yields the batches as they arrive: memory is bounded by the
  batch (``batch_rows`` rows), never by the trace. Anything short of a ``Z``
  frame and a zero exit is one ``TraceError`` naming the file and the helper's
  line, raised after the last part; a caller keeping rows must keep them only
  when the iteration ends without one (the store does so in one transaction).
"""

from __future__ import annotations

import io
import os
import re
import struct
import subprocess
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from pyproflab import gohelper, schema
from pyproflab.decode.inputs import open_input
from pyproflab.errors import TraceError

HEADER = re.compile(rb"go 1\.(\d+) trace\x00\x00\x00")
HEADER_BYTES = 16
FIRST_READ = (1, 22)
BATCH_ROWS = 65536
BLOCKING_KINDS = ("net", "sync", "syscall", "sched")
GZIPPED = "a gzip-compressed Go execution trace: traces are read uncompressed (gunzip it first)"
GZIP_PEEK = 4096  # bytes read to find a gzipped trace's header (past a gzip header's file name)


def trace_version(head: bytes | bytearray) -> int | None:
    """The minor Go version of a trace header (``go 1.N trace``), or None."""
    m = HEADER.match(head[:HEADER_BYTES])
    return int(m.group(1)) if m else None


def gzipped_trace(data: bytes | bytearray) -> bool:
    """Whether ``data``, a file's first bytes, begins a gzipped trace."""
    if not data.startswith(b"\x1f\x8b"):
        return False
    try:
        head = zlib.decompressobj(wbits=31).decompress(data[:GZIP_PEEK], HEADER_BYTES)
    except zlib.error:
        return False
    return trace_version(head) is not None


def file_trace_version(path: str | os.PathLike) -> int | None:
    """The trace version of a file, or None when it is not a trace."""
    try:
        with open_input(path) as f:
            return trace_version(f.read(HEADER_BYTES))
    except OSError:
        return None


def check_trace_file(path: str | os.PathLike) -> int:
    """The file's trace version; ``TraceError`` when it is not one we read."""
    try:
        with open_input(path) as f:
            head = f.read(HEADER_BYTES)
            minor = trace_version(head)
            if minor is None and gzipped_trace(head + f.read(GZIP_PEEK)):
                raise TraceError(str(path), GZIPPED)
    except OSError as e:
        raise TraceError(str(path), e.strerror or str(e)) from None
    if minor is None:
        raise TraceError(str(path), 'not a Go execution trace (no "go 1.N trace" header)')
    if (1, minor) < FIRST_READ:
        raise TraceError(
            str(path),
            f"a Go 1.{minor} execution trace: only the Go 1.22+ format is read; "
            "record it with Go 1.22 or newer",
        )
    return minor


@dataclass
class TracePart:
    """One frame: ``kind`` "table" (``batch`` set) or "profile" (``data`` set)."""

    kind: str
    name: str
    batch: pa.RecordBatch | None = None
    data: bytes = b""


@dataclass
class TraceMeta:
    """The one-row ``meta`` table of a trace, and the file's Go version."""

    go_version: str
    events: int = 0
    generations: int = 0
    duration_ns: int = 0
    wall_start_ns: int | None = None
    extra: dict[str, object] = field(default_factory=dict)


def _read_exact(f: io.BufferedReader, n: int) -> bytes | None:
    data = f.read(n)
    return data if len(data) == n else None


def _frames(f: io.BufferedReader) -> Iterator[tuple[str, str, bytes]]:
    """(kind, name, payload) until EOF; a cut frame ends the iteration."""
    while True:
        head = _read_exact(f, 3)
        if head is None:
            return
        (n,) = struct.unpack("<H", head[1:3])
        name = _read_exact(f, n)
        size = _read_exact(f, 8)
        if name is None or size is None:
            return
        payload = _read_exact(f, struct.unpack("<Q", size)[0])
        if payload is None:
            return
        yield chr(head[0]), name.decode(), payload


def trace_parts(
    path: str | os.PathLike,
    *,
    only: Sequence[str] | None = None,
    batch_rows: int = BATCH_ROWS,
    needed_by: str = "reading a trace",
) -> Iterator[TracePart]:
    """The trace's tables and profiles as the helper streams them (module rules)."""
    name = str(path)
    check_trace_file(path)
    cmd = [str(gohelper.helper_binary(needed_by)), "trace", "-batch", str(batch_rows)]
    if only:
        cmd += ["-only", ",".join(only)]
    proc = subprocess.Popen(
        [*cmd, os.fspath(Path(path))], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    ended = False
    try:
        assert proc.stdout is not None
        for kind, part_name, payload in _frames(proc.stdout):  # type: ignore[arg-type]
            if kind == "T":
                reader = pa.ipc.open_stream(pa.py_buffer(payload))
                for batch in reader:
                    yield TracePart("table", part_name, batch=batch)
            elif kind == "P":
                yield TracePart("profile", part_name, data=payload)
            elif kind == "Z":
                ended = True
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        code = proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for s in (proc.stdout, proc.stderr):
            if s is not None:
                s.close()
    if code != 0 or not ended:
        line = (err.strip().splitlines() or [f"pyproflab-go exited with code {code}"])[-1]
        prefix = f"{name}: "
        raise TraceError(name, line[len(prefix) :] if line.startswith(prefix) else line)


def read_trace(
    path: str | os.PathLike,
    *,
    only: Sequence[str] | None = None,
    needed_by: str = "reading a trace",
) -> tuple[dict[str, pa.Table], dict[str, bytes]]:
    """The whole trace in memory: {table: Table} (only those asked for, every
    one in ``schema.TRACE_TABLES`` shape; ``meta`` too) and {kind: pprof bytes}.
    For one file's answers; the store streams instead (``trace_parts``)."""
    batches: dict[str, list[pa.RecordBatch]] = {}
    profiles: dict[str, bytes] = {}
    for part in trace_parts(path, only=only, needed_by=needed_by):
        if part.batch is not None:
            batches.setdefault(part.name, []).append(part.batch)
        else:
            profiles[part.name] = part.data
    tables = {n: pa.Table.from_batches(b) for n, b in batches.items()}
    for n in only or schema.TRACE_TABLES:
        if n in schema.TRACE_TABLES and n not in tables:
            tables[n] = schema.TRACE_TABLES[n].empty_table()
    return tables, profiles


def meta_of(minor: int, meta: pa.Table | None) -> TraceMeta:
    """The trace's ``TraceMeta`` from its ``meta`` table (None: none written)."""
    out = TraceMeta(go_version=f"1.{minor}")
    if meta is not None and meta.num_rows:
        row = meta.to_pylist()[0]
        out.events, out.generations = row["events"], row["generations"]
        out.duration_ns, out.wall_start_ns = row["duration_ns"], row["wall_start_ns"]
    return out
