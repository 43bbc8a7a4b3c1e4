"""What an ingest reports, shared by every way profiles enter the store (files,
drop folders, exported Parquet datasets, any source), so that none imports another."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field


class InputsRefused(UserWarning):
    """An ingest or pull left inputs out (a mistyped path, a file that is not a
    profile): its report's ``refused`` lists each with its reason."""


class DatedAhead(UserWarning):
    """An ingest stored profiles taken (by their own time) later than now: every
    ``--since`` takes them and their version reads as the newest."""


@dataclass
class IngestReport:
    """What an ingest did: counts of new and already-present profiles, the refused
    files with their one-line reasons, and the ids of the new profiles."""

    new: int = 0
    present: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)
    profile_ids: list[int] = field(default_factory=list)
    #: GC metric rows (samples and cycles) added, by a source that gives them
    metric_rows: int = 0
    #: execution traces stored (their blocking profiles count among ``new``)
    traces: int = 0
    #: what a source that lists (a pull: events, series x windows) found for the
    #: request, ``known`` included; None for a source that does not list
    listed: int | None = None
    #: listed items an earlier run delivered, not asked for again
    known: int = 0

    def summary(self) -> str:
        text = f"{self.new} new, {self.present} already present, {len(self.refused)} refused"
        text += f"; {self.known} fetched before, skipped" if self.known else ""
        text += f"; {self.metric_rows} metric rows added" if self.metric_rows else ""
        traces = f"{self.traces} trace{'s' if self.traces != 1 else ''}"  # "1 traces" read wrong
        return text + (f"; {traces} stored" if self.traces else "")

    def failed_whole(self) -> str | None:
        """Why a pull failed as a whole, or None: its source listed nothing for
        the request (a misspelt service or query, a range before any upload,
        a service that stopped profiling), or refused every profile it listed."""
        if self.listed == 0:
            return "nothing matched the request in this time range"
        if self.refused and not (self.new or self.present):
            return f"every profile refused ({len(self.refused)})"
        return None

    def refusal_note(self) -> str | None:
        """One line on what was refused, for a caller that may not read the
        report (a notebook's ``lab.ingest(...)`` statement); None when nothing was."""
        if not self.refused:
            return None
        path, why = self.refused[0]
        more = f" (and {len(self.refused) - 1} more: see the report's .refused)"
        return (
            f"{len(self.refused)} input{'s' * (len(self.refused) != 1)} refused, not stored: "
            f"{path}: {why}" + (more if len(self.refused) > 1 else "")
        )

    def add(self, other: IngestReport) -> None:
        self.new += other.new
        self.present += other.present
        self.refused += other.refused
        self.profile_ids += other.profile_ids
        self.metric_rows += other.metric_rows
        self.traces += other.traces
        if other.listed is not None:
            self.listed = (self.listed or 0) + other.listed
        self.known += other.known


@contextlib.contextmanager
def says_what_was_stored(report: IngestReport) -> Iterator[None]:
    """An interrupt (Ctrl-C; SIGTERM, whose class it keeps) of a source's ingest
    says, as its message, what was stored before it: the batches committed, each
    whole. One that says something already (ingest's count of its files) is left
    as it is."""
    try:
        yield
    except KeyboardInterrupt as e:
        if str(e):
            raise
        raise type(e)(
            f"{report.new} new profiles and {report.metric_rows} metric rows "
            "were stored before it (each batch whole)"
        ) from None
