"""When the group committer compacts: every so many commits, and, when a compaction overran its
turn, at the first commit after it ends (so uncompacted fragments do not pile up to two rounds).

The grouping and error guarantees are in tests/test_maintain.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from flowmem.jobs.ingest import Stored
from flowmem.models import Trajectory
from flowmem.server.committer import GroupCommitter
from tests.processes import READY_LIMIT


def traj(i: int) -> Trajectory:
    return Trajectory(id=f"t{i}", task=f"task {i}")


def _until(condition: Callable[[], bool], timeout: float = READY_LIMIT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_a_compaction_that_overran_its_turn_is_followed_at_the_next_commit() -> None:
    release = threading.Event()
    started: list[int] = []

    def compact() -> None:
        started.append(committer.commits)
        if len(started) == 1:
            assert release.wait(READY_LIMIT)  # the first one is slow: its next turn comes while it runs

    committer = GroupCommitter(
        lambda batch: Stored(frozenset((t.namespace, t.id) for t in batch)), compact=compact
    )
    committer.compact_every = 2
    for i in range(2):
        committer.submit([traj(i)])
    assert _until(lambda: started == [2])
    for i in range(2, 4):  # commit 4 is its turn: the first compaction still runs
        committer.submit([traj(i)])
    time.sleep(0.1)
    assert started == [2]
    release.set()
    assert _until(lambda: committer.compactions == 1 and not committer._compacting.locked())

    committer.submit([traj(4)])  # the first commit after it ended: not commit 6
    assert _until(lambda: started == [2, 5])
    committer.submit([traj(5)])
    committer.submit([traj(6)])  # two commits after the second compaction began: the next turn
    assert _until(lambda: started == [2, 5, 7])
    assert _until(lambda: committer.compactions == 3)
