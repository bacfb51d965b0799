"""What a running agent touches: the memory it records into, and the recording hooks.

`Hit` and `FoundWorkflow` (what a search returns) are imported when first used, so that an
agent that records loads no search machinery (docs/performance.md, "Agent start").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flowmem.agents.memory import WorkflowMemory
from flowmem.agents.recording import Run, current_run

if TYPE_CHECKING:
    from flowmem.agents.procedures import FoundWorkflow
    from flowmem.retrieval.search import Hit

__all__ = ["FoundWorkflow", "Hit", "Run", "WorkflowMemory", "current_run"]

_HOME = {"FoundWorkflow": "flowmem.agents.procedures", "Hit": "flowmem.retrieval.search"}
"""Public name -> the module that defines it (imported on first access)."""


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'flowmem.agents' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value  # once: later lookups are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
