"""Costs that must follow a cluster's size, not its namespace's: a cluster's runs read through
the id index (`storage.scans.index_ids`), and its example literals made over the namespace's
rare values without copying them (`induction.literals.LiteralSet` with a base)."""

from __future__ import annotations

from datetime import timedelta

from flowmem.induction.literals import LiteralIndex, LiteralSet, find_literals, mask
from flowmem.jobs.factories import store_from
from flowmem.models import Trajectory
from flowmem.settings import Settings
from flowmem.storage import Store, scans
from flowmem.storage.base import TRAJECTORIES
from tests import s3_server
from tests.s3_server import S3Server

s3, prefix = s3_server.s3, s3_server.prefix
"""The session's S3 server and a fresh key prefix per test (tests/s3_server.py)."""


def _run(i: int, name: str, *, namespace: str = "default") -> Trajectory:
    return Trajectory.model_validate(
        {
            "namespace": namespace,
            "id": f"t{i}",
            "task": f"email {name} about order {i}",
            "steps": [{"action": "mail.send", "args": {"to": name, "order": f"W{i:04d}"}}],
        }
    )


def _ids_index(store: Store) -> object:
    return store._trajectories().index_stats(scans.ID_INDEX)


def test_reads_by_id_go_through_an_index_that_still_finds_later_appends(store: Store) -> None:
    store.insert_trajectories([_run(i, "olga") for i in range(30)])
    store.insert_trajectories([_run(i, "bo", namespace="other") for i in range(5)])
    assert _ids_index(store) is None
    got = scans.trajectories_by_id(store, ["t1", "t7", "missing", "t29"], namespace="default", chunk=2)
    assert sorted(got) == ["t1", "t29", "t7"] and got["t7"].steps[0].args["order"] == "W0007"
    stats = store._trajectories().index_stats(scans.ID_INDEX)
    assert stats is not None and stats.num_unindexed_rows == 0  # built by the first read

    store.insert_trajectories([_run(i, "dana") for i in range(30, 40)])  # after the index
    assert store._trajectories().index_stats(scans.ID_INDEX).num_unindexed_rows == 10
    got = scans.trajectories_by_id(store, ["t35", "t2", "t39"], namespace="default")
    assert sorted(got) == ["t2", "t35", "t39"] and got["t35"].task == "email dana about order 35"
    assert store._trajectories().index_stats(scans.ID_INDEX).num_unindexed_rows == 10  # within the slack
    # The other namespace's t1 is its own; the default's is not read for it.
    assert scans.trajectories_by_id(store, ["t1"], namespace="other")["t1"].task == "email bo about order 1"


def test_maintain_compacts_the_runs_appended_after_the_id_index(store: Store) -> None:
    store.insert_trajectories([_run(i, "olga") for i in range(20)])
    assert scans.index_ids(store)
    for i in range(20, 23):
        store.insert_trajectories([_run(i, "dana")])  # one fragment each, none indexed
    done = store.maintain_table(TRAJECTORIES, keep=timedelta(0))
    assert done.before.fragments == 4 and done.after.fragments == 1  # 2 with one optimize
    got = scans.trajectories_by_id(store, ["t3", "t21"], namespace="default")
    assert sorted(got) == ["t21", "t3"] and store.count_trajectories() == 23


def test_the_index_is_rebuilt_past_its_slack(store: Store) -> None:
    store.insert_trajectories([_run(i, "olga") for i in range(10)])
    assert scans.index_ids(store, slack=4) is True
    assert scans.index_ids(store, slack=4) is False
    store.insert_trajectories([_run(i, "bo") for i in range(10, 14)])
    assert scans.index_ids(store, slack=4) is False  # 4 uncovered rows: scanned, not rebuilt
    store.insert_trajectories([_run(14, "cyrus")])
    assert scans.index_ids(store, slack=4) is True
    assert store._trajectories().index_stats(scans.ID_INDEX).num_unindexed_rows == 0
    assert sorted(scans.trajectories_by_id(store, ["t0", "t14"], namespace="default")) == ["t0", "t14"]


def test_no_ids_no_index(settings: Settings, store: Store) -> None:
    assert scans.trajectories_by_id(store, [], namespace=settings.namespace) == {}
    assert _ids_index(store) is None


RUNS = [_run(i, name) for i, name in enumerate(["olga", "boris", "cyrus", "dana", "erik", "fay"] * 4)]
"""24 runs: each name used by 4 (not rare at 10%), each order by one (rare); six names are
more than a closed set of choices."""


def test_a_clusters_literals_hold_its_own_values_over_the_shared_rare_ones() -> None:
    index = LiteralIndex.build(RUNS, max_share=0.1)
    rare = index.rare_values()
    assert {"w0003", "w0011"} <= rare and "olga" not in rare and not index.categorical
    one = index.example_literals(RUNS[:2])
    # What it was: every rare value, and the runs' values found in their own task text.
    expected = rare | {"olga", "boris", "w0000", "w0001"}
    assert set(one) == expected and len(one) == len(expected) and one <= expected <= one
    assert all(v in one for v in expected) and "cyrus" not in one
    # Held apart: only the two runs' values of their own; the rare ones stay the base's.
    assert one._own == {"olga", "boris"} and one._base is index.example_literals(RUNS[2:3])._base
    assert sorted({"olga", "w0019", "nobody"} & one) == ["olga", "w0019"]
    for text in ("Write to Olga about W0019", "mail boris, then cyrus", "order w0001."):
        assert find_literals(text, one) == find_literals(text, set(expected))
        assert mask(text, one) == mask(text, set(expected))


def test_a_set_over_a_base_is_the_union_whatever_they_share() -> None:
    base = LiteralSet({"olga", "W1000", "a.b"})
    both = LiteralSet({"olga", "bo", "..."}, base=base)
    assert both >= {"olga", "W1000", "a.b", "bo", "..."} >= both and len(both) == 5
    assert sorted(both) == sorted({"olga", "W1000", "a.b", "bo", "..."})
    assert find_literals("olga and bo saw W1000 ... a.b", both) == ["W1000", "olga", "...", "a.b", "bo"]
    assert not LiteralSet() and LiteralSet(base=base)


def _by_pass_and_by_id(store: Store, groups: list[list[str]], namespace: str = "default") -> None:
    with scans.spill_groups(store, groups, namespace=namespace, batch_size=7) as spill:
        for g, ids in enumerate(groups):
            assert scans.spilled(spill, g) == scans.trajectories_by_id(store, ids, namespace=namespace)
        path = spill.path
    assert not path.exists()  # the local file goes with the pass


def test_one_pass_reads_each_group_as_reads_by_id_do(store: Store) -> None:
    store.insert_trajectories([_run(i, "olga") for i in range(30)])
    store.insert_trajectories([_run(i, "bo", namespace="other") for i in range(5)])
    store.insert_trajectories([_run(i, "dana") for i in range(30, 40)])  # a fragment of its own
    store.set_outcome("t4", success=False)  # moved by the update
    # Groups that share runs (a cluster's contrast), ids not stored, one group of none found.
    groups = [["t1", "t7", "missing", "t29", "t35"], ["t4", "t7", "t38"], ["nope"], [], ["t7", "t0", "t1"]]
    _by_pass_and_by_id(store, groups)
    _by_pass_and_by_id(store, [["t1", "t3"], ["t2"]], namespace="other")  # its own t1, not the default's
    with scans.spill_groups(store, groups, namespace="default") as spill:
        assert scans.spilled(spill, 1)["t4"].success is False and scans.spilled(spill, 2) == {}


def test_one_pass_when_the_groups_read_most_of_the_namespace(store: Store) -> None:
    store.insert_trajectories([_run(i, "olga") for i in range(10)])
    half = [[f"t{i}" for i in range(3)], [f"t{i}" for i in range(3, 5)]]
    assert scans.one_pass(store, half, namespace="default")  # 5 of 10 rows, in two groups
    assert not scans.one_pass(store, [half[0], ["t3"]], namespace="default")  # 4 of 10: by id
    assert not scans.one_pass(store, [[f"t{i}" for i in range(10)]], namespace="default")  # one query
    assert not scans.one_pass(store, [], namespace="default")


def test_one_pass_over_a_store_on_s3(s3: S3Server, prefix: str) -> None:
    store = store_from(s3.settings(prefix))
    store.insert_trajectories([_run(i, "olga") for i in range(12)])
    store.insert_trajectories([_run(i, "bo") for i in range(12, 20)])
    _by_pass_and_by_id(store, [["t1", "t13"], ["t2", "t19", "t1"], ["t5"]])
