"""Job files checked by one schema, and exit codes a scheduler can trust (issue 35,
findings 4 and 5): 0 nothing over the thresholds, 1 findings, 2 a failure of a
source, an output or the spec; a run that fails is never "unchanged" next time."""

from __future__ import annotations

import dataclasses
import re
import socket
from pathlib import Path

import pytest
from support.jobs_helpers import REPO, make_drop, write_job

from pyproflab.cli import main
from pyproflab.errors import UsageError
from pyproflab.jobs import keys, load_job, run_job, spec

BASE = '[job]\nname = "x"\nstore = "s.duckdb"\noutput = "out"\n'
SOURCE = '[[source]]\nkind = "drop"\npath = "in"\n'


def _load(tmp_path: Path, text: str):
    job = tmp_path / "job.toml"
    job.write_text(text, encoding="utf-8")
    return load_job(job)


# (the TOML after [job], the section and key the one-line error names)
BAD = [
    (SOURCE + 'batch_size = "64"', "[[source]] #1: batch_size must be an integer"),
    ('[[source]]\nkind = "drop"\npath = 7', "[[source]] #1: path must be a non-empty string"),
    (SOURCE + 'min_age_seconds = "soon"', "min_age_seconds must be a number"),
    (SOURCE + "service = 42", "service must be a non-empty string"),
    (SOURCE + 'labels = "x"', "labels must be a table of strings"),
    ('[retention]\nmax_age_days = "30"', "[retention]: max_age_days must be a number"),
    ("[retention]\nmax_age_days = 1e308", "max_age_days must be a number above 0, up to 36500"),
    ("[retention]\nmax_age_days = inf", "max_age_days must be a number"),
    ("[retention]\nmax_age_days = nan", "max_age_days must be a number"),
    ("[retention]\nkeep_runs = -5", "keep_runs must be an integer from 0, up to"),
    ('[retention]\nkeep_runs = "all"', "keep_runs must be an integer"),
    ('[regressions]\nthreshold_pct = "ten"', "[regressions]: threshold_pct must be a number"),
    ("[regressions]\nfdr = 7", "fdr must be a number above 0, below 1"),
    ("[regressions]\nresamples = -3", "resamples must be an integer from 100, up to"),
    ("[regressions]\nresamples = 1e12", "resamples must be an integer"),
    ('[gogc]\nbudget = "lots"', "[gogc]: budget bad size 'lots'"),
    ("[pgo]\ntop = -1", "[pgo]: top must be an integer from 1, up to"),
    ('[selection]\nsince = "yesterday-ish"', "[selection]: since bad time"),
    (
        '[[source]]\nkind = "collect"\ntargets = "t.toml"\ntypes = ["cpuu"]',
        "[[source]] #1: types must be a list of cpu, heap, allocs, goroutine, mutex, block, trace",
    ),
]


@pytest.mark.parametrize(("toml", "words"), BAD, ids=[w for _, w in BAD])
def test_a_bad_value_is_one_line_naming_its_key(tmp_path, toml, words):
    with pytest.raises(UsageError) as ei:
        _load(tmp_path, BASE + toml + "\n")
    msg = str(ei.value)
    assert msg.startswith(str(tmp_path / "job.toml")) and words in msg and "\n" not in msg


def test_wait_true_is_not_a_number(tmp_path):
    with pytest.raises(UsageError, match=r"\[job\]: wait must be a number .*got True"):
        _load(tmp_path, BASE + "wait = true\n")


def test_cli_bad_spec_is_exit_2_without_traceback(tmp_path, capsys):
    job = tmp_path / "job.toml"
    job.write_text(BASE + SOURCE + 'batch_size = "64"\n', encoding="utf-8")
    assert main(["job", "run", str(job)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "batch_size must be an integer from 1, up to 100000 (got '64')" in err
    assert not (tmp_path / "s.duckdb").exists()  # nothing ran


def test_every_field_of_every_section_has_a_rule():
    pairs = {
        "regressions": spec.RegressionsSpec,
        "gogc": spec.GogcSpec,
        "pgo": spec.PgoSpec,
        "retention": spec.RetentionSpec,
    }
    for section, cls in pairs.items():
        names = {f.name for f in dataclasses.fields(cls)}
        if section == "regressions":  # its other keys are the analysis's options
            from pyproflab.analyses.options import RegressionsOptions

            names = names - {"options"} | set(RegressionsOptions.names()) - {"rank_by"}
        assert set(keys.rules(section)) == names, section
    job_fields = {f.name for f in dataclasses.fields(spec.JobSpec)}
    assert set(keys.JOB) <= job_fields
    # [[source]]: each kind's own keys (jobs.source_kinds.KINDS), each with a rule.
    from pyproflab.jobs.source_kinds import KINDS, rules

    for kind in KINDS.values():
        assert set(rules(kind)) == {"kind"} | {k.name for k in kind.keys}, kind.name


def test_good_values_still_load(tmp_path):
    s = _load(
        tmp_path,
        BASE
        + "wait = 30\nformats = ['json', 'html']\n"
        + SOURCE
        + "batch_size = 8\nmin_age_seconds = 1.5\nlabels = { team = 'a' }\n"
        + "[selection]\nservice = ['a', 'b']\nsince = '7d'\n"
        + "[regressions]\nthreshold_pct = 5\nfdr = 0.1\nresamples = 200\nover_time_since = '3d'\n"
        + "[gogc]\nbudget = '2GiB'\ncandidates = [50, 100, 'off']\n"
        + "[pgo]\ntop = 3\n[retention]\nmax_age_days = 30\nkeep_runs = 0\n",
    )
    assert s.sources[0].batch_size == 8 and s.regressions.options.fdr == 0.1 and s.wait == 30.0
    assert s.gogc.candidates == [50, 100, "off"] and s.retention.keep_runs == 0


def test_example_job_loads():
    load_job(REPO / "examples" / "job.toml")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once the socket is: connections are refused


def test_collect_source_whose_targets_refuse_is_exit_2_and_never_unchanged(tmp_path, capsys):
    targets = tmp_path / "targets.toml"
    targets.write_text(
        '[[target]]\nservice = "a"\nversion = "v1"\ninstance = "i"\n'
        f'url = "http://127.0.0.1:{_closed_port()}"\ntypes = ["heap"]\n',
        encoding="utf-8",
    )
    job = tmp_path / "job.toml"
    job.write_text(
        BASE + '[[source]]\nkind = "collect"\ntargets = "targets.toml"\nseconds = 1\n'
        "timeout = 2\nretries = 0\nmetrics_interval = 0\n",
        encoding="utf-8",
    )
    for _ in range(2):
        assert main(["job", "run", str(job)]) == 2
        out = capsys.readouterr()
        assert "collect source failed: collect: every fetch failed" in out.err
        assert "unchanged" not in out.out


def test_a_run_failing_after_its_outputs_is_recorded_failed(
    go_profiles, tmp_path, monkeypatch, capsys
):
    """A crash after the outputs were published (here: pruning them) is exit 2
    and the run is recorded as failed: the next run analyses again, never
    "unchanged" with the failed run's exit code."""
    from pyproflab.jobs import outputs
    from pyproflab.store import Store

    make_drop(go_profiles["cpu"], tmp_path / "drop", n=3)
    job = write_job(
        tmp_path / "job.toml",
        drop=tmp_path / "drop",
        store=tmp_path / "s.duckdb",
        output=tmp_path / "out",
        pgo=False,
    )

    def boom(*a, **k):
        raise RuntimeError("bug after the outputs")

    monkeypatch.setattr(outputs, "prune", boom)
    assert main(["job", "run", str(job)]) == 2
    assert "RuntimeError: bug after the outputs" in capsys.readouterr().err
    monkeypatch.undo()
    with Store.open(tmp_path / "s.duckdb", read_only=True) as store:
        runs = store.sql(
            "SELECT run_id, exit_code, finished_at IS NOT NULL AS done FROM job_runs"
        ).to_pylist()
    assert runs == [{"run_id": 1, "exit_code": 2, "done": True}]
    code = main(["job", "run", str(job)])
    line = capsys.readouterr().out
    assert code in (0, 1) and re.match(r"test-job: run 2: ", line), line
    assert main(["job", "run", str(job)]) == code
    assert "unchanged since run 2" in capsys.readouterr().out


def test_the_systemd_unit_fails_on_2_only():
    """0 and 1 (findings) are success; 2 (and anything else) is a failure."""
    unit = (REPO / "examples" / "pyproflab-job.service").read_text(encoding="utf-8")
    status = [
        line.split("=", 1)[1].split()
        for line in unit.splitlines()
        if line.startswith("SuccessExitStatus=")
    ]
    assert status == [["1"]]
    assert "job run" in unit and "Type=oneshot" in unit


def test_a_crash_in_any_command_is_exit_2_not_1(monkeypatch, capsys):
    from pyproflab.cli import profiles

    def boom(self, args):
        raise RuntimeError("bug")

    monkeypatch.setattr(profiles.Command, "run", boom)
    assert main(["profiles", "--db", "x.duckdb"]) == 2
    assert "RuntimeError: bug" in capsys.readouterr().err


def test_collect_problems_beside_stored_profiles_are_on_the_run_line(go_profiles, tmp_path):
    """A collect target skipped (its auth_env unset) or a /metrics scrape that
    failed beside a target that delivered left the line as if all had landed:
    'jc: run 1: 2 new profiles, 2 selected, 0 findings, ...; exit 0' (the CLI's
    collect exits 1 and says '1 targets skipped'). The line now counts them."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    heap = go_profiles["heap"].read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:  # a heap profile; no /metrics (404)
            found = self.path.startswith("/debug/pprof/heap")
            body = heap if found else b"404 page not found\n"
            self.send_response(200 if found else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        (tmp_path / "targets.toml").write_text(
            f'[[target]]\nservice = "a"\nversion = "v1"\ninstance = "i-1"\n'
            f'url = "http://127.0.0.1:{port}"\ntypes = ["heap"]\n\n'
            f'[[target]]\nservice = "a"\nversion = "v1"\ninstance = "i-2"\n'
            f'url = "http://localhost:{port}"\ntypes = ["heap"]\n'
            'auth_env = "PYPROFLAB_TEST_UNSET_AUTH"\n',
            encoding="utf-8",
        )
        job = _load(
            tmp_path,
            BASE + '[[source]]\nkind = "collect"\ntargets = "targets.toml"\nseconds = 1\n'
            "timeout = 30\nretries = 0\n",
        )
        result = run_job(job, log=lambda line: None)
    finally:
        server.shutdown()
        server.server_close()
    assert ": run 1: 1 new profile, 1 target skipped, " in result.line, result.line
    source = result.summary["sources"][0]
    assert (source["new"], source["targets_skipped"]) == (1, 1), source
    scrapes = source["scrapes_failed"]
    assert scrapes >= 1, source
    failed = f"{scrapes} scrape{'s' * (scrapes != 1)} failed"
    assert f": run 1: 1 new profile, 1 target skipped, {failed}, 1 selected" in result.line
    assert result.exit_code == 0, result.line
