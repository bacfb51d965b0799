"""What a running agent touches: the memory it records into, and the recording hooks.

`Hit` and `FoundWorkflow` (what a search returns) are imported when first used, so that an
agent that records loads no search machinery (docs/performance.md, "Agent start").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowmem.agents.memory import WorkflowMemory
from flowmem.agents.recording import Run, current_run
from flowmem.lazy import lazy_exports

if TYPE_CHECKING:
    from flowmem.agents.procedures import FoundWorkflow
    from flowmem.retrieval.search import Hit

__all__ = ["FoundWorkflow", "Hit", "Run", "WorkflowMemory", "current_run"]

_HOME = {"FoundWorkflow": "flowmem.agents.procedures", "Hit": "flowmem.retrieval.search"}
"""Public name -> the module that defines it (imported on first access)."""


__getattr__, __dir__ = lazy_exports(__name__, _HOME, __all__, globals())
