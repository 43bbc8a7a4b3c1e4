"""An output over one of the command's own inputs is refused before anything is written.

``pyproflab pgo a.pb.gz b.pb.gz -o a.pb.gz`` replaced a.pb.gz with the PGO
profile and exited 0 (as did merge, top, traces, tree, pgo diff and pgo
weights); ``top``/``gc``/``report --db S -o S`` replaced the store with the
report. Each case here is one line, exit 2, every file as it was, whatever
the spelling of the path (relative, absolute, ``..``, a symlink either way, a
hard link, a folder holding the file, ``$PYPROFLAB_DB``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.testenv import RECORDED_GO

from pyproflab.cli import main

GOPROGS = Path(__file__).resolve().parents[1] / "goprogs"

_MAIN = "goprogs/profgen/main.go"
CASES = {
    "merge": ["merge", "a.pb.gz", "b.pb.gz", "-o", "a.pb.gz"],
    "pgo-dot-spelling": ["pgo", "a.pb.gz", "b.pb.gz", "-o", "./a.pb.gz"],
    "pgo-absolute": ["pgo", "a.pb.gz", "-o", "{dir}/a.pb.gz"],
    "pgo-dotdot": ["pgo", "a.pb.gz", "-o", "sub/../a.pb.gz"],
    "pgo-symlink-input": ["pgo", "link.pb.gz", "b.pb.gz", "-o", "a.pb.gz"],
    "pgo-symlink-output": ["pgo", "a.pb.gz", "-o", "link.pb.gz"],
    "pgo-hard-link": ["pgo", "hard.pb.gz", "-o", "a.pb.gz"],
    "pgo-diff": ["pgo", "diff", "a.pb.gz", "b.pb.gz", "-o", "b.pb.gz"],
    "pgo-weights": ["pgo", "weights", "a.pb.gz", "b.pb.gz", "-o", "a.pb.gz"],
    "merge-folder": ["merge", "sub", "-o", "sub/c.pb.gz"],
    "merge-glob": ["merge", "sub/*.pb.gz", "-o", "sub/c.pb.gz"],
    "top": ["top", "a.pb.gz", "-o", "a.pb.gz"],
    "top-diff-base": ["top", "b.pb.gz", "--diff_base", "a.pb.gz", "-o", "a.pb.gz"],
    "traces": ["traces", "a.pb.gz", "--output", "a.pb.gz"],
    "tree": ["tree", "a.pb.gz", "-o", "a.pb.gz"],
    "trace-pprof": ["trace", "pprof", "x.trace", "--kind", "net", "-o", "x.trace"],
    "gogc-gctrace": ["gogc", "--gctrace", "gc.log", "-o", "gc.log"],
    "top-store": ["top", "--db", "s.duckdb", "-o", "s.duckdb"],
    "gc-store": ["gc", "--db", "s.duckdb", "-o", "./s.duckdb"],
    "report-store": ["report", "--db", "s.duckdb", "-o", "{dir}/s.duckdb"],
    "top-store-from-env": ["top", "a.pb.gz", "-o", "env.duckdb"],
    # list's source files, found under --source_path (trimmed to profgen/main.go)
    "list-source-path": ["list", "main\\.fib", "a.pb.gz", "--source_path", "goprogs", "-o", _MAIN],
    "list-source-absolute": [
        "list",
        "main\\.fib",
        "a.pb.gz",
        "--source_path",
        "goprogs",
        "-o",
        "{dir}/" + _MAIN,
    ],
    "top-dataset": ["top", "--engine", "spark", "--dataset", "ds", "-o", "ds/functions.parquet"],
    "regressions-dataset": [
        *["regressions", "--engine", "spark", "--dataset", "ds", "--base", "version=v1"],
        *["--new", "version=v2", "-o", "ds/samples/service=s/data_0.parquet"],
    ],
    "pgo-check-source": ["pgo", "check", "a.pb.gz", "--source", "goprogs/profgen", "-o", _MAIN],
    "pgo-effect-source": [
        *["pgo", "effect", "--before", "version=v1", "--after", "version=v2"],
        *["--source", "goprogs/profgen", "--pgo", "a.pb.gz", "-o", "goprogs/profgen/go.mod"],
    ],
    "gogc-cgroup": [
        *["gogc", "--gogc", "100", "--gc-cycles-per-min", "10", "--gc-cpu-share", "0.05"],
        *[
            "--heap-goal",
            "512MiB",
            "--live-heap",
            "256MiB",
            "--cgroup",
            "cg",
            "-o",
            "cg/memory.max",
        ],
    ],
}


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two profiles, links to the first, a folder holding copies, a trace, a
    gctrace log, two stores (not opened: the refusal comes first), the
    profiled program's module, a Parquet dataset and a cgroup directory."""
    shutil.copyfile(RECORDED_GO / "cpu.pb.gz", tmp_path / "a.pb.gz")
    shutil.copyfile(RECORDED_GO / "cpu2.pb.gz", tmp_path / "b.pb.gz")
    (tmp_path / "link.pb.gz").symlink_to("a.pb.gz")
    os.link(tmp_path / "a.pb.gz", tmp_path / "hard.pb.gz")
    (tmp_path / "sub").mkdir()
    shutil.copyfile(RECORDED_GO / "cpu.pb.gz", tmp_path / "sub" / "c.pb.gz")
    for name, data in (("x.trace", b"go 1.23 trace"), ("gc.log", b"gc 1 @0.1s")):
        (tmp_path / name).write_bytes(data)
    for name in ("s.duckdb", "env.duckdb"):
        (tmp_path / name).write_bytes(b"a store")
    module = tmp_path / "goprogs" / "profgen"
    module.mkdir(parents=True)
    shutil.copyfile(GOPROGS / "profgen" / "main.go", module / "main.go")
    (module / "go.mod").write_text("module example.com/profgen\n\ngo 1.22\n")
    (tmp_path / "ds" / "samples" / "service=s").mkdir(parents=True)
    for name in ("functions.parquet", "samples/service=s/data_0.parquet"):
        (tmp_path / "ds" / name).write_bytes(b"PAR1 a table PAR1")
    (tmp_path / "cg").mkdir()
    (tmp_path / "cg" / "memory.max").write_text("1073741824\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYPROFLAB_DB", "env.duckdb")
    return tmp_path


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("case", CASES)
def test_an_output_over_an_input_is_refused(case, folder, capsys) -> None:
    before = _files(folder)
    code = main([arg.format(dir=folder) for arg in CASES[case]])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("pyproflab: error: -o "), err
    assert "give another output path" in err
    assert _files(folder) == before  # nothing replaced, no temporary file left


@pytest.mark.parametrize(
    "argv",
    [
        ["merge", "a.pb.gz", "b.pb.gz", "-o", "new.pb.gz"],
        ["merge", "sub", "-o", "sub/new.pb.gz"],  # a new file in an input folder
        ["top", "a.pb.gz", "-o", "-"],
        [
            "list",
            "main\\.fib",
            "a.pb.gz",
            "--source_path",
            "goprogs",
            "-o",
            "goprogs/profgen/fib.txt",
        ],
    ],
)
def test_an_output_beside_the_inputs_is_written(argv, folder, capsys) -> None:
    assert main(argv) == 0, capsys.readouterr().err
