"""`collect` with the `trace` type: /debug/pprof/trace?seconds=N fetched under
the same deadline as the other types, stored with its tables and blocking
profiles, archived as .trace; a body that is not a trace is refused in one line."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.trace_helpers import trace_path

from pyproflab.collect import collect
from pyproflab.sources.targets import Target
from pyproflab.store import Store

pytestmark = pytest.mark.go


def _server(body_for: dict[str, bytes]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = body_for.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_collect_stores_a_trace_and_refuses_a_non_trace(tmp_path: Path) -> None:
    good = _server({"/debug/pprof/trace?seconds=1": trace_path("mutex").read_bytes()})
    bad = _server({"/debug/pprof/trace?seconds=1": b"<html>not a trace</html>"})
    try:
        targets = [
            Target("svc", "v1", f"i-{n}", f"http://127.0.0.1:{s.server_address[1]}")
            for n, s in (("good", good), ("bad", bad))
        ]
        with Store.open(tmp_path / "s.duckdb") as store:
            rep = collect(
                store,
                targets,
                seconds=1,
                types=["trace"],
                archive_dir=tmp_path / "archive",
                metrics_interval=None,
            )
            rows = store.sql("SELECT instance, service FROM traces").to_pylist()
            types = store.sql("SELECT DISTINCT profile_type FROM profiles ORDER BY 1")
    finally:
        good.shutdown()
        bad.shutdown()
    assert rows == [{"instance": "i-good", "service": "svc"}]
    assert types.column(0).to_pylist() == [
        "trace-net",
        "trace-sched",
        "trace-sync",
        "trace-syscall",
    ]
    assert len(list((tmp_path / "archive").rglob("*.trace"))) == 1
    errors = rep.errors()
    assert len(errors) == 1 and "i-bad" in errors[0] and "not a Go execution trace" in errors[0]
