"""The `serve` and `spool-ingest` commands: one-line errors, the systemd unit's
command line, a spool ingested once by the command."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest
from support.push_helpers import RECORDED, records, stored_rows
from support.testenv import REPO

from pyproflab.cli import build_parser
from pyproflab.sources.push import parse_pyroscope
from pyproflab.sources.spool import Spool


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pyproflab", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def test_no_token_no_public_address(tmp_path):
    res = cli("serve", "--spool", str(tmp_path / "s"), "--listen", "0.0.0.0:0", "--duration", "1")
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "127.0.0.1" in res.stderr


def test_bad_listen_and_token_file_are_one_line(tmp_path):
    res = cli("serve", "--spool", str(tmp_path / "s"), "--listen", "nowhere")
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    res = cli("serve", "--spool", str(tmp_path / "p"), "--listen", "127.0.0.1:99999")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr  # not a traceback
    assert "a port up to 65535" in res.stderr and not (tmp_path / "p").exists()
    bad = tmp_path / "tokens"
    bad.write_text("svc short\n")
    res = cli("serve", "--spool", str(tmp_path / "s"), "--tokens", str(bad), "--duration", "1")
    assert res.returncode == 2 and f"{bad}:1" in res.stderr and res.stderr.count("\n") == 1
    # --token holds to the file's rule: 'serve --token abc' listened, a 3-character secret
    res = cli("serve", "--spool", str(tmp_path / "t"), "--token", "abc", "--duration", "1")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "--token: a token of 8 characters or more" in res.stderr
    assert not (tmp_path / "t").exists()


def test_a_spool_that_is_a_file_is_one_line(tmp_path):
    """`--spool FILE` was a NotADirectoryError traceback (mkdir FILE/ready)."""
    a_file = tmp_path / "cpu.pb.gz"
    a_file.write_bytes(b"x")
    res = cli("serve", "--spool", str(a_file), "--listen", "127.0.0.1:0", "--duration", "1")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"pyproflab: error: --spool {a_file}: "), res.stderr
    assert "Traceback" not in res.stderr and a_file.read_bytes() == b"x"


def test_tls_files_that_do_not_load_are_one_line(tmp_path):
    """A --tls-cert/--tls-key that is not PEM was an ssl.SSLError traceback ('PEM
    lib'), a missing one a FileNotFoundError traceback; no spool is left."""
    not_pem = tmp_path / "cpu.pb.gz"
    not_pem.write_bytes(b"\x1f\x8b not a certificate")
    for cert, key in ((not_pem, not_pem), (tmp_path / "no.pem", tmp_path / "no.key")):
        spool = tmp_path / "s"
        res = cli("serve", "--spool", str(spool), "--listen", "127.0.0.1:0", "--duration", "1",
                  "--tls-cert", str(cert), "--tls-key", str(key))  # fmt: skip
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
        assert res.stderr.startswith(f"pyproflab: error: --tls-cert {cert}, --tls-key {key}: ")
        assert not spool.exists()


def test_a_db_the_ingester_cannot_open_stops_serve_at_start(tmp_path):
    """`--db` naming a file that is no store (or in a missing folder) served,
    acknowledged pushes, and restarted its ingester every second, each time
    failing 'not a DuckDB store'."""
    not_a_store = tmp_path / "cpu.pb.gz"
    not_a_store.write_bytes(b"\x1f\x8b not a store")
    for db, needle in (
        (not_a_store, "not a DuckDB store"),
        (tmp_path / "no" / "s.duckdb", "does not exist"),
    ):
        spool = tmp_path / "s"
        res = cli("serve", "--spool", str(spool), "--db", str(db), "--listen", "127.0.0.1:0",
                  "--duration", "1")  # fmt: skip
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
        assert res.stderr.startswith(f"pyproflab: error: {db}: ") and needle in res.stderr
        assert not spool.exists()
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize(
    ("flags", "named"),
    [(["--wait", "-1"], "--wait"), (["--wait", "nan"], "--wait"),
     (["--max-bytes", "-5"], "--max-bytes"), (["--max-bytes", "0"], "--max-bytes"),
     (["--duration", "5"], "--duration"), (["--follow", "--duration", "nan"], "--duration")],
)  # fmt: skip
def test_spool_ingest_refuses_bad_numbers_in_one_line(tmp_path, flags, named):
    """--wait -1 and nan, --max-bytes -5 and 0 (taken as no flag), --duration
    without --follow or NaN: all exited 0, the value ignored or misread."""
    _spool_of(tmp_path / "spool", 1)
    db = tmp_path / "s.duckdb"
    res = cli("spool-ingest", str(tmp_path / "spool"), "--db", str(db), *flags)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"pyproflab: error: {named} "), res.stderr
    assert not db.exists() and len(Spool(tmp_path / "spool").pending()) == 1


def test_the_systemd_unit_runs_a_valid_command_line():
    text = (REPO / "examples" / "pyproflab-serve.service").read_text()
    argv = shlex.split(text.split("ExecStart=", 1)[1].replace("\\\n", " ").splitlines()[0])
    assert argv[0].endswith("/pyproflab") and argv[1] == "serve"
    args = build_parser().parse_args(argv[1:])
    assert args.tokens and args.spool and args.db and args.listen.endswith(":4040")


def _spool_of(root, n: int) -> Spool:
    """A spool holding the first ``n`` recorded pyroscope-go pushes."""
    spool = Spool(root)
    for _, rec, body in records(RECORDED / "pyro")[:n]:
        ctype = rec["header"]["Content-Type"][0]
        spool.put(parse_pyroscope(rec["url"].split("?", 1)[1], ctype, body))
    return spool


def test_spool_ingest_once(tmp_path):
    spool = _spool_of(tmp_path / "spool", 3)
    db = tmp_path / "s.duckdb"
    res = cli("spool-ingest", str(tmp_path / "spool"), "--db", str(db))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "3 spool files: 3 new profiles, 0 present, 0 refused"
    assert len(stored_rows(db)) == 3 and spool.pending() == []


def test_spool_ingest_of_one_file_says_it_in_the_singular(tmp_path):
    """It said "1 spool files: 1 new profiles, 0 present, 0 refused"."""
    _spool_of(tmp_path / "spool", 1)
    res = cli("spool-ingest", str(tmp_path / "spool"), "--db", str(tmp_path / "s.duckdb"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "1 spool file: 1 new profile, 0 present, 0 refused"


def test_spool_ingest_by_shares_and_serve_starts_one_ingester_a_share(tmp_path):
    from pyproflab.serve.run import ingester_argv, ingester_argvs

    spool = _spool_of(tmp_path / "spool", 6)
    db = tmp_path / "s.duckdb"
    counts = []
    for part in ("1/2", "0/2"):
        res = cli("spool-ingest", str(tmp_path / "spool"), "--db", str(db), "--part", part)
        assert res.returncode == 0, res.stderr
        counts.append(int(res.stdout.split()[0]))
    assert sum(counts) == 6 and len(stored_rows(db)) == 6 and spool.pending() == []
    res = cli("spool-ingest", str(tmp_path / "spool"), "--db", str(db), "--part", "2/2")
    assert res.returncode == 2 and "I/N" in res.stderr
    argvs = ingester_argvs("SP", "DB", ["--max-bytes", "9"], 2)
    assert [a[a.index("--part") + 1] for a in argvs] == ["0/2", "1/2"]
    assert ingester_argvs("SP", "DB", [], 1) == [ingester_argv("SP", "DB", [])]
    assert "--part" not in ingester_argv("SP", "DB", [])


def test_serve_with_two_ingesters_stores_the_spool_once(tmp_path):
    import socket
    import threading
    import time

    spool = _spool_of(tmp_path / "spool", 6)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = tmp_path / "s.duckdb"
    argv = ["serve", "--spool", str(tmp_path / "spool"), "--db", str(db), "--ingesters", "2"]
    server = subprocess.Popen(
        [sys.executable, "-m", "pyproflab", *argv, "--listen", f"127.0.0.1:{port}"],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(server.stderr), daemon=True)
    reader.start()

    def ingested() -> int:
        batches = [ln for ln in list(lines) if " ingested " in ln]
        return sum(int(ln.split(" ingested ")[1].split()[0]) for ln in batches)

    # Stopped once the batches' lines count every file, not when the spool
    # empties: an ingester removes its files just before it logs them.
    try:
        end = time.monotonic() + 300  # bounds a hang only (serve starts in 11-22 s under load)
        while (spool.pending() or ingested() < 6) and time.monotonic() < end:
            time.sleep(0.2)
    finally:
        server.terminate()
        server.wait(timeout=60)
        reader.join(timeout=60)
    err = "".join(lines)
    assert server.returncode == 0 and spool.pending() == [], err[-2000:]
    hashes = [r["content_hash"] for r in stored_rows(db)]
    assert len(hashes) == len(set(hashes)) == 6
    assert ingested() == 6, err[-2000:]


STOPPED_AT = """
import os, signal, sys, time
from pyproflab.cli import main
from pyproflab.serve import ingester
from pyproflab.sources.spool import Spool
def stop(*args, **kw):  # SIGTERM lands right here, as the server's stop may
    os.kill(os.getpid(), signal.SIGTERM)
    while True:
        time.sleep(1)
if sys.argv[1] == "follow":  # following the spool
    ingester.follow = stop
else:  # still starting: before it follows
    Spool.lock = stop
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("where", ["follow", "start"])
def test_servers_planned_stop_of_its_ingester_is_silent(tmp_path, where):
    """`serve --duration 3` printed "pyproflab: terminated" (exit 0) at its planned
    stop: the server ends its ingester child with SIGTERM, and the child, a
    `spool-ingest --follow` that had got past its start-up, took it as a foreign
    SIGTERM (and still did where the stop found it starting, after the CLI took
    SIGTERM over). The child serve starts takes SIGTERM as its stop: exit 0, no message;
    a `spool-ingest --follow` of its own still exits 143, "terminated"."""
    from pyproflab.serve.run import ingester_argv

    (tmp_path / "spool").mkdir()
    served = ingester_argv(str(tmp_path / "spool"), str(tmp_path / "s.duckdb"), [])
    assert served[1:3] == ["-m", "pyproflab"]
    plain = [a for a in served[3:] if a != "--served"]
    for argv, want in ((served[3:], (0, "")), (plain, (143, "pyproflab: terminated\n"))):
        res = subprocess.run(
            [sys.executable, "-c", STOPPED_AT, where, *argv],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
        lines = [x for x in res.stderr.splitlines(True) if "terminated" in x or "Error" in x]
        assert (res.returncode, "".join(lines)) == want, (argv, res.stderr)


def test_spool_ingest_of_refused_files_only_is_exit_2(tmp_path):
    """A spool-ingest that took files and stored none of them (every one refused,
    as a spool another release wrote would be) exited 0 under '2 spool files: 0
    new profiles, 0 present, 2 refused': a scheduler read success. It is 2 now,
    as ingest's, with one line saying where the refused files are; a spool with
    one good file beside them stays 0."""
    spool = _spool_of(tmp_path / "spool", 1)
    for i in range(2):
        (spool.ready / f"100{i}-1-{i}-8.push").write_bytes(b"garbage\n")
    db = tmp_path / "s.duckdb"
    res = cli("spool-ingest", str(tmp_path / "spool"), "--db", str(db), "--batch-files", "2")
    assert res.returncode == 0, res.stderr  # the good file is stored
    assert res.stdout.strip() == "3 spool files: 1 new profile, 0 present, 2 refused"
    for i in range(2):
        (spool.ready / f"200{i}-1-{i}-8.push").write_bytes(b"garbage\n")
    res = cli("spool-ingest", str(tmp_path / "spool"), "--db", str(db))
    assert res.returncode == 2, res.stdout
    assert res.stdout.strip() == "2 spool files: 0 new profiles, 0 present, 2 refused"
    assert res.stderr.strip().endswith(
        f"pyproflab: error: every spool file was refused (2): see {spool.refused}/ "
        "and the .reason beside each"
    )
