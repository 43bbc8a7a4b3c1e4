"""A fleet of large, real CPU profiles for the fleet benchmark, made fast.

Each derived profile keeps a seeded random half-or-more of the samples of a
real Go CPU profile (the rule of tests/support/gen_profiles.py) and gets its own time
and comment, so every file is distinct content. Unlike gen_profiles, it works
on the wire: the kept sample messages are copied byte for byte and the rest of
the top level is re-emitted, so a 20,000-sample source yields a derived file in
milliseconds instead of a full decode and encode (0.4 s each).

    python -m bench.fleet OUT_DIR N SRC
"""

from __future__ import annotations

import gzip
import random
import sys
from pathlib import Path

from pyproflab.decode.lite import TopLevel, parse_top_level
from pyproflab.decode.pprof import decompress


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value) if value else b""


def encode_top_level(
    top: TopLevel, samples: list[bytes], *, time_nanos: int, comment: str
) -> bytes:
    """The profile ``top`` with ``samples`` instead of its own, a new time and one
    more comment (appended to the string table)."""
    strings = [*top.raw_strings, comment.encode()]
    parts = [_bytes_field(1, st) for st in top.sample_types]
    parts += [_bytes_field(2, s) for s in samples]
    parts += [_bytes_field(3, m) for m in top.mappings]
    parts += [_bytes_field(4, loc) for loc in top.locations]
    parts += [_bytes_field(5, f) for f in top.functions]
    parts += [_bytes_field(6, s) for s in strings]
    parts += [
        _varint_field(7, top.drop_frames),
        _varint_field(8, top.keep_frames),
        _varint_field(9, time_nanos),
        _varint_field(10, top.duration_nanos),
    ]
    if top.period_type is not None:
        parts.append(_bytes_field(11, top.period_type))
    parts.append(_varint_field(12, top.period))
    for c in [*top.comments, len(strings) - 1]:
        parts.append(_varint(13 << 3) + _varint(c))
    parts += [_varint_field(14, top.default_sample_type), _varint_field(15, top.doc_url)]
    return b"".join(parts)


def derive_fleet(source: Path, n: int, out_dir: Path, *, seed: int = 7) -> list[Path]:
    """Write ``n`` profiles derived from ``source`` into ``out_dir`` (gzip level 1)."""
    raw = decompress(source.read_bytes(), source=str(source))
    top = parse_top_level(raw, source=str(source))
    rng = random.Random(seed)
    count = len(top.samples)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        keep = sorted(rng.sample(range(count), k=rng.randint(count // 2, count)))
        body = encode_top_level(
            top,
            [top.samples[j] for j in keep],
            time_nanos=top.time_nanos + i * 1_000_000_000,
            comment=f"derived #{i} of {source.name}",
        )
        path = out_dir / f"cpu-{i:04d}.pb.gz"
        path.write_bytes(gzip.compress(body, compresslevel=1))
        paths.append(path)
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    written = derive_fleet(Path(sys.argv[3]), int(sys.argv[2]), Path(sys.argv[1]))
    print(f"wrote {len(written)} profiles to {sys.argv[1]}")
