"""Job outputs: timestamped files, a stable ``latest`` name, nothing ever half-written.

Rules:

- Every file is written to a hidden temp file in the same folder, fsynced,
  then ``os.replace``d onto its name: a reader (or a kill) sees the old file
  or the new one, never a truncated one.
- A run's files are named ``<kind>-<stamp>.<ext>`` with ``stamp =
  YYYYmmddTHHMMSSZ-r<run id>``; the stable name ``<kind>.<ext>`` (e.g.
  ``default.pgo``, ``summary.json``) is a relative symlink to the newest,
  replaced atomically (a temp symlink renamed over it). Where symlinks are
  not possible, the stable name is an atomically replaced copy.
- ``default*.pgo`` and ``pgo-*.json`` (which describes it) point to the
  newest run that wrote them, kept when a later run skipped PGO: a PGO build
  is better with a slightly old profile than with none. A report's stable
  name (``regressions-*``, ``over-time-*``, ``gogc``: JSON, text, HTML) is
  the newest run's or absent: withdrawn when that run did not write it (an
  analysis skipped, a service gone, a format dropped), as an earlier run's
  report read as the current verdict is an old answer shown as new. A
  copied (not symlinked) stable name is left as it is.
- Temp files left by a killed run (``.*.tmp-*``) are removed at the next run.
- Pruning keeps the newest ``keep`` stamps and any file a stable name points to.
- Every JSON output but the summary (which has them at its top) carries
  ``job_run``: the job, run id and stamp that wrote it, so a reader of a stable
  name alone (``pgo-<service>.json`` of a ``default.pgo`` a later run kept)
  sees which run it is from.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import datetime
from pathlib import Path

STAMP_RE = re.compile(r"-(\d{8}T\d{6}Z-r\d+)\.")
#: Stable names kept when the newest run did not write them (see the rules).
KEPT_WHEN_NOT_WRITTEN = re.compile(r"(default(-.+)?\.pgo|pgo-.+\.json)\Z")
SUMMARY = "summary.json"  # written by every run that writes anything
TMP_MARK = ".tmp-"


def make_stamp(when: datetime, run_id: int) -> str:
    return f"{when.strftime('%Y%m%dT%H%M%SZ')}-r{run_id}"


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` so that it is the old or the new content, never less."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def point_latest(latest: str | os.PathLike, target: str | os.PathLike) -> Path:
    """Make ``latest`` name ``target`` (same folder) atomically: a relative symlink,
    else a copy."""
    latest, target = Path(latest), Path(target)
    tmp = latest.with_name(f".{latest.name}{TMP_MARK}{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        os.symlink(target.name, tmp)
    except OSError:
        shutil.copyfile(target, tmp)  # no symlinks here: an atomic copy instead
    try:
        os.replace(tmp, latest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(latest.parent)
    return latest


def _with_job_run(data: bytes | str, job_run: dict) -> str:
    """A JSON object with ``job_run`` added, laid out as it was (sorted keys, its indent)."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    doc = json.loads(text)
    if not isinstance(doc, dict):
        return text
    second = text.split("\n", 2)[1] if text.count("\n") > 1 else ""
    indent = (len(second) - len(second.lstrip(" "))) or None
    doc["job_run"] = job_run
    return (
        json.dumps(doc, indent=indent, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    )


class OutputSet:
    """The files of one run in the output folder."""

    def __init__(self, folder: str | os.PathLike, stamp: str, job_run: dict | None = None):
        self.folder = Path(folder)
        self.stamp = stamp
        self.job_run = job_run  # added to every JSON output but the summary
        self.written: dict[str, str] = {}  # stable name -> timestamped file name

    def write(self, kind: str, ext: str, data: bytes | str) -> Path:
        """Write ``<kind>-<stamp>.<ext>`` and point ``<kind>.<ext>`` at it."""
        if ext == "json" and kind != "summary" and self.job_run is not None:
            data = _with_job_run(data, self.job_run)
        target = write_atomic(self.folder / f"{kind}-{self.stamp}.{ext}", data)
        self.written[f"{kind}.{ext}"] = target.name
        return target

    def write_file(self, kind: str, ext: str, produce) -> Path:
        """Like ``write`` for a writer that wants a path (it must write atomically itself)."""
        target = self.folder / f"{kind}-{self.stamp}.{ext}"
        produce(target)
        self.written[f"{kind}.{ext}"] = target.name
        return target

    def current(self, stable: str) -> str | None:
        """The file the stable name ``stable`` points to now (None when none)."""
        p = self.folder / stable
        return os.readlink(p) if p.is_symlink() else (stable if p.is_file() else None)

    def stale(self) -> list[str]:
        """The reports' stable names an earlier run wrote and this one does not:
        symlinks ``<kind>.<ext>`` to a ``<kind>-<stamp>.<ext>`` (see the rules)."""
        out = []
        for p in sorted(self.folder.iterdir()):
            name = p.name
            if name in self.written or name == SUMMARY or KEPT_WHEN_NOT_WRITTEN.match(name):
                continue
            target = os.readlink(p) if p.is_symlink() else ""
            m = STAMP_RE.search(target)
            if m and target.replace(f"-{m.group(1)}", "", 1) == name:
                out.append(name)
        return out

    def publish(self, withdraw: list[str] | tuple[str, ...] = ()) -> None:
        """Point every stable name at this run's file (last, so `latest` moves only
        once everything of the run is on disk), then remove the ``withdraw`` ones."""
        for stable, name in self.written.items():
            point_latest(self.folder / stable, self.folder / name)
        for stable in withdraw:
            (self.folder / stable).unlink(missing_ok=True)
        if withdraw:
            _fsync_dir(self.folder)


def clean_temp(folder: str | os.PathLike) -> int:
    """Remove temp files of killed runs; return how many."""
    n = 0
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    for p in folder.iterdir():
        if p.name.startswith(".") and TMP_MARK in p.name:
            try:
                p.unlink()
                n += 1
            except OSError:
                pass
    return n


def prune(folder: str | os.PathLike, keep: int) -> list[str]:
    """Delete timestamped files of all but the newest ``keep`` stamps (never one a
    stable name points to); return the names deleted."""
    folder = Path(folder)
    if keep <= 0 or not folder.is_dir():
        return []
    by_stamp: dict[str, list[Path]] = {}
    pinned: set[str] = set()
    for p in folder.iterdir():
        if p.is_symlink():
            pinned.add(os.readlink(p))
            continue
        m = STAMP_RE.search(p.name)
        if m and not p.name.startswith("."):
            by_stamp.setdefault(m.group(1), []).append(p)

    def order(stamp: str) -> tuple[str, int]:
        when, run = stamp.split("-r")
        return when, int(run)

    deleted = []
    for stamp in sorted(by_stamp, key=order)[:-keep]:
        for p in by_stamp[stamp]:
            if p.name in pinned:
                continue
            try:
                p.unlink()
                deleted.append(p.name)
            except OSError:
                pass
    return deleted
