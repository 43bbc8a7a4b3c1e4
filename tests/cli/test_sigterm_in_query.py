"""SIGTERM while DuckDB runs a query is a SIGTERM: 'pyproflab: terminated', exit
143, as anywhere else. DuckDB checks Python's signals while it runs; the handler
raises Terminated there, DuckDB ends the query with its own interrupt
('Query interrupted') and the Terminated is lost, so the command said
'pyproflab: interrupted', exit 130, the Ctrl-C's (helper-87's kill loops: 'ingest
DATASET' SIGTERMed at 2.1-3.6 s and 'ingest-gc big.prom' at 5.1-7.7 s, 7 of 15
SIGTERMs). A scheduler reading 130 is told someone pressed Ctrl-C.

The SIGTERM is sent by a hook at a point the test controls, not after a delay:
the store's insert of the GC rows first runs a query that would take half a
minute, and a thread of the process sends SIGTERM once the main thread is inside
it (in its frames twice, 50 ms apart: waiting in DuckDB, not about to call it).
DuckDB mostly ends the query within 0.1 s (then the code before said
'interrupted'); where it checks Python's signals late and finishes the query,
Terminated is raised as it returns, which both say the same.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pyproflab.store import Store

REPO = Path(__file__).resolve().parents[2]

# Loaded by site at the interpreter's start (PYTHONPATH).
HOOK = """
import os, signal, sys, threading, time

def _long(store):
    store.con.execute("SELECT sum(range) FROM range(30000000000)").fetchall()

def _send_when_inside():
    main = threading.main_thread().ident
    seen = 0
    while seen < 2:
        frame = sys._current_frames().get(main)
        seen = seen + 1 if frame is not None and frame.f_code is _long.__code__ else 0
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)

class _Patch:
    def find_spec(self, name, path=None, target=None):
        if name == "pyproflab.store.metrics":
            sys.meta_path.remove(self)
            from pyproflab.store.connection import Store
            sql = Store.sql
            def _sql(self, query, params=None):
                if query.startswith("INSERT INTO metric_samples"):
                    threading.Thread(target=_send_when_inside, daemon=True).start()
                    with self._translate("query failed"):
                        _long(self)
                return sql(self, query, params)
            Store.sql = _sql
        return None

sys.meta_path.insert(0, _Patch())
"""


def test_sigterm_while_duckdb_runs_a_query_is_terminated(tmp_path):
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(HOOK)
    prom = tmp_path / "m.prom"
    prom.write_text("# TYPE up gauge\nup 1 1764000000000\n")
    db = tmp_path / "s.duckdb"
    Store.open(db).close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "hook"), str(REPO)])}
    res = subprocess.run(
        [sys.executable, "-m", "pyproflab", "ingest-gc", str(prom), "--format", "prom"]
        + ["--instance", "i", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=600,  # bounds a hang only
        cwd=REPO,
        env=env,
    )
    assert (res.returncode, res.stderr) == (143, "pyproflab: terminated\n")
    with Store.open(db, read_only=True) as store:
        assert store.sql("SELECT count(*) AS n FROM metric_samples").to_pylist() == [{"n": 0}]
