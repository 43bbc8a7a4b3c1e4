"""Fuzz the decoder and ingest with mutations of real profiles.

Every input must decode or raise ``ProfileError`` (never another exception),
within ``TIME_BOUND`` seconds of this process's CPU time (not wall-clock time,
which a loaded machine stretches at will), with the decompression cap ``MAX_BYTES`` and a
traced Python peak under ``MEMORY_BOUND`` (checked on every ``TRACE_EVERY``-th
input, as tracemalloc slows everything). A sample of what decodes is
ingested into a ``:memory:`` store, where only ``ProflabError`` may come out.

Seeds: profgen's eight profiles, the hand-made minimal profile and small
protobuf files of the public corpus. Mutators (seeded, ``random.Random``):
bit flips, truncation, splices of two profiles, corrupted varints, huge
length prefixes, deep nesting, wide and many label sets, repeated fields,
inserted junk, and damaged gzip streams.

Small run (``make test``): ``FUZZ_CASES`` = 1000. Full run (``make fuzz``):
``PYPROFLAB_FUZZ_CASES=20000 pytest tests/decode/test_fuzz_decode.py``. A failing
input is written to ``$PYPROFLAB_FUZZ_OUT`` (default the pytest tmp dir) for
``tests/testdata/fuzz/``, whose files are replayed on every run.
"""

from __future__ import annotations

import gzip
import os
import random
import resource
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fuzz_decode_helpers import (
    _fields,
    _read_varint,
    bit_flips,
    corrupt_varint,
    huge_length,
    junk,
    splice,
    truncate,
)
from support.profile_builders import field, minimal, varint
from support.testenv import GO_PROFILES, corpus_proto_files

from pyproflab.arrays import uninterned
from pyproflab.decode import decode_bytes
from pyproflab.errors import ProfileError, ProflabError

FUZZ_CASES = int(os.environ.get("PYPROFLAB_FUZZ_CASES", "1000"))
FUZZ_SEED = int(os.environ.get("PYPROFLAB_FUZZ_SEED", "20261122"))
TIME_BOUND = 2.0  # CPU seconds per input (a hang or a quadratic walk, not a speed target)
MAX_BYTES = 8 << 20  # decompression cap for the fuzz run
MEMORY_BOUND = 256 << 20  # traced peak per input
TRACE_EVERY = 25
INGEST_EVERY = 10  # ingest one in this many decoded inputs
REGRESSIONS = Path(__file__).resolve().parents[1] / "testdata" / "fuzz"


# --- seeds --------------------------------------------------------------------------


def _raw(data: bytes) -> bytes:
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


@pytest.fixture(scope="module")
def seeds(request) -> list[bytes]:
    out = [minimal().SerializeToString()]
    try:
        go = request.getfixturevalue("go_profiles")
        out += [_raw(go[k].read_bytes()) for k in GO_PROFILES]
    except pytest.skip.Exception:
        pass  # no Go: the corpus and the hand-made profile still seed the run
    small = [p for p in corpus_proto_files() if p.stat().st_size < 64 << 10]
    out += [_raw(p.read_bytes()) for p in small[:12]]
    return out


# --- mutators -----------------------------------------------------------------------


def deep(r: random.Random, a: bytes, _b: bytes) -> bytes:
    """A sample (field 2) whose unknown field nests ``depth`` messages deep."""
    inner = b""
    for _ in range(r.choice([50, 500, 3000])):
        inner = field(r.choice([2, 3, 15]), 2, inner)
    return a + field(2, 2, field(1, 2, varint(1)) + inner)


def wide_labels(r: random.Random, a: bytes, _b: bytes) -> bytes:
    """Samples with very many labels, or very many distinct label sets."""
    from pyproflab._proto import profile_pb2

    p = profile_pb2.Profile()
    try:
        p.ParseFromString(a)
    except Exception:
        p = minimal()
    if not p.location or not p.sample_type:
        p = minimal()
    base = len(p.string_table)
    n = r.choice([200, 2000, 20000])
    p.string_table.extend([f"k{i}" for i in range(min(n, 2000))])
    loc = p.location[0].id
    nvals = len(p.sample_type)
    if r.random() < 0.5:  # one sample, n labels
        s = p.sample.add(location_id=[loc], value=[1] * nvals)
        for i in range(n):
            s.label.add(key=base + i % 2000, num=i)
    else:  # n samples, each its own label set
        for i in range(min(n, 5000)):
            s = p.sample.add(location_id=[loc], value=[1] * nvals)
            s.label.add(key=base + i % 2000, str=base + (i * 7) % 2000)
            s.label.add(key=base + (i + 1) % 2000, num=i, num_unit=base)
    return p.SerializeToString()


def repeat_field(r: random.Random, a: bytes, _b: bytes) -> bytes:
    fs = _fields(a)
    if not fs:
        return a * 2
    k = r.randrange(len(fs))
    start = fs[k][0]
    end = fs[k + 1][0] if k + 1 < len(fs) else len(a)
    return a[:end] + a[start:end] * r.choice([2, 10, 1000]) + a[end:]


def bad_gzip(r: random.Random, a: bytes, b: bytes) -> bytes:
    g = bytearray(gzip.compress(a, mtime=0))
    choice = r.randrange(5)
    if choice == 0:
        g[r.randrange(10, len(g))] ^= 0xFF  # damaged deflate data or trailer
    elif choice == 1:
        del g[r.randrange(10, len(g)) :]  # truncated stream
    elif choice == 2:
        g += b"trailing junk"
    elif choice == 3:
        g += gzip.compress(b, mtime=0)  # two members: must decode like Go
    else:  # a gzip bomb, within the cap's reach
        g = bytearray(gzip.compress(b"\x00" * (MAX_BYTES + 1), mtime=0))
    return bytes(g)


MUTATORS: list[Callable[[random.Random, bytes, bytes], bytes]] = [
    bit_flips,
    truncate,
    splice,
    corrupt_varint,
    huge_length,
    deep,
    wide_labels,
    repeat_field,
    junk,
    bad_gzip,
]
# Cheap ones more often; building wide label sets is slow, so less often.
WEIGHTS = [20, 12, 12, 14, 14, 3, 2, 6, 10, 7]


def mutate(r: random.Random, seeds: list[bytes]) -> tuple[str, bytes]:
    a, b = r.choice(seeds), r.choice(seeds)
    names = []
    data = a
    for _ in range(r.choice([1, 1, 1, 2, 3])):
        m = r.choices(MUTATORS, WEIGHTS)[0]
        names.append(m.__name__)
        if not data:
            data = a
        data = m(r, data, b)
    if r.random() < 0.15 and names[-1] != "bad_gzip":
        data = gzip.compress(data, mtime=0)  # the gzip path with a valid stream
        names.append("gzip")
    return "+".join(names), data


# --- the run ------------------------------------------------------------------------


def check_one(data: bytes, *, trace: bool) -> tuple[object | None, float, int]:
    """(profile or None, CPU seconds, traced peak bytes). Raises on a fault."""
    if trace:
        tracemalloc.start()
    t = time.process_time()
    try:
        prof = decode_bytes(data, source="<fuzz>", max_bytes=MAX_BYTES)
    except ProfileError:
        prof = None
    finally:
        elapsed = time.process_time() - t
        peak = tracemalloc.get_traced_memory()[1] if trace else 0
        if trace:
            tracemalloc.stop()
    return prof, elapsed, peak


def test_fuzz_decode_and_ingest(seeds, tmp_path):
    from pyproflab.store import Store
    from pyproflab.store.ingest import ProfileMeta, ingest

    r = random.Random(FUZZ_SEED)
    out_dir = Path(os.environ.get("PYPROFLAB_FUZZ_OUT", tmp_path))
    faults: list[str] = []
    outcomes: Counter = Counter()
    slowest = (0.0, "")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    store = Store.open(":memory:")
    decoded = ingested = 0
    for case in range(FUZZ_CASES):
        name, data = mutate(r, seeds)
        try:
            prof, elapsed, peak = check_one(data, trace=case % TRACE_EVERY == 0)
        except Exception as e:  # a fault: anything but ProfileError
            path = out_dir / f"fault-{case}.bin"
            path.write_bytes(data)
            faults.append(f"case {case} ({name}): {type(e).__name__}: {e} -> {path}")
            continue
        outcomes["decoded" if prof is not None else "refused"] += 1
        slowest = max(slowest, (elapsed, name))
        if elapsed > TIME_BOUND or peak > MEMORY_BOUND:
            path = out_dir / f"fault-{case}.bin"
            path.write_bytes(data)
            faults.append(
                f"case {case} ({name}): {elapsed:.2f} s, traced peak {peak >> 20} MiB -> {path}"
            )
        if prof is None:
            continue
        decoded += 1
        if decoded % INGEST_EVERY == 0:
            try:
                rep = ingest(store, [(prof, ProfileMeta(service="fuzz"))])
                ingested += rep.new
                if rep.new:
                    pid = rep.profile_ids[0]
                    n = store.sql("SELECT count(*) FROM samples WHERE profile_id = ?", [pid])
                    assert n.column(0)[0].as_py() == prof.samples.num_rows
            except ProflabError:
                pass
            except Exception as e:
                path = out_dir / f"fault-ingest-{case}.bin"
                path.write_bytes(data)
                faults.append(f"case {case} ({name}) ingest: {type(e).__name__}: {e} -> {path}")
    store.close()
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    print(
        f"\nfuzz: {FUZZ_CASES} cases (seed {FUZZ_SEED}, {len(seeds)} seeds): {dict(outcomes)}, "
        f"{ingested} ingested; slowest {slowest[0]:.3f} s ({slowest[1]}); "
        f"max RSS grew {grown_mib:.0f} MiB; {len(faults)} faults"
    )
    assert not faults, "\n".join(faults[:20])
    assert grown_mib < 1024


# --- make fuzz's target: the three decoders agree ---------------------------------


def _fuzz_target():
    """fuzz/decode.py, the coverage-guided fuzzer's target (outside the test folder)."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "fuzz" / "decode.py"
    spec = importlib.util.spec_from_file_location("pyproflab_fuzz_target", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


AGREE_CASES = 300


def test_the_fuzz_target_agrees_on_seeded_mutations(seeds) -> None:
    """make fuzz's check (C extension, numpy and reference decoders give the same
    profile or all refuse) on its own seeds and on AGREE_CASES seeded mutations:
    the small deterministic pass of the coverage-guided run."""
    target = _fuzz_target()
    r = random.Random(FUZZ_SEED + 1)
    outcomes: Counter = Counter()
    for _, data in target.seeds():
        outcomes[target.check(data)] += 1
    for _ in range(AGREE_CASES):
        _, data = mutate(r, seeds)
        if len(data) <= 1 << 20:  # the numpy path is slow on the biggest splices
            outcomes[target.check(data)] += 1
    assert outcomes["decoded"] > 50 and outcomes["refused"] > 50, outcomes


# --- regression cases found by the fuzzer -------------------------------------------


def _regression_files() -> list:
    files = sorted(REGRESSIONS.glob("*.bin")) if REGRESSIONS.is_dir() else []
    return [pytest.param(f, id=f.name) for f in files] or [
        pytest.param(None, marks=pytest.mark.skip(reason="no regression cases"), id="none")
    ]


@pytest.mark.parametrize("path", _regression_files())
def test_fuzz_regressions(path):
    """Inputs the fuzzer once failed on: decode or ProfileError, in time, and the fast
    decoder (with and without the C extension) agrees with the reference decoder."""
    data = path.read_bytes()
    prof, elapsed, _ = check_one(data, trace=False)
    assert elapsed < TIME_BOUND
    _fuzz_target().check(data)
    try:
        ref = decode_bytes(data, method="reference", max_bytes=MAX_BYTES)
    except ProfileError:
        ref = None
    assert (prof is None) == (ref is None)
    if prof is not None:
        assert uninterned(prof.samples).equals(uninterned(ref.samples))


def test_wide_message_is_linear(monkeypatch):
    """Found by the fuzzer: one sample with very many labels took the numpy walk one
    step per label (30 s for 200,000 labels, 1.5 MB). The walk now hands the few
    messages still open after ``SCALAR_AFTER_STEPS`` steps to a scalar walk, so its
    numpy steps do not grow with a message's width: counted here, on the numpy
    path (the C walk is one pass by construction). The time is a bench row
    (``python -m bench --only decode``: one sample, 200,000 labels), not a bound here."""
    from pyproflab.decode import fast

    p = minimal()
    key = len(p.string_table)
    p.string_table.append("k")
    s = p.sample.add(location_id=[1], value=[1, 1])
    for i in range(200_000):
        s.label.add(key=key, num=i + 1)
    data = p.SerializeToString()
    ref = decode_bytes(data, method="reference")
    prof = decode_bytes(data)  # the C walk where it is built
    assert uninterned(prof.samples).equals(uninterned(ref.samples))
    assert len(prof.samples.column("labels")[2].as_py()) == 200_000

    handed: list[tuple[int, int]] = []  # (messages, fields) per scalar hand-over
    scalar = fast._walk_scalar

    def counted(tok, msgs, curs, end, end_byte):
        cols = scalar(tok, msgs, curs, end, end_byte)
        handed.append((int(msgs.size), len(cols[0])))
        return cols

    monkeypatch.setattr(fast, "_wire", None)
    monkeypatch.setattr(fast, "_walk_scalar", counted)
    prof = decode_bytes(data)
    assert uninterned(prof.samples).equals(uninterned(ref.samples))
    # The wide sample's fields but the first SCALAR_AFTER_STEPS went one by one.
    assert (1, 200_000 + 2 - fast.SCALAR_AFTER_STEPS) in handed, handed


def test_huge_length_prefix_is_refused_quickly():
    raw = minimal().SerializeToString()
    fs = [f for f in _fields(raw) if f[2] == 2]
    for size in ((1 << 64) - 1, 1 << 40, len(raw) + 1):
        start, _, _, payload = fs[0]
        _, after = _read_varint(raw, payload)
        with pytest.raises(ProfileError):
            decode_bytes(raw[:payload] + varint(size) + raw[after:])


def test_gzip_bomb_stops_at_the_cap():
    data = gzip.compress(b"\x00" * (MAX_BYTES * 4), mtime=0)
    tracemalloc.start()
    with pytest.raises(ProfileError, match="cap"):
        decode_bytes(data, max_bytes=MAX_BYTES)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * MAX_BYTES
