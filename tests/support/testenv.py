"""Shared fixtures: Go, the profiles the Go test programs write, the public corpus,
and a session cache of `go tool pprof` answers (see pprof_oracle.py).

Where things come from:

- Go: the `go` command on PATH. Without it, every test that needs Go skips
  with "Go is not installed".
- Go-program profiles: what tests/goprogs/profgen wrote once, recorded in
  tests/testdata/go by tests/support/record_go_profiles.py (a fresh sampled profile can
  miss a function on a loaded machine; a recorded one cannot). One test still
  builds and runs profgen and checks only what every run guarantees.
- The corpus: ``../shared/corpus`` beside the repository root. Without it (a
  fresh clone) the corpus tests skip, naming the path they looked for.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from support import pprof_oracle as oracle

REPO = Path(__file__).resolve().parents[2]
# Resolved: ../shared may be a symlink, and the code under test reports resolved paths.
CORPUS = (REPO.parent / "shared" / "corpus").resolve()
GOPROGS = Path(__file__).resolve().parents[1] / "goprogs"
RECORDED_GO = Path(__file__).resolve().parents[1] / "testdata" / "go"

# What profgen writes: kind -> (file name, number of sample types).
GO_PROFILES: dict[str, tuple[str, int]] = {
    "cpu": ("cpu.pb.gz", 2),  # samples/count, cpu/nanoseconds
    "cpu2": ("cpu2.pb.gz", 2),  # a second CPU profile, another seed
    "heap": ("heap.pb.gz", 4),  # alloc_objects, alloc_space, inuse_objects, inuse_space
    "allocs": ("allocs.pb.gz", 4),  # the same types, default alloc_space
    "goroutine": ("goroutine.pb.gz", 1),
    "mutex": ("mutex.pb.gz", 2),  # contentions/count, delay/nanoseconds
    "block": ("block.pb.gz", 2),
    "threadcreate": ("threadcreate.pb.gz", 1),
}

SKIP_NO_CORPUS = f"public pprof corpus not found at {CORPUS} (a fresh clone has none)"
SKIP_NO_GO = "Go is not installed (`go` not on PATH); conformance needs `go tool pprof`"


# --- the corpus, listed at collection time (no Go needed) ---------------------------


def corpus_files() -> list[Path]:
    """Every file of the corpus except its MANIFEST, sorted; [] when absent."""
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name != "MANIFEST.md")


def corpus_proto_files() -> list[Path]:
    """The corpus files in the protobuf format (legacy formats left out)."""
    return [p for p in corpus_files() if oracle.is_proto(p)]


# The corpus's legacy (pre-proto) files, with the number of sample types pprof
# reads in each (its -raw header): pprof's legacy text and binary formats.
LEGACY_SAMPLE_TYPES = {
    "google-pprof/profile/testdata/cppbench.cpu": 2,
    "google-pprof/profile/testdata/go.crc32.cpu": 2,
    "google-pprof/profile/testdata/gobench.cpu": 2,
    "google-pprof/profile/testdata/java.cpu": 2,
    "google-pprof/profile/testdata/cppbench.heap": 2,
    "google-pprof/profile/testdata/gobench.heap": 4,
    "google-pprof/profile/testdata/java.heap": 2,
    "google-pprof/profile/testdata/cppbench.growth": 2,
    "google-pprof/profile/testdata/java.contention": 2,
    "google-pprof/profile/testdata/cppbench.thread": 1,
    "google-pprof/profile/testdata/cppbench.thread.all": 1,
    "google-pprof/profile/testdata/cppbench.thread.none": 1,
    "google-pprof/profile/testdata/go.godoc.thread": 1,
    "google-pprof/internal/driver/testdata/cppbench.contention": 2,
    "google-pprof/internal/driver/testdata/cppbench.small.contention": 2,
}


def corpus_id(path: Path) -> str:
    return str(path.relative_to(CORPUS))


def count_sample_types(path: Path) -> int:
    """Number of sample types of a proto file, read from its wire format (no pyproflab)."""
    import gzip

    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    i = n = 0
    while i < len(data):
        tag, i = oracle._varint(data, i)
        if tag & 7 == 0:
            _, i = oracle._varint(data, i)
        else:
            size, i = oracle._varint(data, i)
            i += size
        n += tag >> 3 == 1
    return n


def corpus_params(*, with_index: bool = False, legacy: bool = False) -> list:
    """pytest params over the corpus proto files, and with ``legacy`` its legacy
    files too (optionally × sample index); a single skipping param when the
    corpus is absent, so the skip reason shows up."""
    files = corpus_proto_files()
    if legacy and files:
        files += [CORPUS / name for name in LEGACY_SAMPLE_TYPES if (CORPUS / name).is_file()]
    if not files:
        values = (None, None) if with_index else (None,)
        skip = pytest.mark.skip(reason=SKIP_NO_CORPUS)
        return [pytest.param(*values, marks=skip, id="no-corpus")]
    params = []
    for f in files:
        if with_index:
            n = LEGACY_SAMPLE_TYPES.get(corpus_id(f)) or count_sample_types(f)
            params += [pytest.param(f, i, id=f"{corpus_id(f)}[{i}]") for i in range(max(n, 1))]
        else:
            params.append(pytest.param(f, id=corpus_id(f)))
    return params


def go_params(*, with_index: bool = False, kinds: Iterable[str] | None = None) -> list:
    """pytest params over the Go-program profile kinds (optionally × sample index)."""
    params = []
    for kind in kinds or GO_PROFILES:
        n = GO_PROFILES[kind][1]
        if with_index:
            params += [pytest.param(kind, i, id=f"go-{kind}[{i}]") for i in range(n)]
        else:
            params.append(pytest.param(kind, id=f"go-{kind}"))
    return params


# --- Go -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def go_bin() -> str:
    go = oracle.go_binary()
    if go is None:
        pytest.skip(SKIP_NO_GO)
    return go


def go_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("HOME", str(tmp))
    env["GOTOOLCHAIN"] = "local"  # never download a toolchain
    env["GOWORK"] = "off"
    env.pop("GOFLAGS", None)
    env.setdefault("GOPROXY", "off")  # standard library only: nothing to fetch
    env["CGO_ENABLED"] = "0"
    return env


@pytest.fixture(scope="session")
def profgen_bin(go_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/goprogs/profgen, built once per session."""
    out = tmp_path_factory.mktemp("bin") / "profgen"
    res = subprocess.run(
        [go_bin, "build", "-o", str(out), "./profgen"],
        cwd=GOPROGS,
        env=go_env(out.parent),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if res.returncode != 0:
        pytest.fail(f"go build of tests/goprogs/profgen failed:\n{res.stderr}")
    return out


def run_profgen(
    binary: Path, out: Path, *, seed: int = 1, cpu_seconds: float = 2, cpu_profiles: int = 2
) -> dict[str, Path]:
    """Run profgen into ``out``; return kind -> path (every kind in GO_PROFILES)."""
    res = subprocess.run(
        [
            str(binary),
            "-out",
            str(out),
            "-seed",
            str(seed),
            "-cpu-seconds",
            str(cpu_seconds),
            "-cpu-profiles",
            str(cpu_profiles),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if res.returncode != 0:
        pytest.fail(f"profgen failed ({res.returncode}):\n{res.stderr}")
    paths = {kind: out / name for kind, (name, _) in GO_PROFILES.items()}
    missing = [str(p) for p in paths.values() if not p.exists()]
    assert not missing, f"profgen did not write {missing}"
    return paths


@pytest.fixture(scope="session")
def go_profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """kind -> real profile written by profgen (cpu, cpu2, heap, allocs, goroutine,
    mutex, block, threadcreate), recorded in tests/testdata/go; copied to a
    temporary directory so that no test can change the recorded files."""
    out = tmp_path_factory.mktemp("goprofiles")
    paths = {}
    for kind, (name, _) in GO_PROFILES.items():
        paths[kind] = out / name
        shutil.copyfile(RECORDED_GO / name, paths[kind])
    return paths


# --- the corpus -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(SKIP_NO_CORPUS)
    return CORPUS


class Pprof:
    """`go tool pprof` answers, cached for the session and computed in parallel on demand."""

    def __init__(self, workers: int = max(2, min(8, os.cpu_count() or 2))):
        self._cache: dict[tuple, object] = {}
        self._lock = threading.Lock()
        self._workers = workers

    def _get(self, key: tuple, compute: Callable[[], object]):
        with self._lock:
            if key in self._cache:
                hit = self._cache[key]
                if isinstance(hit, Exception):
                    raise hit
                return hit
        try:
            value = compute()
        except oracle.OracleError as e:
            value = e
        with self._lock:
            self._cache[key] = value
        if isinstance(value, Exception):
            raise value
        return value

    def opens(self, path: Path) -> tuple[bool, str]:
        return self._get(("opens", str(path)), lambda: oracle.opens(path))  # type: ignore[return-value]

    def sample_types(self, path: Path) -> list[tuple[str, str]]:
        return self._get(("types", str(path)), lambda: oracle.sample_types(path))  # type: ignore[return-value]

    def raw(self, path: Path) -> oracle.CanonicalRaw:
        return self._get(("raw", str(path)), lambda: oracle.canonical_raw(oracle.raw(path)))  # type: ignore[return-value]

    def top(
        self,
        files: Path | list[Path],
        *,
        sample_index: int,
        lines: bool = False,
        cum: bool = False,
        focus: str | None = None,
        ignore: str | None = None,
        unit: str | None = None,
    ) -> oracle.TopReport:
        """pprof -top of ``files``; ``unit`` defaults to the first file's type at the index."""
        paths = [files] if isinstance(files, Path) else list(files)
        key = ("top", tuple(map(str, paths)), sample_index, lines, cum, focus, ignore, unit)

        def compute():
            u = unit if unit is not None else self.sample_types(paths[0])[sample_index][1]
            return oracle.top(
                paths,
                sample_index=sample_index,
                unit=u,
                lines=lines,
                cum=cum,
                focus=focus,
                ignore=ignore,
            )

        return self._get(key, compute)  # type: ignore[return-value]

    def prefetch(self, calls: Iterable[Callable[[], object]]) -> None:
        """Run the given cached calls in a thread pool (errors stay cached for their tests)."""

        def safe(call):
            try:
                call()
            except oracle.OracleError:
                pass

        with ThreadPoolExecutor(self._workers) as pool:
            list(pool.map(safe, calls))


@pytest.fixture(scope="session")
def pprof(go_bin: str) -> Pprof:
    """The session's cached `go tool pprof` oracle (skips without Go)."""
    try:
        oracle.pprof_command()
    except oracle.OracleError as e:
        pytest.skip(f"go tool pprof unavailable: {e}")
    return Pprof()


@pytest.fixture(scope="session")
def corpus_opened(corpus_dir: Path, pprof: Pprof) -> dict[Path, tuple[bool, str]]:
    """For every corpus file: whether `go tool pprof` opens it, and its error if not."""
    files = corpus_files()
    pprof.prefetch([lambda f=f: pprof.opens(f) for f in files])
    return {f: pprof.opens(f) for f in files}


def require_opened(pprof: Pprof, path: Path) -> None:
    """Skip a conformance test for a file pprof itself refuses (tested elsewhere)."""
    ok, err = pprof.opens(path)
    if not ok:
        reason = next((ln for ln in err.splitlines() if str(path) in ln), err)
        pytest.skip(f"go tool pprof refuses it: {reason.replace(str(path), path.name)[:300]}")


# --- comparing our answers with pprof's ---------------------------------------------


def our_top_keys(result) -> list[tuple[str, int, int, str]]:
    """(label, flat, cum, inline) of every row of a pyproflab TopResult, in order."""
    rows = result.rows
    cols = {name: rows.column(name).to_pylist() for name in ("label", "flat", "cum", "inline")}
    return [
        (lbl, int(f), int(c), inl or "")
        for lbl, f, c, inl in zip(
            cols["label"], cols["flat"], cols["cum"], cols["inline"], strict=True
        )
    ]


def describe_diff(ours: Counter, theirs: Counter, limit: int = 15) -> str:
    """A readable account of two row multisets' differences."""
    missing = theirs - ours
    extra = ours - theirs
    lines = [
        f"pprof has {sum(theirs.values())} rows, pyproflab {sum(ours.values())}; "
        f"{sum(missing.values())} only in pprof, {sum(extra.values())} only in pyproflab"
    ]
    for title, diff in (("only in pprof", missing), ("only in pyproflab", extra)):
        for key, n in sorted(diff.items(), key=lambda kv: -abs(kv[0][1]))[:limit]:
            lines.append(f"  {title}: {key}" + (f" x{n}" if n > 1 else ""))
    return "\n".join(lines)


def assert_same_rows(ours: Iterable[tuple], report: oracle.TopReport, what: str) -> None:
    """Our rows equal pprof's as multisets of (label, flat, cum, inline)."""
    mine, theirs = Counter(ours), report.multiset()
    assert mine == theirs, f"{what}: top differs from go tool pprof\n{describe_diff(mine, theirs)}"


# --- the pyproflab APIs under test, one import each ------------------------------------
# (Imported at call time, so collection works while parts are still being written.)


def api_read(path: Path):
    from pyproflab import read_profile

    return read_profile(path)


def api_top(profile, **options):
    from pyproflab.analyses.top import top

    return top(profile, **options)


def api_merge(profiles: list):
    from pyproflab.analyses.merge import merge

    return merge(profiles)


def api_write(profile, path: Path, *, gzip: bool = True) -> Path:
    from pyproflab.encode import write_profile

    write_profile(profile, path, gzip=gzip)
    return path


def api_store_merged(db: Path):
    """Every profile of the store at ``db``, merged (Store.merged_profile of an empty selection)."""
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    with Store.open(db, read_only=True) as store:
        return store.merged_profile(Selection())


def assert_compiles_without_warnings(source: Path) -> None:
    """A C extension's source compiles with -Wall -Wextra -Werror against this
    Python's headers (skipped where there is no C compiler or no Python.h)."""
    import sysconfig

    include = sysconfig.get_paths().get("include") or ""
    if shutil.which("cc") is None or not (Path(include) / "Python.h").exists():
        pytest.skip(f"no C compiler, or Python.h not found in {include!r}")
    cmd = ["cc", "-Wall", "-Wextra", "-Werror", "-O2", "-fsyntax-only", f"-I{include}"]
    proc = subprocess.run([*cmd, str(source)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
