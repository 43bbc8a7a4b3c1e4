"""Many profiles keyed at once (``keying.batch.key_profiles``) give each the rows
``key_profile`` gives it alone: the pushed profiles of the real SDKs'
recordings, profiles whose samples leave rows unreferenced, a changed function,
ids too large to move, profiles without samples or mappings."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support.push_helpers import RECORDED, records

from pyproflab.decode import decode_bytes
from pyproflab.decode.pprof import decompress
from pyproflab.keying.batch import key_profiles
from pyproflab.keying.keys import KeyedProfile, ProfileMeta, key_profile
from pyproflab.model import Profile
from pyproflab.sources.push import parse_datadog, parse_pyroscope, pprof_bytes

NOW = datetime(2026, 11, 28, tzinfo=UTC)
TABLES = ("samples", "functions", "mappings", "locations", "stacks", "label_sets")


def _pushed() -> list[Profile]:
    out = []
    for _, rec, body in records(RECORDED / "dd"):
        push = parse_datadog(rec["header"]["Content-Type"][0], body)
        out += [_decoded(a.data) for a in push.profiles]
    for _, rec, body in records(RECORDED / "pyro"):
        query = rec["url"].split("?", 1)[1]
        push = parse_pyroscope(query, rec["header"]["Content-Type"][0], body)
        out += [_decoded(a.data) for a in push.profiles]
    return out


def _decoded(data: bytes) -> Profile:
    return decode_bytes(decompress(pprof_bytes(data, source="t", max_bytes=1 << 30), source="t"))


PUSHED = _pushed()


def _meta(i: int) -> ProfileMeta:
    return ProfileMeta(service=f"svc{i % 3}", instance=f"i{i}", source=f"push:{i}")


def _alone(profiles: list[Profile]) -> list[KeyedProfile]:
    return [
        key_profile(p, _meta(i), f"h{i}", now=NOW, with_content=False)
        for i, p in enumerate(profiles)
    ]


def _together(profiles: list[Profile]) -> list[KeyedProfile]:
    metas = [_meta(i) for i in range(len(profiles))]
    return key_profiles(profiles, metas, [f"h{i}" for i in range(len(profiles))], now=NOW)


def _assert_same(got: list[KeyedProfile], want: list[KeyedProfile]) -> None:
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert (a.content_hash, a.row) == (b.content_hash, b.row), k
        for t in TABLES:
            x, y = getattr(a, t), getattr(b, t)
            assert x.schema == y.schema and x.equals(y), (k, t)


def test_the_recordings_hold_what_the_batch_must_get_right() -> None:
    assert len(PUSHED) >= 30
    assert any(len(p.samples.column("labels").combine_chunks().flatten()) for p in PUSHED)
    assert len({p.functions.num_rows for p in PUSHED}) > 5


@pytest.mark.parametrize("size", [2, 5, 64])
def test_a_batch_keys_each_profile_as_key_profile_does(size) -> None:
    for start in range(0, len(PUSHED), size):
        chunk = PUSHED[start : start + size]
        _assert_same(_together(chunk), _alone(chunk))


def _half_samples(p: Profile) -> Profile:
    """``p`` with its first half of samples only: locations, functions and
    mappings left unreferenced."""
    half = p.samples.slice(0, max(1, p.samples.num_rows // 2))
    return Profile(
        sample_types=p.sample_types, samples=half, locations=p.locations,
        functions=p.functions, mappings=p.mappings, time_nanos=p.time_nanos,
    )  # fmt: skip


def _no_samples(p: Profile) -> Profile:
    return Profile(
        sample_types=p.sample_types, samples=p.samples.slice(0, 0), locations=p.locations,
        functions=p.functions, mappings=p.mappings.slice(0, 0),
    )  # fmt: skip


def test_unreferenced_rows_no_samples_and_no_mappings() -> None:
    mixed = [PUSHED[0], _half_samples(PUSHED[1]), _no_samples(PUSHED[2]), PUSHED[3]]
    mixed += [_half_samples(p) for p in PUSHED[4:12]]
    want = _alone(mixed)
    assert want[1].locations.num_rows < PUSHED[1].locations.num_rows  # some were dropped
    _assert_same(_together(mixed), want)


def _renamed(p: Profile, row: int) -> Profile:
    names = p.functions.column("name").to_pylist()
    names[row] = names[row] + ".changed"
    functions = p.functions.set_column(1, "name", pa.array(names, pa.string()))
    return Profile(
        sample_types=p.sample_types, samples=p.samples, locations=p.locations,
        functions=functions, mappings=p.mappings, time_nanos=p.time_nanos,
    )  # fmt: skip


def test_a_changed_function_is_keyed_afresh() -> None:
    base = PUSHED[0]
    changed = _renamed(base, 0)
    got = _together([base, changed, base])
    _assert_same(got, _alone([base, changed, base]))
    a, b = (set(k.functions.column("function_id").to_pylist()) for k in got[:2])
    assert len(a - b) == 1 and len(b - a) == 1  # that function alone has a new id
    la, lb = (set(k.locations.column("location_id").to_pylist()) for k in got[:2])
    assert la != lb and la == set(got[2].locations.column("location_id").to_pylist())


def _shifted(p: Profile, by: int) -> Profile:
    """``p`` with its mapping ids moved up by ``by`` (its locations' links too)."""
    ids = pc.add(p.mappings.column("id"), pa.scalar(by, pa.uint64()))
    mappings = p.mappings.set_column(0, "id", ids)
    linked = p.locations.column("mapping_id")
    moved = pc.if_else(pc.equal(linked, 0), linked, pc.add(linked, pa.scalar(by, pa.uint64())))
    locations = p.locations.set_column(1, "mapping_id", moved)
    return Profile(
        sample_types=p.sample_types, samples=p.samples, locations=locations,
        functions=p.functions, mappings=mappings, time_nanos=p.time_nanos,
    )  # fmt: skip


def test_ids_too_large_to_move_are_keyed_one_by_one() -> None:
    batch = [PUSHED[0], _shifted(PUSHED[1], 1 << 62), PUSHED[2]]
    _assert_same(_together(batch), _alone(batch))


def _leaves_spelled_out(p: Profile) -> list[str]:
    firsts = {ids[0] for ids in p.samples.column("location_ids").to_pylist() if ids}
    fn = p.functions
    names = dict(zip(fn.column("id").to_pylist(), fn.column("name").to_pylist(), strict=True))
    return [
        names.get(lines[0]["function_id"], "")
        for lid, lines in zip(
            p.locations.column("id").to_pylist(),
            p.locations.column("lines").to_pylist(),
            strict=True,
        )
        if lid in firsts and lines
    ]


def test_leaf_functions_are_those_samples_start_with() -> None:
    from pyproflab.keying.profile_types import _leaf_functions

    contentions = [p for p in PUSHED if "contentions" in [t.type for t in p.sample_types]]
    assert contentions
    for p in contentions + [_half_samples(p) for p in contentions] + [_no_samples(PUSHED[0])]:
        assert _leaf_functions(p) == _leaves_spelled_out(p)
