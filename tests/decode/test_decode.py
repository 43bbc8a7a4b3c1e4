"""Decoding real profiles: conformance with `go tool pprof` on the public corpus,
the fast decoder against the reference decoder, and pprof's quirks."""

from __future__ import annotations

import gzip
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support import pprof_oracle as oracle
from support.decode_helpers import same_profile
from support.profile_builders import field, minimal
from support.testenv import CORPUS, LEGACY_SAMPLE_TYPES, SKIP_NO_CORPUS, corpus_files, corpus_id

from pyproflab.decode import decode_bytes, read_profile
from pyproflab.errors import (
    CorruptProfileError,
    InvalidProfileError,
    LegacyFormatError,
    ProfileError,
)
from pyproflab.model import Profile

needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_NO_CORPUS)


def outcome(path: Path, method: str = "fast") -> Profile | ProfileError:
    try:
        return read_profile(path, method=method)  # type: ignore[arg-type]
    except ProfileError as e:
        return e


# --- conformance -------------------------------------------------------------------


@needs_corpus
@pytest.mark.corpus
@pytest.mark.go
def test_we_open_exactly_what_pprof_opens(pprof) -> None:
    """Every corpus file: pprof opens it <=> we decode it, its legacy formats
    included (what we read of them: tests/conformance/test_conformance_roundtrip.py)."""
    files = [p.resolve() for p in corpus_files()]
    with ThreadPoolExecutor(8) as pool:
        verdicts = list(pool.map(pprof.opens, files))
    mismatches = []
    for path, (pprof_ok, pprof_err) in zip(files, verdicts, strict=True):
        ours = outcome(path)
        we_ok = not isinstance(ours, ProfileError)
        if we_ok != pprof_ok:
            mismatches.append(f"{corpus_id(path)}: pprof {pprof_ok} {pprof_err!r}, us {ours}")
    assert not mismatches, "\n".join(mismatches)
    assert sum(not oracle.is_proto(f) for f in files) == len(LEGACY_SAMPLE_TYPES)


@needs_corpus
@pytest.mark.parametrize("name", list(LEGACY_SAMPLE_TYPES))
def test_legacy_formats_are_read(name: str) -> None:
    """Each legacy corpus file decodes to samples, with pprof's number of sample
    types and its drop_frames for the file's kind."""
    p = read_profile(CORPUS / name)
    assert p.samples.num_rows > 0
    assert len(p.sample_types) == LEGACY_SAMPLE_TYPES[name]
    kind = "runtime" if ".heap" in name or ".growth" in name else "ProfileData"
    if "contention" in name:
        kind = "RecordLockProfileData"
    assert kind in p.drop_frames


LEGACY_REFUSED = [
    # A count of 0 with bytes is broken (pprof: "inuse count was 0 but inuse bytes was 8").
    ("heap profile: 1: 8 [1: 8] @ heap/1048576\n0: 8 [0: 0] @ 0x1 0x2\n", "inuse count was 0"),
    # A 65-bit address.
    ("heap profile: 1: 8 [1: 8] @ heap/1048576\n1: 8 [1: 8] @ 0x1ffffffffffffffff\n", "64-bit"),
    # A header pprof's parsers all decline.
    ("--- contentionz 1 ---\nformat = xml\n", "unrecognized profile format"),
    # A long line no sample pattern matches: RE2's linear time, where Python's
    # backtracking regex took minutes on 2,000 digits.
    (
        "heap profile: 1: 8 [1: 8] @ heap/1048576\n" + "1" * 60_000 + " x\n",
        "unexpected number of sample values",
    ),
]


@pytest.mark.parametrize(
    ("text", "why"), LEGACY_REFUSED, ids=["zero-count", "address", "unknown", "long-line"]
)
def test_broken_legacy_files_are_refused_in_one_line(text: str, why: str, tmp_path: Path) -> None:
    path = tmp_path / "old.heap"
    path.write_text(text)
    with pytest.raises(LegacyFormatError) as e:
        read_profile(path)
    assert str(e.value).startswith(f"{path}: ") and why in str(e.value)
    assert "\n" not in str(e.value)


@needs_corpus
def test_function_id_zero_is_refused_like_pprof() -> None:
    path = CORPUS / "pyroscope/pkg/og/convert/pprof/testdata/dotnet-pprof-73.pb.gz"
    with pytest.raises(InvalidProfileError, match="found function with reserved ID=0"):
        read_profile(path)


@needs_corpus
def test_gzip_is_detected_by_magic_not_name(tmp_path: Path) -> None:
    not_gzipped = CORPUS / "pyroscope/pkg/og/convert/pprof/testdata/pyspy-1.pb.gz"
    assert not_gzipped.read_bytes()[:2] != b"\x1f\x8b"
    plain = read_profile(not_gzipped)
    assert plain.num_samples > 0
    zipped = tmp_path / "pyspy.pprof"  # gzipped under a name that does not say so
    zipped.write_bytes(gzip.compress(not_gzipped.read_bytes()))
    same_profile(read_profile(zipped), plain)
    raw_copy = decode_bytes(
        gzip.decompress((CORPUS / "parca/pkg/query/testdata/fib.pb.gz").read_bytes())
    )
    same_profile(raw_copy, read_profile(CORPUS / "parca/pkg/query/testdata/fib.pb.gz"))


# --- fast decoder == reference decoder -------------------------------------------------


@needs_corpus
def test_fast_equals_reference_on_the_whole_corpus() -> None:
    for path in corpus_files():
        fast, ref = outcome(path, "fast"), outcome(path, "reference")
        if isinstance(ref, ProfileError) or isinstance(fast, ProfileError):
            assert type(fast) is type(ref), f"{corpus_id(path)}: {fast!r} vs {ref!r}"
        else:
            same_profile(fast, ref)


def both(data: bytes) -> Profile:
    """Decode with both decoders, insist they agree, return the fast result."""
    results = []
    for method in ("fast", "reference"):
        try:
            results.append(decode_bytes(data, method=method))  # type: ignore[arg-type]
        except ProfileError as e:
            results.append(e)
    fast, ref = results
    if isinstance(ref, ProfileError) or isinstance(fast, ProfileError):
        assert type(fast) is type(ref), f"{fast!r} vs {ref!r}"
        raise fast  # type: ignore[misc]
    same_profile(fast, ref)
    return fast


def test_minimal_profile_decodes_every_field() -> None:
    msg = minimal()
    msg.comment.extend([5])
    msg.doc_url = 6
    msg.time_nanos, msg.duration_nanos = 123, 456
    prof = both(msg.SerializeToString())
    assert [str(t) for t in prof.sample_types] == ["samples/count", "cpu/nanoseconds"]
    assert prof.samples.column("values").to_pylist() == [[1, 10_000_000], [2, -5]]
    assert prof.samples.column("labels").to_pylist()[0] == [
        {"key": "k", "str": "v", "num": None, "num_unit": None},
        {"key": "k", "str": None, "num": 42, "num_unit": "bytes"},
    ]
    lines = prof.locations.column("lines").to_pylist()[0]
    assert lines == [
        {"function_id": 2, "line": 7, "column": 2},
        {"function_id": 1, "line": 9, "column": 0},
    ]
    assert prof.comments == ["main"] and prof.doc_url == "main.go"
    assert (prof.time_nanos, prof.duration_nanos, prof.period) == (123, 456, 10_000_000)


# --- pprof's quirks, matched ------------------------------------------------------------


def test_label_with_str_and_num_is_a_string_label() -> None:
    msg = minimal()
    msg.sample[1].label.add(key=9, str=10, num=7, num_unit=11)
    assert both(msg.SerializeToString()).samples.column("labels").to_pylist()[1] == [
        {"key": "k", "str": "v", "num": None, "num_unit": None}
    ]


def test_label_with_neither_str_nor_num_is_dropped() -> None:
    msg = minimal()
    msg.sample[1].label.add(key=9)
    assert both(msg.SerializeToString()).samples.column("labels").to_pylist()[1] == []


def test_location_with_unknown_mapping_is_kept_without_mapping() -> None:
    msg = minimal()
    msg.location[1].mapping_id = 77
    prof = both(msg.SerializeToString())
    assert prof.locations.column("mapping_id").to_pylist() == [1, 0]


def test_repeated_ids_packed_unpacked_and_mixed_decode_alike() -> None:
    msg = minimal()
    body = b"".join(
        field(1, 0, 1) + field(1, 2, b"\x02\x01") + field(2, 0, 5) + field(2, 0, 6)
        for _ in range(1)
    )
    raw = msg.SerializeToString() + field(2, 2, body)
    prof = both(raw)
    assert prof.samples.column("location_ids").to_pylist()[-1] == [1, 2, 1]
    assert prof.samples.column("values").to_pylist()[-1] == [5, 6]


def test_unknown_fields_are_skipped() -> None:
    msg = minimal()
    sample = field(2, 2, b"\x01\x02") + field(1, 0, 1) + field(9, 2, b"\xff\xfe") + field(10, 0, 3)
    raw = msg.SerializeToString() + field(2, 2, sample) + field(99, 2, b"whatever")
    prof = both(raw)
    assert prof.samples.column("location_ids").to_pylist()[-1] == [1]
    # Fixed-width unknown fields are skipped too (the fast decoder hands them over).
    fixed = field(1, 0, 2) + field(2, 0, 1) + field(2, 0, 1) + field(7, 5, b"\0\0\0\0")
    prof = both(msg.SerializeToString() + field(2, 2, fixed))
    assert prof.samples.column("location_ids").to_pylist()[-1] == [2]


def test_negative_and_ten_byte_varints() -> None:
    msg = minimal()
    msg.sample[0].value[1] = -(1 << 62)
    msg.location[0].line[0].line = -1
    prof = both(msg.SerializeToString())
    assert prof.samples.column("values").to_pylist()[0][1] == -(1 << 62)
    assert prof.locations.column("lines").to_pylist()[0][0]["line"] == -1


@pytest.mark.parametrize(
    "extra, error",
    [
        (field(2, 2, field(3, 0, 1) + field(2, 0, 1) + field(2, 0, 1)), CorruptProfileError),
        (field(4, 2, field(1, 0, 9) + field(4, 0, 1)), CorruptProfileError),  # line not a message
        (field(5, 2, field(1, 2, b"\x03")), CorruptProfileError),  # id as bytes
        (field(2, 0, 5), CorruptProfileError),  # a sample that is a varint
        (field(7, 2, b"\x00"), CorruptProfileError),  # drop_frames as bytes
        (field(2, 2, field(2, 0, 1) + b"\x0b\x0c"), CorruptProfileError),  # a group
        (field(9, 0, 5) + field(9, 0, 6), CorruptProfileError),  # two time_nanos
    ],
    ids=[
        "label-as-varint",
        "line-as-varint",
        "function-id-as-bytes",
        "sample-as-varint",
        "scalar-as-bytes",
        "group",
        "concatenated",
    ],
)
def test_wire_type_mismatches_are_refused(extra: bytes, error: type) -> None:
    with pytest.raises(error):
        both(minimal().SerializeToString() + extra)
