"""pprof's legacy binary CPU format (C++ and Java profilez) and Java's text
heapz and contentionz.

Rules, re-expressed from pprof's ``legacy_profile.go`` and
``legacy_java_profile.go`` (the model and what follows the parse:
``legacy_model``):

- Binary CPU: words of 32 or 64 bits in either byte order, the first layout
  (32 little, 32 big, 64 little, 64 big) whose header reads 0, 3, 0 or 1
  (C++ or Java), a period in microseconds > 0, 0. Then samples of (count,
  depth, addresses...) until the (0, 1, 0) marker; the bytes after it are a
  memory map. Values: samples/count and cpu/nanoseconds (count times the
  period). C++: non-leaf addresses move back by one onto their call; a frame
  that the signal handler pushed (the same second frame in all but one in 32
  samples) is stripped, twice at most; the leaf found twice is kept once.
- Java (profilez, ``--- heapz 1 ---``, ``--- contentionz 1 ---``): the
  addresses are keys into a table after the samples, ``0xADDR function
  (file:line)`` (or ``(path)``: the file is the path's base name; a JIT stub
  is ``STUB``; anything else the whole text), which gives each location one
  line; functions are one per name. Then addresses are dropped (0) so that
  the same function merges across profiles. heapz: (inuse_objects count,
  inuse_space in the resolution's unit), unsampled at Java's 512 KiB rate,
  with a ``bytes`` label; contentionz: (contentions, delay in its
  resolution), times the sampling period.
"""

from __future__ import annotations

import struct

import re2

from pyproflab.decode.legacy_model import (
    MASK64,
    Function,
    LegacyProfile,
    Location,
    Locations,
    Malformed,
    Sample,
    Scanner,
    Unrecognized,
    cleanup_duplicate_locations,
    go_int,
    hex_addresses,
    parse_memory_map,
    remap_function_ids,
    remap_location_ids,
    remap_mapping_ids,
    trim,
    trunc_div,
    wrap64,
)
from pyproflab.decode.legacy_text import scale_heap_sample

_LAYOUTS = ("<I", ">I", "<Q", ">Q")
JAVA_HEAPZ_RATE = 524288


class _Words:
    """Go's ``get32l``..``get64b`` over a buffer: reading past its end yields 0
    and leaves the reader exhausted (Go's nil slice)."""

    def __init__(self, data: bytes, layout: str):
        self.data, self.fmt, self.size = data, layout, struct.calcsize(layout)
        self.pos = 0
        self.nil = False

    def left(self) -> int:
        return 0 if self.nil else len(self.data) - self.pos

    def next(self) -> int:
        if self.left() < self.size:
            self.nil = True
            return 0
        (v,) = struct.unpack_from(self.fmt, self.data, self.pos)
        self.pos += self.size
        return v

    def rest(self) -> bytes:
        return b"" if self.nil else self.data[self.pos :]


def parse_cpu(data: bytes) -> LegacyProfile:
    for layout in _LAYOUTS:
        w = _Words(data, layout)
        header = [w.next() for _ in range(5)]
        if w.nil or header[0] != 0 or header[1] != 3 or header[3] <= 0 or header[4] != 0:
            continue
        if header[2] == 0:
            return _cpp_cpu(w, wrap64(header[3]))
        if header[2] == 1:
            return _java_cpu(w, wrap64(header[3]))
    raise Unrecognized


def _cpu_samples(w: _Words, p: LegacyProfile, *, adjust: bool) -> Locations:
    locs = Locations(p)
    while w.left() > 0:
        count, depth = w.next(), w.next()
        if w.nil or depth > w.left() // 4:
            raise Unrecognized
        addrs = [w.next() for _ in range(depth)]
        if count == 0 and depth == 1 and addrs[0] == 0:
            break  # the end-of-data marker
        stack = [locs.get((a - 1) & MASK64 if adjust and i > 0 else a) for i, a in enumerate(addrs)]
        p.samples.append(Sample([wrap64(count), wrap64(wrap64(count) * p.period)], stack))
    return locs


def _cpu_profile(period: int) -> LegacyProfile:
    return LegacyProfile(
        [("samples", "count"), ("cpu", "nanoseconds")],
        ("cpu", "nanoseconds"),
        wrap64(period * 1000),
    )


def _cpp_cpu(w: _Words, period: int) -> LegacyProfile:
    p = _cpu_profile(period)
    _cpu_samples(w, p, adjust=True)
    margin = len(p.samples) // 32
    for _ in range(2):
        seen: dict[int, int] = {}
        for s in p.samples:
            if len(s.locations) > 1:
                a = s.locations[1].address
                seen[a] = seen.get(a, 0) + 1
        for addr, count in seen.items():
            if count >= len(p.samples) - margin:
                for s in p.samples:
                    if len(s.locations) > 1 and s.locations[1].address == addr:
                        del s.locations[1]
                break
    parse_memory_map(Scanner(w.rest().decode("utf-8", "replace")), p)
    cleanup_duplicate_locations(p)
    return p


def _java_cpu(w: _Words, period: int) -> LegacyProfile:
    p = _cpu_profile(period)
    locs = _cpu_samples(w, p, adjust=False)
    _java_locations(w.rest().decode("utf-8", "replace"), locs.by_address, p)
    return p


# --- Java text --------------------------------------------------------------------------------

_ATTRIBUTE = re2.compile(r"([\w ]+)=([\w ]+)")
_JAVA_SAMPLE = re2.compile(r" *(\d+) +(\d+) +@ +([ x0-9a-f]*)")
_JAVA_LOCATION = re2.compile(r"^\s*0x([[:xdigit:]]+)\s+(.*)\s*$")
_JAVA_FILE_LINE = re2.compile(r"^(.*)\s+\((.+):(-?[[:digit:]]+)\)$")
_JAVA_PATH = re2.compile(r"^(.*)\s+\((.*)\)$")


def _leading(body: str, rx) -> tuple[list, str]:
    """The matches of ``rx`` in the leading lines of ``body`` (lines ended by a
    newline; blank ones skipped), up to the first it does not match; and the
    text from that line on."""
    found, used = [], 0
    for raw in body.split("\n")[:-1]:
        line = trim(raw)
        if line:
            m = rx.search(line)
            if not m:
                break
            found.append((line, m))
        used += len(raw) + 1
    return found, body[used:]


def parse_java(text: str) -> LegacyProfile:
    head, nl, body = text.partition("\n")
    if not nl:
        raise Unrecognized
    kind = {"--- heapz 1 ---": "heap", "--- contentionz 1 ---": "contention"}.get(trim(head))
    if kind is None:
        raise Unrecognized
    p = LegacyProfile([], ("", ""), 0)
    attrs, body = _leading(body, _ATTRIBUTE)
    for line, h in attrs:
        _java_attribute(kind, trim(h.group(1)), trim(h.group(2)), line, p)
    samples, body = _leading(body, _JAVA_SAMPLE)
    locs = _java_samples(kind, samples, p)
    _java_locations(body, locs, p)
    return p


def _java_attribute(kind: str, attr: str, value: str, line: str, p: LegacyProfile) -> None:
    key = f"{kind}/{attr}"
    if key in ("heap/format", "contention/format"):
        if value != "java":
            raise Unrecognized
    elif key == "heap/resolution":
        p.sample_types = [("inuse_objects", "count"), ("inuse_space", value)]
    elif key == "contention/resolution":
        p.sample_types = [("contentions", "count"), ("delay", value)]
    elif key == "contention/sampling period":
        p.period_type = ("contentions", "count")
        p.period = _attr_int(value, line)
    elif key == "contention/ms since reset":
        p.duration_nanos = wrap64(_attr_int(value, line) * 1000 * 1000)
    else:
        raise Unrecognized


def _attr_int(value: str, line: str) -> int:
    try:
        return go_int(value, 0)
    except ValueError:
        raise Malformed(f"failed to parse attribute {line}") from None


def _java_samples(kind: str, samples: list, p: LegacyProfile) -> dict[int, Location]:
    locs = Locations(p)
    for line, m in samples:
        stack = [locs.get(a) for a in hex_addresses(m.group(3))]
        try:
            values = [go_int(m.group(2), 0), go_int(m.group(1), 0)]
        except ValueError:
            raise Malformed(f"parsing sample {line}") from None
        s = Sample(values, stack)
        if kind == "heap":
            if values[0] == 0:
                raise Malformed(f"parsing sample {line}: second value must be non-zero")
            s.num_labels = {"bytes": [trunc_div(values[1], values[0])]}
            s.values = list(scale_heap_sample(values[0], values[1], JAVA_HEAPZ_RATE))
        elif p.period != 0:
            s.values = [wrap64(v * p.period) for v in values]
        p.samples.append(s)
    return locs.by_address


def _base(path: str) -> str:
    """Go's ``filepath.Base``."""
    if not path:
        return "."
    path = path.rstrip("/")
    return path.rsplit("/", 1)[-1] if path else "/"


def _java_function(desc: str) -> tuple[str, str, int]:
    """(function, file, line) of a location's description."""
    m = _JAVA_FILE_LINE.search(desc)
    if m:
        try:
            n = go_int(m.group(3))
        except ValueError:
            n = 0
        return m.group(1), m.group(2), n if n > 0 else 0
    m = _JAVA_PATH.search(desc)
    if m:
        return m.group(1), _base(m.group(2)), 0
    if "generated stub/JIT" in desc:
        return "STUB", "", 0
    return desc, "", 0


def _java_locations(text: str, locs: dict[int, Location], p: LegacyProfile) -> None:
    functions: dict[str, Function] = {}
    for raw in text.split("\n"):
        line = trim(raw)
        if not line:
            continue
        m = _JAVA_LOCATION.search(line)
        if not m:
            continue
        try:
            addr = go_int(m.group(1), 16, signed=False)
        except ValueError:
            raise Malformed(f"parsing sample {line}") from None
        loc = locs.get(addr)
        if loc is None:
            continue
        name, file, lineno = _java_function(m.group(2))
        fn = functions.get(name)
        if fn is None:
            fn = functions[name] = Function(name, name, file)
        loc.lines = [(fn, lineno)]
        loc.address = 0
    remap_location_ids(p)
    remap_function_ids(p)
    remap_mapping_ids(p)
    for loc in p.locations:  # addresses dropped so the same function merges
        loc.address = 0
