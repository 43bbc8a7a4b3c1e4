"""`pyproflab serve`'s refusals: each answers its status, logs one line, spools nothing.

Wrong or missing tokens, per-service tokens, rate, oversized and bomb bodies,
malformed pushes, a full spool, too many connections, slow clients, unknown
paths; and /metrics counts them.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import logging
import select
import socket
import time
from urllib.parse import parse_qs

import pytest
from backports import zstd
from support.push_helpers import RECORDED, drain, records, replay, running_server, stored_rows

from pyproflab.sources.push import parse_app_name

DD = records(RECORDED / "dd")
PYRO = records(RECORDED / "pyro")
TOKEN = "s3cret-token-0123"


def _spooled(server) -> int:
    return len(server.spool.pending())


def _refusal_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused ")]


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.WARNING, logger="pyproflab.serve")
    return caplog


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong-token-9999"}, 401),
        ({"Authorization": f"Bearer {TOKEN}"}, 200),
        ({"DD-API-KEY": TOKEN}, 200),
        ({"Authorization": "Basic " + base64.b64encode(f"u:{TOKEN}".encode()).decode()}, 200),
    ],
    ids=["none", "wrong", "bearer", "dd-api-key", "basic"],
)
def test_tokens(tmp_path, logs, headers, status):
    with running_server(tmp_path / "spool", tokens={TOKEN: None}) as server:
        got, _ = replay(server.server_address[1], DD[0][1], DD[0][2], headers)
        assert got == status
        assert _spooled(server) == (status == 200)
    lines = _refusal_lines(logs)
    assert len(lines) == (status != 200)
    assert all(TOKEN not in line and "wrong-token" not in line for line in lines)


def test_a_token_bound_to_a_service_pushes_only_for_it(tmp_path, logs):
    tokens = {"dd-token-000001": "ddpush", "py-token-000001": "other"}
    with running_server(tmp_path / "spool", tokens=tokens) as server:
        port = server.server_address[1]
        assert replay(port, DD[0][1], DD[0][2], {"DD-API-KEY": "dd-token-000001"})[0] == 200
        assert (
            replay(port, PYRO[0][1], PYRO[0][2], {"Authorization": "Bearer py-token-000001"})[0]
            == 403
        )
        assert _spooled(server) == 1
    assert [line.split(": ")[1] for line in _refusal_lines(logs)] == ["forbidden"]


def test_rate_per_client(tmp_path, logs):
    """Past its rate a client is answered 503, which dd-trace-go sends again
    (it drops a 4xx: the 429 this was); /metrics counts as dropped the refused
    pushes their SDK will not send again: pyroscope-go's, whatever the answer,
    and dd-trace-go's answered other than 5xx."""
    with running_server(tmp_path / "spool", client_rate=0.01, client_burst=3) as server:
        port = server.server_address[1]
        got = [replay(port, PYRO[i][1], PYRO[i][2]) for i in range(5)]
        dd = replay(port, DD[0][1], DD[0][2])
        metrics = server.telemetry.render().decode()
    assert [s for s, _ in got] == [200, 200, 200, 503, 503] and dd[0] == 503
    assert int(got[3][1]["Retry-After"]) >= 1
    assert len(_refusal_lines(logs)) == 3
    assert 'pyproflab_serve_refused_total{reason="rate_limited"} 3.0' in metrics
    assert 'dropped_total{protocol="pyroscope",reason="rate_limited"} 2.0' in metrics
    dropped = [x for x in metrics.splitlines() if x.startswith("pyproflab_serve_dropped_total{")]
    assert not [x for x in dropped if 'protocol="datadog"' in x], dropped


def test_a_datadog_refusal_other_than_5xx_is_counted_dropped(tmp_path):
    with running_server(tmp_path / "spool", tokens={TOKEN: None}) as server:
        assert replay(server.server_address[1], DD[0][1], DD[0][2])[0] == 401
        metrics = server.telemetry.render().decode()
    assert 'dropped_total{protocol="datadog",reason="unauthorized"} 1.0' in metrics


def test_oversized_body_is_refused_unread(tmp_path, logs):
    _, rec, body = DD[0]
    with running_server(tmp_path / "spool", max_body=len(body) - 1) as server:
        assert replay(server.server_address[1], rec, body)[0] == 413
        assert _spooled(server) == 0
    assert "too_large" in _refusal_lines(logs)[0]


@pytest.mark.parametrize(
    ("options", "status"), [({"max_body": 1 << 20}, 413), ({"tokens": {TOKEN: None}}, 401)]
)
def test_a_refusal_before_the_body_is_read_reaches_the_client(tmp_path, logs, options, status):
    """A 16 MiB body refused unread: the client still reads the answer. Before,
    the server closed with the body unread and the client got a reset
    (BrokenPipeError or ConnectionResetError) instead of the status."""
    with running_server(tmp_path / "spool", **options) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
        try:
            ctype = {"Content-Type": "multipart/form-data; boundary=b"}
            conn.request("POST", "/ingest?name=app", body=bytes(16 << 20), headers=ctype)
            assert conn.getresponse().status == status
        finally:
            conn.close()
        assert _spooled(server) == 0


def _pyro_with(profile: bytes) -> tuple[dict, bytes]:
    """A recorded pyroscope push whose profile part is replaced by ``profile``."""
    _, rec, body = PYRO[0]
    boundary = rec["header"]["Content-Type"][0].split("boundary=")[1].encode()
    head, _, rest = body.partition(b"\r\n\r\n")
    tail = rest[rest.index(b"\r\n--" + boundary) :]
    return rec, head + b"\r\n\r\n" + profile + tail


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_bomb_is_refused_before_the_ack(tmp_path, logs, kind):
    raw = b"\0" * (64 << 20)
    if kind == "gzip":
        bomb = gzip.compress(raw, 9)
    else:
        bomb = zstd.compress(raw)
    rec, body = _pyro_with(bomb)
    assert len(body) < 1 << 20
    with running_server(tmp_path / "spool", max_profile_bytes=16 << 20) as server:
        assert replay(server.server_address[1], rec, body)[0] == 413
        assert _spooled(server) == 0
    assert "bomb" in _refusal_lines(logs)[0]


@pytest.mark.parametrize(
    ("mutate", "status", "reason"),
    [
        (lambda r, b: (r, b[: len(b) // 2]), 400, "malformed"),
        (lambda r, b: (r, b.replace(b'name="event"', b'name="other"')), 400, "malformed"),
        (lambda r, b: (r, b"not multipart at all"), 400, "malformed"),
    ],
    ids=["truncated", "no-event", "garbage"],
)
def test_malformed_datadog_uploads(tmp_path, logs, mutate, status, reason):
    rec, body = mutate(DD[0][1], DD[0][2])
    with running_server(tmp_path / "spool") as server:
        assert replay(server.server_address[1], rec, body)[0] == status
        assert _spooled(server) == 0
    assert f": {reason}: " in _refusal_lines(logs)[0]


def _profile_of(body: bytes, ctype: str, name: str) -> bytes:
    from pyproflab.sources.multipart import parse_multipart

    return next(p.data for p in parse_multipart(body, ctype) if p.name == name)


_REAL = _profile_of(PYRO[0][2], PYRO[0][1]["header"]["Content-Type"][0], "profile")
_RAW = gzip.decompress(_REAL)
GARBAGE = {
    "text": b"hello, not a profile",
    "gzip-of-text": gzip.compress(b"hello, not a profile"),
    "truncated-raw": _RAW[: len(_RAW) // 2],
    "gzip-of-truncated-raw": gzip.compress(_RAW[: len(_RAW) // 2]),
    "zstd-of-text": zstd.compress(b"hello, not a profile"),
    "zeros": bytes(100),
    "gzip-of-nothing": gzip.compress(b""),
}


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_a_profile_the_ingester_would_refuse_is_400_before_the_ack(tmp_path, logs, name):
    """Before, each was answered 200 and refused by the ingester later (the SDK
    believed it delivered); the ingester's own steps refuse it too."""
    from pyproflab.decode import decode_bytes
    from pyproflab.errors import ProfileError
    from pyproflab.sources.push import pprof_bytes

    with pytest.raises(ProfileError):
        decode_bytes(pprof_bytes(GARBAGE[name], source=name, max_bytes=1 << 30), source=name)
    rec, body = _pyro_with(GARBAGE[name])
    with running_server(tmp_path / "spool") as server:
        assert replay(server.server_address[1], rec, body)[0] == 400
        assert replay(server.server_address[1], *_pyro_with(_REAL))[0] == 200
        assert _spooled(server) == 1
    (line,) = _refusal_lines(logs)
    assert ": malformed: profile: " in line and "\n" not in line


def test_a_datadog_upload_with_one_bad_profile_is_refused_whole(tmp_path, logs):
    _, rec, body = DD[0]
    ctype = rec["header"]["Content-Type"][0]
    good = _profile_of(body, ctype, "cpu.pprof")
    bad = body.replace(good, zstd.compress(_RAW[: len(_RAW) // 2]))  # whole zstd, cut pprof
    with running_server(tmp_path / "spool") as server:
        assert replay(server.server_address[1], rec, bad)[0] == 400
        assert replay(server.server_address[1], rec, body)[0] == 200
        assert _spooled(server) == 1
    assert ": malformed: cpu.pprof: " in _refusal_lines(logs)[0]


def test_max_tag_value_cuts_what_the_ingester_stores(tmp_path):
    """serve --max-tag-value reaches the store: before, it was only used for the
    403 check, and the ingester cut every value at the default 256 bytes. It
    cuts values, not keys: keys were cut too ('__ses' for '__session_id__'),
    and two keys sharing their first bytes kept one value."""
    _, rec, body = PYRO[0]
    with running_server(tmp_path / "spool", max_tag_value=5) as server:
        assert replay(server.server_address[1], rec, body)[0] == 200
    assert drain(tmp_path / "spool", tmp_path / "s.duckdb") == 1
    (row,) = stored_rows(tmp_path / "s.duckdb")
    sent = parse_app_name(parse_qs(rec["url"].split("?", 1)[1])["name"][0])[1]
    assert max(map(len, sent.values())) > 5
    assert dict(row["labels"]) == {k: v[:5] for k, v in sent.items()}
    assert (row["service"], row["instance"]) == ("pyrop", sent["instance"][:5])


def test_dd_telemetry_is_404_without_a_log_line(tmp_path, logs):
    """dd-trace-go posts its telemetry to the agent every minute from every
    instance: before, each post was a 'refused ... not_found' warning. It is
    still 404 and counted in /metrics, without the line; any other unknown
    path keeps its line."""
    _, rec, body = DD[0]
    telemetry = dict(rec, url="http://agent:8126/telemetry/proxy/api/v2/apmtelemetry")
    other = dict(rec, url="http://agent:8126/v0.4/traces")
    with running_server(tmp_path / "spool") as server:
        port = server.server_address[1]
        assert replay(port, telemetry, b'{"request_type":"app-heartbeat"}')[0] == 404
        assert replay(port, other, b"[]")[0] == 404
        metrics = server.telemetry.render().decode()
    lines = _refusal_lines(logs)
    assert len(lines) == 1 and "/v0.4/traces: not_found" in lines[0], lines
    assert 'pyproflab_serve_refused_total{reason="not_found"} 2.0' in metrics


def test_pyroscope_formats_other_than_pprof_are_415(tmp_path, logs):
    _, rec, body = PYRO[0]
    rec = dict(rec, url=rec["url"] + "&format=folded")
    with running_server(tmp_path / "spool") as server:
        assert replay(server.server_address[1], rec, body)[0] == 415
    assert "unsupported_format" in _refusal_lines(logs)[0]


def test_full_spool_answers_503_with_retry_after(tmp_path, logs):
    _, rec, body = DD[0]
    with running_server(tmp_path / "spool", spool={"max_bytes": len(body) + 4096}) as server:
        port = server.server_address[1]
        assert replay(port, rec, body)[0] == 200
        status, headers = replay(port, DD[1][1], DD[1][2])
        assert status == 503 and int(headers["Retry-After"]) >= 1
        assert _spooled(server) == 1
    assert "spool_full" in _refusal_lines(logs)[0]


def _trickle(s: socket.socket, data: bytes, every: float) -> int:
    """Send ``data`` one byte every ``every`` s until the peer closes the
    connection; the bytes sent until then (``len(data)``: it never did)."""
    for i in range(len(data)):
        try:
            s.send(data[i : i + 1])
        except OSError:
            return i
        if select.select([s], [], [], every)[0]:  # readable: the peer closed it
            try:
                assert s.recv(100) == b"", "an answer, not a cut"
            except OSError:
                pass  # reset: closed too
            return i + 1
    return len(data)


def test_slow_clients_are_cut_at_the_deadline(tmp_path, logs):
    """Slowloris: a client trickling a request's bytes (one every 0.1 s: its head
    would take 300 s) is cut at idle + deadline, 6 s here. The idle wait is 5 s,
    not 0.5: a test process stalled 0.5 s between two bytes would be cut as idle."""
    _, rec, body = DD[0]
    head = (
        f"POST /profiling/v1/input HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
        f"X-Pad: {'p' * 2940}\r\n"
    ).encode()
    with running_server(tmp_path / "spool", idle=5, deadline=1.0) as server:
        port = server.server_address[1]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            sent = _trickle(s, head, 0.1)
        # Cut by the server while most of its head was still to come (before, a
        # wall bound of 10 s on a 6 s head decided it).
        assert sent < len(head), "the server waited for the whole head"
        assert _spooled(server) == 0
    lines = _refusal_lines(logs)
    assert len(lines) == 1 and ": deadline: " in lines[0], lines  # one line, not a 401 as well


def test_a_connection_closed_inside_its_headers_is_one_closed_early_line(tmp_path, logs):
    """Headers cut by the client's close are not a request: one ``closed_early``
    line, not a refusal of the token they never reached."""
    with running_server(tmp_path / "spool", tokens={TOKEN: None}) as server:
        port = server.server_address[1]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"POST /profiling/v1/input HTTP/1.1\r\nHost: x\r\nContent-Len")
            s.shutdown(socket.SHUT_WR)
            s.settimeout(5)
            while s.recv(100):  # the server closes it without an answer
                pass
        deadline = time.monotonic() + 300  # bounds a hang only
        while not _refusal_lines(logs) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _spooled(server) == 0
    lines = _refusal_lines(logs)
    assert len(lines) == 1 and ": closed_early: " in lines[0], lines


def test_connections_over_the_cap_are_503(tmp_path, logs):
    with running_server(tmp_path / "spool", max_connections=2, idle=5) as server:
        port = server.server_address[1]
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        time.sleep(0.3)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            assert s.recv(100).startswith(b"HTTP/1.1 503")
        for h in held:
            h.close()
    assert any("too_many_connections" in line for line in _refusal_lines(logs))


def test_unknown_paths_are_404(tmp_path, logs):
    rec = dict(DD[0][1], url="http://x/telemetry/proxy/api/v2/apmtelemetry")
    with running_server(tmp_path / "spool") as server:
        assert replay(server.server_address[1], rec, b"{}")[0] == 404


def test_metrics_count_pushes_and_refusals(tmp_path):
    import http.client

    with running_server(tmp_path / "spool", tokens={TOKEN: None}) as server:
        port = server.server_address[1]
        replay(port, DD[0][1], DD[0][2], {"DD-API-KEY": TOKEN})
        replay(port, PYRO[0][1], PYRO[0][2], {"Authorization": f"Bearer {TOKEN}"})
        replay(port, PYRO[1][1], PYRO[1][2])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
    assert 'pyproflab_serve_pushes_total{protocol="datadog"} 1.0' in text
    assert 'pyproflab_serve_pushes_total{protocol="pyroscope"} 1.0' in text
    n_dd = sum(1 for _ in DD[0][2].split(b'.pprof"; filename=')) - 1
    assert f'pyproflab_serve_profiles_received_total{{protocol="datadog"}} {n_dd}.0' in text
    assert 'pyproflab_serve_refused_total{reason="unauthorized"} 1.0' in text
    assert "pyproflab_serve_spool_files 2.0" in text
    assert (
        "pyproflab_serve_ingest_lag_seconds" in text
        and "pyproflab_serve_ack_seconds_bucket" in text
    )


def test_without_a_token_only_loopback(tmp_path):
    from pyproflab.errors import UsageError
    from pyproflab.serve.guard import Tokens
    from pyproflab.serve.server import listen_check

    with pytest.raises(UsageError, match="127.0.0.1"):
        listen_check("0.0.0.0", Tokens())
    listen_check("127.0.0.1", Tokens())
    listen_check("0.0.0.0", Tokens({TOKEN: None}))


def test_an_address_in_use_is_one_line(tmp_path):
    from pyproflab.errors import UsageError
    from pyproflab.serve.guard import Tokens
    from pyproflab.serve.server import Options, PushServer
    from pyproflab.sources.spool import Spool

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UsageError, match=f"--listen 127.0.0.1:{port}: .*in use"):
            PushServer(Options(port=port), Spool(tmp_path / "spool"), Tokens())


def test_tls(tmp_path):
    """With --tls-cert/--tls-key the same push is taken over HTTPS, and plain
    HTTP on that port is not."""
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl not found (it makes the test's certificate)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    _, rec, body = PYRO[0]
    with running_server(tmp_path / "spool", certfile=str(cert), keyfile=str(key)) as server:
        port = server.server_address[1]
        ctx = ssl.create_default_context(cafile=str(cert))
        ctx.check_hostname = False
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
        h = {k: v[0] for k, v in rec["header"].items()}
        conn.request("POST", rec["url"].split("recorded.invalid", 1)[1], body=body, headers=h)
        assert conn.getresponse().status == 200
        conn.close()
        with pytest.raises((http.client.HTTPException, OSError)):
            replay(port, rec, body)
        assert _spooled(server) == 1
