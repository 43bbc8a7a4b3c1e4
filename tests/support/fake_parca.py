"""A test server for Parca's query API (``parca.query.v1alpha1.QueryService``) over
the Connect protocol with JSON, from the published definition
(proto/parca/query/v1alpha1/query.proto; facts only: paths, field names).

- ``ProfileTypes``: ``{"types": [{"name", "sampleType", "sampleUnit",
  "periodType", "periodUnit", "delta"}]}``.
- ``Labels`` / ``Values`` (``match``, ``labelName``): ``{"labelNames": [...]}``
  / ``{"labelValues": [...]}``.
- ``QueryRange`` (``query`` = ``TYPE{selector}``, ``start``/``end`` RFC 3339,
  ``step`` ``"600s"``): ``{"series": [{"labelset": {"labels": [{"name",
  "value"}]}, "samples": [{"timestamp", "value"}]}]}``, a sample per step
  bucket with data, at the bucket's start.
- ``Query`` with ``mode: MODE_MERGE``, ``merge: {query, start, end}``,
  ``reportType: REPORT_TYPE_PPROF``: the profiles with ``start < t < end``
  (milliseconds, strict on both sides), merged by ``go tool pprof -proto``
  (one: the file's own bytes), gzipped, base64 in ``pprof``.
- ``authorization`` in the manifest: that Authorization value is required
  (else 401 ``unauthenticated``).

Manifest: ``profiles`` (``file``, ``type``, ``labels``, ``time_ms``).
"""

from __future__ import annotations

import base64
import gzip
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from support.fake_pyroscope import matchers, matches
from support.fake_services import Answer, Request, connect_error, json_answer

SERVICE = "/parca.query.v1alpha1.QueryService/"


def _ms(t: str) -> int:
    return round(datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() * 1000)


def _rfc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _split(query: str) -> tuple[str, list]:
    i = query.find("{")
    return (query, []) if i < 0 else (query[:i].strip(), matchers(query[i:]))


def _pprof(files: list[str]) -> bytes:
    data = Path(files[0]).read_bytes()
    if len(files) == 1:
        return data if data[:2] == b"\x1f\x8b" else gzip.compress(data)
    from support.pprof_oracle import merge_proto

    with tempfile.TemporaryDirectory() as d:
        return Path(merge_proto(files, Path(d) / "m.pb.gz")).read_bytes()


def routes(manifest: dict[str, Any]):
    profiles = manifest["profiles"]

    def select(query: str, lo: int, hi: int, strict: bool) -> list[dict[str, Any]]:
        type_id, ms_ = _split(query)
        return [
            p for p in profiles
            if p["type"] == type_id and matches(p["labels"], ms_)
            and ((lo < p["time_ms"] < hi) if strict else (lo <= p["time_ms"] <= hi))
        ]  # fmt: skip

    def rpc(method: str, b: dict[str, Any]) -> Answer:
        if method == "ProfileTypes":
            out = []
            for t in sorted({p["type"] for p in profiles}):
                parts = t.split(":")
                out.append({"name": parts[0], "sampleType": parts[1], "sampleUnit": parts[2],
                            "periodType": parts[3], "periodUnit": parts[4],
                            "delta": len(parts) > 5 and parts[5] == "delta"})  # fmt: skip
            return json_answer({"types": out})
        if method in ("Labels", "Values"):
            lo = _ms(b["start"]) if b.get("start") else 0
            hi = _ms(b["end"]) if b.get("end") else 2**62
            hits = [p["labels"] for q in b.get("match") or [] for p in select(q, lo, hi, False)]
            if method == "Labels":
                return json_answer({"labelNames": sorted({k for h in hits for k in h})})
            name = b["labelName"]
            return json_answer({"labelValues": sorted({h[name] for h in hits if name in h})})
        if method == "QueryRange":
            start, end = _ms(b["start"]), _ms(b["end"])
            step = round(float(str(b.get("step", "60s")).rstrip("s")) * 1000)
            series: dict[tuple, dict[int, int]] = {}
            for p in select(b["query"], start, end, strict=False):
                key = tuple(sorted(p["labels"].items()))
                bucket = start + (p["time_ms"] - start) // step * step
                series.setdefault(key, {})
                series[key][bucket] = series[key].get(bucket, 0) + 1
            return json_answer({"series": [
                {"labelset": {"labels": [{"name": k, "value": v} for k, v in key]},
                 "samples": [{"timestamp": _rfc(t), "value": str(n)}
                             for t, n in sorted(pts.items())]}
                for key, pts in sorted(series.items())
            ]})  # fmt: skip
        if method == "Query":
            if b.get("mode") != "MODE_MERGE" or b.get("reportType") != "REPORT_TYPE_PPROF":
                return connect_error(400, "invalid_argument", "only MODE_MERGE as pprof here")
            m = b["merge"]
            hits = select(m["query"], _ms(m["start"]), _ms(m["end"]), strict=True)
            if not hits:
                return json_answer({"total": "0"})
            data = _pprof([p["file"] for p in hits])
            return json_answer({"pprof": base64.b64encode(data).decode(), "total": "1"})
        return connect_error(404, "unimplemented", f"no method {method}")

    def route(req: Request) -> Answer:
        auth = manifest.get("authorization")
        if auth and req.headers.get("authorization") != auth:
            return connect_error(401, "unauthenticated", "unauthorized")
        if req.method == "POST" and req.path.startswith(SERVICE):
            return rpc(req.path[len(SERVICE) :], req.json())
        return Answer(404, b"404 page not found\n", "text/plain")

    def creds(headers: dict[str, str]) -> dict[str, bool]:
        return {"auth": headers.get("authorization") == manifest.get("authorization")}

    return route, creds
