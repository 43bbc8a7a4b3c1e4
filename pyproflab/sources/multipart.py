"""A strict reader of ``multipart/form-data`` bodies (RFC 7578), for pushes.

Rules:

- The boundary comes from the Content-Type; the body must start with the
  first delimiter and end with the closing one (``--BOUNDARY--``, then at most
  a line break). Anything else, a part without a blank line after its headers
  or a part without a ``form-data`` name, is a ``MultipartError``.
- At most ``max_parts`` parts and ``MAX_HEADER_BYTES`` of headers per part: a
  hostile body cannot make the reader build an unbounded list.
- Parameter values are quoted strings with backslash escapes (as Go's
  mime/multipart writes them) or tokens.
- Parts are slices of the body found with ``bytes.find``: no copy per byte.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_HEADER_BYTES = 8192


class MultipartError(ValueError):
    """The body is not well-formed multipart/form-data; the text is one line."""


@dataclass(frozen=True)
class Part:
    name: str
    filename: str | None
    content_type: str | None
    data: bytes


def header_params(value: str) -> tuple[str, dict[str, str]]:
    """``form-data; name="a"; filename="b"`` -> ("form-data", {"name": "a", ...}).
    Parameter names are lower-cased; quoted values lose their escapes."""
    head, _, rest = value.partition(";")
    params: dict[str, str] = {}
    i, n = 0, len(rest)
    while i < n:
        while i < n and rest[i] in " \t;":
            i += 1
        eq = rest.find("=", i)
        if eq < 0:
            break
        key = rest[i:eq].strip().lower()
        i = eq + 1
        if i < n and rest[i] == '"':
            out, i = [], i + 1
            while i < n and rest[i] != '"':
                if rest[i] == "\\" and i + 1 < n:
                    i += 1
                out.append(rest[i])
                i += 1
            if i >= n:
                raise MultipartError(f"unterminated quoted value in {value[:80]!r}")
            val, i = "".join(out), i + 1
        else:
            end = rest.find(";", i)
            end = n if end < 0 else end
            val, i = rest[i:end].strip(), end
        params[key] = val
    return head.strip().lower(), params


def boundary_of(content_type: str) -> str:
    kind, params = header_params(content_type or "")
    if kind != "multipart/form-data":
        raise MultipartError(f"expected multipart/form-data, not {kind or 'no content type'!r}")
    boundary = params.get("boundary", "")
    if not 0 < len(boundary) <= 70:
        raise MultipartError("multipart/form-data without a valid boundary")
    return boundary


def _part(raw: bytes) -> Part:
    end = raw.find(b"\r\n\r\n", 0, MAX_HEADER_BYTES + 4)
    if end < 0:
        if raw.startswith(b"\r\n"):  # a part with no headers at all
            raise MultipartError("a part has no Content-Disposition")
        raise MultipartError("a part's headers are missing their end or too long")
    headers: dict[str, str] = {}
    for line in raw[:end].split(b"\r\n"):
        if not line:
            continue
        key, colon, val = line.partition(b":")
        if not colon:
            raise MultipartError(f"malformed part header {line[:80]!r}")
        headers[key.strip().lower().decode("latin-1")] = val.strip().decode("utf-8", "replace")
    kind, params = header_params(headers.get("content-disposition", ""))
    if kind != "form-data" or not params.get("name"):
        raise MultipartError("a part has no form-data name")
    return Part(params["name"], params.get("filename"), headers.get("content-type"), raw[end + 4 :])


def parse_multipart(body: bytes, content_type: str, *, max_parts: int = 64) -> list[Part]:
    """The parts of ``body`` in order (MultipartError if malformed)."""
    delim = b"--" + boundary_of(content_type).encode("latin-1")
    if not body.startswith(delim):
        raise MultipartError("body does not start with the multipart boundary")
    parts: list[Part] = []
    pos = len(delim)
    sep = b"\r\n" + delim
    while True:
        if body.startswith(b"--", pos):
            tail = body[pos + 2 :]
            if tail not in (b"", b"\r\n"):
                raise MultipartError("bytes after the closing multipart boundary")
            return parts
        if not body.startswith(b"\r\n", pos):
            raise MultipartError("malformed multipart boundary line")
        nxt = body.find(sep, pos + 2)
        if nxt < 0:
            raise MultipartError("multipart body ends before its closing boundary (truncated)")
        if len(parts) >= max_parts:
            raise MultipartError(f"more than {max_parts} multipart parts")
        parts.append(_part(body[pos + 2 : nxt]))
        pos = nxt + len(sep)
