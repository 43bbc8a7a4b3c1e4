"""Notebook 05 on a store that holds traces (test_notebooks runs it on the demo
store, which has none, so it reads the recordings into memory): every section
answers from the store's own traces of the selected service. The CPU-limit
story's two runs (with their cgroup's throttling counters) and the GC-heavy
program are stored as instances of one service; the notebook draws both
blocking flame graphs, names the starved instance alone (with its throttled
periods), charts scheduler latency for each instance, and shows the GC-heavy
one's stop-the-world pauses."""

from __future__ import annotations

import json

import pytest
from support.notebooks_helpers import _outputs, run_notebook
from support.trace_helpers import TRACES, cpulimit_store

import pyproflab

pytestmark = pytest.mark.go


def test_notebook_05_answers_from_the_stores_traces(tmp_path):
    db = tmp_path / "s.duckdb"
    cpulimit_store(db).close()
    with pyproflab.open(str(db)) as lab:
        lab.ingest(str(TRACES / "gcheavy.trace"), service="cpulimit", instance="gc")
    work = tmp_path / "work"
    work.mkdir()
    # TRACES names nothing: reading the recordings instead of the store fails.
    nb = run_notebook("05_traces", db, work, SERVICE="cpulimit", TRACES=str(tmp_path / "none"))
    assert sorted(p.name for p in work.iterdir()) == []
    html = "\n".join(_outputs(nb, "text/html"))
    assert html.count('class="pyproflab-flame"') == 2
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    starved = [line for line in printed.splitlines() if line.startswith("CPU starvation")]
    assert len(starved) == 1 and starved[0].startswith("CPU starvation on quota:")
    assert starved[0].endswith("throttled in 25 of 27 CFS periods")
    sched, stw = (json.loads(f) for f in _outputs(nb, "application/vnd.plotly.v1+json"))
    assert sorted(t["name"] for t in sched["data"]) == ["free", "gc", "quota"]
    bars = {t["name"]: t for t in stw["data"] if t["type"] == "bar"}
    assert set(bars) == {"free STW ms", "gc STW ms", "quota STW ms"}
    assert sum(_values(bars["gc STW ms"]["y"])) > 0


def _values(y) -> list[float]:
    """A plotly trace's y values, as plotly's JSON writes them (a list, or a typed
    array: base64 bytes with their dtype)."""
    if isinstance(y, dict):
        import base64

        import numpy as np

        return np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"]).tolist()
    return list(y)
