"""Samples, locations and functions decoded in one C pass each, straight into
the arrays the fast decoder's walk gives (``_wire.samples_at``,
``locations_at``, ``functions_at``).

Why: the walk (``fast.walk_messages`` and the gathers after it) tokenizes
every byte into two arrays of 16 bytes per byte, then walks and gathers them;
for the three kinds that make a profile's bulk that is most of the decode.
These read each message once, in place (``lite.RawMessages``), and write only
the results.

Rules: each function returns exactly the arrays (values and dtypes) the walk
gives for the kind, or None when the kind has anything but its plain shape
(labels, an unknown field, a wrong wire type, a bad varint or run; see
``_wire.c``): the caller then walks the kind as before, which gives the same
arrays, hands over to the reference decoder, or raises the same error as
without this module. Arrays are allocated once, from what bounds them (a
varint has one byte at least, a line two): at most 8 bytes (ids) and 12
(lines) per byte of the kind, where the walk reserves 16 for its tokens; pages
past the results are never written, so never held in memory.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from pyproflab.decode.lite import RawMessages

U64 = np.uint64
I64 = np.int64


def _segments(messages: RawMessages) -> tuple:
    return messages.buf, messages.start, messages.length


def samples(
    wire: ModuleType, messages: RawMessages, ntypes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(loc_offsets, loc_ids, val_offsets, values) of samples without labels, as
    ``Fields.repeated_varints`` gives fields 1 and 2 (a varint has a byte at
    least: the bytes bound the ids and the values; ``ntypes`` values a sample
    too, or the walk reports the mismatch); None: walk them."""
    n, size = len(messages), int(messages.length.sum())
    loc_offsets, val_offsets = np.empty(n + 1, dtype=I64), np.empty(n + 1, dtype=I64)
    loc_ids = np.empty(size, dtype=U64)
    values = np.empty(min(n * ntypes, size), dtype=U64)  # never more than the bytes either
    got = wire.samples_at(*_segments(messages), loc_offsets, loc_ids, val_offsets, values)
    if got is None:
        return None
    return loc_offsets, loc_ids[: got[0]], val_offsets, values[: got[1]]


def locations(
    wire: ModuleType, messages: RawMessages
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(scalars, line_offsets, lines): rows of fields 1, 2, 3 and 5, and of the
    lines' fields 1, 2 and 3 (a line has two bytes at least: half the bytes
    bound them), as ``Fields.last_values`` gives them; None: walk them."""
    n = len(messages)
    scalars = np.zeros((4, n), dtype=U64)
    line_offsets = np.empty(n + 1, dtype=I64)
    lines = np.empty((3, int(messages.length.sum()) // 2), dtype=U64)  # zeroed in C
    got = wire.locations_at(*_segments(messages), scalars, line_offsets, lines)
    if got is None:
        return None
    return scalars, line_offsets, lines[:, :got]


def functions(wire: ModuleType, messages: RawMessages) -> np.ndarray | None:
    """Rows of fields 1 to 5, as ``Fields.last_values`` gives them; None: walk
    them."""
    out = np.zeros((5, len(messages)), dtype=U64)
    if not wire.functions_at(*_segments(messages), out):
        return None
    return out
