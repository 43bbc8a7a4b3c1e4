"""The store's one entry point for sources: batches all-or-nothing, idempotent by
content, keys recorded with their batch, refusals, outcomes, the file fast path."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from pyproflab import schema
from pyproflab.sources.base import (
    GC_CYCLES,
    METRIC_SAMPLES,
    PROFILES,
    Expect,
    ItemMeta,
    Known,
    Offer,
    ProfileItem,
    Refused,
    Request,
    Source,
    SourceError,
    TableItem,
    TraceItem,
)
from pyproflab.sources.local import FileSource
from pyproflab.store import Store, sourced
from pyproflab.store.sourced import ingest_source

GO = Path(__file__).resolve().parents[1] / "testdata" / "go"
FILES = sorted(GO.glob("*.pb.gz"))


@dataclass
class ListSource:
    """A source over a list of items; ``fail_after``: raise after yielding that many."""

    things: list
    name: str = "test:list"
    fail_after: int | None = None
    asked: list[list[str]] = field(default_factory=list)

    def offer(self, request: Request) -> Offer:
        return Offer(kinds=(PROFILES,), items=len(self.things))

    def items(self, request: Request, known: Known) -> Iterator:
        keys = [t.key for t in self.things if getattr(t, "key", None)]
        have = known(keys)
        self.asked.append(sorted(have))
        for i, t in enumerate(self.things):
            if self.fail_after is not None and i == self.fail_after:
                raise SourceError(self.name, "GET /list: HTTP 503 (after 3 attempts)")
            if getattr(t, "key", None) in have:
                continue
            yield t


def _profile_items() -> list[ProfileItem]:
    return [
        ProfileItem(
            ItemMeta(service="svc", source=f"test:{p.name}"), data=p.read_bytes(), key=p.name
        )
        for p in FILES
    ]


@pytest.fixture
def store():
    with Store.open(":memory:") as s:
        yield s


def test_the_interface_is_a_protocol_the_sources_satisfy() -> None:
    assert isinstance(ListSource([]), Source)
    assert isinstance(FileSource(["x"]), Source)


def test_profiles_are_stored_once_with_their_keys_and_outcomes(store: Store) -> None:
    items = _profile_items()
    rep = ingest_source(store, ListSource(items), batch_size=3)
    assert (rep.new, rep.present, rep.refused) == (len(FILES), 0, [])
    assert all(i.outcome and i.outcome.status == "new" and i.outcome.profile_id for i in items)
    rows = store.sql("SELECT source, service FROM profiles ORDER BY profile_id").to_pylist()
    assert rows == [{"source": f"test:{p.name}", "service": "svc"} for p in FILES]
    # A second run: the source is told every key is known and yields nothing.
    again = ListSource(_profile_items())
    rep2 = ingest_source(store, again)
    assert (rep2.new, rep2.present) == (0, 0)
    assert again.asked == [sorted(p.name for p in FILES)]


def test_same_bytes_from_another_source_are_present(store: Store) -> None:
    ingest_source(store, ListSource(_profile_items()))
    other = [
        ProfileItem(ItemMeta(), data=gzip.decompress(FILES[0].read_bytes()), key="x"),
        ProfileItem(ItemMeta(), path=str(FILES[1]), key="y"),
    ]
    rep = ingest_source(store, ListSource(other, name="test:other"))
    assert (rep.new, rep.present) == (0, 2)
    assert other[0].outcome is not None and other[0].outcome.status == "present"
    assert other[0].outcome.profile_id == 1


def test_a_failing_source_keeps_whole_batches_only_and_a_rerun_completes(store: Store) -> None:
    items = _profile_items()
    with pytest.raises(SourceError, match="test:list: GET /list: HTTP 503"):
        ingest_source(store, ListSource(items, fail_after=5), batch_size=2)
    # Batches of 2: items 0-3 stored, item 4 was in the batch being filled.
    assert store.counts()["profiles"] == 4
    known = store.sql("SELECT count(*) FROM source_items").column(0)[0].as_py()
    assert known == 4
    rep = ingest_source(store, ListSource(_profile_items()), batch_size=2)
    assert rep.new == len(FILES) - 4 and rep.present == 0
    assert store.counts()["profiles"] == len(FILES)


def test_bad_bytes_are_refused_and_not_recorded(store: Store) -> None:
    bad = ProfileItem(ItemMeta(source="test:bad"), data=b"<html>oops</html>", key="bad")
    good = _profile_items()[:2]
    rep = ingest_source(store, ListSource([bad, *good, Refused("test:gone", "HTTP 404")]))
    assert rep.new == 2
    assert [w for w, _ in rep.refused] == ["test:bad", "test:gone"]
    assert bad.outcome is not None and bad.outcome.status == "refused"
    keys = store.sql("SELECT item FROM source_items ORDER BY item").column(0).to_pylist()
    assert keys == sorted(i.key for i in good)


def test_metric_tables_share_the_batch_transaction(store: Store) -> None:
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    samples = pa.table(
        {
            "metric": ["go_gc_cycles_total_gc_cycles_total"] * 2,
            "labels": pa.array([[], []], schema.METRIC_SAMPLES.field("labels").type),
            "time": [t0, t0.replace(second=15)],
            "value": [1.0, 2.0],
            "type": ["counter"] * 2,
        }
    )
    samples = samples.select(schema.METRIC_SAMPLES.names).cast(schema.METRIC_SAMPLES)
    item = TableItem(METRIC_SAMPLES, samples, ItemMeta(instance="i-1", source="test:m"), key="m1")
    rep = ingest_source(store, ListSource([item, *_profile_items()[:1]]))
    assert (rep.new, rep.metric_rows) == (1, 2)
    assert item.outcome is not None and item.outcome.rows == 2
    rep2 = ingest_source(store, ListSource([item], name="test:other"))
    assert rep2.metric_rows == 0
    with pytest.raises(ValueError):
        TableItem("profiles", samples, ItemMeta())
    bad = TableItem(GC_CYCLES, samples, ItemMeta(source="test:gc"))
    rep3 = ingest_source(store, ListSource([bad]))
    assert rep3.refused == [("test:gc", "the rows do not have the schema of gc_cycles")]


def test_a_trace_without_a_writer_is_refused_with_a_reason(store: Store, monkeypatch) -> None:
    # importing pyproflab.store.traces (another test may have) registers one
    monkeypatch.delitem(sourced.WRITERS, TraceItem, raising=False)
    rep = ingest_source(store, ListSource([TraceItem(ItemMeta(source="t.trace"), data=b"x")]))
    assert rep.refused == [("t.trace", "this pyproflab does not store execution traces")]


def test_the_file_source_goes_through_the_bulk_reader(store: Store) -> None:
    src = FileSource([str(GO)], ItemMeta(service="go"), workers=1)
    seen: list[tuple[int, int]] = []
    rep = ingest_source(store, src, progress=lambda d, t: seen.append((d, t)))
    assert rep.new == len(FILES) and seen[-1] == (len(FILES), len(FILES))
    assert ingest_source(store, src).present == len(FILES)


def test_expect_drives_progress(store: Store) -> None:
    seen: list[tuple[int, int]] = []
    things = [Expect(3), *_profile_items()[:3]]
    ingest_source(store, ListSource(things), progress=lambda d, t: seen.append((d, t)))
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)]


@dataclass
class InterruptedSource(ListSource):
    """Ctrl-C (or SIGTERM) inside the source after ``fail_after`` items."""

    def items(self, request: Request, known: Known) -> Iterator:
        for i, t in enumerate(self.things):
            if i == self.fail_after:
                raise KeyboardInterrupt
            yield t


def test_an_interrupt_says_what_was_stored_before_it(store: Store) -> None:
    """collect (or pull) stopped by SIGTERM said 'pyproflab: terminated' alone
    though profiles were stored: a collect from notesd killed 3.96 s in left 5 of
    its 6 profiles in the store (helper-87's kill loop). It now says how many, as
    ingest does."""
    things = _profile_items()[:3]
    with pytest.raises(KeyboardInterrupt) as e:
        ingest_source(store, InterruptedSource(things, fail_after=2), batch_size=1)
    assert str(e.value) == (
        "2 new profiles and 0 metric rows were stored before it (each batch whole)"
    )
    assert store.counts()["profiles"] == 2
