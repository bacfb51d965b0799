"""`bench/kept_ann.py` on a small store: of two processes that open it in turn, the first
builds the HNSW indexes and keeps them, the second reads them, and says so in figures."""

from __future__ import annotations

from bench.kept_ann import kept_ann
from flowmem.retrieval.ranking import ANN_MIN


def test_the_second_process_reads_what_the_first_kept() -> None:
    found = kept_ann(ANN_MIN + 500, rounds=1, early=0.5, count=8)
    for who in ("built", "read"):
        assert 0 < found[f"{who}_load_s"] <= found[f"{who}_keys_ann_s"]
        assert found[f"{who}_evidence_ann_s"] > 0 and found[f"{who}_early_ms"] > 0
    assert found["built_kept_mb"] > 1 and found["read_kept_mb"] == found["built_kept_mb"]
    assert found["keys_ann_s_ratio"] == found["read_keys_ann_s"] / found["built_keys_ann_s"]
