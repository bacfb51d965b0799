"""`bench/search_sets.py` on a slice of the shared WorkBench set: a store induced from its
training runs, each test task searched by this checkout and by another revision in processes of
their own, the same hits served by both."""

from __future__ import annotations

import gzip
import itertools
import subprocess
from pathlib import Path

import pytest

from bench.paths import REPO
from bench.search_sets import _table, search_sets
from tests.factories import WORKBENCH


def _in_git() -> bool:
    """Whether this checkout is a git work tree with a HEAD (the other revision comes from
    `git archive`)."""
    found = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, check=False)
    return found.returncode == 0


def _slice(tmp_path: Path) -> Path:
    """A data folder holding the shared WorkBench set's first 400 runs."""
    data = tmp_path / "data"
    data.mkdir()
    with gzip.open(WORKBENCH, "rt", encoding="utf-8") as full:
        head = list(itertools.islice(full, 400))
    with gzip.open(data / WORKBENCH.name, "wt", encoding="utf-8") as part:
        part.writelines(head)
    return data


@pytest.mark.skipif(not WORKBENCH.exists(), reason="needs ../shared/data")
@pytest.mark.skipif(not _in_git(), reason="needs the checkout's git history")
def test_both_revisions_search_every_test_task_and_serve_the_same(tmp_path: Path) -> None:
    data = _slice(tmp_path)
    found = search_sets(data, before="HEAD", rounds=1, gap=0.01, limit=5)
    row = found["workbench"]
    assert set(found) == {"rounds", "gap_s", "s3", "before", "load_average_1m", "workbench"}
    assert found["gap_s"] == 0.01 and row["tasks"] == 5
    assert row["workflows"] > 0 and row["train"] > row["tasks"]
    assert row["same_hits"] is True  # HEAD's flowmem is this checkout's, or serves as it does
    assert 0 < row["p50_ms"] <= row["p95_ms"] and 0 < row["p50_ms_before"]
    assert row["ratio"] > 0 and row["ratio_cpu"] > 0
    table = _table(found, "HEAD").splitlines()
    assert table[0].startswith("| set | workflows | test tasks | p50 | p95 | mean | HEAD: p50")
    assert table[2].startswith(f"| workbench | {row['workflows']} | {row['tasks']} | ")


@pytest.mark.skipif(not WORKBENCH.exists(), reason="needs ../shared/data")
def test_the_stores_copied_to_s3_are_searched_there(tmp_path: Path) -> None:
    pytest.importorskip("moto", reason="the S3 server comes with the dev extra")
    data = _slice(tmp_path)
    found = search_sets(data, before=None, rounds=1, limit=3, s3=True)
    row = found["workbench"]
    assert found["s3"] is True and row["store"] == "s3://flowmem-bench/workbench"
    assert row["tasks"] == 3 and 0 < row["p50_ms"] <= row["p95_ms"]
