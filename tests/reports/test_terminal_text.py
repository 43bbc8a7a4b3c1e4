"""Text reports print a profile's names inert: no control character reaches the terminal.

A function name is the profile's data; a crafted one holding ``ESC [ 31 m`` would
recolour the terminal, an OSC sequence retitle it (or, in some terminals, write the
clipboard), a carriage return overwrite the line before it, a newline forge a row.
Each text layout (pprof's top, traces, tree, peek, list; pgo and pgo diff) writes
such characters as ``\\xNN`` (``formatting.inert``, as the aligned tables already do).
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from pyproflab._proto import profile_pb2
from pyproflab.cli import main

TESTDATA = Path(__file__).resolve().parents[1] / "testdata" / "go"
ESC_NAME = "main.esc\x1b[31mRED\x1b]0;title\x07"
NL_NAME = "main.new\nline\r"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # newline and tab are the layout's


def renamed(source: Path, path: Path, names: dict[str, str]) -> Path:
    """The profile ``source`` with its functions renamed by ``names``, written to ``path``."""
    p = profile_pb2.Profile()
    p.ParseFromString(gzip.decompress(source.read_bytes()))
    for f in p.function:
        new = names.get(p.string_table[f.name])
        if new is not None:
            p.string_table.append(new)
            f.name = f.system_name = len(p.string_table) - 1
    path.write_bytes(gzip.compress(p.SerializeToString()))
    return path


def hostile_cpu(path: Path, source: str = "cpu.pb.gz") -> Path:
    """tests/testdata/go/``source`` with main.cpuWork and main.spin renamed."""
    return renamed(TESTDATA / source, path, {"main.cpuWork": ESC_NAME, "main.spin": NL_NAME})


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[Path, Path, Path, Path]:
    d = tmp_path_factory.mktemp("terminal")
    a, b = hostile_cpu(d / "a.pb.gz"), hostile_cpu(d / "b.pb.gz", "cpu2.pb.gz")
    assert main(["pgo", str(a), "-o", str(d / "a.pgo"), "--no-verify"]) == 0
    assert main(["pgo", str(b), "-o", str(d / "b.pgo"), "--no-verify"]) == 0
    return a, b, d / "a.pgo", d / "b.pgo"


COMMANDS = {
    "top": lambda a, b, pa, pb: ["top", str(a)],
    "top diff": lambda a, b, pa, pb: ["top", str(b), "--diff_base", str(a)],
    "traces": lambda a, b, pa, pb: ["traces", str(a)],
    "tree": lambda a, b, pa, pb: ["tree", str(a)],
    "peek": lambda a, b, pa, pb: ["peek", "main", str(a)],
    "list": lambda a, b, pa, pb: ["list", "main", str(a)],
    "pgo": lambda a, b, pa, pb: ["pgo", str(a), "-o", str(pa.with_suffix(".x")), "--no-verify"],
    "pgo diff": lambda a, b, pa, pb: ["pgo", "diff", str(pa), str(pb)],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_text_names_are_inert(command, files, capsys) -> None:
    capsys.readouterr()
    assert main(COMMANDS[command](*files)) == 0
    out = capsys.readouterr().out
    assert not CONTROL.findall(out), f"{command}: {sorted(set(CONTROL.findall(out)))}"
    assert "main.esc\\x1b[31mRED\\x1b]0;title\\x07" in out
    assert "main.new\\x0aline\\x0d" in out  # one name, one line


def test_regressions_text_names_are_inert(tmp_path, capsys) -> None:
    """The regressions text's header (the store's service in a job's selection), its
    call-edge lines and the over-time header print names inert too (tests/testdata/
    regressions/helper: main.viaB -> main.helper carries a significant change)."""
    import json

    service = "svc\x1b]0;retitled\x07"
    for case in ("helper", "base-helper"):
        for f in sorted((TESTDATA.parent / "regressions" / case).glob("*.pb.gz")):
            renamed(f, tmp_path / f.name, {"main.viaB": ESC_NAME})
            side = json.loads(Path(f"{f}.json").read_text())
            Path(tmp_path / f"{f.name}.json").write_text(json.dumps({**side, "service": service}))
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", str(tmp_path), "--db", db]) == 0
    runs = {
        "main.esc\\x1b[31mRED": ["--base", "version=v1", "--new", "version=v2"],
        "svc\\x1b]0;retitled\\x07": ["--over-time", "--service", service],
    }
    for shown, argv in runs.items():
        capsys.readouterr()
        assert main(["regressions", "--db", db, *argv]) == 0
        out = capsys.readouterr().out
        assert not CONTROL.findall(out), (argv[0], sorted(set(CONTROL.findall(out))))
        assert shown in out


@pytest.mark.go
def test_notes_and_findings_print_instances_inert(tmp_path, capsys) -> None:
    """gc's notes and the trace findings name instances (a store's metadata, pushed by
    SDKs or read from sidecars): inert in text too."""
    db, instance = str(tmp_path / "g.duckdb"), "i\x1b[31mX"
    trace = TESTDATA.parent / "traces" / "mutex.trace"  # its p99 wait is CPU starvation
    files = [str(TESTDATA / "cpu.pb.gz"), str(trace)]
    assert main(["ingest", *files, "--db", db, "--service", "s", "--instance", instance]) == 0
    for argv in (["gc", "--db", db], ["trace", "sched", "--db", db]):
        capsys.readouterr()
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert not CONTROL.findall(out), (argv[0], sorted(set(CONTROL.findall(out))))
        assert "of i\\x1b[31mX" in out or "on i\\x1b[31mX" in out
