"""`retrieval.unique`: the distinct values and groups a search and a reload work out by one sort
are numpy's `np.unique`'s, on any integer arrays."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from flowmem.retrieval.unique import grouped, sorted_unique

_INTS = hnp.arrays(np.int64, st.integers(0, 300), elements=st.integers(-(2**62), 2**62))
_SMALL = st.integers(0, 300).flatmap(
    lambda n: st.tuples(
        hnp.arrays(np.int64, n, elements=st.integers(-3, 3)),
        hnp.arrays(np.int64, n, elements=st.integers(0, 5)),
    )
)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(_INTS, st.booleans())
def test_sorted_unique_is_numpys(values: np.ndarray, few: bool) -> None:
    values = values % 7 if few else values  # many repeats, or mostly distinct
    found = sorted_unique(values)
    np.testing.assert_array_equal(found, np.unique(values))
    assert found.dtype == values.dtype


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(_SMALL)
def test_grouped_is_numpys_unique_by_rows(columns: tuple[np.ndarray, np.ndarray]) -> None:
    first, second = columns
    first_rows, inverse = grouped(first, second)
    if not len(first):
        assert len(first_rows) == len(inverse) == 0
        return
    _, want_first, want_inverse = np.unique(
        np.column_stack([first, second]), axis=0, return_index=True, return_inverse=True
    )
    np.testing.assert_array_equal(first_rows, want_first)
    np.testing.assert_array_equal(inverse, want_inverse.reshape(-1))


def test_grouped_of_strided_columns_and_one_column() -> None:
    pairs = np.array([[3, 1], [0, 0], [3, 1], [0, 2], [0, 0]], dtype=np.int64)
    first, inverse = grouped(pairs[:, 0], pairs[:, 1])  # views with a stride, as a reload passes
    assert first.tolist() == [1, 3, 0]
    assert inverse.tolist() == [2, 0, 2, 1, 0]
    first, inverse = grouped(np.array([5, 5, 2], dtype=np.int64))
    assert first.tolist() == [2, 0] and inverse.tolist() == [1, 1, 0]
