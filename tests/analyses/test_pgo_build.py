"""Acceptance: a default.pgo written by pyproflab from real CPU profiles of the
demo service (tests/fleet cmd/notesd) under load, recorded once, makes `go build -pgo`
devirtualize and inline hot call sites; `-pgo=off` does neither.

What prints the compiler's PGO decisions in Go 1.26: `-gcflags=-m` prints
"PGO devirtualizing interface call X to Y"; `-d=pgodebug=1` prints
"hot-budget check allows inlining for call …" for every hot-callsite inline.
The first -pgo build recompiles the standard library with the profile (about
a minute and a half, then cached in the default GOCACHE).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from support.testenv import RECORDED_GO

from pyproflab.analyses import pgo as pgo_mod

FLEET = Path(__file__).resolve().parents[1] / "fleet"
PLANTED = re.compile(
    r"score\.go:\d+:\d+: PGO devirtualizing interface call sc\.Score to "
    r"(main\.)?termScorer\.Score"
)
DEVIRT = re.compile(r"PGO devirtualizing interface call")
HOT_INLINE = re.compile(r"hot-budget check allows inlining for call")


def _go_build(go: str, out: Path, pgo: str) -> tuple[str, float]:
    env = dict(os.environ, GOTOOLCHAIN="local", GOWORK="off", GOFLAGS="")
    env.setdefault("GOPROXY", "off")
    t = time.perf_counter()
    res = subprocess.run(
        [go, "build", "-o", str(out), f"-pgo={pgo}", "-gcflags=-m -d=pgodebug=1", "./cmd/notesd"],
        cwd=FLEET,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, f"go build -pgo={pgo} failed:\n{res.stderr[-3000:]}"
    return res.stdout + res.stderr, time.perf_counter() - t


@pytest.fixture(scope="module")
def fleet_profiles() -> list[Path]:
    """Two 5 s CPU profiles of one notesd v1 instance under loadgen's request mix,
    recorded once by tests/support/record_go_profiles.py (--only notesd): whether a live
    10 s sample holds the planted edge is chance, a recorded one is not."""
    return [RECORDED_GO / name for name in ("notesd-cpu0.pb.gz", "notesd-cpu1.pb.gz")]


def test_pgo_build_devirtualizes_and_inlines(go_bin, fleet_profiles, tmp_path):
    res = pgo_mod.pgo_files(fleet_profiles)
    assert res.ok, res.refusal
    profile = res.write(tmp_path / "default.pgo")
    assert res.verified is not None and res.verified.weights() == res.edges.weights()
    assert len(res.edges.hot) > 10

    on, _ = _go_build(go_bin, tmp_path / "notesd-pgo", str(profile))
    off, _ = _go_build(go_bin, tmp_path / "notesd-nopgo", "off")
    assert DEVIRT.search(on), on[-3000:]
    assert HOT_INLINE.search(on), on[-3000:]
    assert not DEVIRT.search(off) and not HOT_INLINE.search(off)

    # The planted call site: rank calls Scorer.Score, ~98% termScorer. The
    # compiler weighs only the edge between a sample's leaf and its caller;
    # termScorer.Score has work of its own (its lead-word bonus), so CPU
    # profiles under load hold the rank -> termScorer.Score edge.
    edge = [
        e
        for e in res.edges.edges
        if e.caller == "main.(*ranker).rank" and e.callee == "main.termScorer.Score"
    ]
    assert edge, "the profiles hold no main.(*ranker).rank -> main.termScorer.Score edge"
    assert PLANTED.search(on), "planted sc.Score not devirtualized despite the edge"
    assert not PLANTED.search(off)
    print(
        f"\n-pgo=default.pgo: {_line(on, PLANTED)}\n  {_line(on, HOT_INLINE)}\n"
        f"  {len(DEVIRT.findall(on))} devirtualized calls, "
        f"{len(HOT_INLINE.findall(on))} hot-budget inlines, {len(res.edges.hot)} hot edges; "
        f"-pgo=off: {len(DEVIRT.findall(off))} and {len(HOT_INLINE.findall(off))}"
    )


def _line(text: str, pattern: re.Pattern) -> str:
    """The whole line of ``text`` where ``pattern`` first matches."""
    m = pattern.search(text)
    return text[text.rfind("\n", 0, m.start()) + 1 : text.find("\n", m.end())].strip()
