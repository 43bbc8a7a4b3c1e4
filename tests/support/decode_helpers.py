"""Helpers of tests/decode/test_decode.py that other test modules use too
(cut out of it by scripts/relayout_tests.py: no test module imports another)."""

from __future__ import annotations

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
