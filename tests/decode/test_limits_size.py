"""The limits are not looked at for a profile of no more bytes than every limit
(``limits.check(size=...)``): such a profile can pass none, so skipping the
look changes no answer. Shown on the real SDKs' pushed profiles, each limit set
just below, at and above the profile's size and at its exact count."""

from __future__ import annotations

import pytest
from support.push_helpers import RECORDED, records

from pyproflab.decode import LimitError, Limits, decode_bytes
from pyproflab.decode.limits import check
from pyproflab.decode.pprof import decompress
from pyproflab.sources.push import parse_datadog, pprof_bytes

NAMES = ("samples", "stack_depth", "labels", "label_value", "symbol")


def _raws() -> list[bytes]:
    out = []
    for _, rec, body in records(RECORDED / "dd")[:2]:
        push = parse_datadog(rec["header"]["Content-Type"][0], body)
        out += [
            bytes(decompress(pprof_bytes(a.data, source="t", max_bytes=1 << 30), source="t"))
            for a in push.profiles
        ]
    return out


RAWS = _raws()
OFF = Limits(samples=0, stack_depth=0, labels=0, label_value=0, symbol=0)


def _refused(fn) -> bool:
    try:
        fn()
    except LimitError:
        return True
    return False


@pytest.mark.parametrize("name", NAMES)
def test_skipping_the_look_refuses_what_the_full_look_refuses(name) -> None:
    checked = 0
    for raw in RAWS:
        whole = decode_bytes(raw, limits=OFF)
        for value in (1, len(raw) - 1, len(raw), len(raw) + 1):
            lim = Limits(**{n: (value if n == name else 0) for n in NAMES})
            full = _refused(lambda w=whole, lim=lim: check(w, "t", lim))
            assert _refused(lambda r=raw, lim=lim: decode_bytes(r, limits=lim)) == full
            checked += full
    # The smallest limits refuse (both ways compared on refusals), but for labels:
    # no pushed sample holds more than one.
    assert checked or name == "labels"


def test_a_profile_larger_than_a_limit_is_still_looked_at() -> None:
    raw = max(RAWS, key=len)
    with pytest.raises(LimitError):
        decode_bytes(raw, limits=Limits(symbol=len(raw) // 100))
    decode_bytes(raw, limits=Limits(symbol=len(raw)))
