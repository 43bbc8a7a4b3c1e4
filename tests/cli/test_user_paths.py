"""What a new user runs first must not break in front of them.

- ``pyproflab ingest`` of the whole public corpus into one store, then
  ``pyproflab report`` on it: exit 0, no traceback, every section either drawn
  or skipped with a one-line note saying why (files carry no collection window,
  CPU profiles of several runtimes have different sample types, there is no
  GC data).
- A selection mixing profile types (the demo store without ``--type``)
  defaults to the CPU profiles and says so: ``pyproflab top --db`` and the
  docs/python.md's ``lab.regressions(..., sample="cpu")``.
- ``pyproflab ingest`` of an empty folder or a glob matching nothing exits 2
  with one line (a scheduled job can tell it ingested nothing).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.browser.stores import demo_store

from pyproflab.cli import main


def _manifest(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="pyproflab-report">(.*?)</script>', page)
    assert m, "no report manifest"
    return json.loads(m.group(1))


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pyproflab", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def corpus_report(corpus_dir, tmp_path_factory) -> tuple[subprocess.CompletedProcess, str]:
    d = tmp_path_factory.mktemp("corpus-report")
    db = d / "corpus.duckdb"
    ingest = _cli("ingest", str(corpus_dir), "--db", str(db))
    assert ingest.returncode == 0, ingest.stderr[-2000:]
    assert "Traceback" not in ingest.stderr
    report = _cli("report", "--db", str(db), "-o", str(d / "report.html"))
    return report, (d / "report.html").read_text(encoding="utf-8")


def test_corpus_report_has_no_traceback_and_every_section_says_why(corpus_report):
    res, page = corpus_report
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    sections = _manifest(page)["sections"]
    assert [s["id"] for s in sections] == [
        "fleet",
        "top",
        "flame",
        "regressions",
        "gc",
        "gogc",
        "pgo",
    ]
    for s in sections:
        if s["skipped"]:
            assert s["notes"], f"section {s['id']} skipped without saying why"
        for note in s["notes"]:
            assert "\n" not in note and note.strip(), f"{s['id']}: note not one line: {note!r}"
    by = {s["id"]: s for s in sections}
    # The corpus's CPU profiles come from several runtimes: the largest mergeable
    # kind is drawn, the others are named in a note instead of taking the section down.
    assert not by["top"]["skipped"] and not by["flame"]["skipped"]
    assert "flame-cpu" in by["flame"]["charts"]
    assert any("mixes profile types" in n for n in by["flame"]["notes"])
    # No GC data in a store of files: no GC chart (no "None profile view" legend).
    assert by["gc"]["skipped"] and "no GC data" in by["gc"]["notes"][0]
    assert "gc-share" not in by["gc"]["charts"]
    assert "None profile view" not in page
    assert ".to_pandas()" not in page  # the offline page never points at Python


def test_top_without_type_defaults_to_cpu_and_says_so(capsys):
    db = demo_store()
    assert main(["top", "--db", str(db), "--nodecount", "3"]) == 0
    out = capsys.readouterr()
    assert "Type: cpu" in out.out
    assert re.search(r"note: the selection mixes profile types \(.*\): using the \d+ cpu", out.err)


def test_readme_regressions_example_on_mixed_store():
    import pyproflab
    from pyproflab.store.kinds import SelectionNarrowed

    lab = pyproflab.open(demo_store(), read_only=True)
    try:
        with pytest.warns(SelectionNarrowed, match="using the .* cpu profiles") as seen:
            r = lab.regressions(base={"version": "v1"}, new={"version": "v2"}, sample="cpu")
        # The sample type chose the kind: the note does not ask to choose one.
        notes = [str(w.message) for w in seen]  # one a side, the kinds in one order
        assert len(notes) == 2 and notes[0] == notes[1], notes
        assert notes[0].endswith("cpu profiles, the only ones with sample type 'cpu'"), notes
        assert r.rows.num_rows > 0
        assert r.sample_type.type == "cpu"
    finally:
        lab.close()


def test_a_selection_naming_its_type_is_not_narrowed():
    from pyproflab.store import Store
    from pyproflab.store.kinds import one_kind
    from pyproflab.store.select import Selection

    with Store.open(demo_store(), read_only=True) as store:
        sel = Selection(profile_type="heap")
        assert one_kind(store, sel) == (sel, None)
        narrowed, note = one_kind(store, Selection(version="v1"), sample="alloc_space")
        # allocs and heap both hold alloc_space, as many of each: the tie goes by name.
        assert narrowed.profile_type == "allocs" and narrowed.profile_ids is None
        assert note is not None and "using the 2 allocs profiles" in note
        assert note.endswith("(choose with --type / profile_type=)")  # two kinds hold it


@pytest.mark.parametrize("what", ["empty folder", "glob matching nothing"])
def test_ingest_of_nothing_exits_2_with_one_line(what, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    path = str(empty) if what == "empty folder" else str(tmp_path / "nothing-*.pb.gz")
    res = _cli("ingest", path, "--db", str(tmp_path / "s.duckdb"))
    assert res.returncode == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "no profile files found" in lines[0] and path in lines[0]


def test_ingest_of_a_dataset_of_gc_metrics_only_keeps_them(tmp_path, capsys):
    """A store of gctrace cycles alone (ingest-gc, no profile), exported and then
    ingested, twice: its rows are in the new store and both runs exit 0. Before,
    the first run deleted the store it had just filled, saying "no profile files
    found (empty folder)", and every run exited 2."""
    from pyproflab.store import Store

    log = Path(__file__).resolve().parents[1] / "testdata" / "gc" / "gctrace-go1.26.log"
    a, b, ds = (str(tmp_path / n) for n in ("a.duckdb", "b.duckdb", "ds"))
    start = ["--process-start", "2026-11-20T00:00:00Z"]
    assert main(["ingest-gc", str(log), "--format", "gctrace", "--db", a, *start]) == 0
    assert main(["export", "--db", a, "--parquet", ds]) == 0
    assert main(["ingest", ds, "--db", b]) == 0
    assert main(["ingest", ds, "--db", b]) == 0
    assert "no profile files found" not in capsys.readouterr().err
    with Store.open(b, read_only=True) as store:
        assert store.sql("SELECT count(*) FROM gc_cycles")[0][0].as_py() == 20


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["regressions", "--base", "v1", "--new", "version=v2"],
            "--base expects KEY=VALUE, got 'v1' (a version: --base version=v1)",
        ),
        (
            ["pgo", "effect", "--before", "version=v1", "--after", "v2"],
            "--after expects KEY=VALUE, got 'v2' (a version: --after version=v2)",
        ),
    ],
)
def test_a_bare_version_names_its_flag_and_the_fix(argv, line, capsys):
    # A newcomer's `regressions --base v1 --new v2` said only "selection
    # expects KEY=VALUE, got 'v1'".
    assert main([*argv, "--db", str(demo_store())]) == 2
    assert capsys.readouterr().err.strip() == f"pyproflab: error: {line}"


def test_ingest_gc_under_a_tmpdir_named_like_a_column_keeps_its_rows(tmp_path, monkeypatch):
    """GC rows are staged in a Parquet file under TMPDIR; a folder there named
    KEY=VALUE is no partition. Read as one, TMPDIR=.../instance=zz stored every
    sample as instance zz (helper-79)."""
    import tempfile

    from pyproflab.store import Store

    odd = tmp_path / "instance=zz"
    odd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(odd))
    prom = tmp_path / "m.prom"
    prom.write_text("# TYPE up gauge\nup 1\n")
    db = tmp_path / "s.duckdb"
    at = ["--instance", "i-1", "--time", "2026-11-29T12:00:00Z"]
    assert main(["ingest-gc", str(prom), "--format", "prom", "--db", str(db), *at]) == 0
    with Store.open(db, read_only=True) as store:
        got = store.sql("SELECT instance, metric FROM metric_samples").to_pylist()
    assert got == [{"instance": "i-1", "metric": "up"}]
