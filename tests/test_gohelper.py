"""The Go helper is found or built, and says so in one line when Go is absent."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pyproflab import gohelper


def test_the_digest_follows_the_sources(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(gohelper.SOURCE_DIR, src)
    before = gohelper.source_digest(src)
    (src / "main_test.go").write_text("package main\n")  # tests are not built
    assert gohelper.source_digest(src) == before
    (src / "main.go").write_text((src / "main.go").read_text() + "\n// edited\n")
    assert gohelper.source_digest(src) != before


@pytest.mark.go
def test_builds_into_the_cache_and_runs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYPROFLAB_CACHE", str(tmp_path))
    monkeypatch.delenv(gohelper.ENV_BINARY, raising=False)
    binary = gohelper.helper_binary()
    assert binary.parent == tmp_path and binary.name.endswith(gohelper.source_digest())
    out = subprocess.run([binary, "version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip().isdigit()
    assert gohelper.helper_binary() == binary  # found, not rebuilt
    assert [p.name for p in tmp_path.iterdir()] == [binary.name]  # no temporary left


def test_without_go_the_error_is_one_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYPROFLAB_CACHE", str(tmp_path))
    monkeypatch.delenv(gohelper.ENV_BINARY, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(gohelper.GoUnavailableError) as e:
        gohelper.helper_binary("pyproflab trace")
    assert str(e.value).startswith("pyproflab trace needs Go") and "\n" not in str(e.value)


def test_an_override_that_is_not_executable_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(gohelper.ENV_BINARY, str(tmp_path / "missing"))
    with pytest.raises(gohelper.GoUnavailableError, match="not an executable file"):
        gohelper.helper_binary()


@pytest.mark.go
def test_the_go_module_vets_and_passes_its_own_tests(go_bin: str, tmp_path: Path) -> None:
    from support.testenv import go_env

    env = go_env(tmp_path)
    env["GOPROXY"] = "off"  # make go-deps filled the module cache
    for args in (["vet", "./..."], ["test", "-count=1", "./..."]):
        done = subprocess.run(
            [go_bin, *args],
            cwd=gohelper.SOURCE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, f"go {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
