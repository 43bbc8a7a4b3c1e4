"""The spool and its ingester: whole files only, every profile stored once,
refusals kept aside with their reasons, a busy store waited out, a kill between
the store's commit and the spool's clean-up stores nothing twice."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys

import pytest
from support.push_helpers import RECORDED, records, stored_rows

from pyproflab.serve.ingester import run_batch
from pyproflab.sources.push import parse_datadog, parse_pyroscope, pprof_bytes
from pyproflab.sources.spool import Spool, SpoolFull, decode_push

DD = records(RECORDED / "dd")
PYRO = records(RECORDED / "pyro")


def _dd(i: int):
    rec, body = DD[i][1], DD[i][2]
    return parse_datadog(rec["header"]["Content-Type"][0], body)


def _pyro(i: int):
    rec, body = PYRO[i][1], PYRO[i][2]
    return parse_pyroscope(rec["url"].split("?", 1)[1], rec["header"]["Content-Type"][0], body)


def test_a_spool_file_reads_back_as_the_push(tmp_path):
    spool = Spool(tmp_path)
    push = _dd(0)
    entry = spool.put(push, "127.0.0.1")
    assert [p.name for p in spool.pending()] == [entry.name]
    back, header = decode_push(entry.path.read_bytes(), "x")
    assert back == push and header["client"] == "127.0.0.1"
    assert list(spool.tmp.iterdir()) == []


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_a_damaged_spool_file_is_refused_whole(tmp_path, caplog, damage):
    caplog.set_level(logging.WARNING, logger="pyproflab.serve")
    spool = Spool(tmp_path / "spool")
    bad = spool.put(_dd(0))
    good = spool.put(_pyro(0))
    data = bad.path.read_bytes()
    if damage == "truncate":
        data = data[: len(data) - 100]
    elif damage == "flip":
        data = data[:-50] + bytes([data[-50] ^ 1]) + data[-49:]
    else:
        data = b"x" * 100
    bad.path.write_bytes(data)
    r = run_batch(spool, str(tmp_path / "s.duckdb"))
    assert (r.files, r.new, r.refused) == (2, 1, 1)
    assert spool.pending() == []
    assert (spool.refused / bad.name).exists()
    reason = (spool.refused / (bad.name + ".reason")).read_text().strip()
    assert reason.startswith(str(bad.path)), reason  # the whole file: no ': ' before it
    assert [
        row["source"].endswith(good.name + "#profile") for row in stored_rows(tmp_path / "s.duckdb")
    ] == [True]
    assert [m for m in caplog.messages if m.startswith("refused ")] == [
        f"refused {bad.name}: {reason}"
    ]


def test_a_push_whose_window_no_store_keeps_is_refused_alone(tmp_path):
    # Spooled by a server that did not check it: every batch raised, so the
    # ingester restarted forever and nothing behind it was stored.
    spool = Spool(tmp_path / "spool")
    push = _pyro(0)
    push.start_ns = 10**40
    bad = spool.put(push)
    spool.put(_pyro(1))
    r = run_batch(spool, str(tmp_path / "s.duckdb"))
    assert (r.files, r.new, r.refused) == (2, 1, 1)
    assert "outside the years 1970 to 9999" in (spool.refused / (bad.name + ".reason")).read_text()


def test_an_invalid_profile_is_refused_and_its_siblings_stored(tmp_path):
    push = _dd(1)
    n = len(push.profiles)
    push.attachments[[a.kind for a in push.attachments].index("profile")].data = b"\x1f\x8b garbage"
    spool = Spool(tmp_path / "spool")
    entry = spool.put(push)
    r = run_batch(spool, str(tmp_path / "s.duckdb"))
    assert (r.new, r.refused) == (n - 1, 1)
    assert "gzip" in (spool.refused / (entry.name + ".reason")).read_text()
    assert len(stored_rows(tmp_path / "s.duckdb")) == n - 1


def test_a_kill_between_commit_and_cleanup_stores_nothing_twice(tmp_path, monkeypatch):
    spool = Spool(tmp_path / "spool")
    for i in range(3):
        spool.put(_pyro(i))
    spool.put(_dd(0))
    db = str(tmp_path / "s.duckdb")

    def killed(entries):
        raise KeyboardInterrupt  # the process dies after the commit, before the clean-up

    monkeypatch.setattr(spool, "done", killed)
    with pytest.raises(KeyboardInterrupt):
        run_batch(spool, db)
    first = sorted(r["content_hash"] for r in stored_rows(tmp_path / "s.duckdb"))
    monkeypatch.undo()
    r = run_batch(spool, db)
    assert r.files == 4 and r.new == 0 and r.present == len(first)
    assert sorted(r["content_hash"] for r in stored_rows(tmp_path / "s.duckdb")) == first
    assert spool.pending() == []


def test_a_busy_store_leaves_the_batch_in_the_spool(tmp_path):
    db = tmp_path / "s.duckdb"
    spool = Spool(tmp_path / "spool")
    spool.put(_pyro(0))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pyproflab.store import Store\n"
            f"s = Store.open({str(db)!r}); print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        r = run_batch(spool, str(db), wait=0.2)
        assert r.busy and len(spool.pending()) == 1
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    r = run_batch(spool, str(db))
    assert r.new == 1 and spool.pending() == []


def test_no_room_on_the_disk_is_spool_full_and_leaves_nothing(tmp_path, monkeypatch):
    spool = Spool(tmp_path)
    real = os.write

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(SpoolFull) as e:
        spool.put(_dd(0))
    monkeypatch.setattr(os, "write", real)
    assert e.value.reason == "disk"
    assert list(spool.tmp.iterdir()) == [] and spool.pending() == []
    spool.put(_dd(0))
    assert len(spool.pending()) == 1


def test_tmp_leftovers_are_cleaned_and_one_server_per_spool(tmp_path):
    from pyproflab.sources.spool import SpoolError

    spool = Spool(tmp_path)
    (spool.tmp / "00000000000000000001-1-000000000.push").write_bytes(b"partial")
    assert spool.clean() == 1 and list(spool.tmp.iterdir()) == []
    spool.lock("server")
    with pytest.raises(SpoolError, match="another server"):
        Spool(tmp_path).lock("server")
    Spool(tmp_path).lock("ingester")


def test_concurrent_puts_share_the_folder_fsync(tmp_path, monkeypatch):
    import threading

    from pyproflab.sources import spool as spool_module

    calls = []
    real = spool_module._fsync_dir
    monkeypatch.setattr(spool_module, "_fsync_dir", lambda p: (calls.append(p), real(p)))
    spool = Spool(tmp_path)
    pushes = [_pyro(i) for i in range(8)]
    threads = [threading.Thread(target=lambda: [spool.put(p) for p in pushes]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = spool.pending()
    assert len(entries) == 64 and 1 <= len(calls) <= 64
    assert all(spool.read(e)[0].profiles for e in entries)


def _table_rows(db) -> dict[str, list[str]]:
    from pyproflab.store import Store

    out = {}
    with Store.open(str(db), read_only=True) as s:
        for t in ("profiles", "samples", "functions", "mappings", "locations", "stacks"):
            rows = s.sql(f"SELECT * FROM {t}").to_pylist()
            # the source names the spool file, whose name holds its receipt time
            drop = ("ingested_at", "source")
            out[t] = sorted(repr({k: v for k, v in r.items() if k not in drop}) for r in rows)
        out["label_sets"] = sorted(map(repr, s.sql("SELECT * FROM label_sets").to_pylist()))
    return out


def test_keyed_together_or_one_by_one_the_store_holds_the_same_rows(tmp_path):
    dbs = []
    for together in (1, 64):
        spool = Spool(tmp_path / f"spool{together}")
        for i in range(6):
            spool.put(_pyro(i))
        for i in range(2):
            spool.put(_dd(i))
        db = tmp_path / f"s{together}.duckdb"
        r = run_batch(spool, str(db), key_together=together)
        assert r.files == 8 and r.refused == 0 and spool.pending() == []
        dbs.append(db)
    assert _table_rows(dbs[0]) == _table_rows(dbs[1])


def test_an_item_the_batch_cannot_key_is_refused_alone():
    from datetime import UTC, datetime

    from pyproflab.decode import decode_bytes
    from pyproflab.keying.keys import KeyedProfile
    from pyproflab.sources.base import ItemMeta, ProfileItem
    from pyproflab.store.sourced import item_bytes, key_items

    push = _dd(0)
    decoded = []
    for k, att in enumerate(push.profiles[:3]):
        meta = ItemMeta(service="s", profile_type="nonsense" if k == 1 else None)
        data = pprof_bytes(att.data, source="t", max_bytes=1 << 30)
        item = ProfileItem(meta, data=data, key=f"f#{k}")
        raw, item.content_hash = item_bytes(item, 1 << 30)
        decoded.append((item, decode_bytes(raw)))
    got = key_items(decoded, datetime.now(UTC))
    assert isinstance(got[0], KeyedProfile) and isinstance(got[2], KeyedProfile)
    assert isinstance(got[1], str) and "unknown profile type 'nonsense'" in got[1]


def _spool_of_two_shares(root, n: int = 12) -> Spool:
    from pyproflab.sources.spool import in_part

    spool = Spool(root)
    # The names (hence the shares) follow the clock: put more until both shares hold
    # files (12 alone leave one empty once in 2,048 runs; 42 once in 2^41).
    for i in range(n + 30):
        if i >= n and {in_part(e.name, (0, 2)) for e in spool.pending()} == {True, False}:
            break
        spool.put(_pyro(i % len(PYRO)) if i % 3 else _dd(i % len(DD)))
    names = [e.name for e in spool.pending()]
    assert {in_part(name, (0, 2)) for name in names} == {True, False}  # both shares hold files
    return spool


def test_two_shares_take_every_file_exactly_once(tmp_path, monkeypatch):
    spool = _spool_of_two_shares(tmp_path / "spool")
    every = [e.name for e in spool.pending()]
    shares = [[e.name for e in spool.pending(part=(i, 2))] for i in range(2)]
    assert sorted(shares[0] + shares[1]) == every and not set(shares[0]) & set(shares[1])
    assert all(s == sorted(s) for s in shares)  # oldest first within a share
    assert spool.pending(2, part=(1, 2)) == spool.pending(part=(1, 2))[:2]
    taken = []
    real = spool.done
    monkeypatch.setattr(spool, "done", lambda entries: (taken.extend(entries), real(entries)))
    db = str(tmp_path / "s.duckdb")
    r0 = run_batch(spool, db, part=(0, 2))
    assert spool.depth()[0] == len(shares[1])  # the lag's count: the whole spool
    r1 = run_batch(spool, db, part=(1, 2))
    assert (r0.files, r1.files) == (len(shares[0]), len(shares[1])) and spool.pending() == []
    assert sorted(e.name for e in taken) == every
    hashes = [r["content_hash"] for r in stored_rows(tmp_path / "s.duckdb")]
    assert r0.new + r1.new == len(hashes) == len(set(hashes)) and hashes


def test_a_killed_share_leaves_the_other_alone_and_stores_nothing_twice(tmp_path, monkeypatch):
    spool = _spool_of_two_shares(tmp_path / "spool")
    share0 = [e.name for e in spool.pending(part=(0, 2))]
    share1 = [e.name for e in spool.pending(part=(1, 2))]
    db = str(tmp_path / "s.duckdb")

    def killed(entries):
        raise KeyboardInterrupt  # share 0's ingester dies after its commit

    monkeypatch.setattr(spool, "done", killed)
    with pytest.raises(KeyboardInterrupt):
        run_batch(spool, db, part=(0, 2))
    monkeypatch.undo()
    assert [e.name for e in spool.pending(part=(1, 2))] == share1  # untouched
    before = stored_rows(tmp_path / "s.duckdb")
    # Which share holds the dd-trace push with its trace depends on the spool's file
    # names (the time): a trace found present again counts once, as a trace, not as
    # the blocking profiles stored with it.
    first = sum(not r["profile_type"].startswith("trace-") for r in before)
    r1 = run_batch(spool, db, part=(1, 2))  # the other share goes on meanwhile
    assert r1.files == len(share1) and r1.present == 0
    assert [e.name for e in spool.pending()] == share0  # share 0 waits for its restart
    r0 = run_batch(spool, db, part=(0, 2))
    assert r0.files == len(share0) and (r0.new, r0.present) == (0, first + r0.traces)
    hashes = [r["content_hash"] for r in stored_rows(tmp_path / "s.duckdb")]
    assert len(hashes) == len(set(hashes)) == len(before) + r1.new and spool.pending() == []


def test_each_share_has_its_own_ingester_lock(tmp_path):
    from pyproflab.sources.spool import SpoolError, part_role

    Spool(tmp_path).lock(part_role((0, 2)))
    Spool(tmp_path).lock(part_role((1, 2)))
    with pytest.raises(SpoolError, match="another ingester-1-of-2"):
        Spool(tmp_path).lock(part_role((1, 2)))
    assert part_role(None) == part_role((0, 1)) == "ingester"
