"""Ctrl-C while the CLI starts (numpy and pyarrow take half a second to import)
is the CLI's one line ``pyproflab: interrupted`` and exit 130, not a traceback:
the console script imports the ``pyproflab`` package before ``cli.main`` can
catch anything, so the package must not import them eagerly. The interrupt is
raised by an import hook at the heavy module's import, not sent after a delay."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROFILE = Path(__file__).resolve().parents[1] / "testdata" / "fleet_regressions" / "r15-v1-b.pb.gz"

# Loaded by site at the interpreter's start (PYTHONPATH): the first import of
# the named module raises SIGINT in the main thread, as a Ctrl-C there would.
# A command started from a terminal has SIGINT's default handling; one under a
# background job (`cmd &` in a script, as CI may run the tests) inherits it
# ignored, and Python then installs no KeyboardInterrupt: the hook gives the
# process a terminal's handling first, or the interrupt would be lost.
HOOK = """
import os, signal, sys

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

class _CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["CTRL_C_AT_IMPORT_OF"]:
            sys.meta_path.remove(self)
            signal.raise_signal(signal.SIGINT)
        return None

sys.meta_path.insert(0, _CtrlC())
"""


@pytest.mark.parametrize("module", ["numpy", "pyarrow"])
@pytest.mark.parametrize("entry", ["console script", "python -m"])
def test_ctrl_c_while_importing_is_one_line_and_exit_130(tmp_path, module, entry):
    (tmp_path / "sitecustomize.py").write_text(HOOK)
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "CTRL_C_AT_IMPORT_OF": module}
    script = Path(sys.executable).parent / "pyproflab"
    command = [str(script)] if entry == "console script" else [sys.executable, "-m", "pyproflab"]
    res = subprocess.run(
        [*command, "top", str(PROFILE)], capture_output=True, text=True, env=env, timeout=300
    )
    assert "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip() == "pyproflab: interrupted"
    assert (res.returncode, res.stdout) == (130, "")
