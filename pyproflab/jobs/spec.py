"""A job, declared in TOML: where profiles come from, what to compute, what to keep.

Rules:

- Relative paths in the file are relative to the job file's folder.
- Unknown tables and keys are refused (a typo must not silently disable a
  threshold), and every value is checked for its type and range
  (``jobs.keys``) before anything runs; every problem is one ``UsageError``
  naming the file, the section and the key.
- ``spec_hash`` is the sha256 of the normalised spec: a changed job is a
  different job for exactly-once purposes (its analyses run again).

Example (see ``examples/job.toml``)::

    [job]
    name = "notesd-hourly"
    store = "fleet.duckdb"
    output = "out"

    [[source]]
    kind = "drop"            # drop | collect | parquet
    path = "incoming"

    [selection]
    service = "notesd"

    [regressions]
    threshold_pct = 10

    [gogc]
    budget = "2GiB"

    [pgo]
    top = 5

    [retention]
    max_age_days = 30
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from pyproflab.analyses.options import PgoOptions, RegressionsOptions
from pyproflab.errors import UsageError
from pyproflab.jobs import keys

SOURCE_KINDS = keys.SOURCE["kind"].choices


@dataclass
class SourceSpec:
    """One source of profiles. ``drop``: new files in a folder (``path``, optional
    ``path_template``, metadata defaults, ``min_age_seconds`` to leave files still
    being written alone); ``collect``: live targets (``targets`` TOML, ``seconds``,
    ``types``, ``archive``); ``parquet``: an exported dataset folder (``path``)."""

    kind: str
    path: str | None = None
    path_template: str | None = None
    service: str | None = None
    version: str | None = None
    instance: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    min_age_seconds: float = 0.0
    batch_size: int = 64
    targets: str | None = None
    seconds: int = 10
    types: list[str] | None = None
    archive: str | None = None
    metrics_interval: float = 2.0
    timeout: float = 10.0
    retries: int = 2


@dataclass
class RegressionsSpec:
    """Newest version vs the previous one, per service of the selection.

    ``order``: ``ingest`` (a version's first profile_id) or ``time`` (its first
    profile's time). A finding is a node whose change of ``metric`` is
    significant and above ``threshold_pct`` percent: with ``evidence`` (the
    default) a significant increase, of flat or cum, that no other finding
    explains and that is not half of a cost shift; with ``flat`` or ``cum``
    any significant change of that metric. ``over_time``: also follow each
    service's profiles of the last ``over_time_since`` (e.g. "7d") through
    their collection windows; an increase above ``threshold_pct`` that
    persisted is a finding too.

    Every other key of the table is an option of ``regressions``
    (``analyses.options.RegressionsOptions``: fdr, resamples, min_share,
    granularity, measure, test, per, ...), with its default and its check;
    ``metric`` is its ``rank_by``."""

    enabled: bool = True
    profile_type: str = "cpu"
    order: str = "ingest"
    metric: str = RegressionsOptions.rank_by
    threshold_pct: float = 10.0
    over_time: bool = False
    over_time_since: str = "7d"
    options: RegressionsOptions = field(default_factory=RegressionsOptions)

    @classmethod
    def from_table(cls, table: dict[str, Any], where: str) -> RegressionsSpec:
        """The spec of a [regressions] table, checked (``keys``): the job's keys, the
        rest the analysis's options."""
        keys.check_table(table, keys.rules("regressions"), where)
        own = {f.name for f in fields(cls)} - {"options"}
        spec = cls(**{k: v for k, v in table.items() if k in own})
        analysis = {k: v for k, v in table.items() if k not in own}
        spec.options = RegressionsOptions.from_mapping(analysis, where)
        return spec


@dataclass
class GogcSpec:
    """The GOGC / GOMEMLIMIT recommendation over the selection's GC data."""

    enabled: bool = True
    budget: str | None = None
    headroom: float | None = None  # None: GogcOptions' default
    candidates: list[Any] | None = None


@dataclass
class PgoSpec:
    """``default.pgo`` from the newest version's CPU profiles (``version = "all"``
    for every version), the top ``top`` by CPU cores."""

    enabled: bool = True
    top: int = PgoOptions.top
    version: str = "newest"
    verify: bool = False  # go tool preprofile on the written file (needs Go)


@dataclass
class RetentionSpec:
    """Drop profiles (and GC metrics, ``metrics = true``) taken more than
    ``max_age_days`` ago, then reclaim the space; keep the newest ``keep_runs``
    runs' timestamped outputs (0 keeps all)."""

    max_age_days: float | None = None
    metrics: bool = True
    keep_runs: int = 10


@dataclass
class JobSpec:
    """A whole job (see the module docstring)."""

    name: str
    store: str
    output: str
    sources: list[SourceSpec] = field(default_factory=list)
    selection: dict[str, Any] = field(default_factory=dict)
    regressions: RegressionsSpec | None = None
    gogc: GogcSpec | None = None
    pgo: PgoSpec | None = None
    retention: RetentionSpec = field(default_factory=RetentionSpec)
    wait: float = 0.0
    formats: list[str] = field(default_factory=lambda: ["json", "text"])
    source_file: str | None = None

    @property
    def spec_hash(self) -> str:
        d = asdict(self)
        d.pop("source_file", None)
        d.pop("wait", None)  # how long to wait for the store is not what is computed
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()


def _take(table: dict[str, Any], cls: type, section: str, where: str) -> Any:
    """A dataclass from a TOML table checked against its section's rules (``keys``)."""
    keys.check_table(table, keys.rules(section), where)
    return cls(**table)


def _section(data: dict[str, Any], key: str, cls: type, where: str) -> Any:
    raw = data.get(key)
    if raw is None or raw is False:
        return None
    if raw is True:
        raw = {}
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: [{key}] must be a table (or true/false)")
    take = getattr(cls, "from_table", None)
    spec = take(raw, f"{where} [{key}]") if take else _take(raw, cls, key, f"{where} [{key}]")
    return spec if getattr(spec, "enabled", True) else None


def _resolve(base: Path, value: str | None) -> str | None:
    if value is None:
        return None
    p = Path(os.path.expandvars(os.path.expanduser(value)))
    return str(p if p.is_absolute() else base / p)


def _source(raw: Any, where: str, base: Path) -> SourceSpec:
    """One [[source]] table, checked (``keys.SOURCE``): drop and parquet need a
    path, collect needs targets. Its paths resolved against ``base``."""
    s = _take(raw, SourceSpec, "source", where)
    if s.kind in ("drop", "parquet") and not s.path:
        raise UsageError(f"{where}: a {s.kind} source needs path")
    if s.kind == "collect" and not s.targets:
        raise UsageError(f"{where}: a collect source needs targets (a targets TOML)")
    s.path, s.targets, s.archive = (
        _resolve(base, s.path),
        _resolve(base, s.targets),
        _resolve(base, s.archive),
    )
    return s


def job_from_dict(
    data: dict[str, Any], *, base: str | os.PathLike = ".", source: str = "<job>"
) -> JobSpec:
    """A checked JobSpec from parsed TOML (paths resolved against ``base``); every
    key is checked against ``keys`` before anything runs."""
    base = Path(base)
    known = {"job", "source", "selection", "regressions", "gogc", "pgo", "retention"}
    extra = sorted(set(data) - known)
    if extra:
        names = ", ".join(sorted(known))
        raise UsageError(f"{source}: unknown table [{extra[0]}] (known: {names})")
    job = data.get("job")
    if not isinstance(job, dict):
        raise UsageError(f"{source}: a [job] table with name, store and output is required")
    keys.check_table(job, keys.JOB, f"{source} [job]")
    formats = job.get("formats", ["json", "text"])
    if "json" not in formats:
        raise UsageError(f"{source} [job]: formats must list json (and optionally text, html)")
    raw_sources = data.get("source", [])
    if isinstance(raw_sources, dict):
        raw_sources = [raw_sources]
    if not isinstance(raw_sources, list):
        raise UsageError(f"{source}: [[source]] must be tables")
    sources = [
        _source(raw, f"{source} [[source]] #{i + 1}", base) for i, raw in enumerate(raw_sources)
    ]
    selection = keys.check_table(data.get("selection", {}), keys.SELECTION, f"{source} [selection]")
    reg = _section(data, "regressions", RegressionsSpec, source)
    retention = _section(data, "retention", RetentionSpec, source) or RetentionSpec()
    return JobSpec(
        name=job["name"],
        store=_resolve(base, job["store"]) or "",
        output=_resolve(base, job["output"]) or "",
        sources=sources,
        selection=selection,
        regressions=reg,
        gogc=_section(data, "gogc", GogcSpec, source),
        pgo=_section(data, "pgo", PgoSpec, source),
        retention=retention,
        wait=float(job.get("wait", 0)),
        formats=list(formats),
        source_file=source,
    )


def load_job(path: str | os.PathLike) -> JobSpec:
    """Read and check a job file (UsageError on any problem)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"{p}: cannot read the job file: {e.strerror or e}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{p}: not valid TOML: {e}") from None
    return job_from_dict(data, base=p.resolve().parent, source=str(p))
