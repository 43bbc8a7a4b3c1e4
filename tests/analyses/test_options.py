"""Each analysis's options are one object, with its defaults in one place
(``analyses.options``), and every front end agrees with it: the CLI's flags
given nothing, ``Lab``'s keywords given nothing and a job's [regressions]
table given nothing all make the defaults; each field checks its own type
and range with one line naming it."""

from __future__ import annotations

import dataclasses

import pytest

from pyproflab.analyses.options import (
    FILTERS,
    OverTimeOptions,
    PgoOptions,
    RegressionsOptions,
    TopOptions,
    TreeOptions,
)
from pyproflab.cli import build_parser, common
from pyproflab.errors import UsageError

ALL = (TopOptions, TreeOptions, RegressionsOptions, OverTimeOptions, PgoOptions)


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_defaults_are_the_classs_and_check_clean(cls) -> None:
    defaults = cls.defaults()
    assert defaults == dataclasses.asdict(cls())
    schema = cls.schema()
    assert set(schema) == set(defaults)
    assert all(schema[n]["default"] == v for n, v in defaults.items())


def _parse(*argv: str):
    return build_parser().parse_args(list(argv))


def test_the_cli_given_nothing_makes_the_defaults() -> None:
    from pyproflab.cli.regressions import over_time_options, regressions_options
    from pyproflab.cli.tree import TRIM

    args = _parse("regressions", "--base", "version=a", "--new", "version=b")
    assert regressions_options(args) == RegressionsOptions()
    args = _parse("regressions", "--over-time", "--service", "s")
    assert over_time_options(args) == OverTimeOptions()
    args = _parse("tree", "x.pb.gz")
    tree = {**common.graph_options(args), **common.given_options(args, TRIM)}
    assert TreeOptions.build(**tree) == TreeOptions()
    args = _parse("top", "x.pb.gz")
    assert TopOptions.build(**common.graph_options(args)) == TopOptions()
    assert set(common.pprof_filters(args)) == set(FILTERS)


def test_the_cli_passes_what_is_given() -> None:
    from pyproflab.cli.regressions import regressions_options

    args = _parse(
        "regressions", "--base", "v=a", "--new", "v=b", "--fdr", "0.1", "--resamples", "500",
        "--noinlines", "--sample-index", "1",
    )  # fmt: skip
    assert regressions_options(args) == RegressionsOptions(
        fdr=0.1, resamples=500, inlines=False, sample_index=1
    )


def test_a_job_given_nothing_makes_the_defaults() -> None:
    from pyproflab.jobs.spec import RegressionsSpec, job_from_dict

    job = {"job": {"name": "j", "store": "s.duckdb", "output": "out"}, "regressions": {}}
    spec = job_from_dict(job)
    assert spec.regressions.options == RegressionsOptions()
    assert RegressionsSpec().metric == RegressionsOptions().rank_by
    job["regressions"] = {"fdr": 0.1, "resamples": 500}
    assert job_from_dict(job).regressions.options == RegressionsOptions(fdr=0.1, resamples=500)


def test_lab_given_nothing_makes_the_defaults(tmp_path) -> None:
    """``Lab.regressions`` and ``Lab.top`` with no options: the results carry the
    defaults (regressions' settings; top's fractions and row count)."""
    from support.store_helpers import make_profile

    import pyproflab

    for k, version in enumerate(("a", "b")):
        for i in range(3):  # distinct content: the store keeps one profile per content
            p = make_profile([(["main.f", "main.main"], [5 + i + 10 * k, 50_000_000 + i])])
            pyproflab.write_profile(p, tmp_path / f"{version}-{i}.pb.gz")
    with pyproflab.open(tmp_path / "s.duckdb") as lab:
        for version in ("a", "b"):
            lab.ingest(sorted(tmp_path.glob(f"{version}-*.pb.gz")), service="s", version=version)
        result = lab.regressions({"version": "a"}, {"version": "b"})
        top = lab.top(service="s")
    d = RegressionsOptions()
    for name in ("granularity", "fdr", "confidence", "resamples", "seed", "min_share", "rank_by"):
        assert getattr(result, name) == getattr(d, name), name
    assert (result.unit, result.inlines, result.test, result.per) == (
        d.unit,
        d.inlines,
        d.test,
        d.per,
    )
    t = TopOptions()
    assert (top.node_fraction, top.edge_fraction, top.nodecount) == (
        t.node_fraction,
        t.edge_fraction,
        t.nodecount,
    )


@pytest.mark.parametrize(
    ("keywords", "line"),
    [
        ({"fdr": 1.5}, "fdr: must be a number in (0, 1), not 1.5"),
        ({"resamples": 5}, "resamples: must be a whole number in [100, 1000000], not 5"),
        ({"test": "t"}, "test: must be one of quasi-poisson, permutation, welch, not 't'"),
        ({"seed": 1.5}, "seed: must be a whole number, not 1.5"),
        ({"inlines": 1}, "inlines: must be true or false, not 1"),
        ({"fdr": True}, "fdr: must be a number, not True"),
        ({"min_share": float("nan")}, "min_share: must be a number in [0, 1], not nan"),
        ({"bogus": 1}, "unknown option 'bogus'"),
    ],
)
def test_each_field_checks_itself_in_one_line(keywords, line) -> None:
    with pytest.raises(UsageError) as e:
        RegressionsOptions.build(**keywords)
    assert str(e.value).startswith(line) and "\n" not in str(e.value)


def test_the_schema_carries_types_and_ranges() -> None:
    s = RegressionsOptions.schema()
    assert s["fdr"] == {
        "type": ["number"],
        "default": 0.05,
        "exclusiveMinimum": 0,
        "exclusiveMaximum": 1,
    }
    assert s["resamples"]["minimum"] == 100 and s["resamples"]["type"] == ["integer"]
    assert s["test"]["enum"] == ["quasi-poisson", "permutation", "welch"]
    assert s["per"]["type"] == ["string", "null"]
    assert TopOptions.schema()["sample_index"]["type"] == ["integer", "string", "null"]


def test_pgo_front_ends_given_nothing_take_its_defaults() -> None:
    """pgo's defaults are PgoOptions': the CLI given nothing passes none of its own,
    the analysis's keywords and a job's [pgo] read them from there."""
    import inspect

    from pyproflab.analyses import pgo
    from pyproflab.cli.pgo import FLAGS
    from pyproflab.jobs.spec import job_from_dict

    args = _parse("pgo", "-o", "default.pgo", "x.pb.gz")
    assert common.given_options(args, FLAGS) == {}
    d = PgoOptions()
    assert pgo.DEFAULT_TOP == d.top
    assert inspect.signature(pgo.pgo).parameters["top"].default == d.top
    build = inspect.signature(pgo.build_pgo).parameters
    for name in ("weight", "trim_leaf", "fold_preempt", "max_edges"):
        assert build[name].default == getattr(d, name), name
    from pyproflab.analyses.pgo_edges import diff_edges
    from pyproflab.analyses.pgo_weights import compare_weights

    for fn in (diff_edges, compare_weights, pgo.PgoResult.diff):
        assert inspect.signature(fn).parameters["min_change"].default == d.min_change, fn
    assert common.given_options(_parse("pgo", "diff", "a", "b"), ["min_change"]) == {}
    job = {"job": {"name": "j", "store": "s.duckdb", "output": "out"}, "pgo": {}}
    assert job_from_dict(job).pgo.top == d.top
    args = _parse("pgo", "-o", "default.pgo", "--top", "3", "--weight", "duration")
    assert common.given_options(args, FLAGS) == {"top": 3, "weight": "duration"}


def test_gogc_front_ends_given_nothing_take_its_defaults() -> None:
    """The CLI and a job's [gogc] given nothing make ``GogcOptions()``; the defaults
    gogc's --help shows are GogcOptions'."""
    from pyproflab.analyses.gogc import DEFAULT_CANDIDATES, Budget, GogcOptions
    from pyproflab.analyses.gogc.options import parse_candidates, parse_fraction
    from pyproflab.cli import gogc as cli_gogc
    from pyproflab.jobs.spec import job_from_dict

    args = _parse("gogc", "--db", "s.duckdb")
    keywords = {"candidates": args.candidates, "headroom": args.headroom, "budget": args.budget}
    assert GogcOptions.parse(**keywords) == GogcOptions()
    assert tuple(parse_candidates(cli_gogc.CANDIDATES)) == DEFAULT_CANDIDATES
    assert parse_fraction(cli_gogc.HEADROOM) == GogcOptions().headroom
    job = {"job": {"name": "j", "store": "s.duckdb", "output": "out"}, "gogc": {}}
    g = job_from_dict(job).gogc
    # as jobs.runner passes them
    assert GogcOptions.parse(budget=g.budget, headroom=g.headroom) == GogcOptions()
    # a job's budget is read as the CLI's and Lab's (Budget.parse): 2.5x the current peak
    job["gogc"] = {"budget": "2.5x"}
    budget = GogcOptions.parse(budget=job_from_dict(job).gogc.budget).budget
    assert budget == Budget(times=2.5) == GogcOptions.parse(budget=args.budget or "2.5x").budget


@pytest.mark.parametrize("question", ["goroutines", "sched", "stw", "tasks", "leaks"])
def test_trace_questions_given_nothing_take_their_defaults(question) -> None:
    from pyproflab.analyses.gotrace_answers import ANSWERS
    from pyproflab.cli.trace import question_options

    cls = ANSWERS[question][2]
    options = question_options(_parse("trace", question, "x.trace"))
    assert options == (None if cls is type(None) else cls())


def test_trace_options_take_what_is_given() -> None:
    from pyproflab.analyses.gotrace import SchedOptions
    from pyproflab.cli.trace import question_options

    args = _parse("trace", "sched", "x.trace", "--window", "2", "--top", "3")
    assert question_options(args) == SchedOptions(window_s=2.0, top=3)
