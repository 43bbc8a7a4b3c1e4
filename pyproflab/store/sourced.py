"""The store's one entry point for any source (``sources.base.Source``).

``ingest_source(store, source, request)`` asks the source for its items and
stores them. Rules:

- Profiles and metric tables are stored in batches of at most ``batch_size``
  items (a batch also closes once its keyed rows reach ``batch_bytes``), each
  batch ONE transaction: its profiles, its metric rows and the keys of its
  items (``source_items``) commit together or not at all. A run killed part
  way leaves whole batches only, and their keys say what a re-run can skip.
- A profile is identified by the sha256 of its decompressed bytes: one already
  stored (from this source or any other) is ``present`` and nothing is
  written for it; its bytes are not even decoded. Metric rows are new unless
  the store has the same (instance, metric, labels, time) or (instance,
  source, gc_num) (``store/metrics.py``).
- An item the store cannot take (bytes that are not a profile, a table of
  another shape) is refused with its one-line reason; the others still land.
  Its key is not recorded, so a re-run tries it again.
- ``FileSet`` items go to the bulk file reader (``ingest.ingest_paths``: worker
  processes, its own batches), ``Dataset`` items to ``parquet.import_parquet``,
  after the batch before them is stored.
- A source that raises (a ``SourceError``: its listing failed) stops the run:
  the batch being filled is dropped, the error propagates. Batches stored
  before it stay.
- Each item's ``outcome`` is set once its batch is stored (new, present or
  refused), so a source can report per item after the run.
- ``TraceItem``: stored by the writer registered for it in ``WRITERS`` (the
  traces' store module); without one, refused with a reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from pyproflab.errors import IdCollisionError, ProfileError, StoreError
from pyproflab.keying.keys import KeyedProfile, ProfileMeta, key_profile
from pyproflab.keying.prepare import _read_raw
from pyproflab.sources.base import (
    GC_CYCLES,
    Dataset,
    Expect,
    FileSet,
    Item,
    ItemMeta,
    Outcome,
    ProfileItem,
    Refused,
    Request,
    Source,
    TableItem,
    TraceItem,
)
from pyproflab.store import queries
from pyproflab.store.connection import Store
from pyproflab.store.ingest import (
    BATCH_BYTES,
    BATCH_SIZE,
    existing_hashes,
    ingest_paths,
    write_keyed,
)
from pyproflab.store.ingest_report import IngestReport

Progress = Callable[[int, int], None]

#: item type -> writer(store, items) for items this module does not store itself
#: (the traces' store module adds TraceItem here); a writer returns an IngestReport.
WRITERS: dict[type, Callable[[Store, list[Any]], IngestReport]] = {}


def profile_meta(meta: ItemMeta) -> ProfileMeta:
    """A source's metadata as the store's (``time`` is applied to the row instead)."""
    return ProfileMeta(
        service=meta.service,
        version=meta.version,
        instance=meta.instance,
        labels=dict(meta.labels),
        source=meta.source,
        window_start=meta.window_start,
        window_end=meta.window_end,
        profile_type=meta.profile_type,
    )


@dataclass
class _Batch:
    """Items waiting for one transaction: keyed profiles and metric rows."""

    profiles: list[tuple[ProfileItem, KeyedProfile]] = field(default_factory=list)
    present: list[ProfileItem] = field(default_factory=list)
    tables: list[tuple[TableItem, pa.Table]] = field(default_factory=list)
    nbytes: int = 0

    def __len__(self) -> int:
        return len(self.profiles) + len(self.present) + len(self.tables)


def ingest_source(
    store: Store,
    source: Source,
    request: Request | None = None,
    *,
    batch_size: int = BATCH_SIZE,
    batch_bytes: int = BATCH_BYTES,
    max_bytes: int | None = None,
    progress: Progress | None = None,
    workers: int | None = None,
) -> IngestReport:
    """Store what ``source`` gives for ``request`` (see the module rules)."""
    from pyproflab.decode import DEFAULT_MAX_BYTES

    if batch_size < 1 or batch_bytes < 1:
        raise StoreError(f"batch size and bytes must be at least 1 ({batch_size}, {batch_bytes})")
    run = _Run(store, source.name, batch_size, batch_bytes, max_bytes or DEFAULT_MAX_BYTES)
    items = source.items(request or Request(), run.known)
    try:
        _take(run, items, progress, workers)
    finally:
        close = getattr(items, "close", None)
        if close is not None:  # a generator's own clean-up (threads, sockets) runs now
            close()
    run.flush()
    return run.report


def _take(run: _Run, items: Iterable[Item], progress: Progress | None, workers: int | None) -> None:
    """Hand each item to the run (see the module rules)."""
    store = run.store
    expected = 0
    for item in items:
        if isinstance(item, Expect):
            expected += item.items
        elif isinstance(item, FileSet):
            run.flush()
            run.report.add(_file_set(store, item, run, progress, workers))
            continue
        elif isinstance(item, Dataset):
            from pyproflab.store.parquet import import_parquet

            run.flush()
            run.report.add(import_parquet(store, item.path))
        elif isinstance(item, Refused):
            run.report.refused.append((item.what, item.why))
        else:
            run.add(item)
        if not isinstance(item, Expect):
            run.done += 1
        if progress and expected:
            progress(min(run.done, expected), expected)


def _file_set(
    store: Store, item: FileSet, run: _Run, progress: Progress | None, workers: int | None
) -> IngestReport:
    return ingest_paths(
        store,
        item.paths,
        profile_meta(item.defaults),
        path_template=item.path_template,
        max_bytes=item.max_bytes or run.max_bytes,
        progress=progress,
        batch_size=run.batch_size,
        workers=item.workers if item.workers is not None else workers,
        batch_bytes=run.batch_bytes,
    )


class _Run:
    """One ``ingest_source``: the batch being filled and the report so far."""

    def __init__(
        self, store: Store, name: str, batch_size: int, batch_bytes: int, max_bytes: int
    ) -> None:
        self.store, self.name = store, name
        self.batch_size, self.batch_bytes, self.max_bytes = batch_size, batch_bytes, max_bytes
        self.report = IngestReport()
        self.batch = _Batch()
        self.done = 0
        self.now = datetime.now(UTC)

    def known(self, keys: Sequence[str]) -> set[str]:
        return queries.known_source_items(self.store, self.name, list(keys))

    def add(self, item: ProfileItem | TableItem | TraceItem) -> None:
        if isinstance(item, TraceItem):
            self._trace(item)
            return
        if isinstance(item, TableItem):
            self._table(item)
        else:
            self._profile(item)
        if len(self.batch) >= self.batch_size or self.batch.nbytes >= self.batch_bytes:
            self.flush()

    def _refuse(self, item: ProfileItem | TableItem | TraceItem, why: str) -> None:
        item.outcome = Outcome("refused", reason=why)
        self.report.refused.append((item.what, why))

    def _trace(self, item: TraceItem) -> None:
        writer = WRITERS.get(TraceItem)
        if writer is None:
            self._refuse(item, "this pyproflab does not store execution traces")
            return
        self.flush()
        self.report.add(writer(self.store, [item]))

    def _table(self, item: TableItem) -> None:
        from pyproflab.store.metrics import with_meta

        m = item.meta
        if ("gc_num" in item.table.schema.names) != (item.kind == GC_CYCLES):
            self._refuse(item, f"the rows do not have the schema of {item.kind}")
            return
        try:
            rows = with_meta(
                item.table,
                service=m.service,
                version=m.version,
                instance=m.instance,
                source=m.source,
            )
        except StoreError as e:
            self._refuse(item, str(e))
            return
        self.batch.tables.append((item, rows))
        self.batch.nbytes += rows.nbytes

    def _profile(self, item: ProfileItem) -> None:
        try:
            keyed = self._keyed(item)
        except ProfileError as e:
            self._refuse(item, e.problem)
            return
        except (StoreError, ValueError) as e:
            self._refuse(item, str(e))
            return
        if keyed is None:
            self.batch.present.append(item)
            return
        self.batch.profiles.append((item, keyed))
        self.batch.nbytes += keyed.nbytes

    def _keyed(self, item: ProfileItem) -> KeyedProfile | None:
        """The item keyed for the store; None when its content is stored already."""
        import hashlib

        from pyproflab.decode import decode_bytes
        from pyproflab.decode.pprof import decompress

        where = item.what
        profile, digest = item.profile, item.content_hash
        if profile is None or digest is None:
            if item.data is not None:
                raw = decompress(item.data, source=where, max_bytes=self.max_bytes)
                digest = hashlib.sha256(raw).hexdigest()
            else:
                raw, digest = _read_raw(item.path or "", self.max_bytes)
            item.content_hash = digest
            if existing_hashes(self.store, [digest]):
                return None
            profile = decode_bytes(raw, source=where, max_bytes=self.max_bytes)
        elif existing_hashes(self.store, [digest]):
            return None
        keyed = key_profile(profile, profile_meta(item.meta), digest, now=self.now)
        if keyed.row.get("time") is None and item.meta.time is not None:
            keyed.row["time"] = item.meta.time
        return keyed

    def flush(self) -> None:
        """Store the batch in one transaction (see the module rules)."""
        batch, self.batch = self.batch, _Batch()
        if not len(batch):
            return
        try:
            self._write(batch, [k for _, k in batch.profiles])
        except IdCollisionError:
            # One transaction per profile, so only the one that collides is refused.
            for item, keyed in batch.profiles:
                try:
                    self._write(_Batch(profiles=[(item, keyed)]), [keyed])
                except IdCollisionError as e:
                    self._refuse(item, str(e))
            self._write(_Batch(present=batch.present, tables=batch.tables), [])

    def _write(self, batch: _Batch, keyed: list[KeyedProfile]) -> None:
        from pyproflab.store.metrics import write_rows

        store = self.store
        keys = [i.key for i, _ in batch.profiles] + [i.key for i in batch.present]
        keys += [i.key for i, _ in batch.tables]
        if any(k is not None for k in keys):
            queries.create_source_tables(store)
        with store.transaction():
            rep = write_keyed(store, keyed)  # sets profile_id in the rows of new profiles
            hashes = [k.content_hash for k in keyed] + [i.content_hash or "" for i in batch.present]
            ids = existing_hashes(store, hashes)
            added = [write_rows(store, rows) for _, rows in batch.tables]
            records: list[tuple[str, str | None, str]] = []
            for item, k in batch.profiles:
                new = k.row.get("profile_id") is not None
                item.outcome = Outcome("new" if new else "present", ids.get(k.content_hash))
            for item in batch.present:
                item.outcome = Outcome("present", ids.get(item.content_hash or ""))
            for (item, _), n in zip(batch.tables, added, strict=True):
                item.outcome = Outcome("new" if n else "present", rows=n)
            every: list[ProfileItem | TableItem] = [i for i, _ in batch.profiles]
            every += batch.present + [i for i, _ in batch.tables]
            for item in every:
                if item.key is not None and item.outcome is not None:
                    digest = getattr(item, "content_hash", None)
                    records.append((item.key, digest, item.outcome.status))
            queries.record_source_items(store, self.name, records, self.now)
        self.report.add(rep)
        self.report.present += len(batch.present)
        self.report.metric_rows += sum(added)
