"""Build, start and stop the demo fleet (tests/fleet) and drive load at it.

Standard library only; the tests and the demo (``tests/support/fleet_demo.py``) import
it::

    from fleet_harness import build_fleet, start_fleet, run_load

    bins = build_fleet()                          # cached by source hash
    with start_fleet([{"version": "v1", "instance": "a", "gogc": 100},
                      {"version": "v2", "instance": "b", "gctrace": True}],
                     binaries=bins) as fleet:
        summary = run_load(fleet, duration=5, rate_start=50, rate_end=150,
                           max_requests=2000, loadgen=bins.loadgen)

Rules:

- Every server listens on 127.0.0.1 (``-addr 127.0.0.1:0``; the real port is
  read from ``-port-file``) and exits by itself after ``max_lifetime``.
- Every process started here is stopped by its PID: SIGTERM, then SIGKILL
  after a timeout, then reaped. ``start_fleet``/``FleetInstance`` stop theirs
  on any exception, KeyboardInterrupt included, and an ``atexit`` hook stops
  whatever is still running when the interpreter exits.
- A child gets GOGC, GOMEMLIMIT, GODEBUG and PPROF_TOKEN only when asked for
  them; values inherited from the caller's environment are removed.
- The pprof token is passed in the environment (``PPROF_TOKEN``), never on
  the command line, so ``/debug/pprof/cmdline`` and ``ps`` do not show it.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FLEET_DIR = Path(__file__).resolve().parents[1] / "fleet"

#: The function v2 slows down (about +30% CPU there, nothing else changed), as
#: pprof names it; the Go constant ``PlantedFunction`` in cmd/notesd/score.go.
PLANTED_FUNCTION = "main.scoreNote"

#: Metric names every notesd /metrics must expose (issue 3).
REQUIRED_METRICS = (
    "go_gc_heap_live_bytes",
    "go_gc_heap_goal_bytes",
    "go_gc_cycles_total_gc_cycles_total",
    "go_gc_heap_allocs_bytes_total",
    "go_cpu_classes_gc_total_cpu_seconds_total",
    "go_cpu_classes_gc_mark_assist_cpu_seconds_total",
    "go_cpu_classes_gc_mark_dedicated_cpu_seconds_total",
    "go_cpu_classes_gc_mark_idle_cpu_seconds_total",
    "go_cpu_classes_gc_pause_cpu_seconds_total",
    "go_cpu_classes_idle_cpu_seconds_total",
    "go_cpu_classes_scavenge_total_cpu_seconds_total",
    "go_cpu_classes_total_cpu_seconds_total",
    "go_cpu_classes_user_cpu_seconds_total",
    "go_sched_pauses_total_gc_seconds",
    "go_gc_scan_stack_bytes",
    "go_gc_scan_globals_bytes",
    "go_gc_gogc_percent",
    "go_gc_gomemlimit_bytes",
    "go_memstats_next_gc_bytes",
    "go_gc_duration_seconds",
)

_CHILD_ENV_DROP = ("GOGC", "GOMEMLIMIT", "GODEBUG", "PPROF_TOKEN")


class FleetError(RuntimeError):
    """The fleet could not be built or started, or a load run failed."""


# --- building -----------------------------------------------------------------------


@dataclass(frozen=True)
class FleetBinaries:
    """Paths of the built programs."""

    notesd: Path
    loadgen: Path
    source_hash: str


def default_cache_dir() -> Path:
    """``$PYPROFLAB_FLEET_CACHE``, else ``~/.cache/pyproflab/fleet``."""
    env = os.environ.get("PYPROFLAB_FLEET_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "pyproflab" / "fleet"


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise FleetError("Go is not installed (`go` not on PATH); the demo fleet needs it")
    return go


def source_hash(pgo: str | os.PathLike | None = None, *, go: str | None = None) -> str:
    """Hash of the fleet's sources (go.mod, go.sum, non-test .go files), the Go
    version and the PGO profile, if any: the cache key of ``build_fleet``."""
    go = go or _go()
    h = hashlib.sha256()
    version = subprocess.run(
        [go, "version"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    h.update(version.encode())
    files = [FLEET_DIR / "go.mod", FLEET_DIR / "go.sum"]
    files += sorted(p for p in FLEET_DIR.rglob("*.go") if not p.name.endswith("_test.go"))
    for p in files:
        h.update(str(p.relative_to(FLEET_DIR)).encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    if pgo is not None:
        h.update(b"pgo\0" + Path(pgo).read_bytes())
    return h.hexdigest()[:16]


def build_fleet(
    out_dir: str | os.PathLike | None = None,
    *,
    pgo: str | os.PathLike | None = None,
    timeout: float = 600.0,
) -> FleetBinaries:
    """Build notesd and loadgen into ``out_dir/<source hash>/`` and return their paths.

    A build whose hash is already there is reused (a repeated call costs one
    ``go version``). ``pgo``: a CPU profile for ``go build -pgo`` (notesd only).
    Builds go to a temporary folder first and are renamed into place, so
    concurrent callers never see half a build.
    """
    go = _go()
    out = Path(out_dir) if out_dir is not None else default_cache_dir()
    key = source_hash(pgo, go=go)
    final = out / key
    bins = FleetBinaries(final / "notesd", final / "loadgen", key)
    if bins.notesd.is_file() and bins.loadgen.is_file():
        return bins
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".build-{key}-", dir=out))
    try:
        for prog in ("notesd", "loadgen"):
            cmd = [go, "build", "-o", str(tmp / prog)]
            if pgo is not None and prog == "notesd":
                cmd.append(f"-pgo={Path(pgo).resolve()}")
            cmd.append(f"./cmd/{prog}")
            res = subprocess.run(
                cmd, cwd=FLEET_DIR, capture_output=True, text=True, timeout=timeout
            )
            if res.returncode != 0:
                raise FleetError(f"go build ./cmd/{prog} failed:\n{res.stderr.strip()}")
        try:
            os.rename(tmp, final)
        except OSError:
            if not (bins.notesd.is_file() and bins.loadgen.is_file()):
                raise
            # Another caller built the same hash first: use theirs.
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return bins


# --- the processes ----------------------------------------------------------------

_live_lock = threading.Lock()
_live: set[Any] = set()  # FleetInstance and LoadRun objects with a running process


def _register(obj: Any) -> None:
    with _live_lock:
        _live.add(obj)


def _unregister(obj: Any) -> None:
    with _live_lock:
        _live.discard(obj)


@atexit.register
def stop_all() -> None:
    """Stop every process started here that is still running (the atexit hook)."""
    with _live_lock:
        objs = list(_live)
    for obj in objs:
        with contextlib.suppress(Exception):
            obj.stop()


def _terminate(proc: subprocess.Popen, timeout: float) -> int | None:
    """SIGTERM ``proc`` by its PID, SIGKILL it after ``timeout`` s, and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    return proc.returncode


def _child_env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CHILD_ENV_DROP}
    env.update(extra)
    return env


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:].strip()
    except OSError:
        return ""


class FleetInstance:
    """One notesd process.

    ``FleetInstance(notesd).start("v1", "a")`` launches it on 127.0.0.1 and
    waits until ``/healthz`` answers; then ``base_url``, ``addr``, ``pid``,
    ``stderr`` (its stderr file: gctrace lines go there with gctrace on),
    ``started_at`` (wall clock, s) are set. ``stop()`` ends it by PID. Use it
    as a context manager to stop it on any exit.
    """

    def __init__(
        self,
        notesd: str | os.PathLike | None = None,
        *,
        workdir: str | os.PathLike | None = None,
    ) -> None:
        self.notesd = Path(notesd) if notesd is not None else build_fleet().notesd
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="notesd-"))
        self.proc: subprocess.Popen | None = None
        self.version = ""
        self.instance = ""
        self.token: str | None = None
        self.gogc: int | str | None = None
        self.gomemlimit: int | str | None = None
        self.addr = ""
        self.base_url = ""
        self.stderr: Path | None = None
        self.gctrace = False
        self.started_at = 0.0
        self.returncode: int | None = None
        self._stderr_file: Any = None

    # -- lifecycle

    def start(
        self,
        version: str = "v1",
        instance: str | None = None,
        *,
        gogc: int | str | None = None,
        gomemlimit: int | str | None = None,
        token: str | None = None,
        gctrace_path: str | os.PathLike | None = None,
        max_lifetime: float = 600.0,
        ready_timeout: float = 120.0,  # bounds a hang: starts take seconds, more under load
        extra_args: Sequence[str] = (),
    ) -> FleetInstance:
        """Launch notesd and wait until it answers; returns self.

        ``gctrace_path``: turn on ``GODEBUG=gctrace=1`` and write the
        process's stderr there (else stderr goes to ``workdir``).
        """
        self.launch(
            version,
            instance,
            gogc=gogc,
            gomemlimit=gomemlimit,
            token=token,
            gctrace_path=gctrace_path,
            max_lifetime=max_lifetime,
            extra_args=extra_args,
        )
        try:
            self.wait_ready(ready_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def launch(
        self,
        version: str = "v1",
        instance: str | None = None,
        *,
        gogc: int | str | None = None,
        gomemlimit: int | str | None = None,
        token: str | None = None,
        gctrace_path: str | os.PathLike | None = None,
        max_lifetime: float = 600.0,
        extra_args: Sequence[str] = (),
        gomaxprocs: int | None = None,
    ) -> None:
        """Start the process without waiting for it (see ``start``)."""
        if self.proc is not None:
            raise FleetError("this FleetInstance was already started")
        if version not in ("v1", "v2"):
            raise ValueError(f"version must be v1 or v2, not {version!r}")
        self.version = version
        self.instance = instance or f"notesd-{version}-{id(self):x}"
        self.token, self.gogc, self.gomemlimit = token, gogc, gomemlimit
        self.workdir.mkdir(parents=True, exist_ok=True)
        port_file = self.workdir / f"{self.instance}.addr"
        port_file.unlink(missing_ok=True)
        self._port_file = port_file
        env: dict[str, str] = {}
        if gogc is not None:
            env["GOGC"] = str(gogc)
        if gomemlimit is not None:
            env["GOMEMLIMIT"] = str(gomemlimit)
        if gomaxprocs is not None:
            env["GOMAXPROCS"] = str(gomaxprocs)
        if token is not None:
            env["PPROF_TOKEN"] = token
        if gctrace_path is not None:
            env["GODEBUG"] = "gctrace=1"
            self.stderr = Path(gctrace_path)
            self.gctrace = True
        else:
            self.stderr = self.workdir / f"{self.instance}.stderr"
        self.stderr.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(self.notesd),
            "-addr=127.0.0.1:0",
            f"-port-file={port_file}",
            f"-version={version}",
            f"-instance={self.instance}",
            f"-max-lifetime={max_lifetime:.3f}s",
            *extra_args,
        ]
        self._stderr_file = open(self.stderr, "wb")  # closed by stop()
        self.started_at = time.time()
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr_file,
                env=_child_env(env),
            )
        except BaseException:
            self._stderr_file.close()
            raise
        _register(self)

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait for the port file, then for ``/healthz`` to answer 200."""
        assert self.proc is not None, "not launched"
        deadline = time.monotonic() + timeout
        while not self.addr:
            if self.proc.poll() is not None:
                raise FleetError(
                    f"notesd {self.instance} exited with {self.proc.returncode} before "
                    f"listening: {_tail(self.stderr) if self.stderr else ''}"
                )
            try:
                self.addr = self._port_file.read_text().strip()
            except FileNotFoundError:
                if time.monotonic() > deadline:
                    raise FleetError(
                        f"notesd {self.instance}: no port file after {timeout}s"
                    ) from None
                time.sleep(0.02)
        self.base_url = f"http://{self.addr}"
        while True:
            try:
                status, _ = self.request("/healthz", timeout=2.0)
                if status == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise FleetError(
                    f"notesd {self.instance} did not answer /healthz at {self.base_url}: "
                    f"{_tail(self.stderr) if self.stderr else ''}"
                )
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 5.0) -> int | None:
        """Stop the process by its PID (SIGTERM, then SIGKILL after ``timeout`` s),
        reap it and return its exit code. Safe to call more than once."""
        if self.proc is not None:
            self.returncode = _terminate(self.proc, timeout)
        if self._stderr_file is not None:
            self._stderr_file.close()
            self._stderr_file = None
        _unregister(self)
        return self.returncode

    def cleanup(self) -> None:
        """Stop, and delete the working folder if this object made it."""
        self.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> FleetInstance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<FleetInstance {self.instance} {self.version} {self.base_url or '-'} {state}>"

    # -- talking to it

    def request(
        self,
        path: str,
        *,
        token: str | None = None,
        auth: bool = False,
        timeout: float = 30.0,
        data: bytes | None = None,
    ) -> tuple[int, bytes]:
        """``GET`` (or ``POST`` with ``data``) ``path``; returns (status, body).

        ``token`` sends ``Authorization: Bearer token``; ``auth=True`` sends
        this instance's own token. HTTP errors are returned, not raised.
        """
        if auth:
            token = self.token
        req = urllib.request.Request(self.base_url + path, data=data)
        if token is not None:
            req.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def fetch(self, path: str, *, timeout: float = 30.0) -> bytes:
        """``GET`` with this instance's token; raise FleetError unless 200."""
        status, body = self.request(path, auth=True, timeout=timeout)
        if status != 200:
            raise FleetError(f"{self.base_url}{path}: HTTP {status}: {body[:200]!r}")
        return body

    def cpu_profile(self, seconds: int = 2) -> bytes:
        """A CPU profile (gzipped pprof) of the next ``seconds`` seconds."""
        return self.fetch(f"/debug/pprof/profile?seconds={seconds}", timeout=seconds + 30)

    def metrics(self) -> str:
        return self.fetch("/metrics").decode()

    def info(self) -> dict:
        return json.loads(self.fetch("/info"))


@dataclass(frozen=True)
class InstanceSpec:
    """How to start one instance (see ``FleetInstance.start``); ``gctrace=True``
    writes its stderr with gctrace lines to ``<workdir>/<instance>.gctrace``."""

    version: str
    instance: str
    gogc: int | str | None = None
    gomemlimit: int | str | None = None
    token: str | None = None
    gctrace: bool = False
    extra_args: tuple[str, ...] = ()  # notesd flags, e.g. ("-cpu-profile-hz=500",)


class Fleet(list):
    """The started instances (a list of FleetInstance); a context manager that
    stops them all on exit."""

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every instance: SIGTERM to all first, then wait for each."""
        stop_instances(self, timeout)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_instances(instances: Iterable[FleetInstance], timeout: float = 5.0) -> None:
    """SIGTERM every running instance at once, then stop (wait/SIGKILL/reap) each."""
    instances = list(instances)
    for inst in instances:
        if inst.running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(inst.pid, signal.SIGTERM)
    for inst in instances:
        inst.stop(timeout)


def start_fleet(
    specs: Iterable[InstanceSpec | Mapping[str, Any]],
    *,
    binaries: FleetBinaries | None = None,
    workdir: str | os.PathLike | None = None,
    max_lifetime: float = 600.0,
    ready_timeout: float = 120.0,  # bounds a hang: starts take seconds, more under load
) -> Fleet:
    """Start one notesd per spec (all launched, then each awaited) and return them.

    If anything fails, KeyboardInterrupt included, the ones already started
    are stopped before the exception goes on. Port files and stderr/gctrace
    files go to ``workdir`` (default: a new temporary folder, kept so that the
    logs can be read after the stop). Use the result as a context
    manager (``with start_fleet(...) as fleet:``) to stop them all on exit.
    """
    bins = binaries or build_fleet()
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="fleet-"))
    fleet = Fleet()
    try:
        for raw in specs:
            spec = raw if isinstance(raw, InstanceSpec) else InstanceSpec(**raw)
            inst = FleetInstance(bins.notesd, workdir=base)
            fleet.append(inst)
            inst.launch(
                spec.version,
                spec.instance,
                gogc=spec.gogc,
                gomemlimit=spec.gomemlimit,
                token=spec.token,
                gctrace_path=base / f"{spec.instance}.gctrace" if spec.gctrace else None,
                max_lifetime=max_lifetime,
                extra_args=spec.extra_args,
            )
        for inst in fleet:
            inst.wait_ready(ready_timeout)
    except BaseException:
        fleet.stop()
        raise
    return fleet


# --- load -------------------------------------------------------------------------


def _target_urls(targets: Iterable[str | FleetInstance] | str | FleetInstance) -> list[str]:
    if isinstance(targets, (str, FleetInstance)):
        targets = [targets]
    urls = [t.base_url if isinstance(t, FleetInstance) else str(t) for t in targets]
    if not urls:
        raise ValueError("no load targets")
    return urls


class LoadRun:
    """A running loadgen process; ``wait()`` returns its JSON summary as a dict."""

    def __init__(self, cmd: list[str], timeout: float) -> None:
        self.cmd = cmd
        self.timeout = timeout
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        _register(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self) -> dict:
        """Wait (at most the run's timeout) and return the summary."""
        try:
            out, err = self.proc.communicate(timeout=self.timeout)
        except BaseException:
            self.stop()
            raise
        finally:
            _unregister(self)
        if self.proc.returncode != 0:
            raise FleetError(f"loadgen exited with {self.proc.returncode}: {err.decode().strip()}")
        lines = out.decode().strip().splitlines()
        if not lines:
            raise FleetError(f"loadgen printed no summary: {err.decode().strip()}")
        return json.loads(lines[-1])

    def stop(self, timeout: float = 5.0) -> int | None:
        rc = _terminate(self.proc, timeout)
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
        _unregister(self)
        return rc

    def __enter__(self) -> LoadRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_load(
    targets: Iterable[str | FleetInstance] | str | FleetInstance,
    duration: float,
    rate_start: float,
    rate_end: float | None = None,
    max_requests: int = 100_000,
    *,
    concurrency: int = 8,
    seed: int = 1,
    request_timeout: float = 5.0,
    loadgen: str | os.PathLike | None = None,
) -> LoadRun:
    """Start loadgen in the background (see ``run_load``)."""
    exe = Path(loadgen) if loadgen is not None else build_fleet().loadgen
    rate_end = rate_start if rate_end is None else rate_end
    cmd = [
        str(exe),
        "-targets=" + ",".join(_target_urls(targets)),
        f"-duration={duration:.3f}s",
        f"-rate-start={rate_start}",
        f"-rate-end={rate_end}",
        f"-max-requests={int(max_requests)}",
        f"-concurrency={concurrency}",
        f"-seed={seed}",
        f"-timeout={request_timeout:.3f}s",
    ]
    return LoadRun(cmd, timeout=duration + request_timeout + 30)


def run_load(
    targets: Iterable[str | FleetInstance] | str | FleetInstance,
    duration: float,
    rate_start: float,
    rate_end: float | None = None,
    max_requests: int = 100_000,
    **options: Any,
) -> dict:
    """Drive load at ``targets`` (URLs or instances, round robin) for ``duration``
    seconds, the rate ramping linearly from ``rate_start`` to ``rate_end``
    requests/s, at most ``max_requests``; return loadgen's summary: requests,
    errors, late, p50_ms, p99_ms, max_ms, elapsed_s, rate_avg, by_kind,
    by_status, by_target. Options: see ``start_load``."""
    with start_load(targets, duration, rate_start, rate_end, max_requests, **options) as run:
        return run.wait()


# --- reading what the services expose -------------------------------------------------


def metric_names(text: str) -> set[str]:
    """Metric family names in a Prometheus text exposition (from its samples;
    ``_bucket``/``_sum``/``_count`` of histograms and summaries are kept as
    they are, and the family named by ``# TYPE`` is added too)."""
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 3:
                names.add(parts[2])
        elif line and not line.startswith("#"):
            names.add(line.split("{", 1)[0].split(" ", 1)[0])
    return names


def parse_samples(text: str) -> dict[str, float]:
    """Samples of a Prometheus text exposition: ``{series: value}``, where the
    series is written as exposed (``name`` or ``name{label="v",...}``)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, rest = line.rpartition("}") if "}" in line else ("", "", line)
        if series:
            series += "}"
            value = rest.split()[0]
        else:
            series, value = line.split()[:2]
        out[series] = float(value)
    return out
