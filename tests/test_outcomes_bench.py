"""`bench/outcomes.py` on a small store: a fresh process searches it untried, right after
outcomes and with versions ranked up, and says so in figures."""

from __future__ import annotations

from bench.outcomes import outcomes
from flowmem.retrieval.ranking import ANN_MIN


def test_a_probe_times_each_kind_of_search() -> None:
    found = outcomes(ANN_MIN + 500, count=8, boosted=(1, 40), before=None, rounds=1)
    names = ("untried", "after_outcome", "boosted_1", "boosted_40")
    assert all(found[f"{name}_ms"] > 0 for name in names)
    assert found["n"] == ANN_MIN + 500 and found["before"] is None and "untried_ratio" not in found
