"""Stores the report, notebook and untrusted-names tests run on, built once per session.

- ``demo_store()``: a short demo run's store, recorded once (tests/testdata/demo)
  and loaded into a fresh store with every time moved by one offset so that the
  run ends a minute ago (the README's ``--since 72h`` and the notebooks' windows
  select it on any day). A live run under load can catch no GC cycle in its one
  window ("cannot model GOGC"), so the tests take a recorded one that did:
  ``python tests/support/browser/stores.py --record`` reruns the demo and refuses to
  save a run without GC cycle counts for every instance or without
  ``main.scoreNote`` in its CPU profiles.
  The run: the real demo job (``python tests/support/fleet_demo.py``) with a short load
  (13 s, one CPU window of 6 s): the notesd fleet, v1/v2 x two instances, every
  profile type, metric_samples and gc_cycles. The window is 6 s so that two
  /metrics scrapes (every 2 s) fall well inside it.
- ``evil_store()``: a copy of the demo store whose CPU and allocs profiles are
  replaced by copies in which two hot functions carry hostile names (``EVIL_IMG``,
  ``EVIL_SCRIPT``) and whose metadata label ``team`` is ``EVIL_LABEL``, with the same
  service, version and instance, so every section of the report shows them.

Both are cached in-process (one build per pytest session, whichever test file
asks first) in a temporary folder removed at exit.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
RECORDED = REPO / "tests" / "testdata" / "demo"  # profiles/ (a Parquet dataset), metrics/
METRIC_TABLES = ("metric_samples", "gc_cycles")

EVIL_IMG = "<img src=x onerror=alert(1)>"
EVIL_SCRIPT = "main.filterChain</script><script>alert(2)</script>"
EVIL_LABEL = '"><svg onload=alert(3)>'
EVIL_STRINGS = (EVIL_IMG, EVIL_SCRIPT, EVIL_LABEL)


@functools.cache
def _workdir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="pyproflab-report-tests-"))
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d


def run_demo(out: Path) -> Path:
    """A live short demo run into ``out``/demo.duckdb (needs Go; about 12 s once the
    fleet binaries are cached)."""
    out.mkdir(parents=True, exist_ok=True)
    db = out / "demo.duckdb"
    res = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "support" / "fleet_demo.py"),
            "--db",
            str(db),
            "--workdir",
            str(out / "work"),
            "--max-seconds",
            "13",
            "--cpu-seconds",
            "6",
            "--windows",
            "1",
            "--min-samples",
            "0",
            "--quiet",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if res.returncode != 0 or not db.is_file():
        raise RuntimeError(f"the demo job failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return db


def fit_to_record(db: Path) -> list[str]:
    """Why a demo run's store would not serve the tests ([] when it would): every
    instance has GC cycle counts (so GOGC can be modelled) and the planted hot
    spot is in the CPU profiles."""
    import pyproflab
    from pyproflab.errors import ProflabError

    why = []
    with pyproflab.open(db, read_only=True) as lab:
        gc = lab.gc().instances.to_pylist()
        no_rate = sorted(r["instance"] for r in gc if not r["gc_cycles_per_min"])
        if no_rate or len(gc) < 4:
            why.append(f"instances without a GC rate: {no_rate} of {len(gc)}")
        try:
            lab.gogc(budget="1.5x")
        except ProflabError as e:
            why.append(f"gogc: {e}")
        names = lab.top(profile_type="cpu").rows.column("name").to_pylist()
        if "main.scoreNote" not in names:
            why.append("main.scoreNote is not in the CPU profiles")
    return why


def record(dest: Path = RECORDED, tries: int = 3) -> None:
    """Run the demo until a run is fit (``fit_to_record``) and save it to ``dest``:
    its profiles as a Parquet dataset (``export_parquet``), its GC metric tables
    as Parquet files."""
    import duckdb

    import pyproflab
    from pyproflab.store.parquet import export_parquet

    for attempt in range(1, tries + 1):
        work = Path(tempfile.mkdtemp(prefix="pyproflab-demo-record-"))
        try:
            db = run_demo(work)
            why = fit_to_record(db)
            if why:
                print(f"run {attempt}: not fit ({'; '.join(why)})", file=sys.stderr)
                continue
            shutil.rmtree(dest, ignore_errors=True)
            with pyproflab.open(db, read_only=True) as lab:
                print(export_parquet(lab.store, dest / "profiles"))
            (dest / "metrics").mkdir()
            with duckdb.connect(str(db), read_only=True) as con:
                for table in METRIC_TABLES:
                    out = dest / "metrics" / f"{table}.parquet"
                    con.execute(f"COPY (SELECT * FROM {table} ORDER BY ALL) TO '{out}'")
            print(f"recorded run {attempt} in {dest}")
            return
        finally:
            shutil.rmtree(work, ignore_errors=True)
    raise SystemExit(f"no fit run in {tries} tries")


def load_recorded(db: Path, src: Path = RECORDED) -> None:
    """A new store at ``db`` holding the recorded run, every time moved by one
    offset (whole seconds) so that its last window ended a minute ago."""
    import duckdb
    import pyarrow.parquet as pq

    from pyproflab.store import Store
    from pyproflab.store.metrics import ingest_gc_rows, ingest_metric_rows
    from pyproflab.store.parquet import import_parquet

    with Store.open(db) as store:
        import_parquet(store, src / "profiles")
        ingest_metric_rows(store, pq.read_table(src / "metrics" / "metric_samples.parquet"))
        ingest_gc_rows(store, pq.read_table(src / "metrics" / "gc_cycles.parquet"))
    with duckdb.connect(str(db)) as con:
        # Epoch seconds, not a timestamp: DuckDB needs pytz to hand out a TIMESTAMPTZ.
        (last,) = con.execute(
            "SELECT epoch(max(coalesce(window_end, time)))::BIGINT FROM profiles"
        ).fetchone()
        shift = int(time.time()) - last - 60
        con.execute(
            "UPDATE profiles SET time = time + to_seconds(?), "
            "time_nanos = CASE WHEN time_nanos = 0 THEN 0 "
            "ELSE time_nanos + ?::BIGINT * 1000000000 END, "
            "window_start = window_start + to_seconds(?), "
            "window_end = window_end + to_seconds(?), ingested_at = ingested_at + to_seconds(?)",
            [shift] * 5,
        )
        for table in METRIC_TABLES:
            con.execute(f"UPDATE {table} SET time = time + to_seconds(?)", [shift])


@functools.cache
def _build_demo() -> Path:
    out = _workdir() / "demo"
    out.mkdir(exist_ok=True)
    db = out / "demo.duckdb"
    db.unlink(missing_ok=True)  # a build that failed before
    load_recorded(db)
    return db


def demo_store() -> Path:
    """The path of the recorded short demo run's store, its times moved to now."""
    return _build_demo()


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


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Record the demo run the report tests use.")
    ap.add_argument(
        "--record", action="store_true", help=f"rerun the demo and save it to {RECORDED}"
    )
    args = ap.parse_args()
    if args.record:
        record()
