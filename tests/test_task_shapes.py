"""`storage.task_shapes`: the task words and templates the evidence read works out by Arrow's
kernels are those `Evidence` works out itself in Python, for any column of ASCII tasks; any
other column is left to `Evidence`."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowmem.retrieval.cover import Evidence
from flowmem.storage.task_shapes import task_shapes

_WORDS = ["Call", "call", "OLGA", "olga", "kofi", "x_y", "_", "7", "07", "Straße", "naïve"]
_GAPS = [" ", "  ", "!", ", ", "-", "\t", "\n", "__", "'", "", "/"]


def _task(parts: list[tuple[str, str]]) -> str:
    return "".join(gap + word for word, gap in parts)


_TASKS = st.lists(
    st.lists(st.tuples(st.sampled_from(_WORDS), st.sampled_from(_GAPS)), max_size=6).map(_task),
    max_size=30,
)


def _python(tasks: list[str], share: float) -> Evidence:
    """The evidence `Evidence` works out from the tasks alone."""
    return Evidence(tasks, [["a"]] * len(tasks), np.zeros((len(tasks), 2), dtype=np.float32), share)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(_TASKS, st.sampled_from([0.0, 0.1, 0.3, 0.5, 1.0]), st.booleans())
def test_arrow_shapes_are_the_evidences_own(tasks: list[str], share: float, chunked: bool) -> None:
    column: pa.Array | pa.ChunkedArray = pa.array(tasks, type=pa.string())
    if chunked and len(tasks) > 1:
        column = pa.chunked_array([column[: len(tasks) // 2], column[len(tasks) // 2 :]])
    found = task_shapes(column, share)
    if not tasks or not all(t.isascii() for t in tasks):
        assert found is None  # worked out by `Evidence` itself
        return
    assert found is not None
    want = _python(tasks, share)
    words, templates = found
    assert words == want.words
    assert tuple(templates) == want.templates
    given_shapes = Evidence(tasks, want.actions, want.vectors, share, shapes=found)
    assert given_shapes.words == want.words and given_shapes.templates == want.templates
    assert given_shapes.known == want.known


def test_a_large_string_column_and_texts_without_words() -> None:
    tasks = ["", "!!", "Call Olga", "call olga!", "Call Kofi", "  "]
    found = task_shapes(pa.array(tasks, type=pa.large_string()), 0.5)
    want = _python(tasks, 0.5)
    assert found is not None and found[0] == want.words == frozenset({"call"})
    assert tuple(found[1]) == want.templates == ("", "", "call _", "call _", "call _", "")


def test_a_null_task_is_left_to_the_evidence() -> None:
    assert task_shapes(pa.array(["call olga", None]), 0.1) is None


def test_templates_for_other_runs_are_refused() -> None:
    with pytest.raises(ValueError, match="1 templates for 2 runs"):
        Evidence(["a", "b"], [["x"], ["y"]], np.zeros((2, 2), np.float32), shapes=(frozenset(), ["a"]))


def test_a_word_said_twice_in_one_task_counts_once() -> None:
    tasks = ["Call call", "olga", "kofi"]
    found = task_shapes(pa.array(tasks), 0.5)  # "call" in 1 of 3 texts: under the cut of 1.5
    assert found is not None and found[0] == _python(tasks, 0.5).words == frozenset()
    assert tuple(found[1]) == ("_ _", "_", "_")
