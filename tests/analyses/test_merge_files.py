"""merge_files (analyses/merge_files.py): the chunked, multi-process merge of files
gives what merging them in order gives, and reports unreadable files as reading
them in order does. Equality with `go tool pprof -proto` on real profiles is in
tests/conformance/test_conformance_merge.py (test_merge_files_in_chunks_equal_pprof)."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import pytest
from support.testenv import api_merge, api_read

from pyproflab.analyses import merge_files as mf
from pyproflab.encode import write_profile
from pyproflab.errors import CorruptProfileError, NotAProfileError


@pytest.fixture
def one_per_chunk(monkeypatch):
    monkeypatch.setattr(mf, "MIN_FILES_PER_WORKER", 1)


def tables(p) -> tuple:
    return (
        p.samples.to_pylist(),
        p.locations.to_pylist(),
        p.functions.to_pylist(),
        p.mappings.to_pylist(),
        (p.period, p.time_nanos, p.duration_nanos, p.comments, p.default_sample_type),
    )


def test_zero_times_give_pprofs_header(go_profiles, tmp_path: Path, one_per_chunk):
    """pprof's time over profiles some of which have none (0) is not the chunks'
    time merged: the header is taken over every file (times 3,3,2 | 0,3 -> 3)."""
    src = api_read(go_profiles["cpu"])
    files = []
    for i, t in enumerate((3, 3, 2, 0, 3)):
        path = tmp_path / f"p{i}.pb.gz"
        write_profile(dataclasses.replace(src, time_nanos=t), path)
        files.append(path)
    want = api_merge([api_read(f) for f in files])
    got = mf.merge_files([str(f) for f in files], workers=2)
    assert got.profile is not None and want.time_nanos == 3
    assert tables(got.profile) == tables(want)


def test_negative_values_merge_one_by_one(go_profiles, tmp_path: Path, one_per_chunk):
    """A profile with negative values (a diff) can cancel a sum out across chunks,
    so such files are merged one by one: the result is merge's."""
    src = api_read(go_profiles["cpu"])
    from pyproflab.analyses.sample_types import values_matrix, with_values

    neg = dataclasses.replace(src, samples=with_values(src.samples, -values_matrix(src)))
    paths = [tmp_path / "a.pb.gz", tmp_path / "b.pb.gz", tmp_path / "c.pb.gz"]
    for p, prof in zip(paths, (src, src, neg), strict=True):
        write_profile(prof, p)
    want = api_merge([api_read(f) for f in paths])
    got = mf.merge_files([str(f) for f in paths], workers=3)
    assert got.profile is not None and tables(got.profile) == tables(want)


def test_first_unreadable_file_in_order(go_profiles, tmp_path: Path, one_per_chunk):
    """Two bad files in different chunks: the error is the earlier file's, with
    prepare's infos of the files before it."""
    good = str(go_profiles["cpu"])
    text = tmp_path / "notes.txt"
    text.write_text("not a profile\n")
    cut = tmp_path / "cut.pb.gz"
    cut.write_bytes(gzip.compress(Path(good).read_bytes())[:-40])
    # Chunks: [good, good] [text] [good, cut].
    got = mf.merge_files([good, good, str(text), good, str(cut)], workers=3, prepare=_label)
    assert isinstance(got.error, NotAProfileError) and got.profile is None
    assert str(text) in str(got.error)
    assert got.infos == [good, good]
    alone = mf.merge_files([good, str(cut)], workers=1)
    assert isinstance(alone.error, CorruptProfileError | NotAProfileError)


def _label(label: str, profile):
    return profile, label


@pytest.mark.parametrize("command", ["top", "merge", "pgo"])
def test_file_commands_do_not_import_pandas(command, go_profiles, tmp_path: Path):
    """pyarrow imports pandas on its first array built from Python objects (about
    half a second of a CLI run); top, merge and pgo of files never need it."""
    import subprocess
    import sys

    files = [str(go_profiles["cpu"]), str(go_profiles["cpu2"])]
    args = {
        "top": ["top", *files, "--format", "csv"],
        "merge": ["merge", *files, "-o", str(tmp_path / "m.pb.gz")],
        "pgo": ["pgo", "--all", "--no-verify", *files, "-o", str(tmp_path / "d.pgo")],
    }[command]
    code = (
        "import sys\nfrom pyproflab.cli import main\n"
        f"assert main({args!r}) == 0\n"
        "print('pandas' in sys.modules)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "False"
