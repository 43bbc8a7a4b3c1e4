"""The package's layers import only downward, in the order of ARCHITECTURE.md's
layer line (read from there; ``pyproflab/__init__.py`` states the same line).

Every ``import``/``from ... import`` of a pyproflab module, at any depth (lazy
imports inside functions count), must name a layer at or below the importer's.
Result objects render through ``pyproflab.display``, never by importing reports.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pyproflab"

ARCHITECTURE = PACKAGE.parent / "ARCHITECTURE.md"


def layer_line(text: str) -> str:
    """The first fenced block of ``text`` (ARCHITECTURE.md's layer line), one line."""
    return " ".join(text.split("```")[1].split())


def layers(line: str) -> dict[str, int]:
    """Top-level module or subpackage -> layer, from a line ``a, b -> c -> ...``;
    private modules (``_proto``, C extensions) sit below the first layer, the
    package's ``__init__``/``__main__`` above the last."""
    groups = [[n.strip() for n in g.split(",")] for g in line.split("->")]
    table = {n: i + 1 for i, g in enumerate(groups) for n in g}
    private = {p.name.split(".")[0] for p in PACKAGE.iterdir() if p.name.startswith("_")}
    table |= {n: 0 for n in private} | {"__init__": len(groups) + 1, "__main__": len(groups) + 1}
    return table


# Top-level module or subpackage -> layer; a module may import its own layer and below.
LAYERS: dict[str, int] = layers(layer_line(ARCHITECTURE.read_text()))


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
        assert name in LAYERS, f"{path.name}:{line}: pyproflab.{name} is not in LAYERS"
        if LAYERS[name] > LAYERS[top]:
            upward.append(f"line {line}: imports pyproflab.{name} (layer {LAYERS[name]})")
    assert not upward, f"{path.relative_to(PACKAGE)} (layer {LAYERS[top]}): {upward}"


def test_the_layer_line_is_one() -> None:
    """ARCHITECTURE.md and the package's docstring state the same layers, and
    every top-level module is in them."""
    import pyproflab

    assert layer_line(ARCHITECTURE.read_text()) == layer_line(pyproflab.__doc__ or "")
    tops = {
        p.name.removesuffix(".py")
        for p in PACKAGE.iterdir()
        if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    assert tops - set(LAYERS) == set(), "add them to ARCHITECTURE.md's layer line"


def test_the_checker_sees_lazy_imports() -> None:
    tree = ast.parse("def f():\n    from pyproflab.reports.top import render_html\n")
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
    for module, function in table.values():
        assert callable(getattr(importlib.import_module(module), function))


def test_renderers_share_one_signature() -> None:
    """Every registered renderer is ``function(result, /, **options)``: the result
    first, every option with a default (``display``'s interface)."""
    import importlib
    import inspect

    from pyproflab.display import renderers

    for (cls, kind), (module, function) in renderers().items():
        params = list(
            inspect.signature(
                getattr(importlib.import_module(module), function)
            ).parameters.values()
        )
        assert params and params[0].kind in (
            params[0].POSITIONAL_ONLY,
            params[0].POSITIONAL_OR_KEYWORD,
        ), (cls, kind)
        need = [
            p.name
            for p in params[1:]
            if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        ]
        assert not need, f"{module}.{function} ({cls}, {kind}): options without a default: {need}"


def test_one_way_to_render() -> None:
    """Front ends render through ``reports.render``/``display.render`` only: no
    module of reports has a ``render(result, fmt)`` of its own choosing by format."""
    own = [
        str(p.relative_to(PACKAGE))
        for p in sorted((PACKAGE / "reports").rglob("*.py"))
        if p.name != "__init__.py"
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name == "render"
    ]
    assert not own, f"render functions besides reports.render: {own}"


def test_reports_import_nothing_from_the_store() -> None:
    """Reports render results: they ask the store nothing (the workflows do)."""
    graph = import_graph()
    asked = {
        m: sorted(e for e in edges if e.startswith("pyproflab.store"))
        for m, edges in graph.items()
        if m.startswith("pyproflab.reports")
    }
    assert len(asked) >= 10
    assert not {m: e for m, e in asked.items() if e}, asked


# --- import circles ------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = ("pyproflab", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the pyproflab modules it imports, lazily, for type checking only,
    or not (an import for annotations is a dependency too). ``from pyproflab.a
    import b`` names the module a.b when there is one, else a; a package's
    ``__init__`` is not implied by its modules."""
    paths = sorted(p for p in package.rglob("*.py") if "_proto" not in p.parts)
    # C extensions (built in place from their .c source) are modules too.
    known = {_module_name(p) for p in [*paths, *package.rglob("*.c")]}
    graph: dict[str, set[str]] = {}
    for path in paths:
        tree = ast.parse(path.read_text(), str(path))
        edges: set[str] = set()
        for node in ast.walk(tree):
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


def test_the_checkers_see_type_checking_imports() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pyproflab.lab import Lab\n"
    )
    assert _imported(tree) == [("lab", 3)]


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
