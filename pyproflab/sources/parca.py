"""Parca as a source: its query API (``parca.query.v1alpha1.QueryService``), over
the Connect protocol with JSON (``POST BASE/parca.query.v1alpha1.QueryService/METHOD``;
times are RFC 3339 strings, durations ``"60s"``).

- ``ProfileTypes``: the types the server holds (``types[]``: ``name``,
  ``sampleType``, ``sampleUnit``, ``periodType``, ``periodUnit``, ``delta``),
  written ``name:sample_type:sample_unit:period_type:period_unit[:delta]``.
- ``Labels`` (``match``) and ``Values`` (``labelName``, ``match``): the label
  names of a selection and a label's values (``offer`` names the services).
- ``QueryRange`` (``query``, ``start``, ``end``, ``step``): per series
  (``labelset.labels``), its totals per step (``samples[].timestamp``,
  ``value``).
- ``Query`` with ``mode: MODE_MERGE``, ``merge: {query, start, end}`` and
  ``reportType: REPORT_TYPE_PPROF``: the merged profile as pprof bytes
  (``pprof``, base64 in JSON, gzipped).

Rules (besides those of ``pull.WindowedMerges``: one profile per series and
whole window, keyed, refusals one line each):

- ``query`` is ``PROFILE_TYPE{selector}``; the type must be one the server
  lists.
- A series has data in a window when one of its ``QueryRange`` samples (step
  = the window) lies in it or in the next window (a sample may stand for the
  step before it); a window with no samples stores nothing.
- A window ``[a, b)`` is merged with the series' exact selector over the
  open interval ``(a - 1 ms, b)``: Parca compares millisecond timestamps
  strictly on both sides.
- Labels map to metadata as Pyroscope's: ``service`` (or ``job``... as
  ``service_label``) to service, ``version`` to version, ``instance`` to
  instance; the series' labels are kept.
- ``auth_env`` names a variable holding the Authorization value (a bearer
  token for a secured Parca), sent to the server's own host only.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pyproflab.sources.base import PROFILES, Offer, Request, SourceError
from pyproflab.sources.pull import (
    PullOptions,
    WindowedMerges,
    Work,
    candidates,
    check_step,
    exact_selector,
    given,
    split_query,
    utc,
)

SERVICE = "/parca.query.v1alpha1.QueryService/"


@dataclass
class ParcaSource(WindowedMerges):
    """Merged profiles from a Parca server (see the module rules)."""

    kind = "parca"

    base_url: str
    query: str
    step: float = 3600.0
    auth_env: str | None = None
    service_label: str = "service"
    version_label: str = "version"
    instance_label: str = "instance"
    options: PullOptions = field(default_factory=PullOptions)

    def __post_init__(self) -> None:
        self.type_id, self.selector = split_query(self.query, self.name, "PROFILE_TYPE")
        check_step(self.step, self.name)
        self.api = self.options.api(
            self.name, self.base_url, headers={"Connect-Protocol-Version": "1"}
        )
        self.api.secrets = self._auth
        self.merge_path = SERVICE + "Query"

    @classmethod
    def from_options(cls, values: dict[str, Any], options: PullOptions) -> ParcaSource:
        """From ``pyproflab pull parca``'s or a job's values (``step`` in seconds)."""
        keys = ("step", "auth_env")
        return cls(values["url"], values["query"], options=options, **given(values, *keys))

    def _rpc(self, method: str, body: dict[str, Any]) -> Any:
        return self.api.json("POST", SERVICE + method, body=body)

    def profile_types(self) -> list[str]:
        doc = self._rpc("ProfileTypes", {})
        out = []
        for t in doc.get("types") or []:
            parts = [
                t.get(k, "")
                for k in ("name", "sampleType", "sampleUnit", "periodType", "periodUnit")
            ]
            out.append(":".join(parts) + (":delta" if t.get("delta") else ""))
        return out

    def offer(self, request: Request) -> Offer:
        """The server's profile types, and the services (``service_label`` values)
        of the selection over the request's range."""
        span = {k: _rfc3339(t) for k, t in (("start", request.since), ("end", request.until)) if t}
        return Offer(kinds=(PROFILES,), profile_types=tuple(self.profile_types()),
                     services=tuple(self.values(self.service_label, **span)))  # fmt: skip

    def labels(self, **span: str) -> list[str]:
        """``Labels``: the label names of the selection (``start``/``end`` RFC 3339)."""
        doc = self._rpc("Labels", {"match": [self.query.strip()], **span})
        return list(doc.get("labelNames") or [])

    def values(self, name: str, **span: str) -> list[str]:
        """``Values``: one label's values over the selection."""
        doc = self._rpc("Values", {"labelName": name, "match": [self.query.strip()], **span})
        return list(doc.get("labelValues") or [])

    def check_type(self) -> None:
        if self.type_id not in self.profile_types():
            raise SourceError(self.name, f"the server has no profile type {self.type_id}")

    def series_text(self, labels: dict[str, str]) -> str:
        return exact_selector(labels)

    def work(self, spans: list[tuple[datetime, datetime]]) -> Work:
        body = {
            "query": self.query.strip(),
            "start": _rfc3339(spans[0][0]),
            "end": _rfc3339(spans[-1][1]),
            "step": f"{self.step:g}s",
        }
        doc = self._rpc("QueryRange", body)
        out: Work = []
        for series in doc.get("series") or []:
            labels = {
                p["name"]: p["value"]
                for p in ((series.get("labelset") or {}).get("labels") or [])
                if isinstance(p, dict) and "name" in p
            }
            points = [
                _ms(s.get("timestamp"))
                for s in series.get("samples") or []
                if int(s.get("value") or 0) != 0
            ]
            out += [
                (labels, a, b)
                for a, b in candidates(spans, [p for p in points if p is not None], self.step)
            ]
        return out

    def merge(self, labels: dict[str, str], a: datetime, b: datetime) -> bytes | None:
        body = {
            "mode": "MODE_MERGE",
            "merge": {
                "query": f"{self.type_id}{exact_selector(labels)}",
                "start": _rfc3339(a - timedelta(milliseconds=1)),
                "end": _rfc3339(b),
            },
            "reportType": "REPORT_TYPE_PPROF",
        }
        doc = self._rpc("Query", body)
        if not isinstance(doc, dict):
            raise ValueError("the reply is not a JSON object")
        if not doc.get("pprof"):
            return None
        try:
            return base64.b64decode(doc["pprof"], validate=True)
        except (binascii.Error, ValueError, TypeError):
            raise ValueError("the reply's pprof is not base64") from None


def _rfc3339(t: datetime) -> str:
    return utc(t).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _ms(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return round(t.replace(tzinfo=t.tzinfo or UTC).timestamp() * 1000)
