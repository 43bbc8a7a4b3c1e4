"""Go's own pprof as a test oracle: run `go tool pprof` and parse what it prints.

Everything here shells out to the pprof that ships with the installed Go
(resolved once with `go tool -n pprof`, so each call costs milliseconds, not
a `go` command start-up) and always passes ``-symbolize=none`` so it never
looks for binaries or the network.

- ``top(files, ...)``: ``-top`` with every node (``-nodefraction=0
  -nodecount=1000000``) and values printed as exact integers in the sample
  type's own unit (``-unit=<unit>``), parsed into ``TopRow``s.
- ``raw(file)`` / ``canonical_raw(text)``: ``-raw`` and a form of it that does
  not depend on location, function or mapping ids.
- ``merge_proto(files, out)``: ``-proto A B …``, pprof's own merge.
- ``diff_top(file, base=…)``: ``-top -diff_base`` / ``-base`` for later work.

Nothing here imports pyproflab: the oracle must not share code with what it checks.
"""

from __future__ import annotations

import functools
import gzip
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_TIMEOUT = 180  # seconds per pprof run; large.cpu at lines granularity takes ~2 s


class OracleError(RuntimeError):
    """`go tool pprof` failed or printed something this module cannot parse."""


# --- running pprof -------------------------------------------------------------


def go_binary() -> str | None:
    """The `go` command on PATH (or in GOROOT/bin), or None."""
    found = shutil.which("go")
    if found:
        return found
    goroot = os.environ.get("GOROOT")
    if goroot and os.access(os.path.join(goroot, "bin", "go"), os.X_OK):
        return os.path.join(goroot, "bin", "go")
    return None


@functools.cache
def _pprof_tmpdir() -> str:
    return tempfile.mkdtemp(prefix="pprof-oracle-")


def pprof_env() -> dict[str, str]:
    """The environment for pprof: the caller's (HOME, GOPATH, GOCACHE kept) plus a
    private PPROF_TMPDIR, no binary search path, and no toolchain downloads."""
    env = dict(os.environ)
    env.setdefault("HOME", tempfile.gettempdir())
    env["PPROF_TMPDIR"] = _pprof_tmpdir()
    env["PPROF_BINARY_PATH"] = os.devnull  # nothing to symbolize with, on purpose
    env["GOTOOLCHAIN"] = "local"
    env.pop("GOFLAGS", None)
    return env


@functools.cache
def pprof_command() -> tuple[str, ...]:
    """argv prefix that runs pprof: the cached tool binary if `go tool -n` names
    one, else `go tool pprof`. Raises OracleError when Go is missing."""
    go = go_binary()
    if go is None:
        raise OracleError("the `go` command is not on PATH")
    try:
        out = subprocess.run(
            [go, "tool", "-n", "pprof"],
            capture_output=True,
            text=True,
            timeout=300,
            env=pprof_env(),
            cwd=tempfile.gettempdir(),
        )
    except subprocess.TimeoutExpired as e:
        raise OracleError("`go tool -n pprof` timed out") from e
    path = out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else ""
    if path and os.access(path, os.X_OK):
        return (path,)
    return (go, "tool", "pprof")


def run_pprof(args: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT) -> str:
    """Run pprof with ``-symbolize=none`` and ``args``; return stdout or raise OracleError."""
    return run_pprof_output(args, timeout=timeout).stdout


def run_pprof_output(
    args: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT
) -> subprocess.CompletedProcess:
    """``run_pprof``, returning the finished process (stdout and stderr, as text)."""
    argv = [*pprof_command(), "-symbolize=none", *map(str, args)]
    try:
        res = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=pprof_env(),
            cwd=_pprof_tmpdir(),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as e:
        raise OracleError(f"pprof timed out after {timeout}s: {' '.join(argv[1:])}") from e
    if res.returncode != 0:
        raise OracleError(f"pprof failed ({res.returncode}): {res.stderr.strip()[-2000:]}")
    return res


def opens(path: str | os.PathLike) -> tuple[bool, str]:
    """Whether pprof reads ``path``, and its error message when it does not."""
    try:
        run_pprof(["-raw", path], timeout=120)
    except OracleError as e:
        return False, str(e)
    return True, ""


# --- -top ------------------------------------------------------------------------


@dataclass(frozen=True)
class TopRow:
    """One row of `pprof -top`: exact values in the sample type's unit."""

    flat: int
    cum: int
    label: str  # the printable node name, without the inline marker
    inline: str  # "", "(inline)" or "(partial-inline)"
    flat_pct: str = field(default="", compare=False)
    sum_pct: str = field(default="", compare=False)
    cum_pct: str = field(default="", compare=False)

    def key(self) -> tuple[str, int, int, str]:
        return (self.label, self.flat, self.cum, self.inline)


@dataclass
class TopReport:
    header: list[str]  # the lines before the column header (File:, Type:, Showing …)
    rows: list[TopRow]
    unit_suffix: str  # the suffix pprof printed after numbers ("ns", "B", "" …)

    def multiset(self) -> Counter:
        """Rows as a multiset of (label, flat, cum, inline): order-free comparison."""
        return Counter(r.key() for r in self.rows)

    @property
    def total(self) -> int | None:
        """The total from "Showing nodes accounting for X, P% of T total"."""
        for line in self.header:
            m = _SHOWING.match(line)
            if m:
                return parse_value(m.group("total"))[0]
        return None


_COLUMNS = re.compile(r"^\s*flat\s+flat%\s+sum%\s+cum\s+cum%\s*$")
# "%10s %s %s %10s %s  %s%s": value, flat%, sum%, value, cum%, two spaces, name.
_ROW = re.compile(
    r"^\s*(?P<flat>\S+) +(?P<flat_pct>\S+%) +(?P<sum_pct>\S+%) +(?P<cum>\S+) +(?P<cum_pct>\S+%)"
    r"  (?P<name>.*)$"
)
_SHOWING = re.compile(r"^Showing nodes accounting for (?P<shown>\S+), \S+ of (?P<total>\S+) total")
_VALUE = re.compile(r"^(?P<num>-?\d+)(?P<frac>\.\d+)?(?P<suffix>[^\d.].*)?$")
_MARKERS = ("(partial-inline)", "(inline)")


def parse_value(text: str) -> tuple[int, str]:
    """ "1280000000ns" -> (1280000000, "ns"); "0" -> (0, ""). A fraction is an error:
    with -unit set to the sample unit pprof prints whole numbers."""
    m = _VALUE.match(text)
    if not m or m.group("frac"):
        raise OracleError(f"not an exact pprof value: {text!r}")
    return int(m.group("num")), m.group("suffix") or ""


def parse_top(text: str) -> TopReport:
    """Parse `pprof -top` output (see pprof's report.printText)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _COLUMNS.match(line):
            header, body = lines[:i], lines[i + 1 :]
            break
    else:
        raise OracleError(f"no column header in pprof -top output:\n{text[:2000]}")
    rows: list[TopRow] = []
    suffixes: set[str] = set()
    for line in body:
        if not line.strip():
            continue
        m = _ROW.match(line)
        if not m:
            raise OracleError(f"unparsable pprof -top row: {line!r}")
        flat, s1 = parse_value(m.group("flat"))
        cum, s2 = parse_value(m.group("cum"))
        suffixes.update(s for s, v in ((s1, flat), (s2, cum)) if v != 0)
        name, inline = m.group("name"), ""
        for marker in _MARKERS:
            if name.endswith(" " + marker):
                name, inline = name[: -len(marker) - 1], marker
                break
        rows.append(
            TopRow(
                flat, cum, name, inline, m.group("flat_pct"), m.group("sum_pct"), m.group("cum_pct")
            )
        )
    if len(suffixes) > 1:
        raise OracleError(f"mixed units in one pprof -top output: {sorted(suffixes)}")
    return TopReport(header, rows, suffixes.pop() if suffixes else "")


def output_unit(unit: str) -> str:
    """The -unit that makes pprof print exact integers of a sample type in ``unit``.

    Known units (bytes, nanoseconds, microseconds, …) are printed in themselves;
    any other unit is printed unscaled, and "count" keeps the number bare.
    """
    return unit if unit and unit != "count" else "count"


def top(
    files: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    sample_index: int | str,
    unit: str,
    lines: bool = False,
    cum: bool = False,
    focus: str | None = None,
    ignore: str | None = None,
    extra: Sequence[str] = (),
) -> TopReport:
    """`pprof -top` of ``files`` (merged by pprof if several) with every node shown.

    ``unit`` is the unit of the chosen sample type (e.g. "nanoseconds"); see
    ``sample_types`` to find it.
    """
    paths = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    args = [
        "-top",
        "-nodefraction=0",
        "-nodecount=1000000",
        f"-sample_index={sample_index}",
        f"-unit={output_unit(unit)}",
    ]
    if lines:
        args.append("-lines")
    if cum:
        args.append("-cum")
    if focus:
        args.append(f"-focus={focus}")
    if ignore:
        args.append(f"-ignore={ignore}")
    args.extend(extra)
    return parse_top(run_pprof([*args, *paths]))


def diff_top(
    file: str | os.PathLike,
    *,
    base: str | os.PathLike,
    sample_index: int | str,
    unit: str,
    diff: bool = True,
    lines: bool = False,
) -> TopReport:
    """`pprof -top -diff_base=BASE FILE` (or ``-base`` when ``diff`` is False)."""
    flag = "-diff_base" if diff else "-base"
    return top(
        file, sample_index=sample_index, unit=unit, lines=lines, extra=[f"{flag}={os.fspath(base)}"]
    )


# --- -raw ------------------------------------------------------------------------


def raw(path: str | os.PathLike) -> str:
    """`pprof -raw` of one file. (It names no files, so it compares across copies.)"""
    return run_pprof(["-raw", path])


def sample_types(path: str | os.PathLike) -> list[tuple[str, str]]:
    """[(type, unit), …] of a profile as pprof reads it (from the -raw header)."""
    return canonical_raw(raw(path)).sample_types


@dataclass
class CanonicalRaw:
    """The content of `pprof -raw` with ids replaced by what they point to.

    A location is (address, its mapping's text, folded flag, its line texts);
    a sample is (values, its locations leaf first, its label lines).
    """

    header: list[str]  # Comment/Doc/PeriodType/Period/Time/Duration lines
    sample_types: list[tuple[str, str]]
    default_type: str
    samples: list[tuple]
    locations: Counter  # every location listed, referenced or not
    mappings: list[str]


_LOC = re.compile(
    r"^\s*(?P<id>\d+): (?P<addr>0x[0-9a-f]+) (?:M=(?P<m>\d+) )?(?P<f>\[F\] )?(?P<rest>.*)$"
)
_MAP = re.compile(r"^(?P<id>\d+): (?P<rest>.*)$")
_SAMPLE = re.compile(r"^(?P<values>(?: +-?\d+)+): (?P<locs>[\d ]*)$")


def canonical_raw(text: str) -> CanonicalRaw:
    """Parse `pprof -raw` text (see pprof's Profile.String) into a CanonicalRaw."""
    lines = text.splitlines()
    try:
        i_samples = lines.index("Samples:")
        i_locs = lines.index("Locations", i_samples)
        i_maps = lines.index("Mappings", i_locs)
    except ValueError as e:
        raise OracleError(f"not pprof -raw output:\n{text[:1000]}") from e
    header = lines[:i_samples]
    type_line = lines[i_samples + 1].split() if i_samples + 1 < i_locs else []
    types, default = [], ""
    for t in type_line:
        if t.endswith("[dflt]"):
            t = t[: -len("[dflt]")]
            default = t.rsplit("/", 1)[0]
        typ, _, unit = t.rpartition("/")
        types.append((typ, unit))

    mappings: dict[str, str] = {}
    for line in lines[i_maps + 1 :]:
        if line.strip():
            m = _MAP.match(line)
            if not m:
                raise OracleError(f"unparsable mapping line: {line!r}")
            mappings[m.group("id")] = m.group("rest")

    locations: dict[str, tuple] = {}
    current: list | None = None
    for line in lines[i_locs + 1 : i_maps]:
        if line.startswith(" " * 13) and current is not None:
            current[3].append(line.strip())
            continue
        m = _LOC.match(line)
        if not m:
            raise OracleError(f"unparsable location line: {line!r}")
        rest = m.group("rest").strip()
        current = [
            m.group("addr"),
            mappings.get(m.group("m") or "", ""),
            bool(m.group("f")),
            [rest] if rest else [],
        ]
        locations[m.group("id")] = current  # type: ignore[assignment]
    resolved = {k: (a, mp, f, tuple(ls)) for k, (a, mp, f, ls) in locations.items()}

    samples: list[tuple] = []
    for line in lines[i_samples + 2 : i_locs]:
        m = _SAMPLE.match(line)
        if m:
            values = tuple(int(v) for v in m.group("values").split())
            locs = tuple(resolved[i] for i in m.group("locs").split())
            samples.append([values, locs, []])
        elif line.startswith(" " * 16) and samples:
            samples[-1][2].append(line.strip())  # string labels, then numeric labels
        elif line.strip():
            raise OracleError(f"unparsable sample line: {line!r}")
    return CanonicalRaw(
        header=header,
        sample_types=types,
        default_type=default,
        samples=[(v, locs, tuple(lbls)) for v, locs, lbls in samples],
        locations=Counter(resolved.values()),
        mappings=list(mappings.values()),
    )


# --- -proto ----------------------------------------------------------------------


def merge_proto(files: Iterable[str | os.PathLike], out: str | os.PathLike) -> Path:
    """pprof's merge of ``files`` written as a gzipped proto at ``out``."""
    out = Path(out)
    run_pprof(["-proto", f"-output={out}", *map(os.fspath, files)])
    if not out.exists():
        raise OracleError(f"pprof -proto wrote nothing at {out}")
    return out


# --- classifying files ----------------------------------------------------------


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        b = data[i]
        value |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return value, i
        shift += 7


def is_proto(path: str | os.PathLike) -> bool:
    """Whether the file is a pprof protobuf (gzipped or not) rather than a legacy format.

    Walks the top-level protobuf fields: every tag must be a Profile field
    (1..15) with a varint or length-delimited wire type, and every length must
    fit. The legacy text formats ("heap profile:", "--- contention") and the
    legacy binary CPU format (leading zero words) fail this on their first bytes.
    """
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            return False
    i = 0
    try:
        while i < len(data):
            tag, i = _varint(data, i)
            num, wire = tag >> 3, tag & 7
            if not 1 <= num <= 15:
                return False
            if wire == 0:
                _, i = _varint(data, i)
            elif wire == 2:
                n, i = _varint(data, i)
                i += n
                if i > len(data):
                    return False
            else:
                return False
    except ValueError:
        return False
    return bool(data)
