"""What the server checks before it reads a push: who sends it, how often, how long.

Rules:

- ``Tokens``: a push carries its token as ``Authorization: Bearer TOKEN``, as
  the password of HTTP basic auth (pyroscope-go's ``BasicAuthPassword``) or as
  ``DD-API-KEY`` (dd-trace-go's API key). A token file has one ``SERVICE
  TOKEN`` pair per line (``*`` for any service; ``#`` starts a comment); a
  token, there or in ``--token``, has 8 characters or more (MIN_TOKEN); a
  token bound to a service is refused (403) for another service's profiles.
  Tokens are compared in constant time and never logged.
- ``RateLimit``: a token bucket per client address: ``rate`` requests a
  second, bursts of ``burst``; past it, 503 with Retry-After (``server``:
  dd-trace-go sends a push again after a 5xx, not after a 429).
- ``Reaper``: every connection has a deadline (idle wait plus one whole
  request); a thread shuts the socket down when it passes, so a client that
  trickles bytes (slowloris) is cut at the deadline, not after its last byte.
"""

from __future__ import annotations

import base64
import hmac
import math
import socket
import threading
import time
from pathlib import Path

from pyproflab.errors import UsageError

MIN_TOKEN = 8


class Tokens:
    """The accepted tokens, each with the service it may push for (None: any)."""

    def __init__(self, tokens: dict[str, str | None] | None = None):
        self.tokens = dict(tokens or {})

    @classmethod
    def load(cls, token: str | None = None, path: str | None = None) -> Tokens:
        out: dict[str, str | None] = {}
        if token:
            if len(token) < MIN_TOKEN:
                raise UsageError(f"--token: a token of {MIN_TOKEN} characters or more")
            out[token] = None
        if path:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as e:
                raise UsageError(f"{path}: cannot read the token file ({e.strerror})") from None
            for n, line in enumerate(text.splitlines(), 1):
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                parts = line.split()
                if len(parts) != 2 or len(parts[1]) < MIN_TOKEN:
                    raise UsageError(
                        f"{path}:{n}: expected 'SERVICE TOKEN'"
                        f" (a token of {MIN_TOKEN} characters or more)"
                    )
                out[parts[1]] = None if parts[0] == "*" else parts[0]
        return cls(out)

    @property
    def required(self) -> bool:
        return bool(self.tokens)

    def presented(self, headers) -> str | None:
        """The token a request carries, if any (see the module's rules)."""
        auth = headers.get("Authorization") or ""
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
        if scheme.lower() == "basic" and value.strip():
            try:
                _, _, password = base64.b64decode(value.strip()).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError):
                return None
            return password or None
        return headers.get("DD-API-KEY") or None

    def check(self, presented: str | None) -> tuple[bool, str | None]:
        """(accepted, the service the token is bound to)."""
        if not self.required:
            return True, None
        if not presented:
            return False, None
        found, bound = False, None
        for token, service in self.tokens.items():  # every one compared: constant time
            if hmac.compare_digest(token.encode(), presented.encode()):
                found, bound = True, service
        return found, bound


class RateLimit:
    """Token buckets per client address (``rate`` <= 0: no limit)."""

    def __init__(self, rate: float, burst: float, *, max_clients: int = 100_000):
        self.rate, self.burst = rate, max(burst, 1.0)
        self.max_clients = max_clients
        self._buckets: dict[str, tuple[float, float]] = {}
        self._mu = threading.Lock()

    def take(self, client: str) -> float:
        """0 if the request may go on, else the seconds until it may."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._mu:
            level, last = self._buckets.get(client, (self.burst, now))
            level = min(self.burst, level + (now - last) * self.rate)
            if len(self._buckets) >= self.max_clients and client not in self._buckets:
                self._buckets.clear()  # bounded memory: forgetting is generous, never stricter
            if level < 1.0:
                self._buckets[client] = (level, now)
                return (1.0 - level) / self.rate
            self._buckets[client] = (level - 1.0, now)
            return 0.0


def retry_after(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))


class Reaper:
    """Shuts down connections whose deadline has passed (see the module's rules)."""

    def __init__(self, on_cut=None, tick: float = 0.2):
        self._deadlines: dict[socket.socket, float] = {}
        self._cut: set[socket.socket] = set()
        self._mu = threading.Lock()
        self._stop = threading.Event()
        self._on_cut = on_cut
        self._thread = threading.Thread(target=self._run, args=(tick,), daemon=True)
        self._thread.start()

    def watch(self, sock: socket.socket, seconds: float) -> None:
        with self._mu:
            self._deadlines[sock] = time.monotonic() + seconds

    def forget(self, sock: socket.socket) -> None:
        with self._mu:
            self._deadlines.pop(sock, None)
            self._cut.discard(sock)

    def was_cut(self, sock: socket.socket) -> bool:
        """Whether ``sock`` was shut down at its deadline (what it sent is not a request)."""
        with self._mu:
            return sock in self._cut

    def __len__(self) -> int:
        return len(self._deadlines)

    def _run(self, tick: float) -> None:
        while not self._stop.wait(tick):
            now = time.monotonic()
            with self._mu:
                late = [s for s, d in self._deadlines.items() if d < now]
                for s in late:
                    del self._deadlines[s]
                    self._cut.add(s)
            for s in late:
                try:
                    peer = s.getpeername()[0]
                except OSError:
                    peer = "?"
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                if self._on_cut:
                    self._on_cut(peer)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
