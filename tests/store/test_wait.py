"""Readers can wait (issue 35, finding 10): every command that opens the store
takes ``--wait SECONDS``, and ``pyproflab.open()`` takes ``wait=``; a store
another process holds is then waited for instead of refused at once."""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.store_helpers import make_profile

import pyproflab
from pyproflab.cli import build_parser, main
from pyproflab.errors import StoreError
from pyproflab.store import Store
from pyproflab.store.ingest import ProfileMeta, ingest

# serve does not open the store: its ingester (spool-ingest) does, with its own --wait.
NOT_OPENING = {"pyproflab serve"}


def _commands(p: argparse.ArgumentParser, path: list[str]):
    opts = {o for a in p._actions for o in a.option_strings}
    if "--db" in opts:
        yield " ".join(path), "--wait" in opts
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _commands(sub, [*path, name])


def test_every_command_that_opens_the_store_has_wait() -> None:
    found = dict(_commands(build_parser(), ["pyproflab"]))
    assert len(found) >= 15
    assert {c for c, has in found.items() if not has} == NOT_OPENING


class Holder:
    """A writer in another process holding a store until ``release()``."""

    def __init__(self, db: Path) -> None:
        code = (
            "import sys\nfrom pyproflab.store import Store\n"
            f"s = Store.open({str(db)!r})\nprint('ok', flush=True)\n"
            "sys.stdin.readline()\ns.close()\nprint('closed', flush=True)\nsys.stdin.readline()\n"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout.readline().strip() == "ok"
        self.released = None

    def release(self) -> None:
        self.released = time.monotonic()  # before: an opener can get in at once
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "closed"

    def release_after(self, seconds: float) -> threading.Timer:
        t = threading.Timer(seconds, self.release)
        t.start()
        return t


@pytest.fixture
def held(tmp_path: Path):
    db = tmp_path / "s.duckdb"
    with Store.open(str(db)) as s:
        ingest(s, [(make_profile([(["main.a"], [1, 10])]), ProfileMeta(service="x"))])
    holder = Holder(db)
    try:
        yield db, holder
    finally:
        holder.proc.kill()
        holder.proc.wait()


def _top(db: Path, *wait: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pyproflab", "top", "--db", str(db), "--type", "cpu", *wait],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_top_without_wait_is_refused_at_once(held) -> None:
    db, _ = held
    r = _top(db)
    assert r.returncode == 2 and "store is busy" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.strip().endswith("or pass --wait SECONDS")


def test_top_with_wait_waits_for_the_holder(held) -> None:
    db, holder = held
    timer = holder.release_after(3.0)
    r = _top(db, "--wait", "60")
    timer.join()
    assert r.returncode == 0, r.stderr
    assert "main.a" in r.stdout


def test_open_waits(held) -> None:
    db, holder = held
    timer = holder.release_after(1.0)
    with pyproflab.open(db, read_only=True, wait=60) as lab:
        assert holder.released is not None  # it opened once the holder let go
        assert lab.store.counts()["profiles"] == 1
    timer.join()


def test_open_without_wait_is_refused(held) -> None:
    db, _ = held
    with pytest.raises(StoreError, match="store is busy"):
        pyproflab.open(db, read_only=True)


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_a_bad_wait_is_one_line(tmp_path: Path, capsys, value: str) -> None:
    assert main(["top", "--db", str(tmp_path / "s.duckdb"), f"--wait={value}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--wait must be a number of seconds >= 0" in err
