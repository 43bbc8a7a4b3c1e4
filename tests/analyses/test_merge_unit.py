"""Unit tests of ``merge``: pprof's sample-type, unit and header rules, and
equality with ``go tool pprof -proto A B …`` by top (flat and cum, every index)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.top_unit_helpers import FUNCS, MAPS, build, keys

from pyproflab.analyses.merge import merge
from pyproflab.analyses.sample_types import compatibilize_sample_types
from pyproflab.analyses.top import top
from pyproflab.errors import UsageError

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
HAVE_GO = shutil.which("go") is not None


def one(types, value, loc=1, **kw):
    return build(
        samples=[([loc], [value] * len(types))],
        locations=[(1, 1, [(1, 1)]), (2, 1, [(2, 2)])],
        functions=FUNCS,
        mappings=MAPS,
        types=types,
        **kw,
    )


def test_values_add_and_samples_combine():
    a = one((("cpu", "nanoseconds"),), 10, time_nanos=200, duration_nanos=5)
    b = one((("cpu", "nanoseconds"),), 32, time_nanos=100, duration_nanos=7)
    m = merge([a, b])
    assert m.num_samples == 1
    assert m.samples.column("values").to_pylist() == [[42]]
    assert (m.time_nanos, m.duration_nanos) == (100, 12)
    assert keys(top(m)) == [("main.main", 42, 42, "")]


def test_units_are_scaled_to_the_smallest():
    a = one((("space", "kilobytes"),), 2)
    b = one((("space", "bytes"),), 5)
    m = merge([a, b])
    assert m.sample_types[0].unit == "bytes"
    assert m.samples.column("values").to_pylist() == [[2 * 1024 + 5]]


def test_common_types_in_first_order_and_errors():
    a = one((("x", "count"), ("y", "count")), 1)
    b = one((("y", "count"), ("z", "count")), 2)
    out = compatibilize_sample_types([a, b])
    assert [t.type for t in out[0].sample_types] == ["y"]
    with pytest.raises(UsageError):
        merge([one((("x", "count"),), 1), one((("z", "count"),), 1)])
    with pytest.raises(UsageError):
        merge([one((("x", "count"),), 1), one((("x", "bytes"),), 1)])


def test_cancelled_samples_are_dropped():
    a = one((("cpu", "nanoseconds"),), 10)
    b = one((("cpu", "nanoseconds"),), -10)
    assert merge([a, b]).num_samples == 0


PAIRS = [
    ("parca/pkg/query/testdata/many", None),  # a folder: all of its files
    (
        "google-pprof/internal/report/testdata/sample.cpu",
        "google-pprof/internal/proftest/testdata/large.cpu",
    ),
]


def _files(entry):
    first, second = entry
    path = CORPUS / first
    if second is None:
        return sorted(p for p in path.iterdir() if p.is_file())[:4]
    return [path, CORPUS / second]


@pytest.mark.corpus
@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"public pprof corpus not found at {CORPUS}")
@pytest.mark.skipif(not HAVE_GO, reason="Go is not installed; this compares with go tool pprof")
@pytest.mark.parametrize("entry", PAIRS, ids=[p[0].rsplit("/", 1)[-1] for p in PAIRS])
def test_merge_equals_pprof_proto_by_top(entry, tmp_path):
    from support import pprof_oracle as oracle

    from pyproflab import read_profile

    files = _files(entry)
    merged = merge([read_profile(f) for f in files])
    theirs = oracle.merge_proto(files, tmp_path / "m.pb.gz")
    for idx, st in enumerate(merged.sample_types):
        report = oracle.top(theirs, sample_index=idx, unit=st.unit)
        ours = top(merged, sample_index=idx)
        # Merging is about values: compare (label, flat, cum), whatever edge
        # fraction the oracle uses for the inline markers.
        assert sorted(k[:3] for k in keys(ours)) == sorted(r.key()[:3] for r in report.rows), (
            f"index {idx}"
        )
        assert ours.total == report.total


def test_locations_without_lines_merge():
    """Profiles whose locations have no line at all (addresses only) merge too."""
    p = build([([1, 2], [1]), ([2], [2])], [(1, 0, []), (2, 0, [])], [(1, "f", "f.go")])
    m = merge([p, p])
    assert m.locations.num_rows >= 1
    assert sum(v[0] for v in m.samples.column("values").to_pylist()) == 6
