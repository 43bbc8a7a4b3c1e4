"""merge(...) and `pyproflab merge A B -o OUT` equal `go tool pprof -proto A B …`.

Compared by top (flat and cum of every node) at every sample index of the
merged profile, and by the merged sample types and default.

What pprof does with profiles of different kinds (checked against go 1.26's
pprof; see its CompatibilizeSampleTypes and Merge):

- It keeps the sample types ALL inputs share, in the first profile's order;
  e.g. node's nodejs-wall (samples/count, wall/microseconds) + profile_nodejs
  (wall/microseconds) merge to wall/microseconds only.
- heap + allocs (same four types, different defaults) merge; the default of
  the result is pprof's, and we assert ours equals it.
- No common type (cpu + heap, goroutine + threadcreate) is an error: "profiles
  have empty common sample type list". So are different period types even
  with a common sample type (nodejs wall + Go cpu: "period type: incompatible
  types"). pyproflab must refuse these too, with a ProflabError (CLI: exit 2,
  one line on stderr).
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from support import pprof_oracle as oracle
from support.testenv import (
    CORPUS,
    REPO,
    Pprof,
    api_merge,
    api_read,
    api_top,
    describe_diff,
    our_top_keys,
)

MANY = "parca/pkg/query/testdata/many"
DD = "dd-trace-go/profiler/internal/fastdelta/testdata"

# id -> sources; a source is ("go", kind) or ("corpus", path under the corpus).
MERGE_CASES: dict[str, list[tuple[str, str]]] = {
    "parca-many-10-heaps": [("corpus", f"{MANY}/*.pb.gz")],
    "go-cpu-pair": [("go", "cpu"), ("go", "cpu2")],
    "go-cpu-with-corpus-go-cpu": [
        ("go", "cpu"),
        ("corpus", "parca/pkg/query/testdata/fib.pb.gz"),
        ("corpus", "google-pprof/internal/report/testdata/sample.cpu"),
    ],
    "go-heap-allocs": [("go", "heap"), ("go", "allocs")],
    "go-mutex-block": [("go", "mutex"), ("go", "block")],
    "dd-heap-before-after": [
        ("corpus", f"{DD}/heap.before.pprof"),
        ("corpus", f"{DD}/heap.after.pprof"),
    ],
    "dd-block-before-after": [
        ("corpus", f"{DD}/block.before.pprof"),
        ("corpus", f"{DD}/block.after.pprof"),
    ],
    "nodejs-common-type-only": [
        ("corpus", "pyroscope/pkg/og/convert/pprof/testdata/nodejs-wall.pb.gz"),
        ("corpus", "pyroscope/pkg/pprof/testdata/profile_nodejs"),
    ],
    "pyroscope-heap-and-delta": [
        ("corpus", "pyroscope/pkg/pprof/testdata/heap"),
        ("corpus", "pyroscope/pkg/pprof/testdata/heap_delta"),
    ],
    # Labelled samples (string labels, span ids as labels) from three producers.
    "cpu-with-labels": [
        ("corpus", "parca/pkg/parca/testdata/labels.pb.gz"),
        ("corpus", "pyroscope/pkg/og/convert/pprof/testdata/cpu-exemplars.pb.gz"),
        ("corpus", "pyroscope/pkg/pprof/testdata/single_group_with_optional_span_id.pb.gz"),
    ],
    # Several mappings per profile, some shared (addresses rebased to the first).
    "heaps-with-several-mappings": [
        ("corpus", "pyroscope/pkg/og/convert/pprof/testdata/heap.pb.gz"),
        ("corpus", "pyroscope/pkg/phlaredb/testdata/heap"),
        ("corpus", "pyroscope/pkg/pprof/testdata/heap_delta"),
    ],
    "node-labels-thirteen-mappings": [
        ("corpus", "parca/pkg/query/testdata/profile-with-labels.pb.gz"),
        ("corpus", "parca/pkg/normalizer/node-profile.pb.gz"),
    ],
    # A production-size profile merged with itself and a small one (20,000 samples,
    # 23,000 functions: the ids of every table are compared below).
    "large-cpu-twice-and-fib": [
        ("corpus", "google-pprof/internal/proftest/testdata/large.cpu"),
        ("corpus", "parca/pkg/query/testdata/fib.pb.gz"),
        ("corpus", "google-pprof/internal/proftest/testdata/large.cpu"),
    ],
}

# Inputs pprof refuses to merge, and the words of its refusal.
REFUSED_CASES: dict[str, tuple[list[tuple[str, str]], str]] = {
    "go-cpu+heap": ([("go", "cpu"), ("go", "heap")], "empty common sample type list"),
    "go-goroutine+threadcreate": (
        [("go", "goroutine"), ("go", "threadcreate")],
        "empty common sample type list",
    ),
    "nodejs-wall+go-cpu": (
        [("corpus", "pyroscope/pkg/og/convert/pprof/testdata/nodejs-wall.pb.gz"), ("go", "cpu")],
        "period type",
    ),
}


def case_params(cases: dict) -> list:
    params = []
    for name, value in cases.items():
        sources = value[0] if isinstance(value, tuple) else value
        marks = []
        if any(kind == "corpus" for kind, _ in sources):
            marks.append(pytest.mark.corpus)
            if not CORPUS.is_dir():
                marks.append(pytest.mark.skip(reason=f"public pprof corpus not found at {CORPUS}"))
        if any(kind == "go" for kind, _ in sources):
            marks.append(pytest.mark.go)
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.fixture
def resolve(request: pytest.FixtureRequest):
    """sources -> file paths (globs expanded, sorted); builds profgen only if needed."""

    def _resolve(sources: list[tuple[str, str]]) -> list[Path]:
        paths: list[Path] = []
        for kind, name in sources:
            if kind == "go":
                paths.append(request.getfixturevalue("go_profiles")[name])
            else:
                found = sorted(CORPUS.glob(name))
                assert found, f"corpus has no {name}"
                paths.extend(found)
        return paths

    return _resolve


@pytest.fixture(scope="module")
def pprof_merged(pprof: Pprof, tmp_path_factory: pytest.TempPathFactory):
    """case name + files -> pprof's merged file (cached per module)."""
    cache: dict[str, Path] = {}
    out_dir = tmp_path_factory.mktemp("pprof-merged")

    def _merged(name: str, files: list[Path]) -> Path:
        if name not in cache:
            cache[name] = oracle.merge_proto(files, out_dir / f"{name}.pb.gz")
        return cache[name]

    return _merged


def assert_merged_top_equal(ours, merged_by_pprof: Path, pprof: Pprof, what: str) -> None:
    """Our merged Profile's top equals pprof's top of its own merge, at every sample index."""
    raw = pprof.raw(merged_by_pprof)
    assert [(t.type, t.unit) for t in ours.sample_types] == raw.sample_types, (
        f"{what}: merged sample types differ from pprof's"
    )
    assert (ours.default_sample_type or "") == raw.default_type, f"{what}: default type differs"
    failures = []
    for index in range(len(raw.sample_types)):
        report = pprof.top(merged_by_pprof, sample_index=index)
        mine = Counter(our_top_keys(api_top(ours, sample_index=index)))
        if mine != report.multiset():
            failures.append(f"index {index}: {describe_diff(mine, report.multiset(), 5)}")
    assert not failures, f"{what}: merged top differs from go tool pprof -proto\n" + "\n".join(
        failures
    )


@pytest.mark.parametrize("name", case_params(MERGE_CASES))
def test_merge_api(name: str, resolve, pprof: Pprof, pprof_merged):
    """pyproflab.analyses.merge.merge(profiles) == pprof -proto, by top at every index."""
    files = resolve(MERGE_CASES[name])
    merged = api_merge([api_read(f) for f in files])
    assert_merged_top_equal(merged, pprof_merged(name, files), pprof, name)


def merged_tables(profile) -> dict:
    """Everything pprof's merge decides: header numbers and every table, ids included.
    A sample's labels are a map to pprof (written sorted by key), so they are compared
    sorted."""
    samples = profile.samples.to_pylist()
    for s in samples:
        s["labels"] = sorted(s["labels"], key=repr)
    return {
        "header": (profile.period, profile.time_nanos, profile.duration_nanos),
        "samples": samples,
        "locations": profile.locations.to_pylist(),
        "functions": profile.functions.to_pylist(),
        "mappings": profile.mappings.to_pylist(),
    }


@pytest.mark.parametrize("name", case_params(MERGE_CASES))
def test_merge_tables_equal_pprof(name: str, resolve, pprof_merged):
    """Table for table, ids in pprof's order of first use: samples (stacks, values,
    labels), locations (rebased addresses, lines), functions and mappings."""
    files = resolve(MERGE_CASES[name])
    ours = merged_tables(api_merge([api_read(f) for f in files]))
    theirs = merged_tables(api_read(pprof_merged(name, files)))
    for table, rows in theirs.items():
        mine = ours[table]
        if mine != rows:
            n = next((i for i, (a, b) in enumerate(zip(mine, rows, strict=False)) if a != b), None)
            n = min(len(mine), len(rows)) if n is None else n
            pytest.fail(
                f"{name}: {table} differ from pprof -proto ({len(mine)} rows, pprof "
                f"{len(rows)}); first difference at row {n}:\n"
                f"ours  {mine[n] if n < len(mine) else None}\n"
                f"pprof {rows[n] if n < len(rows) else None}"
            )


@pytest.mark.parametrize("name", case_params(MERGE_CASES))
def test_merge_cli(name: str, resolve, pprof: Pprof, pprof_merged, tmp_path: Path):
    """`pyproflab merge A B … -o OUT`: pprof reads OUT with the same top as its own merge."""
    files = resolve(MERGE_CASES[name])
    out = tmp_path / "merged.pb.gz"
    res = subprocess.run(
        [sys.executable, "-m", "pyproflab", "merge", *map(str, files), "-o", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, f"pyproflab merge failed: {res.stderr[-2000:]}"
    theirs = pprof_merged(name, files)
    types = pprof.raw(theirs).sample_types
    assert pprof.raw(out).sample_types == types
    assert pprof.raw(out).default_type == pprof.raw(theirs).default_type
    for index in range(len(types)):
        a = pprof.top(out, sample_index=index)
        b = pprof.top(theirs, sample_index=index)
        assert a.multiset() == b.multiset(), (
            f"{name} index {index}: pprof reads our merge differently\n"
            f"{describe_diff(a.multiset(), b.multiset())}"
        )


@pytest.mark.parametrize("name", case_params(REFUSED_CASES))
def test_merge_refused_like_pprof(name: str, resolve, pprof: Pprof, tmp_path: Path):
    """Where pprof refuses to merge, we refuse too: ProflabError, CLI exit 2 with one line."""
    sources, words = REFUSED_CASES[name]
    files = resolve(sources)
    with pytest.raises(oracle.OracleError, match=words):
        oracle.merge_proto(files, tmp_path / "pprof.pb.gz")

    from pyproflab import ProflabError

    with pytest.raises(ProflabError):
        api_merge([api_read(f) for f in files])
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyproflab",
            "merge",
            *map(str, files),
            "-o",
            str(tmp_path / "ours.pb.gz"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 2, f"exit {res.returncode}: {res.stderr[-1000:]}"
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "ours.pb.gz").exists()


@pytest.mark.corpus
def test_merge_many_is_a_real_fleet(corpus_dir: Path, pprof: Pprof, tmp_path: Path):
    """The 10-heap case means something: pprof's merged total is the sum of the ten."""
    files = sorted((corpus_dir / MANY).glob("*.pb.gz"))
    assert len(files) == 10
    merged = oracle.merge_proto(files, tmp_path / "m.pb.gz")
    for index in range(4):
        total = pprof.top(merged, sample_index=index).total
        parts = [pprof.top(f, sample_index=index).total for f in files]
        assert total == sum(parts) and total > 0


def first_difference(name: str, ours: dict, theirs: dict) -> str | None:
    """Where two merged_tables() differ (None if equal)."""
    for table, rows in theirs.items():
        mine = ours[table]
        if mine != rows:
            if table == "header":
                return f"{name}: header ours {mine}, pprof {rows}"
            n = next((i for i, (a, b) in enumerate(zip(mine, rows, strict=False)) if a != b), None)
            n = min(len(mine), len(rows)) if n is None else n
            return (
                f"{name}: {table} differ ({len(mine)} rows, pprof {len(rows)}) at row {n}:\n"
                f"ours  {mine[n] if n < len(mine) else None}\n"
                f"pprof {rows[n] if n < len(rows) else None}"
            )
    return None


@pytest.mark.parametrize("name", case_params(MERGE_CASES))
def test_merge_files_in_chunks_equal_pprof(name: str, resolve, pprof_merged, monkeypatch):
    """merge_files cuts the files into chunks, merges each in a worker process and
    then merges the chunks' results: pprof's tables and header, ids included, for
    every case (one file per chunk, up to three chunks; cases of mixed kinds take
    the one-by-one path)."""
    from pyproflab.analyses import merge_files as mf

    monkeypatch.setattr(mf, "MIN_FILES_PER_WORKER", 1)
    files = resolve(MERGE_CASES[name])
    got = mf.merge_files([str(f) for f in files], workers=min(3, len(files)))
    assert got.error is None and got.profile is not None
    diff = first_difference(
        name, merged_tables(got.profile), merged_tables(api_read(pprof_merged(name, files)))
    )
    assert diff is None, diff
