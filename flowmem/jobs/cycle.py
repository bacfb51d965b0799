"""Cycle: collect, induce and learn in this process (what the Prefect `cycle` flow runs as tasks)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from flowmem.jobs.collect import Collected, collect
from flowmem.jobs.factories import inducer_from
from flowmem.jobs.induce import RunSummary, run_induction
from flowmem.jobs.learn import Learned, learn
from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = ["CycleSummary", "cycle"]


class CycleSummary(BaseModel):
    """What one collect → induce → learn cycle did: what `cycle` and the Prefect `cycle` flow
    return, and `flowmem run cycle --json` prints."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    collect: Collected
    """What collecting did: files read, runs stored, duplicates, rejected, failed files."""
    induce: RunSummary
    """The induction run's summary."""
    learn: Learned
    """What learning did."""


def cycle(store: Store, settings: Settings, *, inducer: str = "rule") -> CycleSummary:
    """collect → induce → learn on the settings' namespace; the three summaries (what the
    Prefect `cycle` flow returns too)."""
    namespace = settings.namespace
    collected = collect(store, settings)
    report = run_induction(store, settings, inducer_from(inducer, settings), namespace=namespace)
    return CycleSummary(collect=collected, induce=report.summary(), learn=learn(store, namespace=namespace))
