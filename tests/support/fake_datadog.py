"""A test server for Datadog's profiling API, as datadog-pgo's client uses it.

- ``POST /api/unstable/profiles/list``: the body's ``filter`` (``from``/``to``
  as ISO times, ``query`` as ``key:value`` terms, all of which a profile's
  tags must have), ``sort`` (``@metrics.core_cpu_cores`` or ``timestamp``,
  ``desc``) and ``limit``; ``page.cursor`` continues a listing. Answers
  ``{"data": [{"id": EVENT, "type": "profile", "attributes": {"id": PROFILE,
  "service", "timestamp", "duration_nanos", "tags", "custom": {"metrics":
  {"core_cpu_cores"}}}}], "meta": {"page": {"after": CURSOR}}}``, at most
  ``page_size`` entries a page (the manifest's), ``after`` present while more.
- ``GET /api/ui/profiling/profiles/{profile}/download?eventId=EVENT``: a zip of
  the event's files (its ``files``: name -> pprof path) and ``metrics.json``.
- Both need the manifest's ``api_key`` and ``app_key`` in ``DD-API-KEY`` and
  ``DD-APPLICATION-KEY``, else 403 (Datadog's answer to a bad key).

Manifest entries: ``event``, ``profile``, ``time_ms``, ``duration_nanos``,
``tags`` (a list of ``key:value``), ``cpu_cores``, ``files``.
"""

from __future__ import annotations

import io
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from support.fake_services import Answer, Request, json_answer

LIST = "/api/unstable/profiles/list"
DOWNLOAD = "/api/ui/profiling/profiles/"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(t: str) -> int:
    return round(datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() * 1000)


def routes(manifest: dict[str, Any]):
    profiles = manifest["profiles"]
    page_size = int(manifest.get("page_size", 100))

    def authorized(req: Request) -> bool:
        h = req.headers
        return (
            h.get("dd-api-key") == manifest["api_key"]
            and h.get("dd-application-key") == manifest["app_key"]
        )

    def listing(req: Request) -> Answer:
        body = req.json()
        f = body.get("filter") or {}
        lo, hi = _parse(f["from"]), _parse(f["to"])
        terms = [t for t in str(f.get("query", "")).split() if ":" in t]
        hits = [
            p for p in profiles if lo <= p["time_ms"] <= hi and all(t in p["tags"] for t in terms)
        ]
        field = (body.get("sort") or {}).get("field", "timestamp")
        by = "cpu_cores" if field == "@metrics.core_cpu_cores" else "time_ms"
        hits.sort(key=lambda p: p[by], reverse=True)
        limit = int(body.get("limit") or page_size)
        start = int(((body.get("page") or {}).get("cursor") or "o=0").split("=")[1])
        page = hits[start : start + min(limit, page_size)]
        doc: dict[str, Any] = {"data": [_entry(p) for p in page], "meta": {}}
        if start + len(page) < len(hits):
            doc["meta"] = {"page": {"after": f"o={start + len(page)}"}}
        return json_answer(doc)

    def download(req: Request) -> Answer:
        profile = req.path[len(DOWNLOAD) :].split("/")[0]
        event = (req.query.get("eventId") or [""])[0]
        match = [p for p in profiles if p["profile"] == profile and p["event"] == event]
        if not match:
            return json_answer({"errors": ["not found"]}, 404)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for name, path in sorted(match[0]["files"].items()):
                z.writestr(name, Path(path).read_bytes())
            z.writestr("metrics.json", '{"core_cpu_cores": 1}')
        return Answer(200, buf.getvalue(), "application/zip")

    def route(req: Request) -> Answer:
        if not authorized(req):
            return json_answer({"errors": ["Forbidden"]}, 403)
        if req.method == "POST" and req.path == LIST:
            return listing(req)
        if req.method == "GET" and req.path.startswith(DOWNLOAD) and req.path.endswith("/download"):
            return download(req)
        return json_answer({"errors": ["not found"]}, 404)

    def creds(headers: dict[str, str]) -> dict[str, bool]:
        return {
            "api_key": headers.get("dd-api-key") == manifest["api_key"],
            "app_key": headers.get("dd-application-key") == manifest["app_key"],
        }

    return route, creds


def _entry(p: dict[str, Any]) -> dict[str, Any]:
    tags = dict(t.split(":", 1) for t in p["tags"])
    return {
        "id": p["event"],
        "type": "profile",
        "attributes": {
            "id": p["profile"],
            "service": tags.get("service"),
            "timestamp": _iso(p["time_ms"]),
            "duration_nanos": p.get("duration_nanos", 60_000_000_000),
            "tags": p["tags"],
            "custom": {"metrics": {"core_cpu_cores": p["cpu_cores"]}},
        },
    }
