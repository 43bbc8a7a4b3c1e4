"""The Arrow glue of the fast decoder (fast.py) against the reference decoder.

Rules checked: int64 columns read from uint64 fields without a copy (sample
values, line numbers and columns, start lines, numeric labels) keep negative
and huge values as the reference decoder does; functions whose system names
all equal their names (one take shared by both columns) and those where some
differ give the reference decoder's tables, in C and in numpy (``_wire`` off).
"""

from __future__ import annotations

import pytest
from support.decode_helpers import same_profile
from support.profile_builders import minimal

from pyproflab.decode import decode_bytes, fast


def _profile(all_names_equal: bool) -> bytes:
    p = minimal()
    for f in p.function:
        f.system_name = f.name if all_names_equal else 6
        f.start_line = -7
    p.location[0].line[0].line = -(2**63)
    p.location[0].line[0].column = 2**63 - 1
    p.sample[0].value[0] = -1
    p.sample[0].label[1].num = -(2**40)
    return p.SerializeToString()


@pytest.mark.parametrize("all_names_equal", [True, False])
@pytest.mark.parametrize("pure", [False, True])
def test_glue_gives_the_reference_tables(monkeypatch, all_names_equal: bool, pure: bool) -> None:
    if pure:
        monkeypatch.setattr(fast, "_wire", None)
    data = _profile(all_names_equal)
    got = decode_bytes(data, source="<test>")
    want = decode_bytes(data, source="<test>", method="reference")
    same_profile(got, want)
    for name in ("locations", "functions", "mappings"):  # samples: interned, same_profile
        assert getattr(got, name).equals(getattr(want, name)), name
    names = got.functions.column("name")
    assert names.equals(got.functions.column("system_name")) is all_names_equal
    assert got.functions.column("start_line").to_pylist() == [-7] * len(names)
