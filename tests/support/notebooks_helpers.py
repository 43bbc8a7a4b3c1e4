"""Helpers of tests/test_notebooks.py that other test modules use too
(cut out of it by scripts/relayout_tests.py: no test module imports another)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")


nbclient = pytest.importorskip("nbclient")


NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _read(name: str):
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)


def _inject(nb, params: dict) -> None:
    """Add a cell after the parameters cell, as papermill does."""
    src = "# Parameters injected by the test\n" + "".join(
        f"{k} = {v!r}\n" for k, v in params.items()
    )
    cell = nbformat.v4.new_code_cell(src)
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(1, cell)


def run_notebook(name: str, store: Path, workdir: Path, *, timeout: int = 240, **extra) -> object:
    """Execute one notebook on ``store`` in ``workdir`` (``timeout``: seconds per
    cell); returns the executed notebook."""
    nb = _read(name)
    _inject(nb, {"STORE": str(store), "SERVICE": "notesd", **extra})
    client = nbclient.NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    )
    client.execute()
    return nb


def _outputs(nb, mime: str) -> list[str]:
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if mime in data:
                v = data[mime]
                out.append(v if isinstance(v, str) else json.dumps(v))
    return out
