"""Workflows that share a name, told apart: what each one's steps, parameters and pitfalls have
that the others of its name lack, and what it lacks that they all have (pure)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from flowmem.induction.pitfalls.failures import pitfall_statement
from flowmem.induction.render.render import render_call

if TYPE_CHECKING:  # the type only: this module stays pure
    from flowmem.storage.listings import WorkflowShape

__all__ = ["MAX_SHOWN", "differences", "features"]

MAX_SHOWN = 3
"""Most features named on each side of a line (more are counted)."""

_LONG = 60
"""Characters of a pitfall shown before it is cut."""


def features(shape: WorkflowShape, agent: str) -> set[str]:
    """What a workflow version does, as the short texts a reader compares: each step as a call
    (`×2` when it recurs), each parameter as `{name}`, each pitfall, and its agent."""
    calls = Counter(render_call(s.action, s.args) for s in shape.steps)
    found = {call if n == 1 else f"{call} ×{n}" for call, n in calls.items()}
    found |= {"{" + p + "}" for p in shape.parameters}
    for p in shape.pitfalls:
        text = pitfall_statement(p)
        found.add("pitfall “" + (text if len(text) <= _LONG else text[: _LONG - 1] + "…") + "”")
    found.add(f"agent {agent}")
    return found


def _listed(items: Iterable[str]) -> str:
    ordered = sorted(items)
    more = len(ordered) - MAX_SHOWN
    return ", ".join(ordered[:MAX_SHOWN]) + (f" and {more} more" if more > 0 else "")


def _versus(mine: set[str], other: set[str]) -> str:
    """What `mine` has that `other` lacks, and what it lacks that `other` has."""
    has, lacks = mine - other, other - mine
    parts = [f"has {_listed(has)}"] if has else []
    return "; ".join(parts + ([f"lacks {_listed(lacks)}"] if lacks else []))


def _line(mine: set[str], others: Mapping[str, set[str]]) -> str:
    """Against all the others at once (what none of them has, what all of them have) when that
    says something; else against each (at most `MAX_SHOWN`), naming those it equals."""
    said = _versus(mine - set().union(*others.values()), set.intersection(*others.values()) - mine)
    if said:
        return said
    same = sorted(wid for wid, f in others.items() if f == mine)
    parts = [f"same steps, parameters and pitfalls as {_listed(same)}"] if same else []
    apart = sorted(wid for wid in others if wid not in same)
    parts += [f"vs {wid}: {_versus(mine, others[wid])}" for wid in apart[:MAX_SHOWN]]
    return "; ".join(parts)


def differences(rows: Sequence[Any], shapes: Mapping[tuple[str, int], WorkflowShape]) -> dict[str, str]:
    """For each row (`id`, `name`, `agent`, `version`) whose name another row shares, what tells
    it apart from them (`features` of the version it shows, from `shapes`): "has …" (what no
    other of its name has), "lacks …" (what all the others have), or that nothing does."""
    groups: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        groups[r.name].append(r)
    out: dict[str, str] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        known = {
            r.id: features(shapes[(r.id, r.version)], r.agent) for r in group if (r.id, r.version) in shapes
        }
        for wid, mine in known.items():
            others = {o: f for o, f in known.items() if o != wid}
            if others:
                out[wid] = _line(mine, others)
    return out
