"""`bench/search_turns.py` on a small store: two revisions' processes take turns searching it
and timing numpy exact, and the figures say how each fared and how they compare."""

from __future__ import annotations

import pytest

from bench.search_turns import turns


def test_two_revisions_take_turns_and_are_compared_round_by_round() -> None:
    found = turns(300, before="HEAD", rounds=2, block=5)
    for suffix in ("", "_before"):
        assert found[f"search_p50_ms{suffix}"] > 0 and found[f"numpy_p50_ms{suffix}"] > 0
        assert found[f"vs_numpy{suffix}"] > 0 and 0 <= found[f"rounds_met{suffix}"] <= 1
    assert found["search_ratio_q1"] <= found["search_ratio"] <= found["search_ratio_q3"]
    assert (found["rounds"], found["block"], found["before"]) == (2, 5, "HEAD")


def test_a_revision_that_cannot_be_read_is_an_error() -> None:
    with pytest.raises(Exception, match="no-such-revision"):
        turns(50, before="no-such-revision", rounds=1, block=1)
