"""Blocking profiles equal `go tool trace -pprof=KIND`: the same `go tool pprof
-top -nodefraction=0` rows, on the committed traces of seven programs written
for the purpose (channels, mutexes, network, syscalls, GC-heavy, many
goroutines, gRPC streams over one connection), a flight-recorder snapshot and
the CPU-limit story's two runs (whose traces hold a stack of one frame at PC
0, which cmd/trace takes for the empty stack); the stored copies too."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.pprof_oracle import run_pprof
from support.trace_helpers import KINDS, TRACE_NAMES, go_trace_pprof, trace_path

from pyproflab.decode.gotrace import read_trace
from pyproflab.encode import write_profile
from pyproflab.store import Store
from pyproflab.store.traces import ingest_trace

pytestmark = pytest.mark.go


def _top(path: Path) -> str:
    return run_pprof(["-top", "-nodefraction=0", str(path)])


def _rows(path: Path) -> list[str]:
    return [x for x in _top(path).splitlines() if not x.startswith(("Time:", "Duration:"))]


@pytest.mark.parametrize("name", [*TRACE_NAMES, "cpulimit-free", "cpulimit-quota"])
def test_blocking_profiles_equal_go_tool_trace(name: str, go_bin: str, tmp_path: Path) -> None:
    trace = trace_path(name)
    _, ours = read_trace(trace, only=[f"pprof-{k}" for k in KINDS])
    assert sorted(ours) == sorted(KINDS)
    nonempty = 0
    for kind in KINDS:
        want = _top(go_trace_pprof(go_bin, trace, kind, tmp_path / f"want-{kind}.pb"))
        mine = tmp_path / f"ours-{kind}.pb.gz"
        mine.write_bytes(ours[kind])
        assert _top(mine) == want, f"{name} {kind}"
        nonempty += "flat%" in want and len(want.splitlines()) > 3
    assert nonempty >= 2, f"{name}: at least two kinds should have rows"


@pytest.mark.parametrize("name", ["mutex", "net", "flight", "grpcstreams", "cpulimit-free"])
def test_stored_blocking_profiles_equal_go_tool_trace(
    name: str, go_bin: str, tmp_path: Path
) -> None:
    trace = trace_path(name)
    with Store.open(tmp_path / "s.duckdb") as store:
        done = ingest_trace(store, trace)
        assert len(done.profile_ids) == 4
        for kind, pid in zip(KINDS, done.profile_ids, strict=True):
            stored = write_profile(store.profile(pid), tmp_path / f"stored-{kind}.pb.gz")
            want = go_trace_pprof(go_bin, trace, kind, tmp_path / f"want-{kind}.pb")
            # the stored copy carries the trace's time and duration: pprof prints
            # them in its header; the rows are the same
            assert _rows(stored) == _rows(want), f"{name} {kind}"
