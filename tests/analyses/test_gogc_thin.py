"""A long gctrace log is thinned before it is modelled (issue 35, finding 7:
`gogc --gctrace` of 2,000,000 cycles took 447 s and 4.0 GB): blocks of
consecutive cycles spread over each run, so the model sees the same settings,
rates and heaps as on the whole log. Time and memory: `python -m bench --only
gc-inputs`."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from pyproflab.analyses.gogc.inputs import observe, read_gctrace_files
from pyproflab.analyses.gogc.samples import from_gctrace
from pyproflab.analyses.gogc.thin import BLOCK, PER_RUN, thin_cycles
from pyproflab.sources.gctrace import read_gctrace

RUNS, CYCLES = 3, 12_000
LINE = (
    "gc {n} @{s:.3f}s 4%: 0.021+1.2+0.034 ms clock, 0.085+0.31/1.1/2.0+0.13 ms cpu, "
    "{a}->{b}->{live} MB, {goal} MB goal, 0 MB stacks, 0 MB globals, 4 P\n"
)


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    """3 runs of 12,000 cycles at 12 a second; the second run sets GOGC=200
    halfway (goal 3x the live heap instead of 2x)."""
    path = tmp_path_factory.mktemp("thin") / "gc.log"
    with open(path, "w") as f:
        for run in range(RUNS):
            for n in range(1, CYCLES + 1):
                live = 30 + (n // 700 + run) % 5  # changes slowly, as a heap does
                high = run == 1 and n > CYCLES // 2
                goal = live * 3 if high else live * 2
                f.write(LINE.format(n=n, s=n / 12, a=goal - 4, b=goal - 1, live=live, goal=goal))
    return path


def _settings(obs) -> dict:
    return {k[0]: len(v) for k, v in obs.settings.items()}


def test_a_long_log_is_thinned_as_read(log) -> None:
    t = read_gctrace_files([str(log)])
    assert t.num_rows <= RUNS * PER_RUN
    assert sorted(set(t.column("run").to_pylist())) == [1, 2, 3]
    # Whole blocks of consecutive cycles.
    nums = t.filter(pc.equal(t.column("run"), 1)).column("gc_num").to_pylist()
    assert nums[:BLOCK] == list(range(1, BLOCK + 1))
    obs = observe(cycles=t)
    assert any(n.startswith(f"gctrace: modelled on {t.num_rows:,} of 36,000") for n in obs.notes)


def test_the_thinned_log_gives_what_the_whole_one_gives(log) -> None:
    whole = read_gctrace(log)
    full, thin = from_gctrace(whole), from_gctrace(thin_cycles(whole))
    assert set(_settings(full)) == set(_settings(thin)) == {100.0, 200.0}
    for k, v in full.settings.items():
        w = thin.settings[k]
        for key in ("n", "marked", "goal"):
            a = sum(s[key] for s in v) / len(v)
            b = sum(s[key] for s in w) / len(w)
            assert b == pytest.approx(a, rel=0.01), (k, key)


def test_a_short_log_is_kept_whole(log, tmp_path) -> None:
    short = tmp_path / "short.log"
    short.write_text("".join(open(log).readlines()[:PER_RUN]))
    t = read_gctrace_files([str(short)])
    assert t.num_rows == PER_RUN
    assert not any(n.startswith("gctrace: modelled on") for n in observe(cycles=t).notes)
