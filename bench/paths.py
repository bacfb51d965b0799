"""Where the benchmarks find the checkout and the shared data sets."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO", "SHARED_DATA"]

REPO = Path(__file__).resolve().parents[2]
"""The checkout flowmem is installed from (editable): README.md, docs/, bench/results/."""

SHARED_DATA = REPO.parent / "shared" / "data"
"""The shared data sets, in ../shared/data beside the checkout."""
