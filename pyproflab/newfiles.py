"""Temporary files and folders that become a user's outputs.

Rules:

- An output is written under a hidden temporary name beside its target and
  renamed into place when whole. ``tempfile.mkstemp``/``mkdtemp`` create
  those names 0600/0700 whatever the umask, and the rename keeps that mode,
  so a ``merged.pb.gz``, a ``default.pgo`` or an exported dataset would be
  unreadable to the user's group where every other file they write is not.
- So these create the temporary name with the mode ``open``/``mkdir`` give
  a new file or folder (0666 or 0777, less the process's umask), as the
  tools the outputs stand beside (``go tool pprof -output``, ``cp``) do.
- Names are random and created exclusively (never an existing file), as
  ``tempfile``'s are.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

_TRIES = 100


def create_temp_file(folder: str | os.PathLike, prefix: str, suffix: str) -> tuple[int, str]:
    """A new file in ``folder``, open for writing: (descriptor, path)."""
    for _ in range(_TRIES):
        path = os.path.join(folder, f"{prefix}{secrets.token_hex(6)}{suffix}")
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
            return os.open(path, flags, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


def create_temp_dir(folder: str | os.PathLike, prefix: str, suffix: str) -> Path:
    """A new empty folder in ``folder``."""
    for _ in range(_TRIES):
        path = Path(folder) / f"{prefix}{secrets.token_hex(6)}{suffix}"
        try:
            path.mkdir(0o777)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")
