"""Running ``pyproflab serve``: the server, and its ingesters in child processes.

Rules:

- The ingester runs as ``pyproflab spool-ingest SPOOL --db DB --follow`` in a
  child process, so a crash or a kill of either loses nothing the other did:
  the spool is between them. The server restarts a child that exits (after
  ``RESTART_DELAY`` seconds) and ends it on the way out; the child dies with
  its parent (``PR_SET_PDEATHSIG``), so a killed server leaves no orphan. It
  runs ``INGESTER_NICE`` below the server: under load the acknowledgements
  come first and the spool holds what the store has not taken yet.
- A child that exits is restarted ``RESTART_DELAY`` seconds later unless the
  server is stopping by then: a stop sent to the whole process group
  (systemd's KillMode=control-group) ends the children too, and that is no
  crash; it was logged as one ('ingester exited with -15; restarting in 1s')
  and a new child started while the server drained.
- The server ends a child with SIGTERM; started with ``--served``, the child
  takes it as its stop (exit 0, no "terminated" line: the server reports its
  own end).
- ``--ingesters N`` starts N such children, child I with ``--part I/N``: each
  takes its own share of the spool (``Spool.pending``), each restarted on its
  own, all at ``INGESTER_NICE``. The default is 1: one ingester took ~300
  profiles a second here, what 1,000 instances pushing every 10 s send, with
  no margin; two kept the lag bounded at that load on 2 cores with the
  acknowledgements' p99 at 0.04 s (docs/serve.md). A second one overlaps
  decoding on a second core, and the store's writes take turns under its lock.
- On SIGTERM/SIGINT (or at ``duration``) the listening socket is closed and
  the requests in flight are finished, within ``Options.drain`` seconds plus
  ``drain.GRACE`` (``drain.Drain``); then the ingesters are stopped.
- The main thread waits for the stop in slices of ``WAKE`` seconds: the
  kernel delivers a process's SIGTERM to any of its threads, and Python runs
  the handler in the main thread only once that thread runs again; one wait
  for the whole run missed a SIGTERM that landed on a server thread until
  ``duration`` (forever without one).
- ``duration`` (seconds) bounds a run, for tests and benchmarks.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time

from pyproflab.serve.guard import Tokens
from pyproflab.serve.server import Options, PushServer, listen_check
from pyproflab.sources.spool import Spool

log = logging.getLogger("pyproflab.serve")

RESTART_DELAY = 1.0
INGESTER_NICE = 10
#: the longest the main thread sleeps before it looks for a signal (``_wait``)
WAKE = 0.2


def _die_with_parent() -> None:
    # Below the server in priority: acknowledgements first, the store when the
    # CPU allows (the spool holds the difference).
    os.nice(INGESTER_NICE)
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class IngesterChild:
    """The ingester process, restarted ``RESTART_DELAY`` seconds after it exits
    unless the server is stopping by then."""

    def __init__(self, argv: list[str]):
        self.argv = argv
        self.stopping = threading.Event()
        self.proc: subprocess.Popen | None = None
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _loop(self) -> None:
        while not self.stopping.is_set():
            self.proc = subprocess.Popen(self.argv, preexec_fn=_die_with_parent)
            code = self.proc.wait()
            # A stop sent to the whole group ends the child before the server's
            # main thread has seen it (it looks every WAKE seconds): the delay
            # lets the stop come first, so a stop is not taken for a crash.
            if self.stopping.wait(RESTART_DELAY):
                return
            log.warning("ingester exited with %s; restarted after %gs", code, RESTART_DELAY)

    def stop(self) -> None:
        self.stopping.set()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def ingester_argvs(spool: str, db: str, extra: list[str], n: int = 1) -> list[list[str]]:
    """The command lines of ``n`` ingesters: one for the whole spool, or one per share."""
    if n == 1:
        return [ingester_argv(spool, db, extra)]
    return [ingester_argv(spool, db, [*extra, "--part", f"{i}/{n}"]) for i in range(n)]


def ingester_argv(spool: str, db: str, extra: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pyproflab",
        "spool-ingest",
        spool,
        "--db",
        db,
        "--follow",
        "--served",  # its SIGTERM is the server's stop: no "terminated" line
        *extra,
    ]


def serve(
    opts: Options,
    spool: Spool,
    tokens: Tokens,
    *,
    ingesters: list[list[str]] | None = None,
    duration: float | None = None,
    ready=None,
) -> None:
    """Serve until SIGTERM/SIGINT or ``duration`` seconds; ``ready(server)`` once
    listening; ``ingesters``: the children's command lines (``ingester_argvs``)."""
    listen_check(opts.host, tokens)
    spool.lock("server")
    dropped = spool.clean()
    if dropped:
        log.info("removed %d unacknowledged partial pushes from %s", dropped, spool.tmp)
    server = PushServer(opts, spool, tokens)
    kids = [IngesterChild(a) for a in ingesters or []]
    for child in kids:
        child.start()
    stop = threading.Event()

    def on_signal(signum, frame) -> None:
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    t.start()
    host, port = server.server_address[:2]
    log.info("listening on %s:%s, spool %s (pid %d)", host, port, spool.root, os.getpid())
    if ready:
        ready(server)
    try:
        _wait(stop, duration)
    finally:
        for child in kids:  # systemd's SIGTERM reaches them too: an exit now is no crash
            child.stopping.set()
        server.shutdown()  # no connection is accepted any more...
        server.socket.close()  # refused from now on (any left in its backlog are reset)
        server.drain.run(opts.drain)
        server.server_close()
        for child in kids:
            child.stop()


def _wait(stop: threading.Event, duration: float | None) -> None:
    """Until ``stop`` is set or ``duration`` seconds pass, waking every ``WAKE``
    seconds so that a signal caught by another thread is handled (module rules)."""
    end = None if duration is None else time.monotonic() + duration
    while not stop.is_set():
        left = WAKE if end is None else min(WAKE, end - time.monotonic())
        if left <= 0:
            return
        stop.wait(left)
