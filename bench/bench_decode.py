"""Decode speed against the floor: gunzip + upb ParseFromString of the same bytes.

Two inputs: the corpus's large.cpu, and a 200,000-sample CPU profile made here
(seeded) with pyproflab's writer: deep stacks drawn from large.cpu's own
locations, random values. Prints, for each, the median of N runs of the floor
and of ``decode_bytes`` (to Arrow), and their ratio (target: <= 2).

    .venv/bin/python bench/bench_decode.py [--runs N]
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab._proto import profile_pb2
from pyproflab.decode import decode_bytes
from pyproflab.encode import encode_profile
from pyproflab.model import Profile

REPO = Path(__file__).resolve().parents[1]
LARGE = REPO.parent / "shared" / "corpus" / "google-pprof/internal/proftest/testdata/large.cpu"


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def floor(data: bytes) -> None:
    profile_pb2.Profile().ParseFromString(gzip.decompress(data))


def synthesize(base: Profile, samples: int, seed: int = 1) -> bytes:
    """A CPU profile of ``samples`` distinct deep stacks built from base's locations."""
    rng = np.random.default_rng(seed)
    loc_ids = base.locations.column("id").to_numpy()
    depth = rng.integers(8, 64, size=samples)
    offsets = np.zeros(samples + 1, dtype=np.int32)
    np.cumsum(depth, out=offsets[1:])
    stacks = rng.choice(loc_ids, size=int(offsets[-1]))
    values = np.empty(2 * samples, dtype=np.int64)
    values[0::2] = rng.integers(1, 100, size=samples)
    values[1::2] = values[0::2] * 10_000_000
    value_offsets = np.arange(0, 2 * samples + 1, 2, dtype=np.int32)
    table = pa.Table.from_arrays(
        [
            pa.ListArray.from_arrays(pa.array(offsets), pa.array(stacks, pa.uint64())),
            pa.ListArray.from_arrays(pa.array(value_offsets), pa.array(values)),
            pa.array([[]] * samples, schema.PROFILE_SAMPLES.field("labels").type),
        ],
        schema=schema.PROFILE_SAMPLES,
    )
    synthetic = Profile(**{**base.__dict__, "samples": table})
    return encode_profile(synthetic)


def wide_message(labels: int = 200_000) -> bytes:
    """A valid gzipped profile whose one sample has ``labels`` numeric labels: the shape the
    fuzzer found quadratic once (one numpy step per label: 30 s for 200,000)."""
    p = profile_pb2.Profile()
    p.string_table.extend(["", "samples", "count", "main", "main.go", "k"])
    p.sample_type.add(type=1, unit=2)
    p.function.add(id=1, name=3, system_name=3, filename=4)
    p.location.add(id=1, address=0x1000).line.add(function_id=1, line=1)
    s = p.sample.add(location_id=[1], value=[1])
    for i in range(labels):
        s.label.add(key=5, num=i + 1)
    return gzip.compress(p.SerializeToString(), mtime=0)  # as profiles come


def report(name: str, data: bytes, runs: int) -> None:
    f = median_seconds(lambda: floor(data), runs)
    ours = median_seconds(lambda: decode_bytes(data), runs)
    prof = decode_bytes(data)
    print(
        f"{name:<28} {prof.num_samples:>8} samples  floor {f * 1e3:8.1f} ms  "
        f"decode {ours * 1e3:8.1f} ms  ratio {ours / f:5.2f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--samples", type=int, default=200_000)
    args = parser.parse_args()
    if not LARGE.exists():
        print(f"large.cpu not found at {LARGE} (needs ../shared/corpus)", file=sys.stderr)
        return 1
    data = LARGE.read_bytes()
    report("large.cpu", data, args.runs)
    report(
        f"synthetic {args.samples:,}-sample cpu",
        synthesize(decode_bytes(data), args.samples),
        max(3, args.runs // 3),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
