"""The writer: decode -> encode -> decode gives an equal Profile, and pprof -raw
prints the same for the written file as for the original (every corpus proto)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.decode_helpers import same_profile
from support.profile_builders import minimal
from support.testenv import CORPUS, SKIP_NO_CORPUS, corpus_files, corpus_id

from pyproflab.decode import decode_bytes, read_profile
from pyproflab.encode import encode_profile, write_profile
from pyproflab.errors import ProfileError
from pyproflab.model import Profile, ValueType

needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_NO_CORPUS)


def readable_corpus() -> list[tuple[Path, Profile]]:
    out = []
    for path in corpus_files():
        try:
            out.append((path.resolve(), read_profile(path)))
        except ProfileError:
            continue  # legacy formats and the one malformed file
    return out


@needs_corpus
def test_round_trip_is_equal_on_the_corpus() -> None:
    for path, prof in readable_corpus():
        for gz in (True, False):
            data = encode_profile(prof, gzip=gz)
            assert (data[:2] == b"\x1f\x8b") == gz
            try:
                same_profile(decode_bytes(data), prof)
            except AssertionError as e:
                raise AssertionError(f"{corpus_id(path)}: {e}") from None


@needs_corpus
@pytest.mark.corpus
@pytest.mark.go
def test_pprof_raw_of_written_file_equals_original(pprof, tmp_path: Path) -> None:
    profiles = readable_corpus()
    written = []
    for i, (_path, prof) in enumerate(profiles):
        written.append(write_profile(prof, tmp_path / f"{i}.pb.gz"))

    def both_raw(pair: tuple[Path, Path]) -> tuple[str, str]:
        return pprof.raw(pair[0]), pprof.raw(pair[1])

    pairs = [(path, out) for (path, _), out in zip(profiles, written, strict=True)]
    with ThreadPoolExecutor(8) as pool:
        raws = list(pool.map(both_raw, pairs))
    bad = [corpus_id(p) for (p, _), (a, b) in zip(pairs, raws, strict=True) if a != b]
    assert not bad, f"pprof -raw differs for {bad}"


def test_every_field_survives(tmp_path: Path) -> None:
    msg = minimal()
    msg.comment.extend([5, 6])
    msg.drop_frames, msg.keep_frames, msg.doc_url, msg.default_sample_type = 8, 5, 6, 3
    msg.time_nanos, msg.duration_nanos = 1_700_000_000_000_000_000, 10**9
    msg.location[0].is_folded = True
    msg.mapping[0].has_inline_frames = True
    msg.mapping[0].build_id = 10
    msg.mapping[0].file_offset = 0x40
    prof = decode_bytes(msg.SerializeToString())
    again = decode_bytes(encode_profile(prof))
    same_profile(again, prof)
    assert again.default_sample_type == "cpu" and again.keep_frames == "main"
    assert again.locations.column("is_folded").to_pylist() == [True, False]


def test_empty_period_type_is_kept() -> None:
    prof = Profile.empty([ValueType("samples", "count")])
    prof.period_type = ValueType("", "")
    assert decode_bytes(encode_profile(prof)).period_type == ValueType("", "")
    prof.period_type = None
    assert decode_bytes(encode_profile(prof)).period_type is None


def test_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prof = decode_bytes(minimal().SerializeToString())
    target = tmp_path / "out.pb.gz"
    target.write_bytes(b"old")

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_profile(prof, target)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.pb.gz"]
    monkeypatch.undo()
    write_profile(prof, target, gzip=False)
    same_profile(read_profile(target), prof)


@needs_corpus
def test_bytes_equal_the_protobuf_librarys_on_the_corpus() -> None:
    """The numpy writer (encode.wire) gives the bytes the protobuf library gives for
    the same message: every corpus profile (labels, numeric labels with units,
    several mappings, inline frames, columns) and a merge of three."""
    from support.upb_encoder import upb_encode

    from pyproflab.analyses.merge import merge

    profiles = readable_corpus()
    assert len(profiles) > 50
    for path, prof in profiles:
        assert encode_profile(prof, gzip=False) == upb_encode(prof), path
    cpu = [p for _, p in profiles if [t.type for t in p.sample_types] == ["samples", "cpu"]][:3]
    merged = merge(cpu)
    assert merged.num_samples and encode_profile(merged, gzip=False) == upb_encode(merged)


def test_bytes_equal_the_protobuf_librarys_on_edge_cases() -> None:
    """Negative values (10-byte varints), an empty profile, no period type."""
    import dataclasses

    from support.upb_encoder import upb_encode

    from pyproflab.analyses.sample_types import values_matrix, with_values

    p = decode_bytes(minimal().SerializeToString())

    neg = dataclasses.replace(p, samples=with_values(p.samples, -values_matrix(p)))
    empty = dataclasses.replace(p, samples=p.samples.slice(0, 0), period_type=None)
    for prof in (p, neg, empty):
        assert encode_profile(prof, gzip=False) == upb_encode(prof)
