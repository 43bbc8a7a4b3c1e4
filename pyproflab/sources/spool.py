"""The spool: pushed profiles on disk between their acknowledgement and the store.

Rules:

- ``Spool.put`` writes a push to ``tmp/``, fdatasyncs it, renames it into
  ``ready/`` and fsyncs that folder (one fsync shared by the puts renamed
  meanwhile: ``DirSync``); only then may the server acknowledge it.
  A file in ``ready/`` is therefore whole: a kill before the rename leaves a
  ``tmp/`` file that was never acknowledged (``Spool.clean`` removes them).
- A spool file is ``MAGIC``, the header's length in decimal and a newline, the
  header (JSON: protocol, tags, times, details, receipt time, the server's
  ``max_tag_value``, and for each attachment its name, size and sha256), then
  the attachments' bytes. The tags' values are cut to that ``max_tag_value``
  when they become metadata (``push_meta``; 256 for files written without it),
  so ``serve --max-tag-value`` holds whichever ingester or job reads the file. A file
  whose sizes or hashes do not match is refused whole (``SpoolError``), never
  read in part.
- Names sort by receipt time (``<ns>-<pid>-<seq>-<size>.push``): ``pending``
  gives the oldest first, and the oldest one's age is the ingest lag. The
  size is in the name so that listing a spool of many thousand files reads
  the folder only, without a stat of each.
- Capacity: ``max_bytes`` of ready files and ``min_free`` bytes left on the
  disk; a push that would pass either, or a write that fails for lack of
  space, is ``SpoolFull`` (the server answers 503 with Retry-After) and
  leaves nothing behind.
- ``done`` removes ingested files; ``refuse`` moves one to ``refused/`` with
  a ``.reason`` file beside it, so an operator can look at it.
- One server per spool: ``lock("server")`` takes an flock on
  ``.server.lock`` (``.ingester.lock`` for the ingester, ``.ingester-I-of-N.lock``
  for the ingester of share I/N), dropped by the kernel when the process dies.
- Shares: ``pending(part=(i, n))`` gives only the files whose name's CRC-32
  (``zlib.crc32``: the same in every process and run, unlike Python's salted
  ``hash()``) is ``i`` mod ``n``, oldest first within the share, so ``n``
  ingesters take every file exactly once between them and never the same one.
  ``depth`` (and so the ingest lag) counts the whole spool, every share.
  Ingesters of different ``n`` on one spool may take the same file: nothing
  is stored twice (the store's content hash), but the work is done twice.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import heapq
import itertools
import json
import os
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyproflab.errors import ProfileError, ProflabError
from pyproflab.sources.base import (
    PROFILES,
    TRACES,
    Item,
    ItemMeta,
    Known,
    Offer,
    ProfileItem,
    Refused,
    Request,
    TraceItem,
)
from pyproflab.sources.push import (
    MAX_TAG_VALUE,
    Attachment,
    Push,
    PushError,
    pprof_bytes,
    push_meta,
)

MAGIC = b"PYPROFLAB-PUSH 1\n"
SUFFIX = ".push"
MAX_HEADER = 1 << 20


class SpoolError(ProflabError):
    """A spool file cannot be read (damaged), or the spool cannot be used (one line)."""


class SpoolFull(SpoolError):
    """The spool has no room for a push; ``reason`` says which limit."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Entry:
    """One ready spool file."""

    name: str
    path: Path
    size: int

    @property
    def received_ns(self) -> int:
        return int(self.name.split("-", 1)[0])


def _name_size(name: str) -> int | None:
    """The size a ready file's name ends with (``...-<size>.push``), or None."""
    tail = name[: -len(SUFFIX)].rpartition("-")[2]
    return int(tail) if tail.isdigit() else None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DirSync:
    """fsync of a folder shared by concurrent callers (group commit): a caller
    returns once an fsync that started after its call has finished, so many
    renames done at once cost one fsync of the folder, not one each."""

    def __init__(self, path: Path):
        self.path = path
        self._cv = threading.Condition()
        self._done = 0  # the generation last synced
        self._next = 1  # the generation the next fsync to start will have
        self._running = False

    def sync(self) -> None:
        with self._cv:
            mine = self._next  # any fsync that starts from now on covers what was done before
            while self._done < mine:
                if not self._running:
                    self._running, gen = True, self._next
                    self._next += 1
                    break
                self._cv.wait()
            else:
                return
        try:
            _fsync_dir(self.path)
        finally:
            with self._cv:
                self._running = False
                self._done = max(self._done, gen)
                self._cv.notify_all()


def encode_push(
    push: Push, received_ns: int, client: str = "", max_tag_value: int = MAX_TAG_VALUE
) -> list[bytes]:
    """The spool file's bytes, as pieces (header first, then the attachments)."""
    header = {
        "protocol": push.protocol,
        "tags": push.tags,
        "start_ns": push.start_ns,
        "end_ns": push.end_ns,
        "details": push.details,
        "received_ns": received_ns,
        "client": client,
        "max_tag_value": max_tag_value,
        "attachments": [
            {"name": a.name, "size": len(a.data), "sha256": hashlib.sha256(a.data).hexdigest()}
            for a in push.attachments
        ],
    }
    head = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    return [MAGIC, b"%d\n" % len(head), head, *(a.data for a in push.attachments)]


def decode_push(data: bytes, source: str) -> tuple[Push, dict[str, Any]]:
    """(Push, header) of a spool file's bytes (SpoolError if damaged)."""
    if not data.startswith(MAGIC):
        raise SpoolError(f"{source}: not a spool file")
    nl = data.find(b"\n", len(MAGIC), len(MAGIC) + 12)
    try:
        hlen = int(data[len(MAGIC) : nl])
        if not 0 < hlen <= MAX_HEADER:
            raise ValueError
        pos = nl + 1
        header = json.loads(data[pos : pos + hlen])
        pos += hlen
        atts = []
        for a in header["attachments"]:
            blob = data[pos : pos + int(a["size"])]
            if len(blob) != int(a["size"]) or hashlib.sha256(blob).hexdigest() != a["sha256"]:
                raise SpoolError(f"{source}: attachment {a['name']!r} is damaged or cut short")
            atts.append(Attachment(str(a["name"]), blob))
            pos += len(blob)
        if pos != len(data):
            raise SpoolError(f"{source}: bytes after the last attachment")
        push = Push(
            header["protocol"],
            dict(header["tags"]),
            atts,
            header["start_ns"],
            header["end_ns"],
            dict(header["details"]),
        )
    except SpoolError:
        raise
    except (ValueError, KeyError, TypeError) as e:
        raise SpoolError(f"{source}: damaged spool header ({type(e).__name__})") from None
    return push, header


#: (i, n): the ingester's share of the spool, i in 0..n-1
Part = tuple[int, int]


def in_part(name: str, part: Part) -> bool:
    """Whether spool file ``name`` is in share ``part`` (see the module's rules)."""
    return zlib.crc32(name.encode()) % part[1] == part[0]


def part_role(part: Part | None) -> str:
    """The lock role of the ingester of ``part``."""
    return "ingester" if part is None or part[1] == 1 else f"ingester-{part[0]}-of-{part[1]}"


class Spool:
    """A spool folder (created if missing) with its capacity limits."""

    def __init__(self, root: str | os.PathLike, *, max_bytes: int = 1 << 30, min_free: int = 0):
        self.root = Path(root)
        self.ready = self.root / "ready"
        self.tmp = self.root / "tmp"
        self.refused = self.root / "refused"
        for d in (self.ready, self.tmp, self.refused):
            d.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.min_free = min_free
        self._seq = itertools.count()
        self._mu = threading.Lock()
        self._bytes = self.ready_bytes()
        self._locks: list[int] = []
        self._ready_sync = DirSync(self.ready)

    # --- locks and clean-up ----------------------------------------------------------

    def lock(self, role: str) -> None:
        """Hold ``.<role>.lock`` for this process's life (SpoolError if another holds it)."""
        fd = os.open(self.root / f".{role}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SpoolError(f"{self.root}: another {role} is using this spool") from None
        self._locks.append(fd)

    def clean(self) -> int:
        """Remove ``tmp/`` leftovers (never acknowledged); how many."""
        n = 0
        for p in self.tmp.iterdir():
            p.unlink(missing_ok=True)
            n += 1
        return n

    # --- writing -----------------------------------------------------------------------

    def _check_room(self, size: int) -> None:
        if self._bytes + size > self.max_bytes:
            raise SpoolFull(
                f"spool holds {self._bytes} bytes; the cap is {self.max_bytes}", "spool_full"
            )
        if self.min_free:
            st = os.statvfs(self.root)
            if st.f_bavail * st.f_frsize - size < self.min_free:
                raise SpoolFull(f"less than {self.min_free} bytes free on the spool's disk", "disk")

    def put(self, push: Push, client: str = "", max_tag_value: int = MAX_TAG_VALUE) -> Entry:
        """Write ``push`` durably into ``ready/`` (see the module's rules)."""
        now = time.time_ns()
        pieces = encode_push(push, now, client, max_tag_value)
        size = sum(map(len, pieces))
        with self._mu:
            self._check_room(size)
            self._bytes += size  # reserved now, so concurrent puts see it
            name = f"{now:020d}-{os.getpid()}-{next(self._seq):09d}-{size}{SUFFIX}"
        tmp = self.tmp / name
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                for piece in pieces:
                    view = memoryview(piece)
                    while view:
                        view = view[os.write(fd, view) :]
                os.fdatasync(fd)  # the data and the size; the name is the folder's fsync
            finally:
                os.close(fd)
            os.rename(tmp, self.ready / name)
            self._ready_sync.sync()
        except OSError as e:
            with self._mu:
                self._bytes -= size
            tmp.unlink(missing_ok=True)
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise SpoolFull(f"spool disk is full ({e.strerror})", "disk") from None
            raise
        return Entry(name, self.ready / name, size)

    # --- reading -----------------------------------------------------------------------

    def _names(self) -> list[str]:
        """The ready files' names, unsorted: the folder's names only, no stat and no
        Path of each (a spool of 40,000 files is listed in a few tens of ms; making
        an object of each file took most of a second, every second)."""
        return [n for n in os.listdir(self.ready) if n.endswith(SUFFIX)]

    def _entry(self, name: str) -> Entry | None:
        path = self.ready / name
        size = _name_size(name)
        if size is None:  # a name without its size: ask the file system
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                return None
        return Entry(name, path, size)

    def pending(self, limit: int | None = None, part: Part | None = None) -> list[Entry]:
        """Ready files, oldest first (at most ``limit``); with ``part``, of that share only."""
        names = self._names()
        if part is not None and part[1] > 1:
            names = [n for n in names if in_part(n, part)]
        chosen = heapq.nsmallest(limit, names) if limit is not None else sorted(names)
        return [e for e in map(self._entry, chosen) if e is not None]

    def depth(self) -> tuple[int, int, int | None]:
        """(ready files, their bytes, the oldest one's receipt time in ns or None),
        from the names (a stat only for a name without its size)."""
        names = self._names()
        if not names:
            return 0, 0, None
        total = 0
        for n in names:
            size = _name_size(n)
            if size is None:
                e = self._entry(n)
                size = e.size if e is not None else 0
            total += size
        return len(names), total, Entry(min(names), self.ready, 0).received_ns

    def full(self) -> bool:
        """The ready files (as last counted, plus writes since) reach ``max_bytes``."""
        return self._bytes >= self.max_bytes

    def ready_bytes(self) -> int:
        return self.depth()[1]

    def resync(self) -> None:
        """Recount the ready bytes (the ingester removes files behind the server's back)."""
        total = self.ready_bytes()
        with self._mu:
            self._bytes = total

    def read(self, entry: Entry) -> tuple[Push, dict[str, Any]]:
        try:
            data = entry.path.read_bytes()
        except OSError as e:
            raise SpoolError(f"{entry.path}: cannot read ({e.strerror})") from None
        return decode_push(data, str(entry.path))

    def items(self, limit: int | None = None) -> Iterator[tuple[Entry, Push | SpoolError]]:
        """(entry, its Push or the SpoolError reading it), oldest first."""
        for entry in self.pending(limit):
            try:
                yield entry, self.read(entry)[0]
            except SpoolError as e:
                yield entry, e

    # --- after ingest --------------------------------------------------------------------

    def done(self, entries: list[Entry]) -> None:
        for e in entries:
            e.path.unlink(missing_ok=True)
        if entries:
            _fsync_dir(self.ready)

    def refuse(self, entry: Entry, reason: str) -> None:
        """Move ``entry`` to ``refused/`` with its reason beside it."""
        (self.refused / (entry.name + ".reason")).write_text(reason + "\n", encoding="utf-8")
        try:
            os.rename(entry.path, self.refused / entry.name)
        except FileNotFoundError:
            pass
        _fsync_dir(self.ready)


# --- the spool as a source ---------------------------------------------------------------


def _tag_cap(header: dict[str, Any]) -> int:
    """The tag value cap the server wrote in a file's header (MAX_TAG_VALUE if none)."""
    cap = header.get("max_tag_value")
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else MAX_TAG_VALUE


class SpoolSource:
    """The pushes of given spool files (all waiting ones by default) as items.

    Each profile attachment is a ``ProfileItem`` (zstd undone; key
    ``<file>#<attachment>``), each execution trace a ``TraceItem`` when
    ``traces`` is set; a file that cannot be read, or an attachment whose
    compression is broken or too large, is a ``Refused`` naming it. Which
    file each item came from: ``origin`` (item key -> file name).
    """

    def __init__(
        self,
        spool: Spool,
        entries: list[Entry] | None = None,
        *,
        max_bytes: int = 1 << 30,
        traces: bool = True,
    ):
        self.spool = spool
        self.entries = entries
        self.max_bytes = max_bytes
        self.traces = traces
        self.name = f"spool:{spool.root.resolve()}"
        self.refused: dict[str, list[str]] = {}  # file name -> reasons

    def offer(self, request: Request) -> Offer:
        return Offer((PROFILES, TRACES) if self.traces else (PROFILES,))

    def _refuse(self, entry: Entry, what: str, why: str) -> Refused:
        self.refused.setdefault(entry.name, []).append(f"{what}: {why}" if what else why)
        return Refused(f"{entry.path}#{what}" if what else str(entry.path), why)

    def items(self, request: Request, known: Known) -> Iterator[Item]:
        entries = self.entries if self.entries is not None else self.spool.pending()
        for entry in entries:
            try:
                push, header = self.spool.read(entry)
            except SpoolError as e:
                yield self._refuse(entry, "", str(e))
                continue
            yield from self._entry_items(entry, push, _tag_cap(header), known)

    def _entry_items(self, entry: Entry, push: Push, tag_cap: int, known: Known) -> Iterator[Item]:
        try:
            meta = push_meta(push, tag_cap)
        except PushError as e:  # spooled before the server checked it: refused, not raised
            yield self._refuse(entry, "", str(e))
            return
        wanted = [
            a
            for a in push.attachments
            if a.kind == "profile" or (self.traces and a.kind == "trace")
        ]
        keys = [f"{entry.name}#{a.name}" for a in wanted]
        done = known(keys) if keys else set()
        for att, key in zip(wanted, keys, strict=True):
            if key in done:
                continue
            source = f"push:{push.protocol}:{key}"
            try:
                data = pprof_bytes(att.data, source=source, max_bytes=self.max_bytes)
            except ProfileError as e:
                yield self._refuse(entry, att.name, e.problem)
                continue
            item_meta = ItemMeta(source=source, **meta)
            if att.kind == "trace":
                yield TraceItem(item_meta, data=data, key=key)
            else:
                yield ProfileItem(item_meta, data=data, key=key)
