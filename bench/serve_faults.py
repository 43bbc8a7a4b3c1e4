"""Faults on `pyproflab serve` under load: SIGKILLs, a full disk, hostile clients.

    python -m bench.serve_faults [--kills 24] [--instances 100] [--interval 2]
                                 [--disk-mib 48] [--ingesters N] [--out DIR]

While loadgen replays the real SDKs' requests (INSTANCES instances, one push
every INTERVAL seconds each), this

- SIGKILLs the server and the ingester, alternately, KILLS times: the
  server 3 to 20 s after the last kill, the ingester 0 to 4 s after it
  stored a batch (it writes batches of 8 files, so its kills land before,
  during and after its transactions); a killed server is started again at
  once, a killed ingester is restarted by the server (with ``--ingesters
  N``, serve's own flag, the ingester killed is one of the N at random, after
  a batch stored by any of them; the others go on);
- puts the spool on a small ext4 file system (a loop mount of DISK_MIB MiB;
  tmpfs where loop devices are not allowed) and, half-way, stops the ingester
  (all of them: SIGSTOP) until the server answers 503 for lack of room, then lets it go on;
- runs hostile clients throughout: slowloris connections trickling bytes,
  bodies over the size cap, zstd and gzip bombs, wrong tokens.

Then it ingests what is left and checks: every profile of every acknowledged
push is stored; none twice; every stored profile has all its samples; each
refusal a client saw has its log line; the server's and the ingester's peak
RSS. Prints one JSON summary. Needs root for the loop mount (falls back to a
plain folder, without the full-disk phase, when it cannot mount).
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.serve_common import (
    RECORDED,
    build_pushers,
    children,
    free_port,
    loadgen_argv,
    proc_kib,
    serve_argv,
    stored_hashes,
)

TOKEN = "bench-token-0123456789"


def mount_small_disk(where: Path, mib: int) -> str | None:
    """A loop-mounted ext4 of ``mib`` MiB at ``where``; its image, or None."""
    where.mkdir(parents=True, exist_ok=True)
    img = str(where) + ".img"
    try:
        subprocess.run(["truncate", "-s", f"{mib}M", img], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", img], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "loop", img, str(where)], check=True, capture_output=True)
        return img
    except (subprocess.CalledProcessError, FileNotFoundError):
        try:
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={mib}M", "tmpfs", str(where)],
                check=True,
                capture_output=True,
            )
            return "tmpfs"
        except (subprocess.CalledProcessError, FileNotFoundError):
            return None


class Server:
    """`pyproflab serve` restarted after each kill; logs appended to one file."""

    def __init__(self, out: Path, port: int, spool: Path, db: Path, ingesters: int = 1):
        self.out, self.port, self.spool, self.db = out, port, spool, db
        self.ingesters = ingesters
        self.log = open(out / "serve.log", "a")  # noqa: SIM115
        self.proc: subprocess.Popen | None = None
        self.peak = {"server": 0, "ingester": 0}

    def start(self) -> None:
        self.proc = subprocess.Popen(
            serve_argv(
                self.spool,
                self.db,
                self.port,
                "--token",
                TOKEN,
                "--max-connections",
                "512",
                "--spool-min-free-mib",
                "1",
                "--idle",
                "5",
                "--deadline",
                "20",
                "--max-body-mib",
                "4",
                "--max-profile-mib",
                "16",
                "--retry-after",
                "2",
                "--ingest-batch-files",
                "8",
                "--ingesters",
                str(self.ingesters),
            ),
            stderr=self.log,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)

    def all_ingesters(self) -> list[int]:
        return sorted(children(self.proc.pid)) if self.proc else []

    def ingester(self, rng: random.Random | None = None) -> int | None:
        kids = self.all_ingesters()
        return (rng.choice(kids) if rng else kids[0]) if kids else None

    def sample(self) -> None:
        """Peak RSS of the server and of the largest ingester."""
        if self.proc:
            self.peak["server"] = max(self.peak["server"], proc_kib(self.proc.pid, "VmHWM"))
        for ing in self.all_ingesters():
            self.peak["ingester"] = max(self.peak["ingester"], proc_kib(ing, "VmHWM"))

    def kill(self) -> None:
        self.sample()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        ing = None
        for _ in range(50):  # the ingester dies with it (PR_SET_PDEATHSIG)
            ing = [p for p in Path("/proc").glob("[0-9]*") if _is_ingester(p, self.spool)]
            if not ing:
                break
            time.sleep(0.1)
        self.start()

    def stop(self) -> None:
        self.sample()
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=120)


def _is_ingester(proc: Path, spool: Path) -> bool:
    try:
        cmd = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"spool-ingest" in cmd and str(spool).encode() in cmd


def _request(port: int, path: str, body: bytes, headers: dict) -> int | None:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        conn.request("POST", path, body=body, headers=headers)
        status = conn.getresponse().status
        conn.close()
        return status
    except OSError:
        return None


def hostile(port: int, stop: threading.Event, seen: dict) -> None:
    """Bodies over the cap, bombs and wrong tokens, in turn, every 0.5 s."""
    from backports import zstd

    rec = json.loads((RECORDED / "pyro" / "000001.json").read_text())
    body = (RECORDED / "pyro" / "000001.body").read_bytes()
    ctype = rec["header"]["Content-Type"][0]
    path = rec["url"].split("recorded.invalid", 1)[1]
    boundary = ctype.split("boundary=")[1].encode()
    head, _, rest = body.partition(b"\r\n\r\n")
    tail = rest[rest.index(b"\r\n--" + boundary) :]
    raw = b"\0" * (64 << 20)
    bombs = [gzip.compress(raw, 9), zstd.compress(raw)]
    cases = [
        ("oversized", b"x" * (5 << 20), {"Authorization": f"Bearer {TOKEN}"}),
        ("gzip-bomb", head + b"\r\n\r\n" + bombs[0] + tail, {"Authorization": f"Bearer {TOKEN}"}),
        ("zstd-bomb", head + b"\r\n\r\n" + bombs[1] + tail, {"Authorization": f"Bearer {TOKEN}"}),
        ("wrong-token", body, {"Authorization": "Bearer not-the-token-000"}),
    ]
    i = 0
    while not stop.wait(0.5):
        name, data, headers = cases[i % len(cases)]
        status = _request(port, path, data, {"Content-Type": ctype, **headers})
        seen.setdefault(name, {}).setdefault(str(status), 0)
        seen[name][str(status)] += 1
        i += 1


def slowloris(port: int, stop: threading.Event, seen: dict, n: int = 40) -> None:
    """``n`` connections trickling a request a byte a second, reopened when cut."""
    socks: list[socket.socket] = []
    line = b"POST /ingest HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n"
    pos: dict[int, int] = {}
    while not stop.wait(1.0):
        while len(socks) < n:
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
                socks.append(s)
                pos[id(s)] = 0
            except OSError:
                break
        for s in list(socks):
            try:
                s.send(line[pos[id(s)] % len(line) : pos[id(s)] % len(line) + 1])
                pos[id(s)] += 1
            except OSError:
                seen["cut"] = seen.get("cut", 0) + 1
                socks.remove(s)
                s.close()
    for s in socks:
        s.close()


def whole_profiles(db: Path) -> tuple[int, int]:
    """(profiles, profiles whose stored samples differ from their num_samples)."""
    code = (
        "from pyproflab.store import Store\n"
        f"s = Store.open({str(db)!r}, read_only=True)\n"
        "t = s.sql('SELECT p.profile_id, p.num_samples, count(x.profile_id) AS n FROM profiles p '"
        "'LEFT JOIN samples x USING (profile_id) GROUP BY ALL')\n"
        "bad = sum(a != b for a, b in zip(t.column(1).to_pylist(), t.column(2).to_pylist()))\n"
        "print(t.num_rows, bad)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    a, b = res.stdout.split()
    return int(a), int(b)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=24)
    ap.add_argument("--instances", type=int, default=100)
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--disk-mib", type=int, default=48)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ingesters", type=int, default=1, help="serve --ingesters N")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    out = args.out or Path(tempfile.mkdtemp(prefix="serve-faults-"))
    out.mkdir(parents=True, exist_ok=True)
    bins = build_pushers(out / "bin")
    spool, db, port = out / "spool", out / "s.duckdb", free_port()
    disk = mount_small_disk(spool, args.disk_mib)
    server = Server(out, port, spool, db, args.ingesters)
    server.start()
    gen = subprocess.Popen(
        loadgen_argv(
            bins, port, args.instances, args.interval, 3600, out, "-token", TOKEN
        ),  # fmt: skip
        stdout=subprocess.PIPE,
        text=True,
    )
    stop, seen = threading.Event(), {}
    threads = [
        threading.Thread(target=f, args=(port, stop, seen), daemon=True)
        for f in (hostile, slowloris)
    ]
    for t in threads:
        t.start()
    kills = {"server": 0, "ingester": 0, "after_a_batch": 0}
    full = {"stopped_s": 0.0, "spool_503": False}
    try:
        for i in range(args.kills):
            server.sample()
            if i == args.kills // 2 and disk:
                full = fill_disk(server, spool)
            if i % 2 == 0:
                time.sleep(rng.uniform(3.0, 20.0))
                server.kill()
                kills["server"] += 1
            else:
                # The ingester is killed once it has stored a batch since it
                # started, 0 to 4 s later: before, during or after the next one.
                kills["after_a_batch"] += wait_for_batch(server, 180.0)
                time.sleep(rng.uniform(0.0, 4.0))
                ing = server.ingester(rng)
                if ing:
                    os.kill(ing, signal.SIGKILL)
                    kills["ingester"] += 1
        time.sleep(30)
        gen.send_signal(signal.SIGTERM)
        gen_out, _ = gen.communicate(timeout=300)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        server.stop()
    rest = subprocess.run(
        [sys.executable, "-m", "pyproflab", "spool-ingest", str(spool), "--db", str(db)],
        capture_output=True,
        text=True,
    )
    acked = (out / "acked.txt").read_text().split()
    stored = stored_hashes(db)
    profiles, partial = whole_profiles(db)
    log = (out / "serve.log").read_text().splitlines()
    by_reason: dict[str, int] = {}
    for ln in log:
        if ln.startswith("pyproflab serve: refused "):
            reason = ln.split(": ")[2] if ln.count(": ") >= 3 else "?"
            by_reason[reason] = by_reason.get(reason, 0) + 1
    gen_summary = json.loads(gen_out)
    summary = {
        "kills": kills,
        "disk": disk,
        "full_disk": full,
        "loadgen": gen_summary,
        "hostile": seen,
        "acked_profiles": len(acked),
        "stored_profiles": len(stored),
        "lost": len(set(acked) - set(stored)),
        "duplicated": len(stored) - len(set(stored)),
        "partial_profiles": partial,
        "refusal_log_lines_by_reason": by_reason,
        "ingested_batches": sum(" ingested " in ln for ln in log),
        "ingester_refusal_lines": sum(
            ln.startswith("pyproflab spool-ingest: refused") for ln in log
        ),
        "refused_files": len(list((spool / "refused").glob("*.push"))),
        "peak_rss_mib": {k: round(v / 1024, 1) for k, v in server.peak.items()},
        "after": rest.stdout.strip() or rest.stderr.strip()[-300:],
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(summary, indent=2))
    if disk:
        subprocess.run(["umount", str(spool)], check=False)
    ok = summary["lost"] == 0 and summary["duplicated"] == 0 and partial == 0
    return 0 if ok else 1


def wait_for_batch(server: Server, limit: float) -> int:
    """Wait until the log shows a batch stored after the current ingester
    started (at most ``limit`` seconds); 1 if one was."""
    log = server.out / "serve.log"
    start = log.read_text().count(" ingested ")
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if log.read_text().count(" ingested ") > start:
            return 1
        time.sleep(0.5)
    return 0


def _signal_all(pids: list[int], sig: int) -> list[int]:
    done = []
    for pid in pids:
        try:
            os.kill(pid, sig)
            done.append(pid)
        except ProcessLookupError:
            pass
    return done


def fill_disk(server: Server, spool: Path, limit: float = 120.0) -> dict:
    """Stop the ingesters until the server refuses pushes for lack of room (or
    ``limit`` seconds), then let them go on."""
    ing: list[int] = []
    for _ in range(60):  # ingesters that have just been restarted: wait for them all
        kids = server.all_ingesters()
        if len(kids) == server.ingesters:
            ing = _signal_all(kids, signal.SIGSTOP)
            break
        time.sleep(1)
    if not ing:
        return {"stopped_s": 0.0, "spool_503": False}
    t0, refused = time.monotonic(), False
    before = (server.out / "serve.log").read_text().count(": disk: ")
    while time.monotonic() - t0 < limit:
        time.sleep(1)
        if (server.out / "serve.log").read_text().count(": disk: ") > before:
            refused = True
            time.sleep(3)
            break
    _signal_all(ing, signal.SIGCONT)
    return {"stopped_s": round(time.monotonic() - t0, 1), "spool_503": refused}


if __name__ == "__main__":
    sys.exit(main())
