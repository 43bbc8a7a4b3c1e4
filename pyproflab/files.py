"""Profiles straight from files or URLs, without a store: read several and merge them.

A source starting with ``http://`` or ``https://`` is fetched through the
source ``sources.url.UrlSource`` (its rules: pprof's -seconds, the deadline,
the cap); its failure is a one-line ``UsageError`` naming the URL without its
credentials or query.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable

from pyproflab.decode import DEFAULT_MAX_BYTES, decode_bytes, read_profile
from pyproflab.errors import UsageError
from pyproflab.model import Profile


def expand_paths(paths: Iterable[str | os.PathLike]) -> list[str]:
    """Files named by ``paths``: files as given, folders walked (sorted), globs expanded.

    A path that is none of these, or a folder holding no file, raises
    ``UsageError`` naming it (an empty folder was "no profile files given").
    """
    out: list[str] = []
    for p in map(str, paths):
        if is_url(p):
            out.append(p)
        elif os.path.isdir(p):
            before = len(out)
            for root, dirs, files in os.walk(p):
                dirs.sort()
                out.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
            if len(out) == before:
                raise UsageError(f"{p}: no files in this folder")
        elif os.path.exists(p):
            out.append(p)
        elif glob.has_magic(p):
            from pyproflab.keying.paths import glob_paths

            matched = glob_paths(p)
            if not matched:
                raise UsageError(f"{p}: no file matches this pattern")
            out.extend(m for m in matched if os.path.isfile(m))
        else:
            raise UsageError(f"{p}: no such file or directory")
    return out


def read_and_merge(
    paths: Iterable[str | os.PathLike],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    seconds: float | None = None,
) -> Profile:
    """Read every file or URL and merge them as ``go tool pprof A B …`` does (one: as is)."""
    from pyproflab.analyses.merge import merge

    files = expand_paths(paths)
    if not files:
        raise UsageError("no profile files given")
    if len(files) > 1 and not any(map(is_url, files)):
        # Files only: read and merged on every core (analyses.merge_files).
        from pyproflab.analyses.merge_files import merge_files

        result = merge_files(files, max_bytes=max_bytes)
        if result.error is not None:
            raise result.error
        assert result.profile is not None
        return result.profile
    profiles = [
        fetch_profile(f, seconds=seconds, max_bytes=max_bytes)
        if is_url(f)
        else read_profile(f, max_bytes=max_bytes)
        for f in files
    ]
    return profiles[0] if len(profiles) == 1 else merge(profiles)


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def fetch_profile(
    url: str, *, seconds: float | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> Profile:
    """The profile a URL serves (``sources.url.UrlSource``'s rules), decoded."""
    from pyproflab.sources.base import Request, SourceError, nothing_known
    from pyproflab.sources.http import shown
    from pyproflab.sources.url import UrlSource

    source = UrlSource(url, seconds=seconds, max_bytes=max_bytes)
    try:
        (item,) = source.items(Request(), nothing_known)
    except SourceError as e:
        raise UsageError(e.problem.removeprefix("GET: ")) from None
    assert item.data is not None
    return decode_bytes(item.data, source=shown(url), max_bytes=max_bytes)
