"""Short functions and small modules (issue 16): no function over 80 lines and no
module over 500 in ``pyproflab/``, except the ones listed here with the reason.

A new long function or module fails this test: split it, or add it below with a
reason a reader can check (the list is meant to shrink). Lines are counted from
``def`` (or the module's first line) to the last line, docstring and comments
included; a nested function counts inside its parent too.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pyproflab"
MAX_FUNCTION = 80
MAX_MODULE = 500

_GOGC = "engineer gogc's lane (#12), in rewrite this session; split there"

#: "path/relative/to/pyproflab.py" -> why it may be longer than MAX_MODULE.
LONG_MODULES: dict[str, str] = {
    "analyses/gogc.py": _GOGC,
    "analyses/gogc_inputs.py": _GOGC,
    "analyses/gogc_model.py": _GOGC,
    "analyses/pgo.py": "engineer scale's lane (#14), in rewrite this session",
    "collect.py": "collect's scheduler and store writes; the HTTP client is already sources/http",
    "decode/fast.py": "the bulk decoder: each walk's C fast path beside its numpy fallback",
    "reports/html_report.py": "the report's sections; HTML is in templates, the rest is data",
}

#: "path::qualified.name" -> why the function may be longer than MAX_FUNCTION.
LONG_FUNCTIONS: dict[str, str] = {}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "_proto" not in p.parts)


def _functions(tree: ast.Module) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function and method, nested ones included."""
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                out.append((name, (child.end_lineno or child.lineno) - child.lineno + 1))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _sizes() -> tuple[dict[str, int], dict[str, int]]:
    modules, functions = {}, {}
    for path in _modules():
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text(encoding="utf-8")
        modules[rel] = len(text.splitlines())
        for name, n in _functions(ast.parse(text, str(path))):
            functions[f"{rel}::{name}"] = max(n, functions.get(f"{rel}::{name}", 0))
    return modules, functions


def test_no_new_long_module() -> None:
    modules, _ = _sizes()
    new = {m: n for m, n in modules.items() if n > MAX_MODULE and m not in LONG_MODULES}
    assert not new, f"modules over {MAX_MODULE} lines (split, or list with a reason): {new}"


def test_no_new_long_function() -> None:
    _, functions = _sizes()
    new = {f: n for f, n in functions.items() if n > MAX_FUNCTION and f not in LONG_FUNCTIONS}
    assert not new, f"functions over {MAX_FUNCTION} lines (split, or list with a reason): {new}"


def test_every_reason_is_said() -> None:
    assert all(r.strip() for r in (*LONG_MODULES.values(), *LONG_FUNCTIONS.values()))


def test_the_counter_sees_methods_and_nested_functions() -> None:
    tree = ast.parse("class A:\n    def f(self):\n        def g():\n            pass\n")
    assert _functions(tree) == [("A.f", 3), ("A.f.g", 2)]
