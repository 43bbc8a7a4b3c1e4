"""The store as a Parquet dataset, and back.

Layout written by ``export_parquet(store, dir)``::

    dir/_pyproflab_dataset.json              marker: format, versions, row counts
    dir/profiles/service=S/date=D/*.parquet  hive style; every profiles column,
                                             plus ``date``
    dir/samples/service=S/date=D/*.parquet   samples columns plus ``row_order``
                                             (file order within a profile)
    dir/{stacks,locations,functions,mappings,label_sets}.parquet   whole
    dir/{metric_samples,gc_cycles,job_runs,...}.parquet  whole: every other
                                             store table with rows

Rules: ``date`` is the UTC day the profile was taken (``select.TAKEN_AT``); a
profile without a service goes under ``service=__HIVE_DEFAULT_PARTITION__``
and one whose name passes 80 bytes under ``service=sha256-<hex>`` (the files
keep the name in ``service_name``);
the export is written in a hidden sibling folder (holding ``PARTIAL``, with
the writer's pid, until it is complete) and renamed into place, so ``dir`` is
whole or absent, and an interrupted export is never read; the next export of
``dir`` removes such folders whose writer is gone. The marker lists every file with its size
and sha256, and the rows of every table; import refuses, in one line, a
dataset with a file missing, added or altered, or a table whose files hold
other than its count of rows. ``import_parquet`` adds, in one transaction,
the dataset's profiles that the store does not have (by content_hash; new
profile ids) and the rows of every other table whose key
(``tables.Table.row_key``: GC samples by service, instance, metric, labels
and time, gctrace cycles by service, instance, log, run and cycle; null equal
to null) the store does not have; so
it is idempotent, and export then import into an empty store gives every
table its rows back but ``job_runs``: a job's runs belong to the store that
ran them (``parquet_tables.NOT_IMPORTED``). Datasets of format 2 (profiles
only) are read too.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from pyproflab.errors import StoreError
from pyproflab.keying import ids
from pyproflab.keying.paths import DATASET_MARKER, PARTIAL
from pyproflab.newfiles import create_temp_dir
from pyproflab.store import tables
from pyproflab.store.connection import SCHEMA_VERSION, Store
from pyproflab.store.ingest_report import IngestReport
from pyproflab.store.parquet_tables import READ_PARQUET, import_tables, verify_counts
from pyproflab.store.queries import column_names, refuse_collisions, row_counts
from pyproflab.store.select import TAKEN_AT

FORMAT = "pyproflab-parquet"
# 2: content ids of schema version 2 (blake2b locations and stacks).
# 3: every store table (GC metrics, job and source state), counted in the marker.
FORMAT_VERSION = 3
READS_VERSIONS = (2, 3)
DEDUP = (
    ("stacks", "stack_id"),
    ("locations", "location_id"),
    ("functions", "function_id"),
    ("mappings", "mapping_id"),
    ("label_sets", "label_set_id"),
)
PROFILE_TABLES = ("profiles", "samples", *(t for t, _ in DEDUP))
# The schema version is the marker's; every other store table is exported whole.
NOT_EXPORTED = ("store_meta",)


def _literal(path: Path) -> str:
    """A SQL string literal for a path (COPY ... TO takes no bound parameters)."""
    return "'" + str(path).replace("'", "''") + "'"


@dataclass
class ExportSummary:
    path: str
    counts: dict[str, int]

    def __str__(self) -> str:
        more = "".join(
            f", {n} {t.replace('_', ' ')}"
            for t, n in self.counts.items()
            if t not in PROFILE_TABLES and n
        )
        return (
            f"exported {self.counts['profiles']} profiles, {self.counts['samples']} "
            f"samples{more} to {self.path}"
        )


def export_parquet(store: Store, directory: str | os.PathLike) -> ExportSummary:
    """Write every store table under ``directory`` (new, or empty) as Parquet.

    Written into a hidden sibling folder first and renamed into place when
    complete, so ``directory`` is either absent or a whole dataset; a failed
    export removes its folder and raises one line.
    """
    out = Path(directory)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise StoreError(f"{out}: exists and is not an empty folder")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_exports(out)
        tmp = create_temp_dir(out.parent, f".{out.name[:100]}.", PARTIAL)
    except OSError as e:
        raise StoreError(f"{out}: cannot create ({e.strerror or e})") from None
    try:
        (tmp / PARTIAL).write_text(
            f"an export in progress or interrupted\npid {os.getpid()}\n", encoding="utf-8"
        )
        counts = _write_tables(store, tmp)
        finish_dataset(tmp, out, counts, _manifest(tmp))
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError | duckdb.Error | StoreError):
            raise StoreError(f"{out}: export failed, nothing written ({_reason(e)})") from None
        raise
    return ExportSummary(str(out), counts)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def remove_stale_exports(out: Path) -> list[Path]:
    """Remove the hidden folders killed exports of ``out`` left beside it (named
    ``.<name>.*`` + ``PARTIAL``, holding ``PARTIAL``), unless the process that
    wrote one still runs; returns those removed."""
    prefix = f".{out.name[:100]}."
    removed = []
    for p in out.parent.iterdir():
        marker = p / PARTIAL
        if not (p.name.startswith(prefix) and p.name.endswith(PARTIAL) and marker.is_file()):
            continue
        try:
            words = marker.read_text(encoding="utf-8").split()
        except (OSError, UnicodeDecodeError):
            continue
        at = words.index("pid") + 1 if "pid" in words[:-1] else None
        pid = int(words[at]) if at is not None and words[at].isdigit() else None
        if pid is not None and pid != os.getpid() and _alive(pid):
            continue  # an export still writing
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


# The folder name of a service: the name itself, or for a long one (over 80
# bytes, which percent-encoding can triple past a file name's 255) its sha256;
# the files keep the real name in service_name.
SERVICE_DIR = (
    "CASE WHEN strlen(p.service) <= 80 THEN p.service ELSE 'sha256-' || sha256(p.service) END"
)


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__


def _write_tables(store: Store, out: Path) -> dict[str, int]:
    counts = store.counts()
    part = "(FORMAT parquet, PARTITION_BY (service, date), WRITE_PARTITION_COLUMNS {})"
    date = f"strftime({TAKEN_AT}, '%Y-%m-%d')"
    if counts["profiles"]:
        store.execute(
            f"COPY (SELECT p.* EXCLUDE (service), {SERVICE_DIR} AS service, "
            f"p.service AS service_name, {date} AS date FROM profiles p ORDER BY p.profile_id) "
            f"TO {_literal(out / 'profiles')} {part.format('true')}"
        )
    if counts["samples"]:
        store.execute(
            f"COPY (SELECT s.*, s.rowid AS row_order, {SERVICE_DIR} AS service, {date} AS date "
            "FROM samples s JOIN profiles p ON p.profile_id = s.profile_id ORDER BY s.rowid) "
            f"TO {_literal(out / 'samples')} {part.format('false')}"
        )
    for table, _ in DEDUP:
        store.execute(f"COPY {table} TO {_literal(out / (table + '.parquet'))} (FORMAT parquet)")
    for table, n in row_counts(store).items():
        if table in PROFILE_TABLES or table in NOT_EXPORTED or not n:
            continue
        cols = tables.select_list(table, column_names(store, table))
        store.execute(
            f"COPY (SELECT {cols} FROM {table} ORDER BY rowid) "
            f"TO {_literal(out / (table + '.parquet'))} (FORMAT parquet)"
        )
        counts[table] = n
    return counts


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _manifest(d: Path) -> dict[str, dict[str, int | str]]:
    """Every Parquet file under ``d``: its size and sha256, by path relative to ``d``."""
    return {
        p.relative_to(d).as_posix(): {"bytes": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(d.rglob("*.parquet"))
    }


def verify(d: Path, marker: dict) -> None:
    """Refuse a dataset whose files are not exactly those its marker lists
    (missing, added, resized or altered) in one line."""
    files = marker.get("files")
    if not isinstance(files, dict):
        raise StoreError(f"{d}: the dataset marker lists no files (a partial or foreign dataset)")
    try:
        have = {p.relative_to(d).as_posix(): p for p in d.rglob("*.parquet")}
    except OSError as e:
        raise StoreError(f"{d}: cannot list the dataset ({e.strerror or e})") from None
    for name in sorted(set(files) - set(have)):
        raise StoreError(f"{d}: {name} is missing: the dataset is partial; refused")
    for name in sorted(set(have) - set(files)):
        raise StoreError(f"{d}: {name} is not in the dataset marker; refused")
    for name in sorted(files):
        want = files[name]
        path = have[name]
        try:
            ok = (
                isinstance(want, dict)
                and path.stat().st_size == want.get("bytes")
                and _sha256(path) == want.get("sha256")
            )
        except OSError as e:
            raise StoreError(f"{d}: {name} cannot be read ({e.strerror or e})") from None
        if not ok:
            raise StoreError(f"{d}: {name} differs from the export (size or sha256); refused")


def is_dataset(directory: str | os.PathLike) -> bool:
    return (Path(directory) / DATASET_MARKER).is_file()


def _files(d: Path, sub: str) -> list[str]:
    return sorted(str(p) for p in (d / sub).rglob("*.parquet"))


def _checked_rows(store: Store, d: Path, table: str, id_col: str) -> pa.Table:
    """A dedup table of the dataset, refused unless every id is the content id of
    its row (recomputed) and none names other content in the store."""
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(d / f"{table}.parquet")
        computed = ids.store_row_ids(table, rows)
    except (OSError, KeyError, ValueError, pa.ArrowException) as e:
        raise StoreError(f"{d}: {table}.parquet cannot be read ({e})") from None
    if not np.array_equal(computed, ids.u64(rows.column(id_col))):
        raise StoreError(f"{d}: {table}.parquet: ids do not match their rows' content; refused")
    if rows.num_rows:
        refuse_collisions(store, table, id_col, [rows])
    return rows


def finish_dataset(tmp: Path, out: Path, counts: dict, files: dict) -> None:
    """Write the marker (format, counts, every file's bytes and sha256) into the
    hidden folder ``tmp`` and rename it to ``out`` (absent, or an empty folder):
    a dataset is whole once it has its marker and its name."""
    marker = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "exported_at": datetime.now(UTC).isoformat(),
        "counts": counts,
        "files": files,
    }
    (tmp / DATASET_MARKER).write_text(
        json.dumps(marker, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    (tmp / PARTIAL).unlink()
    if out.exists():
        out.rmdir()  # empty, checked before writing
    os.rename(tmp, out)


def read_marker(d: Path) -> dict:
    """The marker of dataset folder ``d``; a folder without one, or of another
    format or version, is refused in one line."""
    try:
        marker = json.loads((d / DATASET_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise StoreError(f"{d}: not a pyproflab Parquet dataset ({e})") from None
    if (
        not isinstance(marker, dict)
        or marker.get("format") != FORMAT
        or marker.get("format_version") not in READS_VERSIONS
    ):
        got = marker if not isinstance(marker, dict) else marker.get("format_version")
        raise StoreError(
            f"{d}: unsupported dataset format (version {got!r}; this pyproflab reads "
            f"{FORMAT} version {FORMAT_VERSION})"
        )
    return marker


def check_dataset(directory: str | os.PathLike) -> tuple[Path, list[str]]:
    """The dataset's folder and its tables beyond the profile tables, once its
    marker, files and row counts are checked (``StoreError``, one line, if not)."""
    d = Path(directory)
    marker = read_marker(d)
    verify(d, marker)
    return d, verify_counts(d, marker, PROFILE_TABLES, NOT_EXPORTED)


def import_parquet(
    store: Store, directory: str | os.PathLike, checked: tuple[Path, list[str]] | None = None
) -> IngestReport:
    """Add a dataset's profiles that the store lacks (by content_hash) and the
    rows of its other tables that the store lacks (by key), in one
    transaction. Returns new/present profile counts like ``ingest_paths``,
    and the GC metric rows and traces added. ``checked``: ``check_dataset``'s
    answer, when the caller checked it before storing anything else."""
    d, whole = checked or check_dataset(directory)
    report = IngestReport()
    with store.transaction():
        _import_profiles(store, d, report)
        metric_rows, traces = import_tables(store, d, whole, _files(d, "profiles"))
        report.metric_rows += metric_rows
        report.traces += traces
    return report


def _import_profiles(store: Store, d: Path, report: IngestReport) -> None:
    """The dataset's profiles the store lacks, with their samples and rows of
    the dedup tables, inside the caller's transaction."""
    profile_files = _files(d, "profiles")
    if not profile_files:
        return
    sample_files = _files(d, "samples")
    rp = READ_PARQUET
    # Which of the dataset's profiles are new, and their ids here.
    idmap = store.sql(
        f"SELECT n.profile_id AS old_id, n.content_hash FROM {rp} n "
        "ANTI JOIN profiles p USING (content_hash) ORDER BY n.profile_id",
        [profile_files],
    )
    total = store.sql(f"SELECT count(*) FROM {rp}", [profile_files]).column(0)[0].as_py()
    report.present = int(total) - idmap.num_rows
    if idmap.num_rows == 0:
        return
    base = int(store.sql("SELECT coalesce(max(profile_id), 0) FROM profiles").column(0)[0].as_py())
    new_ids = list(range(base + 1, base + 1 + idmap.num_rows))
    idmap = idmap.append_column("new_id", pa.array(new_ids, pa.int64()))
    report.new = len(new_ids)
    report.profile_ids = new_ids
    with store.registered(_pyproflab_idmap=idmap):
        for table, id_col in DEDUP:
            path = d / f"{table}.parquet"
            if path.is_file():
                rows = _checked_rows(store, d, table, id_col)
                with store.registered(_pyproflab_import=rows):
                    store.execute(
                        f"INSERT INTO {table} BY NAME SELECT n.* FROM "
                        f"_pyproflab_import n ANTI JOIN {table} t USING ({id_col})"
                    )
        if sample_files:
            store.execute(
                'INSERT INTO samples (profile_id, stack_id, label_set_id, "values") '
                'SELECT m.new_id, s.stack_id, s.label_set_id, s."values" '
                f"FROM {rp} s JOIN _pyproflab_idmap m ON m.old_id = s.profile_id "
                "ORDER BY m.new_id, s.row_order",
                [sample_files],
            )
        store.execute(
            "INSERT INTO profiles BY NAME "
            "SELECT n.* EXCLUDE (profile_id, date, service, service_name), "
            "n.service_name AS service, m.new_id AS profile_id "
            f"FROM {rp} n JOIN _pyproflab_idmap m ON m.old_id = n.profile_id "
            "ORDER BY m.new_id",
            [profile_files],
        )
