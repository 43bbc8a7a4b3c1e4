"""PGO export: the edges against `go tool preprofile`, the output against
`go tool pprof -proto`, trimming, safeguards, weighting, selection, refusals, CLI."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pytest
from support import pprof_oracle as oracle

import pyproflab
from pyproflab.analyses import pgo as pgo_mod
from pyproflab.analyses.pgo_edges import (
    EdgeKey,
    build_edge_set,
    compute_edges,
    diff_edges,
    fold_preemption,
    parse_preprofile,
    preprofile_edges,
)
from pyproflab.cli import main as cli_main
from pyproflab.errors import UsageError

CPU = ("cpu", "cpu2")


@pytest.fixture(scope="module")
def cpu_files(go_profiles) -> list[Path]:
    return [go_profiles[k] for k in CPU]


def _write(profile, path: Path) -> Path:
    pyproflab.write_profile(profile, path)
    return path


# --- edges ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", CPU)
def test_python_edges_equal_preprofile(go_profiles, kind):
    path = go_profiles[kind]
    ours = compute_edges(pyproflab.read_profile(path))
    theirs = preprofile_edges(path)
    assert ours.total > 0 and len(ours) > 3
    assert ours.weights() == theirs.weights()
    assert [e.key for e in ours.edges] == [e.key for e in theirs.edges]  # same order
    assert [e.hot for e in ours.edges] == [e.hot for e in theirs.edges]


def test_hot_cutoff_is_the_compilers():
    # Cumulative shares 90, 99 (not > 99), 100 (> 99: the last hot edge), then cold.
    es = build_edge_set(
        {
            EdgeKey("a", "b", 1): 900,
            EdgeKey("a", "c", 1): 90,
            EdgeKey("c", "d", 0): 8,
            EdgeKey("x", "y", 0): 2,
        }
    )
    assert [e.weight for e in es.edges] == [900, 90, 8, 2]
    assert [e.hot for e in es.edges] == [True, True, True, False]
    assert es.edges[1].cum_share == pytest.approx(99.0)


def test_parse_preprofile_format():
    text = "GO PREPROFILE V1\nmain.a\nmain.b\n3 40\nmain.a\nmain.c\n1 10\n"
    es = parse_preprofile(text)
    assert es.total == 50
    assert es.edges[0].key == EdgeKey("main.a", "main.b", 3)
    with pytest.raises(pyproflab.ProflabError):
        parse_preprofile("nope\n")


# --- output equals pprof -proto --------------------------------------------------------


HIDE_PREEMPT = "-hide=^runtime\\.asyncPreempt$"


def _preempt_only_as_leaf(files) -> int:
    """Weight (samples/count) of the samples with a leaf runtime.asyncPreempt;
    asserts it is never deeper (so pprof's -hide, which drops the frame
    anywhere, equals folding the leaf)."""
    leaves = 0
    for path in files:
        p = pyproflab.read_profile(path)
        fn = dict(
            zip(
                p.functions.column("id").to_pylist(),
                p.functions.column("name").to_pylist(),
                strict=True,
            )
        )
        pre = {
            lid
            for lid, lines in zip(
                p.locations.column("id").to_pylist(),
                p.locations.column("lines").to_pylist(),
                strict=True,
            )
            if any(fn.get(ln["function_id"]) == "runtime.asyncPreempt" for ln in lines)
        }
        values = p.samples.column("values").to_pylist()
        for stack, v in zip(p.samples.column("location_ids").to_pylist(), values, strict=True):
            assert not pre.intersection(stack[1:])
            leaves += v[0] if stack and stack[0] in pre and len(stack) > 1 else 0
    return leaves


@pytest.mark.parametrize("fold", [True, False])
def test_untrimmed_equals_pprof_proto(cpu_files, tmp_path, pprof, fold):
    """Without folding, the output is pprof's merge; folding preemption, it is
    pprof's merge with runtime.asyncPreempt hidden."""
    res = pgo_mod.pgo_files(cpu_files, fold_preempt=fold)
    assert res.ok, res.refusal
    assert not res.safeguarded  # profgen runs no safeguarded function on CPU
    leaves = _preempt_only_as_leaf(cpu_files)
    assert leaves > 0  # the recordings hold preempted samples
    assert res.preempt_folded[1] == (leaves if fold else 0)
    extra = [HIDE_PREEMPT] if fold else []
    out = res.write(tmp_path / "default.pgo")
    assert res.verified is not None and res.verified.weights() == res.edges.weights()
    types = oracle.sample_types(out)
    assert types == [("samples", "count"), ("cpu", "nanoseconds")]
    for i, (_, unit) in enumerate(types):
        for cum in (False, True):
            ours = oracle.top(out, sample_index=i, unit=unit, cum=cum)
            theirs = oracle.top(cpu_files, sample_index=i, unit=unit, cum=cum, extra=extra)
            assert ours.multiset() == theirs.multiset(), (i, cum)
            assert ours.total == theirs.total
    # And the edges equal preprofile's on pprof's own merge of the inputs.
    merged = tmp_path / "pprof.pb.gz"
    oracle.run_pprof(["-proto", *extra, f"-output={merged}", *map(str, cpu_files)])
    assert preprofile_edges(merged).weights() == res.edges.weights()
    assert any(e.callee == "runtime.asyncPreempt" for e in res.edges.edges) != fold


def test_labels_and_zero_samples_dropped(cpu_files):
    res = pgo_mod.pgo_files(cpu_files)
    s = res.profile.samples
    assert all(not x for x in s.column("labels").to_pylist())
    assert all(any(v) for v in s.column("values").to_pylist())
    # profgen labels some samples; the inputs have labels, the output none.
    src = pyproflab.read_profile(cpu_files[0]).samples.column("labels").to_pylist()
    assert any(src)
    starts = res.profile.functions.column("start_line").to_pylist()
    assert any(x > 0 for x in starts)  # start lines kept


# --- trimming --------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 3])
def test_trim_keeps_preprofile_edges(cpu_files, tmp_path, k):
    full = pgo_mod.pgo_files(cpu_files)
    trimmed = pgo_mod.pgo_files(cpu_files, trim_leaf=k)
    assert trimmed.trimmed and not trimmed.notes
    a = full.write(tmp_path / "full.pgo")
    b = trimmed.write(tmp_path / f"trim{k}.pgo")
    ea, eb = preprofile_edges(a), preprofile_edges(b)
    assert ea.weights() == eb.weights()
    assert [e.key for e in ea.hot] == [e.key for e in eb.hot]
    assert b.stat().st_size < a.stat().st_size
    assert all(len(x) <= k for x in trimmed.profile.samples.column("location_ids").to_pylist())


def test_trim_that_changes_edges_is_skipped(cpu_files):
    res = pgo_mod.pgo_files(cpu_files, trim_leaf=1)
    assert res.ok and not res.trimmed
    assert any("not trimmed" in n for n in res.notes)
    assert res.edges.weights() == pgo_mod.pgo_files(cpu_files).edges.weights()


# --- safeguards ------------------------------------------------------------------------


def test_safeguard_renames_and_keeps_weight(cpu_files, tmp_path):
    plain = pgo_mod.pgo_files(cpu_files)
    guarded = pgo_mod.pgo_files(cpu_files, safeguards=["main.fib"])
    assert guarded.safeguarded["main.fib"] > 0
    names = set(guarded.profile.functions.column("name").to_pylist())
    assert "main.fib" not in names and "main.fib" + pgo_mod.SAFEGUARD_SUFFIX in names
    # Same total weight (so the 99% cutoff of everything else stays) and same
    # edges once the suffix is taken off.
    assert guarded.edges.total == plain.edges.total

    def unguard(es):
        return {
            EdgeKey(
                k.caller.removesuffix(pgo_mod.SAFEGUARD_SUFFIX),
                k.callee.removesuffix(pgo_mod.SAFEGUARD_SUFFIX),
                k.offset,
            ): w
            for k, w in es.weights().items()
        }

    assert unguard(guarded.edges) == plain.edges.weights()
    out = guarded.write(tmp_path / "g.pgo")
    theirs = preprofile_edges(out)
    assert not any("main.fib" in (e.caller, e.callee) for e in theirs.edges)
    assert any(e.callee == "main.fib [pgo-safeguard]" for e in theirs.edges)


def test_default_safeguards():
    assert "runtime.gopark" in pgo_mod.DEFAULT_SAFEGUARDS
    assert any("loopyWriter" in n for n in pgo_mod.DEFAULT_SAFEGUARDS)


# --- weighting -------------------------------------------------------------------------


def test_duration_weighting_is_exact(cpu_files, tmp_path):
    p = pyproflab.read_profile(cpu_files[0])
    long = _write(dataclasses.replace(p, duration_nanos=p.duration_nanos * 6), tmp_path / "l.pb.gz")
    res = pgo_mod.pgo_files([cpu_files[0], long], weight="duration")
    assert res.ok and res.weight == "duration"
    f_short, f_long = (i.factor for i in res.inputs)
    assert f_long == pgo_mod.RATE_RESOLUTION and f_short == 6 * pgo_mod.RATE_RESOLUTION
    folded = fold_preemption(pgo_mod.strip_profile(p))[0]
    base = compute_edges(folded).weights()
    assert res.edges.weights() == {k: w * (f_short + f_long) for k, w in base.items()}
    # --weight none: the same two profiles count equally; the old names still work.
    s = pgo_mod.pgo_files([cpu_files[0], long], weight="none")
    assert s.edges.weights() == {k: 2 * w for k, w in base.items()}
    assert (
        pgo_mod.pgo_files([cpu_files[0], long], weight="sum").edges.weights() == s.edges.weights()
    )
    assert pgo_mod.pgo_files([cpu_files[0], long], weight="rate").weight == "duration"


def test_duration_needs_duration(cpu_files, tmp_path):
    p = pyproflab.read_profile(cpu_files[0])
    nodur = _write(dataclasses.replace(p, duration_nanos=0), tmp_path / "n.pb.gz")
    res = pgo_mod.pgo_files([nodur], weight="duration")
    assert not res.ok and "duration" in res.refusal


def _as_instance(p, name: str, *, times: int = 1, start: int = 0):
    """``p`` with every function renamed NAME.FUNC (so each instance's edges are
    told apart in the merge), its values and duration multiplied by ``times``."""
    f = p.functions
    for col in ("name", "system_name"):
        renamed = pa.array([f"{name}.{x}" for x in f.column(col).to_pylist()], pa.string())
        f = f.set_column(f.schema.get_field_index(col), col, renamed)
    vals = p.samples.column("values").to_pylist()
    scaled = pa.array([[v * times for v in x] for x in vals], p.samples.schema.field("values").type)
    return dataclasses.replace(
        p,
        functions=f,
        samples=p.samples.set_column(1, "values", scaled),
        duration_nanos=p.duration_nanos * times,
        time_nanos=p.time_nanos + start,
    )


def _instance_shares(res) -> dict[str, float]:
    """Each instance's share (%) of the merged profile's edge weight."""
    out: dict[str, float] = {}
    for e in res.edges.edges:
        who = e.caller.split(".", 1)[0]
        assert e.callee.startswith(who + ".")
        out[who] = out.get(who, 0.0) + 100.0 * e.weight / res.edges.total
    return out


def test_instance_weighting_one_instance_ran_10x_longer(cpu_files, tmp_path):
    """Instance a ran 10x longer than b and c (one profile, 10x the duration and
    samples; and then ten profiles): --weight instance gives each a third."""
    p = pyproflab.read_profile(cpu_files[0])
    files = [
        _write(_as_instance(p, "a", times=10), tmp_path / "a.pb.gz"),
        _write(_as_instance(p, "b"), tmp_path / "b.pb.gz"),
        _write(_as_instance(p, "c"), tmp_path / "c.pb.gz"),
    ]
    none = _instance_shares(pgo_mod.pgo_files(files, weight="none"))
    assert none["a"] == pytest.approx(100 * 10 / 12)
    for weight in ("instance", "duration"):  # equal rates per second: both even it out
        shares = _instance_shares(pgo_mod.pgo_files(files, weight=weight))
        assert shares == pytest.approx({k: 100 / 3 for k in "abc"}, abs=0.1), weight

    # Ten profiles of a, one of b and c, in a store: duration weighs each profile
    # (a brings ten), instance each instance.
    lab = pyproflab.open(tmp_path / "s.duckdb")
    for k in range(10):
        lab.ingest(
            _write(_as_instance(p, "a", start=k * 10**10), tmp_path / f"a{k}.pb.gz"),
            service="svc",
            instance="a",
        )
    for name in "bc":
        lab.ingest(
            _write(_as_instance(p, name), tmp_path / f"{name}1.pb.gz"), service="svc", instance=name
        )
    from pyproflab.store.select import Selection

    def shares(weight):
        res = pgo_mod.pgo(lab.store, Selection(service="svc"), all=True, weight=weight)
        assert len(res.inputs) == 12
        return _instance_shares(res)

    assert shares("duration")["a"] == pytest.approx(100 * 10 / 12, abs=0.1)
    assert shares("instance") == pytest.approx({k: 100 / 3 for k in "abc"}, abs=0.1)
    lab.store.close()


def test_instance_weighting_tells_two_services_pod_0_apart(cpu_files, tmp_path):
    """Services eu and us each run an instance named pod-0 (us also pod-1); eu's ran
    10x longer. --weight instance counted the two pod-0 as one instance (the name
    alone): eu/pod-0 got 45.5% and us/pod-0 4.5%, us/pod-1 50%, not a third each."""
    p = pyproflab.read_profile(cpu_files[0])
    lab = pyproflab.open(tmp_path / "s.duckdb")
    for tag, service, instance, times in (
        ("a", "eu", "pod-0", 10),
        ("b", "us", "pod-0", 1),
        ("c", "us", "pod-1", 1),
    ):
        f = _write(_as_instance(p, tag, times=times), tmp_path / f"{tag}.pb.gz")
        lab.ingest(f, service=service, instance=instance)
    from pyproflab.store.select import Selection

    res = pgo_mod.pgo(lab.store, Selection(), all=True, weight="instance")
    lab.store.close()
    assert _instance_shares(res) == pytest.approx({k: 100 / 3 for k in "abc"}, abs=0.1)


# --- selection from a store ------------------------------------------------------------


def test_store_top_by_cores(go_profiles, tmp_path):
    lab = pyproflab.open(tmp_path / "s.duckdb")
    for k in ("cpu", "cpu2", "heap"):
        lab.ingest(go_profiles[k], service="svc", instance=k)
    store = lab.store
    from pyproflab.store.select import Selection

    every = pgo_mod.pgo(store, Selection(service="svc"), all=True)
    assert every.ok and len(every.inputs) == 2 and every.candidates == 2
    assert any("no CPU sample type" in n for n in every.notes)
    top1 = pgo_mod.pgo(store, Selection(service="svc"), top=1)
    assert len(top1.inputs) == 1
    cores = sorted(i.cores for i in every.inputs)
    assert top1.inputs[0].cores == pytest.approx(cores[-1])
    none = pgo_mod.pgo(store, Selection(service="nope"))
    assert not none.ok and "no CPU profiles match" in none.refusal
    lab.store.close()


# --- refusals --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bad_inputs(go_profiles, tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """name -> (file, a word the refusal must contain)."""
    d = tmp_path_factory.mktemp("pgo-bad")
    p = pyproflab.read_profile(go_profiles["cpu"])
    zero = d / "zero.pb.gz"
    zero.write_bytes(b"")
    vals = p.samples.column("values").to_pylist()
    zeroed = p.samples.set_column(
        1, "values", pa.array([[0] * len(v) for v in vals], p.samples.schema.field("values").type)
    )
    f = p.functions
    nostart = f.set_column(
        f.schema.get_field_index("start_line"), "start_line", pa.array([0] * f.num_rows, pa.int64())
    )
    # One frame per sample: the leaf location only, with only its outermost line
    # (inline frames within one location make edges too).
    ids = p.samples.column("location_ids").to_pylist()
    id_type = p.samples.schema.field("location_ids").type
    single = p.samples.set_column(0, "location_ids", pa.array([x[:1] for x in ids], id_type))
    lines = p.locations.column("lines").to_pylist()
    one_line = p.locations.set_column(
        p.locations.schema.get_field_index("lines"),
        "lines",
        pa.array([x[-1:] for x in lines], p.locations.schema.field("lines").type),
    )
    return {
        "zero-byte": (zero, "empty file"),
        "empty": (
            _write(dataclasses.replace(p, samples=p.samples.slice(0, 0)), d / "e.pb.gz"),
            f"no samples: the 1 CPU profile ({d / 'e.pb.gz'}) holds none",
        ),
        "heap-only": (go_profiles["heap"], "no CPU sample type"),
        "zero-weight": (
            _write(dataclasses.replace(p, samples=zeroed), d / "zw.pb.gz"),
            "zero total weight",
        ),
        "no-start-line": (
            _write(dataclasses.replace(p, functions=nostart), d / "ns.pb.gz"),
            "start_line",
        ),
        "single-frame": (
            _write(dataclasses.replace(p, samples=single, locations=one_line), d / "sf.pb.gz"),
            "call edges",
        ),
    }


@pytest.mark.parametrize(
    "name", ["zero-byte", "empty", "heap-only", "zero-weight", "no-start-line", "single-frame"]
)
def test_refusals(bad_inputs, name, tmp_path, capsys):
    path, why = bad_inputs[name]
    res = pgo_mod.pgo_files([path])
    assert not res.ok and why in res.refusal and res.profile is None
    with pytest.raises(pgo_mod.PgoRefusedError):
        res.write(tmp_path / "x.pgo")
    out = tmp_path / "default.pgo"
    out.write_bytes(b"old")  # an existing profile is left as it was
    # Default: a warning naming the reason, exit 0 (a CI build goes on).
    assert cli_main(["pgo", str(path), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and why in err
    assert out.read_bytes() == b"old"
    # ... and says so: exit 0 and an older default.pgo that `go build -pgo` still
    # uses read as if this run's profile were in place.
    assert f"the {out} already there is left as it was" in err, err
    # --fail: an error, exit 2.
    assert cli_main(["pgo", str(path), "-o", str(out), "--fail"]) == 2
    err = capsys.readouterr().err
    assert "error" in err and why in err and "Traceback" not in err
    assert out.read_bytes() == b"old"


def test_go_itself_ignores_what_we_refuse(bad_inputs):
    """Why refuse: preprofile rejects no-start-line and yields no edges for the rest."""
    with pytest.raises(pyproflab.ProflabError, match="start_line"):
        preprofile_edges(bad_inputs["no-start-line"][0])
    for name in ("empty", "zero-weight", "single-frame", "zero-byte"):
        try:
            total = preprofile_edges(bad_inputs[name][0]).total
        except pyproflab.ProflabError as e:
            # Go 1.26 says "missing start_line" for an all-zero profile: our
            # refusal names the real cause.
            assert "start_line" in str(e), name
            continue
        assert total == 0, name  # accepted, and nothing to optimize


# --- CLI and diff ----------------------------------------------------------------------


def test_cli_writes_and_reports_json(cpu_files, tmp_path, capsys):
    out = tmp_path / "default.pgo"
    assert cli_main(["pgo", *map(str, cpu_files), "-o", str(out), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["verified"] and doc["output"] == str(out)
    # What the text's "wrote OUT: N samples" says.
    assert doc["output_samples"] == pyproflab.read_profile(out).num_samples > 0
    assert doc["total_weight"] == sum(e["weight"] for e in doc["edges"])
    assert any(e["hot"] for e in doc["edges"])
    # Percentages say so in their names (a "share" elsewhere in JSON is a fraction).
    assert sum(e["share_pct"] for e in doc["edges"]) == pytest.approx(100)
    assert doc["edges"][-1]["cum_share_pct"] == pytest.approx(100)
    assert out.is_file() and not list(tmp_path.glob(".*.tmp"))


def test_cli_text_report(cpu_files, tmp_path, capsys):
    out = tmp_path / "default.pgo"
    assert (
        cli_main(
            ["pgo", str(cpu_files[0]), "-o", str(out), "--edges", "3", "--safeguard", "main.fib"]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "verified with go tool preprofile" in text
    assert "renamed main.fib" in text and "->" in text


def test_diff(cpu_files, tmp_path, capsys):
    a = pgo_mod.pgo_files(cpu_files[:1]).write(tmp_path / "a.pgo")
    b = pgo_mod.pgo_files(cpu_files).write(tmp_path / "b.pgo")
    d = diff_edges(
        compute_edges(pyproflab.read_profile(a)), compute_edges(pyproflab.read_profile(b))
    )
    same = diff_edges(preprofile_edges(a), compute_edges(pyproflab.read_profile(a)))
    assert not same.changed
    assert d.changed
    assert cli_main(["pgo", "diff", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert "hot edges:" in text and ("added" in text or "re-weighted" in text)
    assert cli_main(["pgo", "diff", str(a), str(b), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["changed"] and {"added", "removed", "reweighted"} <= set(doc)
    rows = doc["added"] + doc["removed"] + doc["reweighted"]
    assert rows and all({"old_share_pct", "new_share_pct"} <= set(r) for r in rows)
    # A preprofile output file is read as well.
    pre = tmp_path / "a.txt"
    import subprocess

    subprocess.run(
        [oracle.go_binary(), "tool", "preprofile", "-i", str(a), "-o", str(pre)], check=True
    )
    assert cli_main(["pgo", "diff", str(pre), str(a)]) == 0
    assert "no change" in capsys.readouterr().out


def test_cli_usage_errors(cpu_files, tmp_path, capsys):
    assert cli_main(["pgo", str(cpu_files[0])]) == 2
    assert "-o" in capsys.readouterr().err
    assert cli_main(["pgo", "diff", str(cpu_files[0])]) == 2
    capsys.readouterr()
    assert cli_main(["pgo", str(cpu_files[0]), "-o", str(tmp_path / "x.pgo"), "--edges", "-1"]) == 2
    assert "--edges" in capsys.readouterr().err  # it showed every edge, as 0 does


@pytest.mark.parametrize("value", ["nan", "-1", "inf"])
def test_bad_min_change(cpu_files, tmp_path, value, capsys):
    """--min-change nan hid every re-weighted edge, -1 listed every shared edge:
    refused in one line (pgo diff, pgo weights, and diff_edges from Python)."""
    a = pgo_mod.pgo_files(cpu_files[:1]).write(tmp_path / "a.pgo")
    assert cli_main(["pgo", "diff", str(a), str(a), "--min-change", value]) == 2
    assert cli_main(["pgo", "weights", str(a), "--min-change", value]) == 2
    out, err = capsys.readouterr()
    assert not out and err.count("--min-change: ") == 2 and len(err.strip().splitlines()) == 2
    edges = compute_edges(pyproflab.read_profile(a))
    with pytest.raises(UsageError, match="min_change"):
        diff_edges(edges, edges, min_change=float(value))


def test_weights_of_inputs_no_merge_takes_is_one_line(go_profiles, tmp_path, capsys):
    """`pgo weights nope.pb.gz` (or a heap profile, or a selection matching nothing)
    printed the same refusal three times, once per weighting, and exited 0."""
    store = tmp_path / "s.duckdb"
    assert cli_main(["ingest", str(go_profiles["heap"]), "--db", str(store)]) == 0
    capsys.readouterr()
    missing = tmp_path / "nope.pb.gz"
    for argv, needle in [
        ([str(missing)], f"{missing}: no such file"),
        ([str(go_profiles["heap"])], "no CPU sample type"),
        (["--db", str(store), "--service", "nope"], "no CPU profiles match"),
    ]:
        assert cli_main(["pgo", "weights", *argv]) == 2, argv
        out, err = capsys.readouterr()
        assert not out and len(err.strip().splitlines()) == 1 and needle in err, (argv, err)


@pytest.mark.parametrize(
    ("flag", "value"), [("--top", "0"), ("--trim-leaf", "0"), ("--max-edges", "-3")]
)
def test_a_bad_option_names_its_flag(cpu_files, tmp_path, capsys, flag, value):
    """`pgo --trim-leaf 0` said 'trim_leaf: must be ...', the Python keyword, not the flag."""
    out = tmp_path / "x.pgo"
    argv = ["pgo", str(cpu_files[0]), "-o", str(out), flag, value]
    if flag == "--top":
        argv = ["pgo", "--db", str(tmp_path / "s.duckdb"), "-o", str(out), flag, value]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pyproflab: error: {flag}: ") and err.count("\n") == 1, err
    assert not out.exists()


def test_files_on_workers_equal_reading_in_order(cpu_files, go_profiles, monkeypatch):
    """pgo_files strips and merges the files in worker processes (merge_files): the
    profile, edges, inputs and skipped files equal reading them one by one here."""
    from pyproflab.analyses import merge_files

    monkeypatch.setattr(merge_files, "MIN_FILES_PER_WORKER", 1)
    files = [*cpu_files, go_profiles["heap"], *cpu_files]
    fast = pgo_mod.pgo_files(files)
    slow = pgo_mod._pgo_files_in_order([str(f) for f in files])
    assert fast.ok and slow.ok
    assert fast.edges.weights() == slow.edges.weights()
    assert fast.skipped == slow.skipped and len(fast.skipped) == 1
    facts = [(i.label, i.samples, i.duration_nanos, i.cpu_nanos) for i in fast.inputs]
    assert facts == [(i.label, i.samples, i.duration_nanos, i.cpu_nanos) for i in slow.inputs]
    for table in ("samples", "locations", "functions", "mappings"):
        assert getattr(fast.profile, table) == getattr(slow.profile, table), table
    assert fast.profile.time_nanos == slow.profile.time_nanos


def test_first_bad_file_refuses_in_order(cpu_files, bad_inputs, monkeypatch):
    """An unreadable file before a zero-byte one is the refusal, as in order."""
    from pyproflab.analyses import merge_files

    monkeypatch.setattr(merge_files, "MIN_FILES_PER_WORKER", 1)
    zero = bad_inputs["zero-byte"][0]
    text = zero.parent / "not-a-profile.txt"
    text.write_text("hello\n")
    res = pgo_mod.pgo_files([*cpu_files, text, zero])
    assert not res.ok and str(text) in res.refusal
    res = pgo_mod.pgo_files([*cpu_files, zero, text])
    assert not res.ok and "empty file" in res.refusal


def test_preemption_is_not_a_call_edge(cpu_files):
    """Issue 34, defect 7: the report's PGO edges were mostly X -> runtime.asyncPreempt.
    The compiler takes such an edge like any (go tool preprofile lists it; see
    pgo_edges.fold_preemption); pgo credits those samples to the interrupted
    function, so the written profile has none, and says so."""
    from pyproflab.reports import pgo as report

    kept = pgo_mod.pgo_files(cpu_files, fold_preempt=False)
    pre = [e for e in kept.edges.edges if e.callee == "runtime.asyncPreempt"]
    assert pre and kept.preempt_folded == (0, 0)
    res = pgo_mod.pgo_files(cpu_files)
    assert not any(e.callee == "runtime.asyncPreempt" for e in res.edges.edges)
    assert res.edges.total == kept.edges.total  # the weight moved to the real call edges
    assert res.preempt_folded[1] == sum(e.weight for e in pre)
    # Each folded edge's weight went to the call into the interrupted function.
    assert sum(e.weight for e in res.edges.edges if e.callee == pre[0].caller) > sum(
        e.weight for e in kept.edges.edges if e.callee == pre[0].caller
    )
    text = report.render_text(res)
    assert "preemption:" in text and "not call edges" in text
    assert "runtime.asyncPreempt counted" in report.render_html(res)


def test_weightings_compared(cpu_files, tmp_path, capsys):
    """pgo weights: one merge per weighting, each instance's share of it, and
    how the hot edge sets differ (a 10x longer instance under none and instance)."""
    from pyproflab.analyses.pgo_weights import compare_weights

    p = pyproflab.read_profile(cpu_files[0])
    files = [
        _write(_as_instance(p, "a", times=10), tmp_path / "a.pb.gz"),
        _write(_as_instance(p, "b"), tmp_path / "b.pb.gz"),
    ]
    cmp = compare_weights(files=files)
    assert set(cmp.results) == {"none", "duration", "instance"}
    assert cmp.instance_shares("none")[str(files[0])] == pytest.approx(100 * 10 / 11)
    assert cmp.instance_shares("instance")[str(files[0])] == pytest.approx(50, abs=0.1)
    pairs = {(a, b): (d, j) for a, b, d, j in cmp.diffs}
    d, jaccard = pairs["none", "instance"]
    hot_none = {e.key for e in cmp.results["none"].edges.hot}
    hot_inst = {e.key for e in cmp.results["instance"].edges.hot}
    assert {c.key for c in d.added} == hot_inst - hot_none
    assert {c.key for c in d.removed} == hot_none - hot_inst
    assert jaccard == pytest.approx(len(hot_none & hot_inst) / len(hot_none | hot_inst))
    assert d.added  # b's edges under 1% of the plain sum become hot when b counts half
    assert cli_main(["pgo", "weights", *map(str, files)]) == 0
    out = capsys.readouterr().out
    assert "instance against none" in out and "overlap" in out
    assert cli_main(["pgo", "weights", *map(str, files), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["comparisons"]) == 3 and doc["weightings"]["instance"]["hot"] == len(hot_inst)


def test_weightings_of_equal_durations_report_no_change(cpu_files, tmp_path):
    """Equal durations make the duration merge the plain one x1000: no hot edge
    added or removed, though edges tie at the cutoff (the compiler's sort breaks
    ties by name). The recorded files' durations differ by 0.18% (8.026 s, 8.012 s):
    factors 1000 and 1002, so their one-sample edges no longer tie, and the hot
    sets differ at the cutoff as the compiler's would."""
    from pyproflab.analyses.pgo_weights import compare_weights

    a, b = (pyproflab.read_profile(f) for f in cpu_files)
    same = _write(dataclasses.replace(b, duration_nanos=a.duration_nanos), tmp_path / "b.pb.gz")
    cmp = compare_weights(files=[cpu_files[0], same])
    none, dur = cmp.results["none"].edges, cmp.results["duration"].edges
    assert dur.weights() == {k: 1000 * w for k, w in none.weights().items()}
    cut = len(none.hot)
    assert cut < len(none) and none.edges[cut - 1].weight == none.edges[cut].weight  # a tie
    d, jaccard = next((d, j) for x, y, d, j in cmp.diffs if (x, y) == ("none", "duration"))
    assert not d.changed and jaccard == 1.0
    factors = [i.factor for i in compare_weights(files=cpu_files).results["duration"].inputs]
    assert factors == [1000, 1002]


# --- size guards ------------------------------------------------------------------------


def test_max_edges_keeps_the_heaviest(tmp_path, monkeypatch):
    """--max-edges N: the N heaviest edges with their weights, the report of what
    went, the written file as go tool preprofile reads it; a big profile without
    it gets a note."""
    from support.pgo_synth import edge_profile

    names = [f"example.com/p{i % 20}.f{i}" for i in range(400)]
    path = tmp_path / "many.pb.gz"
    path.write_bytes(edge_profile(names, 3000, top=3000))
    full = pgo_mod.pgo_files([path])
    monkeypatch.setattr(pgo_mod, "EDGES_WARNING", 1000)
    noted = pgo_mod.pgo_files([path])
    assert any("--max-edges" in n for n in noted.notes)
    assert not any("--max-edges" in n for n in full.notes)  # 3000 <= 20,000
    res = pgo_mod.pgo_files([path], max_edges=500)
    assert len(res.edges) == 500  # one sample per edge here: exactly the kept ones
    before = full.edges.weights()
    assert all(before[e.key] == e.weight for e in res.edges.edges)
    assert {e.key for e in res.edges.edges} == {e.key for e in full.edges.edges[:500]}
    r = res.trim_report
    assert (r.edges_before, r.edges_after) == (3000, 500)
    assert r.weight_dropped == full.edges.total - res.edges.total
    assert {e.key for e in r.hot_lost} == {e.key for e in full.edges.hot} - {
        e.key for e in res.edges.hot
    }
    out = res.write(tmp_path / "trimmed.pgo")
    assert (
        res.verified.weights() == res.edges.weights() and out.stat().st_size < path.stat().st_size
    )
    assert "trimmed to the heaviest edges: 3000 -> 500" in str(pgo_mod.render(res, "text"))
