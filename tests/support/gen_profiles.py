"""Make many distinct, realistic CPU profiles from a few real ones (for fleet-scale tests).

Each derived profile is a seeded random subset of one real Go CPU profile's
samples, every value multiplied by a small integer, with its own time: real
stacks, locations, functions, mappings and labels, distinct content.
Written with pyproflab.encode.write_profile; `go tool pprof` reads the results.

    python tests/support/gen_profiles.py OUT_DIR N SRC.pb.gz [SRC2.pb.gz …]
"""

from __future__ import annotations

import dataclasses
import random
import sys
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa


def derive(profile, rng: random.Random, number: int):
    """One derived profile: a random half-or-more of the samples, values × 1..4."""
    from pyproflab import schema

    n = profile.samples.num_rows
    keep = sorted(rng.sample(range(n), k=max(1, rng.randint(n // 2, n)))) if n else []
    factor = rng.randint(1, 4)
    subset = profile.samples.take(pa.array(keep, pa.int64()))
    values = [[v * factor for v in vals] for vals in subset.column("values").to_pylist()]
    samples = subset.set_column(
        subset.schema.get_field_index("values"),
        schema.PROFILE_SAMPLES.field("values"),
        pa.array(values, schema.PROFILE_SAMPLES.field("values").type),
    )
    return dataclasses.replace(
        profile,
        samples=samples,
        time_nanos=profile.time_nanos + number * 1_000_000_000,
        comments=[*profile.comments, f"derived #{number} x{factor}"],
    )


def derive_cpu_profiles(
    sources: Sequence[Path], n: int, out_dir: Path, *, seed: int = 7
) -> list[Path]:
    """Write ``n`` derived profiles of ``sources`` (round robin) into ``out_dir``."""
    from pyproflab import read_profile

    rng = random.Random(seed)
    bases = [read_profile(s) for s in sources]
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = out_dir / f"cpu-{i:04d}.pb.gz"
        _write(derive(bases[i % len(bases)], rng, i), path)
        paths.append(path)
    return paths


def _write(profile, path: Path) -> None:
    from pyproflab.encode import write_profile

    write_profile(profile, path)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out = derive_cpu_profiles([Path(p) for p in sys.argv[3:]], int(sys.argv[2]), Path(sys.argv[1]))
    print(f"wrote {len(out)} profiles to {sys.argv[1]}")
