"""The report's top tables are what `go tool pprof -top` prints on the merged profiles.

The CPU section and the traces section's sync profile each name the pprof
command their table equals; run on the profile `lab.merged` gives, that
command prints the same "Showing"/"Dropped" lines and the same rows (values
and percentages as pprof scales them). Before: the report trimmed no node, so
it said "Showing top 25 nodes out of N" with every node in N where pprof (and
`pyproflab top`) dropped those under 0.5% of the total first.
"""

from __future__ import annotations

import html
import re
import shlex
from pathlib import Path

import pytest
from support.browser.stores import demo_store
from support.pprof_oracle import run_pprof
from support.trace_helpers import trace_path

import pyproflab
from pyproflab.cli import main

pytestmark = pytest.mark.go


def _report(db: Path, out: Path) -> str:
    assert main(["report", "--db", str(db), "-o", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def _tables(page: str, section: str) -> list[tuple[list[str], list[str], list[list[str]]]]:
    """Each top table of ``section``: (the pprof command it names, header lines, rows)."""
    found = re.search(rf'<section id="{section}".*?</section>', page, re.S)
    assert found, f"no {section} section"
    tables = []
    for m in re.finditer(
        r"<p>As <code>(.*?)</code> on the merged profiles\.</p>"
        r'<div class="pyproflab-top"><pre>(.*?)</pre>.*?<tbody>(.*?)</tbody>',
        found.group(0),
        re.S,
    ):
        command = shlex.split(html.unescape(m.group(1)))
        header = html.unescape(m.group(2)).splitlines()
        rows = [
            [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", m.group(3))
        ]
        tables.append((command, header, rows))
    return tables


def _pprof(command: list[str], profile: Path) -> tuple[list[str], list[list[str]]]:
    """pprof's header lines (its "Showing"/"Dropped" ones) and rows, split in cells."""
    assert command[:3] == ["go", "tool", "pprof"], command
    lines = run_pprof([*command[3:], str(profile)]).splitlines()
    cut = next(i for i, line in enumerate(lines) if line.split()[:2] == ["flat", "flat%"])
    rows = [line.split(None, 5) for line in lines[cut + 1 :] if line.strip()]
    return [line for line in lines[:cut] if line.startswith(("Showing", "Dropped"))], rows


def _check(page: str, section: str, db: Path, profile_type: str, tmp: Path) -> None:
    tables = _tables(page, section)
    assert len(tables) == 1, f"{section}: {len(tables)} top tables"
    command, header, rows = tables[0]
    merged = tmp / f"{profile_type}.pb.gz"
    pyproflab.write_profile(pyproflab.open(db).merged(profile_type=profile_type), merged)
    pprof_header, pprof_rows = _pprof(command, merged)
    assert any(line.startswith("Dropped") for line in pprof_header), pprof_header
    assert [line for line in header if line.startswith(("Showing", "Dropped"))] == pprof_header
    assert rows == pprof_rows


def test_the_cpu_top_table_is_pprofs(tmp_path):
    db = demo_store()
    _check(_report(db, tmp_path / "r.html"), "top", db, "cpu", tmp_path)


def test_the_sync_top_table_is_pprofs(tmp_path):
    db = tmp_path / "t.duckdb"
    assert main(["ingest", str(trace_path("grpcstreams")), "--db", str(db)]) == 0
    _check(_report(db, tmp_path / "r.html"), "traces", db, "trace-sync", tmp_path)
