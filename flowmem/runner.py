"""One induction run over a namespace of the store: induce, version, commit (tagged)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowmem.induction.pipeline import InductionResult, induce, plan_versions
from flowmem.induction.rule import Inducer
from flowmem.models import InductionRun, Trajectory, Workflow
from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = ["RunReport", "induce_namespace", "previous_clusters"]


@dataclass
class RunReport:
    """What an induction run committed."""

    run: InductionRun
    """The committed run (its id is the store tag)."""
    result: InductionResult
    """Everything induced, including pitfall notes and failed clusters."""
    versions: list[Workflow]
    """The new workflow versions it stored."""

    def summary(self) -> dict[str, Any]:
        """The run's figures as JSON-ready data."""
        return {
            "run": self.run.id,
            "tag": self.run.tag,
            "trajectories": self.run.counts.get("trajectories", 0),
            "clusters": self.result.counts["clusters"],
            "versions_created": len(self.versions),
            "new_workflows": sum(w.version == 1 for w in self.versions),
            "pitfall_notes": len(self.result.notes),
            "failed_clusters": self.result.failed,
            **{k: v for k, v in self.run.counts.items() if k.startswith("llm_")},
        }


def previous_clusters(
    workflows: Iterable[Workflow], trajectories: Iterable[Trajectory]
) -> dict[str, dict[int, set[str]]]:
    """Per agent, the task texts of each cluster that current workflows were induced from."""
    task_of = {t.id: t.task for t in trajectories}
    found: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for w in workflows:
        if w.cluster_id is not None:
            found[w.agent][w.cluster_id].update(task_of[i] for i in w.source_trajectory_ids if i in task_of)
    return {agent: dict(clusters) for agent, clusters in found.items()}


def _keys(store: Store, keys: Mapping[str, list[str]]) -> dict[str, Any]:
    """Each workflow's vector: the normalised mean of its source tasks' embeddings."""
    out = {}
    for wid, tasks in keys.items():
        v = store.embedder.embed(tasks).mean(axis=0)
        out[wid] = (v / (np.linalg.norm(v) or 1.0)).astype(np.float32)
    return out


def induce_namespace(store: Store, settings: Settings, inducer: Inducer) -> RunReport:
    """Induce the whole namespace, store the changed workflows as new versions in one
    commit, and tag it with the run id."""
    trajectories = store.list_trajectories(limit=None)
    current = {w.id: w for w in store.list_workflows()}
    result = induce(
        trajectories,
        inducer,
        params=settings.cluster_params,
        literal_share=settings.literal_share,
        previous=previous_clusters(current.values(), trajectories),
    )
    counts = {"trajectories": len(trajectories), **result.counts}
    for name in ("calls", "retries", "rejected"):
        if hasattr(inducer, name):
            counts[f"llm_{name}"] = int(getattr(inducer, name))
    run = InductionRun(id=Store.new_run_id(), namespace=settings.namespace, counts=counts)
    versions = plan_versions(result.workflows, current, run_id=run.id)
    committed = store.commit_run(
        run, versions, keys=_keys(store, {w.id: result.keys[w.id] for w in versions})
    )
    return RunReport(committed, result, versions)
