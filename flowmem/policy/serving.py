"""Which versions of a workflow are served to agents (pure)."""

from __future__ import annotations

from collections.abc import Iterable

from flowmem.models import Workflow

__all__ = ["served_versions"]


def served_versions(versions: Iterable[Workflow]) -> list[Workflow]:
    """The versions search may serve, by workflow id, newest first within a workflow.

    Per workflow: its latest active version, and its latest candidate newer than that (a
    search serves the candidate to a share of requests, `lifecycle.serve_candidate`); with no
    active version, its latest candidate. Deprecated versions are never served.
    """
    chosen: dict[str, list[Workflow]] = {}
    for w in sorted(versions, key=lambda w: (w.id, -w.version)):
        picked = chosen.setdefault(w.id, [])
        if w.status == "deprecated" or any(p.status == "active" for p in picked):
            continue
        if w.status == "active" or not picked:
            picked.append(w)
    return [w for _, picked in sorted(chosen.items()) for w in picked]
