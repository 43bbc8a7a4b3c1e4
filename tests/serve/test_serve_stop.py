"""`pyproflab serve` stopped by SIGTERM."""

from __future__ import annotations

import subprocess
import sys

from support.testenv import REPO

_SIGTERM_ON_A_SERVER_THREAD = """
import signal, sys, threading
from pyproflab.serve.guard import Tokens
from pyproflab.serve.run import serve
from pyproflab.serve.server import Options
from pyproflab.sources.spool import Spool

main = threading.main_thread().ident

def waiting() -> bool:
    # the main thread in serve's wait for the stop: Condition.wait under an
    # Event.wait called from run.py (not under Thread.start's wait)
    f = sys._current_frames().get(main)
    chain = []
    while f is not None and len(chain) < 3:
        chain.append((f.f_code.co_filename, f.f_code.co_name))
        f = f.f_back
    return (
        len(chain) == 3
        and chain[0] == chain[1] == (threading.__file__, "wait")
        and chain[2][0].endswith("run.py")
    )

def kill_from_here() -> None:
    while not waiting():  # the main thread is asleep in its wait for the stop
        pass
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

def ready(server) -> None:
    threading.Thread(target=kill_from_here).start()

serve(Options(port=0), Spool(sys.argv[1]), Tokens(), duration=600, ready=ready)
print("stopped")
"""


def test_a_sigterm_caught_by_a_server_thread_stops_it(tmp_path):
    """The kernel may deliver a process's SIGTERM to any of its threads. Before,
    the main thread slept in one wait for the whole run and never ran Python's
    handler: such a SIGTERM was ignored until --duration (here 600 s; forever
    without one). The live SDK test hung so 2 times in about 25 runs."""
    res = subprocess.run(
        [sys.executable, "-c", _SIGTERM_ON_A_SERVER_THREAD, str(tmp_path / "spool")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (res.returncode, res.stdout) == (0, "stopped\n"), res.stderr[-2000:]
