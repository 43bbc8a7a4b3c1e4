"""The GOGC model on the GC data of a Go older than 1.21, whose runtime/metrics
(and so client_golang's /metrics) have no ``/gc/gogc:percent`` nor
``/gc/gomemlimit:bytes``: the setting comes from gctrace's heap goals, not
from a GOGC of 100 assumed for the missing metric. The data are the recorded
graph workload at GOGC=200 (tests/testdata/gc/work), its snapshots less those
two metrics, as such a runtime exposes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyproflab.cli import main

RUN = Path(__file__).resolve().parents[1] / "testdata" / "gc" / "work" / "graph" / "gogc200" / "r1"
NEW_IN_GO_121 = ("go_gc_gogc_percent", "go_gc_gomemlimit_bytes")


def _old_go_snapshots(tmp: Path) -> list[str]:
    out = []
    for snap in sorted(RUN.glob("snap-*.prom")):
        lines = snap.read_text().splitlines(keepends=True)
        kept = [ln for ln in lines if not any(m in ln for m in NEW_IN_GO_121)]
        assert len(kept) < len(lines), f"{snap} holds no {NEW_IN_GO_121}"
        (tmp / snap.name).write_text("".join(kept))
        out.append(str(tmp / snap.name))
    return out


def test_store_without_gogc_metric_keeps_gctrace_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "s.duckdb")
    key = ["--db", db, "--service", "graph", "--instance", "i1"]
    log = str(RUN / "gctrace.log")
    assert main(["ingest-gc", log, "--format", "gctrace", *key]) == 0
    assert main(["ingest-gc", *_old_go_snapshots(tmp_path), "--format", "prom", *key]) == 0
    capsys.readouterr()
    assert main(["gogc", *key[:2], "--format", "json"]) == 0
    obs = json.loads(capsys.readouterr().out)["observed"]
    assert obs["current"]["gogc"] == 200
    assert [s["gogc"] for s in obs["settings"]] == [200]
    assert "go_gc_gogc_percent" not in obs["provenance"]["GOGC"]
    # Prometheus still serves the process's CPU for the gctrace setting.
    assert "prometheus" in obs["provenance"]["mutator CPU"]
    assert obs["settings"][0]["figures"]["process_cores"] > 0


def test_metrics_alone_without_gogc_metric_say_what_they_assume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gogc", "--metrics", *_old_go_snapshots(tmp_path), "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["observed"]["current"]["gogc"] == 100
    assert "not exported" in got["observed"]["provenance"]["GOGC"]
    assert any("go_gc_gogc_percent not exported" in n for n in got["notes"])


def test_gc_window_names_a_metric_the_scrapes_lack(tmp_path: Path) -> None:
    """Go 1.21 exports no /sched/pauses/total/gc:seconds (Go 1.22 added it):
    the note says the scrapes lack it and since when Go has it, not that the
    window had no samples (a notesd of go1.21.13 read "no samples in the
    window" for a window holding two scrapes)."""
    from datetime import UTC, datetime

    import pyarrow as pa

    from pyproflab.analyses.gc_windows import M_PAUSES, Notes, window_metrics
    from pyproflab.store import Store

    snaps = tmp_path / "snaps"
    snaps.mkdir()
    for snap in sorted(RUN.glob("snap-*.prom")):
        kept = [ln for ln in snap.read_text().splitlines(keepends=True) if M_PAUSES not in ln]
        (snaps / snap.name).write_text("".join(kept))
    db = tmp_path / "w.duckdb"
    key = ["--db", str(db), "--service", "graph", "--instance", "i1"]
    assert main(["ingest-gc", *map(str, sorted(snaps.iterdir())), "--format", "prom", *key]) == 0
    ts = pa.timestamp("us", tz="UTC")
    windows = pa.table(
        {
            "key": [1],
            "service": ["graph"],
            "instance": ["i1"],
            "w_start": pa.array([datetime(2000, 1, 1, tzinfo=UTC)], ts),
            "w_end": pa.array([datetime(2100, 1, 1, tzinfo=UTC)], ts),
        }
    )
    notes = Notes()
    with Store.open(db) as store:
        vals = window_metrics(store, windows, {"metric_samples"}, notes)[1]
    assert vals["scrapes"] == 3 and vals["gc_cycles"] and vals["stw_pause_p99_seconds"] is None
    text = "\n".join(notes.lines())
    assert f"{M_PAUSES}_sum: not in the window's scrapes" in text
    assert "Go 1.22" in text and "no samples in the window" not in text
