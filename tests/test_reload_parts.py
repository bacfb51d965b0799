"""The parts of a reload after a change of status, each held to the way it was worked out
before it was made faster: the versions picked again for the workflows whose statuses moved
alone (`ServedRows.restatus`) against every candidate picked again; the rank factors and
trial partners (`ranking._factors`, `ranking._partners`) against a version at a time; the map
of a borrowed ANN's keys (`ann_reuse.borrow`) against a dict comprehension."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from flowmem.models import UsageStats
from flowmem.policy.lifecycle import DEFAULT_PARAMS, rank_factor
from flowmem.retrieval import ranking
from flowmem.retrieval.ann import AnnSlot, KeyBase
from flowmem.retrieval.ann_reuse import borrow, key_base
from flowmem.retrieval.cover import Evidence, task_template
from flowmem.storage import served_columns
from flowmem.storage.served import ServedRows
from flowmem.storage.served_pick import Candidates
from flowmem.storage.served_pick import order as _order
from flowmem.storage.served_pick import pick as _pick

STATUSES = ("candidate", "active", "deprecated", "retired")

Key = tuple[str, int]


def _candidates(draw: st.DrawFn) -> tuple[list[str], list[int], list[str]]:
    """Versions of a few workflows, in a shuffled table order, with stored statuses."""
    ids: list[str] = []
    versions: list[int] = []
    for w in range(draw(st.integers(1, 6))):
        for v in range(1, draw(st.integers(1, 4)) + 1):
            ids.append(f"w{w}")
            versions.append(v)
    order = draw(st.permutations(range(len(ids))))
    ids, versions = [ids[i] for i in order], [versions[i] for i in order]
    stored = [draw(st.sampled_from(STATUSES)) for _ in ids]
    return ids, versions, stored


def _log(draw: st.DrawFn, keys: list[Key]) -> dict[Key, str]:
    """A lifecycle log's statuses of some of these versions."""
    chosen = draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []
    return {key: draw(st.sampled_from(STATUSES)) for key in chosen}


def _whole(ids: list[str], versions: list[int], stored: list[str], live: dict[Key, str]) -> ServedRows:
    """What `served_rows` makes of these candidates with this log: the picked versions, each
    keyed by one row of a matrix whose first column is its candidate position."""
    statuses = [live.get(key, s) for key, s in zip(zip(ids, versions, strict=True), stored, strict=True)]
    order = _order(ids, versions)
    chosen = _pick(ids, statuses, order)
    found = Candidates(ids, np.array(versions, dtype=np.int64), stored, order, torn=False)
    keys = np.zeros((len(chosen), 3), dtype=np.float32)
    keys[:, 0] = chosen
    n = len(chosen)
    return ServedRows(
        ids=[ids[i] for i in chosen],
        versions=np.array([versions[i] for i in chosen], dtype=np.int64),
        statuses=[statuses[i] for i in chosen],
        stats=[UsageStats()] * n,
        agents=np.zeros(n, dtype=np.int32),
        agent_names=["agent"],
        scopes=np.zeros(n, dtype=np.int32),
        scope_names=["task"],
        keys=keys,
        owners=np.arange(n, dtype=np.int64),
        shares=np.ones(n),
        subroutine=np.zeros(n, dtype=bool),
        by_example=np.ones(n, dtype=bool),
        table=pa.table({"at": pa.array(chosen, pa.int64())}),
        candidates=found,
        picked=np.array(chosen, dtype=np.int64),
        lifecycle=live,
    )


def _every_candidate(rows: ServedRows, live: dict[Key, str]) -> tuple[list[int], list[str]] | None:
    """`restatus` as it was: every candidate's status with `live` applied, every workflow
    picked again; the candidate positions and statuses served, or None when one picked is
    not served here."""
    found = rows.candidates
    assert found is not None and rows.picked is not None
    keys = zip(found.ids, found.versions.tolist(), strict=True)
    statuses = [live.get(key, s) for key, s in zip(keys, found.statuses, strict=True)]
    chosen = _pick(found.ids, statuses, found.order)
    if not set(chosen) <= set(rows.picked.tolist()):
        return None
    return chosen, [statuses[i] for i in chosen]


def _served(rows: ServedRows) -> tuple[list[int], list[str]]:
    """The candidate positions these rows serve (from their table, their keys and `picked`,
    which must agree) and their statuses."""
    assert rows.picked is not None
    at = rows.table.column("at").to_pylist()
    assert at == rows.keys[:, 0].astype(int).tolist() == rows.picked.tolist()
    assert len(rows.ids) == len(rows.versions) == len(rows.stats) == len(at)
    return at, list(rows.statuses)


@st.composite
def _changes(draw: st.DrawFn) -> tuple[ServedRows, list[dict[Key, str]]]:
    ids, versions, stored = _candidates(draw)
    keys = list(zip(ids, versions, strict=True))
    first = _log(draw, keys)
    later = [_log(draw, keys) | draw(st.sampled_from([{}, first])) for _ in range(draw(st.integers(1, 3)))]
    return _whole(ids, versions, stored, first), later


@given(_changes())
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
def test_restatus_picks_again_what_every_candidate_picked_again_picks(
    change: tuple[ServedRows, list[dict[Key, str]]],
) -> None:
    """A chain of changes of status, each applied to the rows the one before made: served as
    picking every candidate again serves, or a whole read asked for where it was."""
    rows, logs = change
    for live in logs:
        want = _every_candidate(rows, live)
        got = rows.restatus(live)
        if want is None:
            assert got is None
            return
        assert got is not None
        assert _served(got) == want
        assert got.lifecycle == live
        rows = got


def test_restatus_reads_again_when_a_version_not_served_would_be() -> None:
    """Retiring the active version of a workflow whose older active version is not served:
    that one would be, so a whole read is asked for; retiring a lone version drops it alone."""
    ids, versions = ["a", "a", "b"], [1, 2, 1]
    rows = _whole(ids, versions, ["active", "active", "active"], {})
    assert rows.ids == ["a", "b"]
    assert rows.restatus({("a", 2): "retired"}) is None
    after = rows.restatus({("b", 1): "retired"})
    assert after is not None and after.ids == ["a"] and after.lifecycle == {("b", 1): "retired"}
    # A log entry gone again (its version's stored status back): served again where it was.
    assert after.restatus({}) is None
    same = rows.restatus({("a", 1): "retired"})  # a version not served: nothing moves
    assert same is not None and same.ids == ["a", "b"] and same.keys is rows.keys


@settings(deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=40))
def test_factors_are_a_version_at_a_time(counts: list[tuple[int, int]]) -> None:
    stats = [UsageStats(served=s + f, successes=s, failures=f) for s, f in counts]
    want = np.array([rank_factor(s, DEFAULT_PARAMS) for s in stats], dtype=np.float64)
    got = ranking._factors(stats, DEFAULT_PARAMS)
    assert got.dtype == np.float64 and got.tolist() == want.tolist()


@settings(deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from(STATUSES)), max_size=30))
def test_partners_are_a_dict_of_every_active_version(versions: list[tuple[str, str]]) -> None:
    ids, statuses = [w for w, _ in versions], [s for _, s in versions]
    want = np.full(len(ids), -1, dtype=np.int64)
    active = {w: i for i, (w, s) in enumerate(versions) if s == "active"}
    for i, (w, s) in enumerate(versions):
        if s != "active" and w in active:
            want[i], want[active[w]] = active[w], i

    class Rows:
        def __init__(self) -> None:
            self.ids, self.statuses = ids, statuses

        def __len__(self) -> int:
            return len(ids)

    assert ranking._partners(Rows()).tolist() == want.tolist()  # type: ignore[arg-type]


@settings(deadline=None, derandomize=True, database=None)
@given(
    st.lists(st.tuples(st.sampled_from("abcde"), st.integers(1, 3), st.integers(0, 2)), max_size=12),
    st.lists(st.tuples(st.sampled_from("abcde"), st.integers(1, 3), st.integers(0, 2)), max_size=12),
)
def test_borrowed_keys_map_as_a_dict_comprehension_maps_them(
    before: list[tuple[str, int, int]], now: list[tuple[str, int, int]]
) -> None:
    """Versions (id, version, how many keys) before and now, duplicates included."""

    def base(versions: list[tuple[str, int, int]]) -> KeyBase:
        owners = np.repeat(np.arange(len(versions), dtype=np.int64), [k for _, _, k in versions])
        return key_base(
            [w for w, _, _ in versions], np.array([v for _, v, _ in versions], dtype=np.int64), owners
        )

    old, new = base(before), base(now)
    got = borrow(AnnSlot(), old, new)
    position = {key: q for q, key in enumerate((w, v) for w, v, _ in now)}
    target = [position.get((w, v), -1) for w, v, _ in before]
    # The keys of a version found now with as many keys map to its keys now, in order.
    want: list[int] = []
    lo_now = np.concatenate([[0], np.cumsum([k for _, _, k in now])]).astype(int)
    for (_, _, k), q in zip(before, target, strict=True):
        same = q >= 0 and now[q][2] == k
        want += [int(lo_now[q]) + j if same else -1 for j in range(k)]
    assert got.remap.tolist() == want


@settings(deadline=None, derandomize=True, database=None)
@given(st.data())
def test_borrowed_keys_map_by_their_tags_as_by_their_ids(data: st.DataObject) -> None:
    """Two bases of versions picked among one origin's (unique ids and versions, each its
    position there as its tag): mapped by the tags as by ids and versions; of two origins, by
    ids and versions."""
    versions = sorted(
        {(w, v) for w, v in data.draw(st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(1, 3))))}
    )
    origin = object()

    def base(tagged: object | None) -> tuple[KeyBase, KeyBase]:
        chosen = sorted(
            data.draw(st.lists(st.sampled_from(range(len(versions))), unique=True)) if versions else []
        )
        counts = [data.draw(st.integers(0, 2)) for _ in chosen]
        owners = np.repeat(np.arange(len(chosen), dtype=np.int64), counts)
        ids, numbers = (
            [versions[i][0] for i in chosen],
            np.array([versions[i][1] for i in chosen], dtype=np.int64),
        )
        tags = np.array(chosen, dtype=np.int64)
        return key_base(ids, numbers, owners, origin=tagged, tags=tags), key_base(ids, numbers, owners)

    (old_tagged, old), (new_tagged, new) = base(origin), base(origin)
    by_ids = borrow(AnnSlot(), old, new)
    by_tags = borrow(AnnSlot(), old_tagged, new_tagged)
    assert by_tags.remap.tolist() == by_ids.remap.tolist()
    assert by_tags.extra.tolist() == by_ids.extra.tolist() and by_tags.gone == by_ids.gone
    other, _ = base(object())  # another origin: its tags are not these numbers
    assert borrow(AnnSlot(), other, new_tagged).remap.tolist() == borrow(AnnSlot(), other, new).remap.tolist()


# A whole read's parts (`served_rows`), each against the loop it replaced.


@settings(deadline=None, derandomize=True, database=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "ab", "B", "a.b", "a-1", "a_1", "é", "aé", "a\u0100"]),
            st.integers(1, 4),
        )
    )
)
def test_order_is_sorting_by_id_then_newest(versions: list[tuple[str, int]]) -> None:
    ids, numbers = [w for w, _ in versions], [v for _, v in versions]
    want = sorted(range(len(ids)), key=lambda i: (ids[i], -numbers[i]))
    got = _order(ids, numbers)
    assert got.dtype == np.int64 and got.tolist() == want


@settings(deadline=None, derandomize=True, database=None)
@given(
    st.lists(st.tuples(st.sampled_from("abcd"), st.integers(1, 4), st.sampled_from(STATUSES)), max_size=40)
)
def test_picking_every_candidate_by_arrays_is_the_loop(versions: list[tuple[str, int, str]]) -> None:
    """`_pick` over a sequence of statuses (by arrays) against the same over a mapping of
    them (the loop), duplicates of a version included."""
    ids, numbers, statuses = (
        [w for w, _, _ in versions],
        [v for _, v, _ in versions],
        [s for *_, s in versions],
    )
    order = _order(ids, numbers)
    assert _pick(ids, statuses, order) == _pick(ids, dict(enumerate(statuses)), order)


@settings(deadline=None, derandomize=True, database=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),
            st.one_of(st.none(), st.lists(st.floats(0.0625, 1.0, width=32), max_size=3)),
        ),
        max_size=20,
    )
)
def test_shares_by_arrays_are_the_loop(rows: list[tuple[int, list[float] | None]]) -> None:
    counts = np.array([n for n, _ in rows], dtype=np.int64)
    recorded = [r for _, r in rows]
    table = pa.table({"key_shares": pa.array(recorded, pa.list_(pa.float32()))})
    want: list[float] = []
    for shares, n in zip(table.column("key_shares").to_pylist(), counts.tolist(), strict=True):
        want += shares if shares and len(shares) == n else [1.0] * n
    got = served_columns.shares(table, counts)
    assert got.dtype == np.float64 and got.tolist() == want
    assert served_columns.shares(pa.table({"other": [1] * len(rows)}), counts).tolist() == [1.0] * int(
        counts.sum()
    )


@settings(deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 2), st.booleans()), max_size=20))
def test_live_stats_by_arrays_are_the_loop(rows: list[tuple[str, int, bool]]) -> None:
    """Each version's usage figures where the usage table has them, else its stored stats,
    one object per distinct stored text."""
    texts = [UsageStats(served=n, successes=n).model_dump_json() for _, n, _ in rows]
    keys = [(w, i) for i, (w, _, _) in enumerate(rows)]
    usage = {
        key: UsageStats(served=9, failures=9) for key, (_, _, live) in zip(keys, rows, strict=True) if live
    }
    got = served_columns.live_stats(usage, iter(keys), pa.chunked_array([pa.array(texts, pa.string())]))
    want = [usage.get(key) or UsageStats.model_validate_json(t) for key, t in zip(keys, texts, strict=True)]
    assert got == want
    stored = {
        t: s for (key, t), s in zip(zip(keys, texts, strict=True), got, strict=True) if key not in usage
    }
    for (key, t), s in zip(zip(keys, texts, strict=True), got, strict=True):
        if key not in usage:
            assert s is stored[t]  # one object per distinct text


@settings(deadline=None, derandomize=True, database=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from(STATUSES))))
def test_interned_statuses_are_the_column_as_a_list(values: list[str | None]) -> None:
    column = pa.chunked_array([pa.array(values[:3], pa.string()), pa.array(values[3:], pa.string())])
    got = served_columns.interned(column)
    assert got == values
    assert len({id(s) for s in got}) <= len(set(values))


@settings(deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=5), st.data())
def test_keys_gathered_from_the_parts_are_the_parts_stacked_then_taken(
    sizes: list[int], data: st.DataObject
) -> None:
    """A key matrix's rows taken straight from the Arrow chunks' parts, empty parts and every
    row in order included, as from their concatenation; an array of its own either way."""
    parts = [np.arange(n * 2, dtype=np.float32).reshape(n, 2) + 100 * j for j, n in enumerate(sizes)]
    total = sum(sizes)
    every = st.just(list(range(total)))
    where = np.array(
        data.draw(
            st.one_of(every, st.lists(st.integers(0, max(total - 1, 0)), max_size=12))
            if total
            else st.just([])
        ),
        dtype=np.int64,
    )
    got = served_columns.gathered(parts, where, 2)
    assert got.dtype == np.float32 and got.shape == (len(where), 2)
    assert got.tolist() == np.concatenate(parts)[where].tolist()
    assert all(not np.shares_memory(got, p) for p in parts)


@settings(deadline=None, derandomize=True, database=None)
@given(
    st.lists(
        st.sampled_from(["Call Olga", "call  kofi", "EMAIL amir!", "Straße 5", "call olga", "x_y 7", ""]),
        max_size=25,
    ),
    st.sampled_from([0.1, 0.3, 0.5, 1.0]),
)
def test_evidence_words_and_templates_are_a_word_at_a_time(tasks: list[str], share: float) -> None:
    """The words at least `share` of the distinct task texts hold and each run's template,
    against their working out a word at a time (`task_template`)."""
    texts = list(dict.fromkeys(tasks))
    said = [re.findall(r"\w+", t.casefold()) for t in texts]
    distinct = {" ".join(w): w for w in said}
    counts = Counter(w for found in distinct.values() for w in set(found))
    words = frozenset(w for w, n in counts.items() if n >= share * len(distinct))
    evidence = Evidence(
        tasks, [["a"]] * len(tasks), np.eye(max(len(tasks), 1), dtype=np.float32)[: len(tasks)], share
    )
    assert evidence.words == words
    assert evidence.templates == tuple(task_template(t, words) for t in tasks)
