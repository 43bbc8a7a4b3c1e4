"""Coverage-guided fuzzing of the pprof decoder with atheris (libFuzzer), as ``make fuzz``.

One input is one decompressed-or-gzipped profile. ``check`` decodes it three ways:

- ``c``: the fast decoder with the C extension ``_wire`` (in ``make fuzz`` the
  copy built with AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer's
  edge counters, named by ``PYPROFLAB_FUZZ_WIRE``);
- ``numpy``: the fast decoder with the extension switched off;
- ``reference``: the protobuf-runtime decoder, its top level split by upb too
  (so ``c`` against ``reference`` also checks ``_wire.split_top``).

``make fuzz`` compares ``c`` with ``reference`` (``PYPROFLAB_FUZZ_PATHS``, e.g.
``c,numpy,reference`` for all three, at about half the speed); ``make test``
checks all three on seeded mutations (tests/decode/test_fuzz_decode.py).

A finding is any exception but ``ProfileError``, a sanitizer report, a
decoder disagreeing with the others (one refuses what another decodes, or the
tables differ), or more than libFuzzer's time or memory limit for one input.
libFuzzer writes the input to ``crash-*`` / ``timeout-*`` / ``oom-*``; copy it
to ``tests/testdata/fuzz/`` (replayed by ``make test``) once it is fixed.

Run: ``make fuzz`` (``FUZZ_RUNS`` inputs, default 100,000); by hand,
``python fuzz/decode.py seed DIR`` writes the seed corpus, and
``python fuzz/decode.py run CORPUS [libFuzzer flags]`` fuzzes.
"""

from __future__ import annotations

import contextlib
import gzip
import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAX_BYTES = 8 << 20  # decompression cap: inputs are small, their expansion is not
SEED_LIMIT = 16 << 10  # seeds above this size are left out (make fuzz: -max_len=16384)


def _use_sanitized_wire() -> None:
    """Load the extension named by ``PYPROFLAB_FUZZ_WIRE`` in place of the
    installed one; this must run before ``pyproflab.decode`` is imported."""
    path = os.environ.get("PYPROFLAB_FUZZ_WIRE")
    if not path:
        return
    name = "pyproflab.decode._wire"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"fuzz: cannot load {path} as {name}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module


@contextlib.contextmanager
def _upb_top_level():
    """The top level split by upb, not by the extension's split_top."""
    from pyproflab.decode import lite

    saved, lite._split_top = lite._split_top, None
    try:
        yield
    finally:
        lite._split_top = saved


@contextlib.contextmanager
def _without_extension():
    from pyproflab.decode import fast

    saved, fast._wire = fast._wire, None
    try:
        yield
    finally:
        fast._wire = saved


def _decode(data: bytes, path: str):
    """The decoded Profile, or None if refused with ProfileError."""
    from pyproflab.decode import decode_bytes
    from pyproflab.errors import ProfileError

    method = "reference" if path == "reference" else "fast"
    switches = {"numpy": _without_extension, "reference": _upb_top_level}
    switch = switches.get(path, contextlib.nullcontext)()
    try:
        with switch:
            return decode_bytes(data, source="<fuzz>", max_bytes=MAX_BYTES, method=method)
    except ProfileError:
        return None


PARTS = ("samples", "locations", "functions", "mappings")


def _tables(profile) -> list:
    from pyproflab.arrays import uninterned

    tables = (profile.samples, profile.locations, profile.functions, profile.mappings)
    scalars = (
        profile.sample_types,
        profile.period_type,
        profile.period,
        profile.time_nanos,
        profile.duration_nanos,
        profile.comments,
        profile.default_sample_type,
    )
    return [uninterned(t) for t in tables] + [scalars]


class Disagreement(AssertionError):
    """Two decoders gave different answers for one input."""


def check(data: bytes, paths: tuple[str, ...] = ("c", "numpy", "reference")) -> str:
    """Decode ``data`` each of ``paths`` ways: "decoded" or "refused" when they
    agree; raises ``Disagreement`` when they do not, and lets any exception other
    than ``ProfileError`` through."""
    results = {path: _decode(data, path) for path in paths}
    refused = {path for path, prof in results.items() if prof is None}
    if refused and len(refused) != len(paths):
        raise Disagreement(f"refused by {sorted(refused)} only")
    if refused:
        return "refused"
    first, *rest = paths
    *want, want_scalars = _tables(results[first])
    for path in rest:
        *got, got_scalars = _tables(results[path])
        same = [a.equals(b) for a, b in zip(want, got, strict=True)]
        if not all(same) or want_scalars != got_scalars:
            part = PARTS[same.index(False)] if not all(same) else "header fields"
            raise Disagreement(f"{first} and {path} differ in the {part}")
    return "decoded"


def seeds() -> list[tuple[str, bytes]]:
    """Small real profiles (decompressed): the committed Go recordings, the public
    corpus beside the repo, the fuzz regression inputs and a hand-made minimal one."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.profile_builders import minimal

    out = [("minimal", minimal().SerializeToString())]
    roots = [REPO / "tests" / "testdata" / "go", REPO / "tests" / "testdata" / "fuzz"]
    corpus = REPO.parent / "shared" / "corpus"
    files = [p for root in roots for p in sorted(root.glob("*")) if p.is_file()]
    files += sorted(p for p in corpus.rglob("*") if p.is_file() and p.suffix != ".md")
    for path in files:
        data = path.read_bytes()
        with contextlib.suppress(OSError, EOFError):
            data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        if 0 < len(data) <= SEED_LIMIT:
            out.append((path.name, data))
    return out


def write_seeds(folder: Path) -> int:
    """Write ``seeds()`` into ``folder`` (named by index; existing files kept)."""
    folder.mkdir(parents=True, exist_ok=True)
    found = seeds()
    for i, (_, data) in enumerate(found):
        (folder / f"seed-{i:03d}").write_bytes(data)
    return len(found)


def run(argv: list[str]) -> None:
    """Fuzz under libFuzzer with ``argv`` (a corpus folder and libFuzzer flags);
    Python coverage of ``pyproflab.decode`` guides the search beside the
    extension's edge counters."""
    import atheris

    _use_sanitized_wire()
    with atheris.instrument_imports(include=["pyproflab.decode"]):
        import pyproflab.decode.fast  # noqa: F401
        import pyproflab.decode.reference  # noqa: F401

    paths = tuple(os.environ.get("PYPROFLAB_FUZZ_PATHS", "c,reference").split(","))

    def one_input(data: bytes) -> None:
        check(data, paths)

    atheris.Setup([sys.argv[0], *argv], one_input)
    atheris.Fuzz()


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "seed":
        print(f"fuzz: {write_seeds(Path(argv[1]))} seeds in {argv[1]}")
        return 0
    if argv and argv[0] == "run":
        run(argv[1:])
        return 0
    print(__doc__.strip().splitlines()[0], "\nusage: decode.py seed DIR | run CORPUS [FLAGS]")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
