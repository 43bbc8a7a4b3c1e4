"""Opening a user's input file (a profile, a trace, a metrics file) for reading.

Rules:

- Only a regular file is read, after following symlinks. Opening a FIFO waits
  for a writer that never comes and a device or socket never ends, so one is
  refused with an ``OSError`` whose ``strerror`` names what it is (the
  callers' handlers of unreadable files turn it into their one line); a
  directory raises ``IsADirectoryError`` as ``open`` does.
- The file is opened without blocking and checked on the open descriptor:
  a FIFO never blocks the open, and a name swapped between a check and the
  open cannot slip through.
"""

from __future__ import annotations

import errno
import io
import os
import stat

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def open_input(path: str | os.PathLike) -> io.BufferedReader:
    """``path`` open for reading in binary mode, if it is a regular file (module rules)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "a special file")
            raise OSError(errno.EINVAL, f"{kind}, not a regular file", os.fspath(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
