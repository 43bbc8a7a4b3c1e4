"""Recognising and reading the pre-proto formats that pprof still reads.

Rules: the legacy formats are recognised by their own headers: the binary CPU
format (header words 0, 3, 0|1, period, 0 in 32 or 64 bits, either byte order)
and the text formats (``heap profile:``, ``<kind> profile: total N``, ``---
threadz``, ``--- contention``, java's ``--- heapz 1 ---`` ...). Such a file is
read as pprof reads it (``parse_legacy``: pprof's parsers in pprof's order, each
saying "not mine" until one reads it; ``legacy_text``, ``legacy_binary``) into
a ``profile.proto`` message, then decoded like any profile. Other text (JSON,
logs) is not a profile. A valid profile always holds a NUL byte
(``string_table[0]`` is encoded as ``32 00``), so text without NUL bytes can
never be one.
"""

from __future__ import annotations

import re
import struct

LEGACY_MESSAGE = "legacy pprof format that pprof does not read either"

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


# pprof's drop_frames/keep_frames of legacy profiles, by kind (its
# addLegacyFrameInfo): allocators for heap profiles, lock internals for
# contention, the CPU profiler's signal handler for the rest.
_HEAP_TYPES = (
    ("allocations", "size"),
    ("objects", "space"),
    ("inuse_objects", "inuse_space"),
    ("alloc_objects", "alloc_space"),
    ("alloc_objects", "alloc_space", "inuse_objects", "inuse_space"),
)
ALLOC_FRAMES = "|".join(
    (
        "calloc", "cfree", "malloc", "free", "memalign", "do_memalign",
        "(__)?posix_memalign", "pvalloc", "valloc", "realloc",
        "tcmalloc::.*", "tc_calloc", "tc_cfree", "tc_malloc", "tc_free", "tc_memalign",
        "tc_posix_memalign", "tc_pvalloc", "tc_valloc", "tc_realloc", "tc_new", "tc_delete",
        "tc_newarray", "tc_deletearray", "tc_new_nothrow", "tc_newarray_nothrow",
        "malloc_zone_malloc", "malloc_zone_calloc", "malloc_zone_valloc",
        "malloc_zone_realloc", "malloc_zone_memalign", "malloc_zone_free",
        r"runtime\..*",
        "BaseArena::.*", "(::)?do_malloc_no_errno", "(::)?do_malloc_pages", "(::)?do_malloc",
        "DoSampledAllocation", "MallocedMemBlock::MallocedMemBlock", "_M_allocate",
        "__builtin_(vec_)?delete", "__builtin_(vec_)?new", "__gnu_cxx::new_allocator::allocate",
        "__libc_malloc", "__malloc_alloc_template::allocate", "allocate", "cpp_alloc",
        r"operator new(\[\])?", "simple_alloc::allocate",
    )
)  # fmt: skip
ALLOC_KEEP_FRAMES = r"runtime\.panic|runtime\.reflectcall|runtime\.call[0-9]*"
CPU_PROFILER_FRAMES = (
    "ProfileData::Add|ProfileData::prof_handler|CpuProfiler::prof_handler|"
    "__pthread_sighandler|__restore"
)
LOCK_FRAMES = "|".join(
    (
        "RecordLockProfileData", "(base::)?RecordLockProfileData.*",
        "(base::)?SubmitMutexProfileData.*", "(base::)?SubmitSpinLockProfileData.*",
        "(base::Mutex::)?AwaitCommon.*", "(base::Mutex::)?Unlock.*",
        "(base::Mutex::)?UnlockSlow.*", "(base::Mutex::)?ReaderUnlock.*",
        "(base::MutexLock::)?~MutexLock.*", "(Mutex::)?AwaitCommon.*", "(Mutex::)?Unlock.*",
        "(Mutex::)?UnlockSlow.*", "(Mutex::)?ReaderUnlock.*", "(MutexLock::)?~MutexLock.*",
        "(SpinLock::)?Unlock.*", "(SpinLock::)?SlowUnlock.*",
        "(SpinLockHolder::)?~SpinLockHolder.*",
    )
)  # fmt: skip


def parse_legacy(raw: bytes | bytearray, *, source: str) -> bytes:
    """The ``profile.proto`` bytes of a legacy profile, read as pprof reads it
    (see the module rules); ``LegacyFormatError`` when pprof would not read it."""
    from pyproflab.decode import legacy_binary, legacy_text
    from pyproflab.decode.legacy_model import Malformed, Unrecognized, to_proto
    from pyproflab.errors import LegacyFormatError

    text = bytes(raw).decode("utf-8", "replace")
    parsers = (
        lambda: legacy_binary.parse_cpu(bytes(raw)),
        lambda: legacy_text.parse_heap(text),
        lambda: legacy_text.parse_go_count(text),
        lambda: legacy_text.parse_thread(text),
        lambda: legacy_text.parse_contention(text),
        lambda: legacy_binary.parse_java(text),
    )
    for parse in parsers:
        try:
            profile = parse()
        except Unrecognized:
            continue
        except Malformed as e:
            raise LegacyFormatError(source, f"malformed legacy profile: {e}") from None
        names = tuple(t for t, _ in profile.sample_types)
        if names in _HEAP_TYPES:
            profile.drop_frames, profile.keep_frames = ALLOC_FRAMES, ALLOC_KEEP_FRAMES
        elif names == ("contentions", "delay"):
            profile.drop_frames = LOCK_FRAMES
        else:
            profile.drop_frames = CPU_PROFILER_FRAMES
        return to_proto(profile)
    raise LegacyFormatError(source, f"{LEGACY_MESSAGE}: unrecognized profile format")
