"""`pyproflab serve` stopped by SIGTERM: the pushes in flight are finished.

A server in its own process on 127.0.0.1 (``--no-ingest``), a raw HTTP client
that sends a recorded dd-trace-go push in two halves; each step waits for an
event (a log line, a gauge on /metrics, an answer), never for a time.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.push_helpers import RECORDED, records, request_target
from support.serve_process import ServeProcess
from support.testenv import REPO

DD = records(RECORDED / "dd")


class Server(ServeProcess):
    """``pyproflab serve`` (``--duration 600``) in a process group of its own."""

    def __init__(self, tmp_path, *flags: str):
        self.spool = tmp_path / "spool"
        self.metrics: http.client.HTTPConnection | None = None
        super().__init__(
            self.spool, tmp_path / "s.duckdb", *flags, "--duration", "600", session=True
        )

    def in_flight(self) -> float:
        """The gauge, asked on one kept-alive connection: one of these requests
        in flight at a time (closed ones could linger in the count)."""
        if self.metrics is None:
            self.metrics = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        self.metrics.request("GET", "/metrics")
        text = self.metrics.getresponse().read().decode()
        return float(re.search(r"^pyproflab_serve_requests_in_flight (\S+)$", text, re.M)[1])

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        self.wait_for(r"stopping: \d+ requests in flight")
        return self.proc.wait(timeout=60)

    def kill(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
        super().kill()


def _half_sent(port: int) -> tuple[socket.socket, bytes]:
    """A connection holding a recorded push's headers and half its body; the rest."""
    _, rec, body = DD[0]
    head = f"POST {request_target(rec)} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    head += f"Content-Type: {rec['header']['Content-Type'][0]}\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(head.encode() + body[: len(body) // 2])
    return s, body[len(body) // 2 :]


def _answer(s: socket.socket) -> http.client.HTTPResponse:
    r = http.client.HTTPResponse(s)
    r.begin()
    r.read()
    return r


def _refusals(server: Server, reason: str) -> list[str]:
    return [x for x in server.seen if re.search(rf"refused \S+ \S+: {reason}: ", x)]


@pytest.fixture
def serve(tmp_path):
    made = []

    def start(*flags: str, ingest: bool = False) -> Server:
        made.append(Server(tmp_path, *flags, *([] if ingest else ["--no-ingest"])))
        return made[-1]

    yield start
    for s in made:
        s.kill()


def _wait_in_flight(server: Server, n: int) -> None:
    # the /metrics request counts itself: n pushes in flight read n + 1
    while server.in_flight() < n + 1:
        pass
    server.metrics.close()  # not a kept-alive connection the stop has to close


def test_sigterm_finishes_a_push_whose_body_is_being_read(serve):
    """Before, serve exited at SIGTERM with the push half read: the client got
    the connection closed without an answer and nothing was spooled."""
    server = serve()
    s, rest = _half_sent(server.port)
    with s:
        _wait_in_flight(server, 1)
        server.proc.send_signal(signal.SIGTERM)
        server.wait_for(r"stopping: 1 requests in flight, waiting up to 5s")
        s.sendall(rest)
        r = _answer(s)
        assert (r.status, r.getheader("Connection")) == (200, "close")
        assert s.recv(1) == b""  # and the server closed the connection
    assert server.proc.wait(timeout=60) == 0
    assert len(list((server.spool / "ready").glob("*.push"))) == 1


def test_a_push_still_being_read_at_the_bound_is_answered_503(serve):
    """The client stops sending; at --drain the push is answered 503 (dd-trace-go
    retries it), counted and logged, and serve exits 0. Before, the client got
    the connection closed without an answer."""
    server = serve("--drain", "0.5")
    s, _ = _half_sent(server.port)
    with s:
        _wait_in_flight(server, 1)
        server.proc.send_signal(signal.SIGTERM)
        server.wait_for(r"stopping: 1 requests in flight, waiting up to 0.5s")
        r = _answer(s)
        assert r.status == 503 and int(r.getheader("Retry-After")) >= 1
    assert server.proc.wait(timeout=60) == 0
    server.wait_for(r"^$")  # the rest of its stderr
    assert len(_refusals(server, "shutdown")) == 1, "".join(server.seen)
    assert not list((server.spool / "ready").glob("*.push"))


def test_an_idle_kept_alive_connection_is_closed_at_once(serve):
    """A connection waiting for its next request is closed at SIGTERM (its
    client takes a new one), and the stop does not wait for it: with --drain
    600, serve exits as soon as nothing is in flight."""
    _, rec, body = DD[0]
    server = serve("--drain", "600")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    headers = {"Content-Type": rec["header"]["Content-Type"][0]}
    conn.request("POST", request_target(rec), body=body, headers=headers)
    r = conn.getresponse()
    assert r.status == 200 and r.getheader("Connection") != "close"
    r.read()
    assert server.stop() == 0
    assert conn.sock.recv(1) == b""
    conn.close()


_SIGTERM_ON_A_SERVER_THREAD = """
import signal, sys, threading
from pyproflab.serve.guard import Tokens
from pyproflab.serve.run import serve
from pyproflab.serve.server import Options
from pyproflab.sources.spool import Spool

main = threading.main_thread().ident

def waiting() -> bool:
    # the main thread in serve's wait for the stop: Condition.wait under an
    # Event.wait called from run.py (not under Thread.start's wait)
    f = sys._current_frames().get(main)
    chain = []
    while f is not None and len(chain) < 3:
        chain.append((f.f_code.co_filename, f.f_code.co_name))
        f = f.f_back
    return (
        len(chain) == 3
        and chain[0] == chain[1] == (threading.__file__, "wait")
        and chain[2][0].endswith("run.py")
    )

def kill_from_here() -> None:
    while not waiting():  # the main thread is asleep in its wait for the stop
        pass
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

def ready(server) -> None:
    threading.Thread(target=kill_from_here).start()

serve(Options(port=0), Spool(sys.argv[1]), Tokens(), duration=600, ready=ready)
print("stopped")
"""


def test_a_sigterm_caught_by_a_server_thread_stops_it(tmp_path):
    """The kernel may deliver a process's SIGTERM to any of its threads. Before,
    the main thread slept in one wait for the whole run and never ran Python's
    handler: such a SIGTERM was ignored until --duration (here 600 s; forever
    without one). The live SDK test hung so 2 times in about 25 runs."""
    res = subprocess.run(
        [sys.executable, "-c", _SIGTERM_ON_A_SERVER_THREAD, str(tmp_path / "spool")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (res.returncode, res.stdout) == (0, "stopped\n"), res.stderr[-2000:]


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
    return out


def _catches_sigterm(pid: int) -> bool:
    """Whether ``pid`` runs spool-ingest and has set its own SIGTERM handler:
    the ingester past its exec and its start-up (between fork and exec it
    holds the server's handler, and a SIGTERM then is lost)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    if b"spool-ingest" not in argv:
        return False
    caught = int(status.split("SigCgt:")[1].split()[0], 16)
    return bool(caught >> (signal.SIGTERM - 1) & 1)


def test_a_stop_that_reaches_the_ingester_too_does_not_restart_it(serve):
    """systemd's stop sends SIGTERM to the whole group (KillMode=control-group):
    the ingester exits while the server drains, and the server took that for a
    crash: 'ingester exited with -15; restarting in 1s', and a new ingester
    started in the middle of the stop."""
    # the push is held until the ingester has exited, however long that takes
    server = serve("--idle", "120", "--drain", "120", ingest=True)
    s, rest = _half_sent(server.port)
    with s:
        _wait_in_flight(server, 1)
        kids = []
        while not (kids and _catches_sigterm(kids[0])):  # the ingester, started and set up
            kids = _children(server.proc.pid)
        os.killpg(server.proc.pid, signal.SIGTERM)
        server.wait_for(r"stopping: 1 requests in flight")
        while Path(f"/proc/{kids[0]}").exists():  # it exited, and the server reaped it
            assert server.proc.poll() is None
        s.sendall(rest)
        status = _answer(s).status
    assert server.proc.wait(timeout=60) == 0
    server.wait_for(r"^$")  # the rest of its stderr
    assert status == 200, "".join(server.seen)
    assert not [x for x in server.seen if "ingester exited" in x], "".join(server.seen)
