"""What one collection did, and the archive its bodies go to (``sources/collect.py``).

- ``FetchResult``: one (target, profile type) fetch: new, present or failed;
  ``ScrapeStats``: the /metrics scrapes of one target; ``TargetReport`` and
  ``CollectReport``: per target and for the whole window, with one error line
  per failure and the exit code (0: all collected, 1: something failed).
- The archive keeps each good body at ``archive/<h[:2]>/<h>.pb.gz``, where
  ``h`` is the sha256 of its decompressed protobuf (the store's
  ``content_hash``), an execution trace at ``<h>.trace`` (its sha256):
  written atomically, never rewritten.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pyproflab.newfiles import create_temp_file
from pyproflab.sources.targets import Target

# --- results ------------------------------------------------------------------------


@dataclass
class FetchResult:
    """One (target, profile type) fetch. ``status``: new, present or failed."""

    target: str
    profile_type: str
    url: str  # without credentials, with the query
    status: str = "failed"
    error: str | None = None
    attempts: int = 0
    window_start: datetime | None = None
    window_end: datetime | None = None
    content_hash: str | None = None
    profile_id: int | None = None
    archive_path: str | None = None
    size: int = 0

    @property
    def ok(self) -> bool:
        return self.status != "failed"

    def line(self) -> str:
        """The one-line report of a failure: ``api/v1/i-1 cpu: HTTP 500 from URL``."""
        return f"{self.target} {self.profile_type}: {self.error}"


@dataclass
class ScrapeStats:
    """The /metrics scrapes of one target: counts and the first error, per kind."""

    url: str
    ok: int = 0
    failed: int = 0
    samples: int = 0
    skipped: int = 0  # ticks skipped while the previous scrape was still out
    errors: list[str] = field(default_factory=list)  # distinct messages, first seen first

    def line(self, target: str) -> str | None:
        if not self.failed:
            return None
        n = self.ok + self.failed
        first = self.errors[0] if self.errors else "failed"
        more = f" (and {len(self.errors) - 1} other errors)" if len(self.errors) > 1 else ""
        skipped = f"; {self.skipped} ticks skipped while one was out" if self.skipped else ""
        return f"{target} metrics: {self.failed} of {n} scrapes failed: {first}{more}{skipped}"


@dataclass
class TargetReport:
    """What happened for one target."""

    target: Target
    fetches: list[FetchResult] = field(default_factory=list)
    scrapes: ScrapeStats | None = None
    error: str | None = None  # a target-level failure (e.g. auth_env not set)

    def errors(self) -> list[str]:
        out = [f"{self.target.name}: {self.error}"] if self.error else []
        out += [f.line() for f in self.fetches if not f.ok]
        if self.scrapes is not None and (line := self.scrapes.line(self.target.name)):
            out.append(line)
        return out


@dataclass
class CollectReport:
    """The outcome of one ``collect``: per-target results and the window."""

    window_start: datetime
    window_end: datetime | None = None
    targets: list[TargetReport] = field(default_factory=list)

    @property
    def fetches(self) -> list[FetchResult]:
        return [f for t in self.targets for f in t.fetches]

    @property
    def new(self) -> int:
        return sum(f.status == "new" for f in self.fetches)

    @property
    def present(self) -> int:
        return sum(f.status == "present" for f in self.fetches)

    @property
    def failed(self) -> int:
        return sum(not f.ok for f in self.fetches)

    @property
    def metric_samples(self) -> int:
        return sum(t.scrapes.samples for t in self.targets if t.scrapes)

    @property
    def scrapes_failed(self) -> int:
        return sum(t.scrapes.failed for t in self.targets if t.scrapes)

    def errors(self) -> list[str]:
        """One line per failed (target, profile type), per failing scraper and per
        target-level problem, in target order."""
        return [line for t in self.targets for line in t.errors()]

    @property
    def exit_code(self) -> int:
        """0 when everything was collected, 1 when anything failed."""
        return 1 if self.errors() else 0

    def summary(self) -> str:
        took = ((self.window_end or self.window_start) - self.window_start).total_seconds()
        text = (
            f"collected {self.new + self.present} profiles ({self.new} new, "
            f"{self.present} already present) and {self.metric_samples} metric samples "
            f"from {len(self.targets)} targets in {took:.1f} s"
        )
        skipped = sum(1 for t in self.targets if t.error)
        problems = [
            f"{n} {one if n == 1 else more}"
            for n, one, more in (
                (self.failed, "fetch failed", "fetches failed"),
                (self.scrapes_failed, "scrape failed", "scrapes failed"),
                (skipped, "target skipped", "targets skipped"),
            )
            if n
        ]
        return text + ("; " + ", ".join(problems) if problems else "")


# --- the archive --------------------------------------------------------------------


def archive_path(archive_dir: str | os.PathLike, content_hash: str, *, trace: bool = False) -> Path:
    """Where the archive keeps the profile (or, ``trace``, the execution trace:
    ``.trace``, its sha256) whose content_hash is ``content_hash``."""
    suffix = ".trace" if trace else ".pb.gz"
    return Path(archive_dir) / content_hash[:2] / f"{content_hash}{suffix}"


def archive_body(
    archive_dir: str | os.PathLike, content_hash: str, gz: bytes, *, trace: bool = False
) -> Path:
    """Write gzipped profile bytes (or a trace's, ``trace``) at their content
    address, atomically; a file already there is left alone (same address, same content)."""
    path = archive_path(archive_dir, content_hash, trace=trace)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_temp_file(path.parent, ".tmp-", ".pb.gz")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(gz)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
