"""Helpers of tests/analyses/test_gc_categories.py that other test modules use too
(cut out of it by scripts/relayout_tests.py: no test module imports another)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import pprof_oracle as oracle
from support.testenv import RECORDED_GO


@pytest.fixture(scope="session")
def gc_cpu_profile() -> Path:
    """A CPU profile of tests/goprogs/gcload (an allocation-heavy program: a live
    pointer-rich heap, GOGC=25, one churning goroutine per P), recorded once by
    tests/support/record_go_profiles.py so that every GC category has samples."""
    return RECORDED_GO / "gcload.cpu.pb.gz"


def shown(report: oracle.TopReport) -> int:
    """X of pprof's "Showing nodes accounting for X, …" (0 when nothing matched)."""
    for line in report.header:
        m = oracle._SHOWING.match(line)
        if m:
            return oracle.parse_value(m.group("shown"))[0]
    raise AssertionError(f"no 'Showing nodes' line in {report.header}")


def value_index(path: Path, pprof) -> int:
    types = pprof.sample_types(path)
    names = [t for t, _ in types]
    return names.index("cpu") if "cpu" in names else len(types) - 1
