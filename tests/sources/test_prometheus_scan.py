"""The Prometheus text reader's C scanner (sources/_promtext.c) against the Python parser.

Rules checked: the extension is built and used (unless ``PYPROFLAB_PURE_PROMTEXT``
is set); on every committed exposition, on hand-made lines at the edges of what
the scanner takes, and on a few thousand seeded mutations of them, both paths
give the same batches of rows (values compared bit for bit) or the same error
(its text and line), with batches and read chunks small enough to cut anywhere;
the C source compiles without warnings.
"""

from __future__ import annotations

import io
import os
import random
import struct
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from support.testenv import assert_compiles_without_warnings

from pyproflab.errors import MetricsError
from pyproflab.sources import prometheus_scan
from pyproflab.sources.prometheus import iter_exposition

T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
TESTDATA = Path(__file__).resolve().parents[1] / "testdata"
PURE = os.environ.get("PYPROFLAB_PURE_PROMTEXT", "") not in ("", "0")

HAND_MADE = [
    b"# HELP go_gc_heap_goal_bytes Heap size target.\n# TYPE go_gc_heap_goal_bytes gauge\n"
    b'go_gc_heap_goal_bytes{instance="a:1",job="x"} 4.194304e+06 1764000000000\n',
    b'm{ b = "2" ,a="1", } 3\n\tm2 -0 -5\nm3{} .5e-3   7  \r\nm4 1.\n',
    b'm{a="\\\\ \\" \\n \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"} 1\n',
    b"m NaN\nm2 +Inf 1\nm3 -inf\nm4 1e999\nm5 infinity 2\n",
    b'# TYPE h histogram\nh_bucket{le="0.5"} 1\nh_bucket{le="+Inf"} 2\nh_sum NaN\nh_count 2\n'
    b'# TYPE s summary\ns{quantile="0.99"} NaN\ns_sum 1\ns_count 1\nx_bucket{le="q"} 1\n',
    b'# TYPE h histogram\nh_bucket{le="0.5"} 1\nh_bucket{le="x"} 2\n',
    b'# TYPE s summary\ns{quantile="1"} 1\ns{quantile="p9"} 2\n',
    b'# TYPE c counter\nc 1\nc{a="1"} NaN\n',
    b"go_x 1\ngo_x NaN 5\n",
    b'm{a="1"} 1 5\nm{a="1"} 2 5\n',
    b"m 1 999999999999999\nm 1 9999999999999999\nm 1 -9223372036854775808\n",
    b"m 1 99999999999999999999\n",
    b'm{a="\xff"} 1\n',
    b"m 1\xc3\n",
    b'm{a="\xed\xa0\x80"} 1\n',
    b"m 1 12.5\nm 1 12 extra\n9m 1\nm\n",
    b"m 0x10\nm 1_000\n",
    b"a 1\r\r\nb 2\n",
    b'm{a="1",a="2"} 1\n',
    b'm{__name__="x"} 1\n',
    b"m{a=1} 2\n",
    b'm{a="\x01"} 2\nm{a="\t"} 3\n',
    b"m 1\n# TYPE m gauge\n",
    b"last 1",
    b"a 1\n" * 40,
    b"",
]

ALPHABET = [b"{", b"}", b'"', b"\\", b" ", b"\t", b",", b"=", b"#", b"\n", b"\r", b"\xff",
            b"\xc3\xa9", b"0", b"9", b".", b"e", b"-", b"+", b"NaN", b"Inf", b"le", b"_sum",
            b"_bucket", b"quantile", b"# TYPE m counter\n", b"\x00", b"a"]  # fmt: skip


def _committed() -> list[bytes]:
    paths = sorted(TESTDATA.rglob("*.prom")) + [TESTDATA / "collect" / "metrics.txt"]
    return [p.read_bytes() for p in paths]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(b))
        op = rng.random()
        if op < 0.4:
            b[at:at] = rng.choice(ALPHABET)
        elif op < 0.7 and b:
            del b[at : at + rng.randint(1, 3)]
        elif b:
            b[at : at + 1] = rng.choice(ALPHABET)
    return bytes(b)


def _outcome(tables) -> tuple:
    """The batches' rows, values as bits, or the error's text and line."""
    try:
        out = []
        for t in tables:  # times as integers: some are past datetime's range
            rows = t.set_column(3, "time", t["time"].cast(pa.int64())).to_pylist()
            for r in rows:
                r["value"] = struct.pack("<d", r["value"])
            out.append(rows)
        return ("rows", out)
    except MetricsError as e:
        return ("error", str(e), e.line)


def _both(data: bytes, monkeypatch, *, batch: int, chunk: int, limit: int) -> tuple:
    monkeypatch.setattr(prometheus_scan, "LINE_LIMIT", limit or 1 << 30)  # 0: any
    lines = prometheus_scan._file_lines(io.BytesIO(data), "f.prom")
    pure = _outcome(iter_exposition(lines, default_time=T0, source="f.prom", batch_rows=batch))
    monkeypatch.setattr(prometheus_scan, "CHUNK", chunk)
    fast = _outcome(
        prometheus_scan.iter_exposition_bytes(
            io.BytesIO(data).read,
            default_time=T0,
            source="f.prom",
            batch_rows=batch,
            line_limit=limit,
        )
    )
    return pure, fast


needs_c = pytest.mark.skipif(not prometheus_scan.fast(), reason="the scanner is not in use")


@pytest.mark.skipif(PURE, reason="PYPROFLAB_PURE_PROMTEXT is set: the Python parser is forced")
def test_the_scanner_is_built_and_used():
    assert prometheus_scan.fast(), "pyproflab.sources._promtext did not import: was it built?"


def test_the_scanner_compiles_without_warnings():
    assert_compiles_without_warnings(Path(prometheus_scan.__file__).with_name("_promtext.c"))


@needs_c
@pytest.mark.parametrize("index", range(len(HAND_MADE)))
def test_hand_made_lines_read_alike(index, monkeypatch):
    data = HAND_MADE[index]
    for batch, chunk, limit in ((1 << 16, 1 << 22, 1 << 20), (2, 5, 30), (1, 1, 0)):
        pure, fast = _both(data, monkeypatch, batch=batch, chunk=chunk, limit=limit)
        assert fast == pure, (batch, chunk, limit)


@needs_c
def test_committed_expositions_read_alike(monkeypatch):
    for data in _committed():
        pure, fast = _both(data, monkeypatch, batch=100, chunk=4096, limit=1 << 20)
        assert pure[0] == "rows" and sum(map(len, pure[1])) > 0
        assert fast == pure


@needs_c
def test_mutated_inputs_read_alike(monkeypatch):
    rng = random.Random(35)
    seeds = HAND_MADE + [d[:3000] for d in _committed()[:4]]
    kinds = {"rows": 0, "error": 0}
    for _ in range(3000):
        data = _mutate(rng, rng.choice(seeds))
        batch, chunk = rng.choice((3, 1 << 16)), rng.choice((7, 64, 1 << 22))
        pure, fast = _both(
            data, monkeypatch, batch=batch, chunk=chunk, limit=rng.choice((40, 1 << 20))
        )
        assert fast == pure, data
        kinds[pure[0]] += 1
    assert min(kinds.values()) > 200  # both outcomes were compared often


@needs_c
def test_text_is_read_alike():
    text = (TESTDATA / "collect" / "metrics.txt").read_text(encoding="utf-8") + "bad{ 1\n"
    with pytest.raises(MetricsError) as fast:
        list(prometheus_scan.iter_text(text, default_time=T0, source="s"))
    with pytest.raises(MetricsError) as pure:
        list(iter_exposition(text.split("\n"), default_time=T0, source="s"))
    assert str(fast.value) == str(pure.value)
