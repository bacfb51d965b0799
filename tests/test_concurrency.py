"""Concurrency and crash safety of the store, across real OS processes.

LanceDB must not be used in a forked child (see shared FACTS.md), so nothing here is forked
after lancedb was loaded: the writers are fresh interpreters (`subprocess` with
`sys.executable -c`), the induction processes are forked from multiprocessing's forkserver
(a fresh interpreter that imported clustering's libraries but not lancedb: tests/forked_inducers.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

import pytest

from flowmem.demo import simulate
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import RunReport, run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import lance_connect
from tests.forked_inducers import Inducer, forkserver
from tests.processes import READY_LIMIT

ROOT = Path(__file__).resolve().parents[1]

WRITERS = 4
PER_WRITER = 2_500

WRITER_SCRIPT = textwrap.dedent(
    """
    import sys
    import time

    from flowmem.agents import WorkflowMemory
    from flowmem.demo import simulate

    k, n = int(sys.argv[1]), int(sys.argv[2])
    pool = simulate(100, seed=100 + k)
    memory = WorkflowMemory.open()  # settings from the FLOWMEM_* variables
    print("ready", flush=True)
    sys.stdin.readline()  # every writer starts at once
    for i in range(n):
        if i == n // 2:  # half of them stored: the test runs an induction on them, then says go
            assert memory.flush()
            print("half", flush=True)
            sys.stdin.readline()
        if i % 10 == 0:
            time.sleep(0.01)  # an agent's pace: the writing overlaps the induction runs
        src = pool[i % len(pool)]
        with memory.record(src.task, agent=src.agent, id=f"p{k}-{i}") as run:
            steps = src.steps[: 1 + i % 2]
            if not steps:
                run.step("noop", {"i": i}, observation="nothing to do")
            for s in steps:
                run.step(s.action, s.args, observation=s.observation, error=s.error)
            run.finish(success=src.success, final_answer=src.final_answer)
    memory.close()
    print("recorded", n, flush=True)
    """
)


def _env(db: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWMEM_")}
    env.update(FLOWMEM_DB=db, LANCEDB_LOG="error", PYTHONPATH=str(ROOT), **extra)
    return env


def _spawn(script: str, *args: str, cwd: Path, env: dict[str, str], name: str) -> subprocess.Popen[str]:
    """A fresh interpreter running `script`; its stderr goes to `<cwd>/<name>.err`."""
    with (cwd / f"{name}.err").open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-c", script, *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )


def _expect(p: subprocess.Popen[str], word: str) -> list[str]:
    """Wait for a line of the child's that starts with `word`; returns the rest of it."""
    assert p.stdout is not None
    while line := p.stdout.readline():
        if line.split()[:1] == [word]:
            return line.split()[1:]
    raise AssertionError(f"the child exited (code {p.wait()}) before printing {word!r}")


def _go(p: subprocess.Popen[str]) -> None:
    assert p.stdin is not None
    p.stdin.write("go\n")
    p.stdin.flush()


def _versions(store: Store) -> dict[tuple[str, int], str | None]:
    """Every (id, version) in the workflows' histories, with the run that created it."""
    found: dict[tuple[str, int], str | None] = {}
    for latest in store.list_workflows():
        for w in store.history(latest.id):
            assert (w.id, w.version) not in found, f"{w.id} v{w.version} stored twice"
            found[(w.id, w.version)] = w.provenance.run_id
    return found


def _check_store(db: str, *, histories: bool = True) -> tuple[int, int, list[str]]:
    """What a fresh store holds: (committed runs, stored versions, torn runs).

    Asserted: no (id, version) is stored twice; every committed run has its tag and exactly
    its `versions_created` versions. A torn run is one whose versions or tag are stored but whose
    run record is not (a commit interrupted halfway); the caller asserts there is none.
    `histories=False` reads the versions in one query instead of one history per workflow
    (fast enough for after every kill)."""
    store = store_from(Settings(db=db))
    runs = store.list_runs()
    assert all(r.kind == "induce" and r.tag == r.id and r.table_version is not None for r in runs)
    if histories:
        stored = _versions(store)
    else:
        table = lance_connect(db).open_table("workflows__default")
        found = table.search().select(["id", "version", "run_id"]).limit(None).to_arrow().to_pylist()
        stored = {(r["id"], r["version"]): r["run_id"] for r in found}
        assert len(stored) == len(found), "a version is stored twice"
    created = {r.id: int(r.counts["versions_created"]) for r in runs}
    # Readers see the versions of recorded runs only: an interrupted commit's rows stay
    # invisible until the next commit drops them.
    visible = {key: rid for key, rid in stored.items() if rid is None or rid in created}
    latest = {w.id: w.version for w in store.list_workflows()}
    assert latest == {i: max(v for j, v in visible if j == i) for i, _ in visible}
    by_run = Counter(str(rid) for rid in stored.values())
    tags = {tag for v in store.table_versions() for tag in v.tags}
    for rid, n in created.items():
        assert by_run[rid] == n and rid in tags, f"run {rid} is not stored whole"
    torn = sorted((set(by_run) | tags) - set(created))
    return len(runs), len(visible), torn


def _assert_committed_state(db: str, *, histories: bool = True) -> tuple[int, int]:
    """The visible versions are exactly the union of the committed runs' versions, each run
    tagged, no tag without its run. Returns (committed runs, visible versions)."""
    runs, versions, torn = _check_store(db, histories=histories)
    assert not torn, f"versions or tags of runs that were never recorded: {torn}"
    return runs, versions


# -- 1. concurrent writers ----------------------------------------------------------------


def spawn_writers(cwd: Path) -> list[subprocess.Popen[str]]:
    """The writer processes of the first test, on the store `<cwd>/db`: each gets ready
    (imports, opens its memory) and waits for "go"."""
    # The writers wait for their store as long as it takes (this test is about what is stored,
    # not about the bound on close, tests/test_never_hangs.py): on a loaded machine the last
    # batch can take longer than the default bound, and close would spill a copy of it.
    env = _env(
        str(cwd / "db"),
        FLOWMEM_FLUSH_BATCH="100",
        FLOWMEM_FLUSH_INTERVAL="0.05",
        FLOWMEM_FLUSH_TIMEOUT=str(READY_LIMIT),
    )
    return [
        _spawn(WRITER_SCRIPT, str(k), str(PER_WRITER), cwd=cwd, env=env, name=f"writer{k}")
        for k in range(WRITERS)
    ]


def _spawned(
    factory: pytest.TempPathFactory, spawn: Callable[[Path], list[subprocess.Popen[str]]]
) -> Iterator[tuple[Path, list[subprocess.Popen[str]]]]:
    """`spawn`'s processes in a directory of their own, started now; reaped at the end."""
    cwd = factory.mktemp(spawn.__name__)
    processes = spawn(cwd)
    yield cwd, processes
    for p in processes:
        if p.poll() is None:
            p.kill()
        p.communicate()


@pytest.fixture(scope="module")
def concurrency_writers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, list[subprocess.Popen[str]]]]:
    """The writer processes of the first test, getting ready; their directory."""
    yield from _spawned(tmp_path_factory, spawn_writers)


@pytest.fixture(scope="module")
def concurrency_inducers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[Inducer]]]:
    """The induction processes of the second test, getting ready; their directory."""
    cwd = tmp_path_factory.mktemp("spawn_inducers")
    with forkserver() as context:
        inducers = spawn_inducers(context, cwd)
        try:
            yield cwd, inducers
        finally:
            for inducer in inducers:
                inducer.close()


@pytest.mark.slow
def test_four_writer_processes_and_concurrent_induction_lose_and_duplicate_nothing(
    concurrency_writers: tuple[Path, list[subprocess.Popen[str]]],
) -> None:
    tmp_path, writers = concurrency_writers  # spawn_writers(tmp_path)
    db = str(tmp_path / "db")
    settings = Settings(db=db)
    store = store_from(settings)
    reports: list[RunReport] = []
    try:
        store.prepare()  # loads the embedder while the writers get ready
        for p in writers:
            _expect(p, "ready")
        for p in writers:
            _go(p)
        for p in writers:
            _expect(p, "half")
        # A run on half of every writer's runs (whatever the machine's speed, one run sees part
        # of them), then runs commit on the same store while the writers write the rest.
        reports.append(run_induction(store, settings, RuleInducer(), namespace=settings.namespace))
        for p in writers:
            _go(p)
        while any(p.poll() is None for p in writers):
            reports.append(run_induction(store, settings, RuleInducer(), namespace=settings.namespace))
            if reports[-1].plan.skipped:
                time.sleep(0.05)
        outputs = [p.communicate(timeout=READY_LIMIT)[0] for p in writers]
    finally:
        for p in writers:
            if p.poll() is None:
                p.kill()
                p.wait()
    for k, (p, out) in enumerate(zip(writers, outputs, strict=True)):
        err = (tmp_path / f"writer{k}.err").read_text()
        assert p.returncode == 0, err
        assert out.strip() == f"recorded {PER_WRITER}"
        assert "flowmem: storing" not in err, err  # no batch needed the writer's own retries

    fresh = store_from(settings)
    assert fresh.count_trajectories() == WRITERS * PER_WRITER == 10_000
    stored = fresh.list_trajectories(limit=None)
    assert all(1 <= len(t.steps) <= 2 for t in stored)
    ids = [t.id for t in stored]
    assert len(ids) == len(set(ids)) == 10_000
    assert set(ids) == {f"p{k}-{i}" for k in range(WRITERS) for i in range(PER_WRITER)}
    assert not (tmp_path / "db.unsaved.jsonl").exists()  # nothing spilled
    assert not list(tmp_path.glob("*.unsaved.jsonl"))
    # Runs committed while the writers wrote (the first saw half of the trajectories), consistently.
    committed = [r for r in reports if not r.plan.skipped]
    assert not reports[0].plan.skipped and 0 < reports[0].plan.total < 10_000
    runs, versions = _assert_committed_state(db)
    assert runs == len(committed) and versions == sum(len(r.versions) for r in committed) > 0


# -- 2. crash safety ----------------------------------------------------------------------

KILL_FRACTIONS = (0.0, 0.4, 0.65, 0.8, 0.9, 1.0)
"""Six kill points during a commit, as fractions of a measured commit's duration; denser
towards the end, where `commit_run` writes (its first half only reads and embeds)."""


INDUCERS = 2 + len(KILL_FRACTIONS)
"""The induction processes of the second test: one killed before its commit, one after, and
one at each kill point during it."""


def spawn_inducers(context: ForkServerContext, cwd: Path) -> list[Inducer]:
    """The induction processes of the second test (tests/forked_inducers.py), on the store
    `<cwd>/db`: each is forked from the server, which imported clustering's libraries once,
    opens the store and waits for "go"."""
    return [Inducer(context, str(cwd / "db")) for _ in range(INDUCERS)]


class _Children:
    """The induction processes (`spawn_inducers`), waiting for "go"."""

    def __init__(self, processes: list[Inducer]) -> None:
        self.waiting = deque(processes)

    def go(self) -> Inducer:
        p = self.waiting.popleft()
        p.expect("ready")
        p.go()
        return p


@pytest.mark.slow
def test_a_run_killed_before_during_or_after_its_commit_leaves_no_half_run(
    concurrency_inducers: tuple[Path, list[Inducer]],
) -> None:
    tmp_path, inducers = concurrency_inducers  # spawn_inducers(tmp_path)
    db = str(tmp_path / "db")
    settings = Settings(db=db)
    store = store_from(settings)
    seeds = iter(range(1, 100))
    store_trajectories(store, simulate(40, seed=next(seeds)), settings.scrub)
    first = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    state = _check_store(db, histories=False)
    assert first.versions and state == (1, len(first.versions), [])
    store_trajectories(store, simulate(40, seed=next(seeds)), settings.scrub)  # work for the next run
    children = _Children(inducers)
    outcomes: list[str] = []
    in_window: list[bool] = []  # per kill: after "committing", before the commit was reported

    def killed_at(point: str, delay: float = 0.0) -> list[Any]:
        """Start a run, kill it `delay` s after it prints `point`, check what it left."""
        nonlocal state
        p = children.go()
        rest = p.expect(point)
        time.sleep(delay)
        unread = p.kill()  # asserted killed (SIGKILL), not ended on its own
        in_window.append(point == "committing" and "committed" not in unread)
        before, state = state, _check_store(db, histories=False)  # asserted after every kill
        if state == before:
            outcomes.append("none")
        elif state[2] == before[2]:  # the run is stored whole
            assert state[0] == before[0] + 1
            outcomes.append("whole")
        else:
            outcomes.append("TORN")
        if state != before:
            store_trajectories(store, simulate(40, seed=next(seeds)), settings.scrub)  # work for the next run
        return rest

    try:
        # (a) Before the commit, while inducing: nothing of the run is stored.
        killed_at("prepared")
        assert outcomes == ["none"]
        # (c) After the commit: the run is stored whole. It also times the store's commit.
        duration, created = map(float, killed_at("committed"))
        assert created > 0 and outcomes == ["none", "whole"]
        # (b) During the commit, at six points spread over its measured duration.
        delays = [round(f * duration, 4) for f in KILL_FRACTIONS]
        for delay in delays:
            killed_at("committing", delay)
    finally:
        for p in inducers:
            p.close()
    print(
        f"commit {duration:.4f} s; kills at {delays} s after it started: {outcomes}; in window: {in_window}"
    )
    # Some kill landed inside the commit window, or (b) would prove nothing.
    assert any(in_window[2:]), in_window

    # A run to completion afterwards works, drops what interrupted commits left (never seen
    # by readers), and stores no version twice; the next run stores nothing.
    runs, versions, _ = _check_store(db)
    report = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    after = _check_store(db)
    assert after == (runs + 1, versions + len(report.versions), [])
    again = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    assert again.plan.skipped and again.versions == []
    assert _check_store(db) == after
