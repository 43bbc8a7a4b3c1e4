"""A store file a command creates, and the rule for leaving it behind: only
when it holds data (ingest, ingest-gc, pull and collect share it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def removed_if_empty(db: str) -> Iterator[None]:
    """Run the block; when it created the store file ``db`` and leaves it holding
    no data (``store.queries.holds_data``), delete it and its WAL. A failed,
    refused or empty command then leaves no store behind, whatever it raised; a
    store that existed before is never touched."""
    created = not Path(db).exists()
    try:
        yield
    finally:
        if created and Path(db).exists() and not _holds_data(db):
            for path in (db, db + ".wal"):
                Path(path).unlink(missing_ok=True)


def _holds_data(db: str) -> bool:
    """Whether the store file ``db`` holds data; True when it cannot be read (a
    damaged or busy store is kept: it is the error to show, not this question's)."""
    from pyproflab.store import Store
    from pyproflab.store.queries import holds_data

    try:
        with Store.open(db, read_only=True) as store:
            return holds_data(store)
    except Exception:
        return True
