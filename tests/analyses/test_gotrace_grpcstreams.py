"""The founding gRPC story (seeds 001: "too many gRPC streams", found in the
trace's synchronization blocking profile), recorded from
tests/goprogs/traces/grpcstreams: 64 goroutines open a stream per request over
one connection whose server allows 4 streams at a time. The commands of
docs/traces.md, run as the user runs them, name where the streams wait (grpc's
transport, for the connection's stream quota) with `go tool trace`'s figures."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from support.pprof_oracle import run_pprof
from support.trace_helpers import go_trace_pprof, run_cli, trace_path

pytestmark = pytest.mark.go

TRANSPORT = "google.golang.org/grpc/internal/transport."
# where a client stream waits while the connection has no stream quota left
WAIT_SITE = TRANSPORT + "(*http2Client).NewStream"
CLIENTS = 64  # main.client goroutines in the program


def _ok(*args: str | Path) -> str:
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _line(top_text: str, name: str) -> str:
    (line,) = [ln for ln in top_text.splitlines() if ln.endswith(f"  {name}")]
    return line


@pytest.fixture(scope="module")
def sync_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("grpc") / "sync.pb.gz"
    _ok("trace", "pprof", trace_path("grpcstreams"), "--kind", "sync", "-o", out)
    return out


def test_the_sync_profile_names_the_stream_quota_wait(
    sync_profile: Path, go_bin: str, tmp_path: Path
) -> None:
    """Of grpc's transport functions, the one with the most blocked time is
    where new streams wait for the stream quota, and it holds most of all the
    goroutines' blocked time: as `go tool pprof -top -cum` prints it on
    `go tool trace -pprof=sync`'s profile."""
    doc = json.loads(_ok("top", "--cum", "--format", "json", sync_profile))
    transport = [r for r in doc["rows"] if r["name"].startswith(TRANSPORT)]
    assert transport[0]["name"] == WAIT_SITE, transport[:3]
    assert transport[0]["cum_pct"] > 50
    want = run_pprof(
        [
            "-top",
            "-cum",
            str(go_trace_pprof(go_bin, trace_path("grpcstreams"), "sync", tmp_path / "w")),
        ]
    )
    ours = _ok("top", "--cum", sync_profile)
    for name in (WAIT_SITE, "main.client"):
        assert _line(ours, name) == _line(want, name)


def _sync_kind(reason: str) -> bool:
    """A wait `go tool trace -pprof=sync` counts (cmd/trace's computePprofSync)."""
    return any(word in reason for word in ("chan", "sync", "select"))


def test_the_clients_blocked_time_is_select_and_is_the_profiles(sync_profile: Path) -> None:
    """`trace goroutines` says what the client goroutines waited on: mostly
    select, a channel wait; their select time covers what the sync profile
    charges to the stream-quota wait, and their waits of the sync kind are,
    to the nanosecond, the profile's main.client total (every client exited
    inside the trace, so none of their waits is cut by its end)."""
    rows = json.loads(_ok("trace", "goroutines", trace_path("grpcstreams"), "--format", "json"))
    clients = [r for r in rows if r["name"] == "main.client"]
    assert len(clients) == CLIENTS
    waits: dict[str, int] = {}
    for r in clients:
        for reason, ns in r["waiting"].items():
            waits[reason] = waits.get(reason, 0) + ns
    assert max(waits, key=waits.__getitem__) == "select", waits
    doc = json.loads(_ok("top", "--cum", "--format", "json", sync_profile))
    cum = {r["name"]: r["cum"] for r in doc["rows"]}
    assert cum[WAIT_SITE] <= waits["select"]
    assert cum["main.client"] == sum(ns for why, ns in waits.items() if _sync_kind(why))


def test_the_report_shows_where_goroutines_blocked(go_bin: str, tmp_path: Path) -> None:
    """The HTML report of a store holding the trace: its trace section showed
    scheduler latency and stop-the-world pauses only, so the story's finding
    was not in it (the longest scheduler waits list grpc's reader, which woke
    the clients, not where they waited). It now lists the merged sync blocking
    profile's top by cum: the stream-quota wait, with go tool pprof's cum."""
    from pyproflab.keying.keys import ProfileMeta
    from pyproflab.reports.html_report import render_report
    from pyproflab.store import Selection, Store
    from pyproflab.store.traces import ingest_trace
    from pyproflab.workflows.report import sections

    trace = trace_path("grpcstreams")
    with Store.open(tmp_path / "s.duckdb") as store:
        ingest_trace(store, trace, ProfileMeta(service="grpc"))
        page = render_report(sections(store, Selection(service="grpc"), "s.duckdb")).html
    want = run_pprof(["-top", "-cum", str(go_trace_pprof(go_bin, trace, "sync", tmp_path / "w"))])
    flat, flat_pct, _, cum, cum_pct = _line(want, WAIT_SITE).split()[:5]
    rows = [r for r in page.split("<tr>") if r.startswith("<td") and html.escape(WAIT_SITE) in r]
    assert len(rows) == 1, rows
    cells = [c.split(">", 1)[1] for c in rows[0].split("</td>")[:5]]
    assert [cells[0], cells[1], cells[3], cells[4]] == [flat, flat_pct, cum, cum_pct]
    # a client's longest scheduler wait carries grpc's reader's stack (it woke
    # the client): the column says so instead of "stack"
    assert "<th>made runnable at</th>" in page and "<th>stack</th>" not in page


def test_sched_says_whose_stack_a_wait_carries() -> None:
    """`trace sched`'s longest waits carry the stack that made the goroutine
    runnable (go tool trace -pprof=sched's): a client woken by grpc's reader
    carries the reader's stack, with no frame of the client's own. The text
    headed that column "stack", as if the client had waited there."""
    from pyproflab.analyses.gotrace_answers import answer

    longest = answer("sched", path=trace_path("grpcstreams")).longest.to_pylist()
    woken = [r for r in longest if r["name"] == "main.client" and "main." not in r["stack"]]
    assert woken and TRANSPORT in woken[0]["stack"], longest
    lines = _ok("trace", "sched", trace_path("grpcstreams")).splitlines()
    header = lines[lines.index("longest:") + 1].split()
    assert header[-3:] == ["made", "runnable", "at"], header
