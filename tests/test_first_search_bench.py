"""`bench/first_search.py` on a small store: a fresh process imports, opens a memory and
searches once, is served the workflows the store holds, and says how long that took."""

from __future__ import annotations

from pathlib import Path

from bench.data import fill
from bench.first_search import first_search, probe
from bench.paths import REPO
from flowmem.jobs.factories import store_from
from flowmem.settings import Settings


def test_a_probe_searches_a_store_in_a_fresh_process(tmp_path: Path) -> None:
    db = tmp_path / "store"
    fill(store_from(Settings(db=str(db))), 20, examples=True)
    seconds, served = probe(REPO, db)
    assert 0 < seconds < 120 and served  # hits of the store's workflows, by id
    assert all(i.startswith("w") for i in served)


def test_the_figures_name_each_size_and_no_revision_when_asked_for_none() -> None:
    found = first_search([20], runs=1, before=None)
    assert found["first_search_20_s"] > 0 and found["first_search_before"] is None
    assert "first_search_20_ratio" not in found
