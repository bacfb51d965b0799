"""`MemoryLike`: what the LEGOMem roles and the procedure API use of a memory.

`agents.legomem` and `agents.procedures` take this protocol, not `WorkflowMemory`: the memory
imports them to offer their verbs, and they need none of its recording or writer machinery,
so neither imports `agents.memory` (not even for type checking). `WorkflowMemory` satisfies
it; mypy checks that where the memory passes itself.
"""

from __future__ import annotations

from typing import Protocol

from flowmem.agents.served_index import ServedIndex
from flowmem.retrieval.search import Hit
from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = ["MemoryLike"]


class MemoryLike(Protocol):
    """A memory's settings, store and served indexes, its search and its flush."""

    @property
    def settings(self) -> Settings:
        """The settings it was opened with (its namespace, what is scrubbed)."""
        ...

    @property
    def store(self) -> Store:
        """The store its runs go to and its workflows come from."""
        ...

    def index_of(self, namespace: str) -> ServedIndex:
        """The in-process index of one namespace's served workflows."""
        ...

    def search(
        self, task: str, k: int = 3, *, agent: str | None = None, scope: str | None = None
    ) -> list[Hit]:
        """The k served workflows of the configured namespace that fit a task best."""
        ...

    def flush(self) -> bool:
        """Wait until every finished run is stored; False if that took too long."""
        ...
