from __future__ import annotations

import pytest

from flowmem.agents import WorkflowMemory
from flowmem.demo import simulate
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.jobs.learn import learn
from flowmem.models import WorkflowRef
from flowmem.settings import Settings
from flowmem.storage import NotFoundError

TASK = (
    "Onboard Ada Quist: mark them won, assign them to Maren Holmgren, "
    "and email Maren Holmgren 'Welcome aboard'"
)
SUBTASK = "Move Ada Quist to won in the CRM"


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> WorkflowMemory:
    settings = Settings(db=str(tmp_path_factory.mktemp("lego") / "db"))
    store = store_from(settings)
    store_trajectories(store, simulate(300, seed=1), settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    return WorkflowMemory.open(settings)


def test_orchestrator_gets_plans(memory: WorkflowMemory) -> None:
    plans = memory.for_orchestrator(TASK)
    assert plans and all(h.workflow.scope == "task" and h.workflow.agent == "orchestrator" for h in plans)
    assert any(s.agent == "crm_agent" for s in plans[0].workflow.steps)


@pytest.mark.parametrize("strategy", ["vanilla", "dynamic", "rewrite"])
def test_task_agent_gets_its_subtask_memories(memory: WorkflowMemory, strategy: str) -> None:
    hits = memory.for_agent("crm_agent", SUBTASK, strategy=strategy, task=TASK)  # type: ignore[arg-type]
    assert hits and len(hits) <= 3
    assert all(h.workflow.agent == "crm_agent" and h.workflow.scope == "subtask" for h in hits)
    assert any("crm.update_status" in h.workflow.actions for h in hits)


def test_strategies_without_the_full_task_fall_back_to_dynamic(memory: WorkflowMemory) -> None:
    dynamic = memory.for_agent("crm_agent", SUBTASK, strategy="dynamic")
    assert [h.workflow.id for h in memory.for_agent("crm_agent", SUBTASK, strategy="vanilla")] == [
        h.workflow.id for h in dynamic
    ]


def test_outcome_reported_later_reaches_the_stats(settings: Settings) -> None:
    store = store_from(settings)
    store_trajectories(store, simulate(60, seed=2), settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    w = store.list_workflows()[0]
    with WorkflowMemory.open(settings) as memory:
        with memory.record("a task", id="later") as run:
            run.use(WorkflowRef(id=w.id, version=w.version))
        memory.report_outcome("later", success=False, feedback="the user undid it")
        with pytest.raises(NotFoundError):
            memory.report_outcome("never-recorded", success=True)
    t = store.get_trajectory("later")
    assert (t.success, t.feedback) == (False, "the user undid it")
    learn(store, namespace=settings.namespace)
    stats = store.get_workflow(w.id).stats
    assert stats.failures >= 1 and stats.served >= 1


def test_vanilla_serves_what_the_agent_did_under_the_retrieved_plans(memory: WorkflowMemory) -> None:
    """Not a text search: the same memories for any subtask text, ranked by how many of the
    plans' sub-runs each was induced from."""
    vague = memory.for_agent("crm_agent", "Do the CRM part", strategy="vanilla", task=TASK)
    exact = memory.for_agent("crm_agent", SUBTASK, strategy="vanilla", task=TASK)
    assert [h.workflow.id for h in vague] == [h.workflow.id for h in exact] != []
    assert all(h.similarity == 0.0 and h.score >= 1 and h.score == int(h.score) for h in vague)
    plan_runs = {i for h in memory.for_orchestrator(TASK) for i in h.workflow.source_trajectory_ids}
    for h in vague:
        parents = {memory.store.get_trajectory(i).parent_id for i in h.workflow.source_trajectory_ids}
        assert parents & plan_runs


def test_rewrite_searches_with_the_subtasks_of_the_nearest_past_run(memory: WorkflowMemory) -> None:
    """Given a vague subtask, `dynamic` can only search with it; `rewrite` drafts the agent's
    subtasks from the nearest past run of the best plan and finds the status change first."""
    vague = "Do the CRM part"
    dynamic = memory.for_agent("crm_agent", vague, strategy="dynamic", task=TASK)
    rewrite = memory.for_agent("crm_agent", vague, strategy="rewrite", task=TASK)
    assert rewrite[0].workflow.actions[-1] == "crm.update_status" and rewrite[0].score == pytest.approx(1.0)
    assert dynamic[0].workflow.id != rewrite[0].workflow.id and dynamic[0].score < 0.9


def _vanilla_reading_everything(
    memory: WorkflowMemory, agent: str, task: str, k: int
) -> list[tuple[str, float]]:
    """`vanilla` as it was first written: every run of the agent and every served `Workflow`
    read per call (what `legomem._vanilla` must still return, reading neither)."""
    plan_runs = {i for h in memory.for_orchestrator(task) for i in h.workflow.source_trajectory_ids}
    children = {
        t.id for t in memory.store.list_trajectories(agent=agent, limit=None) if t.parent_id in plan_runs
    }
    found: dict[str, float] = {}
    for w in memory.index_of(memory.settings.namespace).served():
        if w.agent == agent and w.scope == "subtask" and w.id not in found:
            if overlap := len(children & set(w.source_trajectory_ids)):
                found[w.id] = float(overlap)
    return sorted(found.items(), key=lambda item: (-item[1], item[0]))[:k]


def test_vanilla_reads_only_the_plans_sub_runs_and_serves_what_reading_everything_served(
    memory: WorkflowMemory,
) -> None:
    tasks = sorted({t.task for t in memory.store.list_trajectories(agent="orchestrator", limit=None)})[:12]
    agents = sorted(
        {w.agent for w in memory.index_of(memory.settings.namespace).served() if w.scope == "subtask"}
    )
    assert len(tasks) == 12 and len(agents) >= 2
    served = 0
    for task in tasks:
        for agent in agents:
            got = memory.for_agent(agent, "the subtask", k=5, strategy="vanilla", task=task)
            assert [(h.workflow.id, h.score) for h in got] == _vanilla_reading_everything(
                memory, agent, task, 5
            )
            served += len(got)
    assert served >= len(tasks)  # not every answer empty
