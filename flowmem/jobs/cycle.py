"""Cycle: collect, induce and learn in this process (what the Prefect `cycle` flow runs as tasks)."""

from __future__ import annotations

from typing import Any

from flowmem.jobs.collect import collect
from flowmem.jobs.factories import inducer_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.learn import learn
from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = ["cycle"]


def cycle(store: Store, settings: Settings, *, inducer: str = "rule") -> dict[str, Any]:
    """collect → induce → learn on the settings' namespace; the three summaries, as JSON (what
    the Prefect `cycle` flow returns too)."""
    namespace = settings.namespace
    collected = collect(store, settings)
    report = run_induction(store, settings, inducer_from(inducer, settings), namespace=namespace)
    return {
        "collect": collected.summary(),
        "induce": report.summary().model_dump(mode="json"),
        "learn": learn(store, namespace=namespace),
    }
