"""An output written over one of the command's own inputs is refused before it runs.

``pyproflab pgo a.pb.gz b.pb.gz -o a.pb.gz`` replaced the profile it read;
``pyproflab top --db fleet.duckdb -o fleet.duckdb`` replaced the store with
the report's text. Rules:

- The output is ``-o/--output`` (``-`` is stdout, never a file).
- The inputs are the files the options in ``INPUTS`` name (folders walked and
  globs expanded as the commands read them, ``files.expand_paths``; URLs are
  not files) and the store of a command that has ``--db`` (``$PYPROFLAB_DB``
  or the default one), whether or not it reads it: report text over a store
  is never meant. Also: the files of ``--dataset`` (a Parquet dataset,
  walked), the Go sources of ``pgo check``/``effect``'s ``--source`` module
  (``GO_SOURCES``: what pgo check parses and go build compiles; files a
  ``//go:embed`` names are not counted) and the files ``gogc --cgroup`` reads.
  ``list``'s source files are known only once read: it checks them itself,
  with ``refuse_output_over``, before it writes.
- Same file means ``os.path.samefile``: the same file by any spelling
  (``./a``, an absolute path, ``..``), through a symlink either way, or a hard
  link. An output that does not exist yet overwrites nothing.
- A refusal is one ``UsageError`` line (exit 2), before anything is read or written.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Iterator

from pyproflab.errors import UsageError

# argparse dests that name files a command reads: report inputs and their
# bases, a trace, gogc's logs and snapshots, pgo effect's build log and profile,
# top's and regressions' Spark dataset.
INPUTS = (
    "files",
    "file",
    "diff_base",
    "base",
    "gctrace",
    "metrics",
    "build_log",
    "pgo",
    "dataset",
)
# What a Go build reads under its module: go/build's source file kinds, go.mod, go.sum.
GO_SOURCES = (".go", ".s", ".S", ".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".syso")
GO_MODULE_FILES = ("go.mod", "go.sum")


def refuse_output_over_input(args: argparse.Namespace) -> None:
    """UsageError when ``args.output`` is an existing file among the inputs (see the rules)."""
    refuse_output_over(getattr(args, "output", None), _inputs(args))


def refuse_output_over(output: object, inputs: Iterable[tuple[str, str]]) -> None:
    """UsageError when ``output`` is an existing file that is one of ``inputs``'
    paths, each (what it is, path); for the inputs known only once the command
    has read something (``list``'s source files), checked before it writes."""
    if not isinstance(output, str) or output == "-" or not os.path.isfile(output):
        return
    for what, path in inputs:
        try:
            same = os.path.samefile(path, output)
        except OSError:  # an input that is not there: the command says so itself
            continue
        if same:
            named = "" if path == output else f" ({path})"
            raise UsageError(
                f"-o {output} is {what}{named}: writing it would replace what the "
                "command reads; give another output path"
            )


def _inputs(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(what, path) of each input file: ``INPUTS``' files, then the store."""
    from pyproflab.files import expand_paths, is_url

    for dest in INPUTS:
        value = getattr(args, dest, None)
        for given in [value] if isinstance(value, str) else value or ():
            if not isinstance(given, str) or is_url(given):
                continue
            try:
                files = expand_paths([given])
            except UsageError:  # missing: the command says so itself
                continue
            for path in files:
                yield ("an input" if path == given else f"an input in {given}"), path
    yield from _sourced_inputs(args)
    if hasattr(args, "db"):
        from pyproflab.cli.common import db_path

        yield "the store", db_path(args)


def _sourced_inputs(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(what, path) of the files read from pgo's ``--source`` module and gogc's ``--cgroup``."""
    source = getattr(args, "source", None)
    if isinstance(source, str) and os.path.isdir(source):
        for root, _, names in os.walk(source):
            for name in names:
                if name.endswith(GO_SOURCES) or name in GO_MODULE_FILES:
                    yield f"a Go source in {source}", os.path.join(root, name)
    cgroup = getattr(args, "cgroup", None)
    if isinstance(cgroup, str):
        from pyproflab.analyses.gogc.container import cgroup_files

        try:
            files = cgroup_files(cgroup)
        except UsageError:  # missing: the command says so itself
            return
        for path in files:
            yield f"a file of the cgroup {cgroup}", str(path)
