"""What results whose main table is per graph node have in common.

``NODE_FIELDS`` are the columns that name a node as pprof prints it (``top``
and ``regressions`` rows both carry them). ``RowsResult`` gives a result class
with a ``rows`` table its length, Arrow and pandas views and its notebook
views, so each result declares only its own fields and methods (and its
``_repr_html_``, which names the renderer registered for its own class).
"""

from __future__ import annotations

import pyarrow as pa

#: A node's name, file and line (null when the granularity drops them) and its
#: label, the name pprof prints for it.
NODE_FIELDS = (
    pa.field("name", pa.string(), nullable=False),
    pa.field("file", pa.string()),
    pa.field("line", pa.int64()),
    pa.field("label", pa.string(), nullable=False),
)


class RowsResult:
    """Mixin of a result (a dataclass) whose main table is ``rows``.

    Rule: ``len(result)`` is its number of rows, ``to_arrow()`` the table
    itself, ``to_pandas()`` a DataFrame of it.
    """

    rows: pa.Table

    def __len__(self) -> int:
        return self.rows.num_rows

    def to_arrow(self) -> pa.Table:
        return self.rows

    def to_pandas(self):
        return self.rows.to_pandas()
