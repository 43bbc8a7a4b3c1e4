"""A notebook user's mistakes with the Lab: each is one line naming the argument
and what it accepts (never an AttributeError or a TypeError from deep inside),
and an empty answer says it is empty."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.store_helpers import make_profile

import pyproflab
from pyproflab.errors import StoreError, UsageError
from pyproflab.model import ValueType
from pyproflab.store.ingest import ProfileMeta, ingest

TRACE = Path(__file__).parent / "testdata" / "traces" / "chan.trace"


@pytest.fixture(scope="module")
def lab():
    """Four CPU profiles: versions v1 and v2 x two instances."""
    with pyproflab.open(":memory:") as lab:
        base = int(datetime(2026, 11, 1, 10, tzinfo=UTC).timestamp()) * 10**9
        items = []
        for i in range(4):
            p = make_profile(
                [
                    (["main.work", "main.main"], [1, 10 * (i + 1)]),
                    (["main.f", "main.main"], [2, 5]),
                ],
                time_nanos=base + i * 60 * 10**9,
            )
            meta = ProfileMeta(service="api", version=f"v{1 + i // 2}", instance=f"pod-{i % 2}")
            items.append((p, meta))
        ingest(lab.store, items)
        yield lab


@pytest.mark.parametrize("method", ["top", "tree", "merged", "profiles", "gc", "pgo"])
def test_a_string_for_the_selection(lab, method: str) -> None:
    # AttributeError: 'str' object has no attribute 'profile_ids' (or 'query').
    with pytest.raises(UsageError, match=r"^selection='cpu': expected a Selection or a dict"):
        getattr(lab, method)("cpu")


def test_a_dict_for_the_selection(lab) -> None:
    assert lab.top({"version": "v1"}).total == lab.top(version="v1").total


def test_regressions_sides(lab) -> None:
    with pytest.raises(UsageError, match=r"^base='v1': expected a Selection or a dict"):
        lab.regressions(base="v1", new={"version": "v2"})
    with pytest.raises(UsageError, match=r"^new: unknown key 'verison'"):
        lab.regressions(base={"version": "v1"}, new={"verison": "v2"})


@pytest.mark.parametrize("method", ["gc", "profiles", "merged"])
def test_misspelled_selection_keyword(lab, method: str) -> None:
    # It was dropped: gc(servce="api"), profiles(...) and merged(...) answered for the
    # whole store.
    with pytest.raises(TypeError, match=rf"^{method}\(\) got an unexpected keyword 'servce'"):
        getattr(lab, method)(servce="api")


@pytest.mark.parametrize("method", ["top", "tree"])
def test_misspelled_selection_keyword_of_a_report_names_the_selection_keys(lab, method) -> None:
    # lab.top(servce="api") said "unknown option 'servce' (known: cum_sort, edge_fraction,
    # ...)": the graph options only, so the key the user meant was not among them.
    with pytest.raises(UsageError, match=r"^unknown option 'servce' \(known: .*cum_sort") as e:
        getattr(lab, method)(servce="api")
    assert "selection keys: service, version" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_sample_type_no_profile_has() -> None:
    # A selection mixing kinds was merged whole: "cannot merge profiles with
    # different period types: ... bytes ... nanoseconds".
    heap = make_profile(
        [(["main.alloc", "main.main"], [4096])],
        sample_types=[ValueType("alloc_space", "bytes")],
        period_type=ValueType("space", "bytes"),
    )
    cpu = make_profile([(["main.work", "main.main"], [1, 10])])
    with pyproflab.open(":memory:") as lab:
        ingest(lab.store, [(p, ProfileMeta(service="api")) for p in (heap, cpu)])
        with pytest.raises(
            UsageError,
            match=r"^sample type 'nosuch': no selected profile has it "
            r"\(they have: alloc_space, cpu, samples\)$",
        ):
            lab.top(sample_index="nosuch")


def test_pgo_options(lab) -> None:
    # top=0 was a result refused as "no CPU profiles match the selection",
    # top="3" a TypeError comparing int and str, tpo=3 one naming build_pgo().
    with pytest.raises(UsageError, match=r"^top: must be a whole number in \[1, 100000\], not 0"):
        lab.pgo(top=0)
    with pytest.raises(UsageError, match=r"^top: must be a whole number, not '3'"):
        lab.pgo(top="3")
    with pytest.raises(UsageError, match=r"^unknown option 'tpo' \(known: all, fold_preempt, "):
        lab.pgo_weights(tpo=3)
    assert lab.pgo(top=1).ok


def test_regressions_figure_says_what_it_draws(lab) -> None:
    # Its title promised "95% Wald intervals" over bare dots, and over empty axes.
    one = lab.regressions(base={"instance": "pod-0", "version": "v1"}, new={"version": "v2"})
    title = one.figure_top().layout.title.text
    assert "no intervals (no statistics with one profile on a side)" in title
    with pyproflab.open(":memory:") as other:  # one stack: every share is 100% on both sides
        items = [
            (make_profile([(["main.work", "main.main"], [k, 10 * k])]), ProfileMeta(version=v))
            for k, v in ((1, "v1"), (2, "v2"))
        ]
        ingest(other.store, items)
        r = other.regressions(base={"version": "v1"}, new={"version": "v2"})
        assert "none: no function's flat changed" in r.figure_top().layout.title.text


def test_opening(tmp_path) -> None:
    # open(5) made a store named "5" in the working folder; read_only="yes" was a
    # TypeError from duckdb.connect, wait="5" one comparing str and float.
    with pytest.raises(UsageError, match=r"^path=5: expected a file name"):
        pyproflab.open(5)
    db = tmp_path / "s.duckdb"
    with pytest.raises(UsageError, match=r"^read_only='yes': expected True or False$"):
        pyproflab.open(db, read_only="yes")
    with pytest.raises(UsageError, match=r"^wait='5': expected seconds, a number >= 0$"):
        pyproflab.open(db, wait="5")
    assert not db.exists()
    with pyproflab.open(db):
        # DuckDB's "Can't open a connection to same database file with a different
        # configuration than existing connections".
        with pytest.raises(StoreError, match=r"already open read-write in this process"):
            pyproflab.open(db, read_only=True)
    with pyproflab.open(db, read_only=True) as lab:
        # It decoded every file, then said "0 new profiles ... ingest again to add the rest".
        with pytest.raises(StoreError, match=r"store is open read-only: open it with"):
            lab.ingest(tmp_path / "nothing.pb.gz")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"window_s": 0}, r"^window_s=0: expected a number > 0$"),  # was a ZeroDivisionError
        ({"window_s": -1}, r"^window_s=-1: expected a number > 0$"),  # was no windows
        ({"window_s": "1"}, r"^window_s='1': expected a number > 0$"),  # was a TypeError
        ({"top": -1}, r"^top=-1: expected a whole number >= 0$"),  # was no longest waits
        ({"window_s": float("inf")}, r"^window_s=inf: expected a number > 0$"),  # OverflowError
        ({"window_s": float("nan")}, r"^window_s=nan: expected a number > 0$"),  # OverflowError
        ({"window_s": 1e-12}, r"^window_s=1e-12: expected at least 1e-09 s"),  # ZeroDivisionError
        ({"windw_s": 1}, r"^trace sched: unknown option 'windw_s' \(known: window_s, top, "),
    ],
)
def test_trace_options(lab, options: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        lab.trace("sched", path=TRACE, **options)


def test_trace_goroutines_sort_is_checked(lab) -> None:
    """sort='x' was a ValueError's traceback from inside the analysis."""
    with pytest.raises(UsageError, match=r"^sort='x': expected one of g, running_ns, "):
        lab.trace("goroutines", path=TRACE, sort="x")


def test_trace_path_and_selection(lab) -> None:
    with pytest.raises(TypeError, match=r"^give path= \(one trace file\) or a selection, not b"):
        lab.trace("sched", path=TRACE, service="api")  # the selection was dropped
    assert lab.trace("sched", path=TRACE, window_s=0.5).windows.num_rows > 0


def test_pgo_effect_and_check_options(lab, tmp_path) -> None:
    # confidence=2 and top=-1 were taken (intervals of nothing, rows cut from the
    # end); misspelled keywords were TypeErrors naming EffectOptions, CheckOptions.
    v1, v2 = {"version": "v1"}, {"version": "v2"}
    with pytest.raises(UsageError, match=r"^confidence: must be a number in \(0, 1\), not 2$"):
        lab.pgo_effect(v1, v2, confidence=2)
    with pytest.raises(UsageError, match=r"^top: must be a whole number >= 0, not -1$"):
        lab.pgo_effect(v1, v2, top=-1)
    with pytest.raises(UsageError, match=r"^unknown option 'confidnce' \(known: confidence, "):
        lab.pgo_effect(v1, v2, confidnce=0.9)
    with pytest.raises(UsageError, match=r"^cdf_percent: must be a number in \(0, 100\], not 200"):
        lab.pgo_check(tmp_path / "default.pgo", tmp_path, cdf_percent=200)
    assert lab.pgo_effect(v1, v2, confidence=0.9).cpu is not None


def test_results_with_a_table_have_both_views(lab) -> None:
    # The Lab's docstring promises to_pandas() and to_arrow(); PgoResult and
    # GogcResult had only to_pandas.
    r = lab.pgo()
    assert r.to_arrow().column_names == list(r.to_pandas().columns)
    assert r.to_arrow().num_rows == len(r.to_pandas()) > 0


def test_gogc_refuses_what_it_does_not_select_by(lab) -> None:
    # gogc(since="2099-01-01") modelled every stored cycle without a word.
    with pytest.raises(UsageError, match=r"^gogc: since is not used: the advice models every"):
        lab.gogc(since="2099-01-01")
    with pytest.raises(UsageError, match=r"^gogc: profile_type is not used"):
        lab.gogc(profile_type="cpu")


def test_gogc_cli_refuses_a_window(tmp_path, capsys) -> None:
    from pyproflab.cli import main

    db = tmp_path / "s.duckdb"
    pyproflab.open(db).close()
    assert main(["gogc", "--db", str(db), "--since", "2099-01-01"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            "gogc: since is not used: the advice models "
            "every stored GC cycle and metric sample of "
            "the service, version and instance"
        )
    )


def test_profile_functions_given_a_lab(lab, tmp_path) -> None:
    # pyproflab.top(lab) was "'Lab' object is not iterable", flame(lab) an
    # AttributeError on sample_types, write_profile into a missing folder a
    # FileNotFoundError naming its temporary file, from_connection("x") an
    # AttributeError on execute.
    with pytest.raises(UsageError, match=r"^Lab\(.*\): expected a Profile, a file name or a list"):
        pyproflab.top(lab)
    with pytest.raises(UsageError, match=r"^profile=Lab\(.*\): expected a Profile"):
        pyproflab.flame(lab)
    with pytest.raises(UsageError, match=r"x\.pb\.gz: folder .*nowhere does not exist$"):
        pyproflab.write_profile(lab.merged(), tmp_path / "nowhere" / "x.pb.gz")
    with pytest.raises(UsageError, match=r"^con='x': expected a DuckDB connection"):
        pyproflab.from_connection("x")
    pyproflab.write_profile(lab.merged(), tmp_path / "m.pb.gz")
    assert pyproflab.top(tmp_path.glob("*.pb.gz")).total == lab.top().total  # a generator of paths


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((None,), {}, r"^paths=None: expected a file, folder or glob, or a list of them$"),
        (("x",), {"labels": "a=b"}, r"^labels='a=b': expected a dict of strings"),
        (("x",), {"service": 5}, r"^service=5: expected a string$"),
        (("x",), {"workers": "2"}, r"^workers='2': expected a whole number >= 1"),
    ],
)
def test_ingest_arguments(args: tuple, kwargs: dict, message: str) -> None:
    with pyproflab.open(":memory:") as lab, pytest.raises(UsageError, match=message):
        lab.ingest(*args, **kwargs)


def test_peek_regex_not_a_string(lab) -> None:
    # re's TypeError "first argument must be string or compiled pattern".
    with pytest.raises(UsageError, match=r"^peek regexp 5: expected a string$"):
        lab.peek(5)


def test_a_closed_lab_says_so(tmp_path) -> None:
    lab = pyproflab.open(tmp_path / "s.duckdb")
    lab.close()
    assert repr(lab) == f"Lab(Store({str(tmp_path / 's.duckdb')!r}, closed))"  # was read-write
    with pytest.raises(StoreError, match=r"store is closed$"):
        lab.top()


def test_flags_are_booleans(lab) -> None:
    # A string was truthy: all="no" took every profile, categories="no" read the stacks.
    with pytest.raises(UsageError, match=r"^all='no': expected True or False$"):
        lab.pgo(all="no")
    with pytest.raises(UsageError, match=r"^categories='no': expected True or False$"):
        lab.gc(categories="no")


def test_figure_top_arguments(lab) -> None:
    r = lab.regressions(base={"version": "v1"}, new={"version": "v2"})
    with pytest.raises(UsageError, match=r"^metric='bogus': expected 'flat' or 'cum'$"):
        r.figure_top(metric="bogus")  # a KeyError on 'bogus_change'
    with pytest.raises(UsageError, match=r"^n=-1: expected a whole number >= 1$"):
        r.figure_top(n=-1)  # drew every row but the last


def test_a_refused_pgo_profile_has_no_diff(lab) -> None:
    # It diffed as every hot edge removed (or added): a change that is not there.
    from pyproflab.analyses.pgo import PgoRefusedError

    ok, refused = lab.pgo(), lab.pgo(version="v9")
    with pytest.raises(PgoRefusedError, match=r"^no diff: this PGO profile was refused: no CPU"):
        refused.diff(ok)
    with pytest.raises(PgoRefusedError, match=r"^no diff: previous PGO profile was refused"):
        ok.diff(refused)


def test_a_filter_matching_nothing_warns(lab) -> None:
    # A notebook showed an empty table under "0, 0% of" the total and no word of
    # pprof's "Focus expression matched no samples" (the CLI prints it on stderr).
    from pyproflab.analyses.pprof_filters import FilterMatchedNothing

    with pytest.warns(FilterMatchedNothing, match=r"^Focus expression matched no samples$"):
        assert lab.top(focus="nosuch").rows.num_rows == 0
    with pytest.warns(FilterMatchedNothing, match=r"^Hide expression matched no samples$"):
        pyproflab.tree(lab.merged(), hide="nosuch")


def test_a_busy_store_suggests_wait(tmp_path) -> None:
    import subprocess
    import sys

    db = tmp_path / "s.duckdb"
    pyproflab.open(db).close()
    hold = "import pyproflab, sys; lab = pyproflab.open(sys.argv[1]); print(1, flush=True); input()"
    with subprocess.Popen(
        [sys.executable, "-c", hold, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as p:
        try:
            assert p.stdout.readline().strip() == b"1"
            with pytest.raises(StoreError, match=r"store is busy .*try again later or pass wait="):
                pyproflab.open(db, read_only=True)
        finally:
            p.communicate(b"\n", timeout=60)


def test_an_empty_store_says_so(tmp_path) -> None:
    # A misspelled path makes a new store: it said only "no profiles match profile_type=cpu".
    with pyproflab.open(tmp_path / "fleeet.duckdb") as lab:
        with pytest.raises(StoreError, match=r"^no profiles match profile_type=cpu \(.*fleeet"):
            lab.top(profile_type="cpu")


def test_an_empty_trace_table_says_none(lab) -> None:
    # chan.trace has no user tasks: the answer was a header over no rows, without a word.
    tasks = lab.trace("tasks", path=TRACE)
    assert len(tasks) == 0
    assert str(tasks).splitlines()[-1] == "(none)"  # under the columns' header
    assert tasks._repr_html_().endswith("</table><p>(none)</p></div>")


def test_pgo_effect_sides_overlap(lab) -> None:
    # It said "2 profiles are in both the base and the new selection".
    with pytest.raises(UsageError, match=r"^2 profiles are in both the before and the after sel"):
        lab.pgo_effect({"version": "v1"}, {"version": "v1"})


def test_pgo_effect_log_as_a_path_or_without_decisions(lab, tmp_path) -> None:
    """log= takes the build log's text or a Path to it; a log without a PGO decision
    (a path given as a string is one) says so instead of an empty list alone."""
    v1, v2 = {"version": "v1"}, {"version": "v2"}
    hot = "hot-budget check allows inlining for call main.g (cost 120) at ./a.go:9:2 in "
    log = tmp_path / "build.log"
    log.write_text(hot + "function main.f\n")
    by_path = lab.pgo_effect(v1, v2, log=log)
    assert [d.callee for d in by_path.decisions] == ["main.g"]
    assert not any("holds no PGO decision" in n for n in by_path.notes)
    as_text = lab.pgo_effect(v1, v2, log=str(log))  # the path's text is no log
    assert as_text.decisions == []
    assert any(n.startswith("the build log holds no PGO decision") for n in as_text.notes)
    with pytest.raises(UsageError, match=r"nosuch\.log: cannot read: No such file"):
        lab.pgo_effect(v1, v2, log=tmp_path / "nosuch.log")


def test_a_sample_index_out_of_range_lists_the_types(lab) -> None:
    # 'sample_index 7 is outside the range [0..1]' told a caller of
    # regressions(sample=7) neither its argument's name nor what there is.
    with pytest.raises(UsageError, match=r"\[0\.\.1\] \(the sample types: samples, cpu\)$"):
        lab.regressions({"version": "v1"}, {"version": "v2"}, sample=7)


def test_a_per_counter_without_samples_names_both_spellings(lab) -> None:
    # The Python API said '--per nosuch', a flag a notebook does not have.
    with pytest.raises(UsageError, match=r"^per-work counter 'nosuch' \(--per, per=\)"):
        lab.pgo_effect({"version": "v1"}, {"version": "v2"}, per="nosuch")


def test_refused_inputs_warn(go_profiles, tmp_path) -> None:
    """lab.ingest returned its report and said nothing else: a notebook cell or a
    script calling it as a statement lost a mistyped path or a file that is not a
    profile without a word (the CLI prints each refusal). Each call now warns,
    naming the caller's line; the report is unchanged."""
    import warnings

    from pyproflab.sources.base import ItemMeta
    from pyproflab.sources.local import FileSource
    from pyproflab.store.ingest_report import InputsRefused

    bad = tmp_path / "bad.pb.gz"
    bad.write_bytes(b"<html>502 Bad Gateway</html>")
    typo = tmp_path / "typo.pb.gz"
    with pyproflab.open(":memory:") as lab:
        with pytest.warns(InputsRefused) as seen:
            report = lab.ingest([go_profiles["cpu"], bad, typo], service="api")
        assert (report.new, [p for p, _ in report.refused]) == (1, [str(typo), str(bad)])
        assert [str(w.message) for w in seen] == [
            f"2 inputs refused, not stored: {typo}: no such file or folder "
            "(and 1 more: see the report's .refused)"
        ]
        assert seen[0].filename == __file__
        with pytest.warns(InputsRefused, match=rf"^1 input refused, not stored: {typo}: no such"):
            lab.pull(FileSource([str(typo)], ItemMeta()))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert lab.ingest(go_profiles["cpu"]).present == 1  # nothing refused: no warning


def test_ingest_of_an_empty_folder_warns(tmp_path) -> None:
    """lab.ingest of an empty folder returned zeros without a word (the CLI exits 2,
    'no profile files found (empty folder)'): a notebook cell calling it as a
    statement went on with nothing. It now warns in one line naming the folder
    and the caller's line; the report is unchanged."""
    from pyproflab.store.ingest_report import IngestReport, InputsRefused

    empty = tmp_path / "profiles"
    empty.mkdir()
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / ".part").write_bytes(b"x")
    with pyproflab.open(":memory:") as lab:
        skipped = "only hidden files or .json sidecars, which ingest skips"
        for path, held in ((empty, "empty folder"), (hidden, skipped)):
            with pytest.warns(InputsRefused) as seen:
                report = lab.ingest(path)
            assert report == IngestReport()
            assert [str(w.message) for w in seen] == [
                f"{path}: no profile files found ({held}); nothing stored"
            ]
            assert seen[0].filename == __file__
        with pytest.warns(InputsRefused, match=r"^ingest\(\[\]\): no profile files found"):
            lab.ingest([])
