"""Collect profiles and /metrics from live Go services (``net/http/pprof``).

One collection is one window of ``seconds`` starting when ``collect`` starts.

What is fetched, per target and profile type (Go's ``net/http/pprof``):

- windowed, taken over the window with ``?seconds=N``: ``cpu``
  (``/debug/pprof/profile``), and the delta profiles ``allocs`` (allocations
  made during the window), ``mutex`` and ``block`` (contention during it);
- snapshots, fetched when the window ends: ``heap`` (in-use memory as of the
  last GC) and ``goroutine``. Go would also serve deltas of these, but a
  delta of in-use bytes or of live goroutines answers no question ours ask.
- on request only (a target's ``types`` or ``--types``): ``trace``, an
  execution trace over the window (``/debug/pprof/trace?seconds=N``), with the
  same deadline and size cap; a body without a trace header is refused, a
  good one is archived as ``<h>.trace`` (its sha256) and stored with its
  tables and blocking profiles (``store.traces``).

Rules:

- Requests run concurrently on at most ``concurrency`` threads
  (``sources/http.py``: httpx, no proxies). Each request has ``timeout``
  seconds, plus ``seconds`` for a windowed one, for everything: connecting,
  redirects (same host only unless the target allows others) and the whole
  body; a body shorter than its Content-Length or larger than ``MAX_BODY`` is
  an error, never stored.
- Transient faults (connection refused or reset, timeout, HTTP 408/429/5xx)
  are retried up to ``retries`` times with exponential backoff and jitter;
  anything else (HTTP 401/403/404, a body that is not pprof) fails at once.
- The Authorization value is read from the target's ``auth_env`` variable at
  request time, sent only to the target's own URL (never on a redirect; a 401
  after a redirect says so instead of blaming the token) and
  written nowhere: not to the store, the archive, errors or reports.
- A body is decoded before anything is kept; one that is not a valid pprof
  is refused with the decoder's one-line reason. A good body is archived at
  ``archive/<h[:2]>/<h>.pb.gz`` where ``h`` is the sha256 of its decompressed
  protobuf (the store's ``content_hash``), written atomically and never
  rewritten, then ingested with service/version/instance from the target,
  the type of its endpoint, ``window_start``/``window_end`` = the interval of
  the request that produced it, and ``source`` = its URL without credentials.
  Ingesting a profile already in the store is a no-op (``present``).
- Every ``metrics_interval`` seconds during the window (both ends included),
  each target's ``/metrics`` is scraped; samples without their own timestamp
  get the scrape time (UTC). A scrape is not retried (the next tick is the
  retry) and is skipped while the target's previous one is still running.
- Every failure is one line naming the target and what failed; one target's
  failures never stop the others. All store writes happen on the calling
  thread, in arrival order, one transaction per profile.

Longer than 500 lines: the rules above are about how one window's scheduler
(``_Window``), the pool's fetches and scrapes, the archive and the store writes
interleave (which thread does what, in which order), and the code of each sits
beside the others. The report types (``FetchResult`` to ``CollectReport``,
about 130 lines) and the archive (about 30) are the seams a split would cut
along; the HTTP client is already ``sources/http``.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyproflab.errors import MetricsError, ProfileError, ProflabError
from pyproflab.newfiles import create_temp_file
from pyproflab.sources.http import FetchError, http_get
from pyproflab.sources.http import shown as _shown
from pyproflab.sources.targets import COLLECT_TYPES, KNOWN_TYPES, Target, redact_url

if TYPE_CHECKING:
    import pyarrow as pa

    from pyproflab.model import Profile
    from pyproflab.store.connection import Store

# type -> (endpoint under /debug/pprof/, windowed with ?seconds=N)
ENDPOINTS: dict[str, tuple[str, bool]] = {
    "cpu": ("profile", True),
    "heap": ("heap", False),
    "allocs": ("allocs", True),
    "goroutine": ("goroutine", False),
    "mutex": ("mutex", True),
    "block": ("block", True),
    "trace": ("trace", True),
}
assert tuple(ENDPOINTS) == KNOWN_TYPES

DEFAULT_SECONDS = 10
DEFAULT_METRICS_INTERVAL = 2.0
DEFAULT_TIMEOUT = 10.0
DEFAULT_RETRIES = 2
DEFAULT_CONCURRENCY = 16
DEFAULT_BACKOFF = 0.5
BACKOFF_CAP = 8.0

Progress = Callable[[int, int], None]


# --- results ------------------------------------------------------------------------


@dataclass
class FetchResult:
    """One (target, profile type) fetch. ``status``: new, present or failed."""

    target: str
    profile_type: str
    url: str  # without credentials, with the query
    status: str = "failed"
    error: str | None = None
    attempts: int = 0
    window_start: datetime | None = None
    window_end: datetime | None = None
    content_hash: str | None = None
    profile_id: int | None = None
    archive_path: str | None = None
    size: int = 0

    @property
    def ok(self) -> bool:
        return self.status != "failed"

    def line(self) -> str:
        """The one-line report of a failure: ``api/v1/i-1 cpu: HTTP 500 from URL``."""
        return f"{self.target} {self.profile_type}: {self.error}"


@dataclass
class ScrapeStats:
    """The /metrics scrapes of one target: counts and the first error, per kind."""

    url: str
    ok: int = 0
    failed: int = 0
    samples: int = 0
    skipped: int = 0  # ticks skipped while the previous scrape was still out
    errors: list[str] = field(default_factory=list)  # distinct messages, first seen first

    def line(self, target: str) -> str | None:
        if not self.failed:
            return None
        n = self.ok + self.failed
        first = self.errors[0] if self.errors else "failed"
        more = f" (and {len(self.errors) - 1} other errors)" if len(self.errors) > 1 else ""
        skipped = f"; {self.skipped} ticks skipped while one was out" if self.skipped else ""
        return f"{target} metrics: {self.failed} of {n} scrapes failed: {first}{more}{skipped}"


@dataclass
class TargetReport:
    """What happened for one target."""

    target: Target
    fetches: list[FetchResult] = field(default_factory=list)
    scrapes: ScrapeStats | None = None
    error: str | None = None  # a target-level failure (e.g. auth_env not set)

    def errors(self) -> list[str]:
        out = [f"{self.target.name}: {self.error}"] if self.error else []
        out += [f.line() for f in self.fetches if not f.ok]
        if self.scrapes is not None and (line := self.scrapes.line(self.target.name)):
            out.append(line)
        return out


@dataclass
class CollectReport:
    """The outcome of one ``collect``: per-target results and the window."""

    window_start: datetime
    window_end: datetime | None = None
    targets: list[TargetReport] = field(default_factory=list)

    @property
    def fetches(self) -> list[FetchResult]:
        return [f for t in self.targets for f in t.fetches]

    @property
    def new(self) -> int:
        return sum(f.status == "new" for f in self.fetches)

    @property
    def present(self) -> int:
        return sum(f.status == "present" for f in self.fetches)

    @property
    def failed(self) -> int:
        return sum(not f.ok for f in self.fetches)

    @property
    def metric_samples(self) -> int:
        return sum(t.scrapes.samples for t in self.targets if t.scrapes)

    @property
    def scrapes_failed(self) -> int:
        return sum(t.scrapes.failed for t in self.targets if t.scrapes)

    def errors(self) -> list[str]:
        """One line per failed (target, profile type), per failing scraper and per
        target-level problem, in target order."""
        return [line for t in self.targets for line in t.errors()]

    @property
    def exit_code(self) -> int:
        """0 when everything was collected, 1 when anything failed."""
        return 1 if self.errors() else 0

    def summary(self) -> str:
        took = ((self.window_end or self.window_start) - self.window_start).total_seconds()
        text = (
            f"collected {self.new + self.present} profiles ({self.new} new, "
            f"{self.present} already present) and {self.metric_samples} metric samples "
            f"from {len(self.targets)} targets in {took:.1f} s"
        )
        skipped = sum(1 for t in self.targets if t.error)
        problems = [
            f"{n} {what}"
            for n, what in (
                (self.failed, "fetches failed"),
                (self.scrapes_failed, "scrapes failed"),
                (skipped, "targets skipped"),
            )
            if n
        ]
        return text + ("; " + ", ".join(problems) if problems else "")


# --- HTTP -----------------------------------------------------------------------------


def backoff_delay(attempt: int, base: float) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...): exponential, capped,
    with "equal jitter" so that many collectors retrying at once spread out."""
    d = min(BACKOFF_CAP, base * 2 ** (attempt - 1))
    return d / 2 + random.uniform(0, d / 2)


# --- the archive --------------------------------------------------------------------


def archive_path(archive_dir: str | os.PathLike, content_hash: str, *, trace: bool = False) -> Path:
    """Where the archive keeps the profile (or, ``trace``, the execution trace:
    ``.trace``, its sha256) whose content_hash is ``content_hash``."""
    suffix = ".trace" if trace else ".pb.gz"
    return Path(archive_dir) / content_hash[:2] / f"{content_hash}{suffix}"


def archive_body(
    archive_dir: str | os.PathLike, content_hash: str, gz: bytes, *, trace: bool = False
) -> Path:
    """Write gzipped profile bytes (or a trace's, ``trace``) at their content
    address, atomically; a file already there is left alone (same address, same content)."""
    path = archive_path(archive_dir, content_hash, trace=trace)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_temp_file(path.parent, ".tmp-", ".pb.gz")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(gz)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


# --- work done on the pool threads --------------------------------------------------


@dataclass
class _Fetched:
    """A decoded body, ready for the archive and the store (built on a pool thread)."""

    result: FetchResult
    target: Target
    profile: Profile | None = None
    gz: bytes | None = None


def _profile_url(target: Target, profile_type: str, seconds: int) -> str:
    endpoint, windowed = ENDPOINTS[profile_type]
    query = f"?seconds={seconds}" if windowed else ""
    return f"{target.url}/debug/pprof/{endpoint}{query}"


def _fetch_profile(
    target: Target,
    profile_type: str,
    *,
    seconds: int,
    timeout: float,
    retries: int,
    backoff: float,
    stop: threading.Event,
) -> _Fetched:
    from pyproflab.decode import decode_bytes, decompress

    url = _profile_url(target, profile_type, seconds)
    result = FetchResult(target.name, profile_type, redact_url(url))
    windowed = ENDPOINTS[profile_type][1]
    # A windowed request answers only after `seconds`: give it that on top.
    sock_timeout = timeout + (seconds if windowed else 0)
    for attempt in range(1, retries + 2):
        result.attempts = attempt
        try:
            auth = target.authorization()
        except LookupError as e:
            result.error = str(e)
            return _Fetched(result, target)
        start = datetime.now(UTC)
        try:
            body = http_get(
                url,
                authorization=auth,
                timeout=sock_timeout,
                deadline=time.monotonic() + sock_timeout,
                other_hosts=target.allow_redirects_to_other_hosts,
            )
        except FetchError as e:
            result.error = str(e)
            if e.transient and attempt <= retries and not stop.is_set():
                if stop.wait(backoff_delay(attempt, backoff)):
                    break
                continue
            if attempt > 1:
                result.error += f" (after {attempt} attempts)"
            elif e.status in (401, 403) and not e.redirected:
                # Name the variable, never its value.
                result.error += (
                    f" (check the value of ${target.auth_env})"
                    if target.auth_env
                    else " (the target has no auth_env)"
                )
            return _Fetched(result, target)
        end = datetime.now(UTC)
        result.window_start, result.window_end, result.size = start, end, len(body)
        if profile_type == "trace":
            return _trace_body(result, target, body, url)
        try:
            raw = decompress(body, source=result.url)
            profile = decode_bytes(raw, source=result.url)
        except ProfileError as e:
            result.error = f"{e.problem} from {_shown(url)}"
            return _Fetched(result, target)
        result.content_hash = hashlib.sha256(raw).hexdigest()
        # The archive holds gzip (.pb.gz): Go's bytes as sent, else gzipped here.
        gz = body if body[:2] == b"\x1f\x8b" else gzip.compress(raw, mtime=0)
        result.error = None
        return _Fetched(result, target, profile, gz)
    result.error = (result.error or "stopped") + " (interrupted)"
    return _Fetched(result, target)


def _trace_body(result: FetchResult, target: Target, body: bytes, url: str) -> _Fetched:
    """A fetched execution trace: kept as sent when its header says it is one."""
    from pyproflab.decode.gotrace import trace_version

    if trace_version(body[:16]) is None:
        result.error = f"not a Go execution trace from {_shown(url)}"
        return _Fetched(result, target)
    result.content_hash = hashlib.sha256(body).hexdigest()
    result.error = None
    return _Fetched(result, target, None, body)


@dataclass
class _Scraped:
    target: Target
    url: str
    when: datetime
    table: pa.Table | None = None
    error: str | None = None


def _scrape(target: Target, *, timeout: float) -> _Scraped:
    from pyproflab.sources.prometheus import parse_exposition

    url = f"{target.url}/metrics"
    shown = redact_url(url)
    when = datetime.now(UTC)
    try:
        auth = target.authorization()
        body = http_get(
            url,
            authorization=auth,
            timeout=timeout,
            deadline=time.monotonic() + timeout,
            other_hosts=target.allow_redirects_to_other_hosts,
        )
    except LookupError as e:
        return _Scraped(target, shown, when, error=str(e))
    except FetchError as e:
        return _Scraped(target, shown, when, error=str(e))
    try:
        text = body.decode("utf-8")
        table = parse_exposition(text, default_time=when, source=shown)
    except MetricsError as e:
        at = f"line {e.line}: " if e.line is not None else ""
        return _Scraped(
            target, shown, when, error=f"not a Prometheus exposition from {shown} ({at}{e.problem})"
        )
    except (UnicodeDecodeError, ValueError) as e:
        return _Scraped(
            target,
            shown,
            when,
            error=f"not a Prometheus exposition from {shown} ({type(e).__name__})",
        )
    return _Scraped(target, shown, when, table=table)


class _Pool:
    """A fixed set of daemon threads running submitted calls.

    Daemon threads, unlike ThreadPoolExecutor's, do not keep the process alive
    after Ctrl-C while a 30-second CPU profile request is still open.
    """

    def __init__(self, size: int, name: str):
        self._size = max(1, size)
        self._name = name
        self._q: queue.SimpleQueue[tuple[Future, Callable[..., Any], tuple] | None] = (
            queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        fut: Future = Future()
        self._q.put((fut, fn, args))
        if len(self._threads) < self._size:
            t = threading.Thread(
                target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
            )
            t.start()
            self._threads.append(t)
        return fut

    def _work(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            fut, fn, args = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as e:  # handed to the caller through the future
                fut.set_exception(e)

    def shutdown(self) -> None:
        """Cancel what has not started and let the threads end when idle."""
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in self._threads:
            self._q.put(None)


# --- the collection -----------------------------------------------------------------


def _store_profile(store: Store, fetched: _Fetched, archive_dir: Path) -> None:
    """Archive and ingest one good body (on the calling thread: the store is not
    shared across threads)."""
    from pyproflab.store import queries
    from pyproflab.store.ingest import ProfileMeta, ingest

    r, t = fetched.result, fetched.target
    assert fetched.gz is not None and r.content_hash
    try:
        r.archive_path = str(
            archive_body(archive_dir, r.content_hash, fetched.gz, trace=fetched.profile is None)
        )
    except OSError as e:
        r.status, r.error = "failed", f"cannot write the archive: {e.strerror or e}"
        return
    meta = ProfileMeta(
        service=t.service,
        version=t.version,
        instance=t.instance,
        source=r.url,
        window_start=r.window_start,
        window_end=r.window_end,
        profile_type=r.profile_type,
    )
    try:
        if fetched.profile is None:  # an execution trace: its tables and blocking profiles
            rep = _store_trace(store, r.archive_path, meta)
        else:
            rep = ingest(store, [(fetched.profile, meta)], content_hashes=[r.content_hash])
    except ProflabError as e:
        r.status, r.error = "failed", f"the store refused it: {e}"
        return
    if rep.new:
        r.status, r.profile_id = "new", rep.profile_ids[0]
    elif fetched.profile is None:
        r.status = "present"
    else:
        r.status = "present"
        r.profile_id = queries.profile_id_of(store, r.content_hash)


def _store_trace(store: Store, path: str, meta: Any):
    """Store a collected trace (``store.traces``); its first blocking profile's id
    stands for it in the fetch result."""
    from pyproflab.errors import TraceError
    from pyproflab.store.ingest_report import IngestReport
    from pyproflab.store.traces import ingest_trace

    meta.profile_type = None
    try:
        done = ingest_trace(store, path, meta)
    except TraceError as e:
        raise TraceError(meta.source or path, e.problem) from None
    return IngestReport(new=0 if done.present else 1, profile_ids=done.profile_ids[:1])


def _store_scrape(store: Store, s: _Scraped, stats: ScrapeStats) -> None:
    from pyproflab.store.metrics import ingest_metric_samples

    def fail(message: str) -> None:
        stats.failed += 1
        if message not in stats.errors:
            stats.errors.append(message)

    if s.error is not None or s.table is None:
        fail(s.error or "no samples")
        return
    t = s.target
    try:
        stats.samples += int(
            ingest_metric_samples(
                store,
                s.table,
                service=t.service,
                version=t.version,
                instance=t.instance,
                source=s.url,
            )
        )
    except ProflabError as e:
        fail(f"the store refused samples from {s.url}: {e}")
        return
    stats.ok += 1


def collect(
    store: Store,
    targets: Sequence[Target],
    *,
    seconds: int = DEFAULT_SECONDS,
    types: Sequence[str] = COLLECT_TYPES,
    archive_dir: str | os.PathLike,
    metrics_interval: float | None = DEFAULT_METRICS_INTERVAL,
    timeout: float = DEFAULT_TIMEOUT,
    retries: int = DEFAULT_RETRIES,
    concurrency: int = DEFAULT_CONCURRENCY,
    backoff: float = DEFAULT_BACKOFF,
    progress: Progress | None = None,
) -> CollectReport:
    """Collect one window from every target into ``store`` and ``archive_dir``.

    ``types`` applies to targets without their own ``types``. A
    ``metrics_interval`` of ``None`` or ``0`` turns scraping off. Failures are
    in the report, never raised; only bad arguments raise ``ValueError``.
    """
    if int(seconds) != seconds or seconds < 1:
        raise ValueError("seconds must be a whole number >= 1 (Go's ?seconds=N)")
    if timeout <= 0 or retries < 0 or concurrency < 1 or backoff < 0:
        raise ValueError("timeout and concurrency must be positive, retries and backoff >= 0")
    unknown = [t for t in types if t not in ENDPOINTS]
    if unknown:
        raise ValueError(f"unknown profile type {unknown[0]!r}")
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise ValueError("two targets have the same service/version/instance")
    report = CollectReport(window_start=datetime.now(UTC))
    window = _Window(
        store,
        Path(archive_dir),
        targets,
        types,
        seconds=int(seconds),
        metrics_interval=metrics_interval,
        timeout=timeout,
        retries=retries,
        backoff=backoff,
        concurrency=concurrency,
        progress=progress,
    )
    report.targets = list(window.reports.values())
    window.run()
    order = {pt: i for i, pt in enumerate(KNOWN_TYPES)}
    for tr in report.targets:
        tr.fetches.sort(key=lambda f: order[f.profile_type])
    report.window_end = datetime.now(UTC)
    return report


class _Window:
    """One collection window's schedule and the loop that runs it.

    Windowed fetches (cpu, allocs' deltas ...) start at once; snapshot fetches
    (heap, goroutine ...) at the window's end; /metrics scrapes every
    ``metrics_interval`` through it, a tick skipped for a target whose previous
    scrape is still out. Results are stored on the calling thread as they
    finish (the store is not shared across threads).
    """

    def __init__(
        self,
        store: Store,
        archive: Path,
        targets: Sequence[Target],
        types: Sequence[str],
        *,
        seconds: int,
        metrics_interval: float | None,
        timeout: float,
        retries: int,
        backoff: float,
        concurrency: int,
        progress: Progress | None,
    ) -> None:
        self.store, self.archive, self.seconds = store, archive, seconds
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.progress = progress
        self.stop = threading.Event()
        self.pool = _Pool(concurrency, "collect")
        self.scrape_pool = _Pool(min(concurrency, max(1, len(targets))), "scrape")
        self.t0 = time.monotonic()
        self.reports = {t.name: TargetReport(t) for t in targets}
        self.windowed: list[tuple[Target, str]] = []
        self.snapshots: list[tuple[Target, str]] = []
        for t in targets:
            try:
                t.authorization()
            except LookupError as e:
                self.reports[t.name].error = f"{e}; target skipped"
                continue
            for pt in t.types or types:
                (self.windowed if ENDPOINTS[pt][1] else self.snapshots).append((t, pt))
        self.live = [t for t in targets if self.reports[t.name].error is None]
        self.total = len(self.windowed) + len(self.snapshots)
        self.done = 0
        self.events = self._events(metrics_interval)
        self.pending: dict[Future, str] = {}
        self.scraping: dict[str, Future] = {}

    def _events(self, metrics_interval: float | None) -> list[tuple[float, str]]:
        """(when, action) in time order: the snapshot fetches at the window's end,
        scrape ticks through it."""
        events: list[tuple[float, str]] = []
        if self.snapshots:
            events.append((self.t0 + self.seconds, "snapshots"))
        if metrics_interval and self.live:
            for t in self.live:
                self.reports[t.name].scrapes = ScrapeStats(redact_url(f"{t.url}/metrics"))
            k = 0
            while k * metrics_interval <= self.seconds + 1e-9:
                events.append((self.t0 + k * metrics_interval, "scrape"))
                k += 1
        return sorted(events)

    def _fetch(self, t: Target, pt: str) -> None:
        call = lambda: _fetch_profile(  # noqa: E731
            t,
            pt,
            seconds=self.seconds,
            timeout=self.timeout,
            retries=self.retries,
            backoff=self.backoff,
            stop=self.stop,
        )
        self.pending[self.pool.submit(call)] = "fetch"

    def _dispatch_due(self) -> None:
        """Start the events whose time has come."""
        now = time.monotonic()
        while self.events and self.events[0][0] <= now:
            _, what = self.events.pop(0)
            if what == "snapshots":
                for t, pt in self.snapshots:
                    self._fetch(t, pt)
                continue
            for t in self.live:
                busy = self.scraping.get(t.name)
                if busy is not None and not busy.done():
                    # The previous scrape is still out: skip this tick
                    # rather than pile requests on a slow target.
                    stats = self.reports[t.name].scrapes
                    assert stats is not None
                    stats.skipped += 1
                    continue
                fut = self.scrape_pool.submit(lambda t=t: _scrape(t, timeout=self.timeout))
                self.scraping[t.name] = fut
                self.pending[fut] = "scrape"

    def _finished(self, fut: Future, kind: str) -> None:
        if kind == "fetch":
            fetched: _Fetched = fut.result()
            self.reports[fetched.target.name].fetches.append(fetched.result)
            if fetched.gz is not None:  # a decoded profile, or a trace's bytes
                _store_profile(self.store, fetched, self.archive)
                # Storing takes time: a scrape tick due meanwhile starts
                # now, not after the other finished fetches are stored.
                self._dispatch_due()
            self.done += 1
            if self.progress:
                self.progress(self.done, self.total)
        else:
            s: _Scraped = fut.result()
            stats = self.reports[s.target.name].scrapes
            assert stats is not None
            _store_scrape(self.store, s, stats)

    def run(self) -> None:
        if self.progress:
            self.progress(0, self.total)
        try:
            for t, pt in self.windowed:
                self._fetch(t, pt)
            while self.pending or self.events:
                self._dispatch_due()
                wait_for = max(0.0, self.events[0][0] - time.monotonic()) if self.events else None
                if not self.pending:
                    time.sleep(wait_for or 0)
                    continue
                finished, _ = wait(
                    list(self.pending), timeout=wait_for, return_when=FIRST_COMPLETED
                )
                for fut in finished:
                    self._finished(fut, self.pending.pop(fut))
        finally:
            self.stop.set()
            self.pool.shutdown()
            self.scrape_pool.shutdown()
