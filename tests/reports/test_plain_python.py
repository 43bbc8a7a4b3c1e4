"""Plain Python and the terminal: what ``print`` and ``repr`` show.

- ``print(pyproflab.top(p))`` prints pprof's -top text (with pprof's default
  -nodefraction it is ``go tool pprof -top``'s output, line for line).
- ``repr(Profile)``, ``repr(PgoResult)``, ``repr(EdgeDiff)`` are one short line.
- Quantities print in their unit (``+33.4 MiB/s``, ``+1.2 ms``), never in
  scientific notation; the regressions text of alloc_space shows MiB/s or KiB/s.
"""

from __future__ import annotations

import re

import pytest
from support.browser.stores import demo_store
from support.pprof_oracle import run_pprof
from support.testenv import corpus_proto_files

import pyproflab
from pyproflab.analyses.units import quantity
from pyproflab.reports import render


def test_share_is_percent_and_its_change_percentage_points():
    assert quantity(0.1234, "share") == "12.3%"
    assert quantity(-0.00012, "share", signed=True) == "-0.012 pp"


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (3.5e7, "B/s", "+33.4 MiB/s"),
        (0.0012, "s", "+1.2 ms"),
        (-0.018, "cores", "-0.018 cores"),
        (12345, "/s", "+12.3k/s"),
        (2.5 * 2**30, "B", "+2.5 GiB"),
        (512, "B", "+512 B"),
        (3e-8, "s", "+30 ns"),
        (5, "count", "+5"),
        (None, "B/s", "-"),
        (0.0044, "share", "+0.44 pp"),
    ],
)
def test_quantity_in_its_unit(value, unit, text):
    assert quantity(value, unit, signed=True) == text
    if value is not None:
        assert "e+" not in quantity(value * 1e6, unit) and "e-" not in quantity(value / 1e6, unit)


def test_print_top_is_pprofs_text(corpus_dir, pprof):
    path = next(p for p in corpus_proto_files() if p.name == "fgprof.pb.gz")
    result = pyproflab.top(path, nodecount=10, node_fraction=0.005)
    assert str(result) == render(result, "text")
    ours = str(result).splitlines()
    theirs = run_pprof(["-top", "-nodecount=10", path]).splitlines()
    assert ours == theirs


def test_reprs_are_one_short_line():
    path = corpus_proto_files()[0] if corpus_proto_files() else None
    if path is None:
        pytest.skip("no corpus")
    p = pyproflab.read_profile(path)
    r = repr(p)
    assert r.startswith("Profile([") and "\n" not in r and len(r) < 300, r
    assert f"{p.samples.num_rows} samples" in r


def test_pgo_result_and_diff_reprs_on_the_demo_store():
    lab = pyproflab.open(demo_store(), read_only=True)
    try:
        res = lab.pgo(service="notesd")
        r = repr(res)
        assert re.fullmatch(r"PgoResult\(\d+ CPU profiles, \d+ call edges, \d+ hot\)", r), r
        diff = res.diff(lab.pgo(service="notesd", version="v1"))
        assert re.fullmatch(r"EdgeDiff\(previous -> this profile: .*\)", repr(diff))
        assert str(diff).startswith("hot edges: ")
    finally:
        lab.close()


def test_regressions_text_prints_bytes_per_second(capsys):
    from pyproflab.cli import main

    args = ["regressions", "--db", str(demo_store()), "--base", "version=v1"]
    args += ["--new", "version=v2", "--type", "allocs", "--sample-index", "alloc_space"]
    args += ["--measure", "rate"]
    assert main([*args, "--top", "5"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if re.match(r"\s+\d+\s", line)]
    assert len(rows) == 5
    for line in rows:
        assert re.search(r"[KMG]?i?B/s", line), line
        assert not re.search(r"\de[+-]\d", line), line
