"""A test server for Grafana Pyroscope's query API: the Connect protocol with JSON,
from the published definitions (api/querier/v1/querier.proto, api/types/v1/types.proto;
facts only: paths, field names, status codes), plus the legacy render endpoint.

- ``POST /querier.v1.QuerierService/ProfileTypes``: ``{"profileTypes": [{"ID",
  "name", "sampleType", "sampleUnit", "periodType", "periodUnit"}]}``.
- ``LabelNames`` / ``LabelValues`` (``name``, ``matchers``, ``start``, ``end``):
  ``{"names": [...]}``.
- ``Series`` (``matchers``, ``start``, ``end`` in ms): ``{"labelsSet":
  [{"labels": [{"name", "value"}]}]}``, the server's ``__`` labels included.
- ``SelectSeries`` (``profileTypeID``, ``labelSelector``, ``start``, ``end``,
  ``step`` seconds): ``{"series": [{"labels", "points": [{"value",
  "timestamp"}]}]}``; points on the grid ``start + k * step``, a point at
  ``T`` summing the profiles of ``(T - step, T]`` (Pyroscope's RangeSeries).
- ``SelectMergeProfile`` (``profileTypeID``, ``labelSelector``, ``start``,
  ``end``, ``stackTraceSelector.goPgo``): the profiles with ``start <= t <=
  end`` (milliseconds, both inclusive), merged by ``go tool pprof -proto``,
  as a ``google.v1.Profile`` in protojson (int64 as strings). ``goPgo`` keeps
  ``keepLocations`` leaf locations of each stack and, with
  ``aggregateCallees``, the leaf's function without its line.
- ``GET /pyroscope/render?query=TYPE{SEL}&from=S&until=S&format=json``: the
  same merge as a single-format flamebearer (function names only), its tree
  cut to ``max-nodes`` nodes (absent or 0: 8192; more than 1048576 or
  negative: HTTP 400), the cut nodes of a parent folded into one ``other``:
  the published server's ``querier.max-flamegraph-nodes-default`` and ``-max``
  (pkg/querier/http.go, pkg/validation, pkg/model/flamegraph.go; facts only).

Manifest: ``profiles`` (``file``, ``type``, ``labels``, ``time_ms``), and
``tenant`` (X-Scope-OrgID required, else 401), ``authorization`` (the
Authorization value required, else 401), ``legacy`` (no Connect API: 404),
``max_nodes_default`` and ``max_nodes_max`` (a server's own render limits).
"""

from __future__ import annotations

import gzip
import re
import tempfile
from pathlib import Path
from typing import Any

from support.fake_services import Answer, Request, connect_error, json_answer

QUERIER = "/querier.v1.QuerierService/"
_M = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')


def matchers(selector: str) -> list[tuple[str, str, str]]:
    inner, out, pos = selector.strip()[1:-1], [], 0
    while pos < len(inner.strip()):
        m = _M.match(inner, pos)
        if not m:
            raise ValueError(f"bad selector {selector!r}")
        out.append((m.group(1), m.group(2), m.group(3).replace('\\"', '"').replace("\\\\", "\\")))
        pos = m.end()
    return out


def matches(labels: dict[str, str], ms: list[tuple[str, str, str]]) -> bool:
    for name, op, value in ms:
        got = labels.get(name, "")
        ok = {"=": got == value, "!=": got != value}.get(op)
        if ok is None:
            ok = bool(re.fullmatch(value, got)) == (op == "=~")
        if not ok:
            return False
    return True


def all_labels(p: dict[str, Any]) -> dict[str, str]:
    name, st, su, pt, pu = p["type"].split(":")[:5]
    return {"__profile_type__": p["type"], "__name__": name, "__type__": st, "__unit__": su,
            **p["labels"]}  # fmt: skip


def load(path: str) -> Any:
    from pyproflab._proto import profile_pb2

    data = Path(path).read_bytes()
    msg = profile_pb2.Profile()
    msg.ParseFromString(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    return msg


def merged(files: list[str]) -> Any:
    """pprof's own merge of the files (one file: as it is)."""
    if len(files) == 1:
        return load(files[0])
    from support.pprof_oracle import merge_proto

    with tempfile.TemporaryDirectory() as d:
        return load(str(merge_proto(files, Path(d) / "m.pb.gz")))


def go_pgo(msg: Any, keep: int, aggregate: bool) -> Any:
    """Stacks cut to their ``keep`` leaf locations; the leaf without its line."""
    from pyproflab._proto import profile_pb2

    out = profile_pb2.Profile()
    out.CopyFrom(msg)
    del out.sample[:]
    locs = {loc.id: loc for loc in msg.location}
    leaf_ids: dict[tuple, int] = {}
    next_id = max(locs, default=0) + 1
    acc: dict[tuple, list[int]] = {}
    for s in msg.sample:
        stack = list(s.location_id[: keep or len(s.location_id)])
        if aggregate and stack:
            fns = tuple(ln.function_id for ln in locs[stack[0]].line)
            if fns not in leaf_ids:
                leaf_ids[fns] = next_id
                new = out.location.add(id=next_id, mapping_id=locs[stack[0]].mapping_id)
                for f in fns:
                    new.line.add(function_id=f, line=0)
                next_id += 1
            stack[0] = leaf_ids[fns]
        key = tuple(stack)
        if key in acc:
            acc[key] = [a + b for a, b in zip(acc[key], s.value, strict=True)]
        else:
            acc[key] = list(s.value)
    for stack, values in acc.items():
        out.sample.add(location_id=list(stack), value=values)
    return out


#: the published limits of the render (querier.max-flamegraph-nodes-default and -max)
MAX_NODES_DEFAULT, MAX_NODES_MAX = 8 << 10, 1 << 20


def max_nodes(query: dict[str, list[str]], manifest: dict[str, Any]) -> int | str:
    """The tree's node limit a render asks for (``max-nodes``, else ``maxNodes``; absent
    or 0: the server's default), or the reason it is refused (over the maximum, or
    negative while there is one)."""
    asked = 0
    for name in ("max-nodes", "maxNodes"):
        try:
            asked = int(query.get(name, ["0"])[0]) or asked
        except ValueError:
            pass
    ceiling = manifest.get("max_nodes_max", MAX_NODES_MAX)
    if asked == 0:
        return manifest.get("max_nodes_default", MAX_NODES_DEFAULT)
    if ceiling and not 0 < asked <= ceiling:
        return f"max-nodes {asked} is not allowed: the limit is {ceiling}"
    return asked


def flamebearer(msg: Any, type_id: str, limit: int = 0) -> dict[str, Any]:
    """A single-format flamebearer of the profile type's sample type (function names
    only). With ``limit`` (> 0) and a tree of more nodes, nodes whose total is
    below the ``limit``-th largest are cut: each parent's cut children become one
    child named ``other`` (self = their total), as the published server does."""
    strings = list(msg.string_table)
    _, st, su = type_id.split(":")[:3]
    kinds = [(strings[t.type], strings[t.unit]) for t in msg.sample_type]
    index = kinds.index((st, su))
    fn = {f.id: strings[f.name] for f in msg.function}
    locs = {loc.id: [fn[ln.function_id] for ln in reversed(loc.line)] for loc in msg.location}
    root: dict[str, Any] = {"name": "total", "self": 0, "total": 0, "kids": {}}
    for s in msg.sample:
        v = s.value[index]
        node = root
        node["total"] += v
        for lid in reversed(s.location_id):
            for name in locs[lid]:
                node = node["kids"].setdefault(
                    name, {"name": name, "self": 0, "total": 0, "kids": {}}
                )
                node["total"] += v
        node["self"] += v
    floor = _floor(root, limit)
    names: list[str] = []
    index: dict[str, int] = {}
    levels: list[list[int]] = []

    def walk(node: dict[str, Any], depth: int, x: int) -> None:
        while len(levels) <= depth:
            levels.append([])
        if node["name"] not in index:
            index[node["name"]] = len(names)
            names.append(node["name"])
        level = levels[depth]
        # The offset is relative to the end of the level's previous node.
        end_prev = walk_end[depth] if depth in walk_end else 0
        level += [x - end_prev, node["total"], node["self"], index[node["name"]]]
        walk_end[depth] = x + node["total"]
        kx = x
        kids = sorted(node["kids"].values(), key=lambda k: k["name"])
        cut = sum(k["total"] for k in kids if k["total"] < floor)
        kept = [k for k in kids if k["total"] >= floor]
        if cut:
            kept.append({"name": "other", "self": cut, "total": cut, "kids": {}})
        for kid in kept:
            walk(kid, depth + 1, kx)
            kx += kid["total"]

    walk_end: dict[int, int] = {}
    walk(root, 0, 0)
    return {
        "flamebearer": {"names": names, "levels": levels, "numTicks": root["total"], "maxSelf": 0},
        "metadata": {"format": "single", "units": "", "spyName": "gospy"},
    }


def _floor(root: dict[str, Any], limit: int) -> int:
    """The smallest total a node keeps under the limit (0: the tree fits)."""
    totals, todo = [], list(root["kids"].values())
    while todo:
        node = todo.pop()
        totals.append(node["total"])
        todo += node["kids"].values()
    if limit <= 0 or len(totals) <= limit:
        return 0
    return sorted(totals, reverse=True)[limit - 1]


def routes(manifest: dict[str, Any]):
    profiles = manifest["profiles"]

    def check(req: Request) -> Answer | None:
        if manifest.get("tenant") and req.headers.get("x-scope-orgid") != manifest["tenant"]:
            return connect_error(401, "unauthenticated", "no org id")
        auth = manifest.get("authorization")
        if auth and req.headers.get("authorization") != auth:
            return connect_error(401, "unauthenticated", "unauthorized")
        return None

    def select(type_id: str, selector: str, lo: int, hi: int) -> list[dict[str, Any]]:
        ms_ = matchers(selector)
        return [
            p for p in profiles
            if p["type"] == type_id and lo <= p["time_ms"] <= hi and matches(all_labels(p), ms_)
        ]  # fmt: skip

    def rpc(method: str, b: dict[str, Any]) -> Answer:
        if method == "ProfileTypes":
            types = sorted({p["type"] for p in profiles})
            return json_answer({"profileTypes": [_ptype(t) for t in types]})
        if method == "Series":
            ms_ = [m for sel in b.get("matchers") or ["{}"] for m in matchers(sel)]
            lo, hi = int(b.get("start", 0)), int(b.get("end", 2**62))
            sets = {tuple(sorted(all_labels(p).items())) for p in profiles
                    if lo <= p["time_ms"] <= hi and matches(all_labels(p), ms_)}  # fmt: skip
            return json_answer({"labelsSet": [
                {"labels": [{"name": k, "value": v} for k, v in s]} for s in sorted(sets)
            ]})  # fmt: skip
        if method in ("LabelNames", "LabelValues"):
            ms_ = [m for sel in b.get("matchers") or ["{}"] for m in matchers(sel)]
            lo, hi = int(b.get("start", 0)), int(b.get("end", 2**62))
            hits = [all_labels(p) for p in profiles
                    if lo <= p["time_ms"] <= hi and matches(all_labels(p), ms_)]  # fmt: skip
            if method == "LabelNames":
                return json_answer({"names": sorted({k for h in hits for k in h})})
            return json_answer({"names": sorted({h[b["name"]] for h in hits if b["name"] in h})})
        if method == "SelectSeries":
            return json_answer(_series(b, select))
        if method == "SelectMergeProfile":
            from google.protobuf import json_format

            hits = select(b["profileTypeID"], b.get("labelSelector") or "{}",
                          int(b["start"]), int(b["end"]))  # fmt: skip
            if not hits:
                return json_answer({})
            msg = merged([p["file"] for p in hits])
            pgo = (b.get("stackTraceSelector") or {}).get("goPgo")
            if pgo:
                msg = go_pgo(
                    msg, int(pgo.get("keepLocations") or 0), bool(pgo.get("aggregateCallees"))
                )
            return json_answer(json_format.MessageToDict(msg))
        return connect_error(404, "unimplemented", f"no method {method}")

    def render(req: Request) -> Answer:
        q = req.query
        query = q["query"][0]
        type_id, selector = query[: query.index("{")], query[query.index("{") :]
        lo, hi = int(q["from"][0]) * 1000, int(q["until"][0]) * 1000
        limit = max_nodes(q, manifest)
        if isinstance(limit, str):
            return connect_error(400, "invalid_argument", limit)
        hits = select(type_id, selector, lo, hi)
        if not hits:
            return json_answer({"flamebearer": {"names": [], "levels": [], "numTicks": 0}})
        return json_answer(flamebearer(merged([p["file"] for p in hits]), type_id, limit))

    def route(req: Request) -> Answer:
        bad = check(req)
        if bad is not None:
            return bad
        if req.path.startswith(QUERIER) and req.method == "POST":
            if manifest.get("legacy"):
                return Answer(404, b"404 page not found\n", "text/plain")
            if not req.headers.get("content-type", "").startswith("application/json"):
                return Answer(415, b"", "text/plain")
            return rpc(req.path[len(QUERIER) :], req.json())
        if req.path == "/pyroscope/render" and req.method == "GET":
            return render(req)
        return Answer(404, b"404 page not found\n", "text/plain")

    def creds(headers: dict[str, str]) -> dict[str, bool]:
        return {
            "tenant": headers.get("x-scope-orgid") == manifest.get("tenant"),
            "auth": headers.get("authorization") == manifest.get("authorization"),
        }

    return route, creds


def _ptype(type_id: str) -> dict[str, str]:
    name, st, su, pt, pu = type_id.split(":")[:5]
    return {"ID": type_id, "name": name, "sampleType": st, "sampleUnit": su,
            "periodType": pt, "periodUnit": pu}  # fmt: skip


def _series(b: dict[str, Any], select) -> dict[str, Any]:
    start, end, step = int(b["start"]), int(b["end"]), round(float(b["step"]) * 1000)
    hits = select(b["profileTypeID"], b.get("labelSelector") or "{}", start, end)
    points: dict[int, float] = {}
    for p in hits:
        t = p["time_ms"]
        grid = start + -(-(t - start) // step) * step  # the first grid point >= t
        msg = load(p["file"])
        points[grid] = points.get(grid, 0.0) + sum(s.value[-1] for s in msg.sample)
    if not points:
        return {"series": []}
    return {"series": [{"labels": [], "points": [
        {"value": v, "timestamp": str(t)} for t, v in sorted(points.items())
    ]}]}  # fmt: skip
