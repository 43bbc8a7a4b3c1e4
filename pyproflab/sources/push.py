"""Profiles pushed by the fleets' profiling SDKs: what one request holds.

Two protocols, as their SDKs send them (read from the SDKs' sources):

- **Datadog** (dd-trace-go's profiler, to the agent's ``/profiling/v1/input``):
  a multipart/form-data body with one part per attachment (``cpu.pprof``,
  ``delta-heap.pprof``, ``goroutines.pprof``, ``metrics.json``, ``go.trace``,
  each zstd- or gzip-compressed as the SDK chose) and an ``event`` part, JSON
  (event version 4): ``attachments`` (their names), ``start``/``end``
  (RFC 3339), ``tags_profiler`` (``k:v`` comma-separated), ``family``.
- **Pyroscope** (pyroscope-go, ``/ingest``): the query string holds ``name``
  (``app{k=v,...}``), ``from``/``until`` (Unix time in s, ms or ns, as older
  and newer SDKs send it), ``spyName``, ``sampleRate``, ``units``,
  ``aggregationType`` and optionally ``format`` (only ``pprof`` is taken); the
  body is multipart with a ``profile`` part and an optional
  ``sample_type_config`` (JSON), or the bare pprof bytes. A
  ``prev_profile`` part (the cumulative uploads of old SDKs, which the server
  subtracted) is refused: pyroscope-go 1.x computes deltas itself and never
  sends one.

Rules:

- A malformed push is a ``PushError`` (one line; ``reason`` names the kind for
  metrics): the server answers 400 and stores nothing of it. So is a window
  time a store cannot keep (before 1970 or past year 9999, ``window_ns``).
- Tags are kept as sent, at most ``max_tags`` of them; each value is cut to
  ``max_value`` bytes (at a character boundary) when it becomes metadata.
- Metadata (``push_meta``): service is Datadog's ``service`` tag or
  Pyroscope's application name; version its ``version`` tag; instance
  ``host`` (Datadog) or ``instance``/``hostname``/``pod`` (Pyroscope), else
  the process's ``runtime-id`` / ``__session_id__``; every tag also goes to
  the profile's labels.
- Attachments keep the bytes as sent. ``pprof_bytes`` undoes the transport's
  zstd (Datadog's default), capped like the decoder's gzip; gzip is left to
  the decoder. Which attachments are profiles: ``*.pprof`` (Datadog) and
  ``profile`` (Pyroscope); ``go.trace`` is an execution trace; ``metrics.json``
  is neither.
"""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

from pyproflab.errors import CorruptProfileError, TooLargeError
from pyproflab.sources.multipart import MultipartError, parse_multipart

if sys.version_info >= (3, 14):
    from compression import zstd
else:  # the standard library's module, backported
    from backports import zstd

DATADOG_PATH = "/profiling/v1/input"
PYROSCOPE_PATH = "/ingest"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
MAX_TAGS = 128
MAX_TAG_VALUE = 256
# The window times a store keeps: from the epoch to the last second of year
# 9999 (Python's datetime.max). SDKs send times inside; others are refused.
MAX_NS = 253_402_300_799 * 10**9
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CHUNK = 1 << 20
#: the decompressed size up to which the server parses a profile's top level
#: before it acknowledges it (``check_profile``; pushed profiles are a few KB)
WHOLE_CHECK = 8 << 20


class PushError(ValueError):
    """A push that cannot be taken; ``reason`` is a short name for counting."""

    def __init__(self, message: str, reason: str = "malformed"):
        super().__init__(message)
        self.reason = reason


@dataclass
class Attachment:
    name: str
    data: bytes

    @property
    def kind(self) -> str:
        """ "profile", "trace" or "other" (see the module's rules)."""
        if self.name == "profile" or self.name.endswith(".pprof"):
            return "profile"
        if self.name.endswith(".trace"):
            return "trace"
        return "other"


@dataclass
class Push:
    """One request's profiles and what the client said about them."""

    protocol: str  # "datadog" | "pyroscope"
    tags: dict[str, str]
    attachments: list[Attachment]
    start_ns: int | None = None
    end_ns: int | None = None
    #: protocol fields kept as sent (Pyroscope's spyName, units ...; Datadog's family)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def profiles(self) -> list[Attachment]:
        return [a for a in self.attachments if a.kind == "profile"]


# --- Datadog ---------------------------------------------------------------------


def _rfc3339_ns(value: Any, what: str) -> int | None:
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    frac = ""
    if "." in text:  # fromisoformat takes at most microseconds: keep the nanoseconds aside
        head, _, rest = text.partition(".")
        digits = len(rest) - len(rest.lstrip("0123456789"))
        frac, text = rest[:digits], head + rest[digits:]
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise PushError(f"event time {value!r} is not RFC 3339") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    ns = int(t.timestamp()) * 10**9 + int((frac + "000000000")[:9])
    return window_ns(ns, f"event {what} {value[:40]!r}")


def window_ns(ns: int, what: str) -> int:
    """``ns`` when a store keeps it as a window time, else ``PushError``."""
    if not 0 <= ns <= MAX_NS + 999_999_999:
        raise PushError(f"{what} is outside the years 1970 to 9999")
    return ns


def _split_tags(text: str, max_tags: int) -> dict[str, str]:
    tags: dict[str, str] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        key, _, val = item.partition(":")
        tags[key] = val
        if len(tags) > max_tags:
            raise PushError(f"more than {max_tags} tags", "too_many_tags")
    return tags


def parse_datadog(content_type: str, body: bytes, *, max_tags: int = MAX_TAGS) -> Push:
    """A dd-trace-go profile upload (event version 4) as a ``Push``."""
    try:
        parts = parse_multipart(body, content_type)
    except MultipartError as e:
        raise PushError(str(e)) from None
    by_name: dict[str, bytes] = {}
    for p in parts:
        if p.name in by_name:
            raise PushError(f"part {p.name!r} appears twice")
        by_name[p.name] = p.data
    if "event" not in by_name:
        raise PushError("no event part (only event version 4 uploads are taken)")
    try:
        event = json.loads(by_name.pop("event"))
    except (ValueError, UnicodeDecodeError, RecursionError):  # nested past the recursion limit
        raise PushError("event part is not JSON") from None
    if not isinstance(event, dict) or not isinstance(event.get("attachments"), list):
        raise PushError("event has no attachments list")
    names = [str(n) for n in event["attachments"]]
    missing = [n for n in names if n not in by_name]
    if missing:
        raise PushError(f"event lists attachments the body lacks: {', '.join(missing)}")
    tags = _split_tags(str(event.get("tags_profiler") or ""), max_tags)
    return Push(
        "datadog",
        tags,
        [Attachment(n, by_name[n]) for n in names],
        _rfc3339_ns(event.get("start"), "start"),
        _rfc3339_ns(event.get("end"), "end"),
        {k: event[k] for k in ("family", "version") if isinstance(event.get(k), str)},
    )


# --- Pyroscope -------------------------------------------------------------------


def parse_app_name(name: str, max_tags: int = MAX_TAGS) -> tuple[str, dict[str, str]]:
    """``app{k=v,k2=v2}`` -> ("app", {"k": "v", "k2": "v2"}) (PushError if malformed)."""
    app, brace, rest = name.partition("{")
    tags: dict[str, str] = {}
    if brace:
        if not rest.endswith("}"):
            raise PushError(f"name {name[:80]!r}: labels not closed by '}}'")
        for item in filter(None, (t.strip() for t in rest[:-1].split(","))):
            key, eq, val = item.partition("=")
            if not eq or not key.strip():
                raise PushError(f"name {name[:80]!r}: label {item[:40]!r} is not key=value")
            tags[key.strip()] = val.strip()
            if len(tags) > max_tags:
                raise PushError(f"more than {max_tags} tags", "too_many_tags")
    return app.strip(), tags


def _unix_ns(value: str | None, what: str) -> int | None:
    """Pyroscope's times: whole seconds, milliseconds or nanoseconds by size."""
    if not value:
        return None
    try:
        n = int(value)
    except ValueError:
        raise PushError(f"{what}={value[:40]!r} is not a whole number") from None
    if 0 <= n < 10**11:
        n *= 10**9
    elif 0 <= n < 10**14:
        n *= 10**6
    return window_ns(n, f"{what}={value[:40]!r}")


def parse_pyroscope(
    query: str, content_type: str, body: bytes, *, max_tags: int = MAX_TAGS
) -> Push:
    """A pyroscope-go ``/ingest`` push as a ``Push``."""
    q = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    fmt = q.get("format", "pprof") or "pprof"
    if fmt != "pprof":
        raise PushError(f"format={fmt[:40]!r} is not taken (only pprof)", "unsupported_format")
    app, tags = parse_app_name(q.get("name", ""), max_tags)
    if not app and not tags.get("service_name"):
        raise PushError("no application name (name=APP{labels})")
    details: dict[str, Any] = {
        k: q[k] for k in ("spyName", "sampleRate", "units", "aggregationType") if q.get(k)
    }
    details["app"] = app
    if (content_type or "").lower().startswith("multipart/"):
        try:
            parts = {p.name: p.data for p in parse_multipart(body, content_type)}
        except MultipartError as e:
            raise PushError(str(e)) from None
        if "prev_profile" in parts:
            raise PushError(
                "prev_profile (cumulative uploads of old SDKs) is not taken; "
                "pyroscope-go 1.x sends deltas",
                "unsupported_format",
            )
        if "profile" not in parts:
            raise PushError("no profile part")
        data = parts["profile"]
        if "sample_type_config" in parts:
            try:
                details["sample_type_config"] = json.loads(parts["sample_type_config"])
            except (ValueError, UnicodeDecodeError, RecursionError):
                raise PushError("sample_type_config is not JSON") from None
    else:
        data = body
    if not data:
        raise PushError("empty profile")
    start = _unix_ns(q.get("from"), "from")
    end = _unix_ns(q.get("until"), "until")
    return Push("pyroscope", tags, [Attachment("profile", data)], start, end, details)


# --- metadata and bytes ------------------------------------------------------------


def cut(value: str, max_bytes: int) -> str:
    """``value`` cut to at most ``max_bytes`` of UTF-8, at a character boundary."""
    raw = value.encode("utf-8", "replace")
    if len(raw) <= max_bytes:
        return value
    return raw[:max_bytes].decode("utf-8", "ignore")


def push_meta(push: Push, max_value: int = MAX_TAG_VALUE) -> dict[str, Any]:
    """service, version, instance, labels, window_start, window_end of a push
    (see the module's rules), values cut to ``max_value`` bytes. Label keys are
    cut at ``MAX_TAG_VALUE`` whatever ``max_value`` is: cut short, two keys
    became one (``otel.scope.name`` and ``otel.scope.version`` at 5) and a
    value was lost."""
    t = push.tags
    if push.protocol == "datadog":
        service = t.get("service")
        instance = t.get("host") or t.get("runtime-id")
    else:
        service = push.details.get("app") or t.get("service_name")
        instance = next(
            (t[k] for k in ("instance", "hostname", "host", "pod", "__session_id__") if t.get(k)),
            None,
        )

    def ts(ns: int | None) -> datetime | None:
        # Whole microseconds, not ns / 1e9: a float rounds 9999-12-31 23:59:59.9999999 up
        # into year 10000.
        return _EPOCH + timedelta(microseconds=window_ns(ns, "window") // 1000) if ns else None

    return {
        "service": cut(service, max_value) if service else None,
        "version": cut(t["version"], max_value) if t.get("version") else None,
        "instance": cut(instance, max_value) if instance else None,
        "labels": {cut(k, MAX_TAG_VALUE): cut(v, max_value) for k, v in t.items()},
        "window_start": ts(push.start_ns),
        "window_end": ts(push.end_ns),
    }


def _zstd_chunks(data: bytes, source: str) -> Iterator[bytes]:
    d = zstd.ZstdDecompressor()
    pending = data
    try:
        while not d.eof:
            chunk = d.decompress(pending, max_length=_CHUNK)
            pending = b""
            if not chunk and d.needs_input:
                raise CorruptProfileError(source, "truncated zstd stream")
            yield chunk
    except zstd.ZstdError as e:
        raise CorruptProfileError(source, f"corrupt zstd stream ({e})") from None
    if d.unused_data:
        raise CorruptProfileError(source, "unexpected bytes after the zstd stream")


def _gzip_chunks(data: bytes, source: str) -> Iterator[bytes]:
    pending = data
    while pending:
        if not pending.startswith(b"\x1f\x8b"):
            raise CorruptProfileError(source, "unexpected bytes after the gzip stream")
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            while not d.eof:
                before = len(pending)
                chunk = d.decompress(pending, _CHUNK)
                pending = d.unconsumed_tail
                if not chunk and len(pending) >= before and not d.eof:
                    raise CorruptProfileError(source, "truncated gzip stream")
                yield chunk
        except zlib.error as e:
            raise CorruptProfileError(source, f"corrupt gzip stream ({e})") from None
        pending = d.unused_data


def _too_large(source: str, max_bytes: int) -> TooLargeError:
    return TooLargeError(
        source, f"decompressed size passes the cap of {max_bytes} bytes (a bomb, or raise the cap)"
    )


def pprof_bytes(data: bytes, *, source: str, max_bytes: int) -> bytes:
    """The attachment with zstd undone (inflation stops once past ``max_bytes``);
    other bytes (gzip, raw protobuf) as they are, for the decoder."""
    if not data.startswith(ZSTD_MAGIC):
        return data
    out = bytearray()
    for chunk in _zstd_chunks(data, source):
        out += chunk
        if len(out) > max_bytes:
            raise _too_large(source, max_bytes)
    return bytes(out)


def check_size(data: bytes, *, source: str, max_bytes: int) -> int:
    """The attachment's decompressed size; TooLargeError (or CorruptProfileError)
    if it inflates past ``max_bytes``, holding one chunk at a time: the server's
    check before it acknowledges a push (zstd, gzip, or raw bytes)."""
    if data.startswith(ZSTD_MAGIC):
        chunks = _zstd_chunks(data, source)
    elif data.startswith(b"\x1f\x8b"):
        chunks = _gzip_chunks(data, source)
    else:
        chunks = iter((data,))
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > max_bytes:
            raise _too_large(source, max_bytes)
    return total


def check_profile(data: bytes, *, source: str, max_bytes: int, whole: int = WHOLE_CHECK) -> None:
    """Raise a ProfileError where the ingester would certainly refuse the
    attachment: when it inflates to at most ``whole`` bytes, the ingester's own
    first steps on it (zstd undone, ``decompress`` twice as ``item_bytes`` and
    ``decode_bytes`` do, the protobuf's top level split by ``parse_raw``); a
    larger one only ``check_size`` (the ingester still refuses it, after the
    200). Refused here: bytes that are not gzip, zstd or a profile, truncated or
    corrupt streams and protobufs, empty profiles, inflation past ``max_bytes``.

    Each layer is inflated once: the steps run capped at ``whole``, and only a
    part that passes the cap is checked again as before (its size first). Two
    passes, the size check then the steps, cost about 60 µs a pushed profile."""
    from pyproflab.decode.pprof import decompress, parse_raw, refuse_plain_trace

    if data[:3] == b"go ":  # parse_raw would call it gzipped: it only sees inflated bytes
        refuse_plain_trace(data, source)
    cap = min(whole, max_bytes)
    try:
        raw = decompress(
            pprof_bytes(data, source=source, max_bytes=cap), source=source, max_bytes=cap
        )
        raw = decompress(raw, source=source, max_bytes=cap)
    except TooLargeError:  # past ``whole``, or a bomb: the size alone, and its own message
        if check_size(data, source=source, max_bytes=max_bytes) > whole:
            return
        raw = pprof_bytes(data, source=source, max_bytes=max_bytes)
        raw = decompress(raw, source=source, max_bytes=max_bytes)
        raw = decompress(raw, source=source, max_bytes=max_bytes)
    parse_raw(raw, source=source)
