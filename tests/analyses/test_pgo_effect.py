"""pgo effect on a build pair of tests/pgoprogs/effect, without and with PGO,
recorded once (tests/support/record_pgo_effect.py): the CPU change with its
interval, the memory side, and the compiler's PGO decisions equal to the
lines it printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.pgo_compiler import ignored_profiles

import pyproflab
from pyproflab.analyses.pgo_effect import (
    EffectOptions,
    build_log,
    parse_build_log,
    pgo_effect,
    ratio_change,
)
from pyproflab.cli import main as cli_main
from pyproflab.store.select import Selection

TESTS = Path(__file__).resolve().parents[1]
SOURCE = TESTS / "pgoprogs" / "effect"
DATA = TESTS / "testdata" / "pgo"
BEFORE, AFTER = Selection(service="pgoeffect", version="nopgo"), Selection(version="pgo")
PRINTED = re.compile(r"hot-budget check allows|hot-big check disallows|PGO devirtualizing")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    """The recorded windows in a store: version nopgo and pgo, one instance per run."""
    from pyproflab.sources.prometheus_scan import read_exposition
    from pyproflab.store.metrics import ingest_metric_rows, with_meta

    path = tmp_path_factory.mktemp("effect") / "s.duckdb"
    lab = pyproflab.open(path)
    for build in ("nopgo", "pgo"):
        for cpu in sorted((DATA / "effect" / build).glob("cpu-*.pb.gz")):
            w = cpu.name.split("-")[1].split(".")[0]
            meta = {"service": "pgoeffect", "version": build, "instance": f"{build}-w{w}"}
            files = [cpu.parent / f"{kind}-{w}.pb.gz" for kind in ("cpu", "heap", "goroutine")]
            lab.ingest(files, **meta)
            prom = cpu.parent / f"metrics-{w}.prom"
            rows = with_meta(read_exposition(prom, source=str(prom)), source=str(prom), **meta)
            ingest_metric_rows(lab.store, rows)
    lab.close()
    return path


@pytest.fixture(scope="module")
def log(go_bin) -> str:
    return build_log(SOURCE, DATA / "effect.pgo", ".", go=go_bin)


COUNTER = "pgoeffect_batches_total"


@pytest.fixture(scope="module")
def effect(store_path, log):
    with pyproflab.open(store_path, read_only=True) as lab:
        return pgo_effect(lab.store, BEFORE, AFTER, EffectOptions(per=COUNTER), log=log)


def test_ratio_change_interval():
    import numpy as np

    v = np.array([10.0, 12, 11, 20, 22, 21])
    d = np.ones(6)
    after = np.array([False, False, False, True, True, True])
    before_, after_, rel, lo, hi = ratio_change(v, d, after, 0.95)
    assert (before_, after_) == (11.0, 21.0) and rel == pytest.approx(21 / 11 - 1)
    assert 0 < lo < rel < hi
    same = ratio_change(np.array([10.0, 12, 11, 12, 10, 11]), d, after, 0.95)
    assert same[3] < 0 < same[4]


def test_change_lines_print_bytes_in_binary_units():
    """Notebook 04 on the demo printed 'heap in use: 1.45e+07 -> 1.23e+07 bytes'."""
    from pyproflab.analyses.pgo_effect import Change
    from pyproflab.reports.pgo_effect import change_line

    heap = Change("heap in use", "bytes", 1.45e7, 1.23e7, -0.148, -0.87, 4.76, 2, 2)
    assert change_line(heap).startswith("heap in use: 13.8 MiB -> 11.7 MiB, -14.8% [")
    cpu = Change("CPU", "cores", 0.105, 0.114, 0.083, 0.039, 0.128, 32, 32)
    assert change_line(cpu).startswith("CPU: 0.105 cores -> 0.114 cores, +8.3% [+3.9%, +12.8%]")


def test_effect_finds_the_cpu_change_and_the_stack_growth(effect):
    """On this recording PGO made a batch cost more CPU, and the cause shows:
    scratch's 2 KiB array inlined into every frame of the recursive walk grew
    the goroutines' stacks (golang/go#65532), and growing them costs CPU."""
    c = effect.cpu
    assert c is not None and c.n_before == c.n_after == 8 and c.unit == f"s/{COUNTER}"
    assert 0 < c.lo < c.rel < c.hi  # more CPU per batch, credibly
    rows = {r["label"]: r for r in effect.regressions.rows.to_pylist()}
    for fn in ("runtime.newstack", "runtime.copystack", "main.walk"):
        assert rows[fn]["cum_rel_lo"] > 0 and rows[fn]["cum_q"] <= 0.05, fn
    assert {r["label"] for r in effect.stack_rows} == {"runtime.newstack", "runtime.copystack"}
    stacks = next(m for m in effect.memory if m.what == "goroutine stacks")
    assert stacks.lo > 0  # the stacks' memory grew too
    assert {m.what for m in effect.memory} >= {"heap in use", "allocated", "goroutines"}
    print(
        f"\n{effect}\nCPU per batch {c.rel:+.1%} [{c.lo:+.1%}, {c.hi:+.1%}]; "
        f"stacks {stacks.rel:+.1%} [{stacks.lo:+.1%}, {stacks.hi:+.1%}]"
    )


@pytest.mark.go
@pytest.mark.slow
def test_decisions_equal_the_compilers_output(effect, log):
    printed = [line for line in log.splitlines() if PRINTED.search(line)]
    assert printed and sorted(effect.compiler_lines()) == sorted(printed)
    first = list(dict.fromkeys(printed))  # the order the compiler printed them in
    assert effect.compiler_lines() == sorted(
        effect.compiler_lines(), key=lambda line: first.index(line)
    )
    kinds = {(d.kind, d.callee, d.target or d.caller) for d in effect.decisions}
    assert ("devirtualize interface call", "ops[i & 15].apply", "addOp.apply") in kinds
    assert ("inline", "main.scratch", "main.walk") in kinds


def test_parse_build_log_rows():
    hot = "hot-budget check allows inlining for call main.g (cost 120) at ./a.go:9:2 in "
    hot += "function main.f"
    big = "hot-big check disallows inlining for call main.h (cost 90) at ./b.go:1:1 in big "
    text = "\n".join(
        [
            "# example.com/x",
            "./a.go:3:4: can inline f with cost 3",
            hot,
            hot,
            big + "function main.k",
            "./a.go:7:7: PGO devirtualizing function call fn to main.g",
        ]
    )
    rows = parse_build_log(text)
    assert [(d.kind, d.count) for d in rows] == [
        ("inline", 2),
        ("not inlined (big caller)", 1),
        ("devirtualize function call", 1),
    ]
    assert rows[0].cost == 120 and rows[0].caller == "main.f" and rows[0].line == 9


@pytest.mark.go
@pytest.mark.slow
def test_cli(store_path, log, tmp_path, capsys):
    path = tmp_path / "build.log"
    path.write_text(log)
    args = ["pgo", "effect", "--db", str(store_path), "--before", "service=pgoeffect"]
    args += ["version=nopgo", "--after", "version=pgo", "--build-log", str(path)]
    assert cli_main(args) == 0
    text = capsys.readouterr().out
    assert text.startswith("pgo effect:") and "CPU:" in text and "devirtualize" in text
    assert cli_main([*args, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cpu"]["n_before"] == 8 and doc["decisions"]
    assert cli_main(["pgo", "effect", "--db", str(store_path), "--before", "version=nopgo"]) == 2
    assert "--after" in capsys.readouterr().err


def test_one_profile_a_side_prints_no_nan(store_path, capsys):
    """One window of each build: no interval is possible, and the text says so
    instead of printing '[+nan%, +nan%]' (the relative change still shows)."""
    args = ["pgo", "effect", "--db", str(store_path), "--before", "instance=nopgo-w0"]
    assert cli_main([*args, "--after", "instance=pgo-w0"]) == 0
    text = capsys.readouterr().out
    assert "CPU:" in text and "heap in use" in text and "(1 and 1 profiles)" in text
    assert "nan" not in text.lower() and "[no interval]" in text


def test_cli_side_matching_nothing(store_path, capsys):
    """A selection that matches no profile (a typo) is one line naming it, exit 2,
    as in regressions (it printed five notes and exited 0)."""
    args = ["pgo", "effect", "--db", str(store_path), "--before", "version=nopgo"]
    assert cli_main([*args, "--after", "version=pgp"]) == 2
    out, err = capsys.readouterr()
    assert not out and len(err.strip().splitlines()) == 1
    assert "--after" in err and "version=pgp" in err


def test_cli_source_that_is_no_folder(store_path, tmp_path, capsys):
    """`--source nosuch --pgo P` was a FileNotFoundError traceback (go run in a
    missing folder); `pgo check --source` said it in one line."""
    args = ["pgo", "effect", "--db", str(store_path), "--before", "version=nopgo"]
    missing = tmp_path / "nosuch"
    args += ["--after", "version=pgo", "--source", str(missing), "--pgo", str(DATA / "effect.pgo")]
    assert cli_main(args) == 2
    out, err = capsys.readouterr()
    assert not out and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"{missing}: not a directory" in err, err


def test_effect_without_profiles_says_so(tmp_path):
    with pyproflab.open(tmp_path / "e.duckdb") as lab:
        e = pgo_effect(lab.store, BEFORE, AFTER, EffectOptions())
    assert e.cpu is None and any("no CPU profiles" in n for n in e.notes)


@pytest.mark.go
@pytest.mark.slow
def test_safeguard_keeps_scratch_out_of_walk(effect, go_bin, tmp_path):
    """The guard of golang/go#65532, in the compiler's own words: with main.scratch
    safeguarded, the build no longer inlines it into the recursive walk (whose
    frames it grew), and the other PGO decisions stay."""
    from pyproflab.analyses.pgo import pgo_files

    res = pgo_files([DATA / "effect.pgo"], safeguards=["main.scratch"])
    assert res.safeguarded["main.scratch"] > 0
    guarded = parse_build_log(build_log(SOURCE, res.write(tmp_path / "g.pgo"), ".", go=go_bin))
    into_walk = {("inline", "main.scratch", "main.walk")}
    keys = {(d.kind, d.callee, d.caller) for d in effect.decisions}
    assert into_walk <= keys
    assert not into_walk & {(d.kind, d.callee, d.caller) for d in guarded}

    def devirt(ds):
        return {(d.file, d.line, d.callee, d.target) for d in ds if d.target is not None}

    assert devirt(effect.decisions) and devirt(effect.decisions) == devirt(guarded)


@pytest.mark.parametrize(
    ("content", "problem"),
    [(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4, "binary"),
     (b"hello\nworld\n", "no compiler output"),
     (b"", "no compiler output")],
)  # fmt: skip
def test_cli_build_log_that_is_no_build_log_is_one_line(
    store_path, tmp_path, capsys, content, problem
):
    """`--build-log BINARY` said "the build log holds no PGO decision" and exited
    0: a file that is not a build log at all is one line naming it, exit 2."""
    path = tmp_path / "not.log"
    path.write_bytes(content)
    args = ["pgo", "effect", "--db", str(store_path), "--before", "version=nopgo"]
    assert cli_main([*args, "--after", "version=pgo", "--build-log", str(path)]) == 2
    out, err = capsys.readouterr()
    assert not out and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"pyproflab: error: {path}: not a build log ({problem}"), err


def test_cli_build_log_without_pgo_decisions_is_a_note(store_path, tmp_path, capsys):
    """Compiler output without a PGO decision is a build log: PGO decided nothing."""
    path = tmp_path / "build.log"
    path.write_text("# example.com/x\n./a.go:3:4: can inline f with cost 3\n")
    args = ["pgo", "effect", "--db", str(store_path), "--before", "version=nopgo"]
    assert cli_main([*args, "--after", "version=pgo", "--build-log", str(path)]) == 0
    assert "holds no PGO decision" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("name", "problem"),
    [("zero-byte", "empty file"), ("empty", "no samples"), ("single-frame", "call edges")],
)
def test_cli_pgo_profile_go_ignores_is_one_line(
    store_path, go_profiles, go_bin, tmp_path, capsys, name, problem
):
    """`--source DIR --pgo P` with a P that go build -pgo takes and makes nothing of
    (found with a 0-byte default.pgo: Go built, and effect said "the build log holds
    no PGO decision", exit 0): one line naming P and what is wrong, exit 2."""
    path = ignored_profiles(go_profiles, tmp_path)[name]
    args = ["pgo", "effect", "--db", str(store_path), "--before", "version=nopgo"]
    args += ["--after", "version=pgo", "--source", str(SOURCE), "--pgo", str(path)]
    assert cli_main(args) == 2
    out, err = capsys.readouterr()
    assert not out and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"pyproflab: error: {path}: ") and problem in err, err
