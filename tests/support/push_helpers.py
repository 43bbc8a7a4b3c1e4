"""Helpers for the `pyproflab serve` tests: the real SDKs' recorded requests, the
pushers built from tests/pushers, a server in this process, and the oracle.

- ``RECORDED``: tests/testdata/push/{dd,pyro}/NNNNNN.{json,body}, requests of
  dd-trace-go's profiler and pyroscope-go recorded at the client's transport
  (``tests/pushers/internal/capture``) by ``record_pushes.py``;
- ``pushers_bin``: the pushers (ddpush, pyropush, attachments), built once;
- ``running_server``: a ``PushServer`` on a free port, in a thread;
- ``split_records``: every recorded body split into its parts by the Go
  program ``attachments`` (Go's mime/multipart, klauspost's zstd), never by
  pyproflab's parser;
- ``stored_hashes`` / ``expected_hashes``: the content hashes in a store, and
  those of the profile parts of acknowledged requests (sha256 of the
  decompressed protobuf, the store's rule);
- ``TRACE_TYPES`` / ``pushed``: the profile types the store makes from a
  stored execution trace, and the rows without them; ``trace_hashes`` /
  ``stored_traces``: the sha256 of the ``go.trace`` parts, and the stored
  traces' rows.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.client
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.testenv import REPO, go_env

RECORDED = REPO / "tests" / "testdata" / "push"
PUSHERS = REPO / "tests" / "pushers"


def records(folder: Path) -> list[tuple[Path, dict, bytes]]:
    """(json path, record, body) of every recorded request in ``folder``, in order."""
    out = []
    for p in sorted(folder.glob("*.json")):
        rec = json.loads(p.read_text())
        out.append((p, rec, p.with_suffix(".body").read_bytes()))
    return out


def request_target(rec: dict) -> str:
    """The path and query of a recorded request (the recording's host dropped)."""
    url = rec["url"]
    return url[url.index("/", url.index("//") + 2) :]


def replay(port: int, rec: dict, body: bytes, headers: dict | None = None) -> tuple[int, dict]:
    """Send one recorded request to 127.0.0.1:port; (status, response headers)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        h = {k: v[0] for k, v in rec["header"].items()}
        h.update(headers or {})
        conn.request(rec["method"], request_target(rec), body=body, headers=h)
        resp = conn.getresponse()
        resp.read()
        return resp.status, dict(resp.getheaders())
    finally:
        conn.close()


@pytest.fixture(scope="session")
def pushers_bin(go_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/pushers built once: a folder holding ddpush, pyropush and attachments."""
    out = tmp_path_factory.mktemp("pushers")
    res = subprocess.run(
        [go_bin, "build", "-o", str(out) + "/", "./cmd/..."],
        cwd=PUSHERS,
        env=go_env(out),
        capture_output=True,
        text=True,
        timeout=900,
    )
    if res.returncode != 0:
        pytest.fail(f"go build of tests/pushers failed (make go-deps?):\n{res.stderr[-3000:]}")
    return out


@contextlib.contextmanager
def running_server(spool_dir: Path, **options) -> Iterator:
    """A PushServer on 127.0.0.1 and a free port, serving in a thread."""
    from pyproflab.serve.guard import Tokens
    from pyproflab.serve.server import Options, PushServer
    from pyproflab.sources.spool import Spool

    tokens = Tokens(options.pop("tokens", None))
    spool = Spool(spool_dir, **options.pop("spool", {}))
    server = PushServer(Options(port=0, **options), spool, tokens)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        t.join(timeout=10)


def split_records(bins: Path, json_paths: list[Path], out: Path) -> dict[str, dict[str, Path]]:
    """record name -> {part name: file} through the Go ``attachments`` program."""
    if json_paths:
        subprocess.run(
            [str(bins / "attachments"), str(out), *map(str, json_paths)],
            check=True,
            timeout=120,
        )
    return {p.stem: {f.name: f for f in sorted((out / p.stem).iterdir())} for p in json_paths}


def is_profile_part(name: str) -> bool:
    return name == "profile" or name.endswith(".pprof")


def proto_sha256(path: Path) -> str:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return hashlib.sha256(data).hexdigest()


def expected_hashes(parts: dict[str, dict[str, Path]]) -> dict[str, Path]:
    """content hash -> file of every profile part in ``parts``."""
    return {
        proto_sha256(f): f
        for files in parts.values()
        for name, f in files.items()
        if is_profile_part(name)
    }


TRACE_TYPES = frozenset({"trace-net", "trace-sync", "trace-syscall", "trace-sched"})


def pushed(rows: list[dict]) -> list[dict]:
    """The rows of profiles the SDKs pushed (not those made from a stored trace)."""
    return [r for r in rows if r["profile_type"] not in TRACE_TYPES]


def trace_hashes(parts: dict[str, dict[str, Path]]) -> set[str]:
    """sha256 of every execution trace part (zstd undone by the Go split)."""
    return {
        hashlib.sha256(f.read_bytes()).hexdigest()
        for files in parts.values()
        for name, f in files.items()
        if name == "go.trace"
    }


def stored_traces(db: Path) -> list[dict]:
    """The stored traces: content hash, service, version, instance, profile ids."""
    from pyproflab.store import Store

    with Store.open(db, read_only=True) as store:
        cols = "content_hash, service, version, instance, profile_ids"
        return store.sql(f"SELECT {cols} FROM traces ORDER BY trace_id").to_pylist()


def stored_rows(db: Path) -> list[dict]:
    from pyproflab.store import Store

    with Store.open(db, read_only=True) as store:
        return store.profiles().to_pylist()


def drain(spool_dir: Path, db: Path) -> int:
    """Run the ingester until the spool is empty; the files it took."""
    from pyproflab.serve.ingester import run_batch
    from pyproflab.sources.spool import Spool

    spool, total = Spool(spool_dir), 0
    while True:
        r = run_batch(spool, str(db))
        if not r.files:
            return total
        total += r.files
