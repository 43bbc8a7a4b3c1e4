"""Issue 17, finding 1: memory bounded by what a profile means, not how it is spelled.

Each hostile case runs in a child process whose peak RSS is measured (by a
wrapper that reads its own RUSAGE_CHILDREN, so earlier tests do not count),
and is compared with a child that decodes a tiny profile: the bounds are
several times what the fixed decoder takes and a fraction of what the old one
took (label bomb: every sample got its own copy of the value; unknown-field
bomb: one Python object per unknown field).
"""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.profile_builders import field, label_bomb, minimal, unknown_field_bomb, varint

from pyproflab.decode import LimitError, Limits, decode_bytes

MiB = 1 << 20

_CHILD = textwrap.dedent(
    """
    import resource, subprocess, sys
    r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    print(r.returncode, peak, r.stderr.strip().replace("\\n", " | ")[:300])
    """
)


def _top_peak_mib(path: Path) -> tuple[int, int, str]:
    """(exit code, peak RSS in MiB, stderr) of ``pyproflab top path`` in a child."""
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, sys.executable, "-m", "pyproflab", "top", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout.split(" ", 2)
    return int(out[0]), int(out[1]), out[2].strip()


@pytest.fixture(scope="module")
def baseline_mib(tmp_path_factory) -> int:
    path = tmp_path_factory.mktemp("base") / "minimal.pb"
    path.write_bytes(minimal().SerializeToString())
    rc, peak, err = _top_peak_mib(path)
    assert rc == 0, err
    return peak


def test_a_label_shared_by_many_samples_is_held_once() -> None:
    prof = decode_bytes(label_bomb(256 * 1024, 2000))
    # Old: 2,000 copies (500 MiB); now the value once plus an index per label.
    assert prof.samples.column("labels").nbytes < 2 * MiB
    labels = prof.samples.column("labels").to_pylist()
    assert len(labels) == 2000 and labels[1999][0]["str"] == "x" * (256 * 1024)


def test_top_on_the_label_bomb_stays_small(tmp_path, baseline_mib) -> None:
    path = tmp_path / "label-bomb.pb.gz"
    path.write_bytes(gzip.compress(label_bomb(MiB // 2, 2000)))  # old code: ~1.7 GB
    rc, peak, err = _top_peak_mib(path)
    assert rc == 0, err
    assert peak - baseline_mib < 200, (peak, baseline_mib)


def test_tag_filters_on_the_label_bomb_never_copy_the_value() -> None:
    """-tagfocus/-tagignore/-tagshow/-taghide test each distinct label value once and
    keep labels interned (they used to spell every sample's labels out: 2,000
    copies of the value)."""
    import tracemalloc

    from pyproflab.analyses import pprof_filters

    prof = decode_bytes(label_bomb(MiB, 2000))
    everything = (
        {"tagfocus": "x+$"},
        {"tagignore": "k=^y"},
        {"tagshow": "k"},
        {"taghide": "k"},
        {"tagfocus": "k=x", "tagshow": "k"},
    )
    pprof_filters.apply(prof, **everything[-1])  # imports (pyarrow.compute) not traced
    tracemalloc.start()
    for options in everything:
        out = pprof_filters.apply(prof, **options)
        assert out.samples.num_rows == 2000
        # The shared string table, counted once per interned field: not 2,000 copies.
        assert out.samples.column("labels").nbytes < 4 * MiB
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 * MiB, peak >> 20  # the value once or twice; it was 2,000 copies
    hidden = pprof_filters.apply(prof, taghide="^k$").samples.column("labels")
    assert hidden.to_pylist() == [[]] * 2000


def test_tag_filters_over_interned_labels_match_the_spelled_out_rules() -> None:
    """tagfocus/tagignore/tagshow/taghide on a small profile with string and numeric
    labels, shared and distinct values, samples without labels, a null key."""
    from pyproflab.analyses import pprof_filters

    p = minimal()
    strings = ["api", "query", "write", "bytes", "B", "kilobytes", "thread"]
    base = len(p.string_table)
    p.string_table.extend(strings)
    k = {s: base + i for i, s in enumerate(strings)}
    del p.sample[:]
    rows = [
        [(k["api"], k["query"], None, 0), (k["bytes"], 0, 2048, 0)],
        [(k["api"], k["write"], None, 0), (k["bytes"], 0, 100, 0)],
        [],
        [(k["thread"], 0, 7, k["kilobytes"]), (k["api"], k["query"], None, 0)],
    ]
    for labels in rows:
        s = p.sample.add(location_id=[1], value=[1, 1])
        for key, sv, num, unit in labels:
            lb = s.label.add(key=key)
            if num is None:
                lb.str = sv
            else:
                lb.num, lb.num_unit = num, unit
    prof = decode_bytes(p.SerializeToString())

    def kept(**options) -> list[int]:
        out = pprof_filters.apply(prof, **options).samples.column("labels").to_pylist()
        everything = prof.samples.column("labels").to_pylist()
        return [everything.index(ls) for ls in out]

    assert kept(tagfocus="api=query") == [0, 3]
    assert kept(tagignore="api=query") == [1, 2]
    assert kept(tagfocus="query") == [0, 3]  # no key: "api:query"
    assert kept(tagfocus="api:,bytes") == []  # no key: each regex on some key:value
    assert kept(tagfocus="bytes=1kb:") == [0]
    assert kept(tagfocus=":1kb") == [1]  # thread is 7 kilobytes: out of range
    assert pprof_filters.label_units(prof) == {"bytes": "bytes", "thread": "kilobytes"}
    shown = pprof_filters.apply(prof, tagshow="^api$").samples.column("labels").to_pylist()
    assert [[lb["key"] for lb in ls] for ls in shown] == [["api"], ["api"], [], ["api"]]
    hidden = pprof_filters.apply(prof, taghide="^api$").samples.column("labels").to_pylist()
    assert [[lb["key"] for lb in ls] for ls in hidden] == [["bytes"], ["bytes"], [], ["thread"]]


def test_unknown_fields_are_skipped_without_objects(tmp_path, baseline_mib) -> None:
    path = tmp_path / "unknown-bomb.pb.gz"
    path.write_bytes(gzip.compress(unknown_field_bomb(16 * MiB)))  # old code: ~+500 MB
    rc, peak, err = _top_peak_mib(path)
    assert rc == 0, err
    assert peak - baseline_mib < 200, (peak, baseline_mib)


def test_unknown_fields_cost_about_their_decompressed_size(tmp_path, baseline_mib) -> None:
    """64 MiB of unknown fields: the decompressed bytes once, not again in zlib's
    blocks or upb's copy of the unknown fields (before: about +257 MiB)."""
    path = tmp_path / "unknown-bomb-64.pb.gz"
    path.write_bytes(gzip.compress(unknown_field_bomb(64 * MiB), mtime=0))
    rc, peak, err = _top_peak_mib(path)
    assert rc == 0, err
    assert peak - baseline_mib < 96, (peak, baseline_mib)


def test_a_known_field_with_a_wrong_wire_type_after_unknown_ones_is_still_refused() -> None:
    raw = unknown_field_bomb(3000) + field(12, 2, b"\x01")  # period as bytes
    with pytest.raises(Exception, match="type mismatch: Profile field 12 has wire type 2"):
        decode_bytes(raw)
    with pytest.raises(Exception, match="unknown wire type 3"):
        decode_bytes(minimal().SerializeToString() + varint(100 << 3 | 3) + varint(100 << 3 | 4))


@pytest.mark.parametrize(
    ("limit", "raw", "what"),
    [
        ("samples=1", minimal().SerializeToString(), "sample count (2)"),
        ("stack_depth=1", minimal().SerializeToString(), "stack depth (2)"),
        ("labels=1", minimal().SerializeToString(), "labels on one sample (2)"),
        ("label_value=100", label_bomb(101, 3), "label value bytes (101)"),
        ("symbol=5", minimal().SerializeToString(), "symbol bytes (9)"),
    ],
)
def test_each_limit_refuses_in_one_line(limit, raw, what) -> None:
    name, _, value = limit.partition("=")
    with pytest.raises(LimitError) as e:
        decode_bytes(raw, source="f.pb", limits=Limits.parse(limit))
    msg = str(e.value)
    assert msg.startswith(f"f.pb: {what} passes the limit {limit}") and "\n" not in msg
    decode_bytes(raw, limits=Limits.parse(f"{name}={int(value) * 100}"))  # raised: accepted


def test_limits_from_the_environment_reach_the_cli(tmp_path) -> None:
    path = tmp_path / "p.pb"
    path.write_bytes(minimal().SerializeToString())
    env_run = subprocess.run(
        [sys.executable, "-m", "pyproflab", "top", str(path)],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYPROFLAB_LIMITS": "samples=1"},
        timeout=120,
    )
    assert env_run.returncode == 2
    assert env_run.stderr.strip().endswith(
        "sample count (2) passes the limit samples=1 "
        "(raise it with --max-samples N or PYPROFLAB_LIMITS=samples=N)"
    )
    assert len(env_run.stderr.strip().splitlines()) == 1


def test_limit_flags_refuse_in_one_line_and_override_the_environment(
    tmp_path, capsys, monkeypatch
) -> None:
    """--max-samples etc. on the commands that read profiles; a flag beats
    PYPROFLAB_LIMITS, and a limit the flags do not name keeps the variable's."""
    from pyproflab.cli import main

    path = tmp_path / "p.pb"
    path.write_bytes(minimal().SerializeToString())
    monkeypatch.setenv("PYPROFLAB_LIMITS", "samples=100,symbol=5")
    code = main(["top", str(path), "--max-samples", "1", "--max-symbol", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.endswith(
        f"{path}: sample count (2) passes the limit samples=1 "
        "(raise it with --max-samples N or PYPROFLAB_LIMITS=samples=N)"
    )
    assert main(["top", str(path), "--max-samples", "2", "--max-symbol", "0"]) == 0
    assert main(["top", str(path), "--max-samples", "2"]) == 2  # symbol=5 from the variable
    assert "symbol bytes (9) passes the limit symbol=5" in capsys.readouterr().err
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(path), "--db", str(db), "--strict", "--max-stack-depth", "1"]) == 2
    out = capsys.readouterr()
    assert "passes the limit stack_depth=1 (raise it with --max-stack-depth N" in out.err
    assert "0 new" in out.out


def test_a_negative_limit_flag_is_a_usage_error(tmp_path, capsys) -> None:
    from pyproflab.cli import main

    code = main(["top", str(tmp_path / "p.pb"), "--max-labels", "-1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == "pyproflab: error: --max-labels must be a whole number >= 0, not -1"


def _with_field_zero() -> bytes:
    """minimal() with a field numbered 0 at the top level, in a sample, in a label
    and in a location's line: pprof skips each as an unknown field."""
    p = minimal()
    sample = p.sample[1].SerializeToString() + field(0, 0, 5)
    del p.sample[1]
    label = field(1, 0, 9) + field(2, 0, 10) + field(0, 2, b"zz")
    sample2 = field(1, 0, 2) + field(2, 0, 3) + field(2, 0, 4) + field(3, 2, label)
    line = field(1, 0, 1) + field(2, 0, 5) + field(0, 5, b"\x00" * 4)
    loc = field(1, 0, 3) + field(2, 0, 1) + field(3, 0, 0x1400) + field(4, 2, line)
    return (
        field(0, 0, 1)
        + p.SerializeToString()
        + field(2, 2, sample)
        + field(2, 2, sample2)
        + field(4, 2, loc)
        + field(0, 1, b"\x00" * 8)
    )


def test_field_number_zero_is_skipped_as_pprof_does() -> None:
    from pyproflab.arrays import uninterned

    raw = _with_field_zero()
    fast = decode_bytes(raw)
    ref = decode_bytes(raw, method="reference")
    assert uninterned(fast.samples).equals(uninterned(ref.samples))
    assert fast.num_samples == 3 and fast.locations.num_rows == 3
    assert fast.samples.column("labels").to_pylist()[2] == [
        {"key": "k", "str": "v", "num": None, "num_unit": None}
    ]


@pytest.mark.go
def test_field_number_zero_top_equals_pprof(tmp_path, pprof) -> None:
    from support.testenv import api_top, assert_same_rows, our_top_keys

    path = tmp_path / "zero.pb"
    path.write_bytes(_with_field_zero())
    for index in (0, 1):
        ours = our_top_keys(api_top(decode_bytes(path.read_bytes()), sample_index=index))
        assert_same_rows(ours, pprof.top(path, sample_index=index), f"field 0, index {index}")


BIG_NUMBER = 8_400_000_000_000_000  # past protobuf's 2**29 - 1 (issue 35, finding 11)


def _with_big_field_numbers() -> bytes:
    """minimal() with a field numbered past 2**29 - 1 at the top level, in a
    function, in a sample, in a label and in a location's line: go tool pprof
    skips each as an unknown field; upb refuses them."""
    p = minimal()
    fn = p.function[0].SerializeToString() + field(BIG_NUMBER, 0, 1)
    del p.function[0]
    sample = p.sample[1].SerializeToString() + field(BIG_NUMBER, 0, 5)
    del p.sample[1]
    label = field(1, 0, 9) + field(2, 0, 10) + field(BIG_NUMBER, 2, b"zz")
    sample2 = field(1, 0, 2) + field(2, 0, 3) + field(2, 0, 4) + field(3, 2, label)
    line = field(1, 0, 1) + field(2, 0, 5) + field(BIG_NUMBER + 1, 5, b"\x00" * 4)
    loc = field(1, 0, 3) + field(2, 0, 1) + field(3, 0, 0x1400) + field(4, 2, line)
    return (
        field(BIG_NUMBER, 0, 1)
        + p.SerializeToString()
        + field(5, 2, fn)
        + field(2, 2, sample)
        + field(2, 2, sample2)
        + field(4, 2, loc)
        + field(BIG_NUMBER, 1, b"\x00" * 8)
    )


def test_field_numbers_past_the_limit_are_skipped_by_every_decoder(monkeypatch) -> None:
    from support.decode_helpers import same_profile

    from pyproflab.decode import fast as fast_module

    raw = _with_big_field_numbers()
    ours = decode_bytes(raw)
    ref = decode_bytes(raw, method="reference")
    monkeypatch.setattr(fast_module, "_wire", None)  # the numpy path
    numpy = decode_bytes(raw)
    same_profile(ours, ref)
    same_profile(numpy, ref)
    assert ref.num_samples == 3 and ref.functions.num_rows == 2 and ref.locations.num_rows == 3
    assert ref.samples.column("labels").to_pylist()[2] == [
        {"key": "k", "str": "v", "num": None, "num_unit": None}
    ]


@pytest.mark.go
def test_field_numbers_past_the_limit_top_equals_pprof(tmp_path, pprof) -> None:
    from support.testenv import api_top, assert_same_rows, our_top_keys

    path = tmp_path / "big.pb"
    path.write_bytes(_with_big_field_numbers())
    for index in (0, 1):
        ours = our_top_keys(api_top(decode_bytes(path.read_bytes()), sample_index=index))
        assert_same_rows(ours, pprof.top(path, sample_index=index), f"big field, index {index}")


@pytest.mark.go
def test_sums_past_int64_wrap_as_pprof_s(tmp_path, pprof) -> None:
    from support.testenv import api_top

    p = minimal()
    p.sample[0].value[0] = p.sample[1].value[0] = 2**63 - 1
    path = tmp_path / "big.pb"
    path.write_bytes(p.SerializeToString())
    ours = api_top(decode_bytes(path.read_bytes()), sample_index=0, node_fraction=0)
    theirs = pprof.top(path, sample_index=0)
    showing = next(ln for ln in theirs.header if ln.startswith("Showing nodes"))
    shown = int(re.match(r"Showing nodes accounting for (-?\d+)", showing).group(1))
    assert (ours.shown_total, ours.total) == (shown, theirs.total) == (-2, -2)
