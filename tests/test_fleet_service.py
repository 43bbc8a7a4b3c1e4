"""The demo fleet (tests/fleet) against real processes: notesd v1 and v2, loadgen.

Bounded: one module fleet (two instances, about 5 s of load, two 2 s CPU
profiles taken meanwhile) plus a few short-lived processes; every process is
stopped by PID and checked gone.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from support import fleet_harness as fh

import pyproflab

pytestmark = pytest.mark.go

TOKEN = "s3cret-token"  # not a real secret: the test's own pprof token
V2_CPU_HZ = 500  # v2's CPU profiles sample at this rate (-cpu-profile-hz); v1 at pprof's 100


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture(scope="module")
def bins(tmp_path_factory) -> fh.FleetBinaries:
    try:
        return fh.build_fleet()
    except fh.FleetError as e:
        if "not installed" in str(e):
            pytest.skip(str(e))
        raise


@pytest.fixture(scope="module")
def fleet(bins, tmp_path_factory):
    """v1 with a pprof token, v2 open and with gctrace; load runs while each
    gives a 2 s CPU profile. Yields (fleet, load summary, {version: profile bytes})."""
    workdir = tmp_path_factory.mktemp("fleet")
    specs = [
        fh.InstanceSpec("v1", "notes-v1", gogc=100, token=TOKEN),
        fh.InstanceSpec(
            "v2",
            "notes-v2",
            gogc=50,
            gomemlimit="512MiB",
            gctrace=True,
            extra_args=(f"-cpu-profile-hz={V2_CPU_HZ}",),
        ),
    ]
    # The lifetime only ends orphans: the module's tests can take minutes under load.
    with fh.start_fleet(specs, binaries=bins, workdir=workdir, max_lifetime=600) as f:
        profiles: dict[str, bytes] = {}
        errors: list[BaseException] = []

        def grab(inst: fh.FleetInstance) -> None:
            try:
                profiles[inst.version] = inst.cpu_profile(2)
            except BaseException as e:  # reported by the test below
                errors.append(e)

        # A request's 60 s and a grab's 300 s bound hangs: test_load_summary asserts
        # no request failed, and a grab still running would leave no profile.
        with fh.start_load(
            f, 5, 80, 200, 3000, concurrency=6, request_timeout=60, loadgen=bins.loadgen
        ) as load:
            time.sleep(1.0)
            threads = [threading.Thread(target=grab, args=(inst,)) for inst in f]
            for t in threads:
                t.start()
            for t in threads:
                t.join(300)
            summary = load.wait()
        assert not errors, errors
        yield f, summary, profiles
    for inst in f:
        assert _gone(inst.pid), f"{inst} still running after stop"


def test_load_summary(fleet):
    f, summary, _ = fleet
    assert summary["requests"] > 100
    assert summary["errors"] == 0, summary.get("first_error")
    assert set(summary["by_target"]) == {inst.base_url for inst in f}
    # Round robin: the same count each, but for the last round, which the run's
    # end can cut short.
    counts = summary["by_target"].values()
    assert max(counts) - min(counts) <= 1, summary["by_target"]
    assert {"search", "list", "create"} <= set(summary["by_kind"])
    assert 0 < summary["p50_ms"] <= summary["p99_ms"]


def test_metrics_have_every_required_name(fleet):
    f, _, _ = fleet
    for inst in f:
        text = inst.metrics()  # /metrics is open even with a pprof token
        names = fh.metric_names(text)
        missing = [n for n in fh.REQUIRED_METRICS if n not in names]
        assert not missing, f"{inst.instance}: missing {missing}"
        labels = f'instance_name="{inst.instance}",version="{inst.version}"'
        assert fh.parse_samples(text)[f"notesd_build_info{{{labels}}}"] == 1


def test_metrics_report_gogc_and_gomemlimit_from_env(fleet):
    f, _, _ = fleet
    by_version = {inst.version: inst for inst in f}
    v2 = fh.parse_samples(by_version["v2"].metrics())
    assert v2["go_gc_gogc_percent"] == 50
    assert v2["go_gc_gomemlimit_bytes"] == 512 * 2**20
    v1 = fh.parse_samples(by_version["v1"].metrics())
    assert v1["go_gc_gogc_percent"] == 100
    assert v1["go_gc_cycles_total_gc_cycles_total"] >= 1
    info = by_version["v1"].info()
    assert info["gogc_percent"] == 100
    assert info["version"] == "v1" and info["instance"] == "notes-v1"
    assert info["planted_function"] == fh.PLANTED_FUNCTION


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_cpu_profile_decodes_with_planted_function(fleet, version, tmp_path):
    _, _, profiles = fleet
    data = profiles[version]
    assert data[:2] == b"\x1f\x8b", "pprof answers are gzipped"
    gzip.decompress(data)
    path = tmp_path / f"cpu-{version}.pb.gz"
    path.write_bytes(data)
    p = pyproflab.read_profile(path)
    assert [(st.type, st.unit) for st in p.sample_types] == [
        ("samples", "count"),
        ("cpu", "nanoseconds"),
    ]
    assert p.period_type is not None and p.period_type.type == "cpu"
    # -cpu-profile-hz: the profile samples (and says it samples) at that rate.
    assert p.period == 10**9 // (V2_CPU_HZ if version == "v2" else 100)
    # At least the requested window (a starved process can take longer to answer).
    assert p.duration_nanos >= 1.5e9
    # Which functions (and whether any) a 2 s sample of a live process catches is
    # chance on a loaded machine: the planted ones are checked on a recording
    # (tests/analyses/test_regressions_fleet.py); here only that what was sampled is whole.
    names = set(p.functions.column("name").to_pylist())
    assert p.num_samples == 0 or names


def test_pprof_token_gate(fleet):
    f, _, _ = fleet
    v1, v2 = sorted(f, key=lambda i: i.version)
    for path in ("/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"):
        assert v1.request(path)[0] == 401
        assert v1.request(path, token="wrong")[0] == 401
        assert v1.request(path, token=TOKEN + "x")[0] == 401
        status, body = v1.request(path, token=TOKEN)
        assert status == 200, path
        assert v2.request(path)[0] == 200  # no token configured: open
    # The token travels in the environment, never on the command line.
    assert TOKEN.encode() not in v1.request("/debug/pprof/cmdline", token=TOKEN)[1]
    # The API itself is not gated.
    assert v1.request("/healthz")[0] == 200


def test_gctrace_goes_to_stderr(fleet):
    """v2 runs with gctrace: a GC cycle writes its line to v2's stderr file."""
    f, _, _ = fleet
    v2 = next(i for i in f if i.version == "v2")
    assert v2.gctrace and v2.stderr is not None
    # A cycle for certain (the load may have run none): net/http/pprof's ?gc=1
    # returns once runtime.GC has finished one; its line may follow a moment later.
    assert v2.request("/debug/pprof/heap?gc=1")[0] == 200
    deadline = time.monotonic() + 300  # bounds a hang only
    while time.monotonic() < deadline:
        lines = [ln for ln in v2.stderr.read_text().splitlines() if ln.startswith("gc ")]
        if lines:
            break
        time.sleep(0.1)
    assert lines, "no gctrace line after a GC cycle"
    assert " @" in lines[0] and "MB goal" in lines[0]


@pytest.mark.parametrize("addr", ["0.0.0.0:0", ":0", "192.0.2.1:0", "[::]:0", "example.com:0"])
def test_notesd_refuses_non_loopback_addr(bins, addr):
    res = subprocess.run(
        [str(bins.notesd), f"-addr={addr}", "-max-lifetime=5s"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert res.returncode == 2
    assert "refused" in res.stderr or "missing port" in res.stderr


@pytest.mark.parametrize("hz", ["-1", "1001"])
def test_notesd_refuses_a_cpu_profile_rate_out_of_range(bins, hz):
    res = subprocess.run(
        [str(bins.notesd), f"-cpu-profile-hz={hz}", "-max-lifetime=5s"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert res.returncode == 2
    assert f"-cpu-profile-hz must be 0 to 1000, not {hz}" in res.stderr


def test_loadgen_refuses_non_loopback_target(bins):
    for target in ("http://192.0.2.1:80", "http://example.com", "https://127.0.0.1:1"):
        res = subprocess.run(
            [str(bins.loadgen), f"-targets={target}", "-duration=1s", "-max-requests=1"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        assert res.returncode == 2, target
        assert res.stdout == ""


def test_max_lifetime_ends_the_process(bins, tmp_path):
    """Listening, then gone by itself at -max-lifetime (1 s here), exit 0. Launched
    without start(): its wait for /healthz raced that second on a loaded machine."""
    inst = fh.FleetInstance(bins.notesd, workdir=tmp_path)
    inst.launch("v1", "short", max_lifetime=1)
    try:
        inst.proc.wait(timeout=300)  # bounds a hang only
    finally:
        inst.stop()
    assert inst.returncode == 0
    err = inst.stderr.read_text()
    assert "notesd: listening addr=" in err and "notesd: stopping (max-lifetime reached)" in err
    assert _gone(inst.pid)


def test_fleet_stopped_on_exception_and_interrupt(bins, tmp_path):
    pids: list[int] = []
    for exc in (RuntimeError, KeyboardInterrupt):
        with pytest.raises(exc):
            with fh.start_fleet(
                [{"version": "v1", "instance": "x"}, {"version": "v2", "instance": "y"}],
                binaries=bins,
                workdir=tmp_path / exc.__name__,
                max_lifetime=600,  # ends orphans only: a start can take minutes under load
            ) as f:
                pids += [inst.pid for inst in f]
                assert all(inst.running for inst in f)
                raise exc("boom")
    assert len(pids) == 4
    assert all(_gone(pid) for pid in pids)


def test_start_fleet_failure_stops_the_started(bins, tmp_path):
    with pytest.raises(ValueError):
        fh.start_fleet(
            [{"version": "v1", "instance": "ok"}, {"version": "v9", "instance": "bad"}],
            binaries=bins,
            workdir=tmp_path,
        )
    with fh._live_lock:
        left = [obj for obj in fh._live if getattr(obj, "instance", "") == "ok"]
    assert not left, "an instance was left running"


def test_build_is_cached(bins):
    again = fh.build_fleet()
    assert again == bins
    assert Path(again.notesd).stat().st_mtime == Path(bins.notesd).stat().st_mtime
