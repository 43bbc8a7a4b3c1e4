"""The targets of ``pyproflab collect``: live Go services, read from a TOML file.

A targets file is a list of ``[[target]]`` tables::

    [[target]]
    service  = "api"
    version  = "v1"
    instance = "i-1"
    url      = "http://127.0.0.1:6060"  # base URL: /debug/pprof/... and /metrics below it
    auth_env = "API_PPROF_AUTH"         # optional: env var holding the Authorization value
    types    = ["cpu", "heap"]          # optional: this target's own profile types
    allow_redirects_to_other_hosts = false  # optional: follow a redirect off this host

Rules:

- ``service``, ``version``, ``instance`` and ``url`` are required non-empty
  strings; ``(service, version, instance)`` and ``url`` are unique in a file.
- ``url`` is ``http://`` or ``https://`` with a host, and holds no credentials,
  query or fragment: secrets never live in the file. Errors never echo a URL
  with credentials in it.
- ``auth_env`` names an environment variable (``[A-Za-z_][A-Za-z0-9_]*``);
  its value is read only when a request is made (``Target.authorization``) and
  is kept nowhere else.
- A redirect is followed only to the target's own host and port unless
  ``allow_redirects_to_other_hosts = true``; the Authorization value is
  never sent to a redirect either way.
- Unknown keys are errors (a typo like ``auth`` or ``token`` must not be
  silently ignored).
- Every problem is one line naming the file and the target: a ``UsageError``.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pyproflab.errors import UsageError

# The profile types collect fetches by default, in fetch order.
COLLECT_TYPES: tuple[str, ...] = ("cpu", "heap", "allocs", "goroutine", "mutex", "block")
# Types fetched only when asked for: an execution trace (/debug/pprof/trace).
ON_REQUEST_TYPES: tuple[str, ...] = ("trace",)
KNOWN_TYPES = COLLECT_TYPES + ON_REQUEST_TYPES

_REQUIRED = ("service", "version", "instance", "url")
_OPTIONAL = ("auth_env", "types", "allow_redirects_to_other_hosts")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_USERINFO = re.compile(r"[^/@?#]*@")


@dataclass(frozen=True)
class Target:
    """One live service instance. ``url`` is the base URL without a trailing slash."""

    service: str
    version: str
    instance: str
    url: str
    auth_env: str | None = None
    types: tuple[str, ...] | None = None
    allow_redirects_to_other_hosts: bool = False

    @property
    def name(self) -> str:
        """``service/version/instance``: how reports name this target."""
        return f"{self.service}/{self.version}/{self.instance}"

    def authorization(self) -> str | None:
        """The Authorization header value, read from the environment now.

        ``None`` when the target has no ``auth_env``; raises ``LookupError``
        (naming the variable, never a value) when the variable is unset or empty.
        """
        if not self.auth_env:
            return None
        value = os.environ.get(self.auth_env, "")
        if not value.strip():
            raise LookupError(f"environment variable {self.auth_env} (auth_env) is not set")
        return value.strip()


def redact_url(url: str) -> str:
    """``url`` without user:password@ (what may be shown or stored), also where
    urlsplit sees none (``user:pw@host``, ``http:/user:pw@host``): every run of
    characters up to an ``@`` after the last ``/`` before it is cut."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:  # IPv6
            host = f"[{host}]"
        netloc = host + (f":{parts.port}" if parts.port is not None else "")
    except ValueError:
        return "<unparsable url>"
    shown = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return _USERINFO.sub("", shown)


# Where the Authorization value goes instead of a URL: a targets file's and a
# job's key (the pull command has --auth-env, Datadog its key variables).
AUTH_ENV_ADVICE = "put the Authorization value in an environment variable and name it in auth_env"


def check_url(url: str, what: str = "url", advice: str = AUTH_ENV_ADVICE) -> str:
    """The normalized base URL (``http://`` or ``https://``, a host, no credentials,
    query or fragment), or ValueError with a reason that never shows credentials;
    ``what`` names the URL in the reason, ``advice`` says where credentials go
    instead (it must fit where the URL was given)."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a bad port
    except ValueError:
        raise ValueError(f"{what} is not a valid URL") from None
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ValueError(f"{what} must not hold credentials ({advice})")
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{what} must start with http:// or https://, got {redact_url(url)!r}")
    if not parts.hostname:
        raise ValueError(f"{what} has no host: {redact_url(url)!r}")
    if parts.query or parts.fragment:
        raise ValueError(
            f"{what} must be a base URL without ?query or #fragment: {redact_url(url)!r}"
        )
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def _one_target(raw: Any) -> Target:
    if not isinstance(raw, dict):
        raise ValueError("expected a table")
    unknown = sorted(set(raw) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (keys: {', '.join(_REQUIRED + _OPTIONAL)})")
    values: dict[str, str] = {}
    for key in _REQUIRED:
        v = raw.get(key)
        if v is None:
            raise ValueError(f"missing {key}")
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"{key} must be a non-empty string")
        if any(c in v for c in "\r\n\t\0"):
            raise ValueError(f"{key} must be one line")
        values[key] = v.strip()
    url = check_url(values["url"])
    auth_env = raw.get("auth_env")
    if auth_env is not None and (
        not isinstance(auth_env, str) or not _ENV_NAME.fullmatch(auth_env)
    ):
        raise ValueError("auth_env must be the name of an environment variable, like PPROF_AUTH")
    types = raw.get("types")
    if types is not None:
        types = tuple(parse_types(types, what="types"))
    other_hosts = raw.get("allow_redirects_to_other_hosts", False)
    if not isinstance(other_hosts, bool):
        raise ValueError("allow_redirects_to_other_hosts must be true or false")
    return Target(
        values["service"],
        values["version"],
        values["instance"],
        url,
        auth_env=auth_env,
        types=types,
        allow_redirects_to_other_hosts=other_hosts,
    )


def parse_types(value: str | Sequence[Any], *, what: str = "--types") -> list[str]:
    """Profile types from ``"cpu,heap"`` or a list; ValueError naming the bad one."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"{what} must be a list of strings")
        t = item.strip().lower()
        if not t:
            continue
        if t not in KNOWN_TYPES:
            raise ValueError(
                f"{what}: unknown profile type {item!r} (one of {', '.join(KNOWN_TYPES)})"
            )
        if t not in out:
            out.append(t)
    if not out:
        raise ValueError(f"{what} is empty")
    return out


def targets_from_dict(data: dict[str, Any], *, source: str = "<targets>") -> list[Target]:
    """Targets from parsed TOML; ``UsageError`` naming ``source`` and the target."""
    extra = sorted(set(data) - {"target"})
    if extra:
        raise UsageError(
            f"{source}: unknown top-level key {extra[0]!r} (expected [[target]] tables)"
        )
    raw_targets = data.get("target")
    if not isinstance(raw_targets, list) or not raw_targets:
        raise UsageError(f"{source}: no targets (expected one or more [[target]] tables)")
    targets: list[Target] = []
    by_name: dict[str, int] = {}
    by_url: dict[str, int] = {}
    for i, raw in enumerate(raw_targets, 1):
        label = _label(raw, i)
        try:
            t = _one_target(raw)
        except ValueError as e:
            raise UsageError(f"{source}: {label}: {e}") from None
        if t.name in by_name:
            raise UsageError(
                f"{source}: {label}: same service/version/instance as target {by_name[t.name]}"
            )
        if t.url in by_url:
            raise UsageError(f"{source}: {label}: same url as target {by_url[t.url]}")
        by_name[t.name] = by_url[t.url] = i
        targets.append(t)
    return targets


def _label(raw: Any, i: int) -> str:
    """``target 3 (api/v1/i-1)`` as far as the raw table allows."""
    if isinstance(raw, dict):
        parts = [raw.get(k) for k in ("service", "version", "instance")]
        if all(isinstance(p, str) and p and "\n" not in p for p in parts):
            return f"target {i} ({'/'.join(parts)})"  # type: ignore[arg-type]
    return f"target {i}"


def load_targets(path: str | os.PathLike) -> list[Target]:
    """Read and validate a targets TOML file (``UsageError`` on any problem)."""
    source = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"{source}: no such targets file") from None
    except IsADirectoryError:
        raise UsageError(f"{source}: is a directory, not a targets file") from None
    except UnicodeDecodeError:
        raise UsageError(f"{source}: not UTF-8 text") from None
    except OSError as e:
        raise UsageError(f"{source}: cannot read: {e.strerror or e}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{source}: not valid TOML: {str(e).splitlines()[0]}") from None
    return targets_from_dict(data, source=source)
