"""pprof's legacy text formats: heap (heapz, growthz, fragmentationz and Go's
``heap profile:``), Go's count profiles (goroutine, threadcreate), threadz and
contention (contentionz, Go's mutex and block text).

Rules, re-expressed from pprof's ``legacy_profile.go`` (the model and what
follows the parse: ``legacy_model``):

- Heap: the header line names the sampling. ``heap_v2``/``heapz_v2``: values are
  unsampled by the chance a sample of its average size had to be taken
  (count and bytes times ``1 / (1 - exp(-avg / rate))``, truncated); Go's
  ``heap/N`` does the same with rate N/2; ``heapprofile``, growth and
  fragmentation keep the values (period 1). With allocation columns that
  differ from the in-use ones (and are not 0), the types are alloc_objects,
  alloc_space, inuse_objects, inuse_space (in-use last, so pprof's default is
  inuse_space), else objects and space. Each sample carries a numeric label
  ``bytes``, its block size. Addresses are return addresses: each is moved back
  by one onto its call.
- Count profiles (``<type> profile: total N``): one value per stack, the type's
  name with unit count.
- threadz: one sample of value 1 per thread; "same as previous thread" adds 1
  to the last sample instead. The leaf address is not moved back (it is not a
  return address); the others are.
- Contention: ``attr = value`` lines (cycles/second, sampling period, ms since
  reset, discarded samples) before the samples, anything else is another
  format; values are (contentions, delay), scaled by the sampling period and
  the delay converted from cycles to nanoseconds when both are known.
"""

from __future__ import annotations

import math

import re2

from pyproflab.decode.legacy_model import (
    MASK64,
    LegacyProfile,
    Locations,
    Malformed,
    Sample,
    Scanner,
    Unrecognized,
    cleanup_duplicate_locations,
    fields,
    go_int,
    hex_addresses,
    is_memory_map_sentinel,
    is_space_or_comment,
    parse_additional_sections,
    trim,
    trunc_div,
    wrap64,
)

_COUNT_START = re2.compile(r"\A(\S+) profile: total \d+\z")
_COUNT = re2.compile(r"\A(\d+) @(( 0x[0-9a-f]+)+)\z")
_HEAP_HEADER = re2.compile(
    r"heap profile: *(\d+): *(\d+) *\[ *(\d+): *(\d+) *\] *@ *(heap[_a-z0-9]*)/?(\d*)"
)
_HEAP_SAMPLE = re2.compile(r"(-?\d+): *(-?\d+) *\[ *(\d+): *(\d+) *] @([ x0-9a-f]*)")
_GROWTH_HEADER = re2.compile(r"heap profile: *(\d+): *(\d+) *\[ *(\d+): *(\d+) *\] @ growthz?")
_FRAGMENTATION_HEADER = re2.compile(
    r"heap profile: *(\d+): *(\d+) *\[ *(\d+): *(\d+) *\] @ fragmentationz?"
)
_CONTENTION_SAMPLE = re2.compile(r"(\d+) *(\d+) @([ x0-9a-f]*)")
_THREADZ_START = re2.compile(r"--- threadz \d+ ---")
_THREAD_START = re2.compile(r"--- Thread ([[:xdigit:]]+) \(name: (.*)/(\d+)\) stack: ---")


def _int(text: str, base: int = 10) -> int:
    try:
        return go_int(text, base)
    except ValueError:
        raise Malformed(f"malformed number: {text}") from None


def _stack(locs: Locations, addrs: list[int], *, leaf_is_call: bool) -> list:
    """Locations of a stack; return addresses moved back by one onto the call."""
    out = []
    for i, addr in enumerate(addrs):
        if leaf_is_call or i > 0:
            addr = (addr - 1) & MASK64
        out.append(locs.get(addr))
    return out


# --- Go's count profiles ----------------------------------------------------------------


def parse_go_count(text: str) -> LegacyProfile:
    s = Scanner(text)
    while s.scan() and is_space_or_comment(s.text):
        pass
    m = _COUNT_START.search(s.text)
    if not m:
        raise Unrecognized
    kind = m.group(1)
    p = LegacyProfile([(kind, "count")], (kind, "count"), 1)
    locs = Locations(p)
    while s.scan():
        line = s.text
        if is_space_or_comment(line):
            continue
        if line.startswith("---"):
            break
        m = _COUNT.search(line)
        if not m:
            raise Malformed("malformed profile format")
        n = _int(m.group(1), 0)
        try:
            addrs = [go_int(a, 0, signed=False) for a in fields(m.group(2))]
        except ValueError:
            raise Malformed("malformed profile format") from None
        p.samples.append(Sample([n], _stack(locs, addrs, leaf_is_call=True)))
    parse_additional_sections(s, p)
    return p


# --- heap ---------------------------------------------------------------------------------


def _heap_header(line: str) -> tuple[str, int, bool]:
    """(sampling, period, has allocation columns) of a ``heap profile:`` header."""
    h = _HEAP_HEADER.search(line)
    if not h:
        raise Unrecognized
    period = 0
    if h.group(6):
        try:
            period = go_int(h.group(6))
        except ValueError:
            raise Unrecognized from None
    has_alloc = (h.group(3) != h.group(1) and h.group(3) != "0") or (
        h.group(4) != h.group(2) and h.group(4) != "0"
    )
    kind = h.group(5)
    if kind in ("heapz_v2", "heap_v2"):
        return "v2", period, has_alloc
    if kind == "heapprofile":
        return "", 1, has_alloc
    if kind == "heap":
        return "v2", trunc_div(period, 2), has_alloc
    raise Unrecognized


def scale_heap_sample(count: int, size: int, rate: int) -> tuple[int, int]:
    """pprof's unsampling of a heap sample (module rules)."""
    if count == 0 or size == 0:
        return 0, 0
    if rate <= 1:
        return count, size
    avg = float(size) / float(count)
    scale = 1 / (1 - math.exp(-avg / float(rate)))
    return math.trunc(float(count) * scale), math.trunc(float(size) * scale)


def _heap_sample(line: str, rate: int, sampling: str, with_alloc: bool):
    m = _HEAP_SAMPLE.search(line)
    if not m:
        raise Malformed("unexpected number of sample values: got 0, want 6")
    values: list[int] = []
    block = 0
    pairs = [(m.group(3), m.group(4), "allocation")] if with_alloc else []
    for count_s, size_s, label in [*pairs, (m.group(1), m.group(2), "inuse")]:
        count, size = _int(count_s), _int(size_s)
        if count == 0 and size != 0:
            raise Malformed(f"{label} count was 0 but {label} bytes was {size}")
        if count != 0:
            block = trunc_div(size, count)
            if sampling == "v2":
                count, size = scale_heap_sample(count, size, rate)
        values += [count, size]
    return values, block, hex_addresses(m.group(5))


def parse_heap(text: str) -> LegacyProfile:
    s = Scanner(text)
    if not s.scan():
        raise Unrecognized
    line = s.text
    sampling, period, with_alloc = "", 0, False
    if _HEAP_HEADER.search(line):
        sampling, period, with_alloc = _heap_header(line)
    elif _GROWTH_HEADER.search(line) or _FRAGMENTATION_HEADER.search(line):
        period = 1
    else:
        raise Unrecognized
    if with_alloc:
        types = [
            ("alloc_objects", "count"),
            ("alloc_space", "bytes"),
            ("inuse_objects", "count"),
            ("inuse_space", "bytes"),
        ]
    else:
        types = [("objects", "count"), ("space", "bytes")]
    p = LegacyProfile(types, ("space", "bytes"), period)
    locs = Locations(p)
    while s.scan():
        line = trim(s.text)
        if is_space_or_comment(line):
            continue
        if is_memory_map_sentinel(line):
            break
        values, block, addrs = _heap_sample(line, period, sampling, with_alloc)
        stack = _stack(locs, addrs, leaf_is_call=True)
        p.samples.append(Sample(values, stack, {"bytes": [block]}))
    parse_additional_sections(s, p)
    return p


# --- contention -----------------------------------------------------------------------------


def _contention_header(s: Scanner, p: LegacyProfile) -> int:
    """Read the ``attr = value`` lines; return cycles/second (0 when not given)."""
    cpu_hz = 0
    while s.scan():
        line = trim(s.text)
        if is_space_or_comment(line):
            continue
        if line.startswith("---"):
            break
        key, eq, value = line.partition("=")
        if not eq:
            break
        key, value = trim(key), trim(value)
        try:
            if key == "cycles/second":
                cpu_hz = go_int(value, 0)
            elif key == "sampling period":
                p.period = go_int(value, 0)
            elif key == "ms since reset":
                p.duration_nanos = wrap64(go_int(value, 0) * 1000 * 1000)
            elif key != "discarded samples":
                raise Unrecognized  # format, resolution (Java's) or anything else
        except ValueError:
            raise Unrecognized from None
    return cpu_hz


def parse_contention(text: str) -> LegacyProfile:
    s = Scanner(text)
    if not s.scan():
        raise Unrecognized
    if not s.text.startswith(("--- contentionz ", "--- mutex:", "--- contention:")):
        raise Unrecognized
    p = LegacyProfile(
        [("contentions", "count"), ("delay", "nanoseconds")], ("contentions", "count"), 1
    )
    cpu_hz = _contention_header(s, p)
    locs = Locations(p)
    while True:
        line = trim(s.text)
        if line.startswith("---"):
            break
        if not is_space_or_comment(line):
            m = _CONTENTION_SAMPLE.search(line)
            if not m:
                raise Unrecognized
            cycles, count = _int(m.group(1)), _int(m.group(2))
            if p.period > 0:
                if cpu_hz > 0:
                    ghz = float(cpu_hz) / 1e9
                    cycles = math.trunc(float(cycles) * float(p.period) / ghz)
                count = wrap64(count * p.period)
            stack = _stack(locs, hex_addresses(m.group(3)), leaf_is_call=True)
            p.samples.append(Sample([count, cycles], stack))
        if not s.scan():
            break
    parse_additional_sections(s, p)
    return p


# --- threadz ----------------------------------------------------------------------------------


def _thread_stack(s: Scanner) -> tuple[str, list[int] | None]:
    """(the line after the stack, its addresses; None for "same as previous")."""
    line, same, addrs = "", False, []
    while s.scan():
        line = trim(s.text)
        if not line:
            continue
        if line.startswith("---"):
            break
        if "same as previous thread" in line:
            same = True
            continue
        addrs += hex_addresses(line)
    return line, (None if same else addrs)


def parse_thread(text: str) -> LegacyProfile:
    s = Scanner(text)
    while s.scan() and is_space_or_comment(s.text):
        pass
    line = s.text
    if _THREADZ_START.search(line):
        while s.scan():
            line = s.text
            if is_memory_map_sentinel(line) or line.startswith("-"):
                break
    elif not _THREAD_START.search(line):
        raise Unrecognized
    p = LegacyProfile([("thread", "count")], ("thread", "count"), 1)
    locs = Locations(p)
    while not is_memory_map_sentinel(line):
        if line.startswith("---- no stack trace for"):
            break
        if not _THREAD_START.search(line):
            raise Unrecognized
        line, addrs = _thread_stack(s)
        if not addrs:  # "same as previous thread", or no address at all
            if p.samples:
                p.samples[-1].values[0] += 1
            continue
        p.samples.append(Sample([1], _stack(locs, addrs, leaf_is_call=False)))
    parse_additional_sections(s, p)
    cleanup_duplicate_locations(p)
    return p
