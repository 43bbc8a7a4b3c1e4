"""Issue 14: each ingest process leaves out the rows it has sent before
(``keying/sent.py``), and the rules of the store still hold: a row is left out
only when its bytes equal what was sent, a profile that relies on a refused
file's rows is keyed again in full (so a colliding id is still refused, never
merged), the memory is bounded, and the store is the one a full send gives."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from support.store_helpers import make_profile

import pyproflab.store.ingest as ingest_mod
from pyproflab.encode import write_profile
from pyproflab.keying import ids, sent
from pyproflab.keying.sent import SentMemory, same_segments
from pyproflab.store import Store
from pyproflab.store.ingest import ProfileMeta, ingest, ingest_paths, key_profile


def _keyed(rows, time_nanos: int):
    return key_profile(make_profile(rows, time_nanos=time_nanos), ProfileMeta(), f"h{time_nanos}")


def test_only_rows_sent_before_are_left_out_and_their_sender_named() -> None:
    first = _keyed([(["main.a", "main.main"], [1, 10])], 1)
    second = _keyed([(["main.a", "main.main"], [2, 20]), (["main.b"], [3, 30])], 2)
    memory = SentMemory(1 << 20)
    assert memory.trim(first) is first
    trimmed = memory.trim(second)
    assert trimmed.relies_on == {"h1"}
    # main.b is new; main.a and main.main were sent with the first file.
    assert trimmed.functions.column("name").to_pylist() == ["main.b"]
    sent_stacks = set(first.stacks.column("stack_id").to_pylist())
    assert set(trimmed.stacks.column("stack_id").to_pylist()) == (
        set(second.stacks.column("stack_id").to_pylist()) - sent_stacks
    )
    assert trimmed.samples.equals(second.samples)
    assert trimmed.nbytes < second.nbytes


def test_the_content_kept_while_keying_is_what_trimming_builds_and_is_not_sent() -> None:
    profiles = [
        [(["main.a", "main.main"], [1, 10])],
        [(["main.a", "main.main"], [2, 20]), (["main.b"], [3, 30])],
        [(["main.b", "main.main"], [4, 40])],
    ]
    keyed = [_keyed(rows, t) for t, rows in enumerate(profiles, 1)]
    for k in keyed:
        assert k.content is not None
        for attr, _, columns_of in sent._TABLES:
            want = columns_of(getattr(k, attr))
            assert want is not None
            got = k.content[attr]
            assert got is not None and len(got) == len(want)
            for (gv, gs), (wv, ws) in zip(got, want, strict=True):
                assert gv.tobytes() == wv.tobytes() and gs.tolist() == ws.tolist()
        assert pickle.loads(pickle.dumps(k)).content is None
    with_content, rebuilt = SentMemory(1 << 20), SentMemory(1 << 20)
    for t, rows in enumerate(profiles, 1):
        a = with_content.trim(_keyed(rows, t))
        bare = _keyed(rows, t)
        bare.content = None
        b = rebuilt.trim(bare)
        assert a.content is None and a.relies_on == b.relies_on
        for attr in ("functions", "locations", "stacks"):
            assert getattr(a, attr).equals(getattr(b, attr))


@pytest.mark.parametrize("entries", [True, False], ids=["by-cache-entries", "by-content"])
def test_a_sent_id_with_other_content_is_sent_again(monkeypatch, entries: bool) -> None:
    # Every location on one id: what a found collision does. Its cache entries (the
    # digest cache's, by content) are kept, or left out so that trim compares.
    real = ids.location_keys

    def on_42(words, starts):
        return np.full(len(starts) - 1, 42, ids.U64), real(words, starts)[1] if entries else None

    monkeypatch.setattr(ids, "location_keys", on_42)
    memory = SentMemory(1 << 20)
    memory.trim(_keyed([(["a.first"], [1, 10])], 1))
    other = memory.trim(_keyed([(["b.second"], [2, 20])], 2))
    assert other.locations.column("location_id").to_pylist() == [42]
    # Its stack is the one sent ([42], the same bytes): left out.
    assert other.stacks.num_rows == 0 and other.relies_on == {"h1"}


def test_the_memory_is_bounded_and_forgotten_whole() -> None:
    first = _keyed([(["main.a"], [1, 10])], 1)
    memory = SentMemory(1)
    memory.trim(first)
    assert memory.nbytes == 0
    again = _keyed([(["main.a"], [2, 20])], 2)
    assert memory.trim(again) is again
    assert SentMemory(0).trim(first) is first


def test_same_segments_in_c_and_numpy_agree(monkeypatch) -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, 5000).astype(np.uint64)
    b = a.copy()
    b[rng.integers(0, len(b), 40)] += np.uint64(1)
    lengths = rng.integers(0, 30, 300)
    starts = rng.integers(0, len(a) - 30, 300)
    fast = same_segments(a, starts, b, starts, lengths)
    monkeypatch.setattr(ids, "_blake", None)
    pure = same_segments(a, starts, b, starts, lengths)
    expected = [
        np.array_equal(a[s : s + n], b[s : s + n]) for s, n in zip(starts, lengths, strict=True)
    ]
    assert fast.tolist() == pure.tolist() == expected
    assert not all(expected) and any(expected)


# --- the store -------------------------------------------------------------------------


def _leaves_by_file(store: Store) -> dict[str, list[str]]:
    t = store.sql(
        "SELECT p.source, f.name FROM samples s JOIN profiles p USING (profile_id) "
        "JOIN stacks k USING (stack_id) JOIN locations l ON l.location_id = k.location_ids[1] "
        "JOIN functions f ON f.function_id = l.lines[1].function_id ORDER BY ALL"
    ).to_pylist()
    out: dict[str, list[str]] = {}
    for r in t:
        out.setdefault(Path(r["source"] or "-").name, []).append(r["name"])
    return out


@pytest.mark.parametrize("batch_size", [1, 64])
def test_a_profile_relying_on_a_refused_file_is_keyed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_size: int
) -> None:
    """f1's location b.second is forced onto a stored location's id: f1 is refused.
    f2 has the same rows as f1, so it was sent without them: keyed again in full,
    it is refused too (not stored on rows that were never stored, nor merged into
    the stored location). f3 shares only a function with f1: keyed again, stored."""
    victim = make_profile([(["a.first"], [1, 10])])
    real = ids.location_keys
    target = int(key_profile(victim, ProfileMeta(), "v").locations.column(0)[0].as_py())
    forged = make_profile([(["b.second"], [1, 1]), (["c.common"], [1, 1])])
    source = int(key_profile(forged, ProfileMeta(), "f").locations.column(0)[0].as_py())

    def forged_keys(words, starts):  # the digest cache's entries kept: trim goes by them
        out, entries = real(words, starts)
        return np.where(out == source, target, out), entries

    monkeypatch.setattr(ids, "location_keys", forged_keys)
    files = tmp_path / "files"
    files.mkdir()
    for i, rows in enumerate(
        [
            [(["b.second"], [2, 20]), (["c.common"], [3, 30])],
            [(["b.second"], [4, 40]), (["c.common"], [5, 50])],
            [(["c.common"], [6, 60])],
        ],
        1,
    ):
        write_profile(make_profile(rows, time_nanos=i), files / f"f{i}.pb.gz")
    with Store.open(":memory:") as store:
        ingest(store, [(victim, ProfileMeta(service="a"))])
        report = ingest_paths(store, [files], workers=1, batch_size=batch_size)
        assert [Path(p).name for p, _ in report.refused] == ["f1.pb.gz", "f2.pb.gz"]
        assert all("content id collision: locations" in why for _, why in report.refused)
        assert report.new == 1
        leaves = _leaves_by_file(store)
        assert leaves["f3.pb.gz"] == ["c.common"]
        assert "f2.pb.gz" not in leaves and store.counts()["profiles"] == 2
        assert (
            store.sql("SELECT count(*) FROM stacks k ANTI JOIN samples s USING (stack_id)")
            .column(0)[0]
            .as_py()
            == 0
        )


def test_the_memory_changes_nothing_stored(tmp_path: Path, monkeypatch) -> None:
    """Profiles sharing rows give the same store with the memory as without it."""
    files = tmp_path / "files"
    files.mkdir()
    for i in range(6):
        rows = [(["main.a", "main.main"], [i, 10]), ([f"main.f{i % 3}", "main.main"], [1, i])]
        write_profile(make_profile(rows, time_nanos=i + 1), files / f"p{i}.pb.gz")
    dumps = []
    for sent_bytes in (0, ingest_mod.SENT_BYTES):
        monkeypatch.setattr(ingest_mod, "SENT_BYTES", sent_bytes)
        with Store.open(":memory:") as store:
            assert ingest_paths(store, [files], workers=1, batch_size=2).new == 6
            dumps.append(
                {
                    t: store.sql(f"SELECT * FROM {t} ORDER BY ALL").to_pylist()
                    for t in ("functions", "locations", "stacks", "samples", "mappings")
                }
            )
    assert dumps[0] == dumps[1]
    assert sent.SentMemory(1 << 20).max_bytes == 1 << 20


def test_remembered_rows_are_found_by_id_and_compared_by_content() -> None:
    """_Rows (a hash table by id) against a dict: ids shared by other content,
    repeated ids, ids equal in their low bits, and the table's growth."""
    rng = np.random.default_rng(5)
    universe = rng.integers(1, 2**64, 3000, dtype=np.uint64)
    universe[:200] = (universe[:200] << np.uint64(20)) | np.uint64(7)  # low bits all equal
    content = {
        int(u): rng.integers(0, 255, int(rng.integers(0, 20)), dtype=np.uint8) for u in universe
    }
    rows, remembered = sent._Rows(1), {}
    for step in range(40):
        row_ids = rng.choice(universe, int(rng.integers(0, 400)))
        parts = [
            content[int(r)] if rng.random() > 0.05 else np.append(content[int(r)], np.uint8(1))
            for r in row_ids
        ]
        starts = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
        values = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        same, origins = rows.known(row_ids, [(values, starts)])
        want = [
            int(r) in remembered and remembered[int(r)][0] == p.tobytes()
            for r, p in zip(row_ids, parts, strict=True)
        ]
        assert same.tolist() == want
        assert origins.tolist() == [remembered[int(r)][1] for r in row_ids[same]]
        rows.add(row_ids, [(values, starts)], np.flatnonzero(~same), step)
        for r, p in zip(row_ids, parts, strict=True):
            remembered.setdefault(int(r), (p.tobytes(), step))
    assert len(rows.ids) == len(remembered) and len(rows.slot_ids) >= 2 * len(rows.ids)
