"""What the legacy parsers build, and what pprof does to it after parsing.

The legacy formats (``legacy_text``, ``legacy_binary``) are read as pprof's
``profile`` package reads them (``legacy_profile.go``, ``legacy_java_profile.go``),
into the small model here, then written as a ``profile.proto`` message that
the protobuf decoder reads like any other file. Rules, re-expressed from
pprof:

- Lines are read like Go's ``bufio.Scanner`` (``Scanner``): split at ``\\n``, a
  trailing ``\\r`` dropped, and the current line empty once the input is used up.
  Spaces are Go's (``TrimSpace``, ``Fields``): Unicode white space, not
  Python's wider set.
- Numbers are Go's ``strconv``: 64-bit, base 10 or Go's base-0 prefixes
  (``0x``, ``0o``, ``0b``, a leading ``0`` for octal, underscores between
  digits); out of range is an error. Go's unsigned and signed arithmetic wraps
  where pprof's does (an address 0 less one).
- A memory map (``/proc/self/maps`` lines, or pprof's brief ``start-end file``
  form, ``$attr`` substitutions from ``attr=value`` lines) after the samples
  gives the mappings; non-executable entries are skipped.
- Then, as ``ParseMemoryMapFromScanner``: adjacent pieces of one mapping are
  merged, the main binary's mapping moves first, locations are numbered in
  the order samples first reach them (a location no sample reaches is
  dropped), functions in the order locations reach them, and each location
  with an address finds its mapping (or a fake one spanning everything).
- ``drop_frames``/``keep_frames`` are pprof's for the profile's kind (heap,
  contention, else CPU), matched later by the analyses as for any profile.

An error that means "not this format" is ``Unrecognized`` (the next parser is
tried); any other is ``Malformed``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import re2

MASK64 = (1 << 64) - 1

# Go's unicode.IsSpace: what TrimSpace and Fields split on.
GO_SPACE = (
    " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


class Unrecognized(Exception):
    """Not this legacy format: pprof tries its next parser."""


class Malformed(Exception):
    """This format, but broken: pprof stops with this error."""


def trim(s: str) -> str:
    return s.strip(GO_SPACE)


def fields(s: str) -> list[str]:
    return re.split(f"[{GO_SPACE}]+", trim(s)) if trim(s) else []


def is_space_or_comment(line: str) -> bool:
    t = trim(line)
    return not t or t[0] == "#"


def wrap64(v: int) -> int:
    """``v`` as Go's int64 arithmetic leaves it (two's complement)."""
    v &= MASK64
    return v - (1 << 64) if v >> 63 else v


def go_int(text: str, base: int = 10, bits: int = 64, signed: bool = True) -> int:
    """Go's ``strconv.ParseInt``/``ParseUint`` (``signed=False``); ValueError when Go errs."""
    s = text
    neg = False
    if signed and s[:1] in ("+", "-"):
        neg, s = s[0] == "-", s[1:]
    digits_base = base
    if base == 0:
        digits_base = 10
        if s[:1] == "0":
            prefix = s[1:2].lower()
            if prefix in ("x", "o", "b"):
                digits_base, s = {"x": 16, "o": 8, "b": 2}[prefix], s[2:]
                s = "0" + s if s[:1] == "_" else s  # "0x_1f": the underscore follows the prefix
            else:
                digits_base = 8
        if "_" in s and not _underscores_ok(s):
            raise ValueError(text)
        s = s.replace("_", "")
    if not s or not all(
        c in "0123456789abcdefghijklmnopqrstuvwxyz"[:digits_base] for c in s.lower()
    ):
        raise ValueError(text)
    v = int(s, digits_base)
    if signed:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        v = -v if neg else v
        if not lo <= v <= hi:
            raise ValueError(text)
    elif v > (1 << bits) - 1:
        raise ValueError(text)
    return v


def _underscores_ok(s: str) -> bool:
    """Underscores only between digits (Go's underscoreOK, after the base prefix)."""
    prev = "0"
    for c in s:
        if c == "_" and prev == "_":
            return False
        prev = c
    return not s.endswith("_") and not s.startswith("_")


def trunc_div(a: int, b: int) -> int:
    """Go's integer division (toward zero)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


class Scanner:
    """Go's ``bufio.Scanner`` over lines (see the module rules)."""

    def __init__(self, text: str):
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # a final newline ends the last line, it starts no new one
        self._lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
        self._next = 0
        self.text = ""

    def scan(self) -> bool:
        if self._next >= len(self._lines):
            self.text = ""
            return False
        self.text = self._lines[self._next]
        self._next += 1
        return True


_HEX_NUMBER = re2.compile(r"0x[0-9a-f]+")


def hex_addresses(s: str) -> list[int]:
    """pprof's ``parseHexAddresses``: every ``0x...`` in ``s``, each 64-bit at most."""
    out = []
    for h in _HEX_NUMBER.findall(s):
        v = int(h, 16)
        if v > MASK64:
            raise Malformed(f"failed to parse as hex 64-bit number: {h}")
        out.append(v)
    return out


# --- the model -----------------------------------------------------------------------


@dataclass(eq=False)
class Mapping:
    start: int = 0
    limit: int = 0
    offset: int = 0
    file: str = ""
    build_id: str = ""
    id: int = 0


@dataclass(eq=False)
class Function:
    name: str
    system_name: str
    filename: str = ""
    id: int = 0


@dataclass(eq=False)
class Location:
    address: int
    mapping: Mapping | None = None
    lines: list[tuple[Function, int]] = field(default_factory=list)
    id: int = 0


@dataclass(eq=False)
class Sample:
    values: list[int]
    locations: list[Location]
    num_labels: dict[str, list[int]] = field(default_factory=dict)


@dataclass(eq=False)
class LegacyProfile:
    sample_types: list[tuple[str, str]]
    period_type: tuple[str, str]
    period: int
    duration_nanos: int = 0
    samples: list[Sample] = field(default_factory=list)
    locations: list[Location] = field(default_factory=list)
    mappings: list[Mapping] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)
    drop_frames: str = ""
    keep_frames: str = ""


class Locations:
    """Locations by address, each made once, in the order first met."""

    def __init__(self, profile: LegacyProfile):
        self.profile = profile
        self.by_address: dict[int, Location] = {}

    def get(self, address: int) -> Location:
        loc = self.by_address.get(address)
        if loc is None:
            loc = self.by_address[address] = Location(address)
            self.profile.locations.append(loc)
        return loc


def cleanup_duplicate_locations(p: LegacyProfile) -> None:
    """The leaf found both by unwinding and from the signal context (the second
    one adjusted by -1) is kept once."""
    for s in p.samples:
        if len(s.locations) > 1 and s.locations[0].address == (s.locations[1].address + 1) & MASK64:
            del s.locations[1]


# --- memory maps ----------------------------------------------------------------------

# pprof's own patterns, in RE2 (Go's regexp syntax and linear time, where
# Python's backtracking takes minutes on a crafted line of a few kB).
_HEX = r"(?:0x)?([[:xdigit:]]+)"
_HEX_RANGE = r"\s*" + _HEX + r"[\s-]?\s*" + _HEX + ":?"
_PERM = r"(?:\s+([-rwxp]+))?"
_SPACE_STRING = r"(?:\s+(\S+))?"
_SPACE_HEX = r"(?:\s+([[:xdigit:]]+))?"
_PROC_MAPS = re2.compile(
    "^" + _HEX_RANGE + _PERM + _SPACE_HEX + r"\s+[[:xdigit:]]+:[[:xdigit:]]+\s+[[:digit:]]+"
    + _SPACE_STRING
)  # fmt: skip
_BRIEF_MAPS = re2.compile(
    "^" + _HEX_RANGE + _PERM + _SPACE_STRING + r"(?:\s+\(@([[:xdigit:]]+)\))?" + _SPACE_HEX
)
_LOG_INFO = re2.compile(r"^[^\[\]]+:[0-9]+]\s")
_LIB = re2.compile(r"([.]so$|[.]so[._][0-9]+)")
MEMORY_MAP_SENTINELS = ("--- Memory map: ---", "MAPPED_LIBRARIES:")


def is_memory_map_sentinel(line: str) -> bool:
    return any(s in line for s in MEMORY_MAP_SENTINELS)


def _mapping_entry(line: str) -> Mapping | None:
    """One mapping, None for a non-executable one; Unrecognized for other text."""
    m = _PROC_MAPS.search(line)
    if m:
        start, end, perm, offset, file = m.groups()
        build_id = None
    else:
        m = _BRIEF_MAPS.search(line)
        if not m:
            raise Unrecognized
        start, end, perm, file, offset, build_id = m.groups()
    if perm and "x" not in perm:
        return None
    try:
        return Mapping(
            start=go_int(start, 16, signed=False),
            limit=go_int(end, 16, signed=False),
            offset=go_int(offset, 16, signed=False) if offset else 0,
            file=file or "",
            build_id=build_id or "",
        )
    except ValueError:
        raise Unrecognized from None


def _replace(text: str, pairs: list[tuple[str, str]]) -> str:
    """Go's ``strings.NewReplacer(pairs...).Replace``: left to right, no overlaps,
    the first pair (in order) that matches at a position wins."""
    if not pairs:
        return text
    out, i = [], 0
    while i < len(text):
        for old, new in pairs:
            if old and text.startswith(old, i):
                out.append(new)
                i += len(old)
                break
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_memory_map(s: Scanner, p: LegacyProfile) -> None:
    """The mappings of the lines left in ``s``, then pprof's remapping (module rules)."""
    attrs: list[tuple[str, str]] = []
    while s.scan():
        line = s.text
        m = _LOG_INFO.search(line)
        line = _replace(line[m.end() :] if m else line, attrs)
        try:
            mapping = _mapping_entry(line)
        except Unrecognized:
            key, eq, value = line.partition("=")
            if eq:
                attrs.append(("$" + trim(key), trim(value)))
            continue
        if mapping is not None:
            p.mappings.append(mapping)
    _massage_mappings(p)
    remap_location_ids(p)
    remap_function_ids(p)
    remap_mapping_ids(p)


def parse_additional_sections(s: Scanner, p: LegacyProfile) -> None:
    """Skip to the memory map's sentinel, then read the map."""
    while not is_memory_map_sentinel(s.text) and s.scan():
        pass
    parse_memory_map(s, p)


def _adjacent(m1: Mapping, m2: Mapping) -> bool:
    if m1.file and m2.file and m1.file != m2.file:
        return False
    if m1.build_id and m2.build_id and m1.build_id != m2.build_id:
        return False
    if m1.limit != m2.start:
        return False
    if m1.offset and m2.offset and (m1.offset + m1.limit - m1.start) & MASK64 != m2.offset:
        return False
    return True


def _massage_mappings(p: LegacyProfile) -> None:
    if len(p.mappings) > 1:
        merged = [p.mappings[0]]
        for m in p.mappings[1:]:
            last = merged[-1]
            if _adjacent(last, m):
                last.limit = m.limit
                last.file = m.file or last.file
                last.build_id = m.build_id or last.build_id
                for loc in p.locations:
                    if loc.mapping is m:
                        loc.mapping = last
                continue
            merged.append(m)
        p.mappings = merged
    for i, m in enumerate(p.mappings):
        file = trim(m.file.replace("(deleted)", ""))
        if not file or _LIB.search(file) or file[0] == "[":
            continue
        p.mappings[0], p.mappings[i] = p.mappings[i], p.mappings[0]
        break
    for i, m in enumerate(p.mappings):
        m.id = i + 1


def remap_location_ids(p: LegacyProfile) -> None:
    seen: dict[int, Location] = {}
    for s in p.samples:
        for loc in s.locations:
            if id(loc) not in seen:
                loc.id = len(seen) + 1
                seen[id(loc)] = loc
    p.locations = list(seen.values())


def remap_function_ids(p: LegacyProfile) -> None:
    seen: dict[int, Function] = {}
    for loc in p.locations:
        for fn, _ in loc.lines:
            if id(fn) not in seen:
                fn.id = len(seen) + 1
                seen[id(fn)] = fn
    p.functions = list(seen.values())


def remap_mapping_ids(p: LegacyProfile) -> None:
    """pprof's remapMappingIDs: fix the main mapping, give each location with an
    address its mapping (a fake one when none holds it), number them."""
    maps = p.mappings
    if (
        len(maps) > 1
        and maps[0].file.startswith("/anon_hugepage")
        and maps[0].limit == maps[1].start
    ):
        maps = p.mappings = maps[1:]
    if maps and (maps[0].start - maps[0].offset) & MASK64 == 0x400000:
        maps[0].start, maps[0].offset = 0x400000, 0
    fake = None
    for loc in p.locations:
        a = loc.address
        if loc.mapping is not None or a == 0:
            continue
        loc.mapping = next((m for m in maps if m.start <= a < m.limit), None)
        if loc.mapping is not None:
            continue
        for m in maps:
            if m.offset and (m.start - m.offset) & MASK64 <= a < m.start:
                m.start, m.offset = (m.start - m.offset) & MASK64, 0
                loc.mapping = m
                break
        else:
            if fake is None:
                fake = Mapping(limit=MASK64, id=1)
                maps.append(fake)
            loc.mapping = fake
    for i, m in enumerate(maps):
        m.id = i + 1


# --- out -------------------------------------------------------------------------------


def to_proto(p: LegacyProfile) -> bytes:
    """``p`` as a serialized ``profile.proto`` message."""
    from pyproflab._proto import profile_pb2

    strings: dict[str, int] = {"": 0}

    def sid(s: str) -> int:
        return strings.setdefault(s, len(strings))

    msg = profile_pb2.Profile()
    for t, u in p.sample_types:
        msg.sample_type.add(type=sid(t), unit=sid(u))
    for s in p.samples:
        out = msg.sample.add(location_id=[loc.id for loc in s.locations], value=s.values)
        for key, nums in s.num_labels.items():
            for v in nums:
                out.label.add(key=sid(key), num=v)
    for m in p.mappings:
        msg.mapping.add(
            id=m.id,
            memory_start=m.start,
            memory_limit=m.limit,
            file_offset=m.offset,
            filename=sid(m.file),
            build_id=sid(m.build_id),
        )
    for loc in p.locations:
        out = msg.location.add(
            id=loc.id, mapping_id=loc.mapping.id if loc.mapping else 0, address=loc.address
        )
        for fn, line in loc.lines:
            out.line.add(function_id=fn.id, line=line)
    for fn in p.functions:
        msg.function.add(
            id=fn.id, name=sid(fn.name), system_name=sid(fn.system_name), filename=sid(fn.filename)
        )
    msg.drop_frames, msg.keep_frames = sid(p.drop_frames), sid(p.keep_frames)
    msg.period_type.type, msg.period_type.unit = sid(p.period_type[0]), sid(p.period_type[1])
    msg.period = p.period
    msg.duration_nanos = p.duration_nanos
    msg.string_table.extend(strings)
    return msg.SerializeToString()
