"""SIGKILL a job at random moments, at least 20 times; nothing may be lost or half-done.

Each round starts ``pyproflab job run`` on a drop folder of 30 small profiles
(batches of 3, so ingest is ten transactions, then regressions and PGO) and
kills it after a random delay drawn over the length of a whole run. After
every kill:

- the store opens read-write (the dead job's lock is taken over);
- no partial profile: every stored profile has ``num_samples`` rows in
  ``samples`` and per-type totals equal to its source file's;
- no duplicate: content hashes and sources are unique, and no fingerprint
  has two runs;
- outputs are old or new, never truncated: every visible file and stable
  name parses (JSON, pprof) completely.

When a round's job finishes before its kill, the state starts afresh, so
kills keep landing in ingest as well as in analysis. At the end a full run
completes the work and a second run changes nothing.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.jobs_helpers import REPO, make_drop, output_state, write_job

KILLS = int(os.environ.get("PYPROFLAB_KILLS", "24"))
N_PER_VERSION = 15


def start_job(job: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pyproflab", "job", "run", str(job)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def source_totals(paths: list[Path]) -> dict[str, list[int]]:
    from pyproflab import read_profile

    out = {}
    for p in paths:
        prof = read_profile(p)
        out[os.path.abspath(p)] = [prof.total(i) for i in range(len(prof.sample_types))]
    return out


def check_store(db: Path, totals: dict[str, list[int]]) -> tuple[int, bool, object]:
    """Assert the invariants; return (profiles stored, a run unfinished, stale lock record)."""
    from pyproflab.store import Store

    with Store.open(db) as s:  # read-write: must take over the dead job's lock
        stale = s.lock.took_over
        rows = s.sql("""
            SELECT p.profile_id, p.source, p.num_samples, p.content_hash,
                   (SELECT count(*) FROM samples x WHERE x.profile_id = p.profile_id) AS n,
                   (SELECT list(t ORDER BY i) FROM (
                        SELECT i, sum(x."values"[i]) AS t
                        FROM samples x, range(1, len(p.sample_types) + 1) r(i)
                        WHERE x.profile_id = p.profile_id GROUP BY i)) AS totals
            FROM profiles p""").to_pylist()
        for r in rows:
            assert r["n"] == r["num_samples"], f"partial profile {r}"
            assert [int(t) for t in (r["totals"] or [])] == totals[r["source"]], r["source"]
        assert len({r["content_hash"] for r in rows}) == len(rows)
        assert len({r["source"] for r in rows}) == len(rows)
        tables = set(s.sql("SELECT table_name FROM duckdb_tables()").column(0).to_pylist())
        unfinished = False
        if "job_runs" in tables:
            dup = s.sql("SELECT fingerprint FROM job_runs GROUP BY 1 HAVING count(*) > 1")
            assert dup.num_rows == 0, "two runs of one input"
            unfinished = (
                s.sql("SELECT count(*) FROM job_runs WHERE finished_at IS NULL")
                .column(0)[0]
                .as_py()
                > 0
            )
        # Every sample points at stored stacks (no half-written dedup rows either).
        orphans = s.sql("SELECT count(*) FROM samples x ANTI JOIN stacks USING (stack_id)")
        assert orphans.column(0)[0].as_py() == 0
    return len(rows), unfinished, stale


def check_outputs(out: Path) -> int:
    """Every visible output parses completely; returns how many files were checked."""
    from pyproflab import read_profile

    if not out.is_dir():
        return 0
    n = 0
    for p in out.iterdir():
        if p.name.startswith("."):
            continue  # a killed run's temp file: never a published name
        assert p.exists(), f"{p.name} points at a missing file"
        if p.suffix == ".json":
            json.loads(p.read_text(encoding="utf-8"))
        elif p.suffix == ".pgo":
            assert read_profile(p).samples.num_rows > 0
        else:
            text = p.read_text(encoding="utf-8")
            assert text.endswith("\n"), f"{p.name} is truncated"
        n += 1
    return n


def test_kill_loop(go_profiles, tmp_path):
    rng = random.Random(int(os.environ.get("PYPROFLAB_KILL_SEED", "7")))
    drop = tmp_path / "drop"
    paths = make_drop(go_profiles["cpu"], drop, n=N_PER_VERSION)
    totals = source_totals(paths)

    def fresh(k: int) -> tuple[Path, Path, Path]:
        d = tmp_path / f"state{k}"
        d.mkdir()
        db, out = d / "fleet.duckdb", d / "out"
        return (
            db,
            out,
            write_job(d / "job.toml", drop=drop, store=db, output=out, batch_size=3, resamples=200),
        )

    # How long a whole run takes here: kills are spread over it.
    db, out, job = fresh(0)
    t = time.monotonic()
    p = start_job(job)
    _, err = p.communicate(timeout=120)
    whole = time.monotonic() - t
    assert p.returncode == 1, err
    assert check_store(db, totals)[0] == len(paths)

    kills = completed = takeovers = 0
    phases = {"before ingest": 0, "ingest": 0, "analysis": 0}
    state = 1
    db, out, job = fresh(state)
    while kills < KILLS:
        p = start_job(job)
        time.sleep(rng.uniform(0.3, whole * 1.05))
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.communicate()
            kills += 1
            stored, unfinished, stale = check_store(db, totals)
            phase = (
                "before ingest" if stored == 0 else "ingest" if stored < len(paths) else "analysis"
            )
            phases[phase] += 1
            takeovers += stale is not None  # the killed job held the lock
            check_outputs(out)
        else:
            _, err = p.communicate()
            assert p.returncode == 1, err
            completed += 1
            assert check_store(db, totals)[0] == len(paths)
            check_outputs(out)
            state += 1
            db, out, job = fresh(state)  # so later kills land in ingest again

    # The last state: a run completes the work, a second one changes nothing.
    p = start_job(job)
    stdout, err = p.communicate(timeout=120)
    assert p.returncode == 1, err
    stored, unfinished, _ = check_store(db, totals)
    assert stored == len(paths) and not unfinished
    assert check_outputs(out) > 0
    before = output_state(out)
    p = start_job(job)
    stdout, err = p.communicate(timeout=120)
    assert p.returncode == 1 and "unchanged since run" in stdout, err
    assert output_state(out) == before
    print(
        f"\nkill loop: {kills} kills survived ({phases}), {takeovers} stale locks taken "
        f"over, {completed} runs completed "
        f"before their kill; a whole run takes {whole:.1f} s"
    )
    assert kills >= 20
    assert phases["ingest"] > 0 and phases["analysis"] > 0 and takeovers > 0
