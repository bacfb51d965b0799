"""When the session fixtures that start servers and processes start and stop, within one pytest
process (tests/conftest.py's `AHEAD`, `STOP_AFTER_LAST_USE`, `GROUPS` and `LAST` say which): a
fixture is set up some tests before its first user, a server stopped right after its last, and
the tests of one server, browser or set of processes go to one pytest-xdist worker."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import pytest

_AHEAD = pytest.StashKey[dict[str, set[str]]]()
"""For each fixture of AHEAD, the tests at which it is set up (if not already)."""

_LAST_USE = pytest.StashKey[dict[str, str]]()
"""For each fixture of STOP_AFTER_LAST_USE, the last test that uses it."""

_STOPS = pytest.StashKey[dict[str, Callable[[], None]]]()
"""The stops that `stop_after_last_use` registered, by fixture name."""

_ORDER = pytest.StashKey[dict[str, int]]()
"""Each selected test's place in the session's order."""


def order_and_group(items: list[pytest.Item], last: tuple[str, ...], groups: Mapping[str, str]) -> None:
    """Put the tests of the modules `last` at the end (the order is kept otherwise), and mark each
    test that uses a fixture of `groups` with that fixture's `xdist_group`."""
    items.sort(key=lambda item: item.nodeid.startswith(last))
    for item in items:
        found = {groups[name] for name in getattr(item, "fixturenames", ()) if name in groups}
        if len(found) > 1:
            raise pytest.UsageError(f"{item.nodeid} uses the fixtures of two GROUPS: {sorted(found)}")
        if found:
            item.add_marker(pytest.mark.xdist_group(found.pop()))


def _group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return str(mark.args[0]) if mark is not None else None


def _sequence(config: pytest.Config, items: list[pytest.Item], first: pytest.Item) -> list[pytest.Item]:
    """The tests that run one after another with `first` in this process: every test; on a
    pytest-xdist worker, those of `first`'s group, or none when it has none (which of them this
    worker runs, and when, is not known ahead)."""
    if not hasattr(config, "workerinput"):
        return items
    group = _group(first)
    return [item for item in items if _group(item) == group] if group is not None else []


def _plan(
    config: pytest.Config, items: list[pytest.Item], ahead: Mapping[str, int], stop_after: Sequence[str]
) -> tuple[dict[str, set[str]], dict[str, str]]:
    """For each fixture of `ahead`, the tests at which it is set up (if not already); for each of
    `stop_after`, its last user: among the tests that run one after another with its first user
    (`_sequence`)."""
    ahead_at: dict[str, set[str]] = {}
    last_use: dict[str, str] = {}
    for name in [*ahead, *stop_after]:
        users = [item for item in items if name in getattr(item, "fixturenames", ())]
        sequence = _sequence(config, items, users[0]) if users else []
        if sequence and name in ahead:
            first = sequence.index(users[0])
            ahead_at[name] = {item.nodeid for item in sequence[max(0, first - ahead[name]) :]}
        if sequence and name in stop_after:
            last_use[name] = users[-1].nodeid
    return ahead_at, last_use


def stop_after_last_use(request: pytest.FixtureRequest, name: str, stop: Callable[[], None]) -> None:
    """Have the session fixture `name` (one of STOP_AFTER_LAST_USE) call `stop` after the last
    test that uses it; `stop` must also be safe to call again at its own teardown."""
    request.session.stash.setdefault(_STOPS, {})[name] = stop


def start_ahead(
    request: pytest.FixtureRequest, ahead: Mapping[str, int], stop_after: Sequence[str]
) -> Iterator[None]:
    """Around each test: set up the fixtures of `ahead` due at it; after it, stop what
    `stop_after_last_use` registered for it (an autouse fixture of tests/conftest.py)."""
    stash = request.session.stash
    if _AHEAD not in stash:
        stash[_AHEAD], stash[_LAST_USE] = _plan(request.config, request.session.items, ahead, stop_after)
        stash[_ORDER] = {item.nodeid: i for i, item in enumerate(request.session.items)}
    for name, nodeids in stash[_AHEAD].items():
        if request.node.nodeid in nodeids:
            request.getfixturevalue(name)
    # A last user skipped before its set-up (a skip mark) never reaches the stop below: the
    # first test after it stops what is still running (Playwright's loop would otherwise stay
    # in this thread, and every later asyncio.run would fail).
    order = stash[_ORDER]
    here = order.get(request.node.nodeid, -1)
    _stop(stash, lambda last: order.get(last, here) < here)
    yield
    _stop(stash, lambda last: last == request.node.nodeid)


def _stop(stash: pytest.Stash, due: Callable[[str], bool]) -> None:
    """Call (once) the registered stop of each fixture whose last user is `due`."""
    stops = stash.get(_STOPS, {})
    for name, last in stash[_LAST_USE].items():
        if name in stops and due(last):
            stops.pop(name)()
