"""Helpers of tests/store/test_hostile_faults.py that other test modules use too
(cut out of it by scripts/relayout_tests.py: no test module imports another)."""

from __future__ import annotations

import duckdb

from pyproflab.store.connection import Store as StoreClass


class _Fault:
    """Make the k-th statement run by a store fail as a full disk would."""

    def __init__(self, k: int):
        self.k, self.calls, self.fired = k, 0, False

    def install(self, monkeypatch) -> None:
        real = StoreClass._run
        fault = self

        def run(store, query, params=None):
            fault.calls += 1
            if fault.calls == fault.k:
                fault.fired = True
                raise duckdb.IOException("No space left on device")
            return real(store, query, params)

        monkeypatch.setattr(StoreClass, "_run", run)
