"""GC CPU categories: each category's plain value equals `go tool pprof -focus=REGEX`.

The real profile comes from a small allocation-heavy Go program,
tests/goprogs/gcload, recorded once (profgen's CPU profile has no GC samples);
corpus Go CPU profiles are checked too when ../shared/corpus is present.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.gc_categories_helpers import shown, value_index
from support.testenv import CORPUS, SKIP_NO_CORPUS

from pyproflab import read_profile
from pyproflab.analyses.gc_categories import (
    CATEGORY_NAMES,
    GC_CATEGORIES,
    GcCategory,
    gc_categories,
)


def assert_equal_to_pprof(path: Path, pprof) -> None:
    ours = gc_categories(read_profile(path))
    index = value_index(path, pprof)
    pprof.prefetch(
        [lambda c=c: pprof.top(path, sample_index=index, focus=c.regex) for c in GC_CATEGORIES]
    )
    bad = []
    for cat in GC_CATEGORIES:
        report = pprof.top(path, sample_index=index, focus=cat.regex)
        theirs = shown(report)
        # The header's X is the flat sum of the rows; check that reading too.
        assert theirs == sum(r.flat for r in report.rows)
        if ours.value(cat.name, plain=True) != theirs:
            bad.append(f"{cat.name}: ours {ours.value(cat.name, plain=True)}, pprof {theirs}")
        assert ours.total == report.total
    assert not bad, f"{path.name}: plain category values differ from pprof -focus:\n" + "\n".join(
        bad
    )


def test_gc_profile_equals_pprof_focus(gc_cpu_profile: Path, pprof) -> None:
    assert_equal_to_pprof(gc_cpu_profile, pprof)


def test_gc_profile_has_gc_activity(gc_cpu_profile: Path) -> None:
    r = gc_categories(read_profile(gc_cpu_profile))
    assert r.sample_type.type == "cpu" and r.unit == "nanoseconds"
    marks = sum(r.value(n, plain=True) for n in ("mark_dedicated", "mark_fractional", "mark_idle"))
    assert r.value("mark_worker_other", plain=True) > 0, "no gcBgMarkWorker samples"
    assert marks > 0 and r.value("allocation", plain=True) > 0
    assert r.gc > 0 and 0 < r.gc_share <= 1


def test_exclusive_values_partition_the_gc_samples(gc_cpu_profile: Path, pprof) -> None:
    r = gc_categories(read_profile(gc_cpu_profile))
    rows = r.rows.to_pylist()
    assert [x["category"] for x in rows] == list(CATEGORY_NAMES)
    assert r.gc == sum(x["cpu"] for x in rows)
    for x in rows:
        assert 0 <= x["cpu"] <= x["plain_cpu"]
        assert x["samples"] <= x["plain_samples"]
        assert x["share"] == pytest.approx(x["cpu"] / r.total)
    # The union of all categories is what pprof focuses with their alternation.
    union = "|".join(f"(?:{c.regex})" for c in GC_CATEGORIES)
    assert r.gc == shown(
        pprof.top(gc_cpu_profile, sample_index=value_index(gc_cpu_profile, pprof), focus=union)
    )
    # The samples/count type is the tick count: 10 ms per sample at the default rate.
    assert sum(x["samples"] for x in rows) * 10_000_000 == r.gc


def test_priority_order_decides_overlaps(gc_cpu_profile: Path) -> None:
    p = read_profile(gc_cpu_profile)
    default = gc_categories(p)
    # Allocation first: it swallows the assists that run inside mallocgc.
    alloc_first = (GC_CATEGORIES[-1], *GC_CATEGORIES[:-1])
    other = gc_categories(p, categories=alloc_first)
    assert other.value("allocation") == default.value("allocation", plain=True)
    assert other.value("mark_assist") == 0 < default.value("mark_assist")
    assert other.gc == default.gc  # the union does not depend on the order


def test_empty_and_non_go_profiles() -> None:
    from pyproflab.model import Profile, ValueType

    empty = Profile.empty([ValueType("samples", "count"), ValueType("cpu", "nanoseconds")])
    r = gc_categories(empty)
    assert r.total == 0 and r.gc == 0 and r.gc_share == 0.0
    assert r.rows.num_rows == len(GC_CATEGORIES)
    r = gc_categories(empty, categories=(GcCategory("x", "^main\\.", "test"),))
    assert r.rows.column("category").to_pylist() == ["x"]


def _go_cpu_corpus_files() -> list:
    if not CORPUS.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=SKIP_NO_CORPUS), id="no-corpus")]
    files = [
        "google-pprof/internal/proftest/testdata/large.cpu",
        "pyroscope/pkg/pprof/testdata/gotruncatefix/cpu_go_truncated_1.pb.gz",
        "parca/pkg/query/testdata/fib.pb.gz",
        "parca/pkg/parca/testdata/labels.pb.gz",
        "parca/pkg/query/testdata/profile-with-labels.pb.gz",  # samples/count only
        "parca/pkg/query/testdata/profile1.pb.gz",
        "pyroscope/pkg/og/convert/pprof/testdata/cpu-exemplars.pb.gz",
    ]
    return [pytest.param(CORPUS / f, id=f) for f in files if (CORPUS / f).exists()]


@pytest.mark.parametrize("path", _go_cpu_corpus_files())
def test_corpus_cpu_profiles_equal_pprof_focus(path: Path, pprof) -> None:
    assert_equal_to_pprof(path, pprof)
