"""Builders the tests share: trajectories of a few task families, workflows, seeded stores and the
inputs several modules use. Test modules import these from here, never from one another
(tests/test_test_layout.py checks it); a store is seeded as production seeds one, through
`flowmem.jobs.ingest.store_trajectories`."""

from __future__ import annotations

import gzip
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from flowmem.induction.base import ClusterInput
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.inducers.validate import Arg, InducedStep, InducedWorkflow, Parameter
from flowmem.induction.literals import LiteralIndex
from flowmem.interchange import parse_line
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.jobs.learn import learn
from flowmem.jobs.status import Verb, set_status
from flowmem.models import (
    InductionRun,
    Step,
    Trajectory,
    UsageStats,
    Workflow,
    WorkflowRef,
    WorkflowStep,
    now,
)
from flowmem.settings import Settings
from flowmem.storage import Store
from flowmem.storage.lance_import import load_lancedb

if TYPE_CHECKING:
    from lancedb import DBConnection

ROOT = Path(__file__).resolve().parents[1]
"""The project's checkout."""


# -- the shared data ---------------------------------------------------------------------------


WORKBENCH = ROOT.parent / "shared" / "data" / "workbench_trajectories.jsonl.gz"


def copy_store(source: Settings, to: Settings) -> Store:
    """The store at `source.db` copied to `to.db`, opened with `to`: a module seeds its own copy
    of a store built once for the session (tests/conftest.py), which it may change."""
    shutil.copytree(source.db, to.db)
    return store_from(to)


def lance_connect(db: str) -> DBConnection:
    """`lancedb.connect(db)` for a test that reads or changes a store's tables itself. LanceDB
    is imported as flowmem imports it (flowmem/storage/lance_import.py: without its REST
    client's modules) and when a test first asks, not by a test module's top: every pytest-xdist
    process imports every test module, and a whole `import lancedb` costs ~1.1 s of CPU more."""
    load_lancedb()
    import lancedb

    return lancedb.connect(db)


def make_workflow(
    wid: str = "forward_latest", version: int = 1, *, steps: int = 2, namespace: str = "default", **kw: object
) -> Workflow:
    """A small workflow whose steps vary with `steps` so versions differ."""
    base = [
        WorkflowStep(action="mail.search", args={"query": "{subject}"}),
        WorkflowStep(action="contacts.lookup", args={"name": "{recipient}"}),
        WorkflowStep(action="mail.forward", args={"email_id": "{email_id}", "to": "{recipient_email}"}),
        WorkflowStep(action="mail.read", args={"email_id": "{email_id}"}),
    ]
    return Workflow.model_validate(
        {
            "id": wid,
            "version": version,
            "parent_version": version - 1 if version > 1 else None,
            "name": wid,
            "description": "Forward the newest email on a subject to a colleague.",
            "steps": base[:steps],
            "parameters": {"subject": "the email's subject", "recipient": "who gets it"},
            "namespace": namespace,
            **kw,
        }
    )


# -- office runs: forwarding, cancelling, reminding (tests/test_induction.py and most others) ---


NAMES = ["olga", "kofi", "amir", "lena", "raj", "nadia", "sofia", "yuki", "carlos", "aisha"]
SUBJECTS = [
    "budget review",
    "launch plan",
    "hiring update",
    "offsite agenda",
    "Q3 numbers",
    "vendor contract",
]


def run(
    task: str, steps: list[tuple[str, dict[str, Any], str | None]], success: bool, **kw: Any
) -> Trajectory:
    seen = kw.pop("observations", {})
    return Trajectory.model_validate(
        {
            "id": kw.pop("id", f"{task}-{success}-{len(steps)}"),
            "task": task,
            "steps": [
                {"action": a, "args": args, "error": err, "observation": seen.get(a, "ok")}
                for a, args, err in steps
            ],
            "success": success,
            **kw,
        }
    )


def forward(i: int, *, skip_lookup: bool = False, success: bool = True) -> Trajectory:
    name, subject = NAMES[i % len(NAMES)], SUBJECTS[i % len(SUBJECTS)]
    steps: list[tuple[str, dict[str, Any], str | None]] = [
        ("mail.search", {"query": subject, "limit": 10}, None),
    ]
    if skip_lookup:
        steps.append(("mail.forward", {"email_id": f"e{i}", "to": name}, f"'{name}' is not an email address"))
    else:
        steps.append(("contacts.lookup", {"name": name}, None))
        steps.append(("mail.forward", {"email_id": f"e{i}", "to": f"{name}@corp.test"}, None))
    seen = {"contacts.lookup": f"{name}@corp.test", "mail.search": f"[e{i}]"}
    task = f"Forward the latest email about '{subject}' to {name}"
    return run(task, steps, success, id=f"fwd-{i}-{skip_lookup}", observations=seen)


def cancel(i: int) -> Trajectory:
    name = NAMES[i % len(NAMES)]
    steps: list[tuple[str, dict[str, Any], str | None]] = [
        ("calendar.find_events", {"query": name, "limit": 10}, None),
        ("calendar.cancel_event", {"event_id": f"ev{i}"}, None),
    ]
    return run(f"Cancel my next meeting with {name}", steps, True, id=f"cancel-{i}")


def remind(i: int) -> Trajectory:
    name, day = NAMES[(i + 3) % len(NAMES)], ["monday", "tuesday", "friday", "sunday"][i % 4]
    steps: list[tuple[str, dict[str, Any], str | None]] = [
        ("tasks.create", {"title": f"Call {name}", "due": day}, None),
        ("tasks.set_reminder", {"task_id": f"t{i}", "minutes_before": 30}, None),
    ]
    return run(f"Remind me to call {name} on {day}", steps, True, id=f"remind-{i}")


# -- a store induced from forwarding and cancelling runs ---------------------------------------


def induced(settings: Settings) -> Store:
    store = store_from(settings)
    store_trajectories(store, [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    return store


# -- interchange lines -------------------------------------------------------------------------


def revise(store: Any, workflow_id: str, version: int, pitfall: str) -> None:
    """Commit a revision of a workflow, keyed by its source tasks as an induction run keys it."""
    import numpy as np

    w = store.get_workflow(workflow_id)
    revised = w.model_copy(update={"version": version, "parent_version": w.version, "pitfalls": [pitfall]})
    served, vectors, owners, _ = store.workflow_index()
    keys = {w.id: vectors[np.asarray(owners) == [x.id for x in served].index(w.id)]}
    store.commit_run(InductionRun(id=f"revision-{version}"), [revised], keys=keys)


def until(done: Callable[[], bool]) -> None:
    """Wait until `done()` holds (a background reload landed, or failed), at most a minute."""
    deadline = time.monotonic() + 60
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done()


def good(i: int) -> str:
    return json.dumps(
        {
            "task": f"Send the weekly report to person {i}",
            "steps": [
                {"thought": None, "action": "contacts.lookup", "args": {"name": f"p{i}"}, "observation": "x"},
                {
                    "thought": "send",
                    "action": "mail.send",
                    "args": {"to": f"p{i}@x.test"},
                    "observation": "sent",
                },
            ],
            "success": i % 3 != 0,
            "custom_field": i,
        }
    )


# -- LLM induction: an email-forwarding cluster and what a model answers for it ----------------


LONG = "y" * 150 + " " + "x" * 600 + " TAIL-MARK"


def email_run(
    tid: str, topic: str, name: str, *, success: bool = True, skip_lookup: bool = False, obs: str = ""
) -> Trajectory:
    """A run of 'forward the latest email about <topic> to <name>'."""
    email = f"{name.lower()}@corp.com"
    steps: list[Step] = [
        Step(
            action="email.search_emails",
            args={"query": topic, "folder": "inbox"},
            observation=obs or f'[{{"id": "{tid}-1", "subject": "{topic}"}}]',
        )
    ]
    if not skip_lookup:
        steps.append(Step(action="contacts.find", args={"name": name}, observation=email))
    steps.append(
        Step(
            action="email.forward_email",
            args={"email_id": f"{tid}-1", "to": email},
            error=None if success else f"unknown recipient {email}",
        )
    )
    task = f"Forward the latest email about the {topic} to {name}"
    return Trajectory(id=tid, task=task, agent="emailer", steps=steps, success=success)


def make_cluster(
    successes: list[Trajectory] | None = None,
    failures: list[Trajectory] | None = None,
    *,
    scope: Literal["task", "subtask"] = "subtask",
) -> ClusterInput:
    """A cluster of forwarding runs; argument values used by one run only are example-specific."""
    if successes is None:
        successes = [
            email_run("s1", "budget", "Olga"),
            email_run("s2", "offsite", "Ravi"),
            email_run("s3", "invoice", "Mina"),
        ]
    if failures is None:
        failures = [email_run("f1", "roadmap", "Sam", success=False, skip_lookup=True, obs=LONG)]
    literals = LiteralIndex.build([*successes, *failures], max_share=0.5)
    return ClusterInput("default", "emailer", 7, scope, successes, failures, literals)


def induced_step(action: str, note: str = "", **args: Any) -> InducedStep:
    return InducedStep(action=action, args=[Arg(key=k, value=v) for k, v in args.items()], note=note)


def induced_workflow(
    *,
    name: str = "forward_latest_email",
    steps: list[InducedStep] | None = None,
    pitfalls: list[str] | None = None,
) -> InducedWorkflow:
    """A valid workflow for `make_cluster()`, unless told otherwise."""
    return InducedWorkflow(
        name=name,
        description="Forward the newest email on a topic to a colleague.",
        steps=steps
        or [
            induced_step("email.search_emails", query="{topic}", folder="inbox"),
            induced_step("contacts.find", "Look the address up; never guess it.", name="{recipient_name}"),
            induced_step("email.forward_email", email_id="{email_id}", to="{recipient_email}"),
        ],
        parameters=[
            Parameter(name="topic", description="the topic named in the task"),
            Parameter(name="recipient_name", description="who should get the email, from the task"),
            Parameter(name="email_id", description="id of the newest match, from email.search_emails"),
            Parameter(name="recipient_email", description="the address contacts.find returned"),
            Parameter(name="unused", description="declared but never used"),
        ],
        pitfalls=["Forwarding to a guessed address fails: look the recipient up first."]
        if pitfalls is None
        else pitfalls,
    )


# -- pitfalls: runs that take or skip the forwarding workflow's steps --------------------------


PITFALL_WORKFLOW = ["mail.search", "contacts.lookup", "mail.forward"]
PITFALL_NAMES = [
    "olga",
    "kofi",
    "amir",
    "lena",
    "raj",
    "nadia",
    "sofia",
    "yuki",
    "carlos",
    "aisha",
    "zed",
    "ines",
]


def pitfall_run(
    i: int,
    *actions: str,
    success: bool,
    errors: dict[str, str] | None = None,
    task: str | None = None,
) -> Trajectory:
    """Run `i` of a task "forward the email to <name>": the given actions, an error where given."""
    name = PITFALL_NAMES[i % len(PITFALL_NAMES)]
    errors = errors or {}
    steps = [
        {
            "action": a,
            "args": {"to": name},
            "observation": "ok",
            "error": errors.get(a, "").format(name=name) or None,
        }
        for a in actions
    ]
    return Trajectory.model_validate(
        {
            "id": f"run-{i}-{success}-{'-'.join(actions)}",
            "task": task or f"Forward the latest email to {name}",
            "steps": steps,
            "success": success,
        }
    )


def pitfall_ok(n: int, *actions: str, start: int = 0) -> list[Trajectory]:
    return [pitfall_run(start + i, *(actions or PITFALL_WORKFLOW), success=True) for i in range(n)]


def pitfall_failed(
    n: int, *actions: str, start: int = 100, errors: dict[str, str] | None = None, task: str | None = None
) -> list[Trajectory]:
    return [pitfall_run(start + i, *actions, success=False, errors=errors, task=task) for i in range(n)]


# -- the dashboard's store: a WorkBench slice induced twice, served runs with outcomes, learned ---


DASHBOARD_TOKEN = "dash-Token-9c1e"
SCRIPT_TASK = "Delete the latest email from <script>window.__xss = 1</script> please"
DASHBOARD_GROUPS = ("email/t00", "email/t01", "email/t02", "email/t03")
EXTRA = Step(action="notes.read_notes", args={"topic": "the request"})
"""The step the drifted runs take first: induction run 2 adds it to a workflow (version 2)."""


@dataclass
class Seeded:
    """A store seeded by the real induction pipeline, with outcomes."""

    settings: Settings
    store: Store
    revised: str
    """The workflow that has a version 2 (from induction run 2)."""
    served: str
    """The workflow served to the runs with outcomes."""
    script_run: str
    """The run whose task holds a `<script>` element."""
    runs: list[str]
    """The two induction runs, oldest first."""

    def copied(self, settings: Settings) -> Seeded:
        """The same seed in a copy of its store at `settings.db`, opened with `settings`."""
        return replace(self, settings=settings, store=copy_store(self.settings, settings))


def dashboard_slice(settings: Settings, per_group: int = 30) -> list[Trajectory]:
    """A WorkBench slice (four email templates), or simulated office runs without the data."""
    if not WORKBENCH.exists():
        from flowmem.demo import simulate

        return simulate(4 * per_group, seed=0)
    found: list[Trajectory] = []
    counts: dict[str, int] = {}
    with gzip.open(WORKBENCH, "rt", encoding="utf-8") as fh:
        for line in fh:
            group = json.loads(line)["group"]
            if group in DASHBOARD_GROUPS and counts.get(group, 0) < per_group:
                counts[group] = counts.get(group, 0) + 1
                found.append(parse_line(line.encode(), settings))
    return found


def seed_dashboard(settings: Settings) -> Seeded:
    """Induce a WorkBench slice, drift one cluster and induce again (a version 2 with an
    added step), then record served runs with outcomes (one task holding `<script>`) and learn."""
    store = store_from(settings)
    ns = settings.namespace
    store_trajectories(store, dashboard_slice(settings), settings.scrub)
    first = run_induction(store, settings, RuleInducer(), namespace=ns)
    top = max(store.list_workflows(namespace=ns), key=lambda w: len(w.source_trajectory_ids))
    sources = store.get_trajectories(top.source_trajectory_ids, namespace=ns)
    drift = [
        t.model_copy(update={"id": f"{t.id}/drift{i}", "steps": [EXTRA, *t.steps], "success": True})
        for i, t in enumerate(sources * 3)
    ]
    store_trajectories(store, drift, settings.scrub)
    second = run_induction(store, settings, RuleInducer(), namespace=ns)
    assert store.get_workflow(top.id, namespace=ns).version == 2, "run 2 should revise the workflow"
    other = next(w for w in store.list_workflows(namespace=ns) if w.id != top.id and w.pitfalls)
    examples = store.get_trajectories(other.source_trajectory_ids, namespace=ns)
    used = [WorkflowRef(id=other.id, version=other.version)]
    served = [
        t.model_copy(
            update={
                "id": f"{t.id}/served{i}",
                "workflows_used": used,
                "success": i % 3 != 0,
                "created_at": now(),
            }
        )
        for i, t in enumerate(examples * 2)
    ]
    script = examples[0].model_copy(
        update={
            "id": "script-run",
            "task": SCRIPT_TASK,
            "workflows_used": used,
            "success": False,
            "created_at": now(),
        }
    )
    store_trajectories(store, [*served, script], settings.scrub)
    learn(store, namespace=ns)
    return Seeded(settings, store, top.id, other.id, "script-run", [first.run.id, second.run.id])


# -- bench/docs_check.py ------------------------------------------------------------------------


def docs_check_module() -> Any:
    from bench import docs_check

    return docs_check


# -- tests/test_dashboard_charts.py, tests/test_dashboard_browser_charts.py ---------------------


CHARTS_NEW_TASK = "Archive every newsletter from the last quarter"
"""A task recorded after the induction run: in no cluster on the map."""


def seed_charts(settings: Settings) -> Store:
    """The demo office's runs of five agents, induced once (each agent's clusters numbered from
    0); then runs served one email workflow, with outcomes, and two failed runs of a new task."""
    from flowmem.demo import simulate

    store = store_from(settings)
    ns = settings.namespace
    store_trajectories(store, simulate(120, seed=0), settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=ns)
    chosen = max(
        (w for w in store.list_workflows(namespace=ns) if w.agent == "email_agent" and w.kind == "task"),
        key=lambda w: len(w.source_trajectory_ids),
    )
    used = [WorkflowRef(id=chosen.id, version=chosen.version)]
    sources = store.get_trajectories(chosen.source_trajectory_ids, namespace=ns)
    served = [
        t.model_copy(
            update={
                "id": f"{t.id}/served{i}",
                "workflows_used": used,
                "success": i % 3 != 0,
                "created_at": now(),
            }
        )
        for i, t in enumerate(sources)
    ]
    new = [
        Trajectory(
            id=f"new-{i}",
            task=CHARTS_NEW_TASK,
            agent="email_agent",
            steps=[Step(action="email.search_emails", args={"query": "newsletter"})],
            success=False,
        )
        for i in range(2)
    ]
    store_trajectories(store, [*served, *new], settings.scrub)
    learn(store, namespace=ns)
    return store


# -- the dashboard's trace pages: the demo's own store ----------------------------------------


@dataclass
class DemoTraces:
    """The store of the demo's learning loop: an orchestrator's runs with their subtask runs,
    runs served workflows, and induction runs (the second creates, changes and retires)."""

    settings: Settings
    store: Store
    orchestrator: str
    """An orchestrator's run with at least two subtask runs."""
    runs: list[str]
    """The induction runs, oldest first."""

    def copied(self, settings: Settings) -> DemoTraces:
        """The same store copied to `settings.db`, opened with `settings`."""
        return replace(self, settings=settings, store=copy_store(self.settings, settings))


def seed_demo_traces(settings: Settings, *, rounds: int = 3, tasks: int = 40) -> DemoTraces:
    """Run the demo's loop (seed 0, its in-process cycle between rounds) on the settings' store."""
    from flowmem.demo.loop import run_loop

    run_loop(settings, rounds=rounds, tasks=tasks, seed=0)
    store = store_from(settings)
    found = store.list_trajectories(namespace=settings.namespace, limit=None)
    parents = [t.parent_id for t in found if t.parent_id]
    orchestrator = max(sorted(set(parents)), key=parents.count)
    runs = [r.id for r in store.list_runs(namespace=settings.namespace) if r.kind == "induce"]
    last = store.list_runs(namespace=settings.namespace)[-1]
    made = store.run_versions(last.id, namespace=settings.namespace)
    assert any(w.version == 1 for w in made) and any(w.version > 1 for w in made) and last.state.retired, (
        "the demo's last induction run should create, change and retire workflows"
    )
    return DemoTraces(settings, store, orchestrator, runs)


# -- the dashboard's truth: workflows after promotions, demotions and rollbacks -----------------


TRUTH_NAME = "forward_email"
"""The name two workflows of `seed_truth` share (their steps differ)."""


def seed_truth(settings: Settings) -> Store:
    """Induce forwarding and cancelling runs, serve the forwarding workflow to 26 runs (24 ok)
    and learn (its v1 becomes active), then store two newer candidates of it that are never
    served: the home page once listed such a workflow as "candidate, v3, served 0". Beside it,
    workflows changed by hand and by runs: promoted twice, deprecated with stored stats,
    retired, rolled back, and two that share a name."""
    store = store_from(settings)
    ns = settings.namespace
    store_trajectories(store, [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=ns)
    fwd = next(w for w in store.list_workflows(namespace=ns) if "mail.forward" in w.actions)
    served = [
        forward(100 + i, success=i % 13 != 0).model_copy(
            update={"id": f"served-{i}", "workflows_used": [WorkflowRef(id=fwd.id, version=1)]}
        )
        for i in range(26)
    ]
    store_trajectories(store, served, settings.scrub)
    learn(store, namespace=ns)
    for v in (2, 3):
        store.put_workflow(
            fwd.model_copy(
                update={"version": v, "parent_version": v - 1, "status": "candidate", "stats": UsageStats()}
            )
        )

    def change(wid: str, verb: Verb) -> None:
        set_status(store, wid, verb, namespace=ns, why="tested", by="tests")

    store.put_workflow(make_workflow("promoted", 1))
    change("promoted", "promote")
    store.put_workflow(make_workflow("promoted", 2, steps=3))
    change("promoted", "promote")
    store.put_workflow(make_workflow("demoted", 1, stats=UsageStats(served=5, successes=1, failures=4)))
    change("demoted", "deprecate")
    store.put_workflow(make_workflow("retired", 1))
    change("retired", "retire")
    store.commit_run(InductionRun(id="truth-run-1"), [make_workflow("rolled", 1)])
    store.commit_run(InductionRun(id="truth-run-2"), [make_workflow("rolled", 2, steps=3)])
    store.rollback("truth-run-2")
    store.put_workflow(make_workflow("fw-short", 1, steps=2, name=TRUTH_NAME))
    store.put_workflow(make_workflow("fw-long", 1, steps=4, name=TRUTH_NAME))
    return store
