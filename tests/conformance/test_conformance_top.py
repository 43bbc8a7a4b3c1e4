"""`top` equals `go tool pprof -top`, row for row, on real profiles.

For every corpus proto file pprof opens and every profile the Go test program
writes, for every sample index, at functions and lines granularity:
pyproflab's rows equal pprof's as multisets of (label, flat, cum, inline).
Also: the order of rows (default and -cum), -focus/-ignore, the CLI's csv
and json, refusal of what pprof refuses, and the oracle's own parser.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import pprof_oracle as oracle
from support.testenv import (
    CORPUS,
    GO_PROFILES,
    RECORDED_GO,
    REPO,
    Pprof,
    api_read,
    api_top,
    assert_same_rows,
    corpus_files,
    corpus_id,
    corpus_params,
    go_params,
    our_top_keys,
    require_opened,
    run_profgen,
)

GRANULARITIES = [pytest.param(False, id="functions"), pytest.param(True, id="lines")]


def our_top(path: Path, sample_index: int, lines: bool, **options):
    return api_top(
        api_read(path),
        sample_index=sample_index,
        granularity="lines" if lines else "functions",
        **options,
    )


@pytest.fixture(scope="module")
def prefetched(request: pytest.FixtureRequest, pprof: Pprof) -> Pprof:
    """Compute, in parallel, pprof's answer for every top test selected in this session."""
    calls = []
    for item in request.session.items:
        spec = getattr(item, "callspec", None)
        if spec is None or item.module is not request.module:
            continue
        params = spec.params
        if item.originalname == "test_top_corpus" and params.get("path") is not None:
            path = params["path"]
        elif item.originalname == "test_top_go":
            path = request.getfixturevalue("go_profiles")[params["kind"]]
        else:
            continue
        idx, lines = params["index"], params["lines"]
        calls.append(
            lambda p=path, i=idx, ln=lines: (
                pprof.opens(p)[0] and pprof.top(p, sample_index=i, lines=ln)
            )
        )
    pprof.prefetch(calls)
    return pprof


# --- the main conformance tables --------------------------------------------------


@pytest.mark.corpus
@pytest.mark.parametrize("lines", GRANULARITIES)
@pytest.mark.parametrize(("path", "index"), corpus_params(with_index=True, legacy=True))
def test_top_corpus(path: Path, index: int, lines: bool, prefetched: Pprof):
    """Every corpus file pprof opens (its legacy formats too), every sample index:
    same rows as pprof."""
    require_opened(prefetched, path)
    report = prefetched.top(path, sample_index=index, lines=lines)
    result = our_top(path, index, lines)
    assert_same_rows(our_top_keys(result), report, f"{corpus_id(path)} index {index}")


@pytest.mark.go
@pytest.mark.parametrize("lines", GRANULARITIES)
@pytest.mark.parametrize(("kind", "index"), go_params(with_index=True))
def test_top_go(kind: str, index: int, lines: bool, go_profiles, prefetched: Pprof):
    """Every profile profgen writes, every sample index: same rows as pprof."""
    path = go_profiles[kind]
    report = prefetched.top(path, sample_index=index, lines=lines)
    assert report.rows, f"pprof shows nothing for {kind}[{index}]; profgen should make samples"
    result = our_top(path, index, lines)
    assert_same_rows(our_top_keys(result), report, f"profgen {kind} index {index}")


# --- what profgen's profiles must contain for the tables above to mean much -------


@pytest.mark.go
@pytest.mark.go
def test_profgen_live_run_writes_every_kind(profgen_bin, tmp_path, pprof: Pprof):
    """A fresh profgen run (what the recorded profiles came from) writes every kind
    with the recorded sample types: all that a sampled run guarantees."""
    live = run_profgen(profgen_bin, tmp_path, cpu_seconds=0.5)
    recorded = {kind: RECORDED_GO / name for kind, (name, _) in GO_PROFILES.items()}
    for kind, path in live.items():
        assert pprof.sample_types(path) == pprof.sample_types(recorded[kind]), kind


def test_go_cpu_profile_exercises_pprof(go_profiles, pprof: Pprof):
    """The recorded Go CPU profile has hundreds of samples, recursion, inline
    markers and labels (tests/support/record_go_profiles.py kept a run that has them)."""
    report = pprof.top(go_profiles["cpu"], sample_index=0)
    rows = {r.label: r for r in report.rows}
    assert sum(r.flat for r in report.rows) >= 200, "expected hundreds of CPU samples"
    for fn in ("main.fib", "main.isEven", "main.isOdd", "main.hashLoop", "main.(*tree).walk"):
        assert fn in rows, f"{fn} missing from the CPU profile"
    assert rows["main.rotate"].inline == "(inline)"
    assert {r.inline for r in report.rows} >= {"", "(inline)"}
    raw = pprof.raw(go_profiles["cpu"])
    labels = " ".join(lbl for s in raw.samples for lbl in s[2])
    assert "worker:[" in labels and "phase:[cpu]" in labels
    assert any(len(loc[3]) > 1 for loc in raw.locations), "no location with inlined lines"


# --- order, options -------------------------------------------------------------------


def ordered_cases() -> list:
    cases = [
        pytest.param("go", "cpu", 1, id="go-cpu[1]"),
        pytest.param("go", "heap", 3, id="go-heap[3]"),
        pytest.param("go", "block", 1, id="go-block[1]"),
    ]
    for rel, idx in (
        ("google-pprof/internal/report/testdata/sample.cpu", 1),
        ("parca/pkg/query/testdata/alloc_space_delta.pb.gz", 3),
        ("pyroscope/pkg/pprof/testdata/heap", 1),
    ):
        marks = [pytest.mark.corpus]
        if not (CORPUS / rel).exists():
            marks.append(pytest.mark.skip(reason=f"corpus file {rel} not found"))
        cases.append(pytest.param("corpus", rel, idx, id=f"{rel}[{idx}]", marks=marks))
    return cases


def resolve(source: str, name: str, go_profiles_factory) -> Path:
    return CORPUS / name if source == "corpus" else go_profiles_factory()[name]


@pytest.fixture
def go_profiles_lazy(request: pytest.FixtureRequest):
    """go_profiles, built only when a case needs it."""
    return lambda: request.getfixturevalue("go_profiles")


@pytest.mark.parametrize(
    "cum", [pytest.param(False, id="flat-order"), pytest.param(True, id="cum-order")]
)
@pytest.mark.parametrize(("source", "name", "index"), ordered_cases())
def test_top_order(source, name, index, cum, pprof: Pprof, go_profiles_lazy):
    """Rows come in pprof's order: by |flat| (or |cum| with -cum), then printable name."""
    path = resolve(source, name, go_profiles_lazy)
    report = pprof.top(path, sample_index=index, cum=cum)
    result = our_top(path, index, False, cum_sort=cum)
    ours = [k[:3] for k in our_top_keys(result)]
    theirs = [r.key()[:3] for r in report.rows]
    assert ours == theirs, "row order differs from go tool pprof" + (" -cum" if cum else "")


FILTERS = [
    pytest.param({"focus": "fib"}, id="focus-fib"),
    pytest.param({"focus": "main\\.spin"}, id="focus-spin"),
    pytest.param({"ignore": "runtime\\."}, id="ignore-runtime"),
    pytest.param(
        {"focus": "main\\.", "ignore": "hashLoop|indirectLoop"}, id="focus-main-ignore-loops"
    ),
    pytest.param({"focus": "profgen/main\\.go"}, id="focus-filename"),
]


@pytest.mark.go
@pytest.mark.parametrize("lines", GRANULARITIES)
@pytest.mark.parametrize("options", FILTERS)
def test_top_focus_ignore(options: dict, lines: bool, go_profiles, pprof: Pprof):
    """-focus/-ignore on the Go CPU profile keep the same samples as pprof's."""
    path = go_profiles["cpu"]
    report = pprof.top(path, sample_index=1, lines=lines, **options)
    assert report.rows, f"pprof keeps nothing with {options}: the case tests nothing"
    result = our_top(path, 1, lines, **options)
    assert_same_rows(our_top_keys(result), report, f"go cpu {options}")


@pytest.mark.go
def test_top_nodecount(go_profiles, pprof: Pprof):
    """nodecount=N keeps pprof's first N rows (sorted by flat)."""
    path = go_profiles["cpu"]
    report = pprof.top(path, sample_index=1)
    result = our_top(path, 1, False, nodecount=5)
    assert [k[:3] for k in our_top_keys(result)] == [r.key()[:3] for r in report.rows[:5]]


# --- through the CLI ----------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pyproflab", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def strip_marker(name: str) -> tuple[str, str]:
    for marker in ("(partial-inline)", "(inline)"):
        if name.endswith(" " + marker):
            return name[: -len(marker) - 1], marker
    return name, ""


def cli_cases() -> list:
    cases = [
        pytest.param("go", "cpu", 1, False, id="go-cpu[1]"),
        pytest.param("go", "heap", 1, True, id="go-heap[1]-lines"),
        pytest.param("go", "mutex", 1, False, id="go-mutex[1]"),
    ]
    for rel, idx, lines in (
        ("google-pprof/internal/report/testdata/sample.cpu", 1, True),
        ("pyroscope/pkg/og/convert/pprof/testdata/nodejs-wall.pb.gz", 1, False),
    ):
        marks = [pytest.mark.corpus]
        if not (CORPUS / rel).exists():
            marks.append(pytest.mark.skip(reason=f"corpus file {rel} not found"))
        cases.append(pytest.param("corpus", rel, idx, lines, id=f"{rel}[{idx}]", marks=marks))
    return cases


@pytest.mark.parametrize("fmt", ["csv", "json"])
@pytest.mark.parametrize(("source", "name", "index", "lines"), cli_cases())
def test_cli_top(source, name, index, lines, fmt, pprof: Pprof, go_profiles_lazy):
    """`python -m pyproflab top FILE --format csv|json` prints pprof's numbers."""
    path = resolve(source, name, go_profiles_lazy)
    report = pprof.top(path, sample_index=index, lines=lines)
    args = ["top", str(path), "--sample-index", str(index), "--format", fmt, "--nodefraction", "0"]
    if lines:
        args += ["--granularity", "lines"]
    res = run_cli(*args)
    assert res.returncode == 0, f"pyproflab top failed: {res.stderr[-2000:]}"
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(res.stdout)))
    else:
        data = json.loads(res.stdout)
        rows = data["rows"] if isinstance(data, dict) else data
    assert rows, "no rows printed"
    ours = []
    for row in rows:
        name_, marker = strip_marker(row.get("label") or row["name"])
        marker = row.get("inline", marker) or marker
        ours.append((name_, int(row["flat"]), int(row["cum"]), marker))
    assert_same_rows(ours, report, f"CLI {fmt} {name}[{index}]")


# --- what pprof refuses, we refuse ---------------------------------------------------


@pytest.mark.corpus
def test_refuses_what_pprof_refuses(corpus_opened):
    """Every corpus file pprof cannot open makes read_profile raise a ProflabError."""
    from pyproflab import ProflabError, read_profile

    refused = [f for f, (ok, _) in corpus_opened.items() if not ok]
    assert refused, "the corpus should hold at least one file pprof refuses (dotnet-pprof-73)"
    for f in refused:
        with pytest.raises(ProflabError):
            read_profile(f)


@pytest.mark.corpus
def test_corpus_classification(corpus_opened):
    """The corpus holds what the MANIFEST says: protos pprof opens, legacy files, one refusal."""
    opened_proto = [f for f, (ok, _) in corpus_opened.items() if ok and oracle.is_proto(f)]
    legacy = [f for f, (ok, _) in corpus_opened.items() if ok and not oracle.is_proto(f)]
    refused = {corpus_id(f) for f, (ok, _) in corpus_opened.items() if not ok}
    assert len(opened_proto) >= 50
    assert {f.name for f in legacy} >= {"gobench.cpu", "cppbench.heap", "java.contention"}
    assert refused == {"pyroscope/pkg/og/convert/pprof/testdata/dotnet-pprof-73.pb.gz"}
    assert len(corpus_files()) == len(opened_proto) + len(legacy) + len(refused)


# --- the oracle's own parser, on real output ------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "suffix"),
    [
        ("0", 0, ""),
        ("1280000000ns", 1280000000, "ns"),
        ("-524576B", -524576, "B"),
        ("12", 12, ""),
        ("5us", 5, "us"),
        ("17objects", 17, "objects"),
    ],
)
def test_parse_value(text, value, suffix):
    assert oracle.parse_value(text) == (value, suffix)


@pytest.mark.parametrize("text", ["1.28s", "0.50MB", "", "ns"])
def test_parse_value_refuses_scaled(text):
    with pytest.raises(oracle.OracleError):
        oracle.parse_value(text)


@pytest.mark.corpus
def test_parser_sample_cpu(corpus_dir, pprof: Pprof):
    """Known rows of pprof's own report test input, with -unit=nanoseconds."""
    report = pprof.top(
        corpus_dir / "google-pprof/internal/report/testdata/sample.cpu", sample_index=1
    )
    assert report.unit_suffix == "ns"
    rows = {r.label: r for r in report.rows}
    assert rows["runtime.mapiternext"].key() == ("runtime.mapiternext", 1280000000, 1370000000, "")
    assert rows["math.Abs"].key() == ("math.Abs", 110000000, 110000000, "(inline)")
    assert rows["main.main"].flat == 0 and rows["main.main"].cum == 1760000000
    assert report.total == 1760000000 == sum(r.flat for r in report.rows)
    assert len(report.rows) == 14


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("rel", "index", "suffix"),
    [
        ("pyroscope/pkg/og/convert/pprof/testdata/nodejs-wall.pb.gz", 1, "us"),
        ("pyroscope/pkg/pprof/testdata/heap", 1, "B"),
        ("pyroscope/pkg/pprof/testdata/heap", 0, ""),
        ("pyroscope/pkg/pprof/testdata/dotnet.labels.pprof", 0, "ns"),
    ],
)
def test_parser_units(corpus_dir, pprof: Pprof, rel, index, suffix):
    """Values print as integers with the unit's short suffix; flats add up to the total."""
    report = pprof.top(corpus_dir / rel, sample_index=index)
    assert report.rows and report.unit_suffix == suffix
    assert sum(r.flat for r in report.rows) == report.total
    raw = pprof.raw(corpus_dir / rel)
    assert sum(s[0][index] for s in raw.samples) == report.total


@pytest.mark.corpus
def test_parser_names_with_spaces(corpus_dir, pprof: Pprof):
    """Names with spaces and parentheses (.NET, Java) survive parsing whole."""
    found = []
    for rel in (
        "pyroscope/pkg/pprof/testdata/dotnet.labels.pprof",
        "pyroscope/pkg/phlaredb/testdata/profile_java",
    ):
        report = pprof.top(corpus_dir / rel, sample_index=0)
        found += [r.label for r in report.rows if " " in r.label]
    assert found, "expected names with spaces in the .NET/Java profiles"
    assert not any(lbl.endswith(("(inline)", "  ")) for lbl in found)


@pytest.mark.corpus
def test_parser_zero_rows(corpus_dir, pprof: Pprof):
    """A sample type whose values are all zero: pprof prints the header and no rows."""
    report = pprof.top(
        corpus_dir / "pyroscope/pkg/pprof/testdata/dotnet.labels.pprof", sample_index=1
    )
    assert report.rows == [] and report.total == 0


@pytest.mark.corpus
def test_parser_negative_values(corpus_dir, pprof: Pprof):
    """A delta heap profile has negative values: total is the sum of |values|."""
    path = corpus_dir / "parca/pkg/query/testdata/alloc_space_delta.pb.gz"
    report = pprof.top(path, sample_index=3)
    raw = pprof.raw(path)
    assert any(r.flat < 0 for r in report.rows)
    assert report.total == sum(abs(s[0][3]) for s in raw.samples)
    assert sum(r.flat for r in report.rows) == sum(s[0][3] for s in raw.samples)
