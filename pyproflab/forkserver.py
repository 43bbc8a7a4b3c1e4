"""The fork server that worker pools start their workers from, started early.

Rules: pools of pyproflab (``keying.prepare``: ingest; ``analyses.merge_files``:
many files) use multiprocessing's "forkserver" context, so workers inherit
neither the caller's threads nor its open stores. The server is one process per
caller, started at the first pool, and it imports its modules (``preload``) once
before it forks a worker. That start (an interpreter and numpy, pyarrow and the
decoder, about half a second) is waited for by the first file. ``start`` lets a
command begin it before its own imports, on another core, so the two overlap;
a pool started later finds it running. Workers run pyproflab's own functions
only, so they are started without the caller's main module: multiprocessing
would run a script's top level again in each (a script without ``if __name__
== "__main__"``, as docs/python.md's calls are written, re-ran its own ingest
there). Light: only the standard library here.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import sys
import types

#: what the server imports for ingest's workers (``keying.prepare``)
INGEST_PRELOAD = ["pyproflab.keying.prepare"]

#: below this many files ingest's pool costs more to start than it saves
#: (``keying.prepare`` reads them in its own process); here so that a command can
#: tell, before its imports, whether a pool may run at all
POOL_MIN_FILES = 8


class _Process(multiprocessing.context.ForkServerProcess):
    """A forkserver worker that is not told the caller's main module."""

    @staticmethod
    def _Popen(process_obj):  # noqa: N802 (multiprocessing's name)
        # The main module's file or name goes to a new worker in its preparation
        # data, read from sys.modules at its start; a bare module there has neither.
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            return multiprocessing.context.ForkServerProcess._Popen(process_obj)
        finally:
            sys.modules["__main__"] = main


class _Context(multiprocessing.context.ForkServerContext):
    Process = _Process


_CONTEXT = _Context()


def context(preload: list[str]) -> multiprocessing.context.ForkServerContext:
    """The forkserver context, its server to import ``preload`` (effective until
    the server has started); its workers start without the caller's main module."""
    _CONTEXT.set_forkserver_preload(preload)
    return _CONTEXT


def start(preload: list[str]) -> None:
    """Start the server now (a no-op when it runs already)."""
    from multiprocessing import forkserver

    context(preload)
    forkserver.ensure_running()
