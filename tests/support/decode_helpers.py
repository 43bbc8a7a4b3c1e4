"""Helpers of tests/decode/test_decode.py that other test modules use too
(cut out of it by scripts/relayout_tests.py: no test module imports another)."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

from pyproflab.arrays import uninterned
from pyproflab.model import Profile
from support.profile_builders import HEADER_FIELDS, PROFILE_TABLES


def same_profile(a: Profile, b: Profile) -> None:
    for name in PROFILE_TABLES:
        ta, tb = getattr(a, name), getattr(b, name)
        assert ta.schema.equals(tb.schema), name
        # Labels are interned into each profile's own string table: compare content.
        assert uninterned(ta).equals(uninterned(tb)), name
    for name in HEADER_FIELDS:
        assert getattr(a, name) == getattr(b, name), name


def data_files(root: Path) -> list[Path]:
    """Every file under ``root`` but notes (.md, .txt), sorted."""
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix not in (".md", ".txt"))


def assert_each_file(files: list[Path], check: Callable[[bytes], None], name=str) -> None:
    """``check`` the bytes of every file (there must be some); a failure names the
    file by ``name(path)``."""
    assert files
    for path in files:
        try:
            check(path.read_bytes())
        except AssertionError as e:
            raise AssertionError(f"{name(path)}: {e}") from None


def small_recordings(testdata: Path) -> list[bytes]:
    """The decompressed bytes of the recorded Go and fuzz profiles under 64 KiB
    (seeds of the both-ways mutation tests), in file order."""
    out = []
    for path in data_files(testdata / "go") + data_files(testdata / "fuzz"):
        data = path.read_bytes()
        try:
            data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        except (OSError, EOFError):
            continue
        if 0 < len(data) < 64 << 10:
            out.append(data)
    return out
