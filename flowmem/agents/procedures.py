"""The familiar workflow-memory API: `add_workflow` a hand-written procedure, `search_workflow`.

Code written against the common workflow-memory interface (a procedure is a task, its steps as
text, an outcome and a result; a search returns objects whose `metadata` holds those four)
runs on flowmem with only its import changed. A procedure is stored as a trajectory: each step
text is one step's action, `result` decides the outcome ("FAILED..." a failure, None not yet
known, anything else a success). So it takes part in induction like every run: several similar
procedures become one abstract workflow, failed ones its pitfalls. A search returns, best
first, the served workflows and the procedures no served workflow was induced from yet.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from flowmem.agents.memory_like import MemoryLike
from flowmem.agents.retrieval import Hit
from flowmem.induction.nearest import snap_cosines
from flowmem.induction.prose import parse_prose
from flowmem.induction.render import render_call
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import PROCEDURE, Step, Trajectory, Workflow

__all__ = ["SOURCE", "FoundWorkflow", "add_procedure", "outcome_of", "search_procedures"]

SOURCE = PROCEDURE
"""The `source` of a trajectory stored by `add_workflow`."""

_MAX_SOURCES = 50
"""How many of an induced workflow's source runs are read to summarise their outcomes."""


@dataclass(frozen=True)
class FoundWorkflow:
    """One search result of `search_workflow`."""

    id: str
    """The workflow id, or the procedure's trajectory id."""
    score: float
    """How well it fits the query (higher is better; the scale of `memory.search` scores)."""
    kind: Literal["workflow", "procedure"]
    """An induced workflow, or a recorded procedure no workflow was induced from yet."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """`task`, `steps` (texts), `outcome`, `result`, and flowmem's own fields: `id`,
    `version`, `score`, `kind`, `workflow_kind`, `pitfalls`."""
    workflow: Workflow | None = None
    """The served version, for an induced workflow."""


def outcome_of(result: str | None) -> bool | None:
    """A procedure's success from its result text: "FAILED..." is a failure (any case, after
    leading spaces), None is not yet known, anything else is a success."""
    if result is None:
        return None
    return not result.lstrip().upper().startswith("FAILED")


def add_procedure(
    memory: MemoryLike,
    task: str,
    steps: Sequence[str],
    outcome: str,
    result: str | None = None,
    *,
    agent: str = "agent",
    namespace: str | None = None,
) -> str:
    """Store a procedure (scrubbed, as every input is) and return its id; stored on return."""
    texts = [s.strip() for s in steps]
    if not task.strip():
        raise ValueError("add_workflow: task must not be empty")
    if not texts or not all(texts):
        raise ValueError("add_workflow: steps must be a non-empty list of non-empty texts")
    run = Trajectory(
        id=uuid.uuid4().hex,
        task=task,
        agent=agent,
        namespace=namespace or memory.settings.namespace,
        steps=_steps(texts),
        success=outcome_of(result),
        final_answer=result,
        source=SOURCE,
        meta={"outcome": outcome, "result": result},
    )
    store_trajectories(memory.store, [run], memory.settings.scrub)
    return run.id


def _steps(texts: Sequence[str]) -> list[Step]:
    """Step texts as steps: the values in a sentence become its arguments (`induction.prose`),
    the text as written kept in the step's meta."""
    named: dict[str, str] = {}
    steps = []
    for text in texts:
        action, args = parse_prose(text, named)
        steps.append(Step(action=action, args=args, meta={"text": text} if args else {}))
    return steps


def _procedure(run: Trajectory, score: float) -> FoundWorkflow:
    meta = {
        "task": run.task,
        "steps": [str(s.meta.get("text") or render_call(s.action, s.args)) for s in run.steps],
        "outcome": run.meta.get("outcome", run.final_answer or ""),
        "result": run.meta.get("result", run.final_answer),
        "id": run.id,
        "version": None,
        "score": round(score, 4),
        "kind": "procedure",
        "workflow_kind": None,
        "pitfalls": [],
    }
    return FoundWorkflow(run.id, score, "procedure", meta)


def _summary(memory: MemoryLike, w: Workflow, namespace: str) -> tuple[str, str]:
    """(outcome, result) of an induced workflow: the most common outcome its source runs state
    (or their final answers), and how often it worked where it was served (or what it was
    induced from, before it was served)."""
    said: Counter[str] = Counter()
    ids = [rid.split("#", 1)[0] for rid in w.source_trajectory_ids[:_MAX_SOURCES]]
    for run in memory.store.get_trajectories(ids, namespace=namespace):
        text = run.meta.get("outcome") or run.final_answer
        if isinstance(text, str) and text.strip():
            said[text.strip()] += 1
    outcome = said.most_common(1)[0][0] if said else "the task was done"
    n = len(w.source_trajectory_ids)
    stats = w.stats
    if stats.successes + stats.failures:
        result = f"succeeded in {stats.successes} of {stats.successes + stats.failures} runs it was served"
    else:
        result = f"induced from {n} successful run{'s' if n != 1 else ''}"
    return outcome, result


def _workflow(memory: MemoryLike, hit: Hit, namespace: str) -> FoundWorkflow:
    w = hit.workflow
    outcome, result = _summary(memory, w, namespace)
    steps = [render_call(s.action, s.args) if s.args else s.action for s in w.steps]
    meta = {
        "task": w.description,
        "steps": steps,
        "outcome": outcome,
        "result": result,
        "id": w.id,
        "version": w.version,
        "score": round(hit.score, 4),
        "kind": "workflow",
        "workflow_kind": w.kind,
        "pitfalls": [p.text for p in w.pitfalls],
        "name": w.name,
    }
    return FoundWorkflow(w.id, hit.score, "workflow", meta, w)


def search_procedures(
    memory: MemoryLike, query: str, k: int = 3, *, namespace: str | None = None
) -> list[FoundWorkflow]:
    """The k best: served workflows (scored as `memory.search` scores them) and procedures
    not induced yet (scored by the cosine of the query and their task), best first."""
    if k < 1:
        raise ValueError("search_workflow: k must be at least 1")
    ns = namespace or memory.settings.namespace
    memory.flush()
    index = memory.index_of(ns)
    hits = index.search(query, k=k)
    induced = {rid.split("#", 1)[0] for w in index.served() for rid in w.source_trajectory_ids}
    runs, vectors = memory.store.trajectory_index(namespace=ns, source=SOURCE)
    found = [_workflow(memory, h, ns) for h in hits]
    fresh = [i for i, r in enumerate(runs) if r.id not in induced]
    if fresh:
        cosine = snap_cosines(vectors[fresh] @ memory.store.embedder.embed([query])[0])
        for j in np.argsort(-cosine, kind="stable")[:k]:
            found.append(_procedure(runs[fresh[int(j)]], float(cosine[int(j)])))
    found.sort(key=lambda f: -f.score)  # stable: equal scores keep workflows first, then runs by position
    return found[:k]
