"""The ingester: spool files into the store, a batch at a time.

Rules:

- A batch is at most ``batch_files`` spool files and ``batch_bytes`` of them,
  oldest first. The spool is a source (``SpoolSource``); its profiles are
  read and decoded one by one, then keyed ``KEY_TOGETHER`` at a time (the
  store's ``key_items``: the rows ``key_item`` gives each, no database) before
  the store is opened, and the store (and its lock) is held only while the keyed
  batch is written, in one transaction (``store.sourced.store_batch``: one
  look-up of the batch's content hashes, not one per profile), so notebooks
  and the CLI wait at most one batch's write.
- Only after the transaction commits are the batch's files removed. A kill
  between the two leaves files whose profiles are stored already: the next
  batch finds their content hashes present and stores nothing twice (the
  store's rule: a profile is its decompressed bytes' sha256).
- A file that cannot be read, or an attachment that is not a valid profile,
  is refused: one log line, the file moved to ``refused/`` with the reasons;
  the file's valid profiles are still stored (never part of a profile).
- Execution traces (``go.trace``) go to the store (``store.traces``: the
  trace, its tables and its four blocking profiles, one transaction of their
  own after the batch's profiles) when the Go helper that reads them can run;
  without it, to ``traces/SERVICE/`` beside the spool as files (zstd undone),
  the same in every process (never on whether some module was imported
  first). ``metrics.json`` is dropped.
- A busy store (``StoreBusyError``) leaves the batch in the spool for the
  next round.
- Shares: with ``part=(i, n)`` a batch takes only the files of share ``i`` of
  ``n`` (``Spool.pending``: the CRC-32 of the file's name mod ``n``), oldest
  first within it, so ``n`` ingesters run side by side without taking the same
  file. Each reads, decodes and keys outside the store's lock, and holds the
  lock only for its own batch's write: the writes take turns (a busy store
  leaves that ingester's batch for its next round), the decoding overlaps. A
  kill of one leaves the other shares' files alone; its own share's files stay
  until a restarted ingester of that share takes them (stored once: above).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pyproflab.decode import DEFAULT_MAX_BYTES, decode_bytes
from pyproflab.errors import ProfileError, StoreError
from pyproflab.gohelper import GoUnavailableError, helper_binary
from pyproflab.keying.keys import KeyedProfile
from pyproflab.model import Profile
from pyproflab.sources.base import (
    Item,
    ProfileItem,
    Refused,
    Request,
    TraceItem,
    nothing_known,
)
from pyproflab.sources.push import cut
from pyproflab.sources.spool import Entry, Part, Spool, SpoolSource
from pyproflab.store.connection import Store
from pyproflab.store.lock import StoreBusyError
from pyproflab.store.sourced import ItemBatch, item_bytes, key_items, store_batch
from pyproflab.store.traces import write_trace_items

log = logging.getLogger("pyproflab.serve")

#: a profile item and its rows, keyed for the store
Keyed = tuple[ProfileItem, KeyedProfile]

BATCH_FILES = 256
BATCH_BYTES = 8 << 20


@dataclass
class Round:
    """What one batch did; ``held`` is how long the store was open, in seconds."""

    files: int = 0
    new: int = 0
    present: int = 0
    refused: int = 0
    traces: int = 0
    busy: bool = False
    held: float = 0.0
    refusals: list[tuple[str, str]] = field(default_factory=list)


#: profiles decoded before they are keyed together (``key_items``): a few batches'
#: worth of pushes, and the decoded profiles held at once stay few
KEY_TOGETHER = 64


def _keyed(
    items: Iterable[Item], max_bytes: int, now: datetime, together: int = KEY_TOGETHER
) -> list[Item | Keyed]:
    """Each profile item read, hashed and decoded (the store's ``item_bytes``) and,
    ``KEY_TOGETHER`` at a time, keyed (``key_items``: no database), as (item, keyed
    rows), or refused with its reason; other items as they are."""
    out: list[Item | Keyed | None] = []
    waiting: list[tuple[int, ProfileItem, Profile]] = []

    def key_waiting() -> None:
        keyed = key_items([(item, profile) for _, item, profile in waiting], now)
        for (at, item, _), k in zip(waiting, keyed, strict=True):
            out[at] = (item, k) if isinstance(k, KeyedProfile) else Refused(item.what, k)
        waiting.clear()

    for item in items:
        if isinstance(item, ProfileItem) and item.data is not None:
            try:
                raw, item.content_hash = item_bytes(item, max_bytes)
                profile = decode_bytes(raw, source=item.what, max_bytes=max_bytes)
            except ProfileError as e:
                out.append(Refused(item.what, e.problem))
                continue
            except (StoreError, ValueError) as e:
                out.append(Refused(item.what, str(e)))
                continue
            del raw  # the decompressed bytes go before the next item's
            waiting.append((len(out), item, profile))
            out.append(None)
            if len(waiting) >= together:
                key_waiting()
            continue
        out.append(item)
    if waiting:
        key_waiting()
    return [x for x in out if x is not None]


def _traces_to_store() -> bool:
    """Whether the store can take execution traces here (its writer runs the Go helper)."""
    try:
        helper_binary("storing execution traces")
    except GoUnavailableError as e:
        log.warning("ingest: %s; execution traces are kept beside the spool", e)
        return False
    return True


def _save_traces(spool: Spool, traces: list[TraceItem]) -> int:
    """The traces as files under ``traces/SERVICE/`` (named after their spool file
    and attachment); how many."""
    for t in traces:
        service = cut(t.meta.service or "unknown", 64).replace("/", "_")
        folder = spool.root / "traces" / (service.lstrip(".") or "unknown")
        folder.mkdir(parents=True, exist_ok=True)
        name, _, att = (t.key or "trace.push#go.trace").rpartition("#")
        tmp = folder / (name + ".tmp")
        tmp.write_bytes(t.data or b"")
        os.replace(tmp, folder / f"{name.removesuffix('.push')}-{att}")
    return len(traces)


def _take(spool: Spool, batch_files: int, batch_bytes: int, part: Part | None) -> list[Entry]:
    entries: list[Entry] = []
    total = 0
    for e in spool.pending(batch_files, part):
        if entries and total + e.size > batch_bytes:
            break
        entries.append(e)
        total += e.size
    return entries


def _reasons(source: SpoolSource, items: list[Item]) -> dict[str, list[str]]:
    """spool file name -> why some of it was refused (reading, decoding or storing)."""
    out = {k: list(v) for k, v in source.refused.items()}
    for item in items:
        if isinstance(item, Refused) and item.what.startswith("push:"):  # from _decode
            name, _, att = item.what.rpartition("#")
            out.setdefault(name.rsplit(":", 1)[-1], []).append(f"{att}: {item.why}")
        elif isinstance(item, TraceItem) and item.outcome is not None:
            if item.outcome.status == "refused" and item.key:
                name, _, att = item.key.rpartition("#")
                out.setdefault(name, []).append(f"{att}: {item.outcome.reason}")
    return out


def run_batch(
    spool: Spool,
    db: str,
    *,
    batch_files: int = BATCH_FILES,
    batch_bytes: int = BATCH_BYTES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    wait: float = 0.0,
    key_together: int = KEY_TOGETHER,
    part: Part | None = None,
) -> Round:
    """Ingest one batch of the spool, of share ``part`` if given (see the module's
    rules); ``key_together``: the profiles keyed as one (1: one by one, as before
    issue 32; a benchmark's peer)."""
    out = Round()
    entries = _take(spool, batch_files, batch_bytes, part)
    if not entries:
        return out
    source = SpoolSource(spool, entries, max_bytes=max_bytes)
    items = _keyed(
        source.items(Request(), nothing_known), max_bytes, datetime.now(UTC), key_together
    )
    keyed = [k for k in items if isinstance(k, tuple)]
    traces = [t for t in items if isinstance(t, TraceItem)]
    to_store = bool(traces) and _traces_to_store()
    t0 = time.monotonic()
    try:
        with Store.open(db, wait=wait) as store:
            report = store_batch(store, "serve", ItemBatch(profiles=keyed), datetime.now(UTC))
            if to_store:
                report.add(write_trace_items(store, traces))
    except StoreBusyError as e:
        log.warning("ingest: %s (the batch stays in the spool)", e)
        out.busy = True
        return out
    out.held = time.monotonic() - t0
    reasons = _reasons(source, [i for i in items if not isinstance(i, tuple)])
    if traces and not to_store:
        try:
            out.traces = _save_traces(spool, traces)
        except OSError as e:
            for t in traces:
                name, _, att = (t.key or "").rpartition("#")
                reasons.setdefault(name, []).append(f"{att}: {e}")
    elif to_store:
        out.traces = sum(t.outcome is not None and t.outcome.status != "refused" for t in traces)
    bad = [e for e in entries if e.name in reasons]
    for entry in bad:
        why = "; ".join(reasons[entry.name])
        log.warning("refused %s: %s", entry.name, why)
        spool.refuse(entry, why)
        out.refusals.append((entry.name, why))
    spool.done([e for e in entries if e.name not in reasons])
    out.files, out.new, out.present, out.refused = (
        len(entries),
        report.new,
        report.present,
        len(bad),
    )
    return out


def follow(
    spool: Spool, db: str, *, poll: float = 0.5, stop_after: float | None = None, **kw
) -> None:
    """Run batches until killed (or ``stop_after`` seconds), sleeping ``poll``
    seconds whenever the spool is empty or the store busy."""
    end = None if stop_after is None else time.monotonic() + stop_after
    while end is None or time.monotonic() < end:
        r = run_batch(spool, db, **kw)
        if r.files:
            log.info(
                "ingested %d files: %d new, %d present, %d refused (store held %.2fs)",
                r.files,
                r.new,
                r.present,
                r.refused,
                r.held,
            )
        if r.busy or not r.files:
            time.sleep(poll)
