"""The Prometheus HTTP API client, against a real Prometheus and against fakes.

The real-server test runs Debian's ``/usr/bin/prometheus`` (installed by
``scripts/install-system-deps.sh``) on 127.0.0.1, scraping a tiny endpoint of
this test every second, and compares what ``query_range`` returns with what
the endpoint served. Prometheus is stopped by PID in a ``finally``.
"""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlencode

import pytest
from support.prometheus_server_helpers import (
    PROMETHEUS,
    SKIP_NO_PROMETHEUS,
    free_port,
    prometheus,
)

from pyproflab.cli import main
from pyproflab.errors import MetricsError
from pyproflab.sources.base import Request
from pyproflab.sources.prometheus_api import metric_metadata, query_range
from pyproflab.sources.prometheus_scan import parse_exposition
from pyproflab.sources.prometheus_server import InstanceInfo, PrometheusSource
from pyproflab.store.connection import Store
from pyproflab.store.sourced import ingest_source

# --- a tiny HTTP server ------------------------------------------------------------


@contextmanager
def http_server(
    respond: Callable[[BaseHTTPRequestHandler], tuple[int, str, bytes]],
) -> Iterator[str]:
    """Serve ``respond(handler) -> (status, content type, body)`` on 127.0.0.1;
    yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            status, ctype, body = respond(self)
            try:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (the timeout test)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        yield url


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1 on a thread for the block; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


class Exporter:
    """A /metrics endpoint whose values change with every scrape (n = 1, 2, ...).

    ``heap`` carries explicit timestamps, so Prometheus stores exactly what was
    served; ``scrapes`` has none (Prometheus stamps it with its scrape time).
    After ``freeze()`` it repeats its last answer without ``heap``, unnoted, and
    sets ``repeated``.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.served: list[tuple[int, str]] = []  # (n, text)
        self.frozen = False
        self.repeated = threading.Event()

    def freeze(self) -> None:
        with self.lock:
            self.frozen = True

    def text(self, n: int, ts_ms: int) -> str:
        return (
            "# HELP pyproflab_test_scrapes_total Scrapes served.\n"
            "# TYPE pyproflab_test_scrapes_total counter\n"
            f'pyproflab_test_scrapes_total{{path="C:\\\\tmp",note="say \\"hi\\""}} {n}\n'
            "# TYPE pyproflab_test_heap_bytes gauge\n"
            f"pyproflab_test_heap_bytes {n * 1048576} {ts_ms}\n"
            "# TYPE pyproflab_test_pause_seconds histogram\n"
            f'pyproflab_test_pause_seconds_bucket{{le="0.001"}} {n}\n'
            f'pyproflab_test_pause_seconds_bucket{{le="+Inf"}} {2 * n}\n'
            f"pyproflab_test_pause_seconds_sum {0.5 * n}\n"
            f"pyproflab_test_pause_seconds_count {2 * n}\n"
        )

    def respond(self, h: BaseHTTPRequestHandler) -> tuple[int, str, bytes]:
        if h.path != "/metrics":
            return 404, "text/plain", b"not found\n"
        with self.lock:
            if self.frozen:
                self.repeated.set()
                lines = self.served[-1][1].splitlines(keepends=True)
                text = "".join(ln for ln in lines if "pyproflab_test_heap_bytes" not in ln)
                return 200, "text/plain; version=0.0.4", text.encode()
            n = len(self.served) + 1
            text = self.text(n, int(time.time() * 1000))
            self.served.append((n, text))
        return 200, "text/plain; version=0.0.4", text.encode()


def stored_heap(base: str) -> list[tuple[datetime, float]]:
    """The heap gauge's samples as Prometheus stored them (its API's JSON, read
    here without pyproflab): (time, value), oldest first."""
    query = urlencode({"query": "pyproflab_test_heap_bytes[1h]"})
    with urllib.request.urlopen(f"{base}/api/v1/query?{query}", timeout=HANG) as r:
        result = json.load(r)["data"]["result"]
    return sorted(
        (datetime.fromtimestamp(float(t), UTC), float(v)) for s in result for t, v in s["values"]
    )


@pytest.mark.skipif(not PROMETHEUS.exists(), reason=SKIP_NO_PROMETHEUS)
def test_real_prometheus_query_range(tmp_path):
    t_begin = time.monotonic()
    exporter = Exporter()
    with (
        http_server(exporter.respond) as ep,
        prometheus(tmp_path, [ep.removeprefix("http://")]) as base,
    ):
        start = datetime.now(UTC) - timedelta(seconds=2)
        # Until Prometheus has stored 6 scrapes (counting served ones raced: one it
        # timed out after its 1 s stores nothing), then freeze the exporter: no
        # heap sample is served after. Prometheus scrapes a target one scrape at a
        # time, so a repeat's arrival means every earlier scrape is stored or
        # dropped; the window ends at the last stored heap sample, served before
        # its scrape's 1 s was up, so later scrapes (stamped a tick after that
        # scrape's) are after it.
        deadline = time.monotonic() + 300  # bounds a hang only (under load: 11-22 s starts)
        while len(stored_heap(base)) < 6:
            assert time.monotonic() < deadline, "fewer than 6 stored scrapes in 300 s"
            time.sleep(0.2)
        exporter.freeze()
        assert exporter.repeated.wait(HANG), f"no scrape in {HANG} s"
        stored = stored_heap(base)
        end = stored[-1][0]
        with exporter.lock:
            served = list(exporter.served)

        types = metric_metadata(base)
        assert types["pyproflab_test_scrapes_total"] == "counter"
        assert types["pyproflab_test_heap_bytes"] == "gauge"
        assert types["pyproflab_test_pause_seconds"] == "histogram"

        # The gauge: served with timestamps, so Prometheus stores them as served,
        # and each point of the range must be the latest stored sample at or
        # before it (what Prometheus evaluates).
        ours = [parse_exposition(text, default_time=end, source="served") for _, text in served]
        heap_served = {
            (r["time"], r["value"])
            for t in ours
            for r in t.to_pylist()
            if r["metric"] == "pyproflab_test_heap_bytes"
        }
        assert set(stored) <= heap_served
        got = query_range(base, "pyproflab_test_heap_bytes", start, end, "1s", types=types)
        rows = got.to_pylist()
        assert len(rows) >= 5
        for r in rows:
            assert r["metric"] == "pyproflab_test_heap_bytes" and r["type"] == "gauge"
            assert dict(r["labels"]) == {"instance": ep.removeprefix("http://"), "job": "fakesvc"}
            before = [v for t, v in stored if t <= r["time"]]
            assert before, f"a point at {r['time']} before anything was served"
            assert r["value"] == before[-1]

        # The counter: no timestamps (Prometheus stamps scrape time); escaped
        # label values come back decoded; values are scrape numbers, non-decreasing.
        got = query_range(base, "pyproflab_test_scrapes_total", start, end, 1.0, types=types)
        rows = got.to_pylist()
        assert len(rows) >= 5
        assert {tuple(sorted(dict(r["labels"]).items())) for r in rows} == {
            (
                ("instance", ep.removeprefix("http://")),
                ("job", "fakesvc"),
                ("note", 'say "hi"'),
                ("path", "C:\\tmp"),
            )
        }
        values = [r["value"] for r in sorted(rows, key=lambda r: r["time"])]
        assert values == sorted(values)
        assert set(values) <= {float(n) for n, _ in served}
        assert len(set(values)) >= 4
        assert all(r["type"] == "counter" for r in rows)

        # Histogram series take the family type; an expression has no __name__.
        got = query_range(
            base, "pyproflab_test_pause_seconds_bucket", start, end, "1s", types=types
        )
        assert {r["type"] for r in got.to_pylist()} == {"histogram"}
        assert {dict(r["labels"])["le"] for r in got.to_pylist()} == {"0.001", "+Inf"}
        got = query_range(base, "sum(pyproflab_test_pause_seconds_count)", start, end, "1s")
        assert {r["metric"] for r in got.to_pylist()} == {"sum(pyproflab_test_pause_seconds_count)"}
        assert {r["type"] for r in got.to_pylist()} == {"untyped"}

        # A bad query: Prometheus answers status error, we raise one line.
        with pytest.raises(MetricsError) as ei:
            query_range(base, "rate(", start, end, "1s")
        assert "bad_data" in str(ei.value) and "\n" not in str(ei.value)

        # Import into the store, our instance name mapped from Prometheus'.
        mapping = {ep.removeprefix("http://"): InstanceInfo("fake", "v1", "fake-1")}
        queries = ["pyproflab_test_heap_bytes", '{__name__=~"pyproflab_test_pause.+"}']
        source = PrometheusSource(base, "1s", queries=queries, instances=mapping)
        window = Request(since=start, until=end)
        with Store.open(tmp_path / "s.duckdb") as store:
            added = ingest_source(store, source, window).metric_rows
            assert added > 0
            again = ingest_source(store, source, window).metric_rows
            assert again == 0
            who = store.sql(
                "SELECT DISTINCT service, version, instance, type FROM metric_samples "
                "WHERE metric = 'pyproflab_test_heap_bytes'"
            ).to_pylist()
            assert who == [
                {"service": "fake", "version": "v1", "instance": "fake-1", "type": "gauge"}
            ]

        # The CLI, same window, unmapped: instance stays Prometheus' label.
        db = tmp_path / "cli.duckdb"
        argv = ["ingest-gc", "--prometheus", base, "--db", str(db), "--step", "1s"]
        argv += ["--since", start.isoformat(), "--until", end.isoformat()]
        argv += ["--query", "pyproflab_test_scrapes_total"]
        assert main(argv) == 0
        with Store.open(db, read_only=True) as store:
            row = store.sql("SELECT DISTINCT service, instance FROM metric_samples").to_pylist()
        assert row == [{"service": "fakesvc", "instance": ep.removeprefix("http://")}]
    assert time.monotonic() - t_begin < 900  # bounds a hang only; it takes 18-23 s


# --- errors, without Prometheus ------------------------------------------------------

T0 = datetime(2025, 3, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)
# Seconds: bounds a hang only. The timeout of the exchanges whose line is not a
# timeout (their answers come at once, but a short deadline raced a loaded machine:
# a 2.2 s stall timed out 2), and the most a server holds an answer the test waits on.
HANG = 60


def test_http_error_with_api_error_body():
    body = b'{"status":"error","errorType":"bad_data","error":"invalid parameter \\"query\\""}'
    with http_server(lambda h: (400, "application/json", body)) as url:
        with pytest.raises(MetricsError) as ei:
            query_range(url, "up", T0, T1, "15s")
    msg = str(ei.value)
    assert msg.startswith(f"{url}/api/v1/query_range: HTTP 400: bad_data: invalid parameter")
    assert "\n" not in msg


def test_plain_http_500():
    with http_server(lambda h: (500, "text/plain", b"boom\nmore\n")) as url:
        with pytest.raises(MetricsError, match="HTTP 500"):
            query_range(url, "up", T0, T1, "15s")


def test_status_error_with_200():
    body = b'{"status":"error","errorType":"execution","error":"query timed out"}'
    with http_server(lambda h: (200, "application/json", body)) as url:
        with pytest.raises(MetricsError, match="execution: query timed out"):
            query_range(url, "up", T0, T1, "15s")


def test_not_json():
    with http_server(lambda h: (200, "text/html", b"<html>hello</html>")) as url:
        with pytest.raises(MetricsError, match="not JSON"):
            query_range(url, "up", T0, T1, "15s")


def test_short_body_is_one_line_not_a_traceback():
    class Short(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2000")  # then 1000 bytes and a close
            self.end_headers()
            self.wfile.write(b" " * 1000)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Short) as url:
        with pytest.raises(MetricsError, match="short body from the server"):
            metric_metadata(url, timeout=HANG)


def test_connection_refused():
    port = free_port()
    with pytest.raises(MetricsError, match="connection refused by the server"):
        query_range(f"http://127.0.0.1:{port}", "up", T0, T1, "15s", timeout=HANG)


def test_timeout():
    released = threading.Event()

    def hang(h: BaseHTTPRequestHandler) -> tuple[int, str, bytes]:
        released.wait(HANG)  # until the test is done: no load lets it answer first
        return 200, "application/json", b"{}"

    # The line proves the deadline fired: a late answer would be refused as no
    # Prometheus answer (a wall-clock bound could fail on a busy machine).
    with http_server(hang) as url:
        try:
            with pytest.raises(MetricsError, match="timed out after 0.3 s waiting for the server"):
                query_range(url, "up", T0, T1, "15s", timeout=0.3)
        finally:
            released.set()


def test_long_window_is_split_and_values_parsed():
    """More than 11,000 steps: several requests, no point twice; NaN/Inf kept."""
    seen: list[dict[str, str]] = []

    def api(h: BaseHTTPRequestHandler) -> tuple[int, str, bytes]:
        import json
        from urllib.parse import parse_qs, urlparse

        q = {k: v[0] for k, v in parse_qs(urlparse(h.path).query).items()}
        seen.append(q)
        s, e, st = float(q["start"]), float(q["end"]), float(q["step"])
        n = int(round((e - s) / st)) + 1
        vals = [[s + i * st, ["1", "NaN", "+Inf", "-Inf"][i % 4]] for i in range(n)]
        doc = {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [{"metric": {"__name__": "m", "instance": "a:1"}, "values": vals}],
            },
        }
        return 200, "application/json", json.dumps(doc).encode()

    with http_server(api) as url:
        end = T0 + timedelta(seconds=25_000)
        got = query_range(url, "m", T0, end, "1s", types={"m": "gauge"})
    assert len(seen) == 3
    assert got.num_rows == 25_001
    times = got.column("time").to_pylist()
    assert times[0] == T0 and times[-1] == end and len(set(times)) == len(times)
    v = got.column("value").to_pylist()
    assert v[0] == 1.0 and math.isnan(v[1]) and v[2] == math.inf and v[3] == -math.inf
    assert set(got.column("type").to_pylist()) == {"gauge"}


def test_cli_unreachable_server_leaves_store_unchanged(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    port = free_port()
    argv = ["ingest-gc", "--prometheus", f"http://127.0.0.1:{port}", "--db", str(db)]
    assert main(argv + ["--since", "10m", "--timeout", str(HANG)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "connection refused by the server" in err
    assert not db.exists()


def test_cli_answer_over_max_mib_is_refused_and_stores_nothing(tmp_path, capsys):
    """An answer larger than --max-mib is one line and no store: before, any
    answer was read whole into memory, however large."""
    big = b'{"status":"success","data":{"x":"' + b"a" * (2 << 20) + b'"}}'
    db = tmp_path / "s.duckdb"
    with http_server(lambda h: (200, "application/json", big)) as url:
        argv = ["ingest-gc", "--prometheus", url, "--db", str(db), "--since", "10m"]
        assert main(argv + ["--max-mib", "1"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"pyproflab: error: {url}/api/v1/metadata: answer larger than 1 MiB: "
        "narrow the window or the query\n"
    )
    assert not db.exists()
    assert main(argv + ["--max-mib", "0"]) == 2
    assert "--max-mib must be a whole number >= 1, not 0" in capsys.readouterr().err


def test_a_trickling_answer_is_cut_at_the_timeout():
    """--timeout bounds the whole answer, not each read: a server sending one byte
    every 50 ms of the 1,000 it declares, and never the last, is cut at the timeout."""
    released = threading.Event()

    class Trickle(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            try:
                for _ in range(999):  # until the test is done: no load lets it end first
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    if released.wait(0.05):
                        return
                released.wait(HANG)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args: object) -> None:
            pass

    # Cut at the deadline, not at the end: a close before the 1,000 bytes would be
    # a short body, a different line.
    with serving(Trickle) as url:
        try:
            with pytest.raises(MetricsError, match="timed out after 0.5 s waiting for the server"):
                metric_metadata(url, timeout=0.5)
        finally:
            released.set()


def test_http_error_body_is_read_only_so_far():
    """An HTTP error's explanation comes from its body's first 64 KiB: a large
    error body is not read whole, and the status is still the error."""
    body = b'{"status":"error","errorType":"bad_data","error":"' + b"x" * (1 << 20) + b'"}'
    with http_server(lambda h: (400, "application/json", body)) as url:
        with pytest.raises(MetricsError) as ei:
            query_range(url, "up", T0, T1, "15s")
    assert str(ei.value) == f"{url}/api/v1/query_range: HTTP 400"


def test_an_answer_with_warnings_is_refused_not_stored(tmp_path, capsys):
    """Prometheus answers ``success`` with ``warnings`` when part of the data could
    not be read (a failed remote read, a Thanos store down): the data field holds
    what it got. Stored, that was a partial answer that looked whole; ``infos``
    (hints about the query) are no such loss."""
    import json

    def api(h: BaseHTTPRequestHandler) -> tuple[int, str, bytes]:
        if "/metadata" in h.path:
            return 200, "application/json", b'{"status":"success","data":{}}'
        series = [
            {"metric": {"__name__": "m", "instance": "a:1"}, "values": [[T0.timestamp(), "1"]]}
        ]
        doc = {
            "status": "success",
            "data": {"resultType": "matrix", "result": series},
            "infos": ["PromQL info: metric might not be a counter"],
        }
        if "partial" in h.path:
            doc["warnings"] = ["remote_read: store 10.0.0.7:10901 unavailable"]
        return 200, "application/json", json.dumps(doc).encode()

    with http_server(api) as url:
        assert query_range(url, "m", T0, T1, "15s").num_rows == 1
        with pytest.raises(MetricsError) as ei:
            query_range(url, "partial", T0, T1, "15s")
        db = tmp_path / "s.duckdb"
        argv = ["ingest-gc", "--prometheus", url, "--db", str(db), "--since", "10m"]
        assert main(argv + ["--query", "partial", "--map", "a:1=i-1"]) == 2
    assert str(ei.value) == (
        f"{url}/api/v1/query_range: the answer may be incomplete, the server warns: "
        "remote_read: store 10.0.0.7:10901 unavailable"
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "may be incomplete" in err
    assert not db.exists()


def test_malformed_metadata_is_one_line():
    """A metadata answer whose entries are not objects was an AttributeError
    traceback out of ingest-gc."""
    body = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'
    with http_server(lambda h: (200, "application/json", body)) as url:
        with pytest.raises(MetricsError) as ei:
            metric_metadata(url)
    assert str(ei.value) == (
        f"{url}/api/v1/metadata: malformed metadata of 'resultType': not a list of objects"
    )
