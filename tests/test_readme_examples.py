"""The README's examples run exactly as written.

The code blocks are read from README.md (not copied here), so an example that
changes is tested as changed. They run in a sandbox folder holding the files
they name: cpu.pb.gz, heap.pb.gz, a.pb.gz, b.pb.gz, profiles/ and dump/ (the
Go test program's profiles), gctrace.log, api-1.log, api-2.log, metrics.txt
(recorded GC data), old/default.pgo, examples/job.toml with its drop folder
examples/incoming, and fleet.duckdb: a
copy of a short demo run's store whose service is named ``api`` (the README's
running example) and whose v1 profiles were taken on 2026-11-15 (the day the
README's time-window example compares).

- Every ``pyproflab`` line of the CLI, live-fleet and analyses blocks runs
  in-process and exits 0, except the two that need live services
  (``collect`` of a targets file, ``ingest-gc --prometheus``), which are
  listed and skipped by name.
- The Python quick start runs as one script; the SQL example runs on the store.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from support.browser.stores import demo_store

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
GC_DATA = REPO / "tests" / "testdata" / "gc"

# Lines that need services running on the network: not run, named here.
NEEDS_LIVE_SERVICES = ("pyproflab collect targets.toml", "pyproflab ingest-gc --prometheus")


def blocks(lang: str) -> list[tuple[str, str]]:
    """(heading above, code) of every ```lang block of the README."""
    text = README.read_text(encoding="utf-8")
    out = []
    heading = ""
    for m in re.finditer(r"^(#+ [^\n]*)$|^```(\w*)\n(.*?)^```", text, re.M | re.S):
        if m.group(1):
            heading = m.group(1)
        elif m.group(2) == lang:
            out.append((heading, m.group(3)))
    return out


def commands(code: str) -> list[str]:
    """The shell lines of a block, continuation lines joined, comments dropped."""
    joined = code.replace("\\\n", " ")
    return [ln.strip() for ln in joined.splitlines() if ln.strip().startswith("pyproflab ")]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory, go_profiles) -> Path:
    import duckdb

    import pyproflab

    d = tmp_path_factory.mktemp("readme")
    for name, kind in (("cpu.pb.gz", "cpu"), ("heap.pb.gz", "heap"), ("a.pb.gz", "cpu")):
        shutil.copy(go_profiles[kind], d / name)
    shutil.copy(go_profiles["cpu2"], d / "b.pb.gz")
    (d / "profiles").mkdir()
    for kind in ("cpu", "heap", "allocs"):
        shutil.copy(go_profiles[kind], d / "profiles" / f"{kind}.pb.gz")
    dump = d / "dump" / "api" / "v3" / "i-3"
    dump.mkdir(parents=True)
    shutil.copy(go_profiles["cpu2"], dump / "cpu-2026-11-22T10:00:00Z.pb.gz")
    shutil.copy(GC_DATA / "gctrace-go1.26.log", d / "gctrace.log")
    shutil.copy(GC_DATA / "gctrace-go1.26.log", d / "api-1.log")
    shutil.copy(GC_DATA / "gctrace-go1.26.log", d / "api-2.log")
    shutil.copy(GC_DATA / "prometheus-2.42-metrics.prom", d / "metrics.txt")
    (d / "examples").mkdir()
    shutil.copy(REPO / "examples" / "job.toml", d / "examples" / "job.toml")
    (d / "examples" / "incoming").mkdir()  # the job's drop folder
    shutil.copy(demo_store(), d / "fleet.duckdb")
    with duckdb.connect(str(d / "fleet.duckdb")) as con:
        for table in ("profiles", "metric_samples", "gc_cycles"):
            con.execute(f"UPDATE {table} SET service = 'api' WHERE service = 'notesd'")
        con.execute(
            "UPDATE profiles SET time = TIMESTAMPTZ '2026-11-15 12:00:00+00' WHERE version = 'v1'"
        )
    (d / "old").mkdir()
    with pyproflab.open(d / "fleet.duckdb", read_only=True) as lab:
        lab.pgo(service="api", version="v1", profile_type="cpu").write(
            d / "old" / "default.pgo", verify=False
        )
    return d


def _run_block(heading_part: str, sandbox: Path, monkeypatch, capsys) -> list[str]:
    from pyproflab.cli import main

    monkeypatch.chdir(sandbox)
    code = next(c for h, c in blocks("sh") if heading_part in h)
    ran = []
    for line in commands(code):
        if line.startswith(NEEDS_LIVE_SERVICES):
            continue
        args = shlex.split(line, comments=True)
        capsys.readouterr()
        code_ = main(args[1:])
        out = capsys.readouterr()
        assert code_ == 0, f"README line failed (exit {code_}): {line}\n{out.err[-2000:]}"
        assert "Traceback" not in out.err, line
        ran.append(line)
    assert ran, f"no command found under {heading_part!r}"
    return ran


def test_cli_quick_start(sandbox, monkeypatch, capsys):
    ran = _run_block("Quick start: the CLI", sandbox, monkeypatch, capsys)
    assert len(ran) == 18  # four of them tree, peek, list and traces --tagshow
    assert (sandbox / "merged.pb.gz").stat().st_size > 0
    assert (sandbox / "other.duckdb").exists()


def test_live_fleet_examples_that_need_no_service(sandbox, monkeypatch, capsys):
    ran = _run_block("Live fleets", sandbox, monkeypatch, capsys)
    assert len(ran) == 3  # collect and ingest-gc --prometheus need live services


def test_analyses(sandbox, monkeypatch, capsys):
    ran = _run_block("Analyses: regressions", sandbox, monkeypatch, capsys)
    assert len(ran) == 9
    assert (sandbox / "report.html").stat().st_size > 0
    assert (sandbox / "default.pgo").stat().st_size > 0


def test_python_quick_start(sandbox, monkeypatch):
    monkeypatch.chdir(sandbox)
    (code,) = [c for h, c in blocks("python") if "Quick start: Python" in h]
    ns: dict = {"__name__": "readme"}
    try:
        exec(compile(code, str(README), "exec"), ns)  # noqa: S102
    finally:
        if "lab" in ns:
            ns["lab"].close()  # the README leaves it open; the next test opens the store
    assert (sandbox / "copy.pb.gz").stat().st_size > 0


def test_sql_example(sandbox):
    import pyproflab

    (code,) = [c for _, c in blocks("sql")]
    with pyproflab.open(sandbox / "fleet.duckdb", read_only=True) as lab:
        rows = lab.sql(code).to_pylist()
    assert rows and set(rows[0]) == {"fn", "cpu_seconds"}
