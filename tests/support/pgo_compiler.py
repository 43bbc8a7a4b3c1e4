"""The compiler's own account of which hot edges of a PGO profile it used.

``go build -pgo=PROFILE -gcflags='MODULE/...=-m=2 -d=pgodebug=1'`` prints, for
the module's packages only:

- every function's position (``FILE:LINE:COL: can inline NAME ...`` or
  ``cannot inline NAME: ...``, -m=2): its start line, in the compiler's words;
- every hot call site it inlined with the hot budget (``hot-budget check
  allows inlining for call C (cost N) at FILE:LINE:COL in function F``) or
  refused because the caller is big (``hot-big check disallows ...``);
- every call it devirtualized from the profile (``FILE:LINE:COL: PGO
  devirtualizing interface call X to Y``, -m).

A hot edge (caller, callee, offset) is *used* when a site of those prints is
at the line ``start(caller) + offset`` of the caller's file, the start line
taken from the -m=2 print of the caller. The share used is of the hot edges
whose caller is in the module and whose callee is not in the runtime (which
``pgo check`` leaves out too: preemption and inserted helpers are not calls).

What the prints cannot show: PGO changes nothing for a callee cheap enough to
inline anyway (cost <= 80) or too costly even when hot (> 2000), so the test
programs' hot callees cost 81-2000 (tests/pgoprogs/README.md).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from support.testenv import go_env

# Names are not one word: a generic function's shape holds spaces
# (``sumBy[go.shape.struct { Kind int; End int }]``).
FUNC_POS = re.compile(r"^(\S+?):(\d+):\d+: (?:can inline|cannot inline) (.+?)(?: with cost|: )")
HOT_SITE = re.compile(
    r"^hot-(?:budget check allows|big check disallows) inlining for call (.+?) "
    r"\(cost \d+\) at (\S+?):(\d+):\d+ in (?:big )?function (.+)$"
)
DEVIRT = re.compile(
    r"^(\S+?):(\d+):\d+: PGO devirtualizing (?:interface|function) call (\S+) to (\S+)$"
)
HEADER = re.compile(r"^# (\S+)$")


def path_to_prefix(path: str) -> str:
    """The linker's escaping of an import path in symbol names."""
    slash = path.rfind("/")
    out = []
    for i, ch in enumerate(path):
        b = ord(ch)
        if b <= 0x20 or (ch == "." and i > slash) or ch in '%"' or b >= 0x7F:
            out.append(f"%{b:02x}")
        else:
            out.append(ch)
    return "".join(out)


@dataclass
class CompilerView:
    """What one build printed: function starts and the sites PGO acted on."""

    output: str
    starts: dict[str, tuple[str, int]]  # linker name -> (file, start line)
    sites: set[tuple[str, int]]  # (file, line) of every hot inline or devirtualization
    prefixes: set[str]  # symbol prefixes of the module's packages
    devirtualized: list[tuple[str, int, str, str]]
    hot_inlines: list[tuple[str, int, str, str]]  # file, line, callee, caller


def build(go: str, moddir: Path, package: str, profile: Path, tmp: Path) -> CompilerView:
    """``go build`` ``package`` of the module at ``moddir`` with ``profile``."""
    env = go_env(tmp)
    listing = subprocess.run(
        [go, "list", "-f", "{{.ImportPath}} {{.Name}}", "./..."],
        cwd=moddir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout.split("\n")
    names = dict(line.split() for line in listing if line.strip())
    module = subprocess.run(
        [go, "list", "-m"], cwd=moddir, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    res = subprocess.run(
        [
            go,
            "build",
            "-o",
            os.devnull,
            f"-pgo={profile}",
            f"-gcflags={module}/...=-m=2 -d=pgodebug=1",
            package,
        ],
        cwd=moddir,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return parse(res.stdout + res.stderr, names)


def _prefix(import_path: str, names: dict[str, str]) -> str:
    return "main" if names.get(import_path) == "main" else path_to_prefix(import_path)


def parse(text: str, names: dict[str, str]) -> CompilerView:
    """Read a build's output (``names``: import path -> package name)."""
    prefix = ""
    starts: dict[str, tuple[str, int]] = {}
    sites: set[tuple[str, int]] = set()
    devirt, hot = [], []
    for line in text.splitlines():
        if m := HEADER.match(line):
            prefix = _prefix(m.group(1).strip("[]"), names)
        elif m := HOT_SITE.match(line):
            f, n = os.path.normpath(m.group(2)), int(m.group(3))
            sites.add((f, n))
            hot.append((f, n, m.group(1), m.group(4)))
        elif m := DEVIRT.match(line):
            f, n = os.path.normpath(m.group(1)), int(m.group(2))
            sites.add((f, n))
            devirt.append((f, n, m.group(3), m.group(4)))
        elif (m := FUNC_POS.match(line)) and not m.group(1).startswith("/"):
            name = m.group(3)
            full = name if name.startswith(prefix + ".") else f"{prefix}.{name}"
            starts.setdefault(full, (os.path.normpath(m.group(1)), int(m.group(2))))
    prefixes = {_prefix(p, names) for p in names}
    return CompilerView(text, starts, sites, prefixes, devirt, hot)


def _package(symbol: str) -> str:
    slash = symbol.rfind("/")
    dot = symbol.find(".", slash + 1)
    return symbol[:dot] if dot >= 0 else symbol


def used_share(view: CompilerView, edges) -> tuple[float, int, int, list]:
    """(percent of the counted hot weight the compiler used, used weight,
    counted weight, [(edge, used)]) for an ``EdgeSet``'s hot edges."""
    rows = []
    for e in edges.hot:
        if _package(e.caller) not in view.prefixes:
            continue
        pkg = _package(e.callee)
        if pkg == "runtime" or pkg.startswith(("internal/runtime/", "runtime/internal/")):
            continue
        where = view.starts.get(e.caller)
        used = where is not None and (where[0], where[1] + e.offset) in view.sites
        rows.append((e, used))
    counted = sum(e.weight for e, _ in rows)
    used_w = sum(e.weight for e, u in rows if u)
    return (100.0 * used_w / counted if counted else float("nan")), used_w, counted, rows


def ignored_profiles(go_profiles: dict[str, Path], d: Path) -> dict[str, Path]:
    """Profiles go build -pgo accepts and makes no decision with: a 0-byte file,
    a CPU profile without samples, one whose samples have single frames."""
    import dataclasses

    import pyarrow as pa

    import pyproflab

    p = pyproflab.read_profile(go_profiles["cpu"])
    ids = p.samples.column("location_ids").to_pylist()
    id_type = p.samples.schema.field("location_ids").type
    single = p.samples.set_column(0, "location_ids", pa.array([x[:1] for x in ids], id_type))
    lines = p.locations.column("lines").to_pylist()
    one_line = p.locations.set_column(
        p.locations.schema.get_field_index("lines"),
        "lines",
        pa.array([x[-1:] for x in lines], p.locations.schema.field("lines").type),
    )
    (d / "zero.pgo").write_bytes(b"")
    pyproflab.write_profile(dataclasses.replace(p, samples=p.samples.slice(0, 0)), d / "e.pgo")
    pyproflab.write_profile(
        dataclasses.replace(p, samples=single, locations=one_line), d / "sf.pgo"
    )
    return {"zero-byte": d / "zero.pgo", "empty": d / "e.pgo", "single-frame": d / "sf.pgo"}
