"""The server's stop on SIGTERM: the requests in flight finished, within a bound.

Rules (``Drain.run``, after the listening socket is closed):

- Kept-alive connections waiting for their next request, with nothing
  received, are closed at once: their read side is shut, so the handler reads
  the end of the stream and closes it (a Go client then takes a new
  connection for its next request). One with bytes received is served.
  A handler that has taken bytes in but not yet read its request line looks
  idle: its read side is shut too, so it is served if its body arrived
  whole, else answered 503 (below), so long as its thread runs within the
  bound and GRACE (the stop waits while its socket has bytes or its end
  unread).
- A request whose request line was read (``begin``), or whose bytes are
  waiting, is left to finish: its body read, checked, spooled and answered,
  with ``Connection: close``; a body that ends short while the server stops
  is answered 503 too (the stop may have shut its read side).
- At ``bound`` seconds, every connection's read side is shut: a body still
  being read ends short and is answered 503 (``shutdown``, counted in
  /metrics and logged like every refusal), so the client sees a failure, not a
  reset; a request already read finishes. The run then waits at most
  ``GRACE`` seconds more for the answers, and returns.
"""

from __future__ import annotations

import logging
import select
import socket
import threading

log = logging.getLogger("pyproflab.serve")

#: seconds given past the bound to the answers still being written
GRACE = 2.0


class Drain:
    """The connections being served and those inside a request (their request
    line read, not yet answered)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._open: set[socket.socket] = set()
        self._busy: set[socket.socket] = set()
        self.stopping = False  # answers close their connection
        self.cutting = False  # past the bound: a body still being read is answered 503

    def opened(self, sock: socket.socket) -> None:
        with self._cond:
            self._open.add(sock)

    def closed(self, sock: socket.socket) -> None:
        with self._cond:
            self._open.discard(sock)
            self._busy.discard(sock)
            self._cond.notify_all()

    def begin(self, sock: socket.socket) -> None:
        with self._cond:
            self._busy.add(sock)

    def end(self, sock: socket.socket) -> None:
        with self._cond:
            self._busy.discard(sock)
            self._cond.notify_all()

    def in_flight(self) -> int:
        with self._cond:
            return len(self._busy)

    def run(self, bound: float) -> int:
        """Stop as the module's rules say; return how many requests were still
        in flight at the bound (each answered 503 if its body was unread)."""
        with self._cond:
            self.stopping = True
            log.info("stopping: %d requests in flight, waiting up to %gs", len(self._busy), bound)
            idle = self._open - self._busy
            _shut_reads(idle - _readable(idle))
            self._cond.wait_for(self._done, bound)
            self.cutting = True
            left = len(self._busy)
            _shut_reads(self._open)
            self._cond.wait_for(self._done, GRACE)
        if left:
            log.info(
                "stopped: %d requests in flight at %gs; those still reading answered 503",
                left,
                bound,
            )
        return left

    def _done(self) -> bool:
        """No request in flight, and none waiting to be read on an idle connection
        (their handlers ``begin`` or close, and notify)."""
        return not self._busy and not _readable(self._open)


def _readable(socks: set[socket.socket]) -> set[socket.socket]:
    """Those of ``socks`` with bytes (or their end) received and not yet read."""
    poller, by_fd = select.poll(), {}
    for s in socks:
        fd = s.fileno()
        if fd >= 0:
            poller.register(fd, select.POLLIN)
            by_fd[fd] = s
    return {by_fd[fd] for fd, _ in poller.poll(0)}


def _shut_reads(socks: set[socket.socket]) -> None:
    for s in socks:
        try:  # the plain socket's shutdown: an SSLSocket's drops its TLS state
            socket.socket.shutdown(s, socket.SHUT_RD)
        except OSError:
            pass
