"""The induction processes of tests/test_concurrency.py's crash test, each forked from one
server process (multiprocessing's forkserver: a fresh interpreter) that imported clustering's
libraries and flowmem's induction once, instead of eight fresh interpreters each importing
them (~4 s of CPU each). Nothing imports LanceDB before the fork: each process opens the store,
and so loads LanceDB, itself. A process says where it is (`ready`, `prepared`, `committing`,
`committed`) on a pipe, and waits for "go" on another."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Iterator
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from typing import Any

PRELOAD = [
    # What clustering imports on first use (~2/3 of a run's time otherwise).
    "hdbscan",
    "sklearn.decomposition",
    "sklearn.feature_extraction.text",
    "flowmem.induction.inducers.rule",
    "flowmem.jobs.induce",
    "flowmem.jobs.factories",
    "flowmem.settings",
]
"""What the server imports once, for every process it forks (no LanceDB among them)."""


def induce_until_killed(db: str, say: Connection, hear: Connection) -> None:
    """An induction run on the store `db` that waits for "go" once ready and sleeps after its
    commit (where it is killed): `say` gets [word, *figures] at each point of the run, and
    ["failed", traceback] if it fails."""
    try:
        _induce(db, say, hear)
    except BaseException:
        say.send(["failed", traceback.format_exc()])
        raise


def _induce(db: str, say: Connection, hear: Connection) -> None:
    for name in [k for k in os.environ if k.startswith("FLOWMEM_")]:
        del os.environ[name]  # the defaults but the store, as a fresh process with FLOWMEM_DB only
    os.environ["LANCEDB_LOG"] = "error"
    from flowmem.induction.inducers.rule import RuleInducer
    from flowmem.jobs.factories import store_from
    from flowmem.jobs.induce import commit_outcomes, induce_all, prepare_run
    from flowmem.settings import Settings

    settings = Settings(db=db)
    store = store_from(settings)
    store.prepare()
    say.send(["ready"])
    hear.recv()
    plan = prepare_run(store, settings, namespace=settings.namespace)
    say.send(["prepared", len(plan.changed)])
    outcomes = induce_all(store, plan.changed, RuleInducer())
    commit_run = store.commit_run

    def signalled_commit_run(*args: Any, **kwargs: Any) -> Any:
        # Only says when the store's commit starts and how long it took; changes nothing.
        say.send(["committing"])
        started = time.perf_counter()
        committed = commit_run(*args, **kwargs)
        say.send(["committed", time.perf_counter() - started, committed.counts["versions_created"]])
        return committed

    store.commit_run = signalled_commit_run  # type: ignore[method-assign]
    commit_outcomes(store, plan, outcomes)
    time.sleep(120)  # killed here: "after commit"


class Inducer:
    """One `induce_until_killed` process, started now; the test's ends of its pipes."""

    def __init__(self, context: ForkServerContext, db: str) -> None:
        self.said, say = context.Pipe(duplex=False)
        hear, self.tell = context.Pipe(duplex=False)
        self.process: BaseProcess = context.Process(target=induce_until_killed, args=(db, say, hear))
        self.process.start()
        say.close()  # the process's ends are its own now: the test sees EOF once it ended
        hear.close()

    def expect(self, word: str) -> list[Any]:
        """Wait for the process to say `word`; the figures said with it."""
        try:
            while True:
                said = self.said.recv()
                assert said[0] != "failed", said[1]
                if said[0] == word:
                    return list(said[1:])
        except EOFError:
            self.process.join()
            raise AssertionError(
                f"the child exited (code {self.process.exitcode}) before saying {word!r}"
            ) from None

    def go(self) -> None:
        self.tell.send("go")

    def kill(self) -> list[str]:
        """Kill it (asserted killed, not ended on its own); the words it said that were not read."""
        self.process.kill()
        self.process.join()
        assert self.process.exitcode == -signal.SIGKILL
        unread = []
        try:
            while self.said.poll():
                unread.append(str(self.said.recv()[0]))
        except EOFError:
            pass
        return unread

    def close(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.said.close()
        self.tell.close()


@contextlib.contextmanager
def forkserver() -> Iterator[ForkServerContext]:
    """multiprocessing's forkserver, with `PRELOAD` imported in it when this process starts it
    (at the first process forked), stopped on exit (with whatever it still runs)."""
    from multiprocessing import forkserver as server

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    try:
        yield context
    finally:
        server._forkserver._stop()  # type: ignore[attr-defined]  # not in the stubs
