"""pgo check: a profile's hot edges against today's source, checked against the
compiler (`go build -pgo -gcflags=-m=2 -d=pgodebug=1`) on the programs of
tests/pgoprogs before and after four refactors (their README says what each
changes), with the profiles recorded once (tests/support/record_pgo_programs.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import pgo_compiler
from support.testenv import go_env

from pyproflab.analyses import pgo_check
from pyproflab.analyses.pgo_edges import read_edges
from pyproflab.cli import main as cli_main

TESTS = Path(__file__).resolve().parents[1]
PROGRAMS = TESTS / "pgoprogs"
PROFILES = TESTS / "testdata" / "pgo"
VARIANTS = ("base", "rename", "move", "edit", "above")
PACKAGE = {"ledger": ".", "router": "./cmd/routerbench"}

pytestmark = pytest.mark.go


# --- names ----------------------------------------------------------------------------


def test_symbol_names():
    split = pgo_check.split_symbol
    assert split("example.com/router%2ev2.(*Table).Route") == (
        "example.com/router%2ev2",
        ["(*Table)", "Route"],
    )
    assert split("main.maxOf[go.shape.int]") == ("main", ["maxOf"])
    assert split("main.(*T[go.shape.struct { a.b int }]).M.func1") == (
        "main",
        ["(*T)", "M", "func1"],
    )
    assert pgo_check.method_name("main.(*T).M") == "M"
    assert pgo_check.method_name("main.T.M-fm") == "M"
    assert pgo_check.method_name("main.F.func1") is None
    assert pgo_check.method_name("main.init.0") is None
    assert pgo_check.method_name("main.F") is None
    assert pgo_check.generic_key("p.F[go.shape.int,go.shape.string]") == "p.F[...]"
    assert pgo_check.is_runtime("runtime.asyncPreempt")
    assert pgo_check.is_runtime("internal/runtime/maps.(*Map).getWithKeySmall")
    assert not pgo_check.is_runtime("main.runtime")


NAMING = {
    "go.mod": "module example.com/naming.v1\n\ngo 1.24\n",
    "main.go": """package main

import (
	"fmt"

	"example.com/naming.v1/lib"
)

var G = func() int { return 1 }

type T struct{ k int }

type Celsius float64

func (t *T) M() func() int {
	return func() int { return t.k }
}

func (t T) V() int { return t.k + int(Celsius(2)) + len("ab") }

func init() { fmt.Println(G()) }
func init() { fmt.Println(lib.Twice(2)) }

func F() []func() int {
	a := func() int {
		b := func() int { return 3 }
		c := func() int { return 4 }
		return b() + c()
	}
	d := func() int {
		return func() int { return 5 }()
	}
	return []func() int{a, d}
}

func main() {
	for _, f := range F() {
		fmt.Println(f())
	}
	t := &T{1}
	fmt.Println(t.M()(), t.V(), lib.Twice(3), lib.Celsius(4))
}
""",
    "lib/lib.go": """package lib

type Celsius float64

// Twice doubles n.
func Twice(n int) int {
	return n * 2
}
""",
}


@pytest.fixture(scope="module")
def naming(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("naming")
    for name, text in NAMING.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_index_names_are_the_linkers(naming, go_bin, tmp_path):
    """Every function the index names is a text symbol of the built program
    (built with -l so nothing is inlined away), and the other way round."""
    idx = pgo_check.index_source(naming)
    assert idx["module"] == "example.com/naming.v1"
    binary = tmp_path / "naming"
    env = go_env(tmp_path)
    subprocess.run(
        [go_bin, "build", "-gcflags=all=-l", "-o", str(binary), "."],
        cwd=naming,
        env=env,
        check=True,
    )
    nm = subprocess.run(
        [go_bin, "tool", "nm", str(binary)], capture_output=True, text=True, check=True, env=env
    ).stdout
    symbols = {
        line.split()[-1]
        for line in nm.splitlines()
        if " T " in line and line.split()[-1].startswith(("main.", "example.com/naming"))
    }
    ours = {f["name"] for f in idx["functions"]}
    assert ours == symbols
    assert "example.com/naming.v1/lib.Twice" in ours  # a dot before the last element stays


def test_index_start_lines_and_calls_are_the_compilers(naming, go_bin, tmp_path):
    """Start lines equal the compiler's function positions (-m=2), and calls are
    what the source calls: builtins and conversions are not calls."""
    idx = pgo_check.index_source(naming)
    out = subprocess.run(
        [go_bin, "build", "-o", "/dev/null", "-gcflags=example.com/naming.v1/...=-m=2", "."],
        cwd=naming,
        env=go_env(tmp_path),
        capture_output=True,
        text=True,
        check=True,
    )
    names = {"example.com/naming.v1": "main", "example.com/naming.v1/lib": "lib"}
    view = pgo_compiler.parse(out.stdout + out.stderr, names)
    ours = {f["name"]: (f["file"], f["start"]) for f in idx["functions"]}
    # The compiler also prints the closures it copies when inlining (more funcN).
    both = set(ours) & set(view.starts)
    assert len(both) >= len(ours) - 2  # all but main.init.0/1 (not inlinable: printed too)
    assert all(ours[name] == view.starts[name] for name in both)
    calls = {f["name"]: f["calls"] for f in idx["functions"]}
    assert calls["main.T.V"] == []  # int(...), Celsius(...), len(...)
    kinds = {(c["kind"], c["name"]) for c in calls["main.main"]}
    assert ("func", "example.com/naming.v1/lib.Twice") in kinds
    assert ("func", "main.F") in kinds and ("method", "M") in kinds
    assert ("func", "example.com/naming.v1/lib.Celsius") not in kinds  # a conversion
    assert ("closure", "main.F.func2.1") in {(c["kind"], c["name"]) for c in calls["main.F.func2"]}


# --- agreement with the compiler -------------------------------------------------------


@pytest.fixture(scope="module")
def agreement(go_bin, tmp_path_factory) -> dict[tuple[str, str], tuple[float, float, list]]:
    """(program, variant) -> (check's share, the compiler's share, per-edge rows)."""
    tmp = tmp_path_factory.mktemp("pgo-check")
    out = {}
    for prog, package in PACKAGE.items():
        profile = PROFILES / f"{prog}.pgo"
        edges = read_edges(profile)
        for variant in VARIANTS:
            src = PROGRAMS / prog / variant
            view = pgo_compiler.build(go_bin, src, package, profile, tmp)
            theirs, _, _, rows = pgo_compiler.used_share(view, edges)
            result = pgo_check.check(profile, src)
            assert result.share is not None
            out[prog, variant] = (result.share, theirs, rows, result)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("prog", sorted(PACKAGE))
def test_check_agrees_with_the_compiler(agreement, prog):
    """Within 5 percentage points of the compiler's share of the hot weight it
    used, before and after each refactor; the figures are printed."""
    lines = []
    for variant in VARIANTS:
        ours, theirs, rows, result = agreement[prog, variant]
        lines.append(f"{prog} {variant}: check {ours:.1f}%, compiler {theirs:.1f}%")
        assert abs(ours - theirs) <= 5.0, (variant, ours, theirs)
    print("\n" + "\n".join(lines))
    base = agreement[prog, "base"]
    # A fresh profile applies in full, and lines added above a function change nothing.
    assert base[0] == base[1] == 100.0
    assert agreement[prog, "above"][0] == 100.0
    assert any("start line moved" in s for s in [str(agreement[prog, "above"][3])])
    # A rename and a move lose hot weight, by the compiler's account too.
    for variant in ("rename", "move"):
        assert agreement[prog, variant][1] < 100.0 and agreement[prog, variant][0] < 100.0


@pytest.mark.slow
def test_check_agrees_edge_by_edge(agreement):
    """Not only the shares: each checked edge is applied exactly when the compiler used it."""
    for (prog, variant), (_, _, rows, result) in agreement.items():
        ours = {c.edge.key: c.applied for c in result.checks if c.counted}
        theirs = {e.key: used for e, used in rows}
        assert ours == theirs, (prog, variant)


def test_statuses_on_the_refactors():
    """What each refactor does to the ledger's hot edges (without the compiler)."""
    profile = PROFILES / "ledger.pgo"

    def status(variant, caller, callee):
        r = pgo_check.check(profile, PROGRAMS / "ledger" / variant)
        return next(
            c.status for c in r.checks if (c.edge.caller, c.edge.callee) == (caller, callee)
        )

    assert status("rename", "main.runBatch", "main.checksum") == pgo_check.COLD_CALL
    assert status("rename", "main.checksum", "main.avalanche") == pgo_check.CALLER_GONE
    assert status("move", "main.checksum", "main.avalanche") == pgo_check.COLD_CALL
    assert status("edit", "main.runBatch", "main.checksum") == pgo_check.NO_CALL
    assert status("edit", "main.runBatch", "main.parseFields") == pgo_check.APPLIES
    assert status("above", "main.runBatch", "main.checksum") == pgo_check.APPLIES
    r = pgo_check.check(profile, PROGRAMS / "ledger" / "base")
    assert any(c.status == pgo_check.RUNTIME for c in r.checks)  # asyncPreempt: not counted
    assert all(c.edge.callee != "runtime.asyncPreempt" or not c.counted for c in r.checks)


# --- the command ----------------------------------------------------------------------


def test_cli(capsys):
    profile = str(PROFILES / "ledger.pgo")
    assert cli_main(["pgo", "check", profile, "--source", str(PROGRAMS / "ledger" / "rename")]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[1].startswith(("aging", "stale", "current"))
    assert "caller gone" in text and "still applies" in text
    args = ["pgo", "check", profile, "--source", str(PROGRAMS / "ledger" / "rename")]
    assert cli_main([*args, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["share_pct"] < 100 and {e["status"] for e in doc["edges"]} >= {
        "applies",
        "caller gone",
    }
    assert cli_main([*args, "--fail-under", "99"]) == 1
    capsys.readouterr()


def test_cli_bad_source(tmp_path, capsys):
    profile = str(PROFILES / "ledger.pgo")
    for src, why in (
        (tmp_path / "nope", "not a directory"),
        (tmp_path, "no go.mod"),
    ):
        assert cli_main(["pgo", "check", profile, "--source", str(src)]) == 2
        err = capsys.readouterr().err
        assert why in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    (tmp_path / "go.mod").write_text("module example.com/broken\n")
    (tmp_path / "a.go").write_text("package a\n\nfunc (\n")
    assert cli_main(["pgo", "check", profile, "--source", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "a.go:" in err and len(err.strip().splitlines()) == 1


def test_compiler_view_reads_generic_names():
    """The compiler's names of generic functions hold spaces
    (``sumBy[go.shape.struct { Kind int; End int }]``): the oracle took every
    name as one word and missed such a hot inline, printed by a build of
    /tmp/h88's tokenizer, so the compiler seemed not to use an edge it used."""
    generic = "sumBy[go.shape.struct { Kind int; Start int; End int }]"
    text = "\n".join(
        [
            "# example.com/toksm",
            f"./handle.go:59:6: cannot inline {generic}: function too complex: cost 82 exceeds "
            "budget 80",
            "./handle.go:83:6: cannot inline run: function too complex: cost 285 exceeds budget 80",
            f"hot-budget check allows inlining for call main.{generic} (cost 82) at "
            "./handle.go:107:20 in function main.run",
        ]
    )
    view = pgo_compiler.parse(text, {"example.com/toksm": "main"})
    assert view.starts[f"main.{generic}"] == ("handle.go", 59)
    assert view.hot_inlines == [("handle.go", 107, f"main.{generic}", "main.run")]


@pytest.mark.parametrize(
    ("name", "problem"),
    [("zero-byte", "empty file"), ("empty", "no samples"), ("single-frame", "single-frame")],
)
def test_cli_profile_go_ignores_is_one_line(go_profiles, tmp_path, capsys, name, problem):
    """A profile go build -pgo optimizes nothing with said "unknown: no hot edge
    of P has its caller in the module", exit 0 (1 with --fail-under), as if it
    were another program's (found with an empty CPU profile of a new program,
    /tmp/h88): one line naming P and what is wrong, exit 2."""
    path = pgo_compiler.ignored_profiles(go_profiles, tmp_path)[name]
    args = ["pgo", "check", str(path), "--source", str(PROGRAMS / "ledger" / "base")]
    assert cli_main(args) == 2
    out, err = capsys.readouterr()
    assert not out and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"pyproflab: error: {path}: ") and problem in err, err


@pytest.mark.parametrize("value", ["nan", "-5", "101", "inf"])
def test_cli_bad_fail_under(value, capsys):
    """A CI gate that could never trip (nan, negative) or always trips (over 100)
    is refused before the check runs: one line naming the flag, exit 2."""
    profile = str(PROFILES / "ledger.pgo")
    args = ["pgo", "check", profile, "--source", str(PROGRAMS / "ledger" / "base")]
    assert cli_main([*args, "--fail-under", value]) == 2
    out, err = capsys.readouterr()
    assert not out and "--fail-under" in err and len(err.strip().splitlines()) == 1


def test_closure_copies_of_inlining_are_not_counted():
    """A closure copied when its function was inlined (main.F.G.func1 for
    main.G.func1) is made after the compiler matched the profile: never applied,
    so not counted against the profile (a fresh notesd profile: 9.8% of its weight)."""
    from pyproflab.analyses.pgo_edges import EdgeKey, build_edge_set

    index = {
        "module": "m",
        "packages": [{"prefix": "main"}],
        "interface_methods": [],
        "functions": [
            {
                "name": "main.G.func1",
                "start": 10,
                "end": 12,
                "generic": False,
                "file": "a.go",
                "calls": [{"line": 11, "kind": "func", "name": "main.H"}],
            },
            {
                "name": "main.H",
                "start": 20,
                "end": 22,
                "generic": False,
                "file": "a.go",
                "calls": [],
            },
        ],
    }
    edges = build_edge_set(
        {
            EdgeKey("main.F.G.func1", "main.H", 1): 5,
            EdgeKey("main.G.func1", "main.H", 1): 5,
            EdgeKey("main.Gone.func1", "main.H", 1): 1,
            # Numbered in its new home, twice inlined (go tool nm of a build:
            # main.(*api).search.optionalFilters.hasTag.func2 for hasTag.func1).
            EdgeKey("main.(*T).F.E.G.func2", "main.H", 1): 1,
            EdgeKey("main.F.Gone.func1", "main.H", 1): 1,
        }
    )
    status = {c.edge.caller: c.status for c in pgo_check.check_edges(edges, index, {})}
    assert status == {
        "main.F.G.func1": pgo_check.COPY,
        "main.G.func1": pgo_check.APPLIES,
        "main.Gone.func1": pgo_check.CALLER_GONE,
        "main.(*T).F.E.G.func2": pgo_check.COPY,
        "main.F.Gone.func1": pgo_check.CALLER_GONE,
    }


# --- ties at the hot cutoff --------------------------------------------------------------

# The ledger's hot call edges (offsets as in tests/testdata/pgo/ledger.pgo) and
# weights for which two edges tie at the 99% cutoff: 985 of 1005 before them
# (98.0%), 995 after the first (99.005%: the last hot edge), 1005 after the second.
TIED = {
    ("main.runBatch", "main.parseFields", 4): 600,
    ("main.runBatch", "example.com/ledger/fold.Mix", 11): 385,
    ("main.checksum", "main.avalanche", 9): 10,  # the compiler's sort: caller first
    ("main.runBatch", "main.checksum", 5): 10,
}


def _edge_profile(edges: dict[tuple[str, str, int], int], path: Path) -> Path:
    """A CPU profile of two-frame samples, one per edge, with those weights."""
    import gzip

    from pyproflab._proto import profile_pb2

    p = profile_pb2.Profile()
    p.string_table.extend(["", "samples", "count", "x.go"])
    p.sample_type.add(type=1, unit=2)
    funcs: dict[str, int] = {}
    for caller, callee, _ in edges:
        for name in (caller, callee):
            if name not in funcs:
                p.string_table.append(name)
                funcs[name] = len(funcs) + 1
                p.function.add(
                    id=funcs[name], name=len(p.string_table) - 1, filename=3, start_line=100
                )
    for (caller, callee, off), w in edges.items():
        for fn, line in ((funcs[callee], 101), (funcs[caller], 100 + off)):
            p.location.add(id=len(p.location) + 1, address=len(p.location) + 1)
            p.location[-1].line.add(function_id=fn, line=line)
        n = len(p.location)
        p.sample.add(location_id=[n - 1, n], value=[w])
    path.write_bytes(gzip.compress(p.SerializeToString()))
    return path


@pytest.mark.slow
def test_ties_at_the_cutoff_are_cut_as_the_compiler_cuts(go_bin, tmp_path, capsys):
    """Two edges of equal weight straddle the 99% cutoff: the check's hot edges
    are the compiler's (it inlines with the hot budget at the first edge's call
    site, not the second's), preprofile agrees, and `pgo diff` of the profile and
    the same profile x1000 reports no change."""
    from pyproflab.analyses.pgo_edges import EdgeKey, preprofile_edges

    path = _edge_profile(TIED, tmp_path / "tied.pgo")
    edges = read_edges(path)
    first, second = EdgeKey("main.checksum", "main.avalanche", 9), EdgeKey(*list(TIED)[3])
    assert [e.key for e in edges.edges[2:]] == [first, second]
    assert [e.hot for e in edges.edges] == [True, True, True, False]
    theirs = preprofile_edges(path)
    assert [(e.key, e.hot) for e in theirs.edges] == [(e.key, e.hot) for e in edges.edges]

    src = PROGRAMS / "ledger" / "base"
    view = pgo_compiler.build(go_bin, src, PACKAGE["ledger"], path, tmp_path)
    share, _, _, rows = pgo_compiler.used_share(view, edges)
    assert share == 100.0 and {e.key for e, _ in rows} == {e.key for e in edges.hot}
    start = view.starts["main.runBatch"]
    assert (start[0], start[1] + second.offset) not in view.sites  # the cold one of the tie
    result = pgo_check.check(path, src)
    assert result.share == 100.0
    assert {c.edge.key for c in result.checks} == {e.key for e in edges.hot}

    scaled = _edge_profile({k: 1000 * w for k, w in TIED.items()}, tmp_path / "x1000.pgo")
    assert cli_main(["pgo", "diff", str(path), str(scaled), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["added"], doc["removed"], doc["reweighted"]) == ([], [], [])


def test_read_edges_closes_the_file(go_profiles, tmp_path) -> None:
    """docs/python.md's ``lab.pgo(...).diff("default.pgo")`` warned, under
    ``python -X dev``, "ResourceWarning: unclosed file <... name='default.pgo'>":
    read_edges opened the file to read its first bytes and left it open."""
    import gc
    import shutil
    import warnings

    path = tmp_path / "default.pgo"
    shutil.copy(go_profiles["cpu"], path)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        assert read_edges(path).edges
        gc.collect()
    assert [str(w.message) for w in seen if w.category is ResourceWarning] == []
