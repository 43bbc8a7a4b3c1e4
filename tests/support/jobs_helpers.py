"""Helpers of tests/jobs/test_jobs.py that other test modules use too
(cut out of it by scripts/relayout_tests.py: no test module imports another)."""

from __future__ import annotations

import dataclasses
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

REPO = Path(__file__).resolve().parents[2]


SLOWDOWN = 4


T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)


def heaviest_leaf(profile) -> int:
    """The location id that is the leaf of the most CPU."""
    from collections import Counter

    weight: Counter = Counter()
    idx = profile.default_sample_index()
    for locs, vals in zip(
        profile.samples.column("location_ids").to_pylist(),
        profile.samples.column("values").to_pylist(),
        strict=True,
    ):
        if locs:
            weight[locs[0]] += vals[idx]
    return weight.most_common(1)[0][0]


def variant(profile, *, time: datetime, slow_leaf: int | None = None, factor: int = 1):
    """A copy of ``profile`` taken at ``time``; samples whose leaf is ``slow_leaf``
    get their values multiplied by ``factor``."""
    values = profile.samples.column("values").to_pylist()
    if slow_leaf is not None:
        leaves = profile.samples.column("location_ids").to_pylist()
        values = [
            [v * factor for v in vals] if locs and locs[0] == slow_leaf else vals
            for locs, vals in zip(leaves, values, strict=True)
        ]
    samples = profile.samples.set_column(
        profile.samples.schema.get_field_index("values"),
        "values",
        pa.array(values, profile.samples.schema.field("values").type),
    )
    return dataclasses.replace(profile, samples=samples, time_nanos=int(time.timestamp() * 1e9))


def make_drop(
    cpu_path: Path,
    folder: Path,
    *,
    n: int = 12,
    service: str = "svc",
    versions: tuple[str, ...] = ("v1", "v2"),
    slow_version: str | None = "v2",
    start: datetime = T0,
    instances: int = 3,
) -> list[Path]:
    """``n`` profiles per version in ``folder``; returns the paths written."""
    from pyproflab import read_profile
    from pyproflab.encode import write_profile

    base = read_profile(cpu_path)
    leaf = heaviest_leaf(base)
    paths = []
    k = 0
    for ver in versions:
        for i in range(n):
            when = start + timedelta(seconds=k)
            k += 1
            slow = ver == slow_version
            p = variant(
                base, time=when, slow_leaf=leaf if slow else None, factor=SLOWDOWN if slow else 1
            )
            out = folder / service / ver / f"i-{i % instances}" / f"cpu-{k:04d}.pb.gz"
            out.parent.mkdir(parents=True, exist_ok=True)
            write_profile(p, out)
            paths.append(out)
    return paths


def write_job(
    path: Path,
    *,
    drop: Path,
    store: Path,
    output: Path,
    extra: str = "",
    threshold: float = 10,
    batch_size: int = 64,
    resamples: int = 200,
    pgo: bool = True,
) -> Path:
    text = f"""
[job]
name = "test-job"
store = "{store}"
output = "{output}"

[[source]]
kind = "drop"
path = "{drop}"
path_template = "{{service}}/{{version}}/{{instance}}/{{type}}-{{time}}.pb.gz"
batch_size = {batch_size}

[selection]
service = "svc"

[regressions]
threshold_pct = {threshold}
resamples = {resamples}
"""
    if pgo:
        text += "\n[pgo]\ntop = 3\nverify = false\n"
    path.write_text(text + extra, encoding="utf-8")
    return path


def output_state(folder: Path) -> dict[str, bytes | str]:
    """Every entry of an output folder: a symlink's target, a file's bytes."""
    out: dict[str, bytes | str] = {}
    for p in sorted(folder.iterdir()):
        out[p.name] = ("-> " + os.readlink(p)) if p.is_symlink() else p.read_bytes()
    return out
