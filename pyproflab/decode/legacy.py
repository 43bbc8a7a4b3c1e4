"""Recognising what is not a pprof protobuf, to say so precisely.

Rules: the pre-proto formats that pprof still reads are recognised by their
own headers and refused with ``LegacyFormatError``: the binary CPU format
(header words 0, 3, 0|1, period, 0 in 32 or 64 bits, either byte order) and
the text formats (``heap profile:``, ``<kind> profile: total N``, ``--- threadz``,
``--- contention``, java's ``--- heapz 1 ---`` ...). Other text (JSON, logs) is
not a profile. A valid profile always holds a NUL byte (``string_table[0]`` is
encoded as ``32 00``), so text without NUL bytes can never be one.
"""

from __future__ import annotations

import re
import struct

LEGACY_MESSAGE = "legacy pprof format, not supported (convert it with `go tool pprof -proto`)"

_TEXT_HEADER = re.compile(
    rb"""\A\s*(?:
        heap\ profile:                                   # heap, growth, fragmentation
      | \S+\ profile:\ total\ \d+                        # goroutine, threadcreate counts
      | ---\ ?(?:threadz|Thread|contentionz?|mutex|lock|heapz|cpu|[a-z]+z\ \d+\ ---)
    )""",
    re.VERBOSE,
)

# Bytes that can start a Profile message: tags of fields 1..15 with wire type 0 or 2.
_PROFILE_FIRST_BYTES = frozenset((number << 3) | wire for number in range(1, 16) for wire in (0, 2))


def legacy_kind(data: bytes | bytearray) -> str | None:
    """Name of the legacy format ``data`` is in, or None."""
    if _is_legacy_cpu(data):
        return "binary CPU profile"
    head = data[:4096]
    if b"\x00" not in head and _TEXT_HEADER.match(head):
        first = head.lstrip().split(b"\n", 1)[0][:40].decode("utf-8", "replace").strip()
        return f"text profile ({first!r})"
    return None


def _is_legacy_cpu(data: bytes | bytearray) -> bool:
    for fmt, size in (("<5Q", 40), (">5Q", 40), ("<5I", 20), (">5I", 20)):
        if len(data) >= size:
            n1, n2, n3, n4, n5 = struct.unpack(fmt, data[:size])
            if n1 == 0 and n2 == 3 and n3 in (0, 1) and n4 > 0 and n5 == 0:
                return True
    return False


def looks_like_text(data: bytes | bytearray) -> bool:
    """Printable text with no NUL byte: JSON, logs, source code..."""
    head = data[:4096]
    if b"\x00" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        # A multi-byte character cut by the 4096-byte window is still text.
        if e.start < len(head) - 4:
            return False
        text = head[: e.start].decode("utf-8")
    printable = sum(ch.isprintable() or ch in "\t\r\n" for ch in text)
    return printable >= 0.95 * max(len(text), 1)


def could_start_profile(data: bytes | bytearray) -> bool:
    return bool(data) and data[0] in _PROFILE_FIRST_BYTES
