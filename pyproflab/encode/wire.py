"""Protobuf wire bytes of many table rows at once, with numpy.

Rules (protobuf's encoding, as upb writes profile.proto, a proto3 file):

- Everything but strings is a varint: tags, lengths and values (an int64 is its
  64-bit two's complement, so a negative value takes 10 bytes).
- A scalar field is written only when it is not zero; a packed repeated field
  (tag, byte length, varints) only when it has values; a message in a repeated
  field always (tag, byte length, its fields), even when empty.
- Fields are written in field-number order, as upb does, so the bytes equal
  upb's serialization of the same message.

A ``Stream`` holds the tokens (uint64 values to be written as varints) of many
rows, row ``r`` at ``tokens[offsets[r]:offsets[r + 1]]``; fields are built as
streams, joined row by row, and wrapped as the rows of a repeated message.
"""

from __future__ import annotations

import dataclasses

import numpy as np

_U64 = np.uint64


@dataclasses.dataclass
class Stream:
    tokens: np.ndarray  # uint64
    offsets: np.ndarray  # int64, rows + 1
    sizes: np.ndarray  # int64: each token's varint length

    @property
    def rows(self) -> int:
        return len(self.offsets) - 1

    def row_bytes(self) -> np.ndarray:
        """Each row's encoded length in bytes."""
        cs = np.zeros(len(self.tokens) + 1, dtype=np.int64)
        np.cumsum(self.sizes, out=cs[1:])
        return cs[self.offsets[1:]] - cs[self.offsets[:-1]]

    def encode(self) -> bytes:
        return encode_varints(self.tokens, self.sizes)


def varint_sizes(v: np.ndarray) -> np.ndarray:
    """Bytes each uint64 takes as a varint (1 to 10)."""
    n = np.ones(len(v), dtype=np.int64)
    top = int(v.max()) if len(v) else 0
    for k in range(1, 10):
        if top < 1 << (7 * k):
            break
        n += v >= _U64(1 << (7 * k))
    return n


_CHUNK = 1 << 18


def encode_varints(v: np.ndarray, sizes: np.ndarray) -> bytes:
    """The varints of ``v`` (uint64; ``sizes`` from varint_sizes), one after
    another: every token's 7-bit groups as a row of bytes, continuation bits
    set but on its last, then the rows' used bytes in order."""
    out = []
    for a in range(0, len(v), _CHUNK):
        x, n = v[a : a + _CHUNK].copy(), sizes[a : a + _CHUNK]
        k = int(n.max())
        planes = np.empty((len(x), k), dtype=np.uint8)
        for j in range(k):
            planes[:, j] = (x & _U64(0x7F)).astype(np.uint8) | np.uint8(0x80)
            x >>= _U64(7)
        planes[np.arange(len(x)), n - 1] &= np.uint8(0x7F)
        out.append(planes[np.arange(k)[None, :] < n[:, None]].tobytes())
    return b"".join(out)


def _tag(field: int, wire: int) -> np.uint64:
    return _U64(field << 3 | wire)


def _from_counts(counts: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets


def _row_positions(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each element of rows cut at ``offsets``: (its row, its position in the row)."""
    counts = np.diff(offsets)
    row = np.repeat(np.arange(len(counts)), counts)
    return row, np.arange(int(offsets[-1])) - offsets[:-1][row]


def _values(values: np.ndarray) -> np.ndarray:
    return np.asarray(values).astype(np.int64, copy=False).view(_U64)


def scalar(field: int, values: np.ndarray) -> Stream:
    """A varint field, one value a row, omitted where zero."""
    v = _values(values)
    present = v != 0
    tokens = np.empty(2 * int(present.sum()), dtype=_U64)
    tokens[0::2] = _tag(field, 0)
    tokens[1::2] = v[present]
    sizes = np.ones(len(tokens), dtype=np.int64)  # a tag below 16 takes one byte
    sizes[1::2] = varint_sizes(tokens[1::2])
    return Stream(tokens, _from_counts(present.astype(np.int64) * 2), sizes)


def packed(field: int, offsets: np.ndarray, flat: np.ndarray) -> Stream:
    """A packed repeated varint field: row r holds flat[offsets[r]:offsets[r + 1]]."""
    values = _values(flat)
    out = wrap(field, Stream(values, offsets, varint_sizes(values)))
    # A row without values writes nothing (drop its tag and zero length).
    counts = np.diff(offsets)
    keep = np.repeat(counts > 0, counts + 2)
    kept = _from_counts(np.where(counts > 0, counts + 2, 0))
    return Stream(out.tokens[keep], kept, out.sizes[keep])


def join(*streams: Stream) -> Stream:
    """Row r of the result: row r of each stream, in the order given."""
    counts = sum(np.diff(s.offsets) for s in streams)
    offsets = _from_counts(np.asarray(counts, dtype=np.int64))
    tokens = np.empty(int(offsets[-1]), dtype=_U64)
    sizes = np.empty(int(offsets[-1]), dtype=np.int64)
    before = offsets[:-1].copy()
    for s in streams:
        row, pos = _row_positions(s.offsets)
        at = before[row] + pos
        tokens[at], sizes[at] = s.tokens, s.sizes
        before += np.diff(s.offsets)
    return Stream(tokens, offsets, sizes)


def wrap(field: int, rows: Stream) -> Stream:
    """Each row as a length-delimited field: tag, byte length, the row's tokens."""
    lengths = rows.row_bytes().astype(_U64)
    counts = np.diff(rows.offsets) + 2
    offsets = _from_counts(counts)
    tokens = np.empty(int(offsets[-1]), dtype=_U64)
    sizes = np.empty(int(offsets[-1]), dtype=np.int64)
    tokens[offsets[:-1]], sizes[offsets[:-1]] = _tag(field, 2), 1
    tokens[offsets[:-1] + 1], sizes[offsets[:-1] + 1] = lengths, varint_sizes(lengths)
    row, pos = _row_positions(rows.offsets)
    at = offsets[:-1][row] + 2 + pos
    tokens[at], sizes[at] = rows.tokens, rows.sizes
    return Stream(tokens, offsets, sizes)


def group(parent_offsets: np.ndarray, child: Stream) -> Stream:
    """Child rows gathered into parent rows (parent p: children
    parent_offsets[p]:parent_offsets[p + 1], already in parent order)."""
    return Stream(child.tokens, child.offsets[parent_offsets], child.sizes)
