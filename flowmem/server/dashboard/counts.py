"""An induction run's counts as the dashboard shows them: each figure with its unit ("4
workflows retired", "8 workflow versions created"), in the order a run goes."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from flowmem.jobs.induce import REJECTED

__all__ = ["UNITS", "Count", "counted"]

UNITS: dict[str, tuple[str, str]] = {
    "trajectories": ("agent run in all", "agent runs in all"),
    "new_trajectories": ("new agent run", "new agent runs"),
    "clusters": ("cluster of tasks", "clusters of tasks"),
    "clusters_changed": ("cluster induced", "clusters induced"),
    "clusters_deferred": ("cluster waiting for more runs", "clusters waiting for more runs"),
    "failed_clusters": ("cluster whose induction failed", "clusters whose induction failed"),
    "workflows": ("workflow induced (changed or not)", "workflows induced (changed or not)"),
    "versions_created": ("workflow version created", "workflow versions created"),
    "retired": ("workflow retired", "workflows retired"),
    "pitfall_notes": (
        "cluster of failed runs only, given pitfall notes",
        "clusters of failed runs only, given pitfall notes",
    ),
    "llm_calls": ("LLM call", "LLM calls"),
    "llm_tokens": ("LLM token", "LLM tokens"),
    "llm_retries": ("LLM retry", "LLM retries"),
}
"""Each count a run records, its unit in the singular and the plural, in the order shown."""


class Count(BaseModel):
    """One figure of a run and what it counts."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    key: str
    """The count's key in the run record (`retired`)."""
    value: int
    """The figure."""
    unit: str
    """What it counts, agreeing with the figure (`workflows retired`)."""
    rejected: bool = False
    """An LLM answer's rejection count."""


def _unit(key: str, value: int) -> str:
    if key in UNITS:
        return UNITS[key][value != 1]
    if key.startswith(REJECTED):
        reason = key.removeprefix(REJECTED).replace("_", " ")
        return f"LLM answer{'' if value == 1 else 's'} rejected: {reason}"
    return key.replace("_", " ")  # a count this dashboard does not know: its own name


def counted(counts: Mapping[str, int]) -> list[Count]:
    """A run's counts with their units: the known ones in `UNITS`' order, then the LLM
    rejections and any other, by key."""
    order = {k: i for i, k in enumerate(UNITS)}
    keys = sorted(counts, key=lambda k: (order.get(k, len(order)), k))
    return [
        Count(key=k, value=counts[k], unit=_unit(k, counts[k]), rejected=k.startswith(REJECTED)) for k in keys
    ]
