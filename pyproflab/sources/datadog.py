"""Datadog's continuous profiler as a source: the profiling API datadog-pgo uses.

Requests (to ``https://app.SITE``, or ``base_url``):

- ``POST /api/unstable/profiles/list`` with ``{"filter": {"from", "to",
  "query"}, "sort": {"field", "order"}, "limit"}``: the profiles (events)
  matching a query over a time range. Each ``data`` entry has the event id
  (``id``) and ``attributes``: the profile id (``id``), ``service``,
  ``timestamp``, ``duration_nanos``, ``tags`` (``key:value`` strings) and
  ``custom.metrics.core_cpu_cores``. Pages follow ``meta.page.after`` as
  ``page.cursor`` (Datadog's list convention; the unstable endpoint does not
  document its own).
- ``GET /api/ui/profiling/profiles/{profile id}/download?eventId={event id}``:
  a zip of the event's pprof files (``cpu.pprof``, ``delta-heap.pprof`` ...,
  and ``metrics.json``, which is not a profile).

Rules:

- Keys come from ``DD_API_KEY`` and ``DD_APP_KEY`` (or the variables named),
  read when a request is made, sent as ``DD-API-KEY`` and
  ``DD-APPLICATION-KEY`` to the API's own host only, written nowhere. The site
  is ``site`` (default ``DD_SITE``, else datadoghq.com). The source is named
  ``datadog:SITE``, or ``datadog:URL`` when ``base_url`` is given (the URL
  the requests went to, as ``pull.server_name`` writes it, not a site none
  went to; ``https://app.SITE`` is ``datadog:SITE``, the same server).
- The query gets ``runtime:go`` unless it names a runtime or language (as
  datadog-pgo does), unless ``any_runtime``.
- ``top``: only the N profiles of the range with the most CPU cores
  (``@metrics.core_cpu_cores``, descending: datadog-pgo's choice); otherwise
  every profile of the range, newest first, page by page.
- Tags map to pyproflab's metadata: ``service`` to service, ``version`` to
  version, ``host`` (or ``instance_tag``) to instance; ``env`` and
  ``runtime-id`` (and ``host`` when another tag is the instance) become
  labels. The event's ``timestamp`` is the profile's time when its pprof has
  none.
- ``types`` picks the pprof files by name (``cpu`` is ``cpu.pprof``; ``heap``
  ``delta-heap.pprof`` or ``heap.pprof`` ...; ``all``: every ``.pprof``).
- Incremental: the last wanted file of an event carries the event's key
  (event id and types); an event whose key is known is not downloaded again.
  A killed run re-downloads the events it had not finished; their stored
  files are found present by content.
- A failed listing is a ``SourceError`` (the pull stops, nothing half
  stored); a failed download or a bad zip is one ``Refused`` line and the
  next event is fetched. A zip member larger than the cap is refused.
"""

from __future__ import annotations

import io
import os
import posixpath
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pyproflab.sources.api import ApiError, env_secret
from pyproflab.sources.base import (
    PROFILES,
    Expect,
    ItemMeta,
    Known,
    Offer,
    ProfileItem,
    Refused,
    Request,
    Seen,
    SourceError,
)
from pyproflab.sources.pull import PullOptions, given, server_name, utc

LIST = "/api/unstable/profiles/list"
DOWNLOAD = "/api/ui/profiling/profiles/{profile}/download"
CPU_SORT = "@metrics.core_cpu_cores"
ZIP = ("application/zip", "application/octet-stream", "application/x-zip-compressed")
#: profile type -> the names of its pprof files in a download
FILES: dict[str, tuple[str, ...]] = {
    "cpu": ("cpu.pprof",),
    "heap": ("delta-heap.pprof", "heap.pprof"),
    "mutex": ("delta-mutex.pprof", "mutex.pprof"),
    "block": ("delta-block.pprof", "block.pprof"),
    "goroutine": ("goroutines.pprof",),
}
PAGE = 100
MAX_PAGES = 10_000


@dataclass
class DatadogSource:
    """Profiles from Datadog (see the module rules)."""

    query: str
    site: str | None = None
    base_url: str | None = None
    top: int | None = None
    types: tuple[str, ...] = ("cpu",)
    instance_tag: str = "host"
    any_runtime: bool = False
    api_key_env: str = "DD_API_KEY"
    app_key_env: str = "DD_APP_KEY"
    options: PullOptions = field(default_factory=PullOptions)

    def __post_init__(self) -> None:
        self.site = self.site or os.environ.get("DD_SITE", "").strip() or "datadoghq.com"
        unknown = [t for t in self.types if t != "all" and t not in FILES]
        if unknown:
            names = ", ".join([*FILES, "all"])
            raise SourceError(self.name, f"unknown profile type {unknown[0]!r} (one of {names})")
        if self.top is not None and self.top < 1:
            raise SourceError(self.name, "top must be at least 1")
        # Datadog takes keys, not an Authorization value: the same advice everywhere.
        advice = f"the keys are read from {self.api_key_env} and {self.app_key_env}"
        url = self.base_url or f"https://app.{self.site}"
        self.api = self.options.api(self.name, url, url_advice=advice)
        self.api.secrets = self._keys

    @classmethod
    def from_options(cls, values: dict[str, Any], options: PullOptions) -> DatadogSource:
        """From ``pyproflab pull datadog``'s or a job's values (``types`` a list or
        a comma-separated string)."""
        types = values.get("types") or "cpu"
        if isinstance(types, str):
            types = [t.strip() for t in types.split(",") if t.strip()]
        keys = ("site", "base_url", "top", "instance_tag", "any_runtime")
        return cls(values["query"], types=tuple(types), options=options, **given(values, *keys))

    @property
    def name(self) -> str:
        """``datadog:SITE``, or ``datadog:URL`` with ``base_url``: where the requests go."""
        if self.base_url:  # https://app.SITE is SITE's own server: the same name
            url = server_name(self.base_url)
            site = url.removeprefix("https://app.")
            plain = site != url and "/" not in site and ":" not in site
            return f"datadog:{site if plain else url}"
        return f"datadog:{(self.site or '').lower().rstrip('.')}"

    def _keys(self) -> dict[str, str]:
        return {
            "DD-API-KEY": env_secret(self.api_key_env, "the Datadog API key"),
            "DD-APPLICATION-KEY": env_secret(self.app_key_env, "the Datadog application key"),
        }

    def offer(self, request: Request) -> Offer:
        events = list(self._events(request))
        return Offer(kinds=(PROFILES,), services=_services(events), items=len(events))

    def items(
        self, request: Request, known: Known
    ) -> Iterator[ProfileItem | Refused | Seen | Expect]:
        events = list(self._events(request))
        keys = {e["id"]: self._event_key(e) for e in events}
        done = known(list(keys.values()))
        todo = [e for e in events if keys[e["id"]] not in done]
        yield Expect(len(todo), known=len(events) - len(todo))
        for event in todo:
            yield from self._download(event, keys[event["id"]])

    def full_query(self) -> str:
        q = self.query.strip()
        if self.any_runtime or "runtime:" in q or "language:" in q:
            return q
        return f"{q} runtime:go".strip()

    def _event_key(self, event: dict[str, Any]) -> str:
        return f"{event['id']}#{','.join(sorted(self.types))}"

    def _events(self, request: Request) -> Iterator[dict[str, Any]]:
        """The listed events of the request's range (see the module rules)."""
        if request.since is None:
            raise SourceError(self.name, "a time range is needed (since)")
        until = request.until or datetime.now(UTC)
        body: dict[str, Any] = {
            "filter": {"from": _iso(request.since), "to": _iso(until), "query": self.full_query()},
            "sort": {"field": CPU_SORT if self.top else "timestamp", "order": "desc"},
            "limit": self.top or PAGE,
        }
        cursors: set[str] = set()
        for _ in range(MAX_PAGES):
            doc = self.api.json("POST", LIST, body=body)
            data = doc.get("data") if isinstance(doc, dict) else None
            if not isinstance(data, list):
                raise SourceError(self.name, f"POST {LIST}: the reply has no data list")
            for entry in data:
                if isinstance(entry, dict) and entry.get("id") and _attrs(entry).get("id"):
                    yield entry
            after = ((doc.get("meta") or {}).get("page") or {}).get("after")
            if self.top or not after or not data or after in cursors:
                return
            cursors.add(after)
            body["page"] = {"cursor": after, "limit": PAGE}
        raise SourceError(self.name, f"POST {LIST}: more than {MAX_PAGES} pages")

    def _download(self, event: dict[str, Any], key: str) -> Iterator[ProfileItem | Refused | Seen]:
        attrs = _attrs(event)
        path = DOWNLOAD.format(profile=attrs["id"])
        what = f"{self.name}: GET {path}"
        try:
            reply = self.api.call("GET", path, params={"eventId": event["id"]}, accept=ZIP)
            files = _pprof_files(reply.body, self.types, self.api.max_bytes)
        except ApiError as e:
            yield Refused(what, e.problem.removeprefix(f"GET {path}: "))
            return
        except ValueError as e:
            yield Refused(what, str(e))
            return
        if not files:  # no wanted file in this event: remembered, not downloaded again
            yield Seen(key)
            return
        meta = self._meta(event)
        for i, (name, data) in enumerate(files):
            last = i == len(files) - 1
            item_meta = replace(meta, labels=dict(meta.labels), source=f"{self.name}{path}/{name}")
            yield ProfileItem(item_meta, data=data, key=key if last else None)

    def _meta(self, event: dict[str, Any]) -> ItemMeta:
        attrs = _attrs(event)
        tags = _tags(attrs)
        service = tags.get("service") or attrs.get("service")
        labels: dict[str, str] = {k: tags[k] for k in ("env", "runtime-id", "host") if k in tags}
        labels.pop(self.instance_tag, None)
        return ItemMeta(
            service=service or None,
            version=tags.get("version"),
            instance=tags.get(self.instance_tag),
            time=_time(attrs.get("timestamp")),
            labels=labels,
        )


def _attrs(event: dict[str, Any]) -> dict[str, Any]:
    a = event.get("attributes")
    return a if isinstance(a, dict) else {}


def _tags(attrs: dict[str, Any]) -> dict[str, str]:
    """``key:value`` tags (the first value of a key wins), with the attributes of the
    same names as a fallback."""
    out: dict[str, str] = {}
    for tag in attrs.get("tags") or []:
        if isinstance(tag, str) and ":" in tag:
            k, v = tag.split(":", 1)
            out.setdefault(k, v)
    for k in ("service", "version", "env", "host", "runtime-id"):
        if isinstance(attrs.get(k), str) and k not in out:
            out[k] = attrs[k]
    return out


def _services(events: list[dict[str, Any]]) -> tuple[str, ...]:
    return tuple(sorted({s for e in events if (s := _tags(_attrs(e)).get("service"))}))


def _iso(t: datetime) -> str:
    return utc(t).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except (ValueError, OverflowError):  # OverflowError: past datetime's years in UTC
        return None


def _wanted(name: str, types: tuple[str, ...]) -> bool:
    if not name.endswith(".pprof"):
        return False
    if "all" in types:
        return True
    return any(name in FILES[t] for t in types)


def _pprof_files(body: bytes, types: tuple[str, ...], cap: int) -> list[tuple[str, bytes]]:
    """(file name, bytes) of the wanted pprof files of a download, in name order;
    ValueError (one line) for a body that is not a zip or a member over the cap."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(body))
        members = archive.infolist()
    except (zipfile.BadZipFile, OSError):
        raise ValueError("the download is not a zip archive") from None
    out = []
    for info in sorted(members, key=lambda m: posixpath.basename(m.filename)):
        name = posixpath.basename(info.filename)
        if info.is_dir() or not _wanted(name, types):
            continue
        if info.file_size > cap:
            raise ValueError(f"{name} is larger than the cap of {cap} bytes")
        try:
            with archive.open(info) as f:
                data = f.read(cap + 1)
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise ValueError(f"{name} cannot be read from the zip ({type(e).__name__})") from None
        if len(data) > cap:
            raise ValueError(f"{name} is larger than the cap of {cap} bytes")
        out.append((name, data))
    return out
