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
        w = csv.writer(out, lineterminator="\n")
        w.writerow(cols)
        # Column by column, then one writerows: a Python step per cell cost 0.3 s
        # on the 23,000 rows of a fleet's top.
        w.writerows(zip(*(self._column(c) for c in cols), strict=True))

    def _column(self, name: str) -> list:
        values = self.result.rows.column(name).to_pylist()
        if name.endswith("_pct"):
            return [f"{v:.4f}" for v in values]
        return ["" if v is None else v for v in values]
