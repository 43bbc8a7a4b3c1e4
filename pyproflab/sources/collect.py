"""Live Go services (``net/http/pprof``) as a source: profiles and /metrics of one window.

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
  good one is archived as ``<h>.trace`` (its sha256) and yielded as a
  ``TraceItem`` of that file (stored with its tables and blocking profiles
  by ``store.traces``).

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
  Ingesting a profile already in the store is a no-op (``present``). The
  source yields each as a ``ProfileItem`` (decoded already, with its hash),
  each scrape as a ``TableItem``; ``pyproflab.collect.collect`` stores them
  through ``store.sourced.ingest_source``, one transaction each, and reads
  each item's outcome back into the report.
- Every ``metrics_interval`` seconds during the window (both ends included),
  each target's ``/metrics`` is scraped; samples without their own timestamp
  get the scrape time (UTC). A scrape is not retried (the next tick is the
  retry) and is skipped while the target's previous one is still running.
  Once the window's own fetches have all ended, each target is scraped once
  more (after its previous scrape, if one is out): a windowed profile ends
  when its answer arrives, after the tick at the window's nominal end, and
  CPU coverage and ``--per`` need a scrape on each side of its window.
- Every failure is one line naming the target and what failed; one target's
  failures never stop the others. Items are yielded on the calling thread, in
  arrival order, so the store writes happen there too.

The fetches and scrapes are ``sources/collect_fetch.py``, the report types and
the archive ``sources/collect_report.py``, the HTTP client ``sources/http.py``.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

from pyproflab.sources.base import (
    METRIC_SAMPLES,
    PROFILES,
    ItemMeta,
    Known,
    Offer,
    ProfileItem,
    Request,
    TableItem,
    TraceItem,
)
from pyproflab.sources.collect_fetch import ENDPOINTS, Fetched, Scraped, fetch_profile, scrape
from pyproflab.sources.collect_report import (
    CollectReport,
    FetchResult,
    ScrapeStats,
    TargetReport,
    archive_body,
)
from pyproflab.sources.http import DEFAULT_BACKOFF
from pyproflab.sources.targets import COLLECT_TYPES, KNOWN_TYPES, Target, redact_url

assert tuple(ENDPOINTS) == KNOWN_TYPES

DEFAULT_SECONDS = 10
DEFAULT_METRICS_INTERVAL = 2.0
DEFAULT_TIMEOUT = 10.0
DEFAULT_RETRIES = 2
DEFAULT_CONCURRENCY = 16

Progress = Callable[[int, int], None]


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


class _Window:
    """One collection window's schedule and the loop that runs it.

    Windowed fetches (cpu, allocs' deltas ...) start at once; snapshot fetches
    (heap, goroutine ...) at the window's end; /metrics scrapes every
    ``metrics_interval`` through it, a tick skipped for a target whose previous
    scrape is still out. Results are yielded on the calling thread as they
    finish (the store is not shared across threads).
    """

    def __init__(
        self,
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
        self.archive, self.seconds = archive, seconds
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
        # The closing scrape's targets, due once the window's own fetches have ended.
        self.window_out: set[Future] = set()
        self.closing = {t.name for t in self.live} if metrics_interval and self.windowed else set()

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
        call = lambda: fetch_profile(  # noqa: E731
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
            if what == "closing":
                self._close_scrapes(now)
                continue
            for t in self.live:
                if not self._scrape(t):
                    # The previous scrape is still out: skip this tick
                    # rather than pile requests on a slow target.
                    stats = self.reports[t.name].scrapes
                    assert stats is not None
                    stats.skipped += 1

    def _scrape(self, t: Target) -> bool:
        """Start a scrape of ``t``; False while its previous one is still out."""
        busy = self.scraping.get(t.name)
        if busy is not None and not busy.done():
            return False
        fut = self.scrape_pool.submit(lambda: scrape(t, timeout=self.timeout))
        self.scraping[t.name] = fut
        self.pending[fut] = "scrape"
        return True

    def _close_scrapes(self, now: float) -> None:
        """The closing scrape of each target not yet scraped after the window's
        fetches; a target whose previous scrape is out is tried again shortly."""
        for t in self.live:
            if t.name in self.closing and self._scrape(t):
                self.closing.discard(t.name)
        if self.closing:
            self.events.append((now + 0.05, "closing"))
            self.events.sort()

    def _finished(self, fut: Future, kind: str) -> Iterator[ProfileItem | TraceItem | TableItem]:
        if kind == "fetch":
            fetched: Fetched = fut.result()
            self.reports[fetched.target.name].fetches.append(fetched.result)
            if fetched.gz is not None:  # a decoded profile, or a trace's bytes
                item = _item(fetched, self.archive)
                if item is not None:
                    yield item  # stored before the generator resumes
                    _fetch_outcome(fetched.result, item)
                # Storing takes time: a scrape tick due meanwhile starts
                # now, not after the other finished fetches are stored.
                self._dispatch_due()
            self.done += 1
            if self.progress:
                self.progress(self.done, self.total)
            if fut in self.window_out:
                self.window_out.discard(fut)
                if not self.window_out and self.closing:  # the last of the window's own
                    self.events.append((time.monotonic(), "closing"))
                    self.events.sort()
        else:
            s: Scraped = fut.result()
            stats = self.reports[s.target.name].scrapes
            assert stats is not None
            if s.error is not None or s.table is None:
                _scrape_failed(stats, s.error or "no samples")
                return
            t = s.target
            meta = ItemMeta(t.service, t.version, t.instance, source=s.url)
            table = TableItem(METRIC_SAMPLES, s.table, meta)
            yield table
            _scrape_outcome(stats, s, table)

    def run(self) -> Iterator[ProfileItem | TraceItem | TableItem]:
        if self.progress:
            self.progress(0, self.total)
        try:
            for t, pt in self.windowed:
                self._fetch(t, pt)
            self.window_out = set(self.pending)
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
                    yield from self._finished(fut, self.pending.pop(fut))
        finally:
            self.stop.set()
            self.pool.shutdown()
            self.scrape_pool.shutdown()


# --- from results to items and back ----------------------------------------------------


def _item(fetched: Fetched, archive_dir: Path) -> ProfileItem | TraceItem | None:
    """The archived body as an item for the store (an execution trace: the archived
    file); None (the fetch failed) when the archive cannot be written."""
    r, t = fetched.result, fetched.target
    assert fetched.gz is not None and r.content_hash
    trace = fetched.profile is None
    try:
        r.archive_path = str(archive_body(archive_dir, r.content_hash, fetched.gz, trace=trace))
    except OSError as e:
        r.status, r.error = "failed", f"cannot write the archive: {e.strerror or e}"
        return None
    meta = ItemMeta(
        service=t.service,
        version=t.version,
        instance=t.instance,
        profile_type=None if trace else r.profile_type,
        window_start=r.window_start,
        window_end=r.window_end,
        source=r.url,
    )
    if trace:
        return TraceItem(meta, path=r.archive_path)
    return ProfileItem(meta, data=fetched.gz, profile=fetched.profile, content_hash=r.content_hash)


def _fetch_outcome(r: FetchResult, item: ProfileItem | TraceItem) -> None:
    """The fetch's status from what the store did with its item."""
    out = item.outcome
    if out is None or out.status == "refused":
        r.status = "failed"
        r.error = f"the store refused it: {out.reason if out else 'not stored'}"
        return
    r.status, r.profile_id = out.status, out.profile_id


def _scrape_failed(stats: ScrapeStats, message: str) -> None:
    stats.failed += 1
    if message not in stats.errors:
        stats.errors.append(message)


def _scrape_outcome(stats: ScrapeStats, s: Scraped, item: TableItem) -> None:
    out = item.outcome
    if out is None or out.status == "refused":
        reason = out.reason if out else "not stored"
        _scrape_failed(stats, f"the store refused samples from {s.url}: {reason}")
        return
    stats.samples += out.rows
    stats.ok += 1


# --- the source --------------------------------------------------------------------------


class _WindowOptions(TypedDict):
    """``_Window``'s keyword arguments, as ``CollectSource`` keeps them."""

    seconds: int
    metrics_interval: float | None
    timeout: float
    retries: int
    backoff: float
    concurrency: int
    progress: Progress | None


class CollectSource:
    """One collection window from live targets (see the module rules). ``report``
    holds what happened once the items have been consumed; only bad arguments
    raise (``ValueError``)."""

    def __init__(
        self,
        targets: Sequence[Target],
        *,
        archive_dir: str | os.PathLike,
        seconds: int = DEFAULT_SECONDS,
        types: Sequence[str] = COLLECT_TYPES,
        metrics_interval: float | None = DEFAULT_METRICS_INTERVAL,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        concurrency: int = DEFAULT_CONCURRENCY,
        backoff: float = DEFAULT_BACKOFF,
        progress: Progress | None = None,
    ) -> None:
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
        self.targets, self.types = list(targets), list(types)
        self.archive_dir = Path(archive_dir)
        self.options = _WindowOptions(
            seconds=int(seconds),
            metrics_interval=metrics_interval,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            concurrency=concurrency,
            progress=progress,
        )
        self.report = CollectReport(window_start=datetime.now(UTC))
        self.name = "collect: " + ", ".join(redact_url(t.url) for t in self.targets[:3])

    def offer(self, request: Request) -> Offer:
        return Offer(
            kinds=(PROFILES, METRIC_SAMPLES),
            profile_types=tuple(self.types),
            services=tuple(sorted({t.service for t in self.targets})),
        )

    def items(
        self, request: Request, known: Known
    ) -> Iterator[ProfileItem | TraceItem | TableItem]:
        """The window's items as they arrive; the report is complete when they end."""
        self.report.window_start = datetime.now(UTC)
        window = _Window(self.archive_dir, self.targets, self.types, **self.options)
        self.report.targets = list(window.reports.values())
        try:
            yield from window.run()
        finally:
            order = {pt: i for i, pt in enumerate(KNOWN_TYPES)}
            for tr in self.report.targets:
                tr.fetches.sort(key=lambda f: order[f.profile_type])
            self.report.window_end = datetime.now(UTC)
