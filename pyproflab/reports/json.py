"""JSON: the rows with exact integers, plus the header facts; keys sorted."""

from __future__ import annotations

import json
from typing import IO

from pyproflab.reports.base import Reporter


def top_document(result) -> dict:
    """The JSON-ready content of a ``TopResult``."""
    return {
        "sample_type": {"type": result.sample_type.type, "unit": result.sample_type.unit},
        "sample_index": result.sample_index,
        "sample_types": [{"type": t.type, "unit": t.unit} for t in result.sample_types],
        "total": result.total,
        "shown_total": result.shown_total,
        "granularity": result.granularity,
        "nodecount": result.nodecount,
        "node_count_before": result.node_count_before,
        "dropped_nodes": result.dropped_nodes,
        "cum_sort": result.cum_sort,
        "focus": result.focus,
        "ignore": result.ignore,
        "file": result.file,
        "build_id": result.build_id,
        "comments": list(result.comments),
        "doc_url": result.doc_url,
        "time_nanos": result.time_nanos,
        "duration_nanos": result.duration_nanos,
        "rows": result.rows.to_pylist(),
    }


class JsonReporter(Reporter):
    def render(self, out: IO[str]) -> None:
        json.dump(top_document(self.result), out, sort_keys=True, indent=1, ensure_ascii=False)
        out.write("\n")
