"""A store a command created is removed when the command leaves it holding no
data, whatever it raised; bookkeeping alone (remembered source items, job
runs) is not data; a store that existed before is never touched
(``cli.newstore.removed_if_empty``, used by ingest, ingest-gc, pull and collect)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyproflab.cli import main
from pyproflab.cli.newstore import removed_if_empty
from pyproflab.store import Store, queries

GO = Path(__file__).parents[1] / "testdata" / "go"


def test_an_error_after_the_store_is_made_removes_it(tmp_path):
    db = tmp_path / "s.duckdb"
    with pytest.raises(KeyboardInterrupt), removed_if_empty(str(db)):
        Store.open(db).close()
        raise KeyboardInterrupt
    assert not db.exists() and not Path(f"{db}.wal").exists()


def test_bookkeeping_alone_is_not_data(tmp_path):
    db = tmp_path / "s.duckdb"
    with removed_if_empty(str(db)), Store.open(db) as store:
        queries.create_source_tables(store)
        store.sql("INSERT INTO source_items VALUES ('pull', 'window-1', NULL, 'empty', now())")
    assert not db.exists()


def test_a_store_that_existed_before_is_kept_empty(tmp_path):
    db = tmp_path / "s.duckdb"
    Store.open(db).close()
    with pytest.raises(RuntimeError), removed_if_empty(str(db)):
        raise RuntimeError("the command failed")
    assert db.exists()


def test_a_store_with_a_profile_is_kept(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    with pytest.raises(KeyboardInterrupt), removed_if_empty(str(db)):
        assert main(["ingest", "--db", str(db), str(GO / "cpu.pb.gz")]) == 0
        raise KeyboardInterrupt  # after the profile landed: it stays
    with Store.open(db, read_only=True) as store:
        assert store.counts()["profiles"] == 1


def test_collect_interrupted_leaves_no_store_it_made(tmp_path, monkeypatch, capsys):
    """Before, only a collect that ended with nothing removed its store: one
    stopped by Ctrl-C (or failing) after opening it left an empty store."""
    import pyproflab.collect

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pyproflab.collect, "collect", interrupted)
    targets = tmp_path / "targets.toml"
    targets.write_text(
        '[[target]]\nservice="a"\nversion="v1"\ninstance="i"\nurl="http://127.0.0.1:9/"\n'
    )
    db = tmp_path / "s.duckdb"
    assert main(["collect", "--db", str(db), str(targets)]) == 130
    assert not db.exists()
