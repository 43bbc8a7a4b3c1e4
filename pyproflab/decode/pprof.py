"""From pprof files or bytes to a validated ``Profile`` of Arrow tables.

Rules:

- gzip is recognised by its magic bytes, never by the file name; concatenated
  gzip members are read like Go's gzip reader does, and any other bytes after
  the last member are an error (as in pprof).
- The decompressed size is capped (``max_bytes``, default 1 GiB): inflation
  stops as soon as the output would pass it, so a gzip bomb costs at most the
  cap in memory.
- Legacy pre-proto formats are recognised and read as pprof reads them
  (``legacy``; one it would not read is a ``LegacyFormatError``); text, JSON
  and other non-profiles give ``NotAProfileError``; a protobuf that does not
  parse gives ``CorruptProfileError``; a profile breaking pprof's
  rules gives ``InvalidProfileError``. Each is a ``ProfileError`` whose text
  is one line, ``<source>: <problem>``.
- The fast decoder (``fast``) is used; it hands the rare wire forms it does
  not handle to the reference decoder (``reference``). Both give the same
  Profile and refuse the same inputs.
"""

from __future__ import annotations

import os
from typing import Literal

try:
    # zlib-ng inflates the same streams with the same API and errors, about a
    # third faster than the system zlib (7.3 against 10.9 ms for a 2.2 MB CPU
    # profile): gunzip is a quarter of decoding a large profile.
    from zlib_ng import zlib_ng as zlib
except ImportError:  # a platform without its wheel: the standard library's
    import zlib  # type: ignore[no-redef]

from pyproflab.decode import legacy
from pyproflab.decode.inputs import open_input
from pyproflab.decode.limits import Limits
from pyproflab.decode.limits import check as check_limits
from pyproflab.decode.lite import TopLevel, parse_top_level
from pyproflab.errors import (
    CorruptProfileError,
    InvalidProfileError,
    NotAProfileError,
    ProfileError,
    TooLargeError,
)
from pyproflab.model import Profile
from pyproflab.native import optional_extension

# libdeflate inflates a whole one-member file in one call, a third faster than
# zlib-ng's stream (5.6 against 8.3 ms for a 2.2 MB CPU profile); our _inflate.c,
# built where Debian's libdeflate-dev is (scripts/install-system-deps.sh).
_inflate = optional_extension("pyproflab.decode._inflate", "PYPROFLAB_PURE_INFLATE")

DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB of decompressed protobuf

GZIP_MAGIC = b"\x1f\x8b"

Method = Literal["fast", "reference"]


def read_profile(
    path: str | os.PathLike,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    method: Method = "fast",
    limits: Limits | None = None,
) -> Profile:
    """Read and decode the pprof file at ``path``."""
    source = str(path)
    try:
        with open_input(path) as f:
            # A raw file larger than the cap is refused before it is read.
            size = os.fstat(f.fileno()).st_size
            head = f.read(2)
            if head != GZIP_MAGIC and size > max_bytes:
                raise TooLargeError(source, f"profile is larger than the cap of {max_bytes} bytes")
            data = head + f.read()
    except FileNotFoundError:
        raise NotAProfileError(source, "no such file") from None
    except IsADirectoryError:
        raise NotAProfileError(source, "is a directory, not a profile") from None
    except OSError as e:
        raise NotAProfileError(source, f"cannot read: {e.strerror or e}") from None
    if data[:3] == b"go ":  # as written; a trace found after gunzipping is GZIPPED (parse_raw)
        refuse_plain_trace(data, source)
    return decode_bytes(data, source=source, max_bytes=max_bytes, method=method, limits=limits)


def refuse_plain_trace(data: bytes, source: str) -> None:
    """Refuse an uncompressed Go execution trace, naming the command that reads it."""
    from pyproflab.decode.gotrace import trace_version

    if trace_version(data[:16]) is not None:
        raise NotAProfileError(
            source, "not a pprof profile (a Go execution trace: `pyproflab trace` reads it)"
        )


def decode_bytes(
    data: bytes | bytearray,
    *,
    source: str = "<bytes>",
    max_bytes: int = DEFAULT_MAX_BYTES,
    method: Method = "fast",
    limits: Limits | None = None,
) -> Profile:
    """Decode pprof bytes (gzipped or not) into a validated ``Profile`` that
    keeps within ``limits`` (default: ``Limits.from_env()``)."""
    raw = decompress(data, source=source, max_bytes=max_bytes)
    size = len(raw) if legacy.legacy_kind(raw) is None else None  # the protobuf's bytes
    top = parse_raw(raw, source=source)
    del raw  # the top level holds what is needed; free the rest early
    if method == "reference":
        from pyproflab.decode.reference import decode_reference

        profile = decode_reference(top, source=source)
    else:
        from pyproflab.decode.fast import decode_fast

        profile = decode_fast(top, source=source)
    check_limits(profile, source, limits, size=size)
    return profile


def parse_raw(raw: bytes | bytearray, *, source: str) -> TopLevel:
    """Classify the decompressed bytes and split the protobuf's top level."""
    if legacy.legacy_kind(raw) is not None:
        raw = legacy.parse_legacy(raw, source=source)
    try:
        return parse_top_level(raw, source=source)
    except (CorruptProfileError, InvalidProfileError) as e:
        if legacy.looks_like_text(raw):
            raise NotAProfileError(source, "not a pprof profile (it is text, e.g. JSON)") from None
        if raw[:4] == b"PAR1":  # a file of an exported dataset, named alone or by a glob
            raise NotAProfileError(
                source, "not a pprof profile (a Parquet file: ingest reads a dataset by its folder)"
            ) from None
        from pyproflab.decode.gotrace import GZIPPED, trace_version

        if trace_version(raw[:16]) is not None:  # the file was gzipped: ingest's sniff missed it
            raise NotAProfileError(source, GZIPPED) from None
        if not legacy.could_start_profile(raw):
            raise NotAProfileError(
                source, f"not a pprof profile (starts with byte 0x{raw[0]:02x})"
            ) from None
        raise e from None


def decompress(
    data: bytes | bytearray, *, source: str, max_bytes: int = DEFAULT_MAX_BYTES
) -> bytes | bytearray:
    """Return the protobuf bytes: gunzipped if ``data`` starts with the gzip magic.

    The output grows in one buffer, inflated ``INFLATE_CHUNK`` bytes at a time:
    zlib asked for all of it at once joins its blocks into a new object at the
    end, holding twice the output for a moment (a 64 MiB profile cost 128 MiB).
    """
    if not data:
        raise NotAProfileError(source, "empty file, not a profile")
    if not data.startswith(GZIP_MAGIC):
        if len(data) > max_bytes:
            raise TooLargeError(source, f"profile is larger than the cap of {max_bytes} bytes")
        return data
    whole = _inflate_whole(data, max_bytes)
    if whole is not None:
        return whole
    out = bytearray()
    rest = data
    while True:
        rest = _inflate_member(rest, out, source=source, max_bytes=max_bytes)
        if not rest:
            break
        if not rest.startswith(GZIP_MAGIC):
            # Go's gzip reader refuses anything after a member but another member.
            raise CorruptProfileError(source, "unexpected bytes after the gzip stream")
    if not out:
        raise NotAProfileError(source, "empty gzip stream, not a profile")
    return out


INFLATE_CHUNK = 1 << 20
#: DEFLATE's densest code (a 258-byte match in under two bits, plus block
#: headers): no stream of n bytes inflates to more than about 1032 * n.
DEFLATE_MAX_RATIO = 1032


def _inflate_whole(data: bytes | bytearray, max_bytes: int) -> bytes | None:
    """``data`` inflated in one call when it is one gzip member (``_inflate.c``'s
    rule), else None: ``decompress`` then streams it and gives the exact error.
    The buffer is the size the trailer states (ISIZE), tried only when that is
    within the cap and within what the compressed bytes can inflate to, so a
    lying trailer costs at most what streaming would."""
    if _inflate is None or len(data) < 18:
        return None
    stated = int.from_bytes(data[-4:], "little")
    if not 0 < stated <= min(max_bytes, DEFLATE_MAX_RATIO * len(data)):
        return None
    return _inflate.whole(data, stated)


def _inflate_member(
    data: bytes | bytearray, out: bytearray, *, source: str, max_bytes: int
) -> bytes:
    """Inflate the gzip member at the start of ``data`` onto ``out``; return the
    bytes after it. Never inflates more than one byte past ``max_bytes`` in
    all: getting that byte proves the stream too large."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    pending = data
    while not inflater.eof:
        room, before = max_bytes + 1 - len(out), len(pending)
        try:
            chunk = inflater.decompress(pending, min(INFLATE_CHUNK, room))
        except zlib.error as e:  # type: ignore[misc]  # zlib-ng's stub types it as an instance
            raise CorruptProfileError(source, f"corrupt gzip stream ({e})") from None
        out += chunk
        if len(out) > max_bytes:
            raise TooLargeError(
                source,
                f"decompressed size passes the cap of {max_bytes} bytes "
                "(a gzip bomb, or raise max_bytes)",
            )
        pending = inflater.unconsumed_tail
        if not chunk and len(pending) >= before and not inflater.eof:
            raise CorruptProfileError(source, "truncated gzip stream")
    return inflater.unused_data


__all__ = [
    "DEFAULT_MAX_BYTES",
    "ProfileError",
    "decode_bytes",
    "decompress",
    "read_profile",
]
