"""Reading ahead: a source's batches made in a thread while the caller stores
the ones before.

Rules: at most ``depth`` batches wait (memory stays bounded by a few
batches); the batches come in their order; an exception of the source is
raised in the caller, at the batch where it happened; when the caller stops
early (an error while storing), the thread stops at its next batch. It pays
where both sides release the GIL (Arrow's kernels reading a log, DuckDB
writing it): on two cores a 2-million-cycle gctrace ingest takes about the
longer of the two instead of their sum.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
_DONE = object()


def read_ahead(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """The items of ``items``, made in a thread ``depth`` ahead of the caller."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(x: object) -> bool:
        while not stop.is_set():
            try:
                q.put(x, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        it = iter(items)
        try:
            for item in it:
                if not put(("item", item)):
                    return
            put(("done", _DONE))
        except BaseException as e:  # handed to the caller, raised there
            put(("error", e))
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()  # a generator's files are closed in its own thread

    thread = threading.Thread(target=run, name="pyproflab-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = q.get()
            if kind == "done":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join()
