"""`bench/recurring.py` on a small store: a fresh process searches it for tasks like its stored
runs, for tasks from no known domain and right after another store's induction run, and says
so in figures."""

from __future__ import annotations

from bench.recurring import recurring
from flowmem.retrieval.ranking import ANN_MIN


def test_a_probe_times_each_kind_of_search_and_its_runs_agree() -> None:
    found = recurring(ANN_MIN + 500, count=8, before=None, rounds=1)
    assert all(found[f"{name}_ms"] > 0 for name in ("recurring", "foreign", "after_induction"))
    assert 0.5 < found["runs_agree"] <= 1 and 0 < found["recur_share"] <= 1
    assert found["before"] is None and "recurring_ratio" not in found
