"""pyproflab.arrays: the buffer-level conversions equal pyarrow's own."""

from __future__ import annotations

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
