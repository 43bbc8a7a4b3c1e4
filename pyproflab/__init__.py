"""pyproflab: a lab for pprof profiles from fleets of Go services.

Layers, each importing only those before it (as ARCHITECTURE.md):

```
errors, schema, model, arrays, display, native, forkserver, gohelper, version,
  newfiles
  ->  sources, decode, encode  ->  keying  ->  store  ->  analyses  ->  workflows, engines
  ->  reports  ->  files, collect, lab, serve  ->  jobs  ->  cli
```

Quick start::

    import pyproflab
    lab = pyproflab.open("fleet.duckdb")
    lab.ingest("profiles/", service="api", version="v1")
    lab.top(service="api", profile_type="cpu")

Heavy modules (numpy, pyarrow, DuckDB, pandas) load on first use, so reading one file stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyproflab.errors import ProflabError, UsageError
from pyproflab.version import __version__ as __version__

if TYPE_CHECKING:
    from pyproflab.decode import decode_bytes, read_profile
    from pyproflab.engines.spark_query import SparkDataset
    from pyproflab.lab import Lab
    from pyproflab.model import Profile, ValueType


__all__ = [
    "Lab",
    "Profile",
    "ProflabError",
    "ValueType",
    "decode_bytes",
    "encode_profile",
    "flame",
    "from_connection",
    "merge_profiles",
    "notebook",
    "open",
    "open_spark",
    "peek",
    "plotly_text",
    "read_profile",
    "source_list",
    "top",
    "traces",
    "tree",
    "write_profile",
]


def open(  # noqa: A001
    path: Any = "pyproflab.duckdb", *, read_only: bool = False, wait: float = 0.0
) -> Lab:
    """Open (or create) a store and return a ``Lab`` on it (``":memory:"`` for none
    on disk), waiting up to ``wait`` seconds for a store another process holds."""
    from pyproflab.lab import Lab

    return Lab.open(path, read_only=read_only, wait=wait)


def open_spark(spark: Any, path: Any) -> SparkDataset:
    """Questions on Spark over the Parquet dataset at ``path`` (``export --parquet``
    or ``engines.spark_ingest``); answers are the store's result objects."""
    from pyproflab.engines.spark_query import SparkDataset

    return SparkDataset(spark, path)


def from_connection(con: Any) -> Lab:
    """A ``Lab`` on a DuckDB connection you already have."""
    from pyproflab.lab import Lab

    return Lab.from_connection(con)


def write_profile(profile: Profile, path: Any, *, gzip: bool = True) -> None:
    """Write ``profile`` as a pprof file (gzipped by default), atomically."""
    from pyproflab.encode import write_profile as _write

    _write(profile, path, gzip=gzip)


def encode_profile(profile: Profile, *, gzip: bool = True) -> bytes:
    from pyproflab.encode import encode_profile as _encode

    return _encode(profile, gzip=gzip)


def merge_profiles(profiles: list[Profile]) -> Profile:
    """Merge profiles as ``go tool pprof -proto A B …`` does (on their common sample types)."""
    from pyproflab.analyses.merge import merge

    return merge(profiles)


def top(source: Any, **options: Any):
    """Top functions of a ``Profile`` or of profile files (merged), as ``go tool pprof -top``.

    Options: sample_index, granularity, nodecount, cum_sort, focus, ignore, hide, show,
    show_from, tagfocus, tagignore, node_fraction, edge_fraction; ``diff_base=`` or
    ``base=`` (a Profile or files) subtracts a base as pprof's -diff_base / -base.
    """
    from pyproflab.analyses.top import top as _top

    return _filtered(_top, _with_base(source, options), **options)


def tree(source: Any, **options: Any):
    """Every node with its callers and callees (``TreeResult``; ``print`` gives the text
    of ``go tool pprof -tree``). Options as ``top``; nodecount, node_fraction and
    edge_fraction default to pprof's 80, 0.005 and 0.001."""
    from pyproflab.analyses.tree import tree as _tree

    return _filtered(_tree, _with_base(source, options), **options)


def peek(source: Any, regex: str, **options: Any):
    """Callers and callees of the nodes matching ``regex``, as ``go tool pprof -peek``
    (``TreeResult``). Options as ``top``."""
    from pyproflab.analyses.tree import peek as _peek

    return _filtered(_peek, _with_base(source, options), regex, **options)


def source_list(source: Any, regex: str, **options: Any):
    """Source lines of the functions matching ``regex`` with their values, as
    ``go tool pprof -list`` (``ListResult``). Options: sample_index, source_path,
    trim_path, focus, ignore and pprof's other filters."""
    from pyproflab.analyses.source_list import source_list as _list

    return _filtered(_list, _with_base(source, options), regex, **options)


def traces(source: Any, **options: Any) -> str:
    """Every sample's stack and labels as ``go tool pprof -traces`` prints them.
    Options: sample_index, focus, ignore and pprof's other filters (tagshow, ...)."""
    from pyproflab.analyses.traces import traces as _traces

    return str(_traces(_with_base(source, options), **options))


def _filtered(analysis: Any, profile: Profile, *args: Any, **options: Any):
    """``analysis(profile, ...)``, then pprof's warning for each filter that matched
    nothing (``pprof_filters.warn_unmatched``)."""
    from pyproflab.analyses.pprof_filters import warn_unmatched

    result = analysis(profile, *args, **options)
    warn_unmatched(profile, options, stacklevel=4)
    return result


def _with_base(source: Any, options: dict[str, Any]) -> Profile:
    """``source`` read, minus ``diff_base=``/``base=`` (popped from ``options``)."""
    from pyproflab.analyses.diff import with_base

    bases = {n: options.pop(n, None) for n in ("diff_base", "base")}
    given = {n: _profile(b) for n, b in bases.items() if b is not None}
    return with_base(_profile(source), **given)


def _profile(source: Any) -> Profile:
    """A Profile as is; a path, or several (merged), read."""
    from pyproflab.model import Profile

    if isinstance(source, Profile):
        return source
    import os
    from collections.abc import Iterable

    from pyproflab.files import read_and_merge

    single = isinstance(source, (str, os.PathLike))
    if not single and isinstance(source, Iterable) and not isinstance(source, bytes):
        source = list(source)  # a glob's generator of paths too
    many = isinstance(source, list) and all(isinstance(x, (str, os.PathLike)) for x in source)
    if not (single or many):  # pyproflab.top(lab) was "'Lab' object is not iterable"
        raise UsageError(
            f"{_short(source)}: expected a Profile, a file name or a list of file names "
            "(for a store: lab.top(...), lab.merged(...))"
        )
    return read_and_merge([source] if single else source)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def flame(
    profile: Profile,
    sample_index: Any = None,
    *,
    base: Profile | None = None,
    base_scale: float = 1.0,
    title: str | None = None,
):
    """An interactive flame graph (root on top; search, zoom, sandwich view) of
    ``profile``'s ``sample_index`` (name or number; default as ``top`` chooses);
    with ``base``, a differential one coloured by change. Shows itself in Jupyter;
    ``.html()`` for a page. Works offline; every name stays text."""
    from pyproflab.analyses.flame import flame_graph
    from pyproflab.model import Profile

    for name, p in (("profile", profile), ("base", base)):
        if not isinstance(p, Profile) and (p is not None or name == "profile"):
            raise UsageError(
                f"{name}={_short(p)}: expected a Profile (lab.merged(...), read_profile)"
            )
    return flame_graph(profile, sample_index, base=base, base_scale=base_scale, title=title)


def notebook() -> None:
    """Call once in a notebook: figures then show in JupyterLab and stay in the HTML of
    ``jupyter nbconvert --to html`` (plotly.js embedded once, offline), and Arrow
    tables (``lab.profiles``, ``lab.sql``) show as tables of their first rows."""
    from pyproflab.reports.notebook import show_tables, use_offline_figures

    use_offline_figures()
    show_tables()


def plotly_text(text: str) -> str:
    """``text`` (a function name, a label: untrusted) escaped for plotly titles and labels."""
    from pyproflab.reports.formatting import plotly_text as _escape

    return _escape(text)


def __getattr__(name: str) -> Any:
    # Loaded on first use: the decoder brings protobuf, which a run that only
    # queries a store never needs.
    if name in ("decode_bytes", "read_profile"):
        from pyproflab import decode

        return getattr(decode, name)
    if name == "Lab":
        from pyproflab.lab import Lab

        return Lab
    # The model brings numpy and pyarrow (half a second): the CLI's entry
    # imports this package first, and a Ctrl-C in those imports, before
    # cli.main could catch it, was a traceback.
    if name in ("Profile", "ValueType"):
        from pyproflab import model

        return getattr(model, name)
    raise AttributeError(name)
