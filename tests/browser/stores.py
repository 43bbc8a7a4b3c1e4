"""Stores the report, notebook and untrusted-names tests run on, built once per session.

- ``demo_store()``: the real demo job (``python tests/fleet_demo.py``) with a short
  load (13 s, one CPU window of 6 s): the notesd fleet, v1/v2 x two instances, every
  profile type, metric_samples and gc_cycles. About 12 s once the fleet
  binaries are cached (the first build fetches modules and takes longer). The
  window is 6 s so that two /metrics scrapes (every 2 s) fall well inside it: with
  4 s the first came just before the profile request and the third just before
  its end, and one late scrape left no GC rate to model GOGC on (seen once in CI).
- ``evil_store()``: a copy of the demo store whose CPU and allocs profiles are
  replaced by copies in which two hot functions carry hostile names (``EVIL_IMG``,
  ``EVIL_SCRIPT``) and whose metadata label ``team`` is ``EVIL_LABEL``, with the same
  service, version and instance, so every section of the report shows them.

Both are cached in-process (one build per pytest session, whichever test file
asks first) in a temporary folder removed at exit. Without Go they skip.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

EVIL_IMG = "<img src=x onerror=alert(1)>"
EVIL_SCRIPT = "main.filterChain</script><script>alert(2)</script>"
EVIL_LABEL = '"><svg onload=alert(3)>'
EVIL_STRINGS = (EVIL_IMG, EVIL_SCRIPT, EVIL_LABEL)


@functools.cache
def _workdir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="pyproflab-report-tests-"))
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d


@functools.cache
def _build_demo() -> tuple[Path | None, str]:
    if shutil.which("go") is None:
        return None, "Go is not installed: the demo fleet cannot run"
    out = _workdir() / "demo"
    out.mkdir()
    db = out / "demo.duckdb"
    res = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "fleet_demo.py"),
            "--db",
            str(db),
            "--workdir",
            str(out / "work"),
            "--load-seconds",
            "13",
            "--cpu-seconds",
            "6",
            "--windows",
            "1",
            "--quiet",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if res.returncode != 0 or not db.is_file():
        raise RuntimeError(f"the demo job failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return db, ""


def demo_store() -> Path:
    """The path of a short demo run's store (skips without Go)."""
    db, why = _build_demo()
    if db is None:
        pytest.skip(why)
    return db


def _hostile_names(lab) -> dict[str, str]:
    """Which functions get a hostile name: ``main.scoreNote`` (notesd's planted hot
    spot) and the allocating function ranked best by flat and by cum at once (the
    smallest worse-of-two rank), so both stay in every table the report or a test
    cuts short (by flat or by cum), however loaded the machine was, and every
    copied CPU or allocs profile shows at least one. The ranks hold in the hostile
    store because its copies replace the originals (beside them, a renamed function
    would keep half the weight of the others and could fall out of a table)."""

    def ranks(**options) -> dict[str, int]:
        names = lab.top(profile_type="cpu", **options).rows.column("name").to_pylist()
        return {n: i for i, n in enumerate(names)}

    by_flat, by_cum = ranks(), ranks(cum_sort=True)
    allocating = set(lab.top(profile_type="allocs").rows.column("name").to_pylist())
    candidates = allocating - {"main.scoreNote", "runtime.asyncPreempt"}
    second = min(
        (n for n in candidates if n in by_flat),
        key=lambda n: (max(by_flat[n], by_cum[n]), n),
    )
    return {"main.scoreNote": EVIL_IMG, second: EVIL_SCRIPT}


@functools.cache
def _build_evil() -> Path:
    import pyarrow as pa
    import pyarrow.compute as pc

    import pyproflab
    from pyproflab.encode import write_profile

    src = demo_store()
    db = _workdir() / "evil" / "evil.duckdb"
    db.parent.mkdir()
    shutil.copyfile(src, db)
    files = db.parent / "profiles"
    files.mkdir()
    with pyproflab.open(db) as lab:
        renames = _hostile_names(lab)
        rows = lab.profiles(profile_type=["cpu", "allocs"]).to_pylist()
        for r in rows:
            p = lab.store.profile(r["profile_id"])
            fn = p.functions
            names = fn.column("name").to_pylist()
            new_names = [renames.get(n, n) for n in names]
            files_col = [
                f"/src/{renames[n]}.go" if n in renames else f
                for n, f in zip(names, fn.column("filename").to_pylist(), strict=True)
            ]
            fn = fn.set_column(
                fn.schema.get_field_index("name"), "name", pa.array(new_names, pa.string())
            )
            fn = fn.set_column(
                fn.schema.get_field_index("system_name"),
                "system_name",
                pa.array(new_names, pa.string()),
            )
            fn = fn.set_column(
                fn.schema.get_field_index("filename"), "filename", pa.array(files_col, pa.string())
            )
            assert pc.any(pc.is_in(fn.column("name"), pa.array(list(renames.values())))).as_py()
            p.functions = fn
            path = write_profile(p, files / f"{r['profile_id']}-{r['profile_type']}.pb.gz")
            rep = lab.ingest(
                path,
                service=r["service"],
                version=r["version"],
                instance=r["instance"],
                labels={"team": EVIL_LABEL},
            )
            assert rep is not None
        originals = [r["profile_id"] for r in rows]
        with lab.store.transaction():
            for table in ("samples", "profiles"):
                lab.store.execute(
                    f"DELETE FROM {table} WHERE list_contains(?, profile_id)", [originals]
                )
    return db


def evil_store() -> Path:
    """The demo store plus hostile-named copies of its CPU and allocs profiles."""
    return _build_evil()
