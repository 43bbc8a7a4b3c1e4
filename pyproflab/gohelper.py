"""pyproflab's helper in Go (``pyproflab/_go``): found, or built on first use.

Some questions need Go's own libraries: execution traces are read with
golang.org/x/exp/trace, and PGO profiles are checked against source with
go/parser. Those parts run one binary, ``pyproflab-go``, whose subcommands are
listed in ``pyproflab/_go/main.go``. Everything else in pyproflab runs
without Go.

Rules:

- ``PYPROFLAB_GO_HELPER``, when set, names the binary to run, as is.
- Otherwise the binary lives in the cache (``$PYPROFLAB_CACHE``, else
  ``$XDG_CACHE_HOME/pyproflab``, else ``~/.cache/pyproflab``) under a name
  holding the digest of the helper's Go sources, so an edited or upgraded
  source is a new binary and a stale one is never run.
- A missing binary is built there with ``go build`` (``make setup`` does it
  ahead of time), into a temporary name renamed into place, so two processes
  building at once both end with a whole binary.
- Without ``go`` on PATH, or when the build fails, the one-line
  ``GoUnavailableError`` says which command needs Go and why.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pyproflab.errors import UsageError

SOURCE_DIR = Path(__file__).resolve().parent / "_go"
ENV_BINARY = "PYPROFLAB_GO_HELPER"
BUILD_TIMEOUT = 600.0


class GoUnavailableError(UsageError):
    """The Go helper is needed and cannot be found or built."""


def source_files(root: Path = SOURCE_DIR) -> list[Path]:
    """The files a build reads: go.mod, go.sum and every non-test .go file."""
    out = [p for p in (root / "go.mod", root / "go.sum") if p.exists()]
    for path in sorted(root.rglob("*.go")):
        rel = path.relative_to(root).parts
        if path.name.endswith("_test.go") or "testdata" in rel:
            continue
        out.append(path)
    return out


def source_digest(root: Path = SOURCE_DIR) -> str:
    """A digest of the helper's sources (names and bytes), 16 hex digits."""
    h = hashlib.sha256()
    for path in source_files(root):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    """Where built helpers are kept (see the module rules)."""
    if os.environ.get("PYPROFLAB_CACHE"):
        return Path(os.environ["PYPROFLAB_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "pyproflab"


def helper_binary(needed_by: str = "this command") -> Path:
    """The path of a runnable helper, building it first when needed.

    ``needed_by`` names the command in the error raised when Go is absent.
    """
    override = os.environ.get(ENV_BINARY)
    if override:
        if not os.access(override, os.X_OK):
            raise GoUnavailableError(f"{ENV_BINARY}={override}: not an executable file")
        return Path(override)
    target = cache_dir() / f"pyproflab-go-{source_digest()}"
    if target.exists():
        return target
    return build(target, needed_by)


def build(target: Path, needed_by: str = "this command") -> Path:
    """``go build`` the helper into ``target`` (see the module rules)."""
    go = shutil.which("go")
    if go is None:
        raise GoUnavailableError(
            f"{needed_by} needs Go (1.26 or newer) on PATH to build its helper, pyproflab-go"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        done = subprocess.run(
            [go, "build", "-trimpath", "-o", str(tmp), "."],
            cwd=SOURCE_DIR,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT,
        )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise GoUnavailableError(f"{needed_by}: building pyproflab-go failed: {last}")
        os.replace(tmp, target)
    except subprocess.TimeoutExpired:
        raise GoUnavailableError(
            f"{needed_by}: building pyproflab-go took over {BUILD_TIMEOUT:.0f} s"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)
    return target


def main(argv: list[str] | None = None) -> int:
    """``python -m pyproflab.gohelper build``: build the helper now (make setup)."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["build"]:
        print("usage: python -m pyproflab.gohelper build", file=sys.stderr)
        return 2
    if shutil.which("go") is None and not os.environ.get(ENV_BINARY):
        print("pyproflab-go: Go is not on PATH; the commands that need it will say so")
        return 0
    try:
        print(helper_binary("make setup"))
    except GoUnavailableError as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
