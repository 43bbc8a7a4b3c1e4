"""`tree`, `peek` and `list` print what `go tool pprof -tree`, `-peek` and `-list` print,
byte for byte.

On every corpus file both tools read (tree with pprof's default trimming; peek and
list with the regex ``.``, so every node, edge and function is printed; list with
a source path where no file is found, so each routine carries pprof's error line,
and absolute paths that exist on the machine, such as GOROOT's, print source), and
on the Go test program's recorded profiles with options (sample types, -cum,
-lines, focus, hide, tagfocus, a narrow regex, -list with the program's own source
found through -source_path/-trim_path). A file or regex pprof refuses must be
refused by us too (exit 2, one line).

Where distinct nodes print the same name (e.g. -files: one node per file and
function start line), pprof's order among them is its map order, different from
run to run; such texts are compared block by block as multisets (``same_tree``).
"""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from support import pprof_oracle as oracle
from support.testenv import CORPUS, api_read

pytestmark = [pytest.mark.go]

REPO = Path(__file__).resolve().parents[2]


def _tree(path, **options) -> str:
    from pyproflab.analyses.tree import tree
    from pyproflab.reports.tree import render_tree_text

    return render_tree_text(tree(api_read(path), **options))


def _peek(path, regex, **options) -> str:
    from pyproflab.analyses.tree import peek
    from pyproflab.reports.tree import render_tree_text

    return render_tree_text(peek(api_read(path), regex, **options))


def _list(path, regex, **options) -> str:
    from pyproflab.analyses.source_list import source_list
    from pyproflab.reports.source_list import render_list_text

    return render_list_text(source_list(api_read(path), regex, **options))


SEPARATOR = "----------------------------------------------------------+-------------"


def _blocks(text: str) -> tuple[str, list[tuple]]:
    """(header, blocks): each block its caller lines, node line and callee lines,
    the edge lines of each side sorted."""
    head, *parts = text.split(SEPARATOR + "\n")
    blocks = []
    for part in parts[1:]:
        lines = part.splitlines()
        if not lines:
            continue  # after the closing separator
        node = next((i for i, ln in enumerate(lines) if not ln.startswith(" " * 40)), 0)
        blocks.append((tuple(sorted(lines[:node])), lines[node], tuple(sorted(lines[node + 1 :]))))
    return head + (parts[0] if parts else ""), blocks


def same_tree(ours: str | None, theirs: str | None) -> bool:
    """Equal texts; or, when some printed names repeat (pprof's order among equal
    names is its map order), equal headers and equal multisets of blocks."""
    if ours == theirs:
        return True
    if ours is None or theirs is None:
        return False
    (h1, b1), (h2, b2) = _blocks(ours), _blocks(theirs)
    names = [b[1].rsplit("| ", 1)[-1] for b in b1]
    edges = [ln.rsplit("|   ", 1)[-1] for b in b1 for side in (b[0], b[2]) for ln in side]
    repeats = len(set(names)) < len(names) or len(set(edges)) < len(edges)
    return repeats and h1 == h2 and sorted(b1) == sorted(b2)


def _compare_on_corpus(pprof_args, ours, same=lambda a, b: a == b) -> int:
    """Files where pprof's text (``pprof_args + [path]``) equals ``ours(path)``; a file
    pprof refuses only counts when we refuse it too (unless we cannot read it)."""
    from support.testenv import corpus_proto_files

    from pyproflab.errors import ProflabError, UsageError

    compared = 0
    for path in corpus_proto_files():
        if not oracle.opens(path)[0]:
            continue
        try:
            theirs = oracle.run_pprof([*pprof_args, path])
        except oracle.OracleError:
            theirs = None  # e.g. "no matches found for regexp"
        try:
            text = ours(path)
        except UsageError:
            text = None
        except ProflabError:
            continue  # we refuse the file itself (the decoder's tests check why)
        assert same(text, theirs), f"{path}: differs from go tool pprof {' '.join(pprof_args)}"
        compared += 1
    return compared


@pytest.mark.corpus
@pytest.mark.slow
def test_tree_is_pprofs_on_the_corpus(corpus_dir, go_bin):
    assert _compare_on_corpus(["-tree"], _tree, same_tree) >= 50


@pytest.mark.corpus
@pytest.mark.slow
def test_peek_is_pprofs_on_the_corpus(corpus_dir, go_bin):
    assert _compare_on_corpus(["-peek=."], lambda p: _peek(p, "."), same_tree) >= 50


@pytest.mark.corpus
@pytest.mark.slow
def test_list_is_pprofs_on_the_corpus(corpus_dir, go_bin, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    got = _compare_on_corpus(
        [f"-source_path={src}", "-list=."], lambda p: _list(p, ".", source_path=str(src))
    )
    assert got >= 50


# --- the Go test program's profiles, with options ------------------------------------

TREE_CASES = [
    ("cpu", 0, {}),
    ("cpu", 1, {"cum_sort": True}),
    ("cpu", 1, {"granularity": "lines"}),
    ("cpu", 1, {"nodecount": 10}),
    ("cpu", 1, {"focus": "main\\.", "hide": "runtime\\."}),
    ("cpu", 1, {"tagfocus": "phase=cpu"}),
    ("heap", 1, {}),
    ("heap", 3, {"granularity": "files"}),
    ("mutex", 1, {"node_fraction": 0.0, "edge_fraction": 0.0, "nodecount": 0}),
]

PPROF_FLAG = {
    "cum_sort": lambda v: "-cum",
    "granularity": lambda v: f"-{v}",
    "nodecount": lambda v: f"-nodecount={v}",
    "node_fraction": lambda v: f"-nodefraction={v}",
    "edge_fraction": lambda v: f"-edgefraction={v}",
}


def _flags(options) -> list[str]:
    return [PPROF_FLAG.get(k, lambda v, k=k: f"-{k}={v}")(v) for k, v in options.items()]


@pytest.mark.parametrize(("kind", "index", "options"), TREE_CASES, ids=str)
def test_tree_on_go_profiles(kind, index, options, go_profiles):
    path = go_profiles[kind]
    theirs = oracle.run_pprof(["-tree", f"-sample_index={index}", *_flags(options), path])
    assert same_tree(_tree(path, sample_index=index, **options), theirs)


PEEK_CASES = [
    ("cpu", 1, "main\\.(fib|isEven)$", {}),
    ("cpu", 1, "main\\.square", {"granularity": "lines"}),
    ("cpu", 0, "main\\.", {"cum_sort": True, "show_from": "main\\.cpuWork"}),
    ("heap", 1, "alloc", {"tagfocus": "bytes=1kb:"}),
    ("block", 1, "sync", {}),
]


@pytest.mark.parametrize(("kind", "index", "regex", "options"), PEEK_CASES, ids=str)
def test_peek_on_go_profiles(kind, index, regex, options, go_profiles):
    path = go_profiles[kind]
    args = [f"-peek={regex}", f"-sample_index={index}", *_flags(options), path]
    assert same_tree(_peek(path, regex, sample_index=index, **options), oracle.run_pprof(args))


def _program_prefix(path) -> str:
    """The directory the profile's main.go was built in, up to tests/goprogs."""
    profile = api_read(path)
    for name in profile.functions.column("filename").to_pylist():
        if name and "/tests/goprogs/" in name:
            return name.split("/tests/goprogs/")[0]
    raise AssertionError(f"{path}: no function from tests/goprogs")


@pytest.mark.parametrize(
    ("kind", "index", "regex"),
    [("cpu", 1, "main\\."), ("heap", 1, "main\\.|bytes\\."), ("cpu2", 0, "runtime\\.mallocgc")],
    ids=str,
)
def test_list_finds_the_programs_source(kind, index, regex, go_profiles):
    """With the program's source at hand (this repository), the lines and their
    values are printed; both tools find them through -source_path and -trim_path."""
    path = go_profiles[kind]
    trim = _program_prefix(path)
    args = [f"-list={regex}", f"-sample_index={index}", f"-source_path={REPO}"]
    theirs = oracle.run_pprof([*args, f"-trim_path={trim}", path])
    ours = _list(path, regex, sample_index=index, source_path=str(REPO), trim_path=trim)
    assert ours == theirs
    if regex.startswith("main"):
        assert "ROUTINE ======================== main." in ours and "Error:" not in ours


# --- the command line -----------------------------------------------------------------


def test_cli_tree_peek_list(go_profiles, capsys, tmp_path):
    from pyproflab.cli import main

    path = str(go_profiles["cpu"])
    runs = [
        (["tree", path, "--sample-index", "1", "--unit", "ms"], ["-tree", "-unit=ms"]),
        (["tree", path, "--sample-index", "1", "--no-trim"], ["-tree", "-trim=false"]),
        (["tree", path, "--no-trim", "--nodecount", "5"], ["-tree", "-trim=false", "-nodecount=5"]),
        (["peek", "main\\.fib", path, "--cum"], ["-peek=main\\.fib", "-cum"]),
        (
            ["list", "main\\.square", path, "--source_path", str(tmp_path)],
            ["-list=main\\.square", f"-source_path={tmp_path}"],
        ),
    ]
    for ours, theirs in runs:
        assert main(ours) == 0, ours
        assert capsys.readouterr().out == oracle.run_pprof([*theirs, "-sample_index=1", path])


def test_cli_no_match_is_one_line_exit_2(go_profiles, capsys):
    from pyproflab.cli import main

    path = str(go_profiles["cpu"])
    for cmd in (["peek", "no_such_function_xyz", path], ["list", "no_such_function_xyz", path]):
        assert main(cmd) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "no matches found for regexp: no_such_function_xyz" in err[0]


MANY = "parca/pkg/query/testdata/many"
FASTDELTA = "dd-trace-go/profiler/internal/fastdelta/testdata"
TREE_DIFFS = [
    # With -diff_base allocations cancel in places: edges of weight 0 into nodes of
    # flat and cum 0.
    (f"{MANY}/1644509299337903000.pb.gz", f"{MANY}/1644509272337470000.pb.gz", 1, True),
    (f"{FASTDELTA}/heap.after.pprof", f"{FASTDELTA}/heap.before.pprof", 1, False),
    ("go:cpu2", "go:cpu", 1, False),
]


@pytest.mark.parametrize("flag", ["diff_base", "base"])
@pytest.mark.parametrize(
    ("new", "base", "index", "zeros"), TREE_DIFFS, ids=[Path(c[0]).name for c in TREE_DIFFS]
)
def test_tree_of_a_diff_is_pprofs(new, base, index, zeros, flag, go_profiles, capsys):
    """`tree NEW --diff_base BASE` prints pprof's blocks, zero-weight edges included.
    Within a block's callers or callees pprof orders +w and -w of one size as equal
    (its edge order compares signed weights, then their sizes), so its order among
    them changes from run to run: each side's edge lines are compared as a set."""
    from pyproflab.cli import main

    def path(name: str) -> str:
        if name.startswith("go:"):
            return str(go_profiles[name[3:]])
        if not (CORPUS / name).exists():
            pytest.skip(f"corpus file {name} not found")
        return str(CORPUS / name)

    new, base = path(new), path(base)
    assert main(["tree", new, f"--{flag}", base, "--sample-index", str(index)]) == 0
    ours = capsys.readouterr().out
    theirs = oracle.run_pprof(["-tree", f"-sample_index={index}", f"-{flag}={base}", new])
    assert _blocks(ours) == _blocks(theirs)
    if zeros and flag == "diff_base":  # -base merges +x and -x of a stack into 0: no edge
        assert "                                 0     0% |   " in theirs


@pytest.mark.parametrize(
    "flags", [["tagshow", "phase|worker"], ["taghide", "step"]], ids=lambda f: f[0]
)
def test_cli_tagshow_taghide(flags, go_profiles, capsys):
    """The label keys traces prints, and top's "Active filters" header, as pprof's."""
    from pyproflab.cli import main

    path = str(go_profiles["cpu"])
    name, value = flags
    assert main(["traces", path, f"--{name}", value]) == 0
    assert capsys.readouterr().out == oracle.run_pprof(["-traces", f"-{name}={value}", path])
    assert main(["top", path, "--trim", "--nodecount", "0", f"--{name}", value]) == 0
    assert capsys.readouterr().out == oracle.run_pprof(["-top", f"-{name}={value}", path])


# --- the Python API: on files and on a store -------------------------------------------


def test_api_and_lab_give_pprofs_text(go_profiles, tmp_path):
    """``pyproflab.tree/peek/source_list/traces`` on a file, and ``Lab.tree/peek/
    source_list`` on a store holding that one file, print what pprof prints."""
    import pyproflab

    path = go_profiles["cpu"]
    src = str(tmp_path)
    expect = {
        "tree": oracle.run_pprof(["-tree", "-sample_index=1", path]),
        "peek": oracle.run_pprof(["-peek=main\\.(fib|square)$", "-sample_index=1", path]),
        "list": oracle.run_pprof(["-list=main\\.fib$", f"-source_path={src}", path]),
    }
    assert same_tree(str(pyproflab.tree(path, sample_index=1)), expect["tree"])
    assert same_tree(str(pyproflab.peek(path, "main\\.(fib|square)$")), expect["peek"])
    assert str(pyproflab.source_list(path, "main\\.fib$", source_path=src)) == expect["list"]
    assert pyproflab.traces(path, tagshow="phase") == oracle.run_pprof(
        ["-traces", "-tagshow=phase", path]
    )
    with pyproflab.open(tmp_path / "one.duckdb") as lab:
        lab.ingest(path, service="one")
        cpu = {"profile_type": "cpu"}
        assert same_tree(str(lab.tree(**cpu, sample_index=1)), expect["tree"])
        assert same_tree(str(lab.peek("main\\.(fib|square)$", **cpu)), expect["peek"])
        listed = lab.source_list("main\\.fib$", **cpu, source_path=src)
        assert str(listed) == expect["list"]
        assert "TreeResult(peek" in repr(lab.peek("main\\.fib", **cpu))
        assert repr(listed).startswith("ListResult('main\\\\.fib$', cpu/nanoseconds, ")
        # In a notebook: the same text, escaped, in a <pre> (it had no HTML view).
        peeked = lab.peek("main\\.fib", **cpu)
        assert (
            peeked._repr_html_() == f'<pre class="pyproflab-tree">{html.escape(str(peeked))}</pre>'
        )
        assert (
            listed._repr_html_() == f'<pre class="pyproflab-list">{html.escape(str(listed))}</pre>'
        )


def test_list_guesses_the_prefix_from_the_working_directory(go_profiles, tmp_path, monkeypatch):
    """Without -source_path pprof searches the working directory, cutting a file name
    after ``/BASE/`` of that directory, but prints the names uncut: the same here."""
    import subprocess

    path = go_profiles["cpu"]
    cwd = tmp_path / "goprogs"  # the profile's files are under .../tests/goprogs/
    (cwd / "profgen").mkdir(parents=True)
    (cwd / "profgen" / "main.go").write_text("".join(f"// line {i}\n" for i in range(1, 400)))
    argv = [*oracle.pprof_command(), "-symbolize=none", "-list=main\\.fib$", str(path)]
    run = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=oracle.pprof_env())
    assert run.returncode == 0, run.stderr
    monkeypatch.chdir(cwd)
    ours = _list(path, "main\\.fib$")
    assert ours == run.stdout
    assert "/tests/goprogs/profgen/main.go" in ours and "// line " in ours
