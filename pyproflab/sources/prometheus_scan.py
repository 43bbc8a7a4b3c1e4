"""Prometheus text read fast: the C scanner (``_promtext.c``) reads the sample
lines it can, as Arrow buffers, and the Python parser (``prometheus``) every
other line and every rule that depends on the families.

Rules:

- The rows, their batches and every error (its text and line) are those of
  ``prometheus.iter_exposition`` over the same lines: the scanner takes only
  lines whose reading depends on nothing but the line (``name{labels} value
  [timestamp]``, finite decimal value, UTF-8), stops before any other (a
  comment, a NaN, anything malformed) and Python reads that one. Types, and the
  ``le``/``quantile`` checks that depend on them, are applied by Python to each
  run of scanned rows before the next line Python reads; a row that breaks one
  is read again by Python, which raises its error. A test compares both paths
  on every test input and on mutations of them.
- Files are read in chunks of ``CHUNK`` bytes; a line longer than the limit is
  refused as ``prometheus.iter_exposition_file``'s pure path refuses it.
- Without the extension (not built, or ``PYPROFLAB_PURE_PROMTEXT=1``), the
  Python parser reads every line. On 50 MB of client_golang GC series the
  scanner reads a sample in about 1/20 of the Python parser's time.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.decode.inputs import open_input
from pyproflab.errors import MetricsError
from pyproflab.native import optional_extension
from pyproflab.sources.prometheus import (
    BATCH_ROWS,
    LINE_LIMIT,
    _Families,
    _Repeats,
    _samples,
    _timestamp_us,
    iter_exposition,
    read_line,
)

_ext = optional_extension("pyproflab.sources._promtext", "PYPROFLAB_PURE_PROMTEXT")
CHUNK = 1 << 22  # bytes read at a time


def _scanner() -> ModuleType:
    """The C scanner, which ``_Reader`` is only made with (``fast()``)."""
    assert _ext is not None, "the C scanner is not there (fast() is False)"
    return _ext


def fast() -> bool:
    """Whether the C scanner reads (see the module rules)."""
    return _ext is not None


class _Batch:
    """The rows of one batch as they come: tables of scanned rows and lists of
    rows Python read, in their order, made one table at the end (where the pure
    path makes its batch, so a time out of range fails at the same point)."""

    def __init__(self) -> None:
        self.parts: list[pa.Table | tuple[list, ...]] = []
        self.rows = 0

    def add_row(self, row: tuple) -> None:
        if not self.parts or isinstance(self.parts[-1], pa.Table):
            self.parts.append(([], [], [], [], []))
        for col, v in zip(self.parts[-1], row, strict=True):
            col.append(v)
        self.rows += 1

    def table(self, source: str) -> pa.Table:
        tables = [p if isinstance(p, pa.Table) else _samples(p, source) for p in self.parts]
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables).combine_chunks()


class _Reader:
    """One input read by the scanner and Python (see the module rules)."""

    def __init__(self, default_time: datetime, source: str, line_limit: int) -> None:
        self.ext = _scanner()
        self.default_us = _timestamp_us(default_time)
        self.source, self.line_limit = source, line_limit
        self.fams, self.repeats = _Families(), _Repeats()

    def python_line(self, raw: bytes, lineno: int, batch: _Batch) -> None:
        """One line read by Python, as the pure path reads it (``_file_lines``)."""
        if self.line_limit and len(raw) > self.line_limit:
            raise MetricsError(
                self.source, f"line longer than {self.line_limit} bytes", line=lineno
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MetricsError(
                self.source, f"not UTF-8 text (byte {e.start})", line=lineno
            ) from None
        row = read_line(text, lineno, self.fams, self.default_us, self.source)
        if row is not None:
            self.repeats.hashes.append(self.ext.row_hash(row[0], row[1], row[3]))
            self.repeats.lines.append(lineno)
            batch.add_row(row)

    def scanned(self, rows: int, bufs: tuple[bytes, ...], buf: bytes, batch: _Batch) -> None:
        """Rows the scanner read: their types, the rules that depend on them, the table."""
        noff, ndata, moff, koff, kdata, voff, vdata, times, values, flags, hashes, lines, starts = (
            pa.py_buffer(b) for b in bufs
        )
        names = pa.Array.from_buffers(pa.string(), rows, [None, noff, ndata])
        pairs = len(bufs[3]) // 4 - 1
        keys = pa.Array.from_buffers(pa.string(), pairs, [None, koff, kdata])
        items = pa.Array.from_buffers(pa.string(), pairs, [None, voff, vdata])
        offsets = pa.Array.from_buffers(pa.int32(), rows + 1, [None, moff])
        labels = pa.MapArray.from_arrays(offsets, keys, items, type=schema.METRIC_LABELS)
        coded = names.dictionary_encode()
        kinds = [self._kind(name) for name in coded.dictionary.to_pylist()]
        types = pa.array(kinds, pa.string()).take(coded.indices)
        self._check_flags(np.frombuffer(bufs[9], np.uint8), kinds, coded.indices, bufs, buf)
        self.repeats.hashes.frombytes(bufs[10])
        self.repeats.lines.frombytes(bufs[11])
        time = pa.Array.from_buffers(schema.TIMESTAMP_UTC, rows, [None, times])
        value = pa.Array.from_buffers(pa.float64(), rows, [None, values])
        batch.parts.append(
            pa.table([names, labels, types, time, value], schema=schema.METRIC_SAMPLES)
        )
        batch.rows += rows

    def _kind(self, name: str) -> str:
        """The type of metric ``name``'s family, resolved as ``_sample`` resolves it."""
        family = self.fams.resolve(name)
        if self.fams.types[family] is None:
            self.fams.types[family] = "untyped"
        return self.fams.types[family]  # type: ignore[return-value]

    def _check_flags(
        self, flags: np.ndarray, kinds: list[str], codes: pa.Array, bufs: tuple, buf: bytes
    ) -> None:
        """Python reads again the first scanned row whose ``le`` or ``quantile``
        its family refuses (it raises that line's error)."""
        if not flags.any():
            return
        kind = np.asarray(kinds, dtype=object)[codes.to_numpy(zero_copy_only=False)]
        bad = ((flags & self.ext.FLAG_BAD_LE) != 0) & (kind == "histogram")
        bad |= ((flags & self.ext.FLAG_BAD_QUANTILE) != 0) & (kind == "summary")
        if not bad.any():
            return
        k = int(np.argmax(bad))
        start = int(np.frombuffer(bufs[12], np.int64)[k])
        lineno = int(np.frombuffer(bufs[11], np.int64)[k])
        end = buf.find(b"\n", start)
        self.python_line(buf[start : end + 1], lineno, _Batch())
        raise AssertionError(f"{self.source}:{lineno}: the scanner and Python disagree")

    def tables(self, read: Callable[[int], bytes], batch_rows: int) -> Iterator[pa.Table]:
        buf, pos, lineno, eof, batch = b"", 0, 1, False, _Batch()
        while True:
            pos, lineno, stop, rows, bufs = self.ext.scan(
                buf, pos, lineno, batch_rows - batch.rows, self.default_us, self.line_limit
            )
            if rows:
                self.scanned(rows, bufs, buf, batch)
            if stop == self.ext.STOP_PYTHON:  # a whole line the scanner left
                end = buf.index(b"\n", pos) + 1
                self.python_line(buf[pos:end], lineno, batch)
                pos, lineno = end, lineno + 1
            elif stop == self.ext.STOP_MORE:
                if self.line_limit and len(buf) - pos > self.line_limit:
                    raise MetricsError(
                        self.source, f"line longer than {self.line_limit} bytes", line=lineno
                    )
                if eof:
                    if pos < len(buf):  # the last line, without an end of line
                        self.python_line(buf[pos:], lineno, batch)
                    break
                more = read(CHUNK)
                eof = not more
                buf, pos = buf[pos:] + more, 0
            if batch.rows >= batch_rows:
                yield batch.table(self.source)
                batch = _Batch()
        if batch.rows:
            yield batch.table(self.source)
        self.repeats.check(self.source)


def iter_exposition_bytes(
    read: Callable[[int], bytes],
    *,
    default_time: datetime,
    source: str,
    batch_rows: int = BATCH_ROWS,
    line_limit: int = LINE_LIMIT,
) -> Iterator[pa.Table]:
    """``prometheus.iter_exposition`` of the bytes ``read(n)`` gives until it gives
    none, lines of at most ``line_limit`` bytes (0: any); the scanner must be there
    (``fast()``)."""
    return _Reader(default_time, source, line_limit).tables(read, batch_rows)


def iter_text(text: str, *, default_time: datetime, source: str) -> Iterator[pa.Table]:
    """``prometheus.iter_exposition`` of a whole text, fast where it can be."""
    if _ext is not None:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: Python reads it as it is
            pass
        else:
            reader = io.BytesIO(data).read
            return iter_exposition_bytes(
                reader, default_time=default_time, source=source, line_limit=0
            )
    return iter_exposition(text.split("\n"), default_time=default_time, source=source)


def parse_exposition(text: str, *, default_time: datetime, source: str) -> pa.Table:
    """``prometheus.iter_exposition`` of a whole text, as one table (``iter_text``)."""
    tables = list(iter_text(text, default_time=default_time, source=source))
    return pa.concat_tables(tables) if tables else schema.METRIC_SAMPLES.empty_table()


def _file_lines(f: BinaryIO, name: str) -> Iterator[str]:
    """The lines of a file as UTF-8 text, at most ``LINE_LIMIT`` bytes each."""
    lineno = 0
    while raw := f.readline(LINE_LIMIT + 1):
        lineno += 1
        if len(raw) > LINE_LIMIT:
            raise MetricsError(name, f"line longer than {LINE_LIMIT} bytes", line=lineno)
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MetricsError(name, f"not UTF-8 text (byte {e.start})", line=lineno) from None


def iter_exposition_file(
    path: str | Path,
    *,
    default_time: datetime | None = None,
    source: str | None = None,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.Table]:
    """``iter_exposition`` of a saved file, read as the tables are taken; samples
    without a timestamp get ``default_time``, else the file's modification time."""
    p = Path(path)
    name = source or str(path)
    try:
        with open_input(p) as f:
            mtime = datetime.fromtimestamp(os.fstat(f.fileno()).st_mtime, UTC)
            when = default_time or mtime
            if _ext is not None:
                yield from iter_exposition_bytes(
                    f.read, default_time=when, source=name, batch_rows=batch_rows
                )
            else:
                lines = _file_lines(f, name)
                yield from iter_exposition(
                    lines, default_time=when, source=name, batch_rows=batch_rows
                )
    except OSError as e:
        raise MetricsError(name, f"cannot read: {e.strerror or e}") from None


def read_exposition(
    path: str | Path, *, default_time: datetime | None = None, source: str | None = None
) -> pa.Table:
    """``iter_exposition_file`` as one table."""
    tables = list(iter_exposition_file(path, default_time=default_time, source=source))
    return pa.concat_tables(tables) if tables else schema.METRIC_SAMPLES.empty_table()
