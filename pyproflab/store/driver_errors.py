"""DuckDB's errors as the store reports them, translated once at its boundary.

Rules: an error from the file itself (a damaged block's checksum, a failed read or
write, the state such an error leaves) is ``StoreIOError``, any other DuckDB error
``StoreError``, each one line naming the store; DuckDB's report of Ctrl-C is
neither (``interrupted``): the caller raises KeyboardInterrupt.
"""

from __future__ import annotations

import re

import duckdb

from pyproflab.errors import StoreError, StoreIOError


def first_line(e: BaseException) -> str:
    """The first line of an error's message (its class name when it has none)."""
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def interrupted(e: BaseException) -> bool:
    """Whether ``e`` is DuckDB's report of Ctrl-C: while a query runs DuckDB takes
    SIGINT itself and ends the query with InterruptException (RuntimeError 'Query
    interrupted' when it was fetching rows), so Python never sees KeyboardInterrupt."""
    if isinstance(e, duckdb.InterruptException):
        return True
    return type(e) is RuntimeError and str(e).startswith("Query interrupted")


# DuckDB's errors from the file itself: a damaged block's checksum, a failed
# read or write (a full disk), or the state such an error leaves behind.
_IO_ERRORS = (duckdb.IOException, duckdb.InternalException, duckdb.FatalException)


# After a fatal error (a checkpoint's write failing on a full disk) DuckDB refuses
# every statement with this line and the first error on a line of its own.
_INVALIDATED = "database has been invalidated because of a previous fatal error"
_ORIGINAL = re.compile(r'^Original error: "(.*)"$', re.MULTILINE)


# A spill that finds no room says "Out of Memory" on its first line; the lines
# after it name the limit, which is by default the free space of the disk.
_SPILL_LIMIT = "max_temp_directory_size"
_FREE_SPACE = "by default the free space on its disk"


def store_error(name: str, what: str, e: duckdb.Error) -> StoreError:
    """DuckDB's error as one line naming the store: ``StoreIOError`` when it
    comes from the file (a checksum, an I/O error), else ``StoreError``. A
    statement refused because an earlier one was fatal says the earlier error:
    the refusal came from a cleanup (``SET threads``) and hid the full disk. A
    spill to disk that found no room (an "Out of Memory" error) names the spill
    folder and is a ``StoreIOError``."""
    msg = first_line(e)
    original = _ORIGINAL.search(str(e)) if _INVALIDATED in msg else None
    if original:
        msg = f"FATAL Error: {original.group(1)}"
    spill = _SPILL_LIMIT in str(e)
    if spill:
        msg += f" ({name}.tmp, DuckDB's spill folder, is at {_SPILL_LIMIT}: {_FREE_SPACE})"
    damaged = isinstance(e, _IO_ERRORS) or spill or "checksum" in msg or "Corrupt" in msg
    return (StoreIOError if damaged else StoreError)(f"{name}: {what}: {msg}")


def duckdb_holder(name: str, read_only: bool) -> str:
    """What the process holding DuckDB's lock on ``name`` (not through a Store,
    whose lock file says more) does with it. A reader is kept out by a writer
    only; a writer by readers or by a writer (a notebook's ``duckdb.connect(path)``,
    the DuckDB CLI): readers share the lock, so the file opens read-only
    exactly when they are the holders."""
    if read_only:
        return "open for writing"
    try:
        duckdb.connect(name, read_only=True).close()
    except duckdb.Error:
        return "open for writing"
    return "open by a reader"
