"""The familiar workflow-memory API: `add_workflow` a hand-written procedure, `search_workflow`.

Code written against the common workflow-memory interface (a procedure is a task, its steps as
text, an outcome and a result; a search returns objects whose `metadata` holds those four)
runs on flowmem with only its import changed. A procedure is stored as a trajectory: each step
text is one step's action, `result` decides the outcome ("FAILED..." a failure, None not yet
known, anything else a success). So it takes part in induction like every run: several similar
procedures become one abstract workflow, failed ones its pitfalls.

A search has the relevance rule of `memory.search` and `memory.context` (one function,
`ServedIndex.floor_keeps`): it returns the workflows `memory.search` serves, with their
pitfalls, first; then the recorded procedures no served workflow was induced from yet that
the same floor lets through (a procedure is a memory keyed by its own task), best first. Nothing
served carries an example value: a recorded procedure is one run, so its texts are served
abstracted like a workflow's (`induction.render.recorded`: "build docker image tag {tag}"), and a
failed one only as the failure it was (kind `failure`, its result still beginning "FAILED",
what went wrong as where it left the best served workflow), never as steps to follow.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from flowmem.agents.memory_like import MemoryLike
from flowmem.induction.render.prose import parse_prose
from flowmem.induction.render.recorded import recorded, went_wrong
from flowmem.induction.render.render import render_call
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import PROCEDURE, Step, Trajectory, Workflow
from flowmem.retrieval.nearest import snap_cosines
from flowmem.retrieval.search import Hit

__all__ = ["SOURCE", "FoundWorkflow", "Kind", "add_procedure", "outcome_of", "search_procedures"]

Kind = Literal["workflow", "procedure", "failure"]
"""What a search result is: an induced workflow, a recorded procedure, a recorded failure."""

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
    kind: Kind
    """An induced workflow, a recorded procedure no workflow was induced from yet, or a
    recorded procedure that failed (never steps to follow)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """`task`, `steps` (texts), `outcome`, `result`, and flowmem's own fields: `id`,
    `version`, `score`, `kind`, `workflow_kind`, `pitfalls`; a workflow's `name`; a recorded
    procedure's `went_wrong` (a failure's divergence from the best served workflow, or None)
    and `runs` (how many recorded runs read alike once abstracted). No example value: a
    recorded procedure's texts are abstracted (`induction.render.recorded`)."""
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
        steps=_steps(texts, task),
        success=outcome_of(result),
        final_answer=result,
        source=SOURCE,
        meta={"outcome": outcome, "result": result},
    )
    store_trajectories(memory.store, [run], memory.settings.scrub)
    return run.id


def _steps(texts: Sequence[str], task: str) -> list[Step]:
    """Step texts as steps: the values in a sentence become its arguments (`induction.render.prose`,
    which also reads the task: a word the task names after a linking word is one of its
    values, and a value is called what the task calls it), the text as written kept in the
    step's meta."""
    named: dict[str, str] = {}
    steps = []
    for text in texts:
        action, args = parse_prose(text, named, task=task)
        steps.append(Step(action=action, args=args, meta={"text": text} if args else {}))
    return steps


def _recorded(run: Trajectory, score: float, workflows: Sequence[Workflow]) -> FoundWorkflow:
    """A recorded procedure no served workflow was induced from, abstracted (`induction.render.recorded`):
    a failed one as the failure it was (kind `failure`, what went wrong), another as a
    procedure."""
    failed = run.success is False
    texts = recorded(
        run,
        run.meta.get("outcome", run.final_answer),
        run.meta.get("result", run.final_answer),
        failed=failed,
    )
    wrong = went_wrong(run, workflows) if failed else None
    kind: Kind = "failure" if failed else "procedure"
    meta = {
        "task": texts.task,
        "steps": list(texts.steps),
        "outcome": texts.outcome,
        "result": texts.result,
        "id": run.id,
        "version": None,
        "score": round(score, 4),
        "kind": kind,
        "workflow_kind": None,
        "pitfalls": [wrong] if wrong else [],
        "went_wrong": wrong,
        "runs": 1,
    }
    return FoundWorkflow(run.id, score, kind, meta)


def _merged(found: Sequence[FoundWorkflow]) -> list[FoundWorkflow]:
    """Recorded procedures that read alike once abstracted as one (the best scored), with how
    many runs it stands for: two failed deploys of two versions are one failure."""
    kept: dict[tuple[str, ...], FoundWorkflow] = {}
    for f in found:
        m = f.metadata
        key = (f.kind, m["task"], *m["steps"], m["outcome"], str(m["result"]), str(m["went_wrong"]))
        first = kept.get(key)
        if first is None:
            kept[key] = f
        else:
            first.metadata["runs"] += 1
    return list(kept.values())


def _summary(memory: MemoryLike, w: Workflow, namespace: str) -> tuple[str, str]:
    """(outcome, result) of an induced workflow: the most common outcome its source runs state
    (or their final answers), each with its run's values as placeholders, and how often it
    worked where it was served (or what it was induced from, before it was served)."""
    said: Counter[str] = Counter()
    ids = [rid.split("#", 1)[0] for rid in w.source_trajectory_ids[:_MAX_SOURCES]]
    for run in memory.store.get_trajectories(ids, namespace=namespace):
        text = run.meta.get("outcome") or run.final_answer
        if isinstance(text, str) and text.strip():
            said[recorded(run, text.strip(), None, failed=False).outcome] += 1
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
    steps = [
        (f"{s.repeat.says()}: " if s.repeat is not None else "")
        + (render_call(s.action, s.args) if s.args else s.action)
        for s in w.steps
    ]
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
    """The k best: the served workflows `memory.search` serves for the query (with their
    pitfalls), then the recorded procedures no served workflow was induced from yet (scored by
    the cosine of the query and their task), abstracted, failed ones as failures. The
    relevance floor is the one `memory.search` applies (`ServedIndex.floor_keeps`): a
    procedure is a memory keyed by its own task."""
    if k < 1:
        raise ValueError("search_workflow: k must be at least 1")
    ns = namespace or memory.settings.namespace
    memory.flush()
    index = memory.index_of(ns)
    hits = index.search(query, k=k)
    found = [_workflow(memory, h, ns) for h in hits]
    induced = {rid.split("#", 1)[0] for rid in index.sources()}  # not served(): a Workflow each
    runs, vectors = memory.store.trajectory_index(namespace=ns, source=SOURCE)
    fresh = [i for i, r in enumerate(runs) if r.id not in induced]
    if not fresh:
        return found
    vector = memory.store.embedder.embed([query])[0]
    cosine = snap_cosines(vectors[fresh] @ vector)
    keep = index.floor_keeps(
        query,
        [*(h.similarity for h in hits), *cosine.tolist()],
        [*(h.by_example for h in hits), *[True] * len(fresh)],
        query=vector,
    )[len(hits) :]
    workflows = [h.workflow for h in hits]
    others = [
        _recorded(runs[fresh[int(j)]], float(cosine[int(j)]), workflows)
        for j in np.argsort(-cosine, kind="stable")
        if keep[int(j)]
    ]
    # Workflows first: each is what several runs did, with the pitfalls their failures taught.
    return [*found, *_merged(others)][:k]
