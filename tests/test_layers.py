"""The package's layers import only downward (STYLE: sources -> decode -> store ->
analyses -> workflows/engines -> reports -> CLI/jobs/notebooks).

Every ``import``/``from ... import`` of a pyproflab module, at any depth (lazy
imports inside functions count), must name a layer at or below the importer's.
Result objects render through ``pyproflab.display``, never by importing reports.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pyproflab"

# Top-level module or subpackage -> layer; a module may import its own layer and below.
LAYERS: dict[str, int] = {
    "_proto": 0,
    "errors": 0,
    "schema": 0,
    "model": 0,
    "display": 0,
    "arrays": 0,
    "native": 0,
    "_intern": 0,
    "forkserver": 0,
    "gohelper": 0,
    "newfiles": 0,
    "sources": 1,
    "decode": 1,
    "encode": 1,
    "store": 2,
    "analyses": 3,
    "workflows": 4,
    # Other engines over the store's dataset (Spark): store rows in, analyses' results out.
    "engines": 4,
    "reports": 5,
    "files": 6,
    "collect": 6,
    "lab": 6,
    "jobs": 7,
    "cli": 8,
    "__init__": 9,
    "__main__": 9,
}


def _imported(tree: ast.AST) -> list[tuple[str, int]]:
    """(top-level pyproflab module, line) for every import of a pyproflab module."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts[0] != "pyproflab":
                continue
            names = parts[1:2] or [a.name for a in node.names]
            out += [(n, node.lineno) for n in names]
        elif isinstance(node, ast.Import):
            out += [
                (a.name.split(".")[1], node.lineno)
                for a in node.names
                if a.name.startswith("pyproflab.")
            ]
    return out


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "_proto" not in p.parts)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_downward(path: Path) -> None:
    top = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    assert top in LAYERS, f"{top}: add it to LAYERS"
    upward = []
    for name, line in _imported(ast.parse(path.read_text(), str(path))):
        if name == "__version__":  # from pyproflab import __version__: a constant
            continue
        assert name in LAYERS, f"{path.name}:{line}: pyproflab.{name} is not in LAYERS"
        if LAYERS[name] > LAYERS[top]:
            upward.append(f"line {line}: imports pyproflab.{name} (layer {LAYERS[name]})")
    assert not upward, f"{path.relative_to(PACKAGE)} (layer {LAYERS[top]}): {upward}"


def test_the_checker_sees_lazy_imports() -> None:
    tree = ast.parse("def f():\n    from pyproflab.reports.html import render_html\n")
    assert _imported(tree) == [("reports", 2)]


def test_every_render_call_has_a_registered_renderer() -> None:
    """Each ``render(self, KIND)`` in a result class names a kind the reports layer
    registered, and the registered function exists."""
    import importlib

    from pyproflab.display import renderers

    table = renderers()

    calls = []
    for path in sorted((PACKAGE / "analyses").rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        module = ".".join(("pyproflab", *parts)).removesuffix(".__init__")
        for cls in ast.parse(path.read_text()).body:
            if not isinstance(cls, ast.ClassDef):
                continue
            for node in ast.walk(cls):
                if (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", None) == "render"
                    and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant)
                ):
                    calls.append((f"{module}.{cls.name}", node.args[1].value))
    assert len(calls) >= 10
    missing = [c for c in calls if c not in table]
    assert not missing, f"render() kinds with no renderer: {missing}"
    for module, function, _ in table.values():
        assert callable(getattr(importlib.import_module(module), function))


# --- import circles ------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = ("pyproflab", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Lines inside ``if TYPE_CHECKING:`` blocks (imports for annotations only)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the pyproflab modules it imports, lazily or not (not those imported
    only for type checking). ``from pyproflab.a import b`` names the module a.b when
    there is one, else a; a package's ``__init__`` is not implied by its modules."""
    paths = sorted(p for p in package.rglob("*.py") if "_proto" not in p.parts)
    # C extensions (built in place from their .c source) are modules too.
    known = {_module_name(p) for p in [*paths, *package.rglob("*.c")]}
    graph: dict[str, set[str]] = {}
    for path in paths:
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_lines(tree)
        edges: set[str] = set()
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] != "pyproflab":
                    continue
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    edges.add(sub if sub in known else node.module)
            elif isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name.startswith("pyproflab.")}
        me = _module_name(path)
        graph[me] = {e for e in edges if e in known and e != me}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_import_circles() -> None:
    """No two modules import each other, directly or through others, even lazily: a
    lazy import that closes a circle hides a room doing two jobs."""
    circles = import_circles(import_graph())
    assert not circles, f"import circles: {circles}"


def test_the_circle_finder_finds_lazy_and_indirect_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_circles(graph) == [["a", "b", "c"]]
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pyproflab.x import y\n"
    )
    assert _type_checking_lines(tree) == {3}


def test_importing_pyproflab_registers_nothing() -> None:
    """Renderers are a table read on use: importing the package imports no report."""
    import subprocess
    import sys

    code = (
        "import sys, pyproflab; "
        "print(sorted(m for m in sys.modules if m.startswith('pyproflab.reports')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
