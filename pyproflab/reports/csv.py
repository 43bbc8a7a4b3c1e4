"""CSV: ``flat,flat_pct,sum_pct,cum,cum_pct,name`` (plus ``file,line`` at lines
granularity), then ``label,inline`` (pprof's printed node name and its marker, so
a row can be matched to pprof's); exact integers in the sample type's unit."""

from __future__ import annotations

import csv
from typing import IO

from pyproflab.reports.base import Reporter

COLUMNS = ["flat", "flat_pct", "sum_pct", "cum", "cum_pct", "name"]


def csv_columns(result) -> list[str]:
    extra = ["file", "line"] if result.granularity == "lines" else []
    return COLUMNS + extra + ["label", "inline"]


class CsvReporter(Reporter):
    def render(self, out: IO[str]) -> None:
        cols = csv_columns(self.result)
        data = {c: self.result.rows.column(c).to_pylist() for c in cols}
        w = csv.writer(out, lineterminator="\n")
        w.writerow(cols)
        for i in range(self.result.rows.num_rows):
            row = []
            for c in cols:
                v = data[c][i]
                if c.endswith("_pct"):
                    v = f"{v:.4f}"
                row.append("" if v is None else v)
            w.writerow(row)
