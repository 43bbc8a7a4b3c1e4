"""Ctrl-C while the interpreter shuts down, after the command finished (``pyproflab
top ...`` interrupted at its very end): it exited -2 with an empty stderr (a
SIGINT past the interpreter's last Python code takes the default action), or 0
after an "Exception ignored in atexit callback" traceback. During the cleanups
it is now one line and exit 130; past them it is ignored, and the exit is the
command's. The interrupt is sent by hooks at points the test controls, not
after a delay: an atexit callback registered after the CLI's (so it runs
before its last), and an object whose ``__del__`` runs as modules are torn down."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROFILE = Path(__file__).resolve().parents[1] / "testdata" / "fleet_regressions" / "r15-v1-b.pb.gz"

# Loaded by site at the interpreter's start (PYTHONPATH). A process started
# with SIGINT ignored (a background job) gets a terminal's handling first, as
# in test_interrupt_at_start.py.
HOOK = """
import atexit, os, signal, sys

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

def ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)

class _AtExit:  # registers ctrl_c once the CLI has registered its own callback
    def find_spec(self, name, path=None, target=None):
        if name == "pyproflab.cli.top":
            sys.meta_path.remove(self)
            atexit.register(ctrl_c)
        return None

class _Late:  # collected as this module is torn down, after every atexit callback
    def __del__(self):
        ctrl_c()

if os.environ["CTRL_C_AT"] == "atexit":
    sys.meta_path.insert(0, _AtExit())
else:
    late = _Late()
"""


def _top(env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    script = Path(sys.executable).parent / "pyproflab"
    return subprocess.run(
        [str(script), "top", str(PROFILE), "--nodecount", "3"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("when", "code", "line"),
    [
        ("atexit", 130, "pyproflab: interrupted while exiting (the command had finished)\n"),
        ("teardown", 0, ""),
    ],
)
def test_ctrl_c_at_exit_is_one_line_and_130_or_ignored(tmp_path, when, code, line):
    (tmp_path / "sitecustomize.py").write_text(HOOK)
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    res = _top({**os.environ, "PYTHONPATH": path, "CTRL_C_AT": when})
    assert (res.returncode, res.stderr) == (code, line)
    assert res.stdout == _top().stdout != ""  # the command's output, whole
