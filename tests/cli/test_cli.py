"""The CLI as a user meets it: bad input gives one line and exit 2, never a
traceback, and leaves the store exactly as it was; good input works end to end."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from pyproflab.store import Store

GZIP_BOMB_BYTES = 3 << 30  # inflates to 3 GiB, three times the default cap


def pyproflab(
    *args: str, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run the CLI in a fresh process, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "pyproflab", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def assert_user_error(res: subprocess.CompletedProcess, *needles: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{res.stderr}"
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def store_state(db: Path) -> tuple[dict[str, int], list[str]]:
    with Store.open(db, read_only=True) as store:
        hashes = store.sql("SELECT content_hash FROM profiles ORDER BY 1").column(0).to_pylist()
        return store.counts(), hashes


def gzip_bomb(path: Path, size: int = GZIP_BOMB_BYTES) -> None:
    """A small file of gzip members that together inflate to ``size`` zero bytes."""
    member_size = 64 << 20
    member = gzip.compress(bytes(member_size), compresslevel=9)
    with open(path, "wb") as f:
        for _ in range(size // member_size):
            f.write(member)


def bad_inputs(tmp: Path, good: bytes) -> dict[str, Path]:
    """Files that are not valid profiles, each of a different kind."""
    raw = zlib.decompress(good, wbits=16 + zlib.MAX_WBITS) if good[:2] == b"\x1f\x8b" else good
    rng = random.Random(7)
    flipped = bytearray(raw)
    # Flip bits in the first bytes, where the structure (tags, lengths) is.
    for i in rng.sample(range(min(len(flipped), 64)), 8):
        flipped[i] ^= 0xFF
    files = {
        "empty.pb.gz": b"",
        "truncated-gzip.pb.gz": gzip.compress(raw)[: len(gzip.compress(raw)) // 2],
        "truncated-raw.pb": raw[: len(raw) // 2 + 1],
        "bitflipped.pb": bytes(flipped),
        "random.pb.gz": rng.randbytes(4096),
        "profile.json": json.dumps({"samples": [1, 2, 3]}).encode(),
        "notes.txt": b"this is not a profile\n",
    }
    out = {}
    for name, data in files.items():
        p = tmp / name
        p.write_bytes(data)
        out[name] = p
    return out


@pytest.fixture(scope="module")
def store_with_one(go_profiles, tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("store") / "fleet.duckdb"
    res = pyproflab("ingest", go_profiles["cpu"], "--db", db, "--service", "demo")
    assert res.returncode == 0, res.stderr
    return db


def test_top_file_text_and_csv(go_profiles):
    res = pyproflab("top", go_profiles["cpu"])
    assert res.returncode == 0, res.stderr
    assert "flat%" in res.stdout and "main." in res.stdout
    res = pyproflab("top", go_profiles["cpu"], "--format", "csv", "--granularity", "lines")
    assert res.returncode == 0, res.stderr
    header = res.stdout.splitlines()[0]
    assert header.startswith("flat,flat_pct,sum_pct,cum,cum_pct,name,file,line")


def test_ingest_twice_is_a_no_op(go_profiles, tmp_path):
    db = tmp_path / "s.duckdb"
    first = pyproflab("ingest", go_profiles["cpu"], go_profiles["heap"], "--db", db)
    assert first.returncode == 0, first.stderr
    assert "2 new" in first.stdout
    before = store_state(db)
    again = pyproflab("ingest", go_profiles["cpu"], go_profiles["heap"], "--db", db)
    assert again.returncode == 0, again.stderr
    assert "0 new" in again.stdout and "2 already present" in again.stdout
    assert store_state(db) == before


def test_regzipped_copy_is_the_same_profile(go_profiles, tmp_path):
    db = tmp_path / "s.duckdb"
    raw = tmp_path / "cpu.pb"
    raw.write_bytes(gzip.decompress(go_profiles["cpu"].read_bytes()))
    res = pyproflab("ingest", go_profiles["cpu"], raw, "--db", db)
    assert res.returncode == 0, res.stderr
    assert "1 new" in res.stdout and "1 already present" in res.stdout


@pytest.mark.parametrize(
    "name",
    [
        "empty.pb.gz",
        "truncated-gzip.pb.gz",
        "truncated-raw.pb",
        "bitflipped.pb",
        "random.pb.gz",
        "profile.json",
        "notes.txt",
    ],
)
def test_bad_input_one_line_exit_2_store_untouched(name, go_profiles, store_with_one, tmp_path):
    bad = bad_inputs(tmp_path, go_profiles["cpu"].read_bytes())[name]
    before = store_state(store_with_one)

    res = pyproflab("top", bad)
    assert_user_error(res, str(bad))

    res = pyproflab("ingest", bad, "--db", store_with_one, "--strict")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert str(bad) in res.stderr
    assert store_state(store_with_one) == before


def test_bad_file_among_good_ones_is_refused_alone(go_profiles, tmp_path):
    db = tmp_path / "s.duckdb"
    bad = bad_inputs(tmp_path, go_profiles["cpu"].read_bytes())["random.pb.gz"]
    res = pyproflab("ingest", go_profiles["cpu"], bad, go_profiles["heap"], "--db", db)
    assert res.returncode == 0, res.stderr
    assert "2 new" in res.stdout and "1 refused" in res.stdout
    assert f"refused {bad}" in res.stderr
    assert "InputsRefused" not in res.stderr  # the Python API's warning: said once already


def test_fifos_and_symlink_loops_are_refused_without_blocking(go_profiles, tmp_path):
    # Opening a FIFO for reading blocks until a writer comes: none ever does.
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "cpu.pb.gz").write_bytes(go_profiles["cpu"].read_bytes())
    fifo = folder / "fifo.pb.gz"
    os.mkfifo(fifo)
    (folder / "self").symlink_to("self")
    (folder / "sub" / "up").symlink_to("..")
    db = tmp_path / "s.duckdb"
    res = pyproflab("ingest", folder, "--db", db)
    assert res.returncode == 0 and "1 new" in res.stdout and "2 refused" in res.stdout, res
    assert f"refused {fifo}: cannot read: a FIFO, not a regular file" in res.stderr
    assert f"refused {folder / 'self'}: cannot read: " in res.stderr
    assert_user_error(pyproflab("ingest", fifo, "--db", db), str(fifo), "FIFO")
    assert_user_error(pyproflab("top", fifo), str(fifo), "FIFO")
    assert_user_error(pyproflab("trace", "goroutines", fifo), str(fifo), "FIFO")
    assert_user_error(pyproflab("ingest-gc", fifo, "--format", "gctrace"), str(fifo), "FIFO")


def test_a_recursive_glob_does_not_follow_a_link_back_up(go_profiles, tmp_path):
    # glob's ** follows links to folders: sub/up -> .. repeated the tree 40 times (the
    # limit of links), and top merged the one profile 41 times.
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "cpu.pb.gz").write_bytes(go_profiles["cpu"].read_bytes())
    (folder / "sub" / "up").symlink_to("..")
    res = pyproflab("ingest", f"{folder}/**", "--db", tmp_path / "s.duckdb")
    assert res.returncode == 0 and res.stdout.startswith("1 new, 0 already present, 0 refused")
    one, globbed = (
        pyproflab("top", p, "--format", "json") for p in (folder / "cpu.pb.gz", f"{folder}/**")
    )
    assert json.loads(globbed.stdout) == json.loads(one.stdout), globbed.stderr


def test_corpus_malformed_profile_is_refused(corpus_dir):
    bad = corpus_dir / "pyroscope/pkg/og/convert/pprof/testdata/dotnet-pprof-73.pb.gz"
    res = pyproflab("top", bad)
    assert_user_error(res, "dotnet-pprof-73.pb.gz", "reserved")


def test_gzip_bomb_is_refused_with_bounded_memory(tmp_path, store_with_one):
    bomb = tmp_path / "bomb.pb.gz"
    gzip_bomb(bomb)
    before = store_state(store_with_one)
    cmd = [
        sys.executable,
        "-m",
        "pyproflab",
        "ingest",
        str(bomb),
        "--db",
        str(store_with_one),
        "--strict",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    stderr = proc.stderr.read()
    assert os.waitstatus_to_exitcode(status) == 2, stderr
    assert "Traceback" not in stderr and "cap" in stderr, stderr
    peak = usage.ru_maxrss * 1024
    # The default cap is 1 GiB of decompressed bytes; the bomb inflates to 3 GiB.
    assert peak < (1 << 30) + (700 << 20), f"peak RSS {peak / 2**20:.0f} MiB"
    assert store_state(store_with_one) == before


def test_missing_store_and_bad_flags(tmp_path, go_profiles):
    res = pyproflab("top", "--db", tmp_path / "nope.duckdb")
    assert_user_error(res, "nope.duckdb")
    res = pyproflab("top", go_profiles["cpu"], "--granularity", "bogus")
    assert_user_error(res, "granularity")
    res = pyproflab("top", tmp_path / "missing.pb.gz")
    assert_user_error(res, "missing.pb.gz")
    res = pyproflab("top", go_profiles["cpu"], "--sample-index", "no_such_type")
    assert_user_error(res, "no_such_type")
    res = pyproflab(
        "ingest", go_profiles["cpu"], "--db", tmp_path / "x.duckdb", "--label", "novalue"
    )
    assert_user_error(res, "KEY=VALUE")


def test_not_a_store(tmp_path):
    fake = tmp_path / "fake.duckdb"
    fake.write_text("hello")
    res = pyproflab("top", "--db", fake)
    assert_user_error(res, "fake.duckdb")


def test_merge_cli_writes_a_profile_pprof_reads(go_profiles, tmp_path):
    out = tmp_path / "merged.pb.gz"
    res = pyproflab("merge", go_profiles["cpu"], go_profiles["cpu2"], "-o", out)
    assert res.returncode == 0, res.stderr
    import pyproflab as ppl

    merged = ppl.read_profile(out)
    a, b = ppl.read_profile(go_profiles["cpu"]), ppl.read_profile(go_profiles["cpu2"])
    idx = merged.default_sample_index()
    assert merged.total(idx) == a.total(idx) + b.total(idx)


def test_store_top_and_profiles_listing(store_with_one):
    res = pyproflab("profiles", "--db", store_with_one, "--format", "json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert len(rows) == 1 and rows[0]["service"] == "demo" and rows[0]["profile_type"] == "cpu"
    res = pyproflab("top", "--db", store_with_one, "--service", "demo", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["rows"]
    res = pyproflab("top", "--db", store_with_one, "--service", "nobody")
    assert_user_error(res, "no profiles")
