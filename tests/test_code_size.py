"""Short functions and small modules (issue 16): no function over 80 lines and no
module over 500 in ``pyproflab/``, unless its docstring says why.

The reason lives where a reader meets the length: a module over ``MAX_MODULE``
lines has, in its module docstring, a paragraph starting ``Longer than 500
lines:``; a function over ``MAX_FUNCTION`` lines has, in its own docstring, one
starting ``Longer than 80 lines:``. What follows the colon is the reason, a
sentence of at least ``MIN_REASON_WORDS`` words a reader can check against the
code. A module or function that has shrunk below its limit must drop the
paragraph, so no reason outlives its length.

Lines are counted from ``def`` (or the module's first line) to the last line,
docstring and comments included; a nested function counts inside its parent too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pyproflab"
MAX_FUNCTION = 80
MAX_MODULE = 500
MIN_REASON_WORDS = 8

_REASON = re.compile(r"(?:^|\n)[ \t]*Longer than (\d+) lines:(.*?)(?=\n[ \t]*\n|\Z)", re.S)


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "_proto" not in p.parts)


def _functions(tree: ast.Module) -> list[tuple[str, int, str | None]]:
    """(qualified name, lines, docstring) of every function and method, nested ones
    included."""
    out: list[tuple[str, int, str | None]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                n = (child.end_lineno or child.lineno) - child.lineno + 1
                out.append((name, n, ast.get_docstring(child)))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _reason_problem(doc: str | None, lines: int, limit: int) -> str | None:
    """What is wrong with the length reason of a docstring (None: nothing).

    Over the limit: a ``Longer than {limit} lines:`` paragraph with a reason of
    ``MIN_REASON_WORDS`` words or more is required. At or under it: no such
    paragraph may be left. A paragraph naming another limit is always wrong."""
    found = _REASON.findall(doc or "")
    if any(int(n) != limit for n, _ in found):
        return f"says 'Longer than N lines:' with N other than {limit}"
    if lines <= limit:
        return f"is {lines} lines, not over {limit}: drop its reason" if found else None
    if not found:
        return f"is {lines} lines: split it, or say 'Longer than {limit} lines: <why>'"
    words = len(" ".join(r for _, r in found).split())
    if words < MIN_REASON_WORDS:
        return f"is {lines} lines and its reason has {words} words (at least {MIN_REASON_WORDS})"
    return None


def _problems(text: str, rel: str) -> list[str]:
    """Every module or function of ``text`` whose length and reason disagree."""
    tree = ast.parse(text, rel)
    out = []
    module = _reason_problem(ast.get_docstring(tree), len(text.splitlines()), MAX_MODULE)
    if module:
        out.append(f"{rel} {module}")
    for name, n, doc in _functions(tree):
        problem = _reason_problem(doc, n, MAX_FUNCTION)
        if problem:
            out.append(f"{rel}::{name} {problem}")
    return out


def test_long_modules_and_functions_say_why_in_their_docstring() -> None:
    problems = []
    for path in _modules():
        problems += _problems(
            path.read_text(encoding="utf-8"), path.relative_to(PACKAGE).as_posix()
        )
    assert not problems, "\n".join(problems)


def _module(doc: str, body_lines: int) -> str:
    return f'"""{doc}"""\n' + "x = 1\n" * body_lines


def _function(doc: str, body_lines: int) -> str:
    return f'def f():\n    """{doc}"""\n' + "    x = 1\n" * body_lines


def test_the_checker_wants_a_reason_over_the_limit_and_none_under_it() -> None:
    reason = "Longer than 500 lines: the decoder's two paths are compared line by line."
    long_doc = f"Long.\n\n{reason}\n"
    assert _problems(_module("Short.", 499), "m.py") == []  # 500 lines
    assert _problems(_module("Long.", 500), "m.py") == [
        "m.py is 501 lines: split it, or say 'Longer than 500 lines: <why>'"
    ]
    assert _problems(_module(long_doc, 600), "m.py") == []
    assert "drop its reason" in _problems(_module(f"Short.\n\n{reason}\n", 10), "m.py")[0]
    terse = "Long.\n\nLonger than 500 lines: it is.\n"
    assert "has 2 words" in _problems(_module(terse, 600), "m.py")[0]
    other = "Long.\n\nLonger than 80 lines: " + "word " * 9
    assert "other than 500" in _problems(_module(other, 600), "m.py")[0]


def test_the_checker_reads_function_docstrings() -> None:
    why = "Longer than 80 lines: one argparse option per statement, in the help's order."
    assert _problems(_function("Short.", 70), "m.py") == []
    assert _problems(_function("Long.", 90), "m.py") == [
        "m.py::f is 92 lines: split it, or say 'Longer than 80 lines: <why>'"
    ]
    assert _problems(_function(f"Long.\n\n    {why}\n    ", 90), "m.py") == []
    assert "drop its reason" in _problems(_function(f"Short.\n\n    {why}\n    ", 5), "m.py")[0]


def test_the_counter_sees_methods_and_nested_functions() -> None:
    tree = ast.parse("class A:\n    def f(self):\n        def g():\n            pass\n")
    assert [(n, k) for n, k, _ in _functions(tree)] == [("A.f", 3), ("A.f.g", 2)]
