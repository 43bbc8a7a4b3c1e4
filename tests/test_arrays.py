"""pyproflab.arrays: the buffer-level conversions equal pyarrow's own."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest

from pyproflab import arrays

TYPES = [pa.int8(), pa.int32(), pa.int64(), pa.uint64(), pa.float64(), pa.bool_()]


def _values(t: pa.DataType, n: int = 37) -> np.ndarray:
    rng = np.random.default_rng(3)
    if pa.types.is_boolean(t):
        return rng.integers(0, 2, n).astype(bool)
    if pa.types.is_floating(t):
        return rng.normal(size=n)
    info = np.iinfo(t.to_pandas_dtype())
    return rng.integers(info.min, info.max, n, dtype=t.to_pandas_dtype(), endpoint=True)


@pytest.mark.parametrize("t", TYPES, ids=str)
def test_round_trip_equals_pyarrow(t):
    values = _values(t)
    ours = arrays.from_numpy(values, t)
    assert ours.equals(pa.array(values, t))
    assert np.array_equal(arrays.to_numpy(ours), values)
    # Slices start inside the buffer (and inside a byte of a bitmap).
    part = ours.slice(5, 20)
    assert np.array_equal(arrays.to_numpy(part), values[5:25])
    chunked = pa.chunked_array([ours.slice(0, 3), ours.slice(3)])
    assert np.array_equal(arrays.to_numpy(chunked), values)


def test_empty_and_nulls():
    assert arrays.to_numpy(arrays.from_numpy([], pa.int64())).dtype == np.int64
    assert len(arrays.to_numpy(pa.chunked_array([], pa.uint64()))) == 0
    masked = arrays.from_numpy([1, 2, 3], pa.int64(), mask=[False, True, False])
    assert masked.to_pylist() == [1, None, 3]
    # With nulls, pyarrow's own conversion (floats with NaN).
    assert np.isnan(arrays.to_numpy(masked)[1])


def test_from_numpy_refuses_other_types():
    with pytest.raises(TypeError, match="integer, float or bool"):
        arrays.from_numpy([1], pa.string())


def test_strings():
    values = ["a", None, "", "héllo", "main.(*T).f"]
    ours = arrays.from_strings(values)
    assert ours.equals(pa.array(values, pa.string()))
    assert arrays.from_strings([]).equals(pa.array([], pa.string()))


def test_list_parts_of_slices_and_nulls():
    lists = pa.array([[1, 2], [], [3], [4, 5, 6], [7]], pa.list_(pa.int64()))
    for arr in (lists, lists.slice(2, 2), lists.slice(0, 0)):
        offsets, values = arrays.list_parts(arr)
        flat = arr.flatten()
        assert values.equals(flat)
        lengths = [len(x) for x in arr.to_pylist()]
        assert np.diff(offsets).tolist() == lengths
        assert offsets[0] == 0
    with_null = pa.array([[1], None, [2, 3]], pa.list_(pa.int64()))
    offsets, values = arrays.list_parts(with_null)
    assert offsets.tolist() == [0, 1, 1, 3]
    assert values.to_pylist() == [1, 2, 3]


def test_empty_lists():
    out = arrays.empty_lists(3, pa.uint64())
    assert out.to_pylist() == [[], [], []]
    assert out.type == pa.list_(pa.uint64())


# --- from_rows: Python rows as a table, as pa.Table.from_pylist builds it ---------------

NESTED = pa.schema(
    [
        pa.field("n", pa.int64()),
        pa.field("u", pa.uint64()),
        pa.field("s", pa.string()),
        pa.field("t", pa.timestamp("us", tz="UTC")),
        pa.field("t_ms", pa.timestamp("ms")),
        pa.field("words", pa.list_(pa.string())),
        pa.field("pairs", pa.list_(pa.struct([("type", pa.string()), ("unit", pa.string())]))),
        pa.field("labels", pa.map_(pa.string(), pa.string())),
        pa.field("nums", pa.list_(pa.int64())),
    ]
)


def _random_row(rng: random.Random) -> dict:
    def maybe(value):
        return None if rng.random() < 0.2 else value

    def text():
        return rng.choice(["", "cpu", "nanoseconds", "ünï", "a" * rng.randint(0, 40)])

    when = datetime(1969, 12, 31, tzinfo=UTC) + timedelta(microseconds=rng.randint(0, 2**50))
    row = {
        "n": maybe(rng.randint(-(2**63), 2**63 - 1)),
        "u": maybe(rng.randint(0, 2**64 - 1)),
        "s": maybe(text()),
        "t": maybe(when if rng.random() < 0.5 else when.replace(tzinfo=None)),
        "t_ms": maybe(when.replace(tzinfo=None, microsecond=when.microsecond // 1000 * 1000)),
        "words": maybe([maybe(text()) for _ in range(rng.randint(0, 3))]),
        "pairs": maybe([maybe({"type": text(), "unit": maybe(text())}) for _ in range(2)]),
        "labels": maybe(
            dict((text(), text()) for _ in range(rng.randint(0, 3)))
            if rng.random() < 0.5
            else [(text(), maybe(text())) for _ in range(rng.randint(0, 3))]
        ),
        "nums": maybe([rng.randint(-5, 5) for _ in range(rng.randint(0, 4))]),
    }
    return {k: v for k, v in row.items() if rng.random() < 0.95}  # a missing key is null


@pytest.mark.parametrize("seed", range(20))
def test_from_rows_equals_from_pylist(seed: int) -> None:
    rng = random.Random(seed)
    rows = [_random_row(rng) for _ in range(rng.randint(0, 30))]
    ours = arrays.from_rows(rows, NESTED)
    ours.validate(full=True)
    assert ours.equals(pa.Table.from_pylist(rows, schema=NESTED))


def test_from_rows_builds_the_store_profile_rows() -> None:
    from pyproflab import schema

    row = {
        "profile_id": 1,
        "content_hash": "ab" * 32,
        "profile_type": "cpu",
        "labels": [("env", "prod")],
        "time": datetime(2026, 11, 27, 12, 0, 0, 123456, tzinfo=UTC),
        "time_nanos": 1,
        "duration_nanos": 2,
        "period": 3,
        "sample_types": [{"type": "cpu", "unit": "nanoseconds"}],
        "default_sample_type": "",
        "comments": ["derived"],
        "drop_frames": "",
        "keep_frames": "",
        "doc_url": "",
        "ingested_at": datetime(2026, 11, 27, tzinfo=UTC),
        "num_samples": 4,
        "main_mapping_id": 2**64 - 1,
    }
    rows = [row, {**row, "profile_id": 2, "labels": None, "time": None}]
    expected = pa.Table.from_pylist(rows, schema=schema.STORE_PROFILES)
    assert arrays.from_rows(rows, schema.STORE_PROFILES).equals(expected)


def test_from_rows_refuses_a_type_it_does_not_build() -> None:
    with pytest.raises(TypeError, match="does not build"):
        arrays.from_rows([{"x": 1.5}], pa.schema([("x", pa.float64())]))


def test_many_small_chunks_are_joined_and_few_large_ones_kept() -> None:
    from pyproflab.arrays import SMALL_CHUNK, few_chunks

    small = pa.concat_tables([pa.table({"x": list(range(k, k + 3))}) for k in range(100)])
    joined = few_chunks(small)
    assert joined.column("x").num_chunks == 1 and joined.equals(small)
    rows = SMALL_CHUNK // 8 + 1  # int64: each chunk just over the bound
    large = pa.concat_tables([pa.table({"x": pa.array(range(rows), pa.int64())})] * 2)
    assert few_chunks(large) is large
