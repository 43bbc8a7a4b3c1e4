"""The Arrow glue of the fast decoder (fast.py) against the reference decoder.

Rules checked: int64 columns read from uint64 fields without a copy (sample
values, line numbers and columns, start lines, numeric labels) keep negative
and huge values as the reference decoder does; functions whose system names
all equal their names (one take shared by both columns) and those where some
differ give the reference decoder's tables, in C and in numpy (``_wire`` off).
"""

from __future__ import annotations

import numpy as np
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


ID_SETS = {
    "1..n": list(range(1, 301)),
    "1..n permuted": [2, 1, *range(3, 301)],
    "1..n with a gap": [*range(1, 150), *range(151, 302)],
    "one": [1],
    "with 0": [0, 1, 2, 3],
    "with a repeat": [1, 2, 2, 4],
    "sparse": [5, 10**12, 2**63, 2**64 - 1],
}


@pytest.mark.parametrize("name", ID_SETS)
def test_id_index_answers_as_a_set(name: str) -> None:
    """Every way IdIndex holds ids (range, table, sorted copy) answers
    membership, membership of all, and uniqueness as a Python set would."""
    ids = np.array(ID_SETS[name], dtype=np.uint64)
    index = fast.IdIndex(ids)
    known = set(ID_SETS[name])
    rng = np.random.default_rng(len(name))
    edges = [0, 1, 2, int(ids.max()), min(int(ids.max()) + 1, 2**64 - 1), 2**63, 2**64 - 1]
    pool = np.array([*edges, *ID_SETS[name]], dtype=np.uint64)
    for size in (0, 1, 5, 1000):
        for _ in range(20):
            query = rng.choice(pool, size=size)
            want = [int(q) in known for q in query]
            assert index.contains(query).tolist() == want
            assert index.contains_all(query) is all(want)
        assert index.contains_all(ids[ids != 0][:size]) is True
    assert index.all_unique(ids.size) is (len(known) == ids.size)
    assert index.sequential is (name in ("1..n", "one"))


def test_bad_ids_in_sequential_profiles_fail_as_the_reference() -> None:
    """Location and function ids 1..n (the range test), with a sample pointing
    at 0, at n + 1, at 2**64 - 1, and a line at a missing function: the same
    error, word for word, as the reference decoder."""
    from pyproflab.errors import ProfileError

    cases = []
    for bad in (0, 3, 2**64 - 1):
        p = minimal()
        p.sample[1].location_id[0] = bad
        cases.append(p)
        p = minimal()
        p.location[1].line[0].function_id = bad
        cases.append(p)
    for p in cases:
        data = p.SerializeToString()
        errors = []
        for method in ("fast", "reference"):
            with pytest.raises(ProfileError) as e:
                decode_bytes(data, source="<test>", method=method)
            errors.append(str(e.value))
        assert errors[0] == errors[1]
