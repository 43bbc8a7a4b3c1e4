"""``pyproflab serve`` in its own process for tests: it binds a port of its own
(``127.0.0.1:0``) and is used once it says where it listens; its stderr lines
go to a queue, so a test waits for an event (a log line), never for a time."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
from pathlib import Path

from support.testenv import REPO

HANG = 300  # seconds: bounds a hang only (under load serve took 11-22 s to listen)


class ServeProcess:
    """``pyproflab serve --spool SPOOL --db DB --listen 127.0.0.1:0 FLAGS``.
    ``session``: a process group of its own, as systemd's unit gives it."""

    def __init__(self, spool: Path, db: Path, *flags: str, session: bool = False):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pyproflab", "serve", "--spool", str(spool), "--db", str(db)]
            + ["--listen", "127.0.0.1:0", *flags],
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=session,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.port = int(self.wait_for(r"listening on 127\.0\.0\.1:(\d+)").group(1))

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put("")  # the end of its stderr

    def wait_for(self, pattern: str) -> re.Match:
        """The first line from now on matching ``pattern``; an assertion error
        naming the log's tail when serve ends first."""
        while True:
            line = self.lines.get(timeout=HANG)
            self.seen.append(line)
            m = re.search(pattern, line)
            if m:
                return m
            assert line, f"serve ended before {pattern!r}: {''.join(self.seen)[-2000:]}"

    def rest(self) -> str:
        """Its whole stderr, once the process has ended."""
        self.proc.wait(timeout=HANG)
        while not self.seen or self.seen[-1]:
            self.seen.append(self.lines.get(timeout=HANG))
        return "".join(self.seen)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
