"""Plain Python and the terminal: what ``print`` and ``repr`` show.

- ``print(pyproflab.top(p))`` prints pprof's -top text (with pprof's default
  -nodefraction it is ``go tool pprof -top``'s output, line for line).
- ``print(result)`` of every result with a text renderer prints that text, the
  CLI's (``str(r) == render(r, "text")``), whichever Lab method returned it.
- ``repr(Profile)``, ``repr(PgoResult)``, ``repr(EdgeDiff)`` are one short line.
- Quantities print in their unit (``+33.4 MiB/s``, ``+1.2 ms``), never in
  scientific notation; the regressions text of alloc_space shows MiB/s or KiB/s.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
from support.browser.stores import demo_store
from support.pprof_oracle import run_pprof
from support.testenv import corpus_proto_files

import pyproflab
from pyproflab.analyses.units import quantity
from pyproflab.reports import render
from pyproflab.reports.registry import RENDERERS

TESTS = Path(__file__).resolve().parents[1]
CPU = {"service": "notesd", "profile_type": "cpu"}
# Each Lab method whose result has a text renderer, called on the demo store.
LAB_CALLS = {
    "top": lambda lab: lab.top(**CPU),
    "tree": lambda lab: lab.tree(**CPU),
    "peek": lambda lab: lab.peek("main.scoreNote", **CPU),
    "source_list": lambda lab: lab.source_list("main.scoreNote", **CPU),
    "gc": lambda lab: lab.gc(),
    "gogc": lambda lab: lab.gogc(budget="1.5x"),
    "pgo": lambda lab: lab.pgo(service="notesd"),
    "pgo.diff": lambda lab: lab.pgo(service="notesd").diff(lab.pgo(**CPU, version="v1")),
    "pgo_weights": lambda lab: lab.pgo_weights(service="notesd"),
    "pgo_effect": lambda lab: lab.pgo_effect({"version": "v1"}, {"version": "v2"}),
    "regressions": lambda lab: lab.regressions({**CPU, "version": "v1"}, {**CPU, "version": "v2"}),
    "trace": lambda lab: lab.trace("sched", path=TESTS / "testdata/traces/chan.trace"),
    "pgo_check": lambda lab: lab.pgo_check(
        TESTS / "testdata/pgo/ledger.pgo", TESTS / "pgoprogs/ledger/base"
    ),
}


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


@pytest.fixture(scope="module")
def demo_lab():
    lab = pyproflab.open(demo_store(), read_only=True)
    yield lab
    lab.close()


@pytest.mark.parametrize(
    "method",
    [pytest.param(m, marks=pytest.mark.go) if m == "pgo_check" else m for m in LAB_CALLS],
)
def test_print_of_a_lab_result_is_the_clis_text(demo_lab, method):
    result = LAB_CALLS[method](demo_lab)
    text = render(result, "text")
    assert "\n" in text.rstrip("\n"), text  # a report, not a one-line summary
    assert str(result) == text
    assert "\n" not in repr(result) and len(repr(result)) < 300, repr(result)


def text_rendered_classes() -> list[str]:
    return sorted(
        {cls for cls, kind in RENDERERS if kind == "text" and cls.startswith("pyproflab")}
    )


@pytest.mark.parametrize("name", text_rendered_classes())
def test_every_result_with_a_text_renderer_prints_it(name):
    """The rule for results no Lab method returns too (OverTimeResult, each
    TraceAnswer): their class's ``__str__`` is their own, not object's summary."""
    module, _, qualname = name.rpartition(".")
    cls = getattr(importlib.import_module(module), qualname)
    owner = next(c for c in cls.__mro__ if "__str__" in vars(c))
    assert owner is not object, f"{name} has a text renderer but no __str__"


def test_print_of_regressions_over_time_is_the_clis_text():
    """No Lab method returns it; ``over_time`` on 7 windows where main.a triples."""
    from support.store_helpers import make_profile

    from pyproflab.analyses.regressions.over_time import over_time
    from pyproflab.store import Store
    from pyproflab.store.ingest import ProfileMeta, ingest
    from pyproflab.store.select import Selection

    items = []
    for w in range(7):
        a = 10 if w < 3 else 30
        rows = [(["main.a", "main.main"], [a, a * 10**7]), (["main.b", "main.main"], [50, 10**9])]
        p = make_profile(rows, time_nanos=(170_000_000 + w) * 10**10, duration_nanos=10**10)
        items.append((p, ProfileMeta(service="s", version="v", instance="i")))
    with Store.open(":memory:") as store:
        ingest(store, items, content_hashes=[f"h{i}" for i in range(len(items))])
        res = over_time(store, Selection(service="s"))
    assert str(res) == render(res, "text") and "main.a" in str(res)
    assert re.fullmatch(r"OverTimeResult\(service=s, 7 windows, [1-9]\d* changes\)", repr(res))


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
