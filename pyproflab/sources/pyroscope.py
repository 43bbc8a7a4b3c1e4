"""Grafana Pyroscope as a source: its Connect query API, JSON protocol.

Requests (``POST BASE/querier.v1.QuerierService/METHOD``, a JSON body, the
``Connect-Protocol-Version: 1`` header, and ``X-Scope-OrgID`` when a tenant is
given; times are Unix milliseconds):

- ``ProfileTypes``: the profile types the server holds (``profileTypes[].ID``);
  ``LabelNames`` and ``LabelValues`` (``name``, ``matchers``): the labels of a
  selection and their values (``offer`` names the services).
- ``Series`` (``matchers``, ``start``, ``end``): the series (label sets) of
  the selection.
- ``SelectSeries`` (``profileTypeID``, ``labelSelector``, ``start``, ``end``,
  ``step`` in seconds): a series' totals per step; a point at ``T`` sums the
  profiles of ``(T - step, T]``.
- ``SelectMergeProfile`` (``profileTypeID``, ``labelSelector``, ``start``,
  ``end``, optional ``stackTraceSelector.goPgo`` with ``keepLocations`` and
  ``aggregateCallees``): the merged profile, as a ``google.v1.Profile`` in
  JSON (the pprof message; it becomes pprof bytes here).
- ``GET BASE/pyroscope/render?query=TYPE{SELECTOR}&from=S&until=S&format=json
  &max-nodes=N`` (``legacy``, or when the server has no Connect API): the
  merged flame graph as a flamebearer, turned into pprof
  (``sources/flamebearer.py``). The server cuts the tree to ``max-nodes``
  nodes (its default, 8192, when none is sent), folding each parent's cut
  children into one node ``other``: N is ``RENDER_MAX_NODES``, and a graph
  still holding ``other`` is refused, never stored with wrong values. A 400
  to a render (a server allowing fewer nodes, or a query it rejects) stops
  the pull in one line: every window would get it.

Rules:

- ``query`` is ``PROFILE_TYPE_ID{selector}`` (``process_cpu:cpu:nanoseconds:
  cpu:nanoseconds{service_name="api"}``); the type must be one the server
  lists.
- One profile per (series, window): the request's range is cut into the
  aligned windows of ``step`` seconds (``pull.windows``: whole windows only,
  ended a minute ago). Pyroscope's series put a point at each window's end
  summing ``(start, end]``, so a window is ``(start, end]`` here too: each one
  a series has a point for is merged with the series' exact selector over
  ``[start + 1 ms, end]`` (the server's bounds are inclusive milliseconds; a
  profile stamped within the window's first millisecond, off a whole
  millisecond, falls in none). The legacy path merges the whole selector per
  window over whole seconds (it cannot list series).
- A profile's key is the profile type, the series' labels, the window and the
  goPgo settings: a re-run asks only for windows not stored before.
- Labels map to metadata: ``service_name`` (or ``service_label``) to service,
  ``version`` to version, ``instance`` (or ``instance_label``) to instance; the
  series' other labels (not the server's ``__`` ones) are kept as labels; the
  window is the profile's window.
- ``auth_env`` names a variable holding the Authorization value (a reverse
  proxy's, Grafana Cloud's), read when a request is made and sent to the
  server's own host only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pyproflab.model import nanos_of_time
from pyproflab.sources.api import ApiError
from pyproflab.sources.base import PROFILES, Offer, Request, SourceError
from pyproflab.sources.pull import (
    PullOptions,
    WindowedMerges,
    Work,
    candidates,
    check_step,
    exact_selector,
    given,
    ms,
    split_query,
)

QUERIER = "/querier.v1.QuerierService/"
RENDER = "/pyroscope/render"
#: the render's ``max-nodes``: without it the server cuts the tree to its
#: querier.max-flamegraph-nodes-default (8192 nodes); this is its published
#: querier.max-flamegraph-nodes-max, the most a default server gives
RENDER_MAX_NODES = 1 << 20
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')


@dataclass
class PyroscopeSource(WindowedMerges):
    """Merged profiles from a Pyroscope server (see the module rules)."""

    kind = "pyroscope"

    base_url: str
    query: str
    step: float = 3600.0
    tenant: str | None = None
    auth_env: str | None = None
    go_pgo: int | None = None
    legacy: bool | None = None
    service_label: str = "service_name"
    version_label: str = "version"
    instance_label: str = "instance"
    options: PullOptions = field(default_factory=PullOptions)

    def __post_init__(self) -> None:
        self.type_id, self.selector = split_query(self.query, self.name, "PROFILE_TYPE_ID")
        check_step(self.step, self.name)
        if self.go_pgo is not None and not 1 <= self.go_pgo <= 1000:  # a job's range too
            raise SourceError(self.name, f"go_pgo must be from 1 to 1000, not {self.go_pgo}")
        self.matchers = _matchers(self.selector, self.name)
        headers = {"Connect-Protocol-Version": "1"}
        if self.tenant:
            headers["X-Scope-OrgID"] = self.tenant
        self.api = self.options.api(self.name, self.base_url, headers=headers)
        self.api.secrets = self._auth

    @classmethod
    def from_options(cls, values: dict[str, Any], options: PullOptions) -> PyroscopeSource:
        """From ``pyproflab pull pyroscope``'s or a job's values (``step`` in seconds)."""
        keys = ("step", "tenant", "auth_env", "go_pgo")
        legacy = True if values.get("legacy") else None
        return cls(
            values["url"], values["query"], legacy=legacy, options=options, **given(values, *keys)
        )

    def _rpc(self, method: str, body: dict[str, Any]) -> Any:
        return self.api.json("POST", QUERIER + method, body=body)

    def offer(self, request: Request) -> Offer:
        """The server's profile types, and the services (``service_label`` values)
        of the selection over the request's range."""
        span = _span(request)
        services = self.label_values(self.service_label, **span)
        return Offer(kinds=(PROFILES,), profile_types=tuple(self.profile_types()),
                     services=tuple(services))  # fmt: skip

    def label_names(self, **span: int) -> list[str]:
        """``LabelNames`` of the selection (``start``/``end`` in ms, optional)."""
        body = {"matchers": [_with_type(self.selector, self.type_id)], **span}
        return list(self._rpc("LabelNames", body).get("names") or [])

    def label_values(self, name: str, **span: int) -> list[str]:
        """``LabelValues`` of one label over the selection."""
        body = {"name": name, "matchers": [_with_type(self.selector, self.type_id)], **span}
        return list(self._rpc("LabelValues", body).get("names") or [])

    def profile_types(self) -> list[str]:
        doc = self._rpc("ProfileTypes", {})
        return [t.get("ID", "") for t in (doc.get("profileTypes") or []) if isinstance(t, dict)]

    def check_type(self) -> None:
        """The server lists the query's profile type; an older server without the
        Connect API (HTTP 404) is asked through the legacy render instead."""
        if self.legacy:
            return
        try:
            types = self.profile_types()
        except ApiError as e:
            if e.status != 404 or self.legacy is False:
                raise
            self.legacy = True
            return
        self.legacy = False
        if self.type_id not in types:
            raise SourceError(self.name, f"the server has no profile type {self.type_id}")

    @property
    def merge_path(self) -> str:  # type: ignore[override]
        return RENDER if self.legacy else QUERIER + "SelectMergeProfile"

    def key_extra(self) -> str:
        return f"|gopgo={self.go_pgo}" if self.go_pgo else ""

    def series_text(self, labels: dict[str, str]) -> str:
        return f"render{self.selector}" if self.legacy else exact_selector(labels)

    def may_share(self, stored: str, series: str) -> bool:
        """A render of a selector (``render{...}``) and a series (``{...}``, exact
        labels) share data when the series' labels match the selector; two
        selectors do unless one asks a label for a value the other excludes
        (a server's ``__`` labels, a bad regex and an unparsable text are taken
        to match: a pull wrongly refused says so, a sample counted twice does not)."""
        try:
            a, b = _parsed(stored, self.name), _parsed(series, self.name)
        except SourceError:  # a label name the selector syntax cannot hold: assume so
            return True
        if not (a[0] or b[0]):
            return False  # two different series
        if a[0] and b[0]:
            return _compatible(a[1], b[1]) and _compatible(b[1], a[1])
        labels, sel = (a[1], b[1]) if b[0] else (b[1], a[1])
        return _satisfied({k: v for k, (_, v) in labels.items()}, sel)

    def this_pull(self) -> str:
        api = f"legacy {RENDER}" if self.legacy else "Connect (querier.v1)"
        return f"this {api} pull of {self.type_id}{self.selector}"

    def pull_of(self, series: str) -> str:
        if series.startswith("render"):
            return f"the legacy {RENDER} pull of {self.type_id}{series[len('render') :]}"
        return f"the Connect (querier.v1) pull of series {self.type_id}{series}"

    def work(self, spans: list[tuple[datetime, datetime]]) -> Work:
        """(series labels, window start, end) of every window a series may have
        data in; the legacy render cannot list series: every window of the selector."""
        if self.legacy:
            labels = {k: v for k, (op, v) in self.matchers.items() if op == "="}
            return [(labels, a, b) for a, b in spans]
        start, end = spans[0][0], spans[-1][1]
        matchers = [_with_type(self.selector, self.type_id)]
        doc = self._rpc("Series", {"matchers": matchers, "start": ms(start), "end": ms(end)})
        out: Work = []
        for entry in doc.get("labelsSet") or []:
            labels = {p["name"]: p["value"] for p in entry.get("labels") or []}
            user = {k: v for k, v in labels.items() if not k.startswith("__")}
            points = self._points(user, start, end)
            out += [(user, a, b) for a, b in candidates(spans, points, self.step, ends=True)]
        return out

    def _points(self, labels: dict[str, str], start: datetime, end: datetime) -> list[int]:
        body = {
            "profileTypeID": self.type_id,
            "labelSelector": exact_selector(labels),
            "start": ms(start),
            "end": ms(end),
            "step": self.step,
        }
        doc = self._rpc("SelectSeries", body)
        return [
            int(p.get("timestamp", 0))
            for s in doc.get("series") or []
            for p in s.get("points") or []
            if float(p.get("value") or 0) != 0
        ]

    def merge(self, labels: dict[str, str], a: datetime, b: datetime) -> bytes | None:
        return self._render(a, b) if self.legacy else self._merge(labels, a, b)

    def _merge(self, labels: dict[str, str], a: datetime, b: datetime) -> bytes | None:
        from google.protobuf import json_format

        from pyproflab._proto import profile_pb2

        body: dict[str, Any] = {
            "profileTypeID": self.type_id,
            "labelSelector": exact_selector(labels),
            "start": ms(a) + 1,
            "end": ms(b),
        }
        if self.go_pgo:
            body["stackTraceSelector"] = {
                "goPgo": {"keepLocations": self.go_pgo, "aggregateCallees": True}
            }
        doc = self._rpc("SelectMergeProfile", body)
        if not isinstance(doc, dict):
            raise ValueError("the merged profile is not a JSON object")
        if not doc.get("sample"):
            return None
        try:
            message = json_format.ParseDict(doc, profile_pb2.Profile(), ignore_unknown_fields=True)
        except json_format.ParseError as e:
            raise ValueError(f"the merged profile is not a pprof message ({e})") from None
        return message.SerializeToString(deterministic=True)

    def _render(self, a: datetime, b: datetime) -> bytes | None:
        from pyproflab.sources.flamebearer import to_pprof

        params = {
            "query": f"{self.type_id}{self.selector}",
            "from": str(int(a.timestamp())),
            "until": str(int(b.timestamp()) - 1),  # whole seconds, both ends inclusive
            "format": "json",
            "max-nodes": str(RENDER_MAX_NODES),
        }
        try:
            doc = self.api.json("GET", RENDER, params=params)
        except ApiError as e:  # not this window's: the server refuses every render so
            if e.status != 400:
                raise
            raise SourceError(self.name, (
                f"{e.problem}: the server refuses the render with max-nodes={RENDER_MAX_NODES} "
                "(its querier.max-flamegraph-nodes-max may be lower) or the query"
            )) from None  # fmt: skip
        fb = doc.get("flamebearer") if isinstance(doc, dict) else None
        if not fb or not fb.get("numTicks"):
            return None
        if "other" in (fb.get("names") or []):
            raise ValueError(
                "the server cut the flame graph to its node limit (node 'other' holds the "
                "cut stacks), so its functions' values would be wrong: pull through the "
                "Connect API, or raise the server's querier.max-flamegraph-nodes-max"
            )
        parts = self.type_id.split(":")
        return to_pprof(
            doc,
            sample_type=(parts[1], parts[2]),
            period_type=(parts[3], parts[4]),
            time_nanos=nanos_of_time(a),
            duration_nanos=int((b - a) / timedelta(microseconds=1)) * 1000,
        )


def _span(request: Request) -> dict[str, int]:
    """The request's range as ``start``/``end`` milliseconds (those it has)."""
    out = {}
    if request.since is not None:
        out["start"] = ms(request.since)
    if request.until is not None:
        out["end"] = ms(request.until)
    return out


def _matchers(selector: str, source: str) -> dict[str, tuple[str, str]]:
    """``{a="x", b=~"y"}`` as name -> (operator, value); SourceError if malformed."""
    inner = selector.strip()[1:-1]
    out: dict[str, tuple[str, str]] = {}
    pos = 0
    while pos < len(inner.strip()):
        m = _MATCHER.match(inner, pos)
        if not m:
            raise SourceError(source, f"bad label selector {selector!r}")
        out[m.group(1)] = (m.group(2), m.group(3))
        pos = m.end()
    return out


Matchers = dict[str, tuple[str, str]]


def _parsed(series: str, source: str) -> tuple[bool, Matchers]:
    """(whether a render's selector, its matchers, values unescaped) of a series text."""
    render = series.startswith("render")
    ms_ = _matchers(series[len("render") :] if render else series, source)
    return render, {k: (op, re.sub(r"\\(.)", r"\1", v)) for k, (op, v) in ms_.items()}


def _holds(op: str, want: str, got: str) -> bool:
    if op in ("=", "!="):
        return (got == want) == (op == "=")
    try:
        return bool(re.fullmatch(want, got)) == (op == "=~")
    except re.error:
        return True


def _satisfied(labels: dict[str, str], sel: Matchers) -> bool:
    """Whether exact ``labels`` match a selector (a missing label is "")."""
    return all(k.startswith("__") or _holds(op, v, labels.get(k, "")) for k, (op, v) in sel.items())


def _compatible(a: Matchers, b: Matchers) -> bool:
    """False when a label ``a`` asks to equal a value is one ``b`` excludes."""
    fixed = {k: v for k, (op, v) in a.items() if op == "="}
    return _satisfied(fixed, {k: m for k, m in b.items() if k in fixed})


def _with_type(selector: str, type_id: str) -> str:
    inner = selector.strip()[1:-1].strip().rstrip(",")
    typed = f'__profile_type__="{type_id}"'
    return "{" + (f"{inner},{typed}" if inner else typed) + "}"
