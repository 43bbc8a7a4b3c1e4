"""The store: profiles of a fleet in one embedded DuckDB database.

``Store`` owns the connection; ``ingest`` writes batches of profiles in one
transaction each; ``Selection`` picks profiles; ``Store.merged_profile``
merges a selection by pprof's rules in SQL.
"""

from __future__ import annotations

from pyproflab.store.connection import Store
from pyproflab.store.select import Selection

__all__ = ["Selection", "Store"]
