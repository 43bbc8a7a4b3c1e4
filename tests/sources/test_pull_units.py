"""The pull sources' parts on their own: windows, Retry-After and retries, the
flamebearer conversion, Datadog's zips and query, selectors, job source kinds,
and a URL read through its source."""

from __future__ import annotations

import io
import threading
import time
import zipfile
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.pull_helpers import CPU_FILES, HEAP_FILE

from pyproflab.errors import UsageError
from pyproflab.jobs.source_kinds import KINDS, check
from pyproflab.sources.datadog import DatadogSource, _pprof_files, _time
from pyproflab.sources.flamebearer import to_pprof
from pyproflab.sources.http import FetchError, Retries, retry_after_seconds, retrying
from pyproflab.sources.pull import candidates, exact_selector, server_name, windows

T0 = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)

PYRO_Q = "process_cpu:cpu:nanoseconds:cpu:nanoseconds{}"
PARCA_Q = "parca_agent:samples:count:cpu:nanoseconds:delta{}"
SECRET_URL = "http://bob:hunter2@127.0.0.1:9"


def test_windows_are_whole_aligned_and_settled():
    got = list(
        windows(
            T0 + timedelta(minutes=5), T0 + timedelta(hours=2), 3600, now=T0 + timedelta(days=1)
        )
    )
    assert got == [(T0 + timedelta(hours=1), T0 + timedelta(hours=2))]
    # A window that ended less than a minute ago waits for the next run.
    now = T0 + timedelta(hours=2, seconds=30)
    assert list(windows(T0, T0 + timedelta(hours=2), 3600, now=now)) == [
        (T0, T0 + timedelta(hours=1))
    ]
    with pytest.raises(ValueError):
        list(windows(T0, T0, 0))


def test_candidates_from_series_points():
    spans = [
        (T0 + timedelta(minutes=10 * i), T0 + timedelta(minutes=10 * (i + 1))) for i in range(4)
    ]
    end_of_first = int(spans[0][1].timestamp() * 1000)
    assert candidates(spans, [end_of_first], 600, ends=True) == [spans[0]]
    # Without the grid's meaning, a point stands for either side of it.
    assert candidates(spans, [end_of_first], 600) == spans[:2]


def test_retry_after_in_seconds_or_as_a_date():
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    now = time.time()
    date = format_datetime(datetime.fromtimestamp(now + 30, UTC), usegmt=True)
    assert 28 <= retry_after_seconds(date, now=now) <= 31
    assert retry_after_seconds("-5") == 0.0


def test_retrying_waits_what_the_server_asks_and_gives_up_in_one_line():
    calls: list[float] = []

    def busy() -> str:
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise FetchError(
                "HTTP 429 from http://x/y", transient=True, status=429, retry_after=0.3
            )
        return "ok"

    assert retrying(busy, Retries(retries=3, backoff=0.01)) == "ok"
    assert calls[1] - calls[0] >= 0.3 and calls[2] - calls[1] >= 0.3

    def down() -> str:
        raise FetchError("HTTP 503 from http://x/y", transient=True, status=503)

    with pytest.raises(FetchError, match=r"^HTTP 503 from http://x/y \(after 3 attempts\)$"):
        retrying(down, Retries(retries=2, backoff=0.01))

    def later() -> str:
        raise FetchError("HTTP 429 from http://x/y", transient=True, status=429, retry_after=3600)

    with pytest.raises(FetchError, match=r"asked to retry after 3600 s; not waiting"):
        retrying(later, Retries(retries=5, max_wait=60))


def test_flamebearer_becomes_the_stacks_it_draws():
    from pyproflab.decode import decode_bytes

    # total(10) -> main(10, self 2) -> {a (5, self 5), b (3, self 1) -> c (2, self 2)}
    doc = {
        "flamebearer": {
            "names": ["total", "main", "a", "b", "c"],
            "levels": [[0, 10, 0, 0], [0, 10, 2, 1], [0, 5, 5, 2, 0, 3, 1, 3], [5, 2, 2, 4]],
            "numTicks": 10,
        },
        "metadata": {"format": "single"},
    }
    raw = to_pprof(doc, sample_type=("cpu", "nanoseconds"), period_type=("cpu", "nanoseconds"),
                   time_nanos=1, duration_nanos=2)  # fmt: skip
    profile = decode_bytes(raw, source="fb")
    names = dict(zip(profile.functions.column("id").to_pylist(),
                     profile.functions.column("name").to_pylist(), strict=True))  # fmt: skip
    loc_fn = {loc["id"]: names[loc["lines"][0]["function_id"]]
              for loc in profile.locations.to_pylist()}  # fmt: skip
    stacks = sorted(
        (tuple(loc_fn[i] for i in s["location_ids"]), s["values"][0])
        for s in profile.samples.to_pylist()
    )
    assert stacks == [
        (("a", "main"), 5),
        (("b", "main"), 1),
        (("c", "b", "main"), 2),
        (("main",), 2),
    ]
    with pytest.raises(ValueError, match="no parent"):
        bad = {"flamebearer": {"names": ["total", "x"], "levels": [[0, 1, 0, 0], [5, 1, 1, 1]]}}
        to_pprof(bad, sample_type=("a", "b"), period_type=("a", "b"), time_nanos=0,
                 duration_nanos=0)  # fmt: skip


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_datadog_zip_members_by_type_and_cap():
    cpu, heap = CPU_FILES[0].read_bytes(), HEAP_FILE.read_bytes()
    body = _zip({"p/cpu.pprof": cpu, "p/delta-heap.pprof": heap, "p/metrics.json": b"{}"})
    assert _pprof_files(body, ("cpu",), 1 << 20) == [("cpu.pprof", cpu)]
    assert [n for n, _ in _pprof_files(body, ("all",), 1 << 20)] == [
        "cpu.pprof",
        "delta-heap.pprof",
    ]
    with pytest.raises(ValueError, match="delta-heap.pprof is larger than the cap of 10000 bytes"):
        _pprof_files(body, ("all",), 10_000)
    bomb = _zip({"cpu.pprof": b"\0" * (5 << 20)})  # small compressed, large inside
    with pytest.raises(ValueError, match="larger than the cap"):
        _pprof_files(bomb, ("cpu",), 1 << 20)
    with pytest.raises(ValueError, match="not a zip archive"):
        _pprof_files(b"<html>", ("cpu",), 1 << 20)


def test_datadog_times_past_datetime_s_years_in_utc_are_unknown():
    assert _time("2026-11-01T10:00:00Z") == T0
    # Past year 9999 in UTC: astimezone raised OverflowError out of pull.
    assert _time("9999-12-31T23:59:59-01:00") is None
    assert _time("0001-01-01T00:00:00+01:00") is None


def test_datadog_query_gets_runtime_go_as_datadog_pgo_does():
    assert DatadogSource("service:a").full_query() == "service:a runtime:go"
    assert DatadogSource("service:a language:go").full_query() == "service:a language:go"
    assert DatadogSource("service:a", any_runtime=True).full_query() == "service:a"


def test_exact_selector_escapes_values():
    assert exact_selector({"b": 'x"y', "a": "c\\d"}) == '{a="c\\\\d",b="x\\"y"}'


def test_job_source_kinds_check_their_keys(tmp_path: Path):
    where = "job.toml [[source]] #1"
    spec = check(
        {"kind": "pyroscope", "url": "http://p:4040", "query": "x:y:z:u:v{}"}, where, tmp_path
    )
    assert spec.step == "1h" and spec.retries == 3 and spec.tenant is None
    assert check({"kind": "drop", "path": "in"}, where, tmp_path).path == str(tmp_path / "in")
    bad = [
        ({"kind": "ftp"}, "kind must be one of drop, parquet, collect, datadog"),
        ({"kind": "datadog"}, "a datadog source needs query"),
        ({"kind": "datadog", "query": "q", "api_key": "x"}, "unknown key 'api_key'"),
        ({"kind": "datadog", "query": "q", "top": True}, "top must be an integer"),
        ({"kind": "datadog", "query": "q", "top": 0}, "top must be an integer from 1, up to 10000"),
        ({"kind": "collect", "targets": "t", "timeout": "fast"}, "timeout must be a number"),
        ({"kind": "drop", "path": "in", "labels": {"a": 1}}, "labels must be a table of strings"),
    ]
    for raw, message in bad:
        with pytest.raises(UsageError, match=message):
            check(raw, where, tmp_path)
    # Every kind declares its keys with types (the job schema validates against them).
    assert all(
        k.type in (str, int, float, bool, list, dict) for kind in KINDS.values() for k in kind.keys
    )


def test_a_url_is_read_through_its_source_like_a_file(tmp_path: Path):
    from support.pull_helpers import cli

    body = CPU_FILES[0].read_bytes()

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/debug/pprof/profile"
        from_url = cli("top", url, "--format", "csv")
        from_file = cli("top", str(CPU_FILES[0]), "--format", "csv")
    finally:
        server.shutdown()
        server.server_close()
    assert from_url.returncode == 0, from_url.stderr
    assert from_url.stdout == from_file.stdout


@pytest.mark.parametrize("kind", ["pyroscope", "parca"])
def test_a_window_step_of_zero_is_one_line_before_any_store(tmp_path: Path, kind: str):
    from support.pull_helpers import cli

    db = tmp_path / "s.duckdb"
    query = "process_cpu:cpu:nanoseconds:cpu:nanoseconds{}"
    res = cli("pull", kind, "http://127.0.0.1:9", "--query", query, "--since", "6h",
              "--step", "0m", "--db", str(db))  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == (
        f"pyproflab: error: {kind}:http://127.0.0.1:9: the window step must be positive, not 0 s"
    )
    assert not db.exists()


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--timeout", "nan"), ("--timeout", "inf"), ("--timeout", "0"), ("--retries", "-1"),
     ("--max-mib", "0"), ("--batch-size", "0"), ("--batch-size", "x")],
)  # fmt: skip
def test_a_bad_request_flag_is_one_line_naming_it(tmp_path: Path, flag: str, value: str):
    """--timeout nan and inf were tracebacks (socket.settimeout's ValueError and
    OverflowError); 0 and the others one line naming all four flags."""
    from support.pull_helpers import cli

    db = tmp_path / "s.duckdb"
    res = cli("pull", "datadog", "--query", "service:x", "--since", "6h", "--db", str(db),
              "--base-url", "http://127.0.0.1:9", flag, value)  # fmt: skip
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert f"argument {flag}:" in lines[0] and repr(value) in lines[0], lines[0]
    others = {"--timeout", "--retries", "--max-mib", "--batch-size"} - {flag}
    assert not [o for o in others if o in lines[0]], lines[0]
    assert not db.exists()


@pytest.mark.parametrize("kind", ["pyroscope", "parca"])
def test_a_range_holding_no_whole_window_is_one_line(tmp_path: Path, kind: str):
    """`--since 30s` (or a job's since = "1h" with step = "1h") holds no whole
    aligned window: the pull asked for nothing and said "0 new ...", exit 0, so a
    scheduled pull of that range never stored anything and looked fine."""
    from support.pull_helpers import cli

    db = tmp_path / "s.duckdb"
    query = "process_cpu:cpu:nanoseconds:cpu:nanoseconds{}"
    res = cli("pull", kind, "http://127.0.0.1:9", "--query", query, "--since", "30s",
              "--db", str(db))  # fmt: skip
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and not res.stdout, (res.stdout, res.stderr)
    assert lines[0].startswith(f"pyproflab: error: {kind}:http://127.0.0.1:9: no whole 1h window")
    assert "--step" in lines[0] and not db.exists()


@pytest.mark.parametrize("kind", ["datadog", "pyroscope", "parca"])
def test_help_gives_each_request_flag_s_default(kind: str):
    """`pull KIND --help` said '--timeout S  per request' with no default (30 s,
    as docs/pull.md says), nor those of --retries, --max-mib, --batch-size, --types."""
    import argparse

    from pyproflab.cli import build_parser

    sub = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices["pull"]
    parser = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices[
        kind
    ]
    for action in parser._actions:
        if action.default in (None, False) or action.dest in ("help", "db"):
            continue
        v = action.default
        shown = f"{v:g}" if isinstance(v, float) else str(v)
        assert f"default {shown}" in (action.help or ""), (action.dest, action.help)


@pytest.mark.parametrize(
    ("flag", "value"), [("--since", "nonsense"), ("--until", "yesterday"), ("--step", "1ms")]
)
def test_a_bad_time_or_step_names_its_flag(tmp_path: Path, flag: str, value: str):
    """`--since nonsense` said "bad time 'nonsense': ...", naming no flag."""
    from support.pull_helpers import cli

    db = tmp_path / "s.duckdb"
    args = {"--since": "6h", "--until": None, "--step": None, flag: value}
    given = [a for k, v in args.items() if v is not None for a in (k, v)]
    res = cli("pull", "parca", "http://127.0.0.1:9", "--query", "t{}", "--db", str(db), *given)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert lines[0].startswith(f"pyproflab: error: {flag}: bad "), lines[0]
    assert not db.exists()


@pytest.mark.parametrize(
    ("kind", "flag", "value"),
    [("datadog", "--top", "0"), ("pyroscope", "--go-pgo", "0"), ("pyroscope", "--go-pgo", "1001")],
)
def test_top_and_go_pgo_out_of_range_name_their_flag(tmp_path: Path, kind, flag, value):
    """`pull datadog --top 0` said 'datadog:datadoghq.com: top must be at least 1',
    `--go-pgo 0` 'go_pgo must be from 1 to 1000': the job keys, not the flags."""
    from support.pull_helpers import cli

    db = tmp_path / "s.duckdb"
    where = (
        ["--query", "service:x"] if kind == "datadog" else ["http://127.0.0.1:9", "--query", "t{}"]
    )
    res = cli("pull", kind, *where, "--since", "6h", "--db", str(db), flag, value)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert f"argument {flag}: " in lines[0] and repr(value) in lines[0], lines[0]
    assert not db.exists()


@pytest.mark.parametrize(
    ("kind", "where", "advice"),
    [("datadog", ["--query", "s:x", "--base-url", SECRET_URL],
      "the keys are read from DD_API_KEY and DD_APP_KEY"),
     ("pyroscope", [SECRET_URL, "--query", PYRO_Q], "name it with --auth-env"),
     ("parca", [SECRET_URL, "--query", PARCA_Q], "name it with --auth-env")],
)  # fmt: skip
def test_a_url_with_credentials_gets_advice_that_fits_the_command_line(
    tmp_path: Path, kind, where, advice
):
    """A URL holding credentials was told to "name it in auth_env", a job-file
    key: the pull command's flag is --auth-env, and Datadog has neither."""
    from support.pull_helpers import cli

    db = tmp_path / "s.duckdb"
    env = {"DD_API_KEY": "a", "DD_APP_KEY": "b"}
    res = cli("pull", kind, *where, "--since", "6h", "--db", str(db), env=env)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert "must not hold credentials" in lines[0] and advice in lines[0], lines[0]
    assert "auth_env" not in lines[0] and "hunter2" not in lines[0], lines[0]
    assert not db.exists()


@pytest.mark.parametrize(
    ("kind", "keys", "advice"),
    [("datadog", 'query = "s:x"\nbase_url = "http://bob:hunter2@127.0.0.1:9"\n',
      "the keys are read from DD_API_KEY and DD_APP_KEY"),
     ("pyroscope", f'url = "http://bob:hunter2@127.0.0.1:9"\nquery = "{PYRO_Q}"\n',
      "name it in auth_env")],  # the job-file key: right as it was
)  # fmt: skip
def test_a_url_with_credentials_gets_advice_that_fits_the_job_file(
    tmp_path: Path, kind, keys, advice
):
    from support.pull_helpers import cli

    job = tmp_path / "job.toml"
    job.write_text(
        '[job]\nname = "j"\nstore = "s.duckdb"\noutput = "out"\n'
        f'[[source]]\nkind = "{kind}"\nsince = "6h"\n{keys}'
    )
    res = cli("job", "run", str(job), env={"DD_API_KEY": "a", "DD_APP_KEY": "b"})
    failed = [ln for ln in res.stderr.splitlines() if "must not hold credentials" in ln]
    assert res.returncode == 2 and len(failed) == 1, res.stderr
    assert advice in failed[0] and "hunter2" not in failed[0], failed[0]
    assert kind == "pyroscope" or "auth_env" not in failed[0], failed[0]


@pytest.mark.parametrize("go_pgo", [0, -1, 1001])
def test_go_pgo_out_of_range_is_refused_as_a_job_refuses_it(go_pgo: int):
    from pyproflab.sources.base import SourceError
    from pyproflab.sources.pyroscope import PyroscopeSource

    query = "process_cpu:cpu:nanoseconds:cpu:nanoseconds{}"
    with pytest.raises(SourceError, match=f"go_pgo must be from 1 to 1000, not {go_pgo}"):
        PyroscopeSource("http://127.0.0.1:9", query, go_pgo=go_pgo)


@pytest.mark.parametrize(
    "spelling",
    ["http://127.0.0.1:4040", "http://localhost:4040/", "HTTP://LocalHost:4040//",
     "http://[::1]:4040", "http://127.0.0.1.:4040"],
)  # fmt: skip
def test_one_server_written_several_ways_is_one_source(spelling):
    """Before, each spelling was a source of its own ('pyroscope:http://localhost:4040'
    beside 'pyroscope:http://127.0.0.1:4040'): the overlap check and the keys of
    what was fetched did not see the other's windows."""
    from pyproflab.sources.parca import ParcaSource
    from pyproflab.sources.pyroscope import PyroscopeSource

    assert PyroscopeSource(spelling, PYRO_Q).name == "pyroscope:http://127.0.0.1:4040"
    assert ParcaSource(spelling, PARCA_Q).name == "parca:http://127.0.0.1:4040"
    assert DatadogSource("service:a", base_url=spelling).name == "datadog:http://127.0.0.1:4040"


def test_default_ports_and_datadogs_own_server_are_one_name_other_hosts_are_not():
    assert server_name("https://Pyro.Example.com:443/") == "https://pyro.example.com"
    assert server_name("http://pyro.example.com.:80/q/") == "http://pyro.example.com/q"
    assert server_name("https://pyro.example.com:80") == "https://pyro.example.com:80"
    # Two addresses, or a name and an address, of one host: we cannot know.
    assert server_name("http://10.0.0.5:4040") != server_name("http://pyro.internal:4040")
    for url in ("https://app.datadoghq.eu/", "https://APP.datadoghq.eu:443"):
        assert DatadogSource("service:a", base_url=url).name == "datadog:datadoghq.eu"
    assert DatadogSource("service:a", site="datadoghq.eu").name == "datadog:datadoghq.eu"
    other = DatadogSource("service:a", base_url="https://app.datadoghq.eu/proxy").name
    assert other == "datadog:https://app.datadoghq.eu/proxy"


def test_a_render_still_cut_to_the_servers_node_limit_is_refused():
    """A flame graph holding the server's 'other' node (its tree was larger than
    the max-nodes sent) would store wrong values per function: the window is
    refused; max-nodes is sent with every render."""
    from support import fake_pyroscope as fake

    from pyproflab.sources.pyroscope import RENDER_MAX_NODES, PyroscopeSource

    msg, asked = fake.load(str(CPU_FILES[0])), []
    src = PyroscopeSource("http://127.0.0.1:9", PYRO_Q, legacy=True)

    class Api:
        def __init__(self, limit: int) -> None:
            self.limit = limit

        def json(self, method: str, path: str, params: dict) -> dict:
            asked.append(params["max-nodes"])
            return fake.flamebearer(msg, PYRO_Q[:-2], self.limit)

    src.api = Api(0)
    assert src.merge({}, T0, T0 + timedelta(hours=1))
    src.api = Api(40)
    with pytest.raises(ValueError, match="cut the flame graph to its node limit"):
        src.merge({}, T0, T0 + timedelta(hours=1))
    assert asked == [str(RENDER_MAX_NODES)] * 2


@pytest.mark.parametrize(
    "body, reason",
    [
        (b'{"errors": ["Forbidden"]}', "Forbidden"),  # Datadog
        (b'{"code": "invalid_argument", "message": "bad\\nquery"}', "bad query"),  # Connect
        (b'{"errors": [{"status": "400", "detail": "no such tag"}]}', "no such tag"),  # JSON:API
        (b'{"error": {"message": "quota"}}', "quota"),
        (b'{"status": "fail"}', '{"status": "fail"}'),  # no reason key: the line as sent
        (b"\n  too many requests\t now \nsecond line", "too many requests now"),
        (b"<html><head><title>403 Forbidden</title></head></html>", ""),  # says the status
        (b"", ""),
        ("sp\u202eoof\x07 \x00ok".encode(), "spoof ok"),  # bidi override, bell, NUL dropped
        (b"\xff\xfe bad utf-8", "\ufffd\ufffd bad utf-8"),
        (b"y" * 500, "y" * 199 + "\u2026"),
    ],
)
def test_an_error_body_gives_one_bounded_line(body, reason):
    from pyproflab.sources.api import REASON_CHARS, body_reason

    assert body_reason(body) == reason and len(body_reason(body)) <= REASON_CHARS
