"""Issue 17, finding 2: content ids nobody can forge.

Version 1 location ids were a chain of splitmix64 steps over (mapping, address,
is_folded, lines): every step is invertible, so a crafted address could give
any location the id of another service's location, and the first row stored
under an id won. These tests forge such an address and show it no longer
works, and that a collision (forced here) is refused, never merged.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.store_helpers import make_profile

from pyproflab.errors import IdCollisionError, StoreError
from pyproflab.keying import ids
from pyproflab.store import Store
from pyproflab.store.ingest import DATASET_MARKER, ProfileMeta, ingest, key_profile
from pyproflab.store.parquet import export_parquet, import_parquet

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
M1, M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
V1_SEED_LOCATION, V1_SEED_LINES = 0x4C4F434154494F4E, 0x4C494E4553000000


def _mix(x: int) -> int:
    x ^= x >> 30
    x = x * M1 & MASK
    x ^= x >> 27
    x = x * M2 & MASK
    return x ^ (x >> 31)


def _unshift(x: int, s: int) -> int:
    out = x
    for _ in range(64 // s):
        out = x ^ (out >> s)
    return out


def _unmix(x: int) -> int:
    x = _unshift(x, 31)
    x = x * pow(M2, -1, 1 << 64) & MASK
    x = _unshift(x, 27)
    x = x * pow(M1, -1, 1 << 64) & MASK
    return _unshift(x, 30)


def _combine(h: int, v: int) -> int:
    return _mix((h * GOLDEN + _mix(v)) & MASK)


def _v1_lines_hash(lines: list[tuple[int, int, int]]) -> int:
    per = [_combine(_combine(f, ln), col) for f, ln, col in lines]
    p, acc = 0xD6E8FEB86659FD93, 0
    for i, v in enumerate(per):
        acc = (acc + _mix(v) * pow(p, len(per) - 1 - i, 1 << 64)) & MASK
    return _mix(acc ^ _mix((len(per) + V1_SEED_LINES) & MASK))


def _v1_location_id(mapping: int, address: int, folded: int, lines) -> int:
    h = _combine(_combine(V1_SEED_LOCATION, mapping), address)
    return _combine(_combine(h, folded), _v1_lines_hash(lines)) or 1


def _v1_forge_address(target: int, mapping: int, folded: int, lines) -> int:
    """The address that gives a location of ``lines`` the version 1 id ``target``."""
    ginv = pow(GOLDEN, -1, 1 << 64)
    h3 = (_unmix(target) - _mix(_v1_lines_hash(lines))) * ginv & MASK
    h2 = (_unmix(h3) - _mix(folded)) * ginv & MASK
    h1 = _combine(V1_SEED_LOCATION, mapping)
    return _unmix((_unmix(h2) - h1 * GOLDEN) & MASK)


def _store_location(profile) -> tuple[int, int, list[tuple[int, int, int]]]:
    """(id, mapping id, lines) of the single location of ``profile`` in store form."""
    loc = key_profile(profile, ProfileMeta(), "x").locations.to_pylist()[0]
    lines = [(x["function_id"], x["line"], x["column"]) for x in loc["lines"]]
    return loc["location_id"], loc["mapping_id"], lines


def _leaf_names(store: Store, service: str) -> list[str]:
    t = store.sql(
        "SELECT f.name FROM samples s JOIN profiles p USING (profile_id) "
        "JOIN stacks k USING (stack_id) JOIN locations l ON l.location_id = k.location_ids[1] "
        "JOIN functions f ON f.function_id = l.lines[1].function_id "
        "WHERE p.service = ? ORDER BY f.name",
        [service],
    )
    return t.column(0).to_pylist()


def test_forge_helper_reproduces_version_1_ids() -> None:
    lines = [(123, 20, 0)]
    addr = _v1_forge_address(0xDEADBEEF12345678, 55, 0, lines)
    assert _v1_location_id(55, addr, 0, lines) == 0xDEADBEEF12345678


def test_a_forged_address_does_not_take_another_services_location() -> None:
    victim = make_profile([(["victim.hot"], [5, 50])])
    attacker = make_profile([(["evil.fn"], [1, 10])], time_nanos=1)
    v_id, v_map, v_lines = _store_location(victim)
    _, a_map, a_lines = _store_location(attacker)
    forged = _v1_forge_address(_v1_location_id(v_map, 0x1000, 0, v_lines), a_map, 0, a_lines)
    locs = attacker.locations
    attacker.locations = locs.set_column(2, "address", pa.array([forged], pa.uint64()))
    with Store.open(":memory:") as store:
        ingest(store, [(attacker, ProfileMeta(service="evil"))])
        ingest(store, [(victim, ProfileMeta(service="victim"))])
        assert _leaf_names(store, "victim") == ["victim.hot"]
        assert _leaf_names(store, "evil") == ["evil.fn"]
        assert store.counts()["locations"] == 2


def _every_location_on_42(words: np.ndarray, starts: np.ndarray):
    """``ids.location_keys`` with every location on one id (no cache entries)."""
    return np.full(len(starts) - 1, 42, ids.U64), None


def test_a_colliding_id_is_refused_and_the_store_left_as_before(monkeypatch) -> None:
    # Force every location of every profile onto one id: what a found collision does.
    monkeypatch.setattr(ids, "location_keys", _every_location_on_42)
    with Store.open(":memory:") as store:
        ingest(store, [(make_profile([(["a.first"], [1, 10])]), ProfileMeta(service="a"))])
        before = {
            t: store.sql(f"SELECT count(*) FROM {t}").column(0)[0].as_py()
            for t in ("profiles", "samples", "stacks", "locations", "functions")
        }
        with pytest.raises(IdCollisionError, match="locations id 0x000000000000002a"):
            ingest(
                store,
                [(make_profile([(["b.second"], [2, 20])], time_nanos=1), ProfileMeta(service="b"))],
            )
        after = {t: store.sql(f"SELECT count(*) FROM {t}").column(0)[0].as_py() for t in before}
        assert after == before
        assert _leaf_names(store, "a") == ["a.first"]


def test_a_collision_inside_one_batch_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(ids, "location_keys", _every_location_on_42)
    with Store.open(":memory:") as store:
        with pytest.raises(IdCollisionError):
            ingest(store, [(make_profile([(["a.first", "a.main"], [1, 10])]), ProfileMeta())])
        assert store.counts()["profiles"] == 0


def test_location_id_is_pinned_and_covers_every_field() -> None:
    base = make_profile([(["main.work"], [1, 10])])
    lid, mapping, lines = _store_location(base)
    assert lid == 0x835037E9EAA612BF
    other = make_profile([(["main.work"], [1, 10])])
    other.locations = other.locations.set_column(2, "address", pa.array([0x1001], pa.uint64()))
    assert _store_location(other)[0] != lid


def test_import_refuses_a_dataset_whose_ids_do_not_match_content(tmp_path) -> None:
    with Store.open(":memory:") as a:
        ingest(a, [(make_profile([(["main.work"], [1, 10])]), ProfileMeta(service="s"))])
        export_parquet(a, tmp_path / "ds")
    path = tmp_path / "ds" / "locations.parquet"
    t = pq.read_table(path)
    pq.write_table(t.set_column(2, "address", pa.array([0x4242], pa.uint64())), path)
    # Whoever alters a dataset can rewrite its marker's checksums too: the ids still tell.
    marker_path = tmp_path / "ds" / DATASET_MARKER
    marker = json.loads(marker_path.read_text())
    data = path.read_bytes()
    marker["files"]["locations.parquet"] = {
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    marker_path.write_text(json.dumps(marker))
    with Store.open(":memory:") as b:
        with pytest.raises(StoreError, match="locations.parquet: ids do not match"):
            import_parquet(b, tmp_path / "ds")
        assert b.counts()["profiles"] == 0
