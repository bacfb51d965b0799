from __future__ import annotations

import pytest

from flowmem.agents import WorkflowMemory
from flowmem.induction.rule import RuleInducer
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import induce
from flowmem.jobs.learn import learn
from flowmem.models import WorkflowRef
from flowmem.settings import Settings
from flowmem.sim import simulate
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
    store.add_trajectories(simulate(300, seed=1))
    induce(store, settings, RuleInducer(), namespace=settings.namespace)
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
    store.add_trajectories(simulate(60, seed=2))
    induce(store, settings, RuleInducer(), namespace=settings.namespace)
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
