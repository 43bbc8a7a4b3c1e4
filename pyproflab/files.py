"""Profiles straight from files, without a store: read several and merge them."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable

from pyproflab.decode import DEFAULT_MAX_BYTES, read_profile
from pyproflab.errors import UsageError
from pyproflab.model import Profile


def expand_paths(paths: Iterable[str | os.PathLike]) -> list[str]:
    """Files named by ``paths``: files as given, folders walked (sorted), globs expanded.

    A path that is none of these raises ``UsageError`` naming it.
    """
    out: list[str] = []
    for p in map(str, paths):
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                out.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
        elif os.path.exists(p):
            out.append(p)
        elif glob.has_magic(p):
            matched = sorted(glob.glob(p, recursive=True))
            if not matched:
                raise UsageError(f"{p}: no file matches this pattern")
            out.extend(m for m in matched if os.path.isfile(m))
        else:
            raise UsageError(f"{p}: no such file or directory")
    return out


def read_and_merge(
    paths: Iterable[str | os.PathLike], *, max_bytes: int = DEFAULT_MAX_BYTES
) -> Profile:
    """Read every file and merge them as ``go tool pprof A B …`` does (one file: as is)."""
    from pyproflab.analyses.merge import merge

    files = expand_paths(paths)
    if not files:
        raise UsageError("no profile files given")
    profiles = [read_profile(f, max_bytes=max_bytes) for f in files]
    return profiles[0] if len(profiles) == 1 else merge(profiles)
