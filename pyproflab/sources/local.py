"""Local profile files, folders and globs, and exported Parquet datasets, as sources.

Rules:

- ``FileSource`` gives its paths as one ``FileSet``: the store reads them with
  its bulk reader (worker processes, ``store.ingest.ingest_paths``), which
  expands folders and globs, fills metadata from the defaults, a path template
  and sidecars, and takes a folder holding an exported dataset as a dataset.
  Files say what they are, so the request's selection does not filter them.
- ``DatasetSource`` gives one ``Dataset``: an export of another store, whose
  profiles the store adds when it lacks them (``store.parquet.import_parquet``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from pyproflab.sources.base import (
    PROFILES,
    Dataset,
    FileSet,
    ItemMeta,
    Known,
    Offer,
    Request,
)


@dataclass
class FileSource:
    """Profile files, folders (walked) and globs; see the module rules."""

    paths: Sequence[str | os.PathLike]
    defaults: ItemMeta = field(default_factory=ItemMeta)
    path_template: str | None = None
    max_bytes: int | None = None
    workers: int | None = None

    @property
    def name(self) -> str:
        shown = ", ".join(map(str, list(self.paths)[:3]))
        return f"files: {shown}" + (" ..." if len(self.paths) > 3 else "")

    def offer(self, request: Request) -> Offer:
        return Offer(kinds=(PROFILES,))

    def items(self, request: Request, known: Known) -> Iterator[FileSet]:
        yield FileSet(
            [str(p) for p in self.paths],
            self.defaults,
            path_template=self.path_template,
            max_bytes=self.max_bytes,
            workers=self.workers,
        )


@dataclass
class DatasetSource:
    """A folder written by ``pyproflab export --parquet``."""

    path: str | os.PathLike

    @property
    def name(self) -> str:
        return f"parquet: {self.path}"

    def offer(self, request: Request) -> Offer:
        return Offer(kinds=(PROFILES,))

    def items(self, request: Request, known: Known) -> Iterable[Dataset]:
        return [Dataset(str(self.path))]
