"""Helpers for the pull tests (Datadog, Pyroscope, Parca against their test servers).

- ``cli(...)``: ``python -m pyproflab`` in a subprocess (with an environment);
  ``pull(...)``: a ``pyproflab pull`` in one, killed past its deadline.
- ``store_top(db)`` / ``oracle_top(files)``: the store's ``top --db`` and
  ``go tool pprof -top`` of the served files, as comparable rows.
- ``assert_no_secret``: a secret appears in none of the texts and files given.
- ``CPU_FILES``: real Go CPU profiles recorded once (tests/testdata/go).
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from support import pprof_oracle as oracle
from support.testenv import REPO

GO = REPO / "tests" / "testdata" / "go"
CPU_FILES = [GO / n for n in ("cpu.pb.gz", "cpu2.pb.gz", "gcload.cpu.pb.gz", "notesd-cpu0.pb.gz",
                              "notesd-cpu1.pb.gz")]  # fmt: skip
#: CPU_FILES by version: the test servers label them so, one program's profiles each.
VERSIONS = {"v1": CPU_FILES[:3], "v2": CPU_FILES[3:]}


def version_of(i: int) -> str:
    """The version label of CPU_FILES[i]."""
    return "v1" if i < 3 else "v2"


HEAP_FILE = GO / "heap.pb.gz"


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pyproflab", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def on_a_terminal(*args: str, env: dict[str, str], timeout: float = 120) -> tuple[int, str, str]:
    """``python -m pyproflab ARGS`` with its stderr on a pseudo-terminal of 24 rows
    and 80 columns (so it sees one, as a user's shell would give it): (exit code,
    stdout, all the terminal got). A terminal of 0 rows (a new pty's size) gets
    no tqdm bar at all."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import termios
    import time

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyproflab", *args], cwd=REPO, env={**os.environ, **env},
        stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    os.close(follower)
    seen, deadline = bytearray(), time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([leader], [], [], 0.5)[0]:
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not chunk:
                break
            seen += chunk
        out = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
    finally:
        proc.kill()
        os.close(leader)
    return proc.returncode, out.decode(), seen.decode(errors="replace")


def top_rows(csv_text: str) -> list[tuple[str, int, int, str]]:
    """(name, flat, cum, inline marker) of ``pyproflab top --format csv``'s rows."""
    ours = []
    for row in csv.DictReader(io.StringIO(csv_text)):
        name = row.get("label") or row["name"]
        marker = row.get("inline") or ""
        for m in ("(partial-inline)", "(inline)"):
            if name.endswith(" " + m):
                name, marker = name[: -len(m) - 1], m
        ours.append((name, int(row["flat"]), int(row["cum"]), marker))
    return ours


def store_top(db: Path, *extra: str, sample_index: int = 1) -> list[tuple[str, int, int, str]]:
    # The oracle's own trimming: every node, and pprof's default edge fraction
    # (--no-trim would also drop that, as -trim=false does, and edges decide
    # the inline markers).
    res = cli("top", "--db", str(db), "--sample-index", str(sample_index),
              "--nodefraction", "0", "--nodecount", "1000000",
              "--format", "csv", *extra)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    return top_rows(res.stdout)


def assert_top_per_version(db: Path, what: str, groups: dict[str, list[Path]] = VERSIONS) -> None:
    """``top --db --version V`` equals ``go tool pprof -top`` of V's served files, and
    ``top --db`` that of them all."""
    from support.testenv import assert_same_rows

    for version, files in groups.items():
        rows = store_top(db, "--version", version)
        assert_same_rows(rows, oracle_top(files), f"{what}, version {version}")
    every = [f for files in groups.values() for f in files]
    assert_same_rows(store_top(db), oracle_top(every), f"{what}, every version")


def oracle_top(files: list[Path], sample_index: int = 1) -> oracle.TopReport:
    return oracle.top([str(f) for f in files], sample_index=sample_index, unit="nanoseconds")


def assert_no_secret(secret: str, texts: list[str], files: list[Path]) -> None:
    """``secret`` is in none of ``texts`` and none of ``files`` (read as bytes);
    nor in any row of a store among ``files`` (read through SQL: DuckDB may
    compress a string, so its bytes alone prove nothing)."""
    for i, text in enumerate(texts):
        assert secret not in text, f"the secret appears in text #{i}"
    for f in files:
        assert secret.encode() not in f.read_bytes(), f"the secret appears in {f}"
        if f.suffix == ".duckdb":
            assert not store_rows_holding(f, secret), f"the secret is in {f}'s rows"


def store_rows_holding(db: Path, secret: str) -> list[str]:
    """The tables of the store ``db`` with a row whose text holds ``secret`` (each
    whole row cast to text: every column, job and source state included)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        holding = 'SELECT count(*) FROM "{}" AS r WHERE strpos(CAST(r AS VARCHAR), ?) > 0'
        return [t for t in tables if con.execute(holding.format(t), [secret]).fetchone()[0]]
    finally:
        con.close()


def assert_jobs_write_no_secret(served, tmp: Path, kind: str, keys: str, token: str) -> None:
    """Jobs pulling from ``served`` (a test server requiring the Authorization value
    ``token``; ``keys``: the ``[[source]]``'s TOML lines besides kind, url and
    auth_env) write neither ``token``, nor a wrong token, nor a password put in
    the url, anywhere: stdout, stderr, the job's logs, outputs and state, the
    store's rows. One job runs twice, the first time with a retried 503 (a retry
    line in its log on stderr); one with a wrong token fails on an HTTP 401; one
    whose url holds a password is refused in one line before any request, and
    one whose url has no scheme (``user:password@host``, where urlsplit sees no
    credentials) too."""
    wrong, password = "Bearer wrong-SECRET-9f2", "pw-SECRET-in-url-4c1"
    with_password = served.url.replace("http://", f"http://bob:{password}@")
    bare = served.url.replace("http://", f"bob:{password}@")
    served.faults([{"path": "/", "kind": "status", "status": 503, "times": 1}])
    runs = []
    for name, url, value in (("good", served.url, token), ("good", served.url, token),
                             ("wrong", served.url, wrong), ("url", with_password, token),
                             ("bare", bare, token)):  # fmt: skip
        job = tmp / f"{name}.toml"
        job.write_text(
            f'[job]\nname = "{name}"\nstore = "s.duckdb"\noutput = "out"\n'
            f'[[source]]\nkind = "{kind}"\nurl = "{url}"\nauth_env = "PULL_AUTH"\n{keys}'
        )
        runs.append(cli("job", "run", str(job), env={"PULL_AUTH": value}))
    texts = [r.stdout + r.stderr for r in runs]
    written = [p for p in tmp.rglob("*") if p.is_file() and p.suffix not in (".json", ".toml")]
    written += [p for p in tmp.rglob("*.json") if "manifest" not in p.name]
    assert any(p.suffix == ".duckdb" for p in written) and any(p.parent != tmp for p in written)
    for secret in (token.split()[1], wrong.split()[1], password):
        assert_no_secret(secret, texts, written)
    good, again, bad, refused, schemeless = runs
    assert good.returncode == 0 and again.returncode == 0, good.stderr + again.stderr
    assert "HTTP 503 from" in good.stderr and "retry 1 in" in good.stderr  # the job's log
    assert bad.returncode == 2 and "HTTP 401 from" in bad.stderr, bad.stderr
    assert refused.returncode == 2, refused.stderr
    assert "the server's URL must not hold credentials" in refused.stderr
    assert schemeless.returncode == 2, schemeless.stderr
    assert "the server's URL must start with http:// or https://" in schemeless.stderr


def stored(db: Path) -> list[dict]:
    """The store's profiles: content_hash, service, version, instance, profile_type."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        cur = con.execute(
            "SELECT content_hash, service, version, instance, profile_type FROM profiles "
            "ORDER BY profile_id"
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    finally:
        con.close()


def profile_count(db: Path) -> int:
    return len(stored(db))


def served_hashes(files: list[Path]) -> set[str]:
    """The store's content hashes of ``files``: sha256 of their decompressed bytes."""
    import gzip
    import hashlib

    out = set()
    for f in files:
        data = f.read_bytes()
        out.add(
            hashlib.sha256(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).hexdigest()
        )
    return out


def assert_pgo_equal(db: Path, files: list[Path], tmp: Path, *selection: str) -> None:
    """``pgo --db`` over the pulled store writes the same bytes as over a store that
    ingested ``files`` (the same profiles, the same selection), and the samples and
    locations ``pgo FILES`` writes (pprof -raw, ids aside): ``pgo --db`` and ``pgo
    FILES`` differ in their bytes even for ingested files (sample order, mappings)."""
    every = ("--since", "2000-01-01T00:00", "--all")
    ingested = tmp / "ingested.duckdb"
    res = cli("ingest", *map(str, files), "--db", str(ingested), *selection)
    assert res.returncode == 0, res.stderr
    out = {}
    for name, args in (
        ("pulled", ["--db", str(db), *selection, *every]),
        ("ingested", ["--db", str(ingested), *selection, *every]),
        ("files", list(map(str, files))),
    ):
        out[name] = tmp / f"{name}.pgo"
        res = cli("pgo", *args, "--no-verify", "-o", str(out[name]))
        assert res.returncode == 0 and out[name].is_file(), res.stderr
    assert out["pulled"].read_bytes() == out["ingested"].read_bytes()
    pulled = oracle.canonical_raw(oracle.raw(out["pulled"]))
    direct = oracle.canonical_raw(oracle.raw(out["files"]))
    assert Counter(pulled.samples) == Counter(direct.samples)
    assert pulled.locations == direct.locations
