"""Protocol-faithful test servers for the pull sources (Datadog, Pyroscope, Parca).

Datadog is hosted and the Go module proxy refuses the Pyroscope and Parca
server modules, so no real server runs here. These servers answer the
requests the pull sources make, as the services' published API definitions
describe them (paths, field names, status codes; see ``fake_datadog.py``,
``fake_pyroscope.py``, ``fake_parca.py``), from real pprof files.

A server runs in a process of its own (``python fake_services.py KIND MANIFEST``),
on 127.0.0.1, printing ``PORT n`` once listening, and exits after
``--lifetime`` seconds whatever happens; ``serve(kind, manifest)`` starts one
for a test and kills it by its PID at the end.

The manifest (JSON) lists the profiles the server holds: each with ``file``
(a pprof file), ``time_ms``, ``labels`` and service-specific fields, plus the
server's settings (expected keys, page size ...).

Faults, set by ``POST /__test__/faults`` (a JSON list, applied in order, each
to the requests whose path contains ``path``, or ends with it with ``"end":
true``; ``after``: let that many matching requests through first; ``times``:
how many requests it hits):

- ``{"kind": "status", "status": 429, "retry_after": "1"}``: that status (with a
  JSON error body, Connect's, whose message is ``message`` or "injected"; or
  ``text`` as a text/plain body; and Retry-After when given);
- ``{"kind": "slow"}``: the headers, then one byte of the body a second;
- ``{"kind": "hang"}``: no answer at all until the server exits;
- ``{"kind": "truncate"}``: a Content-Length twice the bytes sent, then close;
- ``{"kind": "html"}``: 200 with a ``text/html`` login page;
- ``{"kind": "huge", "bytes": N}``: 200 declaring and streaming N bytes.

``GET /__test__/log`` returns the requests seen (method, path, and which
expected credentials they carried, never the values).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@dataclass
class Answer:
    """What a handler answers: status, content type, body, extra headers."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def json_answer(doc: Any, status: int = 200) -> Answer:
    return Answer(status, json.dumps(doc).encode())


def connect_error(status: int, code: str, message: str) -> Answer:
    """A Connect protocol error: the HTTP status of the code and a JSON body."""
    return json_answer({"code": code, "message": message}, status)


CONNECT_CODES = {400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied",
                 404: "not_found", 429: "resource_exhausted", 500: "internal",
                 503: "unavailable", 504: "deadline_exceeded"}  # fmt: skip

Handler = Callable[["Request"], Answer]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


class State:
    """The server's faults and request log, shared by its threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.faults: list[dict[str, Any]] = []
        self.log: list[dict[str, Any]] = []

    def fault_for(self, path: str) -> dict[str, Any] | None:
        with self.lock:
            for f in self.faults:
                if not _hits(f, path) or f.get("times", 1) <= 0:
                    continue
                if f.get("after", 0) > 0:
                    f["after"] -= 1
                    return None
                f["times"] = f.get("times", 1) - 1
                return dict(f)
        return None


def _hits(rule: dict[str, Any], path: str) -> bool:
    """A rule's ``path`` is a part of the request's path, or its end (``"end": true``)."""
    return path.endswith(rule["path"]) if rule.get("end") else rule.get("path", "") in path


def make_handler(route: Handler, state: State, creds: Callable[[dict[str, str]], dict]) -> type:
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _serve(self, method: str) -> None:
            from urllib.parse import parse_qs, urlsplit

            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            parts = urlsplit(self.path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            req = Request(method, parts.path, parse_qs(parts.query), headers, body)
            if parts.path.startswith("/__test__/"):
                return self._control(req)
            with state.lock:
                state.log.append({"method": method, "path": parts.path, **creds(headers)})
            fault = state.fault_for(parts.path)
            if fault is not None:
                return self._fault(fault)
            try:
                answer = route(req)
            except Exception as e:  # noqa: BLE001 - a bug in a test server: a 500 with why
                answer = json_answer({"code": "internal", "message": repr(e)}, 500)
            self._send(answer)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def _control(self, req: Request) -> None:
            if req.path == "/__test__/faults":
                with state.lock:
                    state.faults = list(json.loads(req.body or b"[]"))
                return self._send(json_answer({"ok": True}))
            with state.lock:
                return self._send(json_answer(list(state.log)))

        def _send(self, a: Answer, length: int | None = None) -> None:
            self.send_response(a.status)
            self.send_header("Content-Type", a.content_type)
            self.send_header("Content-Length", str(len(a.body) if length is None else length))
            for k, v in a.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(a.body)

        def _fault(self, f: dict[str, Any]) -> None:
            kind = f["kind"]
            if kind == "status":
                status = int(f["status"])
                code = CONNECT_CODES.get(status, "unknown")
                a = connect_error(status, code, f.get("message", "injected"))
                if "text" in f:
                    a = Answer(status, f["text"].encode(), "text/plain; charset=utf-8")
                if f.get("retry_after") is not None:
                    a.headers["Retry-After"] = str(f["retry_after"])
                return self._send(a)
            if kind == "html":
                page = b"<html><body>Please log in</body></html>"
                return self._send(Answer(200, page, "text/html; charset=utf-8"))
            if kind == "truncate":
                self._send(Answer(200, b"x" * 1000, "application/json"), length=2000)
                self.close_connection = True
                return None
            if kind == "huge":
                n = int(f["bytes"])
                self.send_response(200)
                self.send_header("Content-Type", f.get("content_type", "application/json"))
                self.send_header("Content-Length", str(n))
                self.end_headers()
                chunk = b"0" * 65536
                for _ in range(0, n, len(chunk)):
                    try:
                        self.wfile.write(chunk)
                    except OSError:
                        return None
                return None
            if kind == "slow":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "1000")
                self.end_headers()
                for _ in range(1000):
                    try:
                        self.wfile.write(b" ")
                        self.wfile.flush()
                    except OSError:
                        return None
                    time.sleep(1.0)
                return None
            if kind == "hang":
                time.sleep(3600)
            return None

    return H


def run(kind: str, manifest: Path, lifetime: float) -> None:
    """Serve ``kind`` from ``manifest`` on 127.0.0.1 until ``lifetime`` seconds pass."""
    sys.path.insert(0, str(HERE.parent))
    import importlib

    module = importlib.import_module(f"support.fake_{kind}")
    route, creds = module.routes(json.loads(manifest.read_text()))
    state = State()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(route, state, creds))
    server.daemon_threads = True
    threading.Timer(lifetime, lambda: os._exit(0)).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


@dataclass
class Served:
    """A running test server: its base URL, process, and control calls."""

    url: str
    process: subprocess.Popen

    def faults(self, rules: list[dict[str, Any]]) -> None:
        _post(self.url + "/__test__/faults", rules)

    def log(self) -> list[dict[str, Any]]:
        import urllib.request

        with urllib.request.urlopen(self.url + "/__test__/log", timeout=10) as r:
            return json.loads(r.read())

    def requests(self, path_part: str, *, end: bool = False) -> int:
        """Requests whose path holds ``path_part`` (``end``: ends with it)."""
        rule = {"path": path_part, "end": end}
        return sum(_hits(rule, e["path"]) for e in self.log())


def _post(url: str, doc: Any) -> None:
    import urllib.request

    req = urllib.request.Request(
        url, data=json.dumps(doc).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        r.read()


@contextmanager
def serve(
    kind: str, manifest: dict[str, Any], tmp: Path, lifetime: float = 600
) -> Iterator[Served]:
    """A ``kind`` server over ``manifest`` for the ``with`` block (killed by PID at its end)."""
    path = tmp / f"{kind}-manifest.json"
    path.write_text(json.dumps(manifest))
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "fake_services.py"),
            kind,
            str(path),
            "--lifetime",
            str(lifetime),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("PORT "):
            raise RuntimeError(f"the {kind} test server did not start: {line!r}")
        yield Served(f"http://127.0.0.1:{int(line.split()[1])}", proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=("datadog", "pyroscope", "parca"))
    ap.add_argument("manifest", type=Path)
    ap.add_argument("--lifetime", type=float, default=600)
    a = ap.parse_args()
    run(a.kind, a.manifest, a.lifetime)
