"""pprof's filtering options give the rows `go tool pprof -top` gives.

Each case runs pprof with the flags and ``top`` with the same options on the
same file, every node shown, and compares the rows as multisets of (name,
flat, cum, inline marker): -tagfocus / -tagignore (string labels with and
without a key, regex lists, numeric ranges with units), -hide, -show,
-show_from, and combinations with -focus. On corpus files with labels and on
the Go test program's profiles (labels set by pprof.Do and
SetGoroutineLabels; heap samples carry a numeric ``bytes`` label).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import pprof_oracle as oracle
from support.testenv import CORPUS, api_read, api_top, assert_same_rows, our_top_keys

pytestmark = [pytest.mark.go]

LABELS = "parca/pkg/parca/testdata/labels.pb.gz"
THREADS = "parca/pkg/query/testdata/profile-with-labels.pb.gz"
EXEMPLARS = "pyroscope/pkg/og/convert/pprof/testdata/cpu-exemplars.pb.gz"
ALLOCS = "parca/pkg/query/testdata/alloc_space_delta.pb.gz"
# 12 of its 32 locations have no lines (kernel and [vdso] frames beside /main's).
PARTLY_SYMBOLIZED = "parca/pkg/symbolizer/testdata/profile.pb.gz"

# (file, sample index, {option: value}); the option names are pprof's and ours.
CORPUS_CASES = [
    (LABELS, 1, {"tagfocus": "api=query"}),
    (LABELS, 1, {"tagignore": "api=query"}),
    (LABELS, 1, {"tagfocus": "query"}),  # no key: matches "api:query"
    (THREADS, 0, {"tagfocus": "thread_id=2764734,2756170"}),
    (THREADS, 0, {"tagfocus": "thread_name:parca,thread_id:27561"}),  # every regex must match
    (THREADS, 0, {"tagignore": "thread_id=^27561"}),
    (EXEMPLARS, 1, {"tagfocus": "function=slow", "hide": "runtime"}),
    (EXEMPLARS, 1, {"tagfocus": "foo=bar", "tagignore": "function=fast"}),
    (EXEMPLARS, 1, {"show_from": "main.slowFunction"}),
    (EXEMPLARS, 1, {"show": "main\\."}),
    (ALLOCS, 1, {"tagfocus": "bytes=1kb:"}),
    (ALLOCS, 1, {"tagfocus": ":64b"}),
    (ALLOCS, 1, {"tagfocus": "bytes=200b:8kb"}),
    (ALLOCS, 1, {"tagignore": "bytes=5376"}),
    (ALLOCS, 1, {"hide": "btree", "focus": "arcticdb"}),
    (ALLOCS, 1, {"show_from": "Insert$"}),
    # Locations without lines: -show drops them all, -hide those whose mapping matches.
    (PARTLY_SYMBOLIZED, 0, {"show": "irq|schedule"}),
    (PARTLY_SYMBOLIZED, 0, {"hide": "^/main"}),
    ("google-pprof/profile/testdata/cppbench.cpu", 1, {"hide": "ma"}),
]

GO_CASES = [
    ("cpu", 1, {"tagfocus": "phase=cpu"}),
    ("cpu", 1, {"tagfocus": "worker=0,1"}),
    ("cpu", 1, {"tagignore": "step=walk"}),
    ("cpu", 1, {"hide": "runtime\\.", "show_from": "main\\."}),
    ("cpu", 1, {"show_from": "runtime\\.go$"}),  # only a file name matches (pprof.Do's)
    ("cpu", 1, {"show": "main\\.(fib|isEven|isOdd)"}),
    ("cpu", 1, {"focus": "main.fib", "hide": "fib"}),
    ("heap", 1, {"tagfocus": "bytes=1kb:"}),
    ("heap", 3, {"tagignore": ":512b"}),
]


def _run(path: Path, index: int, options: dict[str, str]) -> None:
    unit = oracle.sample_types(path)[index][1]
    flags = [f"-{k}={v}" for k, v in options.items() if k not in ("focus", "ignore")]
    theirs = oracle.top(
        [path],
        sample_index=index,
        unit=unit,
        focus=options.get("focus"),
        ignore=options.get("ignore"),
        extra=flags,
    )
    ours = api_top(api_read(path), sample_index=index, **options)
    assert_same_rows(our_top_keys(ours), theirs, f"{path.name} {options}")
    assert ours.total == theirs.total or theirs.total is None


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("rel", "index", "options"), CORPUS_CASES, ids=[f"{c[0]}-{c[2]}" for c in CORPUS_CASES]
)
def test_corpus_option_matches_pprof(rel, index, options, go_bin):
    path = CORPUS / rel
    if not path.exists():
        pytest.skip(f"corpus file {rel} not found")
    _run(path, index, options)


@pytest.mark.parametrize(
    ("kind", "index", "options"), GO_CASES, ids=[f"{c[0]}-{c[2]}" for c in GO_CASES]
)
def test_go_option_matches_pprof(kind, index, options, go_profiles):
    _run(go_profiles[kind], index, options)


def test_tag_filters_really_filter():
    """The corpus cases above are not vacuous: each filter keeps some samples and drops some."""
    path = CORPUS / EXEMPLARS
    if not path.exists():
        pytest.skip("corpus file not found")
    p = api_read(path)
    full = api_top(p, sample_index=1)
    slow = api_top(p, sample_index=1, tagfocus="function=slow")
    fast = api_top(p, sample_index=1, tagfocus="function=fast")
    flat = lambda r: sum(r.rows.column("flat").to_pylist())  # noqa: E731
    assert 0 < flat(slow) < flat(full) and 0 < flat(fast) < flat(full)
    assert slow.total == full.total  # shares of the unfiltered total, as pprof


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (
            ["--tagignore", "function=fast", "--hide", "runtime", "--show_from", "main"],
            ["-tagignore=function=fast", "-hide=runtime", "-show_from=main"],
        ),
        (["--tagfocus", "foo=bar", "--unit", "ms"], ["-tagfocus=foo=bar", "-unit=ms"]),
        (["--show", "main", "--nodecount", "5"], ["-show=main", "-nodecount=5"]),
    ],
    ids=["filters", "unit", "show-nodecount"],
)
def test_cli_text_is_pprofs_text(ours, theirs, capsys, go_bin):
    """`pyproflab top FILE --trim ...` prints what `go tool pprof -top ...` prints, header
    (Active filters, Dropped nodes) and rows, byte for byte."""
    from pyproflab.cli import main

    path = CORPUS / EXEMPLARS
    if not path.exists():
        pytest.skip("corpus file not found")
    nodecount = [] if "--nodecount" in ours else ["--nodecount", "0"]
    assert main(["top", str(path), "--trim", *nodecount, *ours]) == 0
    assert capsys.readouterr().out == oracle.run_pprof(["-top", *theirs, path])


TOP_DEFAULTS = [
    "google-pprof/internal/proftest/testdata/large.cpu",
    "google-pprof/internal/report/testdata/sample.cpu",
    ALLOCS,
]


@pytest.mark.corpus
@pytest.mark.parametrize("rel", TOP_DEFAULTS)
@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ([], []),
        (["--no-trim"], ["-trim=false"]),
        (["--nodefraction", "0.05"], ["-nodefraction=0.05"]),
        (["--no-trim", "--nodecount", "10"], ["-trim=false", "-nodecount=10"]),
    ],
    ids=["defaults", "no-trim", "nodefraction", "no-trim-nodecount"],
)
def test_top_defaults_are_pprofs(rel, ours, theirs, capsys, go_bin):
    """`pyproflab top FILE` prints what `go tool pprof -top FILE` prints, byte for
    byte: nodes under 0.5% of the total trimmed, every other one shown (no cap)."""
    from pyproflab.cli import main

    path = CORPUS / rel
    if not path.exists():
        pytest.skip(f"corpus file {rel} not found")
    assert main(["top", str(path), *ours]) == 0
    text = capsys.readouterr().out
    assert text == oracle.run_pprof(["-top", *theirs, path])
    if rel == ALLOCS and not ours:
        # Where the old defaults (no trimming, 30 rows) differed on both counts.
        rows = text.split("      flat  flat%   sum%        cum   cum%\n", 1)[1].splitlines()
        assert "Dropped 61 nodes" in text and len(rows) > 30


FASTDELTA = "dd-trace-go/profiler/internal/fastdelta/testdata"
DIFF_PAIRS = [
    (f"{FASTDELTA}/heap.after.pprof", f"{FASTDELTA}/heap.before.pprof", 1),
    (f"{FASTDELTA}/block.after.pprof", f"{FASTDELTA}/block.before.pprof", 1),
    (f"{FASTDELTA}/stress-failure.after.pprof", f"{FASTDELTA}/stress-failure.before.pprof", 3),
    (
        "parca/pkg/query/testdata/many/1644509299337903000.pb.gz",
        "parca/pkg/query/testdata/many/1644509272337470000.pb.gz",
        1,
    ),
]


def _diff(new: Path, base: Path, index: int, diff: bool) -> None:
    from pyproflab.analyses.diff import subtract

    unit = oracle.sample_types(new)[index][1]
    theirs = oracle.diff_top(new, base=base, sample_index=index, unit=unit, diff=diff)
    ours = api_top(subtract(api_read(new), api_read(base), diff_base=diff), sample_index=index)
    assert_same_rows(our_top_keys(ours), theirs, f"{new.name} - {base.name} (diff={diff})")
    assert ours.total == theirs.total


@pytest.mark.corpus
@pytest.mark.parametrize("diff", [True, False], ids=["diff_base", "base"])
@pytest.mark.parametrize(
    ("new", "base", "index"), DIFF_PAIRS, ids=[Path(p[0]).name for p in DIFF_PAIRS]
)
def test_corpus_diff_base_matches_pprof(new, base, index, diff, go_bin):
    if not (CORPUS / new).exists():
        pytest.skip("corpus file not found")
    _diff(CORPUS / new, CORPUS / base, index, diff)


@pytest.mark.parametrize("diff", [True, False], ids=["diff_base", "base"])
def test_go_diff_base_matches_pprof(diff, go_profiles):
    _diff(go_profiles["cpu2"], go_profiles["cpu"], 1, diff)


@pytest.mark.corpus
@pytest.mark.parametrize("flag", ["diff_base", "base"])
def test_cli_diff_text_is_pprofs_text(flag, capsys, go_bin):
    from pyproflab.cli import main

    new, base = CORPUS / DIFF_PAIRS[0][0], CORPUS / DIFF_PAIRS[0][1]
    if not new.exists():
        pytest.skip("corpus file not found")
    args = ["top", str(new), "--sample-index", "1", "--trim", "--nodecount", "0"]
    assert main([*args, f"--{flag}", str(base)]) == 0
    theirs = oracle.run_pprof(["-top", "-sample_index=1", f"-{flag}={base}", new])
    assert capsys.readouterr().out == theirs


# --- a profile read from a URL -------------------------------------------------------


@pytest.fixture
def profile_server():
    """A loopback HTTP server giving one corpus file at /debug/pprof/profile (and 404
    elsewhere); records the query strings it was asked with. Stopped after the test."""
    import http.server
    import threading

    body = (CORPUS / EXEMPLARS).read_bytes() if (CORPUS / EXEMPLARS).exists() else b""
    queries: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            path, _, query = self.path.partition("?")
            queries.append(query)
            ok = path == "/debug/pprof/profile" and body
            self.send_response(200 if ok else 404)
            self.send_header("Content-Length", str(len(body) if ok else 0))
            self.end_headers()
            if ok:
                self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", queries
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.mark.corpus
def test_top_of_a_url_is_pprofs(profile_server, capsys, go_bin):
    from pyproflab.cli import main

    base, queries = profile_server
    if not (CORPUS / EXEMPLARS).exists():
        pytest.skip("corpus file not found")
    url = f"{base}/debug/pprof/profile"
    assert main(["top", url, "--trim", "--nodecount", "0", "--seconds", "2"]) == 0
    assert queries[-1] == "seconds=2"
    ours = capsys.readouterr().out
    assert ours == oracle.run_pprof(["-top", "-seconds=2", url])
    assert queries[-1] == "seconds=2"  # pprof asked the same way


def test_a_url_that_fails_is_one_line_exit_2(profile_server, capsys):
    from pyproflab.cli import main

    base, _ = profile_server
    assert main(["top", f"{base}/debug/pprof/nothing?token=secret"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "HTTP 404" in err[0] and "secret" not in err[0], err


# --- traces ---------------------------------------------------------------------------


def test_traces_are_pprofs_on_the_corpus(corpus_dir, go_bin):
    """`pyproflab traces FILE` prints `go tool pprof -traces FILE` byte for byte, on every
    corpus file both tools read (labels, numeric labels, inlined frames, unsymbolized
    locations, profiles without any header line)."""
    from support.testenv import corpus_proto_files

    from pyproflab.analyses.traces import traces
    from pyproflab.errors import ProflabError

    compared = 0
    for path in corpus_proto_files():
        try:
            theirs = oracle.run_pprof(["-traces", path])
        except oracle.OracleError:
            continue  # pprof refuses it
        try:
            ours = str(traces(api_read(path)))
        except ProflabError:
            continue  # we refuse it (checked by the decoder's tests)
        assert ours == theirs, f"{path}: traces differ from go tool pprof -traces"
        compared += 1
    assert compared >= 50


@pytest.mark.parametrize("kind", ["cpu", "heap"])
def test_traces_cli_on_go_profiles(kind, go_profiles, capsys):
    from pyproflab.cli import main

    path = go_profiles[kind]
    assert main(["traces", str(path), "--sample-index", "1"]) == 0
    assert capsys.readouterr().out == oracle.run_pprof(["-traces", "-sample_index=1", path])
