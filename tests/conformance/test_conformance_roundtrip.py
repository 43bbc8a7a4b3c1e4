"""write_profile(read_profile(f)) keeps everything `go tool pprof -raw` shows.

For every corpus file pprof opens (proto or legacy) and every profile profgen writes, the
copy's `-raw` content equals the original's: header (period, time, duration,
comments), sample types and default, every sample's values, locations (leaf
first) and labels, in file order, every location and every mapping.
Ids may be renumbered: each reference is compared by what it points to.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import pprof_oracle as oracle
from support.testenv import (
    Pprof,
    api_read,
    api_write,
    corpus_id,
    corpus_params,
    go_params,
    require_opened,
)


def roundtrip(path: Path, out: Path, *, gzip: bool = True) -> Path:
    return api_write(api_read(path), out, gzip=gzip)


def assert_same_raw(original: oracle.CanonicalRaw, copy: oracle.CanonicalRaw, what: str) -> None:
    """Field by field, so a failure names the part that changed."""
    assert copy.header == original.header, f"{what}: header lines differ"
    assert copy.sample_types == original.sample_types, f"{what}: sample types differ"
    assert copy.default_type == original.default_type, f"{what}: default sample type differs"
    assert copy.mappings == original.mappings, f"{what}: mappings differ"
    assert len(copy.samples) == len(original.samples), f"{what}: number of samples differs"
    for i, (a, b) in enumerate(zip(original.samples, copy.samples, strict=True)):
        assert b == a, f"{what}: sample {i} differs\n original: {a}\n copy:     {b}"
    missing = original.locations - copy.locations
    extra = copy.locations - original.locations
    assert not missing and not extra, (
        f"{what}: locations differ; {sum(missing.values())} lost, e.g. {list(missing)[:3]}; "
        f"{sum(extra.values())} new, e.g. {list(extra)[:3]}"
    )


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params(legacy=True))
def test_roundtrip_corpus(path: Path, pprof: Pprof, tmp_path: Path):
    """A corpus file, written back by pyproflab, reads the same in pprof. For a
    legacy (pre-proto) file this is the whole of reading it as pprof does: the
    protobuf we write holds pprof's -raw content of the original."""
    require_opened(pprof, path)
    copy = roundtrip(path, tmp_path / "copy.pb.gz")
    assert_same_raw(pprof.raw(path), oracle.canonical_raw(oracle.raw(copy)), corpus_id(path))


@pytest.mark.go
@pytest.mark.parametrize("kind", go_params())
def test_roundtrip_go(kind: str, go_profiles, pprof: Pprof, tmp_path: Path):
    """A profgen profile, written back by pyproflab, reads the same in pprof."""
    path = go_profiles[kind]
    copy = roundtrip(path, tmp_path / "copy.pb.gz")
    original = pprof.raw(path)
    assert original.samples, f"profgen's {kind} profile has no samples"
    assert_same_raw(original, oracle.canonical_raw(oracle.raw(copy)), f"profgen {kind}")


@pytest.mark.go
@pytest.mark.parametrize("kind", go_params(kinds=["cpu", "heap"]))
def test_roundtrip_uncompressed(kind: str, go_profiles, pprof: Pprof, tmp_path: Path):
    """gzip=False writes raw protobuf (first byte not the gzip magic) that pprof reads alike."""
    copy = roundtrip(go_profiles[kind], tmp_path / "copy.pb", gzip=False)
    assert copy.read_bytes()[:2] != b"\x1f\x8b"
    assert oracle.is_proto(copy)
    assert_same_raw(
        pprof.raw(go_profiles[kind]),
        oracle.canonical_raw(oracle.raw(copy)),
        f"profgen {kind} uncompressed",
    )


def test_canonical_raw_ignores_ids():
    """The comparison is by content: renumbered ids compare equal, changed content does not."""
    text = (
        "PeriodType: cpu nanoseconds\nPeriod: 10\nSamples:\nsamples/count cpu/nanoseconds[dflt]\n"
        "          1         10: 1 2 \n                k:[v]\n"
        "Locations\n     1: 0x10 M=1 f a.go:3:0 s=1\n"
        "             g a.go:9:0 s=8\n     2: 0x20 M=1 main b.go:1:0 s=1\n"
        "Mappings\n1: 0x0/0x100/0x0 bin  [FN]\n"
    )
    renumbered = (
        text.replace(": 1 2 \n", ": 7 5 \n")
        .replace("     1: 0x10 M=1", "     7: 0x10 M=3")
        .replace("     2: 0x20 M=1", "     5: 0x20 M=3")
        .replace("1: 0x0/", "3: 0x0/")
    )
    a, b = oracle.canonical_raw(text), oracle.canonical_raw(renumbered)
    assert a == b
    assert a.default_type == "cpu" and a.sample_types == [
        ("samples", "count"),
        ("cpu", "nanoseconds"),
    ]
    assert a.samples[0][1][0][3] == ("f a.go:3:0 s=1", "g a.go:9:0 s=8")
    assert oracle.canonical_raw(text.replace("k:[v]", "k:[w]")) != a
    assert oracle.canonical_raw(text.replace("a.go:9", "a.go:8")) != a
