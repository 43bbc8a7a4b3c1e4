"""Ingest limits: what one profile may hold, in the spirit of Pyroscope's.

Rules:

- Five limits, each a maximum (0 turns one off): ``samples`` per profile,
  ``stack_depth`` (locations of one sample), ``labels`` per sample,
  ``label_value`` (bytes of one string label value) and ``symbol`` (bytes of
  a function name, system name or file name, or a mapping's file name or
  build id). The defaults are far above what Go writes, so only a crafted or
  broken profile meets them.
- A profile over a limit is refused whole (``LimitError``: one line naming the
  limit, its value and the file; exit code 2), never truncated.
- ``PYPROFLAB_LIMITS`` sets them for every command, e.g.
  ``PYPROFLAB_LIMITS=samples=1000000,label_value=4096``; the commands that
  read profiles take the same as flags (``FLAGS``: ``--max-samples`` ...), which
  override the variable; the API takes ``Limits`` wherever it decodes.

Labels are interned (dictionary arrays over the string table), so a long
value shared by many samples costs its length once; the limits bound the
rest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

import numpy as np
import pyarrow as pa

from pyproflab.arrays import list_parts, to_numpy
from pyproflab.errors import InvalidProfileError, UsageError

ENV = "PYPROFLAB_LIMITS"
# Each limit's command-line flag (cli/common.py adds them; keep in step).
FLAGS = {
    "samples": "--max-samples",
    "stack_depth": "--max-stack-depth",
    "labels": "--max-labels",
    "label_value": "--max-label-value",
    "symbol": "--max-symbol",
}


class LimitError(InvalidProfileError):
    """A profile holds more than a limit allows."""


@dataclass(frozen=True)
class Limits:
    samples: int = 100_000_000
    stack_depth: int = 65_536
    labels: int = 1_000_000
    label_value: int = 16 << 20
    symbol: int = 1 << 20

    @classmethod
    def from_env(cls) -> Limits:
        """The defaults, overridden by ``PYPROFLAB_LIMITS`` (UsageError if malformed)."""
        text = os.environ.get(ENV, "").strip()
        return cls.parse(text) if text else cls()

    @classmethod
    def parse(cls, text: str) -> Limits:
        names = {f.name for f in fields(cls)}
        out = cls()
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, eq, value = part.partition("=")
            name = name.strip()
            if not eq or name not in names:
                raise UsageError(
                    f"{ENV}: {part!r} is not NAME=VALUE with NAME one of {', '.join(sorted(names))}"
                )
            try:
                n = int(value)
            except ValueError:
                n = -1
            if n < 0:
                raise UsageError(f"{ENV}: {name} must be a whole number >= 0, not {value!r}")
            out = replace(out, **{name: n})
        return out

    def to_text(self) -> str:
        """The ``PYPROFLAB_LIMITS`` spelling of every limit (``parse`` reads it back)."""
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))


def _limit_values(lim: Limits) -> tuple[int, ...]:
    return (lim.samples, lim.stack_depth, lim.labels, lim.label_value, lim.symbol)


def _refuse(source: str, name: str, limit: int, got: int, what: str) -> LimitError:
    return LimitError(
        source,
        f"{what} ({got}) passes the limit {name}={limit} "
        f"(raise it with {FLAGS[name]} N or {ENV}={name}=N)",
    )


def _max_len(arr: pa.Array) -> int:
    """Longest string of a string array or of the values a dictionary array uses."""
    import pyarrow.compute as pc

    if len(arr) == 0 or arr.null_count == len(arr):
        return 0
    if pa.types.is_dictionary(arr.type):
        # Raw index buffer and validity, without pyarrow's conversions (which
        # would import pandas for a null-bearing array).
        idx = arr.indices
        raw = np.frombuffer(idx.buffers()[1], dtype=np.int32, count=len(idx), offset=idx.offset * 4)
        valid = to_numpy(pc.is_valid(idx))
        lengths = to_numpy(pc.binary_length(arr.dictionary))
        if not len(lengths):
            return 0
        used = np.clip(raw[valid], 0, len(lengths) - 1)
        return int(lengths[used].max()) if len(used) else 0
    return int(pc.max(pc.binary_length(arr)).as_py() or 0)


def check(profile, source: str, limits: Limits | None = None, *, size: int | None = None) -> None:
    """Raise ``LimitError`` if ``profile`` passes one of ``limits`` (default:
    ``Limits.from_env()``). ``size``: the bytes of the pprof protobuf it was
    decoded from. Every sample, location id, label and string byte it counts
    takes at least one byte of them, so a profile of no more bytes than every
    limit (0: none) cannot pass one, and is not looked at."""
    lim = limits or Limits.from_env()
    if size is not None and all(v == 0 or size <= v for v in _limit_values(lim)):
        return
    samples = profile.samples
    if lim.samples and samples.num_rows > lim.samples:
        raise _refuse(source, "samples", lim.samples, samples.num_rows, "sample count")
    if samples.num_rows:
        if lim.stack_depth:
            depth = int(np.diff(list_parts(samples.column("location_ids"))[0]).max())
            if depth > lim.stack_depth:
                raise _refuse(source, "stack_depth", lim.stack_depth, depth, "stack depth")
        offsets, labels = list_parts(samples.column("labels"))
        if lim.labels and len(labels):
            most = int(np.diff(offsets).max())
            if most > lim.labels:
                raise _refuse(source, "labels", lim.labels, most, "labels on one sample")
        if lim.label_value and len(labels):
            longest = _max_len(labels.field("str"))
            if longest > lim.label_value:
                raise _refuse(source, "label_value", lim.label_value, longest, "label value bytes")
    if lim.symbol:
        cols = [profile.functions.column(c) for c in ("name", "system_name", "filename")]
        cols += [profile.mappings.column(c) for c in ("filename", "build_id")]
        for col in cols:
            longest = max((_max_len(c) for c in col.chunks), default=0)
            if longest > lim.symbol:
                raise _refuse(source, "symbol", lim.symbol, longest, "symbol bytes")
