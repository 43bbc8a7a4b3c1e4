"""The Prometheus text exposition parser (format 0.0.4) and metric_samples ingest."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from pyproflab import schema
from pyproflab.errors import MetricsError, StoreError
from pyproflab.sources.prometheus_scan import parse_exposition, read_exposition
from pyproflab.store.connection import Store
from pyproflab.store.metrics import ingest_metric_samples

GC_DATA = Path(__file__).resolve().parents[1] / "testdata" / "gc"
T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def parse(text: str) -> list[dict]:
    t = parse_exposition(text, default_time=T0, source="test.prom")
    assert t.schema.equals(schema.METRIC_SAMPLES)
    rows = t.to_pylist()
    for r in rows:
        r["labels"] = dict(r["labels"])
    return rows


def test_counter_gauge_untyped_and_help():
    rows = parse(
        "# HELP go_gc_cycles_total_gc_cycles_total Count of all completed GC cycles.\n"
        "# TYPE go_gc_cycles_total_gc_cycles_total counter\n"
        "go_gc_cycles_total_gc_cycles_total 42\n"
        "# TYPE go_gc_heap_goal_bytes gauge\n"
        "go_gc_heap_goal_bytes 4.194304e+06\n"
        'something_untyped{a="b"} 1\n'
    )
    assert [(r["metric"], r["type"], r["value"]) for r in rows] == [
        ("go_gc_cycles_total_gc_cycles_total", "counter", 42.0),
        ("go_gc_heap_goal_bytes", "gauge", 4194304.0),
        ("something_untyped", "untyped", 1.0),
    ]
    assert rows[2]["labels"] == {"a": "b"}
    assert all(r["time"] == T0 for r in rows)


def test_summary_and_histogram_lines_take_their_family_type():
    rows = parse(
        "# TYPE go_gc_duration_seconds summary\n"
        'go_gc_duration_seconds{quantile="0"} 2.1e-05\n'
        'go_gc_duration_seconds{quantile="0.5"} 4.5e-05\n'
        "go_gc_duration_seconds_sum 0.0031\n"
        "go_gc_duration_seconds_count 17\n"
        "# TYPE go_sched_pauses_total_gc_seconds histogram\n"
        'go_sched_pauses_total_gc_seconds_bucket{le="6.4e-08"} 0\n'
        'go_sched_pauses_total_gc_seconds_bucket{le="+Inf"} 34\n'
        "go_sched_pauses_total_gc_seconds_sum NaN\n"
        "go_sched_pauses_total_gc_seconds_count 34\n"
    )
    assert [r["type"] for r in rows] == ["summary"] * 4 + ["histogram"] * 4
    assert rows[1]["labels"] == {"quantile": "0.5"}
    assert rows[5]["metric"] == "go_sched_pauses_total_gc_seconds_bucket"
    assert rows[5]["labels"] == {"le": "+Inf"}
    assert math.isnan(rows[6]["value"])


def test_sum_of_an_untyped_family_is_its_own_untyped_metric():
    rows = parse("# TYPE x counter\nx_sum 1\n")
    assert rows == [{"metric": "x_sum", "labels": {}, "type": "untyped", "time": T0, "value": 1.0}]


def test_escapes_in_label_values():
    rows = parse('m{path="C:\\\\dir",quote="say \\"hi\\"",nl="a\\nb",empty=""} 1\n')
    assert rows[0]["labels"] == {"path": "C:\\dir", "quote": 'say "hi"', "nl": "a\nb", "empty": ""}


def test_labels_are_sorted_and_trailing_comma_and_blanks_allowed():
    t = parse_exposition('m{ b = "2" ,a="1", } 3\n', default_time=T0, source="s")
    assert t.column("labels")[0].as_py() == [("a", "1"), ("b", "2")]


def test_special_values_and_timestamps():
    rows = parse("a NaN\nb +Inf 1700000000123\nc -Inf -5\nd 1e3\ne -0.5\nf Inf\n")
    assert math.isnan(rows[0]["value"])
    assert rows[1]["value"] == math.inf
    assert rows[1]["time"] == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert rows[2]["value"] == -math.inf
    assert rows[2]["time"] == datetime(1969, 12, 31, 23, 59, 59, 995000, tzinfo=UTC)
    assert rows[3]["value"] == 1000.0
    assert rows[4]["value"] == -0.5
    assert rows[5]["value"] == math.inf


def test_comments_blank_lines_crlf_and_tabs():
    rows = parse("\n# just a comment\n#   another TYPEless one\n\tm\t1\t\r\n\n  n 2\n")
    assert [(r["metric"], r["value"]) for r in rows] == [("m", 1.0), ("n", 2.0)]


def test_type_is_case_insensitive():
    assert parse("# TYPE m GAUGE\nm 1\n")[0]["type"] == "gauge"


def test_empty_text():
    t = parse_exposition("", default_time=T0, source="s")
    assert t.num_rows == 0 and t.schema.equals(schema.METRIC_SAMPLES)


def test_naive_default_time_is_utc():
    t = parse_exposition("m 1\n", default_time=datetime(2025, 3, 1, 12), source="s")
    assert t.column("time")[0].as_py() == T0


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('m 1\nm{a="1" 2\n', 2, "after the value of label"),
        ("m{a=1} 2\n", 1, "expected '\"'"),
        ('m{a="1",a="2"} 2\n', 1, "duplicate label"),
        ('m{__name__="x"} 2\n', 1, "reserved"),
        ('m{a="\\t"} 2\n', 1, "invalid escape"),
        ('m{a="open} 2\n', 1, "closing quote"),
        ("m one\n", 1, "expected float"),
        ("m 1_000\n", 1, "expected float"),
        ("m 0x10\n", 1, "expected float"),
        ("m\n", 1, "missing value"),
        ("m 1 12.5\n", 1, "expected integer as timestamp"),
        ("m 1 12 extra\n", 1, "spurious"),
        ("9m 1\n", 1, "invalid metric name"),
        ("# TYPE m counter\n# TYPE m gauge\nm 1\n", 2, "second TYPE"),
        ("m 1\n# TYPE m gauge\n", 2, "TYPE after samples"),
        ("# TYPE m flute\n", 1, "unknown metric type"),
        ("# HELP m a\n# HELP m b\n", 2, "second HELP"),
        ("# HELP m bad \\t escape\n", 1, "invalid escape"),
        ('# TYPE h histogram\nh_bucket{le="x"} 1\n', 2, "'le'"),
        ('# TYPE s summary\ns{quantile="p99"} 1\n', 2, "'quantile'"),
        ("m 1 99999999999999999999\n", 1, "timestamp"),
    ],
)
def test_malformed_lines_name_source_and_line(text, line, words):
    with pytest.raises(MetricsError) as ei:
        parse_exposition(text, default_time=T0, source="scrape.prom")
    assert ei.value.line == line
    assert str(ei.value).startswith(f"scrape.prom:{line}: ")
    assert words in str(ei.value)
    assert "\n" not in str(ei.value)


def test_real_exposition_of_a_go_program():
    """A /metrics page captured from Prometheus 2.42 itself (client_golang)."""
    path = GC_DATA / "prometheus-2.42-metrics.prom"
    t = read_exposition(path, default_time=T0)
    rows = t.to_pylist()
    by_name = {r["metric"]: r for r in rows}
    assert by_name["go_gc_duration_seconds_count"]["type"] == "summary"
    assert by_name["go_memstats_next_gc_bytes"]["type"] == "gauge"
    assert by_name["go_goroutines"]["type"] == "gauge"
    types = {r["type"] for r in rows}
    assert {"counter", "gauge", "summary", "histogram"} <= types
    # Every sample line of the file is a row (lines not starting with '#').
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    assert t.num_rows == len(lines)


# --- metric_samples -----------------------------------------------------------------


def test_ingest_is_idempotent_and_per_instance():
    t = parse_exposition(
        "# TYPE go_gc_heap_goal_bytes gauge\ngo_gc_heap_goal_bytes 4e6\n"
        '# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3\nh_count 2\n',
        default_time=T0,
        source="s",
    )
    with Store.open(":memory:") as store:
        kw = {"service": "api", "version": "v1", "source": "http://x/metrics"}
        assert ingest_metric_samples(store, t, instance="i-1", **kw) == 5
        assert ingest_metric_samples(store, t, instance="i-1", **kw) == 0
        assert ingest_metric_samples(store, t, instance="i-2", **kw) == 5
        assert ingest_metric_samples(store, t, instance=None, **kw) == 5
        assert ingest_metric_samples(store, t, instance=None, **kw) == 0
        later = parse_exposition(
            "go_gc_heap_goal_bytes 5e6\n",
            default_time=datetime(2025, 3, 1, 12, 0, 15, tzinfo=UTC),
            source="s",
        )
        assert ingest_metric_samples(store, later, instance="i-1", **kw) == 1
        got = store.sql(
            "SELECT service, version, instance, metric, labels, type, time, value, source "
            "FROM metric_samples WHERE instance = ? AND metric = 'h_bucket' ORDER BY value",
            ["i-1"],
        ).to_pylist()
        assert got[1] == {
            "service": "api",
            "version": "v1",
            "instance": "i-1",
            "metric": "h_bucket",
            "labels": [("le", "+Inf")],
            "type": "histogram",
            "time": T0,
            "value": 2.0,
            "source": "http://x/metrics",
        }
        assert store.sql("SELECT count(*) AS n FROM metric_samples").column(0)[0].as_py() == 16


def test_ingest_keeps_nan_and_dedupes_inside_a_batch():
    t = parse_exposition("a NaN\nb +Inf\n", default_time=T0, source="s")
    twice = pa.concat_tables([t, t])
    with Store.open(":memory:") as store:
        assert (
            ingest_metric_samples(
                store, twice, service=None, version=None, instance="i", source=None
            )
            == 2
        )
        vals = store.sql("SELECT value FROM metric_samples ORDER BY metric").column(0)
        assert math.isnan(vals[0].as_py()) and vals[1].as_py() == math.inf


def test_streamed_ingest_stores_a_key_once_across_batches(tmp_path):
    """Batches of two rows in one transaction: a key stored before, or met in an
    earlier batch or earlier in its own batch, is not added again; a key met
    again with another value (stored, or in the input) is refused."""
    from pyproflab.store.metrics import StreamedRows, with_meta

    def rows(*lines: str) -> pa.Table:  # one parse a line: the parser refuses repeats
        t = pa.concat_tables(parse_exposition(x, default_time=T0, source="s") for x in lines)
        return with_meta(t, service=None, version=None, instance="i", source=None)

    db = tmp_path / "m.duckdb"
    with Store.open(db) as store:
        ingest_metric_samples(
            store,
            parse_exposition("a 1\n", default_time=T0, source="s"),
            service=None,
            version=None,
            instance="i",
            source=None,
        )
    # Each add is one insert: a is stored before; b in the 1st and 3rd; c twice in
    # the 2nd; d in the 3rd and 4th.
    adds = [("a 1", 'b{x="1"} 2'), ("c 3", "c 3"), ("d 4", 'b{x="1"} 2'), ("d 4", 'b{x="2"} 5')]
    with StreamedRows(lambda: Store.open(db), batch_rows=2) as streamed:
        for text in adds:
            streamed.add(rows(*text))
        assert streamed.finish() == 4
    with pytest.raises(StoreError, match=r"^e of instance i has two values at "):
        with StreamedRows(lambda: Store.open(db), batch_rows=2) as streamed:
            for text in [("e 1", "f 1"), ("e 2", "f 1")]:
                streamed.add(rows(*text))
            streamed.finish()
    with Store.open(db, read_only=True) as store:
        got = store.sql(
            "SELECT metric, labels, value FROM metric_samples ORDER BY metric, value"
        ).to_pylist()
    assert [(r["metric"], dict(r["labels"]), r["value"]) for r in got] == [
        ("a", {}, 1.0),
        ("b", {"x": "1"}, 2.0),
        ("b", {"x": "2"}, 5.0),
        ("c", {}, 3.0),
        ("d", {}, 4.0),
    ]


def test_ingest_is_all_or_nothing(tmp_path):
    t = parse_exposition("a 1\n", default_time=T0, source="s")
    db = tmp_path / "m.duckdb"
    with Store.open(db) as store:
        bad = t.drop_columns(["value"])
        with pytest.raises(StoreError):
            ingest_metric_samples(store, bad, service=None, version=None, instance="i", source=None)
        assert store.sql("SELECT count(*) FROM metric_samples").column(0)[0].as_py() == 0


# --- prometheus_client as a second reader -------------------------------------------


def _client_rows(text: str) -> list[tuple]:
    """(metric, labels, type, value) of every sample as prometheus_client's parser
    reads it; its "unknown" is the format's "untyped"."""
    from prometheus_client.parser import text_string_to_metric_families

    out = []
    for fam in text_string_to_metric_families(text):
        kind = "untyped" if fam.type == "unknown" else fam.type
        for s in fam.samples:
            value = "NaN" if math.isnan(s.value) else s.value
            out.append((s.name, tuple(sorted(s.labels.items())), kind, value))
    return sorted(out, key=repr)


@pytest.mark.parametrize(
    "path",
    [
        *sorted((Path(__file__).resolve().parents[1] / "testdata").rglob("*.prom")),
        Path(__file__).resolve().parents[1] / "testdata" / "collect" / "metrics.txt",
    ],
    ids=lambda p: p.name if p.parent.name in ("gc", "collect") else f"{p.parent.name}/{p.name}",
)
def test_well_formed_expositions_read_as_prometheus_client_reads_them(path):
    """On well-formed input our parser and prometheus_client's give the same samples,
    names, labels, family types and values. (We keep our own parser: it follows Go's
    expfmt, which refuses what prometheus_client 0.26 accepts, e.g. a second TYPE
    line, TYPE after samples, ``le="x"``, a fractional timestamp, ``\\t`` escapes; and
    it names the failing line.)"""
    text = path.read_text(encoding="utf-8")
    rows = parse_exposition(text, default_time=T0, source=str(path)).to_pylist()
    ours = sorted(
        (
            (
                r["metric"],
                tuple(sorted(dict(r["labels"]).items())),
                r["type"],
                "NaN" if math.isnan(r["value"]) else r["value"],
            )
            for r in rows
        ),
        key=repr,
    )
    assert ours and ours == _client_rows(text)
