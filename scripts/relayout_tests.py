#!/usr/bin/env python3
"""Move the flat tests/ into a tree that mirrors pyproflab/ (issue 16), mechanically.

Run from the repository root on a clean checkout whose tests/ is still flat:

    python scripts/relayout_tests.py            # git mv + rewrites, then ruff
    python scripts/relayout_tests.py --dry-run  # print the plan only

What it does (each step a rule, so it can be re-run on a newer main):

1. Test modules (``tests/test_*.py`` that define tests) go to the folder of the
   code they test: ``DEST`` names each known file; a new file is placed by the
   words of its name (``_guess``), or stays in tests/ with a warning.
   Basenames stay unique across folders (pytest imports them by basename).
2. Everything else that is Python goes to ``tests/support/``: the helper modules
   (``pprof_oracle.py``, ``regdata.py``, ...), a ``test_*.py`` without tests
   (``test_store_helpers.py`` -> ``store_helpers.py``), ``tests/browser/``, and
   conftest.py itself (-> ``support/testenv.py``, loaded as a pytest plugin by a
   new three-line conftest.py, so fixtures are found as before).
3. What one test module imported from another (``from test_top_unit import
   build``) is cut out of it, with the module-level names it uses, into
   ``support/<name>_helpers.py``; both sides import it from there. Fixtures
   cut out this way are registered as plugins (one definition for the session).
4. Imports of moved modules are rewritten everywhere under tests/ and bench/
   (``import pprof_oracle`` -> ``from support import pprof_oracle``, lazy ones
   too); ``Path(__file__)...parent(s)`` is recomputed so it names the same
   folder from the new place; ``tests/OLD.py`` and ``"tests" / "OLD.py"`` in
   any tracked text file (Makefile, README, docs, bench, .ci) become the new path.
5. A support module that is also a script gets tests/ on sys.path in its
   ``__main__`` block, so ``python tests/support/X.py`` keeps working.
6. ruff removes the imports a cut left unused and sorts them; the script then
   checks that no test module imports another and that no name is undefined.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

TESTS = PurePosixPath("tests")
SUPPORT = TESTS / "support"

#: test module -> folder under tests/ ("" = tests/ itself: whole-package checks).
DEST: dict[str, str] = {
    # decode/, encode/ (and the protobuf bindings they use)
    "test_bad_input_decode.py": "decode",
    "test_decode.py": "decode",
    "test_decode_cext.py": "decode",
    "test_fuzz_decode.py": "decode",
    "test_hostile_decode.py": "decode",
    "test_validate.py": "decode",
    "test_proto_bindings.py": "decode",
    "test_encode.py": "encode",
    # store/
    "test_store.py": "store",
    "test_ingest.py": "store",
    "test_ingest_parallel.py": "store",
    "test_parquet.py": "store",
    "test_selection.py": "store",
    "test_lock.py": "store",
    "test_hostile_ids.py": "store",
    "test_hostile_datasets.py": "store",
    "test_hostile_faults.py": "store",
    "test_hostile_paths.py": "store",
    # sources/
    "test_gctrace.py": "sources",
    "test_prometheus_text.py": "sources",
    "test_prometheus_server.py": "sources",
    # analyses/
    "test_top_unit.py": "analyses",
    "test_merge_unit.py": "analyses",
    "test_merge_files.py": "analyses",
    "test_gc_categories.py": "analyses",
    "test_gc_join.py": "analyses",
    "test_gogc.py": "analyses",
    "test_gogc_inputs.py": "analyses",
    "test_gogc_recorded.py": "analyses",
    "test_pgo.py": "analyses",
    "test_pgo_build.py": "analyses",
    "test_regressions.py": "analyses",
    "test_regressions_fleet.py": "analyses",
    "test_regressions_planted.py": "analyses",
    "test_regressions_stats.py": "analyses",
    # reports/
    "test_reports.py": "reports",
    "test_report.py": "reports",
    "test_report_browser.py": "reports",
    "test_flame_browser.py": "reports",
    "test_untrusted_names.py": "reports",
    "test_plain_python.py": "reports",
    # cli/, jobs/
    "test_cli.py": "cli",
    "test_cli_weight.py": "cli",
    "test_user_paths.py": "cli",
    "test_jobs.py": "jobs",
    "test_crash_safety.py": "jobs",
    # the pprof oracle: our answers equal `go tool pprof`'s
    "test_conformance_merge.py": "conformance",
    "test_conformance_options.py": "conformance",
    "test_conformance_roundtrip.py": "conformance",
    "test_conformance_top.py": "conformance",
    "test_conformance_tree.py": "conformance",
    "test_fleet_scale.py": "conformance",
    # tests/ itself: top-level modules (arrays.py, collect.py) and whole-project checks
    "test_arrays.py": "",
    "test_collect.py": "",
    "test_hostile_collect.py": "",
    "test_layers.py": "",
    "test_code_size.py": "",
    "test_readme_examples.py": "",
    "test_notebooks.py": "",
    "test_demo.py": "",
    "test_fleet_integration.py": "",
    "test_fleet_service.py": "",
}

#: For a test module not in DEST: the first word of its name (after test_ and
#: hostile_) that names a folder.
WORDS: dict[str, str] = {
    "conformance": "conformance",
    "decode": "decode",
    "encode": "encode",
    "proto": "decode",
    "store": "store",
    "ingest": "store",
    "parquet": "store",
    "selection": "store",
    "lock": "store",
    "ids": "store",
    "prometheus": "sources",
    "gctrace": "sources",
    "http": "sources",
    "top": "analyses",
    "graph": "analyses",
    "merge": "analyses",
    "gc": "analyses",
    "gogc": "analyses",
    "pgo": "analyses",
    "regressions": "analyses",
    "tree": "analyses",
    "peek": "analyses",
    "traces": "analyses",
    "filters": "analyses",
    "report": "reports",
    "reports": "reports",
    "flame": "reports",
    "formatting": "reports",
    "cli": "cli",
    "job": "jobs",
    "jobs": "jobs",
    "retention": "jobs",
    "collect": "",
}

#: helper module renames inside support/ (everything else keeps its name)
RENAME = {"conftest.py": "testenv.py", "test_store_helpers.py": "store_helpers.py"}

CONFTEST = '''"""pytest's entry point for tests/: the fixtures and shared helpers live in
tests/support (``support/testenv.py`` and the modules it lists); test modules
import helpers from ``support`` only, never from each other."""

import pytest

# Helpers get pytest's assert messages too (they are imported, not collected).
pytest.register_assert_rewrite("support")

pytest_plugins = [{plugins}]
'''


def sh(*cmd: str, check: bool = True) -> str:
    return subprocess.run(cmd, check=check, capture_output=True, text=True).stdout


def _guess(name: str) -> str | None:
    words = name.removesuffix(".py").split("_")[1:]
    words = [w for w in words if w != "hostile"]
    for w in words:
        if w in WORDS:
            return WORDS[w]
    return None


def _has_tests(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and (n.name.startswith("test") or n.name.startswith("Test"))
        for n in tree.body
    )


def _is_fixture(node: ast.AST) -> bool:
    return isinstance(node, ast.FunctionDef) and any(
        "fixture" in ast.unparse(d) for d in node.decorator_list
    )


@dataclass
class Plan:
    moves: dict[PurePosixPath, PurePosixPath] = field(default_factory=dict)  # old -> new
    module_names: dict[str, str] = field(default_factory=dict)  # old import name -> new
    test_modules: set[str] = field(default_factory=set)  # import names of test modules
    cuts: dict[str, set[str]] = field(default_factory=dict)  # test module -> names wanted
    cut_modules: dict[str, str] = field(default_factory=dict)  # test module -> support name
    fixtures: set[str] = field(default_factory=set)  # fixture names cut out
    plugins: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def make_plan(root: Path) -> Plan:
    plan = Plan()
    tests = root / "tests"
    for path in sorted(tests.glob("*.py")):
        name = path.name
        tree = ast.parse(path.read_text(encoding="utf-8"))
        old = TESTS / name
        if name.startswith("test_") and _has_tests(tree):
            if name in DEST:
                folder = DEST[name]
            else:
                folder = _guess(name)
                if folder is None:
                    plan.warnings.append(f"{name}: no folder known; left in tests/")
                    folder = ""
                else:
                    plan.warnings.append(f"{name}: not in DEST; placed by name in {folder or '.'}/")
            plan.moves[old] = TESTS / folder / name if folder else old
            plan.test_modules.add(path.stem)
        else:
            new = SUPPORT / RENAME.get(name, name)
            plan.moves[old] = new
            plan.module_names[path.stem] = "support." + new.stem
    for sub in sorted(p for p in tests.iterdir() if p.is_dir()):
        # Python packages of helpers (browser/); data and Go folders stay.
        if any(sub.glob("*.py")) and not any(sub.rglob("test_*.py")):
            for f in sorted(sub.rglob("*.py")):
                rel = PurePosixPath(f.relative_to(root).as_posix())
                plan.moves[rel] = SUPPORT / rel.relative_to(TESTS)
            plan.module_names[sub.name] = "support." + sub.name
    # What test modules (and helpers) import from test modules.
    for old in plan.moves:
        if old.suffix == ".py":
            tree = ast.parse((root / old).read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module in plan.test_modules:
                    plan.cuts.setdefault(node.module, set()).update(a.name for a in node.names)
    for mod in sorted(plan.cuts):
        helper = mod.removeprefix("test_") + "_helpers"
        assert f"support.{helper}" not in plan.module_names.values(), helper
        plan.cut_modules[mod] = "support." + helper
    basenames = [n.name for n in plan.moves.values() if n.name.startswith("test_")]
    dup = {b for b in basenames if basenames.count(b) > 1}
    assert not dup, f"test basenames collide: {dup}"
    plan.plugins = ["support.testenv"]
    return plan


# --- cutting shared names out of a test module ---------------------------------------


def _defined(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _span(lines: list[str], node: ast.stmt) -> tuple[int, int]:
    """0-based [start, end) of a statement with its decorators and the comment
    lines right above it."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    return start, node.end_lineno or node.lineno


def cut(text: str, wanted: set[str], old_rel: str) -> tuple[str, str, list[str], list[str]]:
    """(the test module without the cut names, the helper module's text, names
    cut that are not fixtures, fixtures cut)."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    defs = {n: node for node in tree.body for n in _defined(node)}
    missing = wanted - set(defs)
    assert not missing, f"{old_rel}: cannot find {missing}"
    chosen: list[ast.stmt] = []
    todo = sorted(wanted)
    while todo:
        node = defs[todo.pop()]
        if node in chosen:
            continue
        chosen.append(node)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in defs and defs[sub.id] not in chosen:
                todo.append(sub.id)
    chosen.sort(key=lambda n: n.lineno)
    names = [n for node in chosen for n in _defined(node)]
    fixtures = [n for node in chosen if _is_fixture(node) for n in _defined(node)]
    imports = [
        "".join(lines[n.lineno - 1 : n.end_lineno])
        for n in tree.body
        if isinstance(n, ast.Import) or (isinstance(n, ast.ImportFrom) and n.module != "__future__")
    ]
    spans = [_span(lines, n) for n in chosen]
    helper = (
        f'"""Helpers of {old_rel} that other test modules use too\n'
        "(cut out of it by scripts/relayout_tests.py: no test module imports another)."
        '"""\n\n'
        "from __future__ import annotations\n\n"
        + "".join(imports)
        + "\n\n"
        + "\n\n".join("".join(lines[a:b]) for a, b in spans)
    )
    keep = [line for i, line in enumerate(lines) if not any(a <= i < b for a, b in spans)]
    plain = [n for n in names if n not in fixtures]
    rest = "".join(keep)
    return rest, helper, plain, fixtures


def add_import(text: str, stmt: str) -> str:
    """``stmt`` after the module's last top-level import."""
    tree = ast.parse(text)
    last = max(n.end_lineno or 0 for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom))
    lines = text.splitlines(keepends=True)
    return "".join(lines[:last]) + stmt + "\n" + "".join(lines[last:])


# --- rewriting imports and paths ---------------------------------------------------------


def rewrite_imports(text: str, plan: Plan) -> str:
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # 0-based line span -> replacement
    for node in ast.walk(tree):
        new = None
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            head, _, tail = node.module.partition(".")
            if node.module in plan.cut_modules:
                names = [a for a in node.names if a.name not in plan.fixtures]
                target = plan.cut_modules[node.module]
                new = f"from {target} import " + ", ".join(
                    a.name + (f" as {a.asname}" if a.asname else "") for a in names
                )
                if not names:
                    new = ""
            elif head in plan.module_names:
                target = plan.module_names[head] + (f".{tail}" if tail else "")
                new = f"from {target} import " + ", ".join(
                    a.name + (f" as {a.asname}" if a.asname else "") for a in node.names
                )
        elif isinstance(node, ast.Import):
            if any(a.name.partition(".")[0] in plan.module_names for a in node.names):
                assert len(node.names) == 1, ast.unparse(node)
                a = node.names[0]
                pkg, _, mod = plan.module_names[a.name].rpartition(".")
                alias = a.asname or (a.name if mod != a.name else None)
                new = f"from {pkg} import {mod}" + (f" as {alias}" if alias else "")
        if new is None:
            continue
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        indent = lines[first][: node.col_offset]
        trailer = lines[last][node.end_col_offset :].rstrip("\n")
        if new == "":
            edits.append((first, last + 1, ""))
        else:
            edits.append((first, last + 1, f"{indent}{new}{trailer}\n"))
    for first, end, repl in sorted(edits, reverse=True):
        lines[first:end] = [repl] if repl else []
    text = "".join(lines)

    # pytest.importorskip("fleet_harness"): an import by name, in a string.
    def by_name(m: re.Match[str]) -> str:
        head, rest = m["mod"].partition(".")[0], m["mod"].partition(".")[2]
        if head not in plan.module_names:
            return m[0]
        target = plan.module_names[head] + (f".{rest}" if rest else "")
        return f"importorskip({m['q']}{target}{m['q']}"

    return re.sub(r"importorskip\((?P<q>[\"'])(?P<mod>[\w.]+)(?P=q)", by_name, text)


_FILE_PATH = re.compile(
    r"Path\(__file__\)(\.resolve\(\))?"
    r"(?P<up>(?:\.parent(?![\w\[]))+|\.parents\[(?P<k>\d+)\])"
)


def rewrite_file_paths(text: str, old: PurePosixPath, new: PurePosixPath) -> str:
    """``Path(__file__)(.resolve()).parent...`` naming the same folder from ``new``."""

    def repl(m: re.Match[str]) -> str:
        up = int(m["k"]) + 1 if m["k"] is not None else m["up"].count(".parent")
        target = old.parents[up - 1]
        assert target in new.parents, (old, new, target)
        steps = len(new.parts) - len(target.parts)
        if steps == 1:
            return "Path(__file__).resolve().parent"
        return f"Path(__file__).resolve().parents[{steps - 1}]"

    return _FILE_PATH.sub(repl, text)


def rewrite_text_paths(text: str, moves: dict[PurePosixPath, PurePosixPath]) -> str:
    """``tests/OLD.py`` -> the new path, and ``"tests" / "OLD.py"`` likewise."""
    for old, new in moves.items():
        text = re.sub(r"(?<![\w./])" + re.escape(str(old)) + r"(?![\w])", str(new), text)
        if old.parent == TESTS:
            parts = " / ".join(f'"{p}"' for p in new.parts)
            text = re.sub(r'"tests"\s*/\s*"' + re.escape(old.name) + '"', parts, text)
    # a folder moved whole (tests/browser/ -> tests/support/browser/)
    folders = {(o.parent, n.parent) for o, n in moves.items() if o.parent != TESTS}
    for old_dir, new_dir in folders:
        text = re.sub(r"(?<![\w./])" + re.escape(str(old_dir)) + r"\b", str(new_dir), text)
    return text


def add_script_bootstrap(text: str) -> str:
    """tests/ on sys.path when a support module runs as a script."""
    imports_support = any(
        (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "support")
        or (isinstance(n, ast.Import) and any(a.name.startswith("support") for a in n.names))
        for n in ast.walk(ast.parse(text))
    )
    if 'if __name__ == "__main__":' not in text or not imports_support:
        return text
    assert re.search(r"^import sys$", text, re.M), "script without import sys"
    assert re.search(r"^from pathlib import .*\bPath\b", text, re.M), "script without Path"
    return text.replace(
        'if __name__ == "__main__":\n',
        'if __name__ == "__main__":\n'
        "    # Run as a file: tests/ on sys.path, for the support.* imports.\n"
        "    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))\n",
        1,
    )


# --- the whole run -----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--ruff", default=".venv/bin/ruff")
    args = ap.parse_args(argv)
    root = Path.cwd()
    if (root / "tests" / "support").exists():
        print("tests/support exists: already laid out")
        return 0
    plan = make_plan(root)
    for w in plan.warnings:
        print("warning:", w)
    for old, new in sorted(plan.moves.items()):
        if old != new:
            print(f"{old} -> {new}")
    for mod, names in sorted(plan.cuts.items()):
        print(f"cut {sorted(names)} out of {mod} -> {plan.cut_modules[mod]}")
    if args.dry_run:
        return 0

    # Read everything first, under the old names.
    texts = {old: (root / old).read_text(encoding="utf-8") for old in plan.moves}
    created: dict[PurePosixPath, tuple[str, PurePosixPath]] = {}  # new file -> (text, old origin)
    for mod, wanted in sorted(plan.cuts.items()):
        old = TESTS / f"{mod}.py"
        rest, helper, plain, fixtures = cut(texts[old], wanted, str(plan.moves[old]))
        target = plan.cut_modules[mod]
        plan.fixtures.update(fixtures)
        if fixtures:
            plan.plugins.append(target)
        if plain:
            rest = add_import(rest, f"from {target} import {', '.join(plain)}")
        texts[old] = rest
        created[SUPPORT / (target.split(".")[1] + ".py")] = (helper, old)

    for old, new in plan.moves.items():
        if old != new:
            (root / new).parent.mkdir(parents=True, exist_ok=True)
            sh("git", "mv", str(old), str(new))
    for old, new in plan.moves.items():
        text = rewrite_file_paths(rewrite_imports(texts[old], plan), old, new)
        if new.parent == SUPPORT:
            text = add_script_bootstrap(text)
        (root / new).write_text(text, encoding="utf-8")
    for new, (text, origin) in created.items():
        text = rewrite_file_paths(rewrite_imports(text, plan), origin, new)
        (root / new).write_text(text, encoding="utf-8")
    for pkg in sorted({n.parent for n in [*plan.moves.values(), *created]} - {TESTS}):
        if pkg == SUPPORT or SUPPORT in pkg.parents:
            init = root / pkg / "__init__.py"
            if not init.exists():
                init.write_text(f'"""Shared test helpers ({pkg.relative_to(TESTS)})."""\n')
    plugins = ", ".join(f'"{p}"' for p in plan.plugins)
    (root / "tests" / "conftest.py").write_text(CONFTEST.format(plugins=plugins))
    sh("git", "add", "tests")

    # Imports in every other Python file (bench/, fuzz/ ... put tests/ on sys.path
    # to use the helpers) and paths in every tracked text file.
    touched = []
    for rel in sh("git", "ls-files", "*.py").splitlines():
        if rel.startswith(("tests/", "pyproflab/")) or rel == "scripts/relayout_tests.py":
            continue
        f = root / rel
        text = f.read_text(encoding="utf-8")
        new_text = rewrite_imports(text, plan)
        if new_text != text:
            f.write_text(new_text, encoding="utf-8")
            touched.append(rel)
    moves = {o: n for o, n in plan.moves.items() if o != n}
    for rel in sh("git", "ls-files").splitlines():
        if rel.startswith(("tests/testdata/", ".git")) or rel == "scripts/relayout_tests.py":
            continue  # data, and this script's own names of the old layout
        p = root / rel
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        new_text = rewrite_text_paths(text, moves)
        if new_text != text:
            p.write_text(new_text, encoding="utf-8")

    py = ["tests", "bench"]
    sh(args.ruff, "check", "--fix", "--select", "F401,I", *py, *touched, check=False)
    sh(args.ruff, "format", *py, *touched, check=False)
    undefined = sh(args.ruff, "check", "--select", "F821,F811", *py, check=False)
    assert "F821" not in undefined and "F811" not in undefined, undefined
    check(root)
    sh("git", "add", "-A", "tests", "bench", *touched)
    long = sh(
        args.ruff, "check", "--select", "E501", "--output-format", "concise", *py, check=False
    )
    if "E501" in long:
        print("fix by hand (lines made too long by the new paths):\n" + long)
    print("done; now run the suite")
    return 0


def check(root: Path) -> None:
    """No test module imports another; conftest is imported by nobody."""
    tests = {p.stem for p in (root / "tests").rglob("test_*.py")}
    bad = []
    for p in sorted((root / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] in tests | {"conftest"}:
                    bad.append(f"{p.relative_to(root)}: from {node.module}")
            elif isinstance(node, ast.Import):
                bad += [
                    f"{p.relative_to(root)}: import {a.name}"
                    for a in node.names
                    if a.name.split(".")[0] in tests | {"conftest"}
                ]
    assert not bad, bad


if __name__ == "__main__":
    sys.exit(main())
