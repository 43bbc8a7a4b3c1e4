"""A job whose store sits in its own drop folder does not take the store, its
WAL or its lock for dropped files (``Store.own_files``): before, a run over a
folder holding one profile and the store listed 4 new files and refused 3."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.jobs_helpers import write_job

GO = Path(__file__).parents[1] / "testdata" / "go"


def test_a_store_in_the_drop_folder_is_no_dropped_file(tmp_path):
    from pyproflab.jobs import load_job, run_job

    drop = tmp_path / "drop"
    (drop / "svc" / "v1" / "i1").mkdir(parents=True)
    shutil.copy(GO / "cpu.pb.gz", drop / "svc" / "v1" / "i1" / "cpu-1.pb.gz")
    job = write_job(
        tmp_path / "job.toml", drop=drop, store=drop / "s.duckdb", output=tmp_path / "out"
    )
    for run in range(2):  # the second run finds the store as the first left it
        source = run_job(load_job(job), log=lambda line: None).summary["sources"][0]
        assert (source["files"], source["refused"]) == (1 - run, []), source
