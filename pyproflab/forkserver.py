"""The fork server that worker pools start their workers from, started early.

Rules: pools of pyproflab (``keying.prepare``: ingest; ``analyses.merge_files``:
many files) use multiprocessing's "forkserver" context, so workers inherit
neither the caller's threads nor its open stores. The server is one process per
caller, started at the first pool, and it imports its modules (``preload``) once
before it forks a worker. That start (an interpreter and numpy, pyarrow and the
decoder, about half a second) is waited for by the first file. ``start`` lets a
command begin it before its own imports, on another core, so the two overlap;
a pool started later finds it running. Light: only the standard library here.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context

#: what the server imports for ingest's workers (``keying.prepare``)
INGEST_PRELOAD = ["pyproflab.keying.prepare"]

#: below this many files ingest's pool costs more to start than it saves
#: (``keying.prepare`` reads them in its own process); here so that a command can
#: tell, before its imports, whether a pool may run at all
POOL_MIN_FILES = 8


def context(preload: list[str]) -> multiprocessing.context.ForkServerContext:
    """The forkserver context, its server to import ``preload`` (effective until
    the server has started)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(preload)
    return ctx


def start(preload: list[str]) -> None:
    """Start the server now (a no-op when it runs already)."""
    from multiprocessing import forkserver

    context(preload)
    forkserver.ensure_running()
