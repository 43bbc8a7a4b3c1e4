"""The project's own files keep a new user's first screen and `git status` clean.

- Installing the package raises no warning from our build configuration (the C
  extensions were declared in pyproject.toml's experimental ``ext-modules``,
  which setuptools warns about on every ``make setup``), and ``make setup``
  keeps setuptools' note about editable installs out of ``make demo``'s output.
- The HTML and executed copies of the notebooks (``jupyter nbconvert``) are
  ignored by git.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_build_configuration_raises_no_warning(tmp_path):
    """setuptools reads pyproject.toml and setup.py (the metadata step of every
    install) with every warning an error."""
    pytest.importorskip("setuptools")
    res = subprocess.run(
        [
            sys.executable,
            "-W",
            "error",
            "-c",
            "import sys, setuptools.build_meta as b; "
            "b.prepare_metadata_for_build_editable(sys.argv[1])",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Warning" not in res.stderr, res.stderr[-3000:]
    assert list(tmp_path.glob("pyproflab-*.dist-info"))


def test_make_setup_silences_setuptools_editable_note():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    (line,) = [
        ln for ln in makefile.splitlines() if "pip install --quiet -e '.[dev,notebooks,spark]" in ln
    ]
    assert re.search(r"\bPYTHONWARNINGS=ignore::UserWarning\b", line), line


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not on PATH")
@pytest.mark.parametrize(
    "path",
    ["notebooks/01_fleet_overview.html", "notebooks/02_top_regressions.nbconvert.ipynb"],
)
def test_notebook_outputs_are_ignored_by_git(path):
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    res = subprocess.run(
        ["git", "check-ignore", "--no-index", "-q", path], cwd=REPO, capture_output=True
    )
    assert res.returncode == 0, f"{path} is not ignored by .gitignore"
