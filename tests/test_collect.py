"""`pyproflab collect` against a fake pprof fleet (http.server on 127.0.0.1:0).

The fake serves real Go profiles (profgen's, stamped per target so each body
is distinct, as live services' are) and real-format /metrics text, with one
fault mode per target: down, never answering, HTTP 500, 500 then success, an
HTML body, a missing token and a wrong token.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import secrets
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from pyproflab._proto import profile_pb2
from pyproflab.cli import main
from pyproflab.collect import archive_path, backoff_delay, collect
from pyproflab.errors import UsageError
from pyproflab.sources.targets import Target, load_targets, targets_from_dict
from pyproflab.store.connection import Store

TESTDATA = Path(__file__).resolve().parent / "testdata" / "collect"
METRICS_TEXT = (TESTDATA / "metrics.txt").read_text()
HANG = 300  # seconds a "hang" target holds a request at most: bounds a hang only
SOURCE_KIND = {
    "cpu": "cpu",
    "heap": "heap",
    "allocs": "allocs",
    "goroutine": "goroutine",
    "mutex": "mutex",
    "block": "block",
}
ENDPOINT_TYPE = {
    "profile": "cpu",
    "heap": "heap",
    "allocs": "allocs",
    "goroutine": "goroutine",
    "mutex": "mutex",
    "block": "block",
}


# --- the fake fleet --------------------------------------------------------------------


@dataclass
class FakeTarget:
    mode: str = "good"  # good hang err500 flaky html
    auth: str | None = None  # the Authorization value /debug/pprof requires
    requests: Counter = field(default_factory=Counter)  # endpoint -> count
    # endpoint -> (arrived, answered) of each request answered with a status and body
    served: dict[str, list[tuple[datetime, datetime]]] = field(default_factory=dict)


class FakeFleet:
    """One server; target NAME lives under /t/NAME/ (a base URL with a path)."""

    def __init__(self, profiles: dict[str, Path]):
        self.profiles = profiles
        self.targets: dict[str, FakeTarget] = {}
        self.released = threading.Event()  # ends every sleep at teardown
        self._bodies: dict[tuple[str, str], bytes] = {}
        self._lock = threading.Lock()
        self._body_lock = threading.Lock()
        fleet = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                fleet.handle(self)

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # collect opens dozens of connections at once

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda *a: None  # clients that gave up: expected
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add(self, **targets: FakeTarget) -> None:
        """Serve these targets; their bodies are made now, not while collect waits."""
        self.targets.update(targets)
        for name in targets:
            for ptype in SOURCE_KIND:
                self.body(name, ptype)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/t/{name}"

    def body(self, name: str, ptype: str) -> bytes:
        """The gzipped profile target ``name`` serves for ``ptype``: profgen's, with
        time_nanos stamped from (name, type), so bodies differ across targets but
        not across runs."""
        with self._body_lock:
            key = (name, ptype)
            if key not in self._bodies:
                p = profile_pb2.Profile()
                p.ParseFromString(gzip.decompress(self.profiles[SOURCE_KIND[ptype]].read_bytes()))
                salt = int(hashlib.sha256(f"{name}/{ptype}".encode()).hexdigest()[:8], 16)
                p.time_nanos = 1_700_000_000_000_000_000 + salt
                self._bodies[key] = gzip.compress(p.SerializeToString(), mtime=0)
            return self._bodies[key]

    def all_bodies(self) -> dict[str, bytes]:
        """sha256 of decompressed content -> gzipped body, of every target's bodies."""
        return {hashlib.sha256(gzip.decompress(b)).hexdigest(): b for b in self._bodies.values()}

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        arrived = datetime.now(UTC)
        parts = urlsplit(h.path)
        segs = parts.path.strip("/").split("/")
        if len(segs) < 3 or segs[0] != "t" or segs[1] not in self.targets:
            return self.reply(h, 404, b"404 page not found\n", "text/plain")
        name, rest = segs[1], "/".join(segs[2:])
        t = self.targets[name]
        with self._lock:
            t.requests[rest] += 1
            n = t.requests[rest]
        pprof = rest.startswith("debug/pprof/")
        if t.mode == "hang":  # until teardown: any timeout, however loaded, fires first
            self.released.wait(HANG)
            return self.reply(h, 200, b"too late", "text/plain")
        if t.mode == "err500":
            return self.reply(h, 500, b"internal error\n", "text/plain")
        if t.mode == "html":
            return self.reply(h, 200, b"<html><body><h1>Welcome</h1></body></html>", "text/html")
        if pprof and t.auth is not None and h.headers.get("Authorization") != t.auth:
            return self.reply(h, 401, b"unauthorized\n", "text/plain")
        if pprof and t.mode == "flaky" and n == 1:
            self.note_served(t, rest, arrived)
            return self.reply(h, 503, b"busy\n", "text/plain")
        if rest == "metrics":
            return self.reply(h, 200, METRICS_TEXT.encode(), "text/plain; version=0.0.4")
        ptype = ENDPOINT_TYPE.get(rest.removeprefix("debug/pprof/"))
        if not pprof or ptype is None:
            return self.reply(h, 404, b"404 page not found\n", "text/plain")
        seconds = parse_qs(parts.query).get("seconds")
        if seconds:  # a windowed profile answers when its window is over
            self.released.wait(float(seconds[0]))
        body = self.body(name, ptype)
        self.note_served(t, rest, arrived)
        return self.reply(h, 200, body, "application/octet-stream")

    def note_served(self, t: FakeTarget, rest: str, arrived: datetime) -> None:
        """Note a request's arrival and its answer's time, taken before the answer
        is sent: the client has it only later."""
        with self._lock:
            t.served.setdefault(rest, []).append((arrived, datetime.now(UTC)))

    @staticmethod
    def reply(h: BaseHTTPRequestHandler, code: int, body: bytes, ctype: str) -> None:
        try:
            h.send_response(code)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        except OSError:
            pass  # the client timed out and left

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fleet(go_profiles: dict[str, Path]) -> Iterator[FakeFleet]:
    f = FakeFleet(go_profiles)
    try:
        yield f
    finally:
        f.close()


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def all_bytes(folder: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in folder.rglob("*") if p.is_file()]


# --- targets files ----------------------------------------------------------------------


def write_toml(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_example_targets_file_loads() -> None:
    targets = load_targets(TESTDATA / "targets.toml")
    assert [t.name for t in targets] == [
        "notesd/v1/i-1",
        "notesd/v1/i-2",
        "notesd/v2/i-3",
        "notesd/v2/i-4",
    ]
    assert targets[2].auth_env == "NOTESD_PPROF_AUTH"
    assert targets[3].types == ("cpu", "heap")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[[target]]\nservice = "a"\n', "target 1: missing version"),
        ("[[target]\n", "not valid TOML"),
        ('title = "x"\n', "unknown top-level key 'title'"),
        ("", "no targets"),
        (
            '[[target]]\nservice="a"\nversion="v1"\ninstance="i"\nurl="ftp://h/"\n',
            "target 1 (a/v1/i): url must start with http:// or https://",
        ),
        (
            '[[target]]\nservice="a"\nversion="v1"\ninstance="i"\nurl="http://h"\ntoken="x"\n',
            "target 1 (a/v1/i): unknown key 'token'",
        ),
        (
            '[[target]]\nservice="a"\nversion="v1"\ninstance="i"\nurl="http://h"\n'
            'types=["cpu","wall"]\n',
            "unknown profile type 'wall'",
        ),
        (
            '[[target]]\nservice="a"\nversion="v1"\ninstance="i"\nurl="http://h"\n'
            'auth_env="not a name"\n',
            "auth_env must be the name of an environment variable",
        ),
        (
            '[[target]]\nservice="a"\nversion="v1"\ninstance="i"\nurl="http://h:1"\n'
            '[[target]]\nservice="a"\nversion="v1"\ninstance="i"\nurl="http://h:2"\n',
            "target 2 (a/v1/i): same service/version/instance as target 1",
        ),
        (
            '[[target]]\nservice="a"\nversion="v1"\ninstance="i"\nurl="http://h?x=1"\n',
            "without ?query",
        ),
    ],
)
def test_bad_targets_file_is_one_line(tmp_path: Path, body: str, message: str) -> None:
    path = write_toml(tmp_path / "targets.toml", body)
    with pytest.raises(UsageError) as e:
        load_targets(path)
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"{path}: ")
    assert message in text


def test_url_with_credentials_is_refused_without_echoing_them(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path / "t.toml",
        '[[target]]\nservice="a"\nversion="v1"\n'
        'instance="i"\nurl="http://bob:hunter2@127.0.0.1:1/"\n',
    )
    with pytest.raises(UsageError) as e:
        load_targets(path)
    assert "must not hold credentials" in str(e.value) and "hunter2" not in str(e.value)


def test_backoff_grows_and_is_jittered() -> None:
    for attempt, top in ((1, 0.5), (2, 1.0), (3, 2.0), (10, 8.0)):
        delays = {backoff_delay(attempt, 0.5) for _ in range(20)}
        assert all(top / 2 <= d <= top for d in delays)
        assert len(delays) > 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--types", "cpu,wall"], "unknown profile type 'wall'"),
        (["--db", "/nonexistent-dir/x.duckdb"], "does not exist"),
        (["--seconds", "0"], "must be >= 1"),
        (["--timeout", "inf"], "argument --timeout: must be a finite number > 0"),  # a traceback
        (["--timeout", "nan"], "argument --timeout: must be a finite number > 0"),
        (
            ["--metrics-interval", "inf"],
            "argument --metrics-interval: must be a finite number >= 0",
        ),
        (["--metrics-interval", "-1"], "argument --metrics-interval: must be a finite number >= 0"),
    ],
)
def test_cli_usage_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    targets = write_toml(
        tmp_path / "t.toml",
        '[[target]]\nservice="a"\nversion="v1"\n'
        f'instance="i"\nurl="http://127.0.0.1:{closed_port()}"\n',
    )
    db = ["--db", str(tmp_path / "s.duckdb")] if "--db" not in args else []
    try:
        code = main(["collect", str(targets), *db, "--archive", str(tmp_path / "a"), *args])
    except SystemExit as e:  # argparse's own errors
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_cli_bad_toml_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    targets = write_toml(tmp_path / "t.toml", "[[target]\n")
    assert main(["collect", str(targets), "--db", str(tmp_path / "s.duckdb")]) == 2
    assert "not valid TOML" in capsys.readouterr().err
    assert not (tmp_path / "s.duckdb").exists()  # checked before the store is opened


# --- the fault matrix, end to end through the CLI -----------------------------------------


GOOD_TYPES = ["cpu", "heap", "allocs", "goroutine", "mutex", "block"]


def test_collect_faults_each_give_one_line_and_the_rest_lands(
    fleet: FakeFleet,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = f"Bearer s3cret-{secrets.token_hex(12)}"
    wrong = f"Bearer wrong-{secrets.token_hex(12)}"
    monkeypatch.setenv("PYPROFLAB_TEST_AUTH", token)
    monkeypatch.setenv("PYPROFLAB_TEST_WRONG_AUTH", wrong)
    monkeypatch.delenv("PYPROFLAB_TEST_UNSET", raising=False)
    fleet.add(
        good=FakeTarget(),
        secure=FakeTarget(auth=token),
        err500=FakeTarget("err500"),
        flaky=FakeTarget("flaky"),
        html=FakeTarget("html"),
        notoken=FakeTarget(auth=token),
        badtoken=FakeTarget(auth=token),
    )
    down = f"http://127.0.0.1:{closed_port()}"
    rows = [
        ("good", fleet.url("good"), None, None),
        ("secure", fleet.url("secure"), "PYPROFLAB_TEST_AUTH", None),
        ("flaky", fleet.url("flaky"), None, ["cpu", "heap"]),
        ("down", down, None, ["cpu", "heap"]),
        ("err500", fleet.url("err500"), None, ["heap"]),
        ("html", fleet.url("html"), None, ["goroutine"]),
        ("notoken", fleet.url("notoken"), None, ["heap"]),
        ("badtoken", fleet.url("badtoken"), "PYPROFLAB_TEST_WRONG_AUTH", ["heap"]),
        ("noenv", fleet.url("good") + "/x", "PYPROFLAB_TEST_UNSET", ["heap"]),
    ]
    text = ""
    for name, url, env, types in rows:
        text += f'[[target]]\nservice = "fleet"\nversion = "v1"\ninstance = "{name}"\n'
        text += f'url = "{url}"\n'
        if env:
            text += f'auth_env = "{env}"\n'
        if types:
            text += f"types = {types!r}\n".replace("'", '"')
    targets_file = write_toml(tmp_path / "targets.toml", text)
    db = tmp_path / "store" / "fleet.duckdb"
    db.parent.mkdir()

    before = datetime.now(UTC)
    code = main(
        [
            "collect",
            str(targets_file),
            "--db",
            str(db),
            "--seconds",
            "1",
            # Bounds a hang only: every target here answers at once, so a short
            # one raced a loaded machine (an answer held 2.5 s timed out with 2).
            # The next test has the target that never answers.
            "--timeout",
            "60",
            "--retries",
            "1",
            "--metrics-interval",
            "0.5",
            "--concurrency",
            "32",
        ]
    )
    after = datetime.now(UTC)
    out, err = capsys.readouterr()
    assert code == 1, err

    p = fleet.port

    def url(name: str, ep: str) -> str:
        return f"http://127.0.0.1:{p}/t/{name}/{ep}"

    expected = {
        f"collect: fleet/v1/down cpu: connection refused by {down}/debug/pprof/profile "
        "(after 2 attempts)",
        f"collect: fleet/v1/down heap: connection refused by {down}/debug/pprof/heap "
        "(after 2 attempts)",
        f"collect: fleet/v1/err500 heap: HTTP 500 from {url('err500', 'debug/pprof/heap')} "
        "(after 2 attempts)",
        "collect: fleet/v1/html goroutine: not a pprof profile (it is text, e.g. JSON) from "
        f"{url('html', 'debug/pprof/goroutine')}",
        f"collect: fleet/v1/notoken heap: HTTP 401 from {url('notoken', 'debug/pprof/heap')} "
        "(the target has no auth_env)",
        f"collect: fleet/v1/badtoken heap: HTTP 401 from {url('badtoken', 'debug/pprof/heap')} "
        "(check the value of $PYPROFLAB_TEST_WRONG_AUTH)",
        "collect: fleet/v1/noenv: environment variable PYPROFLAB_TEST_UNSET (auth_env) is not "
        "set; target skipped",
    }
    # A run longer than the progress interval (a loaded machine) also logs
    # "collecting: n/m fetches" lines; they report timing, not faults.
    lines = [line for line in err.strip().splitlines() if not line.startswith("collecting: ")]
    got = set(lines)
    # Every /metrics of the down, 500 and html targets fails: one line each,
    # named by target. How many scrapes were tried depends on timing (a tick is
    # skipped while a scrape is out), so only the reason is compared.
    metric_lines = {
        line
        for line in got - expected
        if line.startswith(
            (
                "collect: fleet/v1/down metrics: ",
                "collect: fleet/v1/err500 metrics: ",
                "collect: fleet/v1/html metrics: ",
            )
        )
    }
    assert got - metric_lines == expected, "\n".join(sorted(got ^ expected))
    assert len(metric_lines) == 3
    assert re.match(
        r"collect: fleet/v1/down metrics: (\d+) of \1 scrapes failed: connection refused by "
        + re.escape(f"{down}/metrics"),
        next(m for m in metric_lines if "/down " in m),
    )
    assert "HTTP 500 from" in next(m for m in metric_lines if "err500" in m)
    assert "not a Prometheus exposition" in next(m for m in metric_lines if "html" in m)
    assert len(lines) == len(got)  # one line each, no repeats
    assert out.startswith("collected 14 profiles (14 new, 0 already present) and "), out
    assert re.search(r"; 6 fetches failed, \d+ scrapes failed, 1 target skipped$", out.strip())

    # Retries: transient faults retried once, 401 and a bad body never.
    assert fleet.targets["flaky"].requests["debug/pprof/profile"] == 2
    assert fleet.targets["err500"].requests["debug/pprof/heap"] == 2
    assert fleet.targets["notoken"].requests["debug/pprof/heap"] == 1
    assert fleet.targets["badtoken"].requests["debug/pprof/heap"] == 1
    assert fleet.targets["html"].requests["debug/pprof/goroutine"] == 1

    with Store.open(db, read_only=True) as store:
        rows_ = store.sql(
            "SELECT instance, profile_type, service, version, source, window_start, "
            "window_end, content_hash FROM profiles ORDER BY instance, profile_type"
        ).to_pylist()
        metric_rows = store.sql(
            "SELECT instance, count(*) AS n, count(DISTINCT time) AS scrapes, min(time) AS t0, "
            "max(time) AS t1 FROM metric_samples GROUP BY ALL ORDER BY instance"
        ).to_pylist()
    landed = {(r["instance"], r["profile_type"]) for r in rows_}
    assert landed == (
        {("good", t) for t in GOOD_TYPES}
        | {("secure", t) for t in GOOD_TYPES}
        | {("flaky", "cpu"), ("flaky", "heap")}
    )
    for r in rows_:
        assert (r["service"], r["version"]) == ("fleet", "v1")
        assert before <= r["window_start"] <= r["window_end"] <= after
        endpoint = {"cpu": "profile"}.get(r["profile_type"], r["profile_type"])
        windowed = r["profile_type"] in ("cpu", "allocs", "mutex", "block")
        assert r["source"] == url(r["instance"], f"debug/pprof/{endpoint}") + (
            "?seconds=1" if windowed else ""
        )
        # The window is the request whose body landed: from before it was sent to
        # after its answer came (no upper bound on its length: a loaded machine
        # stretches it), and not an earlier attempt's (flaky's first was a 503).
        *earlier, (arrived, answered) = fleet.targets[r["instance"]].served[
            f"debug/pprof/{endpoint}"
        ]
        assert r["window_start"] <= arrived and answered <= r["window_end"]
        assert all(a <= r["window_start"] for _, a in earlier)
        assert len(earlier) == (r["instance"] == "flaky")
        if windowed:  # the fake answers ?seconds=1 after 1 s
            assert r["window_end"] - r["window_start"] >= timedelta(seconds=1)
        else:  # snapshots are taken when the window ends
            assert r["window_start"] >= before + timedelta(seconds=1)
        assert (
            r["content_hash"]
            == hashlib.sha256(
                gzip.decompress(fleet.body(r["instance"], r["profile_type"]))
            ).hexdigest()
        )

    # Metrics: every target whose /metrics answers, scraped at 0, 0.5, 1 s of the window
    # (on a loaded machine a tick may be skipped while the previous scrape is out), then
    # once more when the window's fetches have all ended.
    by_instance = {r["instance"]: r for r in metric_rows}
    assert set(by_instance) == {"good", "secure", "flaky", "notoken", "badtoken"}
    for r in by_instance.values():
        assert 2 <= r["scrapes"] <= 4 and r["n"] == r["scrapes"] * 23
        assert before <= r["t0"] <= r["t1"] <= after

    # The archive holds exactly the good bodies, byte for byte, at their content address.
    archive = db.parent / "archive"
    files = {p.name: b for p, b in all_bytes(archive)}
    good = {h: b for h, b in fleet.all_bodies().items() if h in {r["content_hash"] for r in rows_}}
    assert len(good) == 14
    assert files == {f"{h}.pb.gz": b for h, b in good.items()}
    for h in good:
        assert archive_path(archive, h).is_file()

    # Secrets: nowhere in the store, the archive or the output.
    for secret in (token, wrong, token.split()[1], wrong.split()[1]):
        assert secret not in out and secret not in err
        for path, data in all_bytes(db.parent):
            assert secret.encode() not in data, path
    # ... while the right token did reach the secure target.
    assert fleet.targets["secure"].requests["debug/pprof/heap"] == 1


def test_collect_a_target_that_never_answers_times_out(
    fleet: FakeFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each fetch and scrape of a target that never answers (the fake holds every
    request until teardown) ends at its deadline: ``timeout``, plus ``seconds`` for a
    windowed one, per attempt, and one line each. Nothing here must beat the
    deadline, so no load can change the outcome."""
    fleet.add(hang=FakeTarget("hang"))
    targets = write_toml(
        tmp_path / "targets.toml",
        '[[target]]\nservice = "fleet"\nversion = "v1"\ninstance = "hang"\n'
        f'url = "{fleet.url("hang")}"\ntypes = ["cpu", "heap"]\n',
    )
    argv = ["collect", str(targets), "--db", str(tmp_path / "s.duckdb"), "--seconds", "1"]
    argv += ["--timeout", "0.5", "--retries", "1", "--metrics-interval", "0.5"]
    assert main(argv) == 2  # nothing collected
    err = capsys.readouterr().err
    lines = sorted(line for line in err.splitlines() if not line.startswith("collecting: "))
    ep = fleet.url("hang") + "/debug/pprof"
    assert lines[:2] == [
        f"collect: fleet/v1/hang cpu: timed out after 1.5 s waiting for {ep}/profile "
        "(after 2 attempts)",
        f"collect: fleet/v1/hang heap: timed out after 0.5 s waiting for {ep}/heap "
        "(after 2 attempts)",
    ], err
    # A tick is skipped while the previous scrape is out, so how many were tried
    # depends on timing; each one that was timed out.
    assert re.fullmatch(
        r"collect: fleet/v1/hang metrics: (\d+) of \1 scrapes failed: timed out after 0.5 s "
        + re.escape(f"waiting for {fleet.url('hang')}/metrics")
        + r"(; \d+ ticks? skipped while one was out)?",
        lines[2],
    ), err
    assert len(lines) == 3, err
    requests = fleet.targets["hang"].requests
    assert (requests["debug/pprof/profile"], requests["debug/pprof/heap"]) == (2, 2)


def test_recollecting_the_same_bodies_adds_no_duplicates(
    fleet: FakeFleet,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = f"Bearer {secrets.token_hex(16)}"
    monkeypatch.setenv("PYPROFLAB_TEST_AUTH", token)
    fleet.add(a=FakeTarget(), b=FakeTarget(auth=token))
    targets = targets_from_dict(
        {
            "target": [
                {"service": "api", "version": "v1", "instance": "a", "url": fleet.url("a")},
                {
                    "service": "api",
                    "version": "v2",
                    "instance": "b",
                    "url": fleet.url("b"),
                    "auth_env": "PYPROFLAB_TEST_AUTH",
                },
            ]
        }
    )
    archive = tmp_path / "archive"
    seen: list[tuple[int, int]] = []
    kwargs = dict(
        seconds=1,
        types=["cpu", "heap", "mutex"],
        archive_dir=archive,
        metrics_interval=0.5,
        timeout=60,  # bounds a hang only: with 2 s and no retry, a slow answer failed it
        retries=0,
        concurrency=8,
    )
    with Store.open(tmp_path / "s.duckdb") as store:
        first = collect(store, targets, progress=lambda d, t: seen.append((d, t)), **kwargs)
        assert first.errors() == [] and first.exit_code == 0
        assert (first.new, first.present, first.failed) == (6, 0, 0)
        n_first = first.metric_samples
        # Ticks at 0, 0.5 and 1 s, one skipped only while the previous scrape is out,
        # then the closing scrape once the windowed fetches ended (never skipped).
        for t in first.targets:
            assert t.scrapes is not None
            assert (t.scrapes.ok, t.scrapes.failed) == (4 - t.scrapes.skipped, 0)
            assert t.scrapes.samples == 23 * t.scrapes.ok
        # Scrapes on each side of every windowed profile (CPU coverage and --per use
        # the two that bracket it): the tick at 1 s came before the profiles' answers.
        unbracketed = store.sql(
            "SELECT p.instance, p.profile_type FROM profiles p WHERE p.window_end IS NOT NULL "
            "AND p.profile_type IN ('cpu', 'mutex') AND NOT EXISTS (SELECT 1 FROM "
            "metric_samples m WHERE m.instance = p.instance AND m.time >= p.window_end)"
        ).to_pylist()
        assert unbracketed == []
        assert seen[0] == (0, 6) and seen[-1] == (6, 6)
        assert first.summary().startswith(
            "collected 6 profiles (6 new, 0 already present) "
            f"and {n_first} metric samples from 2 targets in "
        )
        ids = sorted(f.profile_id for f in first.fetches)
        stamps = {p: p.stat().st_mtime_ns for p in archive.rglob("*.pb.gz")}
        assert len(stamps) == 6

        again = collect(store, targets, **kwargs)
        assert (again.new, again.present, again.failed) == (0, 6, 0)
        assert sorted(f.profile_id for f in again.fetches) == ids
        assert store.sql("SELECT count(*) FROM profiles").column(0)[0].as_py() == 6
        assert {p: p.stat().st_mtime_ns for p in archive.rglob("*.pb.gz")} == stamps
        # Metric samples are per scrape time, so a second window adds its own.
        n_all = store.sql("SELECT count(*) FROM metric_samples").column(0)[0].as_py()
        assert n_all == n_first + again.metric_samples and again.metric_samples > 0
    assert token not in repr(first) and token not in repr(again)
    assert not any(token.encode() in b for _, b in all_bytes(tmp_path))


def test_collect_keeps_going_when_every_target_is_down(tmp_path: Path) -> None:
    targets = [Target("api", "v1", f"i-{i}", f"http://127.0.0.1:{closed_port()}") for i in range(3)]
    with Store.open(":memory:") as store:
        rep = collect(
            store,
            targets,
            seconds=1,
            types=["heap"],
            archive_dir=tmp_path / "a",
            metrics_interval=None,
            timeout=60,  # bounds a hang only: a refusal is at once, but must beat it
            retries=2,
            backoff=0.01,
        )
    assert rep.exit_code == 1 and rep.new == 0
    assert [line.split(" heap: ")[0] for line in rep.errors()] == [t.name for t in targets]
    assert all(
        "connection refused" in line and "(after 3 attempts)" in line for line in rep.errors()
    )
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").rglob("*.pb.gz"))


def test_cli_collect_of_nothing_is_exit_2_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every target down: each failure on its own line, exit 2 (a job's collect
    source fails so; 1 is for some fetches failing beside stored ones), and the
    store and archive the command would have made are not left behind (an empty
    800 KB store and an empty archive folder were)."""
    targets = write_toml(
        tmp_path / "t.toml",
        '[[target]]\nservice="a"\nversion="v1"\n'
        f'instance="i"\nurl="http://127.0.0.1:{closed_port()}"\n',
    )
    argv = ["collect", str(targets), "--db", str(tmp_path / "s.duckdb"), "--seconds", "1"]
    # --timeout bounds a hang only: a refusal is at once, but must beat it.
    argv += ["--types", "heap", "--timeout", "60", "--retries", "0", "--metrics-interval", "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "connection refused" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.toml"]


def test_bad_arguments_raise_value_error(tmp_path: Path) -> None:
    with Store.open(":memory:") as store, pytest.raises(ValueError):
        collect(store, [], seconds=0, archive_dir=tmp_path)


# --- end to end against the real demo fleet --------------------------------------------


def _wait_for_api_requests(inst, hang: float = 300) -> None:
    """Until notesd has served a request of its API (its /metrics says so)."""
    from support.fleet_harness import parse_samples

    deadline = time.monotonic() + hang  # bounds a hang only
    while time.monotonic() < deadline:
        counts = parse_samples(inst.metrics())
        if any(
            k.startswith("notesd_http_request_duration_seconds_count{") and "/notes" in k and v
            for k, v in counts.items()
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"no API request reached notesd in {hang} s")


def test_collect_from_a_real_notesd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """CPU for 2 s + heap + /metrics from one notesd behind a bearer token, under load."""
    fh = pytest.importorskip("support.fleet_harness")
    try:
        bins = fh.build_fleet()
    except fh.FleetError as e:
        pytest.skip(f"the demo fleet does not build here: {str(e).splitlines()[0]}")
    token = secrets.token_hex(16)
    monkeypatch.setenv("NOTESD_PPROF_AUTH", f"Bearer {token}")
    with fh.FleetInstance(bins.notesd, workdir=tmp_path / "fleet") as inst:
        inst.start("v1", "i-1", token=token, max_lifetime=600)  # ends an orphan only
        targets = write_toml(
            tmp_path / "targets.toml",
            (
                '[[target]]\nservice = "notesd"\nversion = "v1"\ninstance = "i-1"\n'
                f'url = "{inst.base_url}"\nauth_env = "NOTESD_PPROF_AUTH"\n'
            ),
        )
        db = tmp_path / "fleet.duckdb"
        # The load lasts until collect is done (it is stopped then) and has begun
        # before: a 4 s load started beside collect could end, or not yet have
        # reached notesd, in its 2 s CPU window on a loaded machine.
        with fh.start_load(
            inst, duration=300, rate_start=100, rate_end=200, max_requests=60_000,
            loadgen=bins.loadgen,
        ):  # fmt: skip
            _wait_for_api_requests(inst)
            code = main(
                [
                    "collect",
                    str(targets),
                    "--db",
                    str(db),
                    "--seconds",
                    "2",
                    "--types",
                    "cpu,heap",
                    "--metrics-interval",
                    "0.5",
                    "--timeout",
                    "120",  # bounds a hang only
                ]
            )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err == "" and out.startswith("collected 2 profiles (2 new, 0 already present)")
    with Store.open(db, read_only=True) as store:
        profiles = store.sql(
            "SELECT profile_type, instance, source, window_start, window_end, "
            "num_samples FROM profiles ORDER BY profile_type"
        ).to_pylist()
        metrics = set(store.sql("SELECT DISTINCT metric FROM metric_samples").column(0).to_pylist())
        scrapes = store.sql("SELECT count(DISTINCT time) FROM metric_samples").column(0)[0]
        main_fns = store.sql("SELECT count(*) FROM functions WHERE name LIKE 'main.%'")
    assert [p["profile_type"] for p in profiles] == ["cpu", "heap"]
    cpu = profiles[0]
    assert cpu["source"] == f"{inst.base_url}/debug/pprof/profile?seconds=2"
    assert cpu["window_end"] - cpu["window_start"] >= timedelta(seconds=2)
    assert all(p["num_samples"] > 0 for p in profiles)
    assert main_fns.column(0)[0].as_py() > 0  # the service's own code was on CPU
    # Ticks at 0, 0.5, 1, 1.5, 2 s; a tick is skipped while the previous scrape is
    # out, which on a loaded machine can be all but the first; then the closing one.
    assert 2 <= scrapes.as_py() <= 6
    assert {
        "go_gc_cycles_total_gc_cycles_total",
        "go_memstats_next_gc_bytes",
        "go_gc_heap_goal_bytes",
    } <= metrics
    for _, data in all_bytes(tmp_path):
        if data and not data.startswith(b"\x7fELF"):
            assert token.encode() not in data
