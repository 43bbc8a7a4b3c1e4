"""``list``: source lines of the functions matching a regex with their flat and cum
values, as ``go tool pprof -list=REGEX`` prints them (pprof's ``printSource``).

Rules, re-expressed:

- The total and filters are top's (``analyses.top.prepare``); the graph is
  built at line granularity with nothing trimmed.
- File names first lose a prefix, as pprof's ``trimPath`` does: with no
  ``trim_path``, everything up to ``/B/`` where B is the base name of a
  ``source_path`` directory; then a ``trim_path`` prefix (``:``-separated
  list) or ``/proc/self/cwd/``. Files are then looked for the same way, with
  the working directory as the source path when none is given (so the names
  printed keep their prefix while the file is found without it).
- Functions are the distinct names of nodes matching the regex (Go's
  ``MatchString``: anywhere in the name), sorted by name; none is an error.
  A function whose nodes have no file prints "No source information".
- Per function, one routine per file (sorted by name): flat and cum summed
  over its nodes, and the source lines from the function's start line (when
  the profile has it, else the first sampled line minus 5) to the last sampled
  line plus 5, clipped at line 1 and at the end of the file; none when the
  start line comes after that end (the file is then not even opened, so a
  missing file prints no error). (pprof takes the
  start line from the first of the routine's nodes in its map order, and
  widens either the start or the end per node; this gives the same lines
  whenever a function's nodes agree on its start line. We take the first node
  in location order.)
- The file is opened as pprof opens it: an absolute name as is; a relative
  one under each source-path directory or one of its parents. A file not
  found is an ``Error:`` line in the routine (Go's error text).
- ``source_files`` names every source file opened, as opened (so a front end
  can refuse to write over one).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from pyproflab.analyses.filters import compile_regex
from pyproflab.analyses.graph import build_nodes, expand_frames, go_clean, node_values
from pyproflab.analyses.top import prepare
from pyproflab.errors import UsageError
from pyproflab.model import Profile, ValueType

MARGIN = 5  # lines shown before the first and after the last sampled line
MAX_LINE = 64 * 1024  # Go's bufio.Scanner stops at a longer line


@dataclass
class SourceLine:
    lineno: int
    text: str
    flat: int
    cum: int


@dataclass
class Routine:
    """One function in one file; ``file`` is None when the function has no source
    information, ``error`` set when its file could not be read."""

    name: str
    file: str | None
    flat: int = 0
    cum: int = 0
    lines: list[SourceLine] = field(default_factory=list)
    error: str | None = None


@dataclass
class ListResult:
    total: int
    sample_type: ValueType
    routines: list[Routine]
    regex: str
    source_files: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.routines)

    def __repr__(self) -> str:
        return f"ListResult({self.regex!r}, {self.sample_type}, {len(self.routines)} routines)"

    def __str__(self) -> str:
        """The text ``go tool pprof -list`` prints."""
        from pyproflab.display import render

        return render(self, "text")

    def _repr_html_(self) -> str:
        from pyproflab.display import render

        return render(self, "html")


def source_list(
    profile: Profile,
    regex: str,
    *,
    sample_index: int | str | None = None,
    source_path: str | None = None,
    trim_path: str | None = None,
    focus: str | None = None,
    ignore: str | None = None,
    **pprof_options: str | None,
) -> ListResult:
    """The annotated source of the functions matching ``regex`` (see the module rules)."""
    rx = compile_regex("list", regex)
    if rx is None:
        raise UsageError("list needs a regular expression")
    search = source_path or os.getcwd()
    prep = prepare(profile, sample_index, focus, ignore, **pprof_options)
    # The names printed are trimmed with the source path given (none: no guess from
    # the working directory); the reader guesses with the directory it searches.
    work = _with_trimmed_files(prep.work, trim_path or "", source_path or "")
    nodes = build_nodes(work, "lines")
    frames = expand_frames(work, nodes, prep.w_all, prep.keep)
    g = node_values(frames, nodes.count, None)
    first_slot = np.full(nodes.count, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_slot, nodes.slot_node, np.arange(len(nodes.slot_node)))
    by_name: dict[str, list[int]] = {}
    for n in np.flatnonzero((g.flat != 0) | (g.cum != 0)).tolist():
        if rx.search(nodes.name[n]):
            by_name.setdefault(nodes.name[n], []).append(n)
    if not by_name:
        raise UsageError(f"no matches found for regexp: {regex}")
    starts = _start_lines(work, set(by_name))
    reader = SourceReader(search, trim_path or "")
    routines: list[Routine] = []
    for name in sorted(by_name):
        by_file: dict[str, list[int]] = {}
        for n in sorted(by_name[name], key=lambda n: first_slot[n]):
            if nodes.file[n]:
                by_file.setdefault(nodes.file[n], []).append(n)
        if not by_file:
            routines.append(Routine(name, None))
        for file in sorted(by_file):
            fns = [(nodes.lineno[n], starts.get((name, file), 0), n) for n in by_file[file]]
            routines.append(_routine(name, file, fns, g, reader))
    st = prep.profile.sample_types[prep.index]
    return ListResult(prep.total, st, routines, regex, reader.opened)


def _routine(name: str, file: str, fns: list[tuple[int, int, int]], g, reader) -> Routine:
    """``fns``: (line, function start line, node) in location order."""
    flat = sum(int(g.flat[n]) for _, _, n in fns)
    cum = sum(int(g.cum[n]) for _, _, n in fns)
    line0, start0, _ = fns[0]
    start = start0 or line0 - MARGIN
    end = line0 + MARGIN
    per_line: dict[int, tuple[int, int]] = {}
    for lineno, start_line, n in fns:
        node_start = start_line or lineno - MARGIN
        if node_start < start:
            start = node_start
        elif lineno + MARGIN > end:
            end = lineno + MARGIN
        f, c = per_line.get(lineno, (0, 0))
        per_line[lineno] = (f + int(g.flat[n]), c + int(g.cum[n]))
    start = max(start, 1)
    if start > end:  # pprof reads no line, so it never opens the file: no error either
        return Routine(name, file, flat, cum)
    text, error = reader.lines(file)
    if error:
        return Routine(name, file, flat, cum, error=error)
    lines = [
        SourceLine(i, text[i - 1], *per_line.get(i, (0, 0)))
        for i in range(start, min(end, len(text)) + 1)
    ]
    return Routine(name, file, flat, cum, lines)


def _start_lines(profile: Profile, names: set[str]) -> dict[tuple[str, str], int]:
    """(name, cleaned file) -> start line of the first such function met in the
    locations' lines (pprof's first node of a routine)."""
    out: dict[tuple[str, str], int] = {}
    funcs = {
        r["id"]: r
        for r in profile.functions.select(["id", "name", "filename", "start_line"]).to_pylist()
        if r["name"] in names
    }
    for lines in profile.locations.column("lines").to_pylist():
        for ln in lines:
            f = funcs.get(ln["function_id"])
            if f is not None and f["filename"]:
                out.setdefault((f["name"], go_clean(f["filename"])), f["start_line"] or 0)
    return out


def _with_trimmed_files(profile: Profile, trim: str, search: str) -> Profile:
    import dataclasses

    funcs = profile.functions
    col = funcs.schema.get_field_index("filename")
    names = [trim_source_path(f, trim, search) if f else f for f in funcs.column(col).to_pylist()]
    funcs = funcs.set_column(col, funcs.schema.field(col), pa.array(names, pa.string()))
    return dataclasses.replace(profile, functions=funcs)


def trim_source_path(path: str, trim: str, search: str) -> str:
    """pprof's ``trimPath`` (see the module rules)."""
    if not trim:
        for d in _split_list(search):
            want = "/" + _go_base(d) + "/"
            found = path.find(want)
            if found != -1:
                return path[found + len(want) :]
    for prefix in [*_split_list(trim), "/proc/self/cwd/./", "/proc/self/cwd/"]:
        if not prefix.endswith("/"):
            prefix += "/"
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path


def _split_list(paths: str) -> list[str]:
    return paths.split(os.pathsep) if paths else []


def _go_base(path: str) -> str:
    from pyproflab.analyses.graph import go_base

    return go_clean(go_base(path)) if path else "."


class SourceReader:
    """Source files read once each, opened as pprof opens them."""

    def __init__(self, search: str, trim: str) -> None:
        self.search, self.trim = search, trim
        self._files: dict[str, tuple[list[str], str | None]] = {}
        self.opened: list[str] = []  # the files read, as opened

    def lines(self, path: str) -> tuple[list[str], str | None]:
        """(the file's lines, None) or ([], Go's error text)."""
        if path not in self._files:
            self._files[path] = self._read(path)
        return self._files[path]

    def _read(self, path: str) -> tuple[list[str], str | None]:
        rel = trim_source_path(path, self.trim, self.search)
        absolute = rel.startswith("/")
        for name in [rel] if absolute else _search_names(rel, self.search):
            if os.path.exists(name) and not os.path.isfile(name):
                return [], None  # Go opens a directory, reads no line and reports nothing
            try:
                with open(name, "rb") as f:
                    data = f.read()
                self.opened.append(name)
                return _scan_lines(data), None
            except OSError as e:
                if absolute:
                    why = e.strerror or str(e)
                    return [], f"open {rel}: {why[:1].lower()}{why[1:]}"
        return [], f"could not find file {rel} on path {self.search}"


def _search_names(rel: str, search: str) -> list[str]:
    """Where pprof looks for a relative file: under each source-path directory
    and each of its parents (Go's ``filepath.Join`` and ``filepath.Dir``)."""
    out = []
    for d in _split_list(search):
        while True:
            out.append(go_clean(f"{d}/{rel}" if d else rel))
            parent = go_clean(d[: d.rfind("/") + 1])
            if parent == d:
                break
            d = parent
    return out


def _scan_lines(data: bytes) -> list[str]:
    """Lines as Go's ``bufio.Scanner`` gives them (no ``\\n``, no trailing ``\\r``),
    up to the first line too long for it."""
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    out = []
    for p in parts:
        if len(p) + 1 > MAX_LINE:
            break
        out.append(p.removesuffix(b"\r").decode("utf-8", "replace"))
    return out
