"""What the pull sources (Datadog, Pyroscope, Parca) share: their limits, time
windows, and (Pyroscope, Parca) one merged profile per series and window.

- ``PullOptions``: per request, a deadline (``timeout``), a body cap
  (``max_bytes``) and retries (``retries``, with backoff and Retry-After);
  ``on_retry`` is told of each retry (the CLI prints a line).
- ``windows(since, until, step)``: the half-open windows ``[a, a + step)`` of
  ``step`` seconds, aligned to multiples of ``step`` since the Unix epoch, that
  lie wholly inside ``[since, until)``. So two runs over overlapping ranges
  ask for the same windows and a window's key names the same data. A window
  that has not ended ``settle`` seconds before now is left for a later run
  (its data may still be arriving): a pull never stores part of a window.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pyproflab.sources.api import (
    DEFAULT_MAX_BYTES,
    DEFAULT_TIMEOUT,
    Api,
    ApiError,
    OnRetry,
    env_secret,
)
from pyproflab.sources.base import (
    Expect,
    ItemMeta,
    Known,
    ProfileItem,
    Refused,
    Request,
    Seen,
    SourceError,
)
from pyproflab.sources.http import Retries

#: seconds a window must have ended before it is pulled
SETTLE = 60.0


@dataclass(frozen=True)
class PullOptions:
    """Limits of every request of a pull (see the module rules)."""

    timeout: float = DEFAULT_TIMEOUT
    max_bytes: int = DEFAULT_MAX_BYTES
    retries: Retries = field(default_factory=Retries)
    on_retry: OnRetry | None = None
    #: where credentials go instead of the URL (None: a job's ``auth_env``)
    url_advice: str | None = None

    def api(self, source: str, base_url: str, **kw) -> Api:
        """The source's client; ``kw`` (headers, a source's own ``url_advice``) win."""
        settings = {"url_advice": self.url_advice, **kw}
        return Api(
            source,
            base_url,
            timeout=self.timeout,
            max_bytes=self.max_bytes,
            retries=self.retries,
            on_retry=self.on_retry,
            **settings,
        )


def utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def ms(t: datetime) -> int:
    """Milliseconds since the Unix epoch."""
    return round(utc(t).timestamp() * 1000)


# A profile type and an optional {selector}: Parca's and Pyroscope's query.
_QUERY = re.compile(r"\s*([^{\s]+)\s*(\{.*\})?\s*$", re.S)


def split_query(query: str, source: str, type_name: str) -> tuple[str, str]:
    """(profile type id, selector) of ``TYPE{selector}``; the type id has five
    colon-separated parts (name:sample:unit:period:unit); no selector is ``{}``."""
    m = _QUERY.match(query)
    if not m or m.group(1).count(":") < 4:
        raise SourceError(source, f"query must be {type_name}{{selector}}, not {query!r}")
    return m.group(1), m.group(2) or "{}"


def check_step(step: float, source: str) -> None:
    """A window step is a positive, finite number of seconds (a job's ``step =
    "0m"`` or ``--step 0s`` is the user's mistake, one line, before any request)."""
    if not 0 < step < float("inf"):
        raise SourceError(source, f"the window step must be positive, not {step:g} s")


def windows(
    since: datetime,
    until: datetime,
    step: float,
    *,
    now: datetime | None = None,
    settle: float = SETTLE,
) -> Iterator[tuple[datetime, datetime]]:
    """The whole aligned windows inside ``[since, until)`` (see the module rules)."""
    if step <= 0:
        raise ValueError("the window step must be positive")
    step_ms = round(step * 1000)
    latest = ms(utc(now or datetime.now(UTC)) - timedelta(seconds=settle))
    a = -(-ms(since) // step_ms) * step_ms  # the first multiple at or after since
    end = min(ms(until), latest)
    while a + step_ms <= end:
        yield _at(a), _at(a + step_ms)
        a += step_ms


#: a windowed pull's key: TYPE|SERIES| (group 1), the window's ms, then key_extra
_STORED = re.compile(r"^(.*\|)(\d+)-(\d+)(\|[^|]*)?$", re.S)


def _span(a_ms: int, b_ms: int) -> str:
    a, b = _at(a_ms), _at(b_ms)
    return f"{a:%Y-%m-%dT%H:%M:%SZ}, {b:%Y-%m-%dT%H:%M:%SZ}"


def _duration(seconds: float) -> str:
    """A step as it is written: 1h, 10m, 90s."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


_DEFAULT_PORTS = {"http": 80, "https": 443}
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def server_name(url: str) -> str:
    """A pull's server URL as its source's name, one name per way of writing one
    server: without credentials, query or fragment; scheme and host in lower
    case (a DNS name without its final dot); ``localhost``, ``127.0.0.1`` and
    ``[::1]`` written ``127.0.0.1``; the scheme's default port and trailing
    slashes dropped. Names and addresses of one host (a DNS name and its IP,
    two IPs) stay apart: only the network knows they meet."""
    from pyproflab.sources.targets import redact_url

    try:
        parts = urlsplit(url.strip())
        host, port, scheme = (parts.hostname or "").rstrip("."), parts.port, parts.scheme
    except ValueError:
        return redact_url(url)
    host = "127.0.0.1" if host in _LOOPBACK else f"[{host}]" if ":" in host else host
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    return redact_url(urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", "")))


def _at(t_ms: int) -> datetime:
    return datetime.fromtimestamp(t_ms / 1000, UTC)


# --- merged profiles per (series, window): Pyroscope and Parca ---------------------------

Work = list[tuple[dict[str, str], datetime, datetime]]


class WindowedMerges:
    """A source of one merged profile per (series, window) with data (Pyroscope's
    and Parca's pulls). A subclass gives ``kind``, ``base_url``, ``auth_env``
    (its ``name`` and Authorization come from them), ``type_id``, ``step`` and
    ``*_label`` (which series labels are service, version and instance), and
    implements ``check_type()``, ``work(spans)`` (the (labels, start, end) of
    the windows that may hold data), ``merge(labels, start, end)`` (pprof bytes
    or None when the window has no samples) and ``series_text(labels)``.

    Rules: only whole windows (``windows``); a profile's key is the profile
    type, the series, the window and ``key_extra``, so a re-run asks only for
    windows not stored (or found empty: ``Seen``) before; a failed merge is
    one ``Refused`` line and the next window is fetched; the series' labels
    (not the server's own ``__`` ones) are kept as the profile's labels, its
    window as its window."""

    kind: str  # the service's name: "pyroscope", "parca"
    base_url: str
    auth_env: str | None
    type_id: str
    step: float
    service_label: str
    version_label: str
    instance_label: str
    merge_path: str = ""

    @property
    def name(self) -> str:
        """``KIND:URL``, the URL as ``server_name`` writes it (shown and stored)."""
        return f"{self.kind}:{server_name(self.base_url)}"

    def _auth(self) -> dict[str, str]:
        """The Authorization header, from ``auth_env``'s variable when a request is made."""
        if not self.auth_env:
            return {}
        return {"Authorization": env_secret(self.auth_env, "the Authorization value")}

    def check_type(self) -> None:
        raise NotImplementedError

    def work(self, spans: list[tuple[datetime, datetime]]) -> Work:
        raise NotImplementedError

    def merge(self, labels: dict[str, str], a: datetime, b: datetime) -> bytes | None:
        raise NotImplementedError

    def series_text(self, labels: dict[str, str]) -> str:
        raise NotImplementedError

    def key_extra(self) -> str:
        return ""

    def items(
        self, request: Request, known: Known
    ) -> Iterator[ProfileItem | Refused | Seen | Expect]:
        if request.since is None:
            raise SourceError(self.name, "a time range is needed (since)")
        spans = list(windows(request.since, request.until or datetime.now(UTC), self.step))
        if not spans:  # asked for nothing: a scheduled pull of this range never stored any
            raise SourceError(
                self.name,
                f"no whole {_duration(self.step)} window in the range (windows are aligned "
                "to the step and pulled a minute after they end): widen the range (--since) "
                "or shorten the step (--step)",
            )
        self.check_type()
        keyed = {
            f"{self.type_id}|{self.series_text(labels)}|{ms(a)}-{ms(b)}{self.key_extra()}": (
                labels,
                a,
                b,
            )
            for labels, a, b in self.work(spans)
        }
        done = known(list(keyed))
        todo = [k for k in keyed if k not in done]
        clash = self._overlapping(todo, keyed, known)
        self._refuse_another_pull(todo, keyed, clash)
        yield Expect(len(todo), known=len(keyed) - len(todo))
        for key in todo:
            if key in clash:
                yield Refused(self._what(*keyed[key]), self._clash_reason(*clash[key][1:]))
            else:
                yield from self._fetch(*keyed[key], key)

    def _refuse_another_pull(
        self, todo: list[str], keyed: dict[str, Any], clash: dict[str, tuple[str, int, int]]
    ) -> None:
        """One line for the whole pull (SourceError), before anything is fetched,
        when windows to fetch overlap windows another kind of pull of this server
        stored (another series text: Pyroscope's render beside its Connect API)."""
        other = [k for k in todo if k in clash and clash[k][0] != self.series_text(keyed[k][0])]
        if other:
            series, a_ms, b_ms = clash[other[0]]
            raise SourceError(self.name, (
                f"{len(other)} of the {len(todo)} windows {self.this_pull()} would fetch "
                f"overlap windows of {self.pull_of(series)} stored before (one: "
                f"[{_span(a_ms, b_ms)})): their samples would count twice in every merge; "
                "pull as before, or into another store"
            ))  # fmt: skip

    def this_pull(self) -> str:
        """This pull, as a refusal names it."""
        return f"this pull of {self.type_id}"

    def _clash_reason(self, a_ms: int, b_ms: int) -> str:
        return (
            f"overlaps the window [{_span(a_ms, b_ms)}) of this series stored before "
            "(another step or --go-pgo): its samples would count twice in every merge; "
            "pull as before, or into another store"
        )

    def _overlapping(
        self, todo: list[str], keyed: dict[str, Any], known: Known
    ) -> dict[str, tuple[str, int, int]]:
        """The windows to fetch that overlap a window this source stored before
        whose data may be the same (``may_share``: the same series under another
        step or ``key_extra``; Pyroscope: a series and a render of a selector
        matching it): key -> (the stored series text, its window in ms). A window
        equal to a stored one was skipped as known."""
        under = getattr(known, "delivered_under", None)
        stored: dict[str, list[tuple[int, int]]] = {}
        for key in under(f"{self.type_id}|") if under is not None and todo else []:
            m = _STORED.match(key)
            if m:
                series = m[1][len(self.type_id) + 1 : -1]
                stored.setdefault(series, []).append((int(m[2]), int(m[3])))
        clash: dict[str, tuple[str, int, int]] = {}
        sharing: dict[str, list[str]] = {}
        for key in todo if stored else []:
            labels, a, b = keyed[key]
            mine = self.series_text(labels)
            if mine not in sharing:
                sharing[mine] = [s for s in stored if s == mine or self.may_share(s, mine)]
            a_ms, b_ms = ms(a), ms(b)
            hit = [(s, *w) for s in sharing[mine] for w in stored[s] if w[0] < b_ms and a_ms < w[1]]
            if hit:
                clash[key] = hit[0]
        return clash

    def may_share(self, stored: str, series: str) -> bool:
        """Whether the data of two different series texts may overlap (the
        Pyroscope render's selector and a series: see there)."""
        return False

    def pull_of(self, series: str) -> str:
        """The pull a stored series text came from, as a refusal names it."""
        return f"{self.type_id}{series}"

    def _what(self, labels: dict[str, str], a: datetime, b: datetime) -> str:
        series = self.series_text(labels)
        return f"{self.name} {self.type_id}{series} [{a:%Y-%m-%dT%H:%M:%SZ}, {b:%H:%M:%SZ})"

    def _fetch(
        self, labels: dict[str, str], a: datetime, b: datetime, key: str
    ) -> Iterator[ProfileItem | Refused | Seen]:
        series = self.series_text(labels)
        what = self._what(labels, a, b)
        try:
            data = self.merge(labels, a, b)
        except ApiError as e:
            yield Refused(what, e.problem)
            return
        except ValueError as e:
            yield Refused(what, str(e))
            return
        if data is None:  # no samples in the window: remembered, not asked again
            yield Seen(key)
            return
        meta = ItemMeta(
            service=labels.get(self.service_label),
            version=labels.get(self.version_label),
            instance=labels.get(self.instance_label),
            time=a,
            window_start=a,
            window_end=b,
            labels={k: v for k, v in labels.items() if not k.startswith("__")},
            source=f"{self.name}{self.merge_path}?{self.type_id}{series}@{ms(a)}-{ms(b)}",
        )
        yield ProfileItem(meta, data=data, key=key)


def candidates(
    spans: list[tuple[datetime, datetime]], points: list[int], step: float, *, ends: bool = False
) -> list[tuple[datetime, datetime]]:
    """The windows a series may have data in, from its totals per step. ``ends``:
    a point at ``T`` sums exactly the window ending at ``T`` (Pyroscope's series
    on the windows' grid); otherwise a point may stand for the step before or
    after it, and each window it touches is a candidate."""
    if ends:
        at = set(points)
        return [(a, b) for a, b in spans if ms(b) in at]
    width = round(step * 1000)
    return [(a, b) for a, b in spans if any(ms(a) <= t < ms(b) + width for t in points)]


def exact_selector(labels: dict[str, str]) -> str:
    """A label selector matching exactly ``labels`` (sorted, values escaped)."""

    def q(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"')

    return "{" + ",".join(f'{k}="{q(v)}"' for k, v in sorted(labels.items())) + "}"


# name -> the module:class of its source; each class has ``from_options(values, options)``
PULLS = {
    "datadog": "pyproflab.sources.datadog:DatadogSource",
    "pyroscope": "pyproflab.sources.pyroscope:PyroscopeSource",
    "parca": "pyproflab.sources.parca:ParcaSource",
}


def pull_source(kind: str, values: dict, options: PullOptions) -> Any:
    """The pull source ``kind`` (a key of ``PULLS``) from option values: those of
    ``pyproflab pull KIND`` or a job's ``[[source]]`` (``step`` in seconds);
    missing values take the source's defaults."""
    import importlib

    module, cls = PULLS[kind].split(":")
    return getattr(importlib.import_module(module), cls).from_options(values, options)


def given(values: dict, *names: str) -> dict:
    """The values of ``names`` that are set (not None), for a source's constructor."""
    return {n: values[n] for n in names if values.get(n) is not None}
