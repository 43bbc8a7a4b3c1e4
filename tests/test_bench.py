"""make bench's sections (bench/): not their timings, which no test asserts, but
that the two sides a section times compute the same answer, as it checks."""

from __future__ import annotations

from pathlib import Path


def test_the_fleet_and_files_sections_top_shows_every_row_of_pprofs(
    tmp_path: Path, corpus_dir: Path, pprof
) -> None:
    # top trims nodes under 0.5% by default, as pprof; the sections ask both for every row.
    from bench.__main__ import EXACT_TOP, OURS_EXACT_TOP, same_rows
    from bench.common import LARGE_CPU, pprof_cmd, pyproflab_cmd, run_process

    ours, theirs = tmp_path / "top.csv", tmp_path / "pprof.txt"
    run_process(pyproflab_cmd("top", str(LARGE_CPU), *OURS_EXACT_TOP), stdout=ours)
    run_process(pprof_cmd(*EXACT_TOP, str(LARGE_CPU)), stdout=theirs)
    assert same_rows(ours, theirs).startswith("(rows equal to pprof's")


def test_hostile_judges_the_hostile_files_not_each_tools_floor() -> None:
    # The tiny real profile shows what each tool costs before a profile does (pyarrow's
    # and numpy's pages): 6x pprof's RSS, a floor, not a miss of the 2x target.
    from bench.hostile import TINY, _verdict

    assert "met" not in _verdict(TINY, 6.08)
    assert _verdict("label bomb", 2.65).endswith("NOT met")
    assert _verdict("label bomb", 1.50).endswith(": met")


def test_a_commands_peak_rss_is_its_own_not_the_benchs() -> None:
    # A child's peak RSS starts at its parent's high-water mark on Linux; the bench
    # grows to hundreds of MiB making its inputs (a 300 MiB buffer here, freed).
    import subprocess
    import sys

    code = (
        "import sys\n"
        "buf = bytearray(300 << 20)\n"
        "buf[::4096] = bytes(len(range(0, len(buf), 4096)))\n"
        "del buf\n"
        "from bench.common import run_process\n"
        "print(run_process([sys.executable, '-c', 'pass'])[1])\n"
    )
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) < 100 << 20


def test_an_unknown_section_is_one_line_before_any_section_runs(capsys) -> None:
    # sizing.md: `python -m bench --only SECTION[,SECTION...]`; `--only nonsense` was a
    # KeyError traceback, and `--only decode,nonsense` ran decode first.
    from bench.__main__ import SECTIONS, main

    assert main(["--only", "decode,nonsense"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "'nonsense'" in err and "Traceback" not in err
    assert all(name in err for name in SECTIONS)
