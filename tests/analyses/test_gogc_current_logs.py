"""The current setting from gctrace logs without absolute times (``current``
rules): gctrace's ``@Ns`` counts from each process's start, so a log's runs are
ordered by the log and different logs not at all."""

from __future__ import annotations

from pathlib import Path

from pyproflab.analyses import gogc as model

GC = Path(__file__).resolve().parents[1] / "testdata" / "gc"
RESTART = GC / "runs" / "restart.log"  # GOGC=100, then a restart at GOGC=400 (restart.truth)


def _observe(*paths: Path) -> model.Observation:
    return model.observe(cycles=model.read_gctrace_files([str(p) for p in paths]))


def test_a_logs_last_run_is_its_current_setting() -> None:
    """Before: restart.log's two runs were compared by their own seconds, "the 2
    latest runs, side by side", and GOGC=100 (the first run) was current, so
    ``--budget 1.5x`` was of GOGC=100's peak."""
    obs = _observe(RESTART)
    assert obs.current == (400.0, None)
    assert not any("side by side" in n for n in obs.notes), obs.notes
    res = model.advise(obs, model.GogcOptions.parse(budget="1.5x"))
    assert res.current["gogc"] == 400.0
    assert res.budget_bytes == 1.5 * res.current["peak_memory"]


def test_the_eleventh_run_of_a_log_comes_after_its_tenth(tmp_path: Path) -> None:
    """Runs were sorted by their numbers as text (run 10 before run 2), so the
    log's last run was not the last one."""
    text = RESTART.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(text) if i and line.startswith("gc 1 "))
    first, second = text[:cut], text[cut:]
    log = tmp_path / "eleven.log"
    log.write_text("".join((first + second) * 5 + second))  # 11 runs, the 9th at 100
    assert _observe(log).current == (400.0, None)


def test_logs_without_times_say_they_cannot_be_ordered() -> None:
    """Two logs at different settings (h70svc's GOGC=100 and 200 runs, as if from
    different days): before, the note said they ran "side by side"."""
    logs = [GC / "h70svc" / f"gogc{g}" / "r1" / "gctrace.log" for g in (100, 200)]
    obs = _observe(*logs)
    note = next(n for n in obs.notes if "last runs ran 2 settings" in n)
    assert "side by side or days apart" in note and "--gogc" in note
    assert not any("latest runs, side by side" in n for n in obs.notes)


def test_a_derived_observations_note_replaces_its_sources() -> None:
    """gctrace with Prometheus beside it recomputes the current setting over other
    weights; a make demo store's gogc then printed two notes, "GOGC=200 ... is taken
    as the current setting" and "GOGC=50 ... is taken as the current setting"."""
    from pyproflab.analyses.gogc.current import latest_setting

    def run(k: int, gogc: float, w: float) -> list[dict]:
        return [{"run": k, "taken": t, "setting": (gogc, None), "w": w} for t in (0.0, 60.0)]

    notes: list[str] = []
    assert latest_setting(run(0, 50.0, 2.0) + run(1, 200.0, 1.0), notes) == (50.0, None)
    derived = run(0, 50.0, 1.0) + run(1, 200.0, 2.0)
    assert latest_setting(derived, notes) == (200.0, None)
    (note,) = [n for n in notes if "is taken as the current setting" in n]
    assert "GOGC=200, the one with the most weight" in note
    assert latest_setting(run(1, 200.0, 1.0), notes) == (200.0, None)
    assert not [n for n in notes if "is taken as the current setting" in n]
