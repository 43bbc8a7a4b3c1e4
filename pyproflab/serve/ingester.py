"""The ingester: spool files into the store, a batch at a time.

Rules:

- A batch is at most ``batch_files`` spool files and ``batch_bytes`` of them,
  oldest first. Every profile attachment is decoded before the store is
  opened; the store (and its lock) is held only while the batch is written,
  in one transaction, so notebooks and the CLI wait at most one batch.
- Only after the transaction commits are the batch's files removed. A kill
  between the two leaves files whose profiles are stored already: the next
  batch finds their content hashes present and stores nothing twice (the
  store's rule: a profile is its decompressed bytes' sha256).
- A file that cannot be read, or an attachment that is not a valid profile,
  is refused: one log line, the file moved to ``refused/`` with the reason;
  the file's valid profiles are still stored (never part of a profile).
- ``go.trace`` attachments (execution traces) are written, zstd undone, to
  ``traces/SERVICE/`` beside the spool; ``metrics.json`` is dropped.
- A busy store (``StoreBusyError``) leaves the batch in the spool for the
  next round.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyproflab.decode import DEFAULT_MAX_BYTES, decode_bytes
from pyproflab.decode.pprof import decompress
from pyproflab.errors import ProfileError
from pyproflab.model import Profile
from pyproflab.sources.push import Attachment, Push, cut, pprof_bytes, push_meta
from pyproflab.sources.spool import Entry, Spool, SpoolError
from pyproflab.store.connection import Store
from pyproflab.store.ingest import ingest
from pyproflab.store.keys import ProfileMeta
from pyproflab.store.lock import StoreBusyError

log = logging.getLogger("pyproflab.serve")

BATCH_FILES = 256
BATCH_BYTES = 64 << 20


@dataclass
class Round:
    """What one batch did."""

    files: int = 0
    new: int = 0
    present: int = 0
    refused: int = 0
    traces: int = 0
    busy: bool = False
    refusals: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Decoded:
    profiles: list[tuple[Profile, ProfileMeta]] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _profile(att: Attachment, source: str, max_bytes: int) -> tuple[Profile, str]:
    proto = decompress(
        pprof_bytes(att.data, source=source, max_bytes=max_bytes),
        source=source,
        max_bytes=max_bytes,
    )
    digest = hashlib.sha256(proto).hexdigest()
    return decode_bytes(proto, source=source, max_bytes=max_bytes), digest


def _save_trace(spool: Spool, entry: Entry, push: Push, att: Attachment, max_bytes: int) -> None:
    service = cut(push_meta(push).get("service") or "unknown", 64).replace("/", "_")
    folder = spool.root / "traces" / (service.lstrip(".") or "unknown")
    folder.mkdir(parents=True, exist_ok=True)
    data = pprof_bytes(att.data, source=f"{entry.path}#{att.name}", max_bytes=max_bytes)
    tmp = folder / (entry.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, folder / f"{entry.name.removesuffix('.push')}-{att.name}")


def decode_entry(spool: Spool, entry: Entry, push: Push, max_bytes: int, out: Decoded) -> int:
    """Decode ``push``'s profiles into ``out`` (problems noted there); traces saved."""
    meta = push_meta(push)
    traces = 0
    for att in push.attachments:
        source = f"push:{push.protocol}:{entry.name}#{att.name}"
        try:
            if att.kind == "trace":
                _save_trace(spool, entry, push, att, max_bytes)
                traces += 1
            if att.kind != "profile":
                continue
            profile, digest = _profile(att, source, max_bytes)
        except (ProfileError, OSError) as e:
            out.problems.append(f"{att.name}: {getattr(e, 'problem', None) or e}")
            continue
        out.profiles.append((profile, ProfileMeta(source=source, **meta)))
        out.hashes.append(digest)
    return traces


def run_batch(
    spool: Spool,
    db: str,
    *,
    batch_files: int = BATCH_FILES,
    batch_bytes: int = BATCH_BYTES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    wait: float = 0.0,
) -> Round:
    """Ingest one batch of the spool (see the module's rules)."""
    out = Round()
    entries, total = [], 0
    for e in spool.pending(batch_files):
        if entries and total + e.size > batch_bytes:
            break
        entries.append(e)
        total += e.size
    if not entries:
        return out
    decoded = Decoded()
    bad: list[tuple[Entry, str]] = []
    for entry in entries:
        try:
            push = spool.read(entry)[0]
        except SpoolError as e:
            bad.append((entry, str(e)))
            continue
        before = len(decoded.problems)
        out.traces += decode_entry(spool, entry, push, max_bytes, decoded)
        if len(decoded.problems) > before:
            bad.append((entry, "; ".join(decoded.problems[before:])))
    try:
        with Store.open(db, wait=wait) as store:
            report = ingest(store, decoded.profiles, content_hashes=decoded.hashes)
    except StoreBusyError as e:
        log.warning("ingest: %s (the batch stays in the spool)", e)
        out.busy = True
        return out
    for entry, reason in bad:
        log.warning("refused %s: %s", entry.name, reason)
        spool.refuse(entry, reason)
    spool.done([e for e in entries if e not in {b[0] for b in bad}])
    out.files, out.new, out.present = len(entries), report.new, report.present
    out.refused, out.refusals = len(bad), [(e.name, r) for e, r in bad]
    return out


def follow(
    spool: Spool,
    db: str,
    *,
    poll: float = 0.5,
    stop_after: float | None = None,
    **kw,
) -> None:
    """Run batches until killed (or ``stop_after`` seconds), sleeping ``poll``
    seconds whenever the spool is empty or the store busy."""
    end = None if stop_after is None else time.monotonic() + stop_after
    while end is None or time.monotonic() < end:
        r = run_batch(spool, db, **kw)
        if r.files:
            log.info(
                "ingested %d files: %d new, %d present, %d refused",
                r.files,
                r.new,
                r.present,
                r.refused,
            )
        if r.busy or not r.files:
            time.sleep(poll)


def spool_dir(path: str | os.PathLike) -> Path:
    return Path(path)
