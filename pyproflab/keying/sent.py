"""What one ingest process has sent the writer, so the rows of a later file that
the writer already has are neither sent nor checked again.

The writer checks every row it is given against the rows stored under the same
id (``queries.refuse_collisions``); a fleet's profiles share most of their
functions, locations and stacks, so without this memory the writer checked the
same rows file after file and was the limit of ingest (issue 14).

Rules:

- Only functions, locations and stacks are remembered: they are most of a
  keyed profile's bytes and repeat across a fleet. Mappings, label sets and
  samples are always sent.
- A row is dropped from a keyed profile only when the memory holds a row under
  the same id, sent with an earlier file, whose content is the same byte for
  byte (every field of the row, ``*_columns``): compared here, never taken
  from the id. A row whose content differs is sent whole, so the writer sees
  both contents and refuses the profile.
- Rows keyed with this process's digest cache (``KeyedProfile.entries``) are
  matched by their entries instead: the cache compared their bytes already,
  and equal entries of one generation are equal content (``digests``), so a
  row is dropped when a row of its entry was sent; entries of a generation
  the memory has not seen (the cache was cleared) are new to it. Rows without
  entries are compared here.
- A trimmed profile names the files (content hashes) whose rows it relies on
  (``KeyedProfile.relies_on``): the first file that sent each dropped row. The
  writer stores it only if none of them was refused, and otherwise keys the
  file again in full (``ingest.Writer``): a refused file's rows are never
  taken on trust.
- Memory is bounded: once the remembered content passes ``max_bytes`` it is
  forgotten whole, and the next files are sent in full again.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from pyproflab.arrays import from_numpy
from pyproflab.keying import ids, quick_hash
from pyproflab.keying.digests import Entries
from pyproflab.keying.keys import KeyedProfile

Column = ids.Column


def location_columns(locations: pa.Table) -> list[Column]:
    """The words of each STORE_LOCATIONS row (every field of it)."""
    lines, _ = ids.list_values(locations.column("lines"))
    return [
        ids.location_words(
            locations, ids.u64(locations.column("mapping_id")), ids.u64(lines.field("function_id"))
        )
    ]


def stack_columns(stacks: pa.Table) -> list[Column]:
    """The location ids of each STORE_STACKS row."""
    values, offsets = ids.list_values(stacks.column("location_ids"))
    offsets = np.asarray(offsets, dtype=np.int64)
    return [(ids.u64(values)[offsets[0] : offsets[-1]], offsets - offsets[0])]


# (KeyedProfile attribute, id column, the columns of its rows) of the remembered tables.
_TABLES: tuple[tuple[str, str, Callable[[pa.Table], list[Column] | None]], ...] = (
    # Functions with null strings (no columns) are always sent.
    ("functions", "function_id", ids.function_columns),
    ("locations", "location_id", location_columns),
    ("stacks", "stack_id", stack_columns),
)


def same_segments(
    a: np.ndarray, a_starts: np.ndarray, b: np.ndarray, b_starts: np.ndarray, lengths: np.ndarray
) -> np.ndarray:
    """Per k: whether ``a[a_starts[k]:][:lengths[k]]`` equals ``b[b_starts[k]:][:lengths[k]]``
    (``a`` and ``b`` of one dtype). One call of ``_blake.same_segments`` (memcmp) when
    built; else every element gathered and compared."""
    out = np.zeros(len(lengths), dtype=bool)
    if not len(lengths):
        return out
    fast = getattr(ids._blake, "same_segments", None)
    if fast is not None:
        size = a.itemsize
        fast(
            np.ascontiguousarray(a),
            np.ascontiguousarray(a_starts * size, dtype=np.int64),
            np.ascontiguousarray(b),
            np.ascontiguousarray(b_starts * size, dtype=np.int64),
            np.ascontiguousarray(lengths * size, dtype=np.int64),
            out,
        )
        return out
    differ = a[ids.gather(a_starts, lengths)] != b[ids.gather(b_starts, lengths)]
    owner = np.repeat(np.arange(len(lengths)), lengths)
    return np.bincount(owner[differ], minlength=len(lengths)) == 0


@dataclass
class _Pool:
    """The remembered rows' values of one column, each row a segment of ``values``."""

    values: np.ndarray | None = None  # the first rows set the dtype
    starts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


@dataclass
class _Rows:
    """Remembered rows of one table, in the order they were remembered: ids, each
    one's columns and first sender. A hash table (open addressing, linear probing,
    at most half full) finds a row by id: ``slot_ids`` holds an id or 0 (ids are
    never 0), ``slot_rows`` its row. Slots come from the id mixed with a key of
    this process, so ids chosen to share low bits do not share slots."""

    width: int
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, ids.U64))
    origin: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pools: list[_Pool] = field(default_factory=list)
    slot_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, ids.U64))
    slot_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    key: np.uint64 = field(default_factory=lambda: ids.U64(secrets.randbits(64)))

    def __post_init__(self) -> None:
        self.pools = [_Pool() for _ in range(self.width)]

    @property
    def nbytes(self) -> int:
        held = sum(p.values.nbytes for p in self.pools if p.values is not None)
        table = self.slot_ids.nbytes + self.slot_rows.nbytes
        return held + table + (16 + 16 * self.width) * len(self.ids)

    def _first_slots(self, row_ids: np.ndarray) -> np.ndarray:
        mask = ids.U64(len(self.slot_ids) - 1)
        return (quick_hash.mix(row_ids ^ self.key) & mask).view(np.int64)

    def find(self, row_ids: np.ndarray) -> np.ndarray:
        """The remembered row of each id, -1 for an id not remembered."""
        out = np.full(len(row_ids), -1, np.int64)
        if not len(self.ids):
            return out
        mask = len(self.slot_ids) - 1
        slot = self._first_slots(row_ids)
        held = self.slot_ids[slot]
        hit = held == row_ids  # most ids are found in their first slot, or not at all
        out[hit] = self.slot_rows[slot[hit]]
        todo = np.flatnonzero(~hit & (held != 0))
        slot = (slot[todo] + 1) & mask
        while len(todo):
            held = self.slot_ids[slot]
            hit = held == row_ids[todo]
            out[todo[hit]] = self.slot_rows[slot[hit]]
            going = ~hit & (held != 0)
            todo, slot = todo[going], (slot[going] + 1) & mask
        return out

    def _place(self, new_ids: np.ndarray, rows: np.ndarray) -> None:
        """Put ``new_ids`` (distinct, none in the table) in free slots, with their rows."""
        mask = len(self.slot_ids) - 1
        todo, slot = np.arange(len(new_ids)), self._first_slots(new_ids)
        while len(todo):
            free = np.flatnonzero(self.slot_ids[slot] == 0)
            _, first = np.unique(slot[free], return_index=True)
            win = free[first]  # one id per free slot; the others probe on
            self.slot_ids[slot[win]] = new_ids[todo[win]]
            self.slot_rows[slot[win]] = rows[todo[win]]
            on = np.ones(len(todo), dtype=bool)
            on[win] = False
            todo, slot = todo[on], (slot[on] + 1) & mask

    def known(self, row_ids: np.ndarray, columns: list[Column]) -> tuple[np.ndarray, np.ndarray]:
        """(which rows are remembered with equal columns, the origin of each of those)."""
        found = self.find(row_ids)
        hit = np.flatnonzero(found >= 0)
        at = found[hit]
        ok = np.ones(len(hit), dtype=bool)
        for pool, (values, starts) in zip(self.pools, columns, strict=True):
            lengths = starts[1:][hit] - starts[:-1][hit]
            ok &= pool.lengths[at] == lengths
            check = np.flatnonzero(ok)
            held = pool.values if pool.values is not None else values[:0]  # none: no hits
            ok[check] = same_segments(
                values, starts[hit[check]], held, pool.starts[at[check]], lengths[check]
            )
        same = np.zeros(len(row_ids), dtype=bool)
        same[hit[ok]] = True
        return same, self.origin[at[ok]]

    def add(
        self, row_ids: np.ndarray, columns: list[Column], rows: np.ndarray, origin: int
    ) -> None:
        """Remember ``rows`` (indices) whose id is not remembered yet (the first of equal ids)."""
        new_ids, first = np.unique(row_ids[rows], return_index=True)
        if len(self.ids):
            fresh = self.find(new_ids) < 0
            new_ids, first = new_ids[fresh], first[fresh]
        if not len(new_ids):
            return
        take = rows[first]
        base = len(self.ids)
        self.ids = np.concatenate([self.ids, new_ids])
        self.origin = np.concatenate([self.origin, np.full(len(new_ids), origin)])
        for pool, (values, starts) in zip(self.pools, columns, strict=True):
            lengths = np.diff(starts)[take]
            new = values[ids.gather(starts[:-1][take], lengths)]
            held = len(pool.values) if pool.values is not None else 0
            pool.starts = np.concatenate([pool.starts, held + np.cumsum(lengths) - lengths])
            pool.lengths = np.concatenate([pool.lengths, lengths])
            pool.values = new if pool.values is None else np.concatenate([pool.values, new])
        if 2 * len(self.ids) <= len(self.slot_ids):
            self._place(new_ids, np.arange(base, len(self.ids)))
            return
        size = 1024
        while size < 4 * len(self.ids):
            size *= 2
        self.slot_ids, self.slot_rows = np.zeros(size, ids.U64), np.zeros(size, np.int64)
        self._place(self.ids, np.arange(len(self.ids)))


@dataclass
class _Entries:
    """The first sender of each cache entry of one generation, -1 for none yet."""

    generation: int = 0
    origin: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def nbytes(self) -> int:
        return self.origin.nbytes

    def known(self, entries: Entries, origin: int) -> tuple[np.ndarray, np.ndarray]:
        """(which rows' entries were sent, the origin of each of those); the others
        are remembered as sent now, by ``origin``."""
        if entries.generation != self.generation:
            self.generation, self.origin = entries.generation, np.zeros(0, np.int64)
        codes = entries.codes
        top = int(codes.max()) + 1 if len(codes) else 0
        if top > len(self.origin):
            grown = np.full(max(top, 2 * len(self.origin)), -1, np.int64)
            grown[: len(self.origin)] = self.origin
            self.origin = grown
        held = self.origin[codes]
        same = held >= 0
        self.origin[codes[~same]] = origin
        return same, held[same]


class SentMemory:
    """The functions, locations and stacks sent with earlier files of one ingest
    (module docstring: what is dropped, and what a trimmed profile relies on).
    ``max_bytes`` 0 remembers nothing."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._forget()

    def _forget(self) -> None:
        self.senders: list[str] = []
        self.rows: dict[str, _Rows] = {}
        self.entries: dict[str, _Entries] = {}

    @property
    def nbytes(self) -> int:
        """The remembered rows and entries, and the senders' hashes (a 64-character
        str and its list slot, ~128 bytes each), so the bound holds for any number
        of files."""
        held = sum(r.nbytes for r in self.rows.values())
        held += sum(e.nbytes for e in self.entries.values())
        return held + 128 * len(self.senders)

    def trim(self, keyed: KeyedProfile) -> KeyedProfile:
        """``keyed`` without the rows sent before with the same content, naming the
        files those were sent with; the rows it sends are remembered. Rows are
        matched by ``keyed.entries`` where keying had them, else by their content,
        from ``keyed.content`` (built while keying) when it is there; ``keyed``
        leaves without either."""
        content, keyed.content = keyed.content, None
        entries, keyed.entries = keyed.entries or {}, None
        if self.max_bytes <= 0:
            return keyed
        origin = len(self.senders)
        self.senders.append(keyed.content_hash)
        kept: dict[str, pa.Table] = {}
        relied: set[int] = set()
        for attr, id_col, columns_of in _TABLES:
            table: pa.Table = getattr(keyed, attr)
            found = self._known(attr, table, entries.get(attr), origin)
            if found is None:
                columns = content[attr] if content is not None else columns_of(table)
                found = self._compared(attr, table, id_col, columns, origin)
            if found is None:
                continue
            same, origins = found
            if same.any():
                relied.update(np.flatnonzero(np.bincount(origins)).tolist())
                kept[attr] = table.filter(from_numpy(~same))
        out = keyed
        if kept:
            senders = frozenset(self.senders[i] for i in relied)
            out = replace(keyed, relies_on=keyed.relies_on | senders, **kept)
        if self.nbytes > self.max_bytes:
            self._forget()
        return out

    def _known(
        self, attr: str, table: pa.Table, entries: Entries | None, origin: int
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """``_Entries.known`` of the table's rows by their cache entries; None without."""
        if entries is None:
            return None
        if len(entries.codes) != table.num_rows:
            raise ValueError(f"the {attr} entries kept while keying are not of its rows")
        return self.entries.setdefault(attr, _Entries()).known(entries, origin)

    def _compared(
        self,
        attr: str,
        table: pa.Table,
        id_col: str,
        columns: list[Column] | None,
        origin: int,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """``_Rows.known`` of the table's rows by id and content (remembering those
        not known); None for a table without columns (sent whole)."""
        if columns is None:
            return None
        if any(len(s) != table.num_rows + 1 for _, s in columns):
            raise ValueError(f"the {attr} content kept while keying is not of its rows")
        rows = self.rows.setdefault(attr, _Rows(len(columns)))
        row_ids = ids.u64(table.column(id_col))
        same, origins = rows.known(row_ids, columns)
        rows.add(row_ids, columns, np.flatnonzero(~same), origin)
        return same, origins
