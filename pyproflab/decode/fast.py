"""The fast decoder: pprof sub-messages decoded in bulk, in C or with numpy.

How: every field inside Sample, Label, Mapping, Location, Line and Function is
a varint or a length-delimited run of varints (packed ids and values, nested
Label and Line messages). So the sub-messages of one kind, joined, are a plain
sequence of varints: each byte below 0x80 ends one. All varints are decoded
at once (``Tokens``), then every message is walked field by field
(``Fields``), and the tables are gathered from those arrays.

Two paths give the same arrays. The C extension ``_wire`` (our own
``_wire.c``, built by ``pip install`` when a C compiler is present) reads the
sub-messages in place (``lite.RawMessages``: segments of one buffer of their
payloads), walks each right after decoding its varints, message by message, and
gathers packed runs and singular fields in one pass each.
Without it (no compiler, or ``PYPROFLAB_PURE_DECODE=1``) numpy does it: it
joins the sub-messages, decodes all varints with array operations and walks
the messages *all together* (step k reads the k-th field of every message
still open), which costs numpy calls per field position, not per message.
With the C extension, samples without labels, locations and functions (most
of a profile) skip the tokens altogether: ``direct.py`` reads each kind in one
pass straight into the same arrays, and declines any but the plain shapes to
the walk.

Rules: the same as the reference decoder (``reference`` and ``validate``),
and the same Profile comes out. Anything the walk cannot take in stride (a
fixed-width or misaligned field, a wrong wire type, a varint of more than 10
bytes, field number 0, a truncated field) is handed to the reference decoder,
which parses it with upb and raises the precise error when there is one; both
paths hand over under the same conditions.

Longer than 500 lines: each step of the bulk walk keeps its C path (``_wire``)
and its numpy fallback side by side, and tests/decode/test_decode_cext.py
switches between them through this module's ``_wire`` and requires equal
arrays. The varint tokenizer and the field walk (``Tokens`` to
``walk_messages``, about 390 lines) are the seam a split into a wire module
would cut along.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TypeVar

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.arrays import from_numpy
from pyproflab.decode import direct
from pyproflab.decode.common import malformed, metadata
from pyproflab.decode.lite import RawMessages, TopLevel
from pyproflab.model import Profile
from pyproflab.native import optional_extension

U64 = np.uint64
I64 = np.int64
WIRE_VARINT, WIRE_BYTES = 0, 2
MAX_VARINT_BYTES = 10
# After this many field positions, messages still open (at most SCALAR_MAX_LIVE)
# are walked one field at a time (see ``walk``).
SCALAR_AFTER_STEPS = 32
SCALAR_MAX_LIVE = 16
# Sub-messages of up to this many bytes in all are tokenized into arrays of one
# entry per byte (see ``walk_messages``).
TOKENS_PER_BYTE_MAX = 16 << 20


class _HandToReference(Exception):
    """The input uses a wire form the bulk walk does not handle."""


# The C extension (PYPROFLAB_PURE_DECODE=1 forces the numpy path).
_wire = optional_extension("pyproflab.decode._wire", "PYPROFLAB_PURE_DECODE")

# Samples, locations and functions read by direct.py first, when the C extension
# has it (tests switch it off to compare).
DIRECT = True

_T = TypeVar("_T")

# The C extension's hand-over codes (keep in step with _wire.c).
_HAND_OVER = {
    -1: "varint longer than 10 bytes",
    -2: "buffer ends inside a varint",
    -3: "truncated field",
    -4: "field number 0",
    -5: "fixed-width or group field",
    -6: "field longer than its message",
    -7: "a field ends inside a varint",
}


def _handed_over(code: int) -> int:
    if code < 0:
        raise _HandToReference(_HAND_OVER[code])
    return code


# --- varints --------------------------------------------------------------------------


@dataclass
class Tokens:
    """Every varint of one joined buffer: its value and the index of its last byte."""

    values: np.ndarray  # uint64
    ends: np.ndarray  # int64, index of the last byte of each varint
    size: int  # bytes in the buffer

    def index_at(self, byte: np.ndarray) -> np.ndarray:
        """Index of the varint starting at each ``byte`` (which must start one)."""
        idx = np.searchsorted(self.ends, byte)  # first varint ending at or after byte
        starts_there = np.where(idx > 0, self.ends[np.maximum(idx - 1, 0)] + 1, 0) == byte
        if not starts_there.all():
            raise _HandToReference("a field ends inside a varint")
        return idx


def tokenize(buf: bytes) -> Tokens:
    """Split ``buf`` into varints (each ends at a byte below 0x80) and decode them all.

    Rules: the buffer must end on a varint's last byte and no varint may be longer
    than 10 bytes (else ``_HandToReference``); values wrap modulo 2**64 as in upb.
    """
    size = len(buf)
    data = np.frombuffer(buf, dtype=np.uint8)
    if size and data[-1] & 0x80:
        raise _HandToReference("buffer ends inside a varint")
    ends = np.flatnonzero(data < 0x80)
    if not ends.size:
        return Tokens(values=np.zeros(0, dtype=U64), ends=ends, size=size)
    starts = np.empty_like(ends)
    starts[0] = 0
    np.add(ends[:-1], 1, out=starts[1:])
    # Lengths straight into uint8 (a length of 256 or more wraps): they are all
    # right, and all at most 10, exactly when none is above 10 and they add up to
    # the buffer's size, since a wrapped one comes out short.
    length = np.empty(ends.size, dtype=np.uint8)
    np.subtract(ends, starts, out=length, casting="unsafe")
    length += np.uint8(1)
    if int(length.max()) > MAX_VARINT_BYTES or int(length.sum(dtype=I64)) != size:
        raise _HandToReference("varint longer than 10 bytes")
    values = np.empty(ends.size, dtype=U64)
    _fold(data, starts, length, values)
    return Tokens(values=values, ends=ends, size=size)


def _fold(data: np.ndarray, starts: np.ndarray, length: np.ndarray, out: np.ndarray) -> None:
    """``out`` = the varints of ``length`` (1 to 10) bytes at ``starts`` in ``data``.

    Rounds j = 0..3 add byte j of every varint at once, through the view
    ``data[j:]`` (indexes clipped at its end, the byte masked to nothing for
    varints of j bytes or fewer), in uint32 (28 bits): cheap byte-wide passes
    instead of an index array per round, and half the memory of uint64. Bytes
    4 to 9, rare in profiles, are added only to the varints that have them.
    """
    n = starts.size
    low = data.take(starts)
    low &= np.uint8(0x7F)
    low = low.astype(np.uint32)
    mask = np.empty(n, dtype=np.uint8)
    j = 1
    while j < 4:
        np.greater(length, j, out=mask)
        if not mask.any():
            break
        byte = data[j:].take(starts, mode="clip")
        mask *= np.uint8(0x7F)
        byte &= mask
        shifted = byte.astype(np.uint32)
        shifted <<= np.uint32(7 * j)
        low |= shifted
        j += 1
    out[...] = low
    rest = np.flatnonzero(length > j)
    while rest.size:
        byte = data[j:].take(starts[rest])
        byte &= np.uint8(0x7F)
        out[rest] |= byte.astype(U64) << U64(7 * j)
        j += 1
        rest = rest[length[rest] > j]


def join(messages: Sequence[bytes]) -> tuple[bytes, np.ndarray]:
    """One buffer and the byte offsets (n+1) of the messages in it."""
    if _wire is not None:
        offsets = np.empty(len(messages) + 1, dtype=I64)
        if isinstance(messages, RawMessages):
            return _wire.join_at(*_segments(messages), offsets), offsets
        return _wire.join(messages, offsets), offsets
    if isinstance(messages, RawMessages):
        lengths = messages.length
    else:
        lengths = np.fromiter(map(len, messages), dtype=I64, count=len(messages))
    offsets = np.zeros(len(messages) + 1, dtype=I64)
    np.cumsum(lengths, out=offsets[1:])
    return b"".join(messages), offsets


# --- walking fields ---------------------------------------------------------------------


@dataclass
class Fields:
    """Every field of a set of messages, each message's in order: for each, its
    message, number, wire type, tag varint index and the index of the varint after
    it. ``ordered``: message by message (``message`` never decreases), as the C walk
    gives; the numpy walk gives them field position by field position."""

    message: np.ndarray
    number: np.ndarray
    wire: np.ndarray
    tag: np.ndarray
    next: np.ndarray
    count: int  # number of messages walked
    ordered: bool = False

    def select(self, number: int, wire: int | None) -> np.ndarray:
        """Positions of the fields with ``number``; with ``wire``, all must have it."""
        sel = np.flatnonzero(self.number == number)
        if wire is not None and sel.size and (self.wire[sel] != wire).any():
            raise _HandToReference(f"field {number} with a wrong wire type")
        return sel

    def last_value(self, tok: Tokens, number: int, default: int = 0) -> np.ndarray:
        """A singular varint field per message (the last occurrence wins, as in pprof)."""
        out = np.full(self.count, default, dtype=U64)
        sel = self.select(number, WIRE_VARINT)
        if sel.size:
            msg = self.message[sel]
            if self.ordered:
                # The last of each run of equal messages.
                last = np.empty(msg.size, dtype=bool)
                np.not_equal(msg[1:], msg[:-1], out=last[:-1])
                last[-1] = True
                if not last.all():
                    sel, msg = sel[last], msg[last]
            elif np.bincount(msg, minlength=self.count).max() > 1:
                # Keep the last occurrence of each message: fields are in order.
                _, first_from_end = np.unique(msg[::-1], return_index=True)
                sel = sel[sel.size - 1 - first_from_end]
                msg = self.message[sel]
            out[msg] = tok.values[self.tag[sel] + 1]
        return out

    def last_values(self, tok: Tokens, numbers: tuple[int, ...]) -> list[np.ndarray]:
        """``last_value`` of each of ``numbers`` (1 to 255), in one pass with the C
        extension."""
        if _wire is None:
            return [self.last_value(tok, k) for k in numbers]
        out = np.zeros((len(numbers), self.count), dtype=U64)
        wanted = np.array(numbers, dtype=I64)
        cols = (self.message, self.number, self.wire, self.tag)
        _handed_over(_wire.last_values(tok.values, *cols, wanted, out))
        return list(out)

    def repeated_varints(self, tok: Tokens, number: int) -> tuple[np.ndarray, np.ndarray]:
        """A repeated varint field (packed or not, even mixed): list offsets and values.
        Fields in message order (the C walk's) are gathered by the C extension in
        one pass, without the selections and run arrays of the numpy way."""
        if _wire is not None and self.ordered:
            offsets = np.empty(self.count + 1, dtype=I64)
            cols = (self.message, self.number, self.wire, self.tag, self.next)
            total = _handed_over(_wire.repeated(tok.values, *cols, number, offsets, _NO_VALUES))
            out = np.empty(total, dtype=U64)
            if total:
                _wire.repeated(tok.values, *cols, number, offsets, out)
            return offsets, out
        sel = self.select(number, None)
        wire = self.wire[sel]
        if sel.size and ((wire != WIRE_VARINT) & (wire != WIRE_BYTES)).any():
            raise _HandToReference(f"field {number} with a wrong wire type")
        first = np.where(wire == WIRE_VARINT, self.tag[sel] + 1, self.tag[sel] + 2)
        count = np.where(wire == WIRE_VARINT, 1, self.next[sel] - self.tag[sel] - 2)
        return _gather_segments(
            tok.values, self.message[sel], first, count, self.count, ordered=self.ordered
        )

    def children(self, tok: Tokens, number: int) -> tuple[np.ndarray, ...]:
        """Nested messages of field ``number``, in parent order: per-parent offsets,
        and each child's first varint, end varint and end byte."""
        sel = self.select(number, WIRE_BYTES)
        msg = self.message[sel]
        if not self.ordered:
            order = np.argsort(msg, kind="stable")
            sel, msg = sel[order], msg[order]
        offsets = np.zeros(self.count + 1, dtype=I64)
        np.cumsum(np.bincount(msg, minlength=self.count), out=offsets[1:])
        tag = self.tag[sel]
        end_byte = tok.ends[tag + 1] + 1 + tok.values[tag + 1].astype(I64)
        return offsets, tag + 2, self.next[sel], end_byte


def _gather_segments(
    values: np.ndarray,
    owner: np.ndarray,
    first: np.ndarray,
    count: np.ndarray,
    n: int,
    *,
    ordered: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate runs values[first:first+count] grouped by owner (stable);
    ``ordered``: owner is known not to decrease."""
    if not ordered and owner.size > 1 and (owner[1:] < owner[:-1]).any():
        order = np.argsort(owner, kind="stable")
        owner, first, count = owner[order], first[order], count[order]
    if _wire is not None:
        offsets = np.empty(n + 1, dtype=I64)
        out = np.empty(int(count.sum()), dtype=U64)
        _wire.gather(values, _i64(owner), _i64(first), _i64(count), offsets, out)
        return offsets, out
    offsets = np.zeros(n + 1, dtype=I64)
    np.cumsum(np.bincount(owner, weights=count, minlength=n).astype(I64), out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return offsets, np.zeros(0, dtype=U64)
    # Index of every element: its run's first varint plus its rank in the run.
    run_start = np.zeros(count.size, dtype=I64)
    np.cumsum(count[:-1], out=run_start[1:])
    idx = np.arange(total, dtype=I64) + np.repeat(first - run_start, count)
    return offsets, values[idx]


def _i64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=I64)


def walk(tok: Tokens, first: np.ndarray, end: np.ndarray, end_byte: np.ndarray) -> Fields:
    """Every field of the messages [first, end) (varint indexes; end_byte: the byte
    after each): with the C extension message by message, else with numpy."""
    if _wire is None:
        return _walk_numpy(tok, first, end, end_byte)
    first, end, end_byte = _i64(first), _i64(end), _i64(end_byte)
    bound = int(np.maximum(end - first, 0).sum()) // 2  # a field has two varints or more
    return _fill_fields(
        lambda cols, m, k: _wire.walk(tok.values, tok.ends, first, end, end_byte, *cols, m, k),
        first.size,
        bound,
    )


def _fill_fields(step, count: int, bound: int) -> Fields:
    """Fields from the C extension: ``step(cols, m, k)`` fills the five columns from
    message m and field k on and says where it stopped; columns that fill up are
    doubled and the walk resumes there."""
    # Small walks get their upper bound at once; large ones a guess (messages
    # have 1 to 4 fields but for mappings), so no array is far larger than it needs.
    cap = bound if bound <= 1 << 16 else min(bound, 4 * count + 64)
    cols = _field_columns(cap)
    m = k = 0
    while True:
        k, m = step(cols, m, k)
        _handed_over(k)
        if m == count:
            break
        cap = max(2 * cap, 64)
        grown = _field_columns(cap)
        for old, new in zip(cols, grown, strict=True):
            new[:k] = old[:k]
        cols = grown
    head = [c[:k] for c in cols]
    return Fields(*head, count=count, ordered=True)  # type: ignore[misc, arg-type]


_NO_VALUES = np.empty(0, dtype=U64)  # _wire.repeated's "count only"

# The dtypes of Fields' columns: message, number, wire, tag, next.
FIELD_DTYPES = (I64, U64, np.int8, I64, I64)


def _field_columns(n: int) -> tuple[np.ndarray, ...]:
    """Empty Fields columns for ``n`` fields."""
    return tuple(np.empty(n, dtype=t) for t in FIELD_DTYPES)


def _walk_numpy(tok: Tokens, first: np.ndarray, end: np.ndarray, end_byte: np.ndarray) -> Fields:
    """Walk all messages [first, end) (varint indexes) one field position at a time."""
    n = first.size
    parts: list[tuple[np.ndarray, ...]] = []
    msg = np.arange(n, dtype=I64)
    cur = first.astype(I64)
    live = cur < end
    msg, cur = msg[live], cur[live]
    steps = 0
    while msg.size:
        stop, stop_byte = end[msg], end_byte[msg]
        if (cur + 1 >= stop).any():
            raise _HandToReference("truncated field")
        tag = tok.values[cur]
        wire = (tag & U64(7)).astype(np.int8)
        number = tag >> U64(3)
        if (number == 0).any():
            raise _HandToReference("field number 0")
        nxt = cur + 2
        is_bytes = wire == WIRE_BYTES
        if ((wire != WIRE_VARINT) & ~is_bytes).any():
            raise _HandToReference("fixed-width or group field")
        if is_bytes.any():
            b = np.flatnonzero(is_bytes)
            length = tok.values[cur[b] + 1]
            payload_start = tok.ends[cur[b] + 1] + 1
            room = (stop_byte[b] - payload_start).astype(U64)
            if (length > room).any():
                raise _HandToReference("field longer than its message")
            payload_end = payload_start + length.astype(I64)
            inside = payload_end < stop_byte[b]
            after = stop[b].copy()
            if inside.any():
                after[inside] = tok.index_at(payload_end[inside])
            nxt[b] = after
        parts.append((msg, number, wire, cur, nxt))
        live = nxt < stop
        msg, cur = msg[live], nxt[live]
        steps += 1
        if steps >= SCALAR_AFTER_STEPS and 0 < msg.size <= SCALAR_MAX_LIVE:
            # A few very wide messages left (one sample with 10^5 labels): a numpy
            # step per field would cost ~100 us each, so finish them one by one.
            parts.append(_walk_scalar(tok, msg, cur, end, end_byte))
            break
    if not parts:
        empty = np.zeros(0, dtype=I64)
        return Fields(empty, empty.astype(U64), empty.astype(np.int8), empty, empty, n)
    cols = [np.concatenate(c) for c in zip(*parts, strict=True)]
    return Fields(cols[0], cols[1], cols[2], cols[3], cols[4], n)


def _walk_scalar(
    tok: Tokens, msgs: np.ndarray, curs: np.ndarray, end: np.ndarray, end_byte: np.ndarray
) -> tuple[np.ndarray, ...]:
    """The rest of ``walk`` for messages ``msgs`` from varint ``curs`` on, one field at
    a time in plain Python; the same fields, in each message's order, and the same
    hand-overs to the reference decoder."""
    from bisect import bisect_left

    out_msg: list[int] = []
    out_num: list[int] = []
    out_wire: list[int] = []
    out_cur: list[int] = []
    out_next: list[int] = []
    for m, c in zip(msgs.tolist(), curs.tolist(), strict=True):
        stop, stop_byte = int(end[m]), int(end_byte[m])
        values = tok.values[c:stop].tolist()
        ends = tok.ends[c:stop].tolist()
        i = 0  # c + i is the current varint
        last = stop - c
        while i < last:
            if i + 1 >= last:
                raise _HandToReference("truncated field")
            tag = values[i]
            wire, number = tag & 7, tag >> 3
            if number == 0:
                raise _HandToReference("field number 0")
            if wire == WIRE_VARINT:
                nxt = i + 2
            elif wire == WIRE_BYTES:
                length = values[i + 1]
                payload_start = ends[i + 1] + 1
                if length > stop_byte - payload_start:
                    raise _HandToReference("field longer than its message")
                payload_end = payload_start + length
                if payload_end < stop_byte:
                    nxt = bisect_left(ends, payload_end, i + 2)
                    if nxt >= last or (ends[nxt - 1] + 1 if nxt else c) != payload_end:
                        raise _HandToReference("a field ends inside a varint")
                else:
                    nxt = last
            else:
                raise _HandToReference("fixed-width or group field")
            out_msg.append(m)
            out_num.append(number)
            out_wire.append(wire)
            out_cur.append(c + i)
            out_next.append(c + nxt)
            i = nxt
    columns = (out_msg, out_num, out_wire, out_cur, out_next)
    return tuple(np.array(c, dtype=t) for c, t in zip(columns, FIELD_DTYPES, strict=True))


def _segments(messages: RawMessages) -> tuple:
    """The arguments the ``_wire.*_at`` functions read messages in place from."""
    return messages.buf, messages.start, messages.length


def walk_messages(messages: Sequence[bytes]) -> tuple[Tokens, Fields]:
    """``tokenize`` the messages as if joined and ``walk`` them all; a message that
    starts inside a varint is handed over. The C extension reads the messages in
    place (no joined copy: bytes objects, or ``RawMessages`` segments of the
    profile's buffer) and walks each right after tokenizing it."""
    if _wire is None:
        buf, offsets = join(messages)
        tok = tokenize(buf)
        first = tok.index_at(offsets[:-1]) if tok.ends.size else np.zeros(len(messages), I64)
        end = np.append(first[1:], tok.ends.size) if len(messages) else first
        return tok, walk(tok, first, end, offsets[1:])
    if isinstance(messages, RawMessages):
        segments = _segments(messages)
        size = int(messages.length.sum())
        split = lambda *args: _wire.split_at(*segments, *args)  # noqa: E731
        count = lambda: _wire.count_ends_at(*segments)[1]  # noqa: E731
    else:
        size = sum(map(len, messages))
        split = lambda *args: _wire.split(messages, *args)  # noqa: E731
        count = lambda: _wire.count_ends(messages)[1]  # noqa: E731
    # Room for a varint per byte: no pass to count them, and the pages past the
    # last varint are never touched. Only large inputs are counted first, so that
    # ten-byte varints never reserve ten times the memory they need.
    cap = size if size <= TOKENS_PER_BYTE_MAX else count()
    values, ends = np.empty(cap, dtype=U64), np.empty(cap, dtype=I64)
    first = np.empty(len(messages), dtype=I64)
    offsets = np.empty(len(messages) + 1, dtype=I64)
    ntok = 0

    def step(cols, m, k):
        nonlocal ntok
        k, m, ntok = split(values, ends, first, offsets, *cols, m, k)
        return k, m

    fields = _fill_fields(step, len(messages), cap // 2)
    return Tokens(values=values[:ntok], ends=ends[:ntok], size=size), fields


# --- lookups and checks -------------------------------------------------------------------


class IdIndex:
    """Membership of ids (non-zero, unique): a range test when they are 1 to n
    in order, else a dense table when ids are small, else a sorted copy.

    Why the range test: Go numbers locations and functions 1 to n in order, and
    a large profile's samples hold hundreds of thousands of location ids; two
    reductions over them (``contains_all``) cost less than a gather into a
    table, and the table need not be built."""

    def __init__(self, ids: np.ndarray):
        n = ids.size
        self.top = int(ids.max()) if n else 0
        self.sequential = self.top == n > 0 and np.array_equal(ids, np.arange(1, n + 1, dtype=U64))
        self.dense = self.top <= 4 * n + 1024
        if self.sequential:
            pass
        elif self.dense:
            self.table = np.zeros(self.top + 1, dtype=bool)
            self.table[ids] = True
        else:
            self.sorted = np.sort(ids)

    def all_unique(self, n: int) -> bool:
        """Whether the ``n`` ids it was built from are all different: from the
        table or the sorted copy it holds, so no second sort."""
        if self.sequential:
            return True
        if self.dense:
            return int(np.count_nonzero(self.table)) == n
        return not (self.sorted[1:] == self.sorted[:-1]).any()

    def contains_all(self, query: np.ndarray) -> bool:
        """Whether ``contains`` is True for every query: for 1..n ids, whether
        none is 0 and none passes n, without an array per query."""
        if not self.sequential:
            return bool(self.contains(query).all())
        query = np.asarray(query, dtype=U64)
        return not query.size or bool(
            np.count_nonzero(query) == query.size and query.max() <= U64(self.top)
        )

    def contains(self, query: np.ndarray) -> np.ndarray:
        if self.sequential:
            query = np.asarray(query, dtype=U64)
            return (query != 0) & (query <= U64(self.top))
        if self.dense:
            # take() with int64 indexes: 3x faster than indexing with uint64 ones,
            # which numpy first converts; ids up to top read the same as int64.
            query = np.asarray(query, dtype=U64)
            if not query.size or query.max() <= U64(self.top):
                return self.table.take(query.view(I64))
            ok = query <= U64(self.top)
            out = np.zeros(query.size, dtype=bool)
            out[ok] = self.table.take(query[ok].view(I64))
            return out
        pos = np.searchsorted(self.sorted, query)
        pos = np.minimum(pos, max(self.sorted.size - 1, 0))
        return (self.sorted[pos] == query) if self.sorted.size else np.zeros(query.size, bool)


def check_ids(
    ids: np.ndarray, what: str, zero_message: str, *, source: str, index: IdIndex | None = None
) -> IdIndex:
    """The index of ``ids`` (``index`` when already built), which must be
    non-zero and unique (the error names the smallest id that repeats)."""
    if ids.size and (ids == 0).any():
        raise malformed(source, zero_message)
    index = index if index is not None else IdIndex(ids)
    if ids.size > 1 and not index.all_unique(ids.size):
        ordered = np.sort(ids)
        dup = np.flatnonzero(ordered[1:] == ordered[:-1])
        raise malformed(source, f"multiple {what} with same id: {ordered[dup[0]]}")
    return index


def check_strings(index: np.ndarray, nstrings: int, what: str, *, source: str) -> None:
    """String indexes (int64 read as uint64, so negatives are huge) must be in range."""
    bad = np.flatnonzero(index >= U64(nstrings))
    if bad.size:
        value = int(index[bad[0]].astype(I64))
        raise malformed(
            source, f"{what} refers to string {value}, outside the string table of {nstrings}"
        )


# --- Arrow ----------------------------------------------------------------------------------


def string_array(raw: Sequence[bytes], top: TopLevel) -> pa.Array:
    buf, offsets = join(raw)
    if offsets[-1] < 2**31:
        arr = pa.StringArray.from_buffers(
            len(raw), pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(buf)
        )
        try:
            arr.validate(full=True)  # checks UTF-8
            return arr
        except pa.ArrowInvalid:
            pass
    return pa.array(top.strings, pa.string())


def signed(values: np.ndarray) -> np.ndarray:
    """uint64 values as the int64 columns hold them: a view of the same bits,
    which is what the cast ``from_numpy`` would otherwise copy them through
    gives (both wrap modulo 2**64), without the copy."""
    return values.view(I64) if values.dtype == U64 else values


def list_array(offsets: np.ndarray, values: pa.Array) -> pa.Array:
    return pa.ListArray.from_arrays(from_numpy(offsets, pa.int32()), values)


def struct_fields(struct: pa.StructType) -> list[pa.Field]:
    return [struct.field(i) for i in range(struct.num_fields)]


# --- the decoder ------------------------------------------------------------------------------


def decode_fast(top: TopLevel, *, source: str) -> Profile:
    try:
        return _decode(top, source=source)
    except _HandToReference:
        from pyproflab.decode.reference import decode_reference

        return decode_reference(top, source=source)


def _read_direct(read: Callable[[ModuleType, RawMessages], _T | None], messages) -> _T | None:
    """``read`` (a function of direct.py) of ``messages`` when it can read them
    (the C extension in use, messages in place); None: walk them."""
    if not DIRECT or _wire is None or not isinstance(messages, RawMessages):
        return None
    return read(_wire, messages) if hasattr(_wire, "samples_at") else None


def _decode(top: TopLevel, *, source: str) -> Profile:
    """The bulk decode of one profile, in stages: each sub-message kind walked
    and its strings checked, pprof's CheckValid on the ids, then the Arrow tables."""
    nstr = len(top.raw_strings)
    meta = metadata(top, source=source)

    # Mappings: every field a varint.
    mtok, mf = walk_messages(top.mappings)
    m = dict(zip(range(1, 11), mf.last_values(mtok, tuple(range(1, 11))), strict=True))
    check_strings(m[5], nstr, "mapping filename", source=source)
    check_strings(m[6], nstr, "mapping build_id", source=source)

    f = _walk_functions(top)
    for k, what in ((2, "name"), (3, "system_name"), (4, "filename")):
        check_strings(f[k], nstr, f"function {what}", source=source)

    s = _walk_samples(top, nstr, len(meta["sample_types"]), source=source)
    loc = _walk_locations(top)
    mapping_id = _check_valid(m, f, loc, s, source=source)

    strings = string_array(top.raw_strings, top)

    def text(index: np.ndarray) -> pa.Array:
        return strings.take(from_numpy(signed(index), pa.int64()))

    name = text(f[2])
    # Go writes every system name equal to the name: one take for both (the
    # same strings; Arrow arrays are immutable, so sharing one is safe).
    system_name = name if np.array_equal(f[3], f[2]) else text(f[3])
    functions_table = pa.Table.from_arrays(
        [
            from_numpy(f[1], pa.uint64()),
            name,
            system_name,
            text(f[4]),
            from_numpy(signed(f[5]), pa.int64()),
        ],
        schema=schema.PROFILE_FUNCTIONS,
    )
    mappings_table = pa.Table.from_arrays(
        [
            from_numpy(m[1], pa.uint64()),
            from_numpy(m[2], pa.uint64()),
            from_numpy(m[3], pa.uint64()),
            from_numpy(m[4], pa.uint64()),
            text(m[5]),
            text(m[6]),
            *(from_numpy(m[k] != 0, pa.bool_()) for k in (7, 8, 9, 10)),
        ],
        schema=schema.PROFILE_MAPPINGS,
    )
    return Profile(
        samples=_samples_table(s, strings),
        locations=_locations_table(loc, mapping_id),
        functions=functions_table,
        mappings=mappings_table,
        **meta,
    )


def _walk_functions(top: TopLevel) -> dict[int, np.ndarray]:
    """The functions' fields 1 to 5 (id, name, system_name, filename, start_line)."""
    rows = _read_direct(direct.functions, top.functions)
    if rows is not None:
        return dict(zip(range(1, 6), rows, strict=True))
    ftok, ff = walk_messages(top.functions)
    return dict(zip(range(1, 6), ff.last_values(ftok, (1, 2, 3, 4, 5)), strict=True))


@dataclass
class _SampleFields:
    """A profile's samples, walked: location ids and values as flat arrays with
    offsets, and their labels' fields (string indexes, numbers)."""

    count: int
    loc_offsets: np.ndarray
    loc_ids: np.ndarray
    val_offsets: np.ndarray
    values: np.ndarray
    label_offsets: np.ndarray
    key: np.ndarray
    lstr: np.ndarray
    lnum: np.ndarray
    lunit: np.ndarray
    numeric: np.ndarray  # a numeric label (no str, and a num or a unit)


def _walk_samples(top: TopLevel, nstr: int, ntypes: int, *, source: str) -> _SampleFields:
    """The samples and their labels, strings checked, each sample with one value
    per sample type."""
    count = len(top.samples)
    got = _read_direct(lambda w, m: direct.samples(w, m, ntypes), top.samples)
    if got is not None:  # no labels
        loc_offsets, loc_ids, val_offsets, values = got
        label_offsets = np.zeros(count + 1, dtype=I64)
        key, lstr, lnum, lunit = np.zeros((4, 0), dtype=U64)
    else:
        stok, sf = walk_messages(top.samples)
        loc_offsets, loc_ids = sf.repeated_varints(stok, 1)
        val_offsets, values = sf.repeated_varints(stok, 2)
        label_offsets, label_first, label_end, label_end_byte = sf.children(stok, 3)
        lf = walk(stok, label_first, label_end, label_end_byte)
        key, lstr, lnum, lunit = lf.last_values(stok, (1, 2, 3, 4))
    check_strings(key, nstr, "label key", source=source)
    check_strings(lstr[lstr != 0], nstr, "label str", source=source)
    numeric = (lstr == 0) & ((lnum != 0) | (lunit != 0))
    check_strings(lunit[numeric], nstr, "label num_unit", source=source)

    counts = np.diff(val_offsets)
    bad = np.flatnonzero(counts != ntypes)
    if bad.size:
        raise malformed(
            source,
            f"mismatch: sample {bad[0]} has {counts[bad[0]]} values vs. {ntypes} types",
        )
    return _SampleFields(
        count, loc_offsets, loc_ids, val_offsets, values, label_offsets,
        key, lstr, lnum, lunit, numeric,
    )  # fmt: skip


@dataclass
class _LocationFields:
    """A profile's locations, walked: fields 1 (id), 2 (mapping id), 3 (address),
    5 (is_folded) and their lines (function id, line, column) with offsets."""

    fields: dict[int, np.ndarray]
    line_offsets: np.ndarray
    line_fn: np.ndarray
    line_no: np.ndarray
    line_col: np.ndarray


def _walk_locations(top: TopLevel) -> _LocationFields:
    got = _read_direct(direct.locations, top.locations)
    if got is not None:
        scalars, line_offsets, (line_fn, line_no, line_col) = got
        loc = dict(zip((1, 2, 3, 5), scalars, strict=True))
        return _LocationFields(loc, line_offsets, line_fn, line_no, line_col)
    ltok, lof = walk_messages(top.locations)
    loc = dict(zip((1, 2, 3, 5), lof.last_values(ltok, (1, 2, 3, 5)), strict=True))
    line_offsets, line_first, line_end, line_end_byte = lof.children(ltok, 4)
    lnf = walk(ltok, line_first, line_end, line_end_byte)
    line_fn, line_no, line_col = lnf.last_values(ltok, (1, 2, 3))
    return _LocationFields(loc, line_offsets, line_fn, line_no, line_col)


def _check_valid(
    m: dict[int, np.ndarray],
    f: dict[int, np.ndarray],
    locs: _LocationFields,
    s: _SampleFields,
    *,
    source: str,
) -> np.ndarray:
    """pprof's CheckValid, in bulk: every sample's locations and every line's
    function exist, no id is 0. Returns the locations' mapping ids, a link to a
    mapping that does not exist dropped (0) as pprof drops it."""
    loc = locs.fields
    known_locations = IdIndex(loc[1]) if loc[1].size else None
    if s.loc_ids.size and (known_locations is None or not known_locations.contains_all(s.loc_ids)):
        found = (
            known_locations.contains(s.loc_ids)
            if known_locations is not None
            else np.zeros(s.loc_ids.size, bool)
        )
        if not found.all():
            i = int(np.flatnonzero(~found)[0])
            sample = int(np.searchsorted(s.loc_offsets, i, side="right") - 1)
            raise malformed(
                source, f"sample {sample} has nil location (no location id {s.loc_ids[i]})"
            )
    mappings = check_ids(m[1], "mappings", "found mapping with reserved ID=0", source=source)
    functions = check_ids(f[1], "functions", "found function with reserved ID=0", source=source)
    check_ids(
        loc[1], "locations", "found location with reserved id=0",
        source=source, index=known_locations,
    )  # fmt: skip
    line_fn = locs.line_fn
    if line_fn.size and not (f[1].size and functions.contains_all(line_fn)):
        found = functions.contains(line_fn) if f[1].size else np.zeros(line_fn.size, bool)
        if not found.all():
            i = int(np.flatnonzero(~found)[0])
            owner = int(np.searchsorted(locs.line_offsets, i, side="right") - 1)
            raise malformed(
                source,
                f"location id: {loc[1][owner]} has a line with nil function "
                f"(function id {line_fn[i]})",
            )
    mapping_id = loc[2]
    if mapping_id.size:
        linked = mapping_id != 0
        if linked.any():
            exists = mappings.contains(mapping_id) if m[1].size else np.zeros(mapping_id.size, bool)
            mapping_id = np.where(exists, mapping_id, U64(0))
    return mapping_id


def _samples_table(s: _SampleFields, strings: pa.Array) -> pa.Table:
    """PROFILE_SAMPLES: labels that are neither string nor numeric dropped, label
    strings interned (dictionary indexes into the string table: a string shared
    by many labels is never copied)."""

    def interned(index: np.ndarray, present: np.ndarray | None = None) -> pa.Array:
        mask = None if present is None else ~present
        return pa.DictionaryArray.from_arrays(
            from_numpy(index.astype(np.int32), pa.int32(), mask=mask), strings
        )

    key, lstr, lnum, lunit, numeric = s.key, s.lstr, s.lnum, s.lunit, s.numeric
    keep = (lstr != 0) | numeric
    kept_offsets = s.label_offsets
    if not keep.all():
        label_owner = np.repeat(np.arange(s.count), np.diff(s.label_offsets))
        kept_offsets = np.zeros(s.count + 1, dtype=I64)
        np.cumsum(np.bincount(label_owner[keep], minlength=s.count), out=kept_offsets[1:])
        key, lstr, lnum = key[keep], lstr[keep], lnum[keep]
        lunit, numeric = lunit[keep], numeric[keep]
    labels = pa.StructArray.from_arrays(
        [
            interned(key),
            interned(lstr, ~numeric),
            from_numpy(signed(lnum), pa.int64(), mask=~numeric),
            interned(lunit, numeric & (lunit != 0)),
        ],
        fields=struct_fields(schema.PROFILE_LABEL),
    )
    return pa.Table.from_arrays(
        [
            list_array(s.loc_offsets, from_numpy(s.loc_ids, pa.uint64())),
            list_array(s.val_offsets, from_numpy(signed(s.values), pa.int64())),
            list_array(kept_offsets, labels),
        ],
        schema=schema.PROFILE_SAMPLES,
    )


def _locations_table(locs: _LocationFields, mapping_id: np.ndarray) -> pa.Table:
    loc = locs.fields
    lines = pa.StructArray.from_arrays(
        [
            from_numpy(locs.line_fn, pa.uint64()),
            from_numpy(signed(locs.line_no), pa.int64()),
            from_numpy(signed(locs.line_col), pa.int64()),
        ],
        fields=struct_fields(schema.LINE),
    )
    return pa.Table.from_arrays(
        [
            from_numpy(loc[1], pa.uint64()),
            from_numpy(mapping_id, pa.uint64()),
            from_numpy(loc[3], pa.uint64()),
            from_numpy(loc[5] != 0, pa.bool_()),
            list_array(locs.line_offsets, lines),
        ],
        schema=schema.PROFILE_LOCATIONS,
    )
