"""Unit tests of ``top`` on small hand-built profiles.

Each case is written to a temporary pprof file and checked two ways: against
the rows ``go tool pprof -top`` printed for it when these tests were written
(pinned below, so the tests run without Go), and, when Go is installed,
against a live run of ``go tool pprof -symbolize=none -top -nodefraction=0
-nodecount=1000000`` on the same file.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.top_unit_helpers import FUNCS, MAPS, build, keys

from pyproflab.analyses.graph import go_base, go_clean, resolve_sample_index
from pyproflab.analyses.top import top
from pyproflab.errors import UsageError
from pyproflab.model import Profile

HAVE_GO = shutil.which("go") is not None


def pprof_keys(profile: Profile, tmp_path: Path, **opts):
    """(label, flat, cum, inline) rows of go tool pprof on ``profile``, in order."""
    from support import pprof_oracle as oracle

    from pyproflab.encode import write_profile

    path = tmp_path / "p.pb.gz"
    write_profile(profile, path)
    idx = opts.get("sample_index", profile.default_sample_index())
    args = [
        "-top",
        "-nodefraction=0",
        "-nodecount=1000000",
        f"-sample_index={idx}",
        f"-unit={oracle.output_unit(profile.sample_types[idx].unit)}",
    ]
    if opts.get("granularity", "functions") != "functions":
        args.append("-" + opts["granularity"])
    if opts.get("cum_sort"):
        args.append("-cum")
    for k in ("focus", "ignore"):
        if opts.get(k):
            args.append(f"-{k}={opts[k]}")
    return [r.key() for r in oracle.parse_top(oracle.run_pprof([*args, str(path)])).rows]


def check(profile: Profile, tmp_path: Path, expected: list[tuple], **opts):
    got = keys(top(profile, **opts))
    assert got == expected
    if HAVE_GO:
        assert pprof_keys(profile, tmp_path, **opts) == expected


def test_simple_and_recursion(tmp_path):
    # main -> a -> a -> b (recursion in a counts once in a's cum)
    p = build(
        samples=[([3, 2, 5, 1], [30]), ([2, 1], [20]), ([1], [5])],
        locations=[(1, 1, [(1, 10)]), (2, 1, [(2, 20)]), (3, 1, [(3, 30)]), (5, 1, [(2, 21)])],
        functions=FUNCS,
        mappings=MAPS,
    )
    check(
        p,
        tmp_path,
        [
            ("main.b", 30, 30, ""),
            ("main.a", 20, 50, ""),
            ("main.main", 5, 55, ""),
        ],
    )


def test_lines_granularity_and_cum_sort(tmp_path):
    p = build(
        samples=[([3, 2, 5, 1], [30]), ([2, 1], [20]), ([1], [5])],
        locations=[(1, 1, [(1, 10)]), (2, 1, [(2, 20)]), (3, 1, [(3, 30)]), (5, 1, [(2, 21)])],
        functions=FUNCS,
        mappings=MAPS,
    )
    check(
        p,
        tmp_path,
        [
            ("main.main /src/main.go:10", 5, 55, ""),
            ("main.a /src/a.go:20", 20, 50, ""),
            ("main.a /src/a.go:21", 0, 30, ""),
            ("main.b /src/b.go:30", 30, 30, ""),
        ],
        granularity="lines",
        cum_sort=True,
    )
    r = top(p, granularity="lines")
    assert r.rows.column("file").to_pylist()[0] == "/src/b.go"
    assert r.rows.column("line").to_pylist()[0] == 30


def test_inline_markers(tmp_path):
    # Location 2 has c inlined into a. b calls c directly too: c is partial-inline.
    p = build(
        samples=[([2, 1], [50]), ([4, 3, 1], [50]), ([6, 1], [10])],
        locations=[
            (1, 1, [(1, 10)]),
            (2, 1, [(4, 40), (2, 20)]),
            (3, 1, [(3, 30)]),
            (4, 1, [(4, 41)]),
            (6, 1, [(3, 31), (2, 22)]),
        ],
        functions=FUNCS,
        mappings=MAPS,
    )
    check(
        p,
        tmp_path,
        [
            ("main.c", 100, 100, "(partial-inline)"),
            ("main.b", 10, 60, "(partial-inline)"),
            ("main.a", 0, 60, ""),
            ("main.main", 0, 110, ""),
        ],
    )


def test_zero_samples_missing_functions_and_objfile(tmp_path):
    # A location without lines in a mapping: "[libc.so]"; without a mapping:
    # "<unknown>"; a zero sample adds nothing and its nodes are not shown.
    p = build(
        samples=[([7, 1], [40]), ([8, 1], [15]), ([3, 1], [0])],
        locations=[(1, 1, [(1, 10)]), (3, 1, [(3, 30)]), (7, 2, []), (8, 0, [])],
        functions=FUNCS,
        mappings=[(1, "/bin/app"), (2, "/lib/libc.so")],
    )
    check(
        p,
        tmp_path,
        [
            ("[libc.so]", 40, 40, ""),
            ("<unknown>", 15, 15, ""),
            ("main.main", 0, 55, ""),
        ],
    )


def test_focus_ignore_keep_unfiltered_total(tmp_path):
    p = build(
        samples=[([3, 2, 1], [30]), ([4, 1], [20]), ([1], [5])],
        locations=[(1, 1, [(1, 10)]), (2, 1, [(2, 20)]), (3, 1, [(3, 30)]), (4, 1, [(4, 40)])],
        functions=FUNCS,
        mappings=MAPS,
    )
    check(
        p,
        tmp_path,
        [("main.b", 30, 30, ""), ("main.a", 0, 30, ""), ("main.main", 0, 30, "")],
        focus="main\\.a",
    )
    check(p, tmp_path, [("main.c", 20, 20, ""), ("main.main", 5, 25, "")], ignore="b\\.go")
    r = top(p, focus="main\\.a")
    assert r.total == 55  # pprof's total is computed before focus
    assert r.rows.column("flat_pct").to_pylist()[0] == pytest.approx(30 / 55 * 100)


def test_files_granularity_and_clean_paths(tmp_path):
    funcs = [(1, "main.main", "/proc/self/cwd/./src//main.go"), (2, "main.a", "/src/x/../a.go")]
    p = build(
        samples=[([2, 1], [7])],
        locations=[(1, 1, [(1, 3)]), (2, 1, [(2, 4)])],
        functions=funcs,
        mappings=MAPS,
    )
    check(p, tmp_path, [("/src/a.go", 7, 7, ""), ("src/main.go", 0, 7, "")], granularity="files")


def test_sample_index_by_name_and_default():
    p = build(
        samples=[([1], [1, 100])],
        locations=[(1, 1, [(1, 1)])],
        functions=FUNCS,
        mappings=MAPS,
        types=(("alloc_space", "bytes"), ("inuse_space", "bytes")),
    )
    assert resolve_sample_index(p, None) == 1
    assert resolve_sample_index(p, "alloc_space") == 0
    assert resolve_sample_index(p, "1") == 1
    assert top(p, sample_index="alloc_space").rows.column("flat").to_pylist() == [1]
    with pytest.raises(UsageError):
        top(p, sample_index=5)
    with pytest.raises(UsageError):
        top(p, sample_index="nope")


def test_nodecount_rebuilds_graph(tmp_path):
    p = build(
        samples=[([3, 2, 1], [30]), ([4, 1], [20]), ([1], [5])],
        locations=[(1, 1, [(1, 10)]), (2, 1, [(2, 20)]), (3, 1, [(3, 30)]), (4, 1, [(4, 40)])],
        functions=FUNCS,
        mappings=MAPS,
    )
    r = top(p, nodecount=2)
    assert keys(r) == [("main.b", 30, 30, ""), ("main.c", 20, 20, "")]
    assert r.node_count_before == 4


def test_go_path_helpers():
    assert go_clean("//a//b/../c/") == "/a/c"
    assert go_clean("a/./b") == "a/b"
    assert go_base("/x/y/") == "y"
    assert go_base("") == "."


def test_repr_html_escapes_names():
    funcs = [(1, "<script>alert(1)</script>", "/a.go")]
    p = build(samples=[([1], [1])], locations=[(1, 1, [(1, 1)])], functions=funcs, mappings=MAPS)
    html = top(p)._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_edges_dense_numbering_matches_direct_keys():
    """Edges keyed (caller, callee, sample) in one int64 unless that could overflow;
    then edges are numbered densely first. Both give the same edges, weights and
    inline flags, including a recursive sample whose edge repeats with both flags."""
    import numpy as np

    from pyproflab.analyses.graph import count_edges

    # Frames leaf first: sample 0 is a->b->c, sample 1 is a->b (inline)->a->b, sample 2 is c->d.
    sample = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2], np.int32)
    node = np.array([2, 1, 0, 1, 0, 1, 0, 3, 2], np.int64)
    # b is inlined into a in sample 0 and in sample 1's leaf-most call, not in its
    # root-most one, whose flag is the one that counts (as pprof): a->b is not inline.
    inline = np.array([False, True, False, True, False, False, False, False, False])
    w = np.array([5, 7, 11], np.int64)
    small = count_edges(sample, node, inline, w, 4)
    big = 2**31  # 4 samples x big**2 x 2 >= 2**62: the dense path
    dense = count_edges(sample, node, inline, w, big)
    src, dst, weight, inl = small
    rows = zip(src.tolist(), dst.tolist(), weight.tolist(), inl.tolist(), strict=True)
    assert sorted(rows) == [
        (0, 1, 12, False),  # a->b in samples 0 and 1, counted once in 1
        (1, 0, 7, False),  # b->a in sample 1
        (1, 2, 5, False),
        (2, 3, 11, False),
    ]
    for a, b in zip(small, dense, strict=True):
        assert sorted(a.tolist()) == sorted(b.tolist())
