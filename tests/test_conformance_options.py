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

import pprof_oracle as oracle
import pytest
from conftest import CORPUS, api_read, api_top, assert_same_rows, our_top_keys

pytestmark = [pytest.mark.go]

LABELS = "parca/pkg/parca/testdata/labels.pb.gz"
THREADS = "parca/pkg/query/testdata/profile-with-labels.pb.gz"
EXEMPLARS = "pyroscope/pkg/og/convert/pprof/testdata/cpu-exemplars.pb.gz"
ALLOCS = "parca/pkg/query/testdata/alloc_space_delta.pb.gz"

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
]

GO_CASES = [
    ("cpu", 1, {"tagfocus": "phase=cpu"}),
    ("cpu", 1, {"tagfocus": "worker=0,1"}),
    ("cpu", 1, {"tagignore": "step=walk"}),
    ("cpu", 1, {"hide": "runtime\\.", "show_from": "main\\."}),
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
