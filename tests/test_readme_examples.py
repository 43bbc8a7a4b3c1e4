"""The README's commands and Python run exactly as written, and so do the examples of
docs/cli.md, docs/python.md and docs/store.md.

The code blocks are read from the files (not copied here), so an example that
changes is tested as changed.

docs/traces.md's block runs the same way, in order (it needs Go).

README.md, as a new user meets it:

- ``make`` lines (``make setup``, ``make demo``, ``make test``): the targets
  exist and their recipes expand (``make -n``); running them is the suite
  itself (``make test``), and ``make demo`` is run by tests/test_demo.py on
  short settings.
- ``. .venv/bin/activate``: in a shell, after it, ``pyproflab`` is the
  command of this checkout's ``.venv`` (skipped, saying so, where ``make
  setup`` has not made one).
- The tour's ``pyproflab`` lines run in-process, in order, in a folder that
  holds only what ``make demo`` leaves there: ``pyproflab.duckdb`` (the
  recorded demo run's store). Each exits 0 without a traceback. Then the
  Python block runs as one script in the same folder, as the README says.

The docs' examples run in a folder holding the files they name: cpu.pb.gz,
heap.pb.gz, a.pb.gz, b.pb.gz, profiles/ and dump/ (the Go test program's
profiles), gctrace.log, api-1.log, api-2.log, metrics.txt (recorded GC data),
old/default.pgo, examples/job.toml with its drop folder, and fleet.duckdb: a
copy of the demo store whose service is named ``api`` and whose v1 profiles
were taken on 2026-11-15 (the day an example compares). Every ``pyproflab``
line of docs/cli.md exits 0; docs/python.md's block runs as one script;
docs/store.md's SQL runs on the store.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from support.browser.stores import demo_store

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
GC_DATA = REPO / "tests" / "testdata" / "gc"


def blocks(path: Path, lang: str) -> list[tuple[str, str]]:
    """(heading above, code) of every ```lang block of ``path``."""
    text = path.read_text(encoding="utf-8")
    out = []
    heading = ""
    for m in re.finditer(r"^(#+ [^\n]*)$|^```(\w*)\n(.*?)^```", text, re.M | re.S):
        if m.group(1):
            heading = m.group(1)
        elif m.group(2) == lang:
            out.append((heading, m.group(3)))
    return out


def lines(code: str) -> list[str]:
    """The shell lines of a block, continuation lines joined, blank ones dropped."""
    joined = code.replace("\\\n", " ")
    return [ln.strip() for ln in joined.splitlines() if ln.strip()]


def run_lines(found: list[str], cwd: Path, monkeypatch, capsys) -> list[str]:
    """Run each ``pyproflab`` line in-process in ``cwd``; each must exit 0."""
    from pyproflab.cli import main

    monkeypatch.chdir(cwd)
    ran = []
    for line in found:
        args = shlex.split(line, comments=True)
        assert args[0] == "pyproflab", line
        capsys.readouterr()
        code = main(args[1:])
        out = capsys.readouterr()
        assert code == 0, f"line failed (exit {code}): {line}\n{out.err[-2000:]}"
        assert "Traceback" not in out.err, line
        ran.append(line)
    return ran


def run_python(path: Path, code: str, cwd: Path, monkeypatch) -> dict:
    monkeypatch.chdir(cwd)
    ns: dict = {"__name__": "example"}
    try:
        exec(compile(code, str(path), "exec"), ns)  # noqa: S102
    finally:
        if hasattr(ns.get("lab"), "close"):
            ns["lab"].close()  # a block may leave it open; the next test opens the store
    return ns


# --- README.md ---------------------------------------------------------------------


def test_readme_is_a_short_guide() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for heading in ("## Installing", "## The two commands", "## A five-minute tour"):
        assert heading in text
    for doc in re.findall(r"\]\(([\w./-]+\.md)\)", text):
        assert (REPO / doc).is_file(), f"README links to {doc}, which is not there"
    # what is tested against the real thing and what against stand-ins, said plainly
    assert "protocol-faithful test servers" in text and "real SDKs" in text


def test_readme_make_lines_expand() -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not on PATH")
    found = [ln for _, code in blocks(README, "sh") for ln in lines(code) if ln.startswith("make")]
    assert {"make setup", "make demo", "make test"} <= set(found), found
    for line in found:
        res = subprocess.run([*shlex.split(line), "-n"], cwd=REPO, capture_output=True, text=True)
        assert res.returncode == 0, f"{line}: {res.stderr}"


def test_readme_activate_puts_pyproflab_on_path() -> None:
    found = [ln for _, code in blocks(README, "sh") for ln in lines(code) if "activate" in ln]
    assert found == [". .venv/bin/activate"], found
    if not (REPO / ".venv" / "bin" / "activate").is_file():
        pytest.skip("no .venv here (make setup makes it)")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    res = subprocess.run(
        ["sh", "-c", f"{found[0]} && command -v pyproflab"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(REPO / ".venv" / "bin" / "pyproflab")


def test_readme_tour_and_python_run_as_written(tmp_path, monkeypatch, capsys) -> None:
    """The tour's commands, then its Python, in a folder holding only the demo's store."""
    shutil.copy(demo_store(), tmp_path / "pyproflab.duckdb")
    (tour,) = [c for h, c in blocks(README, "sh") if "tour" in h.lower() and "pyproflab" in c]
    ran = run_lines(lines(tour), tmp_path, monkeypatch, capsys)
    assert len(ran) >= 10
    for out in ("v1.pb.gz", "v2.pb.gz", "default.pgo", "report.html"):
        assert (tmp_path / out).stat().st_size > 0, out
    (code,) = [c for _, c in blocks(README, "python")]
    run_python(README, code, tmp_path, monkeypatch)
    out = capsys.readouterr().out
    assert "CPU profiles" in out and "main.scoreNote" in out
    assert "RegressionsResult(" not in out  # print(r) is the report, not a repr
    assert "pyarrow.Table" not in out  # print(p) is one line, not its tables


# --- docs ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory, go_profiles) -> Path:
    import duckdb

    import pyproflab

    d = tmp_path_factory.mktemp("docs")
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
    shutil.copy(REPO / "tests" / "testdata" / "traces" / "chan.trace", d / "trace.out")
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


def test_cli_reference_examples(sandbox, monkeypatch, capsys) -> None:
    found = [ln for _, code in blocks(DOCS / "cli.md", "sh") for ln in lines(code)]
    ran = run_lines(found, sandbox, monkeypatch, capsys)
    assert len(ran) >= 25
    assert (sandbox / "merged.pb.gz").stat().st_size > 0
    assert (sandbox / "other.duckdb").exists()
    assert (sandbox / "report.html").stat().st_size > 0
    # Every line that stores names the store the next lines read: ingest-gc without
    # --db filled ./pyproflab.duckdb, and `gogc --db fleet.duckdb --service api` then
    # found no GC data of service api (exit 2) in a folder the page's own lines filled.
    assert not (sandbox / "pyproflab.duckdb").exists()
    import duckdb

    with duckdb.connect(str(sandbox / "fleet.duckdb"), read_only=True) as con:
        for table in ("gc_cycles", "metric_samples"):
            sql = f"SELECT count(*) FROM {table} WHERE service = 'api' AND instance = 'i-1'"
            assert con.execute(sql).fetchone()[0] > 0, table


@pytest.mark.go
def test_traces_examples_run_as_written(sandbox, tmp_path, monkeypatch, capsys) -> None:
    """docs/traces.md's block, in order, in a folder holding trace.out, traces/ and
    fleet.duckdb (the demo's store, which holds no trace). Its `trace stw --db`
    line came before the `ingest traces/` that stores what it reads: as written,
    it failed 'no traces match service=api'."""
    d = tmp_path / "docs"
    shutil.copytree(sandbox, d)
    (d / "traces").mkdir()
    for name in ("mutex", "gcheavy"):
        shutil.copy(REPO / "tests" / "testdata" / "traces" / f"{name}.trace", d / "traces")
    found = [ln for _, code in blocks(DOCS / "traces.md", "sh") for ln in lines(code)]
    ran = run_lines(found, d, monkeypatch, capsys)
    assert len(ran) == 7 and (d / "sync.pb.gz").stat().st_size > 0


def test_python_reference_runs(sandbox, monkeypatch) -> None:
    (code,) = [c for _, c in blocks(DOCS / "python.md", "python")]
    run_python(DOCS / "python.md", code, sandbox, monkeypatch)
    assert (sandbox / "copy.pb.gz").stat().st_size > 0


def test_store_sql_example(sandbox) -> None:
    import pyproflab

    (code,) = [c for _, c in blocks(DOCS / "store.md", "sql")]
    with pyproflab.open(sandbox / "fleet.duckdb", read_only=True) as lab:
        rows = lab.sql(code).to_pylist()
    assert rows and set(rows[0]) == {"fn", "cpu_seconds"}


def test_readme_tour_outputs_are_ignored_by_git() -> None:
    """The tour writes its -o files into the checkout: after it, `git status` listed
    v1.pb.gz, v2.pb.gz and default.pgo as untracked (report.html was ignored)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    (tour,) = [c for h, c in blocks(README, "sh") if "tour" in h.lower() and "pyproflab" in c]
    args = [shlex.split(ln, comments=True) for ln in lines(tour)]
    outputs = [a[i + 1] for a in args for i, x in enumerate(a) if x == "-o"]
    assert len(outputs) >= 4, outputs
    res = subprocess.run(
        ["git", "check-ignore", "--no-index", *outputs], cwd=REPO, capture_output=True, text=True
    )
    assert sorted(res.stdout.split()) == sorted(outputs)
