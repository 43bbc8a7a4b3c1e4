"""What an audit of the CLI's first hour found (2026-11-28), each on recorded data.

- Every command's and sub-action's ``--help`` prints (``gogc --help`` was a
  traceback: a ``%`` in a help text is argparse's format character).
- ``spool-ingest SPOOL`` of a folder that is not there, or of a file, is one
  line and exit 2 (it made a spool at the mistyped path and said "0 spool
  files", or was a traceback); ``serve`` makes the spool before its ingesters.
- ``report`` and ``gc`` of a selection that matches nothing (a mistyped
  service, an empty store) are one line and exit 2, as ``top`` is; the report
  wrote 4.8 MB of skipped sections and exited 0, gc an empty table.
- A batch or pool size below 1 is one line and exit 2: ``ingest --batch-size 0``
  (or ``--workers 0``) was taken as the default, ``spool-ingest --batch-files 0``
  took nothing and said "0 spool files", and ``serve --ingest-batch-files 0``
  started ingesters that would never take a file.
- ``pgo diff OLD NEW`` of a profile without a CPU sample type names the file.
- ``serve`` refused (a public --listen without a token) makes no spool folder.
- ``gc --format html`` has the per-profile GC category table that text, JSON
  and CSV have (its renderer's docstring said so; the table was not there).
- ``pgo effect``'s text gives no q for a row the regressions did not test
  (stack growth under the share floor printed "q nan").
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pyproflab.cli import build_parser, main


def _parsers(parser: argparse.ArgumentParser, name: str = "pyproflab"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                yield from _parsers(p, f"{name} {sub}")


def test_every_help_prints() -> None:
    seen = []
    for name, parser in _parsers(build_parser()):
        assert parser.format_help().startswith("usage:"), name
        seen.append(name)
    assert "pyproflab gogc" in seen and "pyproflab trace sched" in seen


@pytest.mark.parametrize("what", ["missing", "file"])
def test_spool_ingest_of_no_spool_is_one_line(what, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    if what == "file":
        Path("spool").write_text("not a spool\n", encoding="utf-8")
    assert main(["spool-ingest", "spool", "--db", "s.duckdb"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pyproflab: error: spool:") and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == (["spool"] if what == "file" else [])


@pytest.fixture
def store(tmp_path_factory, go_profiles) -> Path:
    db = tmp_path_factory.mktemp("store") / "s.duckdb"
    argv = ["ingest", str(go_profiles["cpu"]), "--db", str(db), "--service", "api"]
    assert main([*argv, "--workers", "1"]) == 0
    return db


@pytest.mark.parametrize("command", ["report", "gc"])
def test_a_selection_matching_nothing_is_one_line(command, store, tmp_path, capsys) -> None:
    out = tmp_path / "out.html"
    capsys.readouterr()
    assert main([command, "--db", str(store), "--service", "apx", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pyproflab: error: no profiles") and err.count("\n") == 1, err
    assert "service=apx" in err and not out.exists()
    assert main([command, "--db", str(store), "--service", "api", "-o", str(out)]) == 0


def test_a_report_of_an_empty_store_is_one_line(tmp_path, capsys) -> None:
    from pyproflab.store import Store

    db, out = tmp_path / "s.duckdb", tmp_path / "r.html"
    with Store.open(db):
        pass
    assert main(["report", "--db", str(db), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pyproflab: error: no profiles or GC data in {db}: "), err
    assert err.count("\n") == 1 and not out.exists()
    assert main(["gc", "--db", str(db)]) == 2  # it said "no profiles match (everything)"
    err = capsys.readouterr().err
    assert err == f"pyproflab: error: no profiles in {db} (for GC metrics alone: pyproflab gogc)\n"


def test_an_empty_store_says_it_holds_nothing(tmp_path, capsys) -> None:
    """``profiles`` and ``trace sched`` of a store holding nothing (a newcomer's
    ``trace sched`` after ``make demo``, whose store has no trace) said "no
    profiles match (everything)" and "no traces match (everything)"."""
    from pyproflab.store import Store

    db = tmp_path / "s.duckdb"
    with Store.open(db):
        pass
    assert main(["profiles", "--db", str(db)]) == 0
    assert capsys.readouterr().err == "pyproflab: note: the store holds no profiles\n"
    assert main(["trace", "sched", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pyproflab: error: {db} holds no traces (`pyproflab ingest TRACE`")
    assert err.count("\n") == 1 and "everything" not in err


def test_a_report_of_gc_metrics_alone_says_why_its_gc_section_is_empty(tmp_path, capsys):
    """The gc section sets GC figures beside profiles: with GC cycles and no
    profile it is skipped with the same words as ``gc`` (it was once an empty
    table; once gc() refused such a selection, the section showed that error)."""
    from support.report_helpers import manifest

    log = Path(__file__).parents[1] / "testdata" / "gc" / "gctrace-go1.26.log"
    db, out = tmp_path / "s.duckdb", tmp_path / "r.html"
    argv = ["ingest-gc", "--db", str(db), "--format", "gctrace", "--service", "x", str(log)]
    assert main(argv) == 0
    assert main(["report", "--db", str(db), "-o", str(out)]) == 0
    (gc,) = [s for s in manifest(out.read_text())["sections"] if s["id"] == "gc"]
    assert gc["skipped"] and gc["notes"] == [
        f"no profiles in {db} (GC metrics alone: the gogc section)"
    ]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["ingest", "x.pb.gz", "--batch-size", "0"], "--batch-size"),
        (["ingest", "x.pb.gz", "--workers", "0"], "--workers"),
        (["spool-ingest", "spool", "--batch-files", "0"], "--batch-files"),
        (
            ["serve", "--spool", "spool", "--ingest-batch-files", "0"]
            + ["--listen", "127.0.0.1:0", "--duration", "0.1"],  # bounded, were it to serve
            "--ingest-batch-files",
        ),
    ],
)
def test_a_batch_of_nothing_is_one_line(argv, flag, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    Path("spool").mkdir()
    assert main([*argv, "--db", "s.duckdb"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pyproflab: error: {flag} ") and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spool"]


def test_pgo_diff_of_a_profile_go_rejects_names_it(go_profiles, capsys) -> None:
    heap = str(go_profiles["heap"])
    assert main(["pgo", "diff", str(go_profiles["cpu"]), heap]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pyproflab: error: {heap}: profile has no samples/count"), err


def test_a_refused_serve_makes_no_spool(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["serve", "--spool", "spool", "--listen", "0.0.0.0:0", "--duration", "0.1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pyproflab: error: --listen 0.0.0.0") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--max-connections", "0"),
        ("--max-body-mib", "-1"),
        ("--deadline", "0"),
        ("--idle", "nan"),
        ("--spool-max-mib", "0"),
        ("--retry-after", "-5"),
    ],
)
def test_a_serve_limit_of_nothing_is_one_line(flag, value, tmp_path, monkeypatch, capsys) -> None:
    """``--max-connections 0`` started and served no one; a limit of nothing, a
    negative one or NaN is one line, exit 2, and no spool is made."""
    monkeypatch.chdir(tmp_path)
    argv = ["serve", "--spool", "spool", "--duration", "0.1", "--no-ingest", flag, value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pyproflab: error: {flag} ") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["top"], ["profiles"], ["gc"]])
def test_no_store_in_a_new_folder_says_how_to_get_one(command, tmp_path, monkeypatch, capsys):
    """A newcomer's first command, in a folder without the default store: one line
    that says it is the default and how to name or make a store."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYPROFLAB_DB", raising=False)
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pyproflab: error: pyproflab.duckdb: no such store in {tmp_path} ")
    assert "--db names another" in err and "make demo" in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_a_serve_whose_address_is_taken_leaves_no_spool(tmp_path, monkeypatch, capsys) -> None:
    """The address in use is found when the server binds, after the spool was
    made: one line, exit 2, and the spool it made is gone again."""
    import socket

    monkeypatch.chdir(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["serve", "--spool", "spool", "--listen", f"127.0.0.1:{port}", "--no-ingest"]
        assert main([*argv, "--duration", "0.1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pyproflab: error: --listen 127.0.0.1:{port}: ") and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_gc_html_has_the_category_table(store, capsys) -> None:
    import html
    import re

    assert main(["gc", "--db", str(store), "--service", "api", "--format", "text"]) == 0
    text = capsys.readouterr().out
    rows = text.split("GC CPU by category")[1].split("\n\n")[1].splitlines()
    assert rows[0].split()[:5] == ["profile", "instance", "cpu", "GC", "mark"]
    assert main(["gc", "--db", str(store), "--service", "api", "--format", "html"]) == 0
    page = html.unescape(capsys.readouterr().out)
    table = page.split("GC CPU by category")[1].split("</table>")[0]
    cells = [re.findall(r"<t[hd]>(.*?)</t[hd]>", r) for r in table.split("</tr>")[:-1]]
    assert cells[0][:5] == ["profile", "instance", "cpu", "GC", "mark ded"]
    # the same rows as text's (an empty instance is a blank in text)
    assert [[c for c in r if c] for r in cells[1:]] == [r.split() for r in rows[1:]]
    assert len(rows) == 2  # the header and the store's one CPU profile


def test_pgo_effect_text_has_no_nan() -> None:
    from pyproflab.reports.pgo_effect import _row_line

    row = {"label": "runtime.newstack", "cum_rate_base": 5.21e-05, "cum_rate_new": 0.000123}
    row |= {"cum_rel": 1.354, "cum_rel_lo": -0.797, "cum_rel_hi": 26.354}
    untested = _row_line({**row, "cum_q": float("nan")})
    assert "nan" not in untested and untested.endswith("+2635.4%]")
    assert _row_line({**row, "cum_q": 0.91}).endswith(", q 0.91")


def test_every_serve_option_says_its_default() -> None:
    """``serve --help`` listed ten options bare (``--max-body-mib N``,
    ``--spool-max-mib N``, ``--retry-after S`` ...): what each limits and its
    default were in docs/serve.md only. Each says both, the parser's default."""
    from pyproflab.cli import build_parser

    serve = build_parser()._subparsers._group_actions[0].choices["serve"]
    for action in serve._actions:
        default = action.default
        if default in (None, False) or not action.option_strings or action.dest == "help":
            continue
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        assert f"default {shown})" in (action.help or ""), action.option_strings


@pytest.mark.parametrize(
    ("argv", "meant"),
    [(["chek"], "check"), (["chek", "-o", "x.pgo"], "check"), (["wieghts", "a.pb"], "weights"),
     (["efect", "--before", "v=1"], "effect"), (["dif", "a", "b"], "diff")],
)  # fmt: skip
def test_pgo_typo_of_a_subcommand_suggests_it(tmp_path, monkeypatch, capsys, argv, meant) -> None:
    """`pgo chek` said "-o/--output is required", and with -o "not writing x.pgo:
    chek: no such file" (exit 0): a missing file one edit from a subcommand is
    named with the subcommand it was likely meant to be."""
    monkeypatch.chdir(tmp_path)
    assert main(["pgo", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err == f"pyproflab: error: {argv[0]}: no such file; did you mean 'pgo {meant}'?\n"
    assert list(tmp_path.iterdir()) == []


def test_pgo_file_named_like_a_typo_is_a_file(tmp_path, monkeypatch, capsys) -> None:
    """A file that is there is a profile, whatever its name; a missing one far
    from every subcommand is not given a suggestion."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chek").write_bytes(b"not a profile")
    main(["pgo", "chek", "-o", "x.pgo"])
    assert "did you mean" not in capsys.readouterr().err
    main(["pgo", "cpu.pb", "-o", "x.pgo"])
    assert "did you mean" not in capsys.readouterr().err
