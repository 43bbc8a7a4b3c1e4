"""The store lock: one writer per store, with a clear message for everyone else.

Rules:

- The lock is ``fcntl.flock(LOCK_EX)`` on ``<store>.lock`` beside the DuckDB
  file. The kernel drops it when the holder's process dies, however it dies
  (SIGKILL included), so liveness never depends on a pid check.
- The holder writes ``{"pid", "since", "host", "command"}`` into the file for
  the message others see: ``store is busy (held by pid N since T: command)``.
- The last holder deletes the file while it still holds the flock, so no
  empty lock file stays beside the store. An opener that was waiting on the
  deleted file then holds a lock on a name nobody sees: after each flock it
  checks that the path still names the file it locked, and opens again if
  not, so two processes never each lock a different inode. Content left
  behind with no flock on the file is a stale lock of a dead process (a
  killed holder cannot delete it): the next opener takes it over and says so
  (``StoreLock.took_over``).
- ``wait`` seconds: poll until the lock is free or the time is up; 0 fails at
  once. The error is a ``StoreError`` (exit code 2 in the CLI).
- Within one process the lock is shared: DuckDB itself lets one process open
  the same file several times, so a second ``Store.open`` of a store this
  process already holds just counts up (released at the last ``release``).
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyproflab.errors import StoreError

POLL_SECONDS = 0.1


def lock_path(db_path: str | os.PathLike) -> str:
    """``<store>.lock``, beside the store."""
    return os.fspath(db_path) + ".lock"


def store_files(db_path: str | os.PathLike) -> tuple[str, ...]:
    """The paths a store file keeps on disk: itself, DuckDB's write-ahead log
    (``.wal``) and spill folder (``.tmp``, its default ``temp_directory``), and
    the writer lock (``.lock``)."""
    name = os.fspath(db_path)
    return (name, name + ".wal", name + ".tmp", lock_path(name))


def read_holder(db_path: str | os.PathLike) -> dict[str, Any] | None:
    """What the lock file says about its holder (None when empty or unreadable)."""
    try:
        with open(lock_path(db_path), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    try:
        data = json.loads(text) if text.strip() else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def describe_holder(holder: dict[str, Any] | None) -> str:
    """``held by pid N since T (command)``, or as much of it as is known."""
    if not holder:
        return "held by another process"
    text = f"held by pid {holder.get('pid', '?')}"
    if holder.get("host") and holder.get("host") != socket.gethostname():
        text += f" on {holder['host']}"
    if holder.get("since"):
        text += f" since {holder['since']}"
    if holder.get("command"):
        text += f": {holder['command']}"
    return text


def busy_error(
    db_path: str | os.PathLike, *, waited: float = 0.0, holder: dict[str, Any] | None = None
) -> StoreError:
    holder = holder if holder is not None else read_holder(db_path)
    # Only commands that have --wait add that hint (StoreBusyError.with_hint).
    after = f"; gave up after waiting {waited:g} s" if waited else "; try again later"
    err = StoreBusyError(f"{os.fspath(db_path)}: store is busy ({describe_holder(holder)}){after}")
    err.waited = waited
    return err


class StoreBusyError(StoreError):
    """Another process holds the store. ``waited``: seconds waited (0: none)."""

    waited: float = 0.0

    def with_hint(self, flag: str = "--wait SECONDS") -> StoreBusyError:
        """The same error, suggesting ``flag`` when no wait was asked for."""
        if self.waited:
            return self
        out = StoreBusyError(f"{self} or pass {flag}")
        out.waited = 0.0
        return out


@dataclass
class _Held:
    fd: int
    count: int
    took_over: dict[str, Any] | None


_held: dict[str, _Held] = {}
_held_guard = threading.Lock()


@atexit.register
def _empty_at_exit() -> None:
    """A process leaving normally with a store still open is not a stale holder."""
    for key, held in list(_held.items()):
        _let_go(key, held.fd, close=False)


class StoreLock:
    """The writer lock of one store (see the module rules). Use ``acquire``/``release``
    or as a context manager."""

    def __init__(self, db_path: str | os.PathLike, *, command: str | None = None):
        self.db_path = os.fspath(db_path)
        self.path = lock_path(db_path)
        self.key = os.path.realpath(self.path)
        self.command = command if command is not None else _command_line()
        self.took_over: dict[str, Any] | None = None  # the dead holder's record, if any
        self._acquired = False

    def acquire(self, wait: float = 0.0) -> StoreLock:
        """Take the lock, polling up to ``wait`` seconds; StoreError when busy."""
        if self._acquired:
            return self
        with _held_guard:
            held = _held.get(self.key)
            if held is not None:
                held.count += 1
                self.took_over = held.took_over
                self._acquired = True
                return self
        fd = self._open()
        start = time.monotonic()
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    waited = time.monotonic() - start
                    if waited >= wait:
                        raise busy_error(self.db_path, waited=wait) from None
                    time.sleep(min(POLL_SECONDS, max(0.0, wait - waited)))
                    continue
                if _names(self.path, fd):
                    break
                # The holder deleted the file as it let go: lock the file now there.
                os.close(fd)
                fd = -1
                fd = self._open()
            # Ours now. Leftover content means the last holder died holding it.
            stale = _read_fd(fd)
            self.took_over = stale or None
            record = {
                "pid": os.getpid(),
                "since": datetime.now(UTC).isoformat(timespec="seconds"),
                "host": socket.gethostname(),
                "command": self.command,
            }
            data = json.dumps(record).encode()
            # Written first, cut after: a failed write (a full disk) leaves the
            # old content as it was.
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        except OSError as e:
            if fd >= 0:
                os.close(fd)  # closing drops a flock we may hold
            raise StoreError(
                f"{self.db_path}: cannot write the lock file {self.path}: {e.strerror or e}"
            ) from None
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        with _held_guard:
            _held[self.key] = _Held(fd, 1, self.took_over)
        self._acquired = True
        return self

    def release(self) -> None:
        """Let go (the last holder in this process deletes the file and unlocks it)."""
        if not self._acquired:
            return
        self._acquired = False
        with _held_guard:
            held = _held.get(self.key)
            if held is None:
                return
            held.count -= 1
            if held.count > 0:
                return
            del _held[self.key]
        _let_go(self.path, held.fd)

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise StoreError(
                f"{self.db_path}: cannot create the lock file {self.path}: {e.strerror or e}"
            ) from None

    @property
    def held(self) -> bool:
        return self._acquired

    def __enter__(self) -> StoreLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _names(path: str, fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _let_go(path: str, fd: int, *, close: bool = True) -> None:
    """Delete the lock file (still holding its flock) and close it; where it
    cannot be deleted, empty it, so nothing stale is left behind."""
    try:
        if _names(path, fd):
            os.unlink(path)
    except OSError:
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
    if close:
        os.close(fd)


def _read_fd(fd: int) -> dict[str, Any] | None:
    try:
        text = os.pread(fd, 65536, 0).decode("utf-8", "replace")
        data = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return {"pid": "?"}  # something was there: report it as stale anyway
    return data if isinstance(data, dict) else None


def _command_line() -> str:
    args = [os.path.basename(sys.argv[0] or "python")] + sys.argv[1:]
    text = " ".join(args)
    return text if len(text) <= 200 else text[:197] + "..."
