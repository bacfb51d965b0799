"""flowmem: online workflow induction for LLM agents.

Importing flowmem does nothing but define names: stores, directories and threads are created
when a store or memory is first used. The names are imported when first used too, so a
command that needs only the store (`flowmem induce`) does not load the agent runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowmem.lazy import lazy_exports

if TYPE_CHECKING:
    from flowmem.agents import Run, WorkflowMemory, current_run
    from flowmem.jobs.factories import store_from
    from flowmem.models import InductionRun, Step, Trajectory, Workflow, WorkflowRef, WorkflowStep
    from flowmem.settings import Settings
    from flowmem.storage import Store

__all__ = [
    "InductionRun",
    "Run",
    "Settings",
    "Step",
    "Store",
    "Trajectory",
    "Workflow",
    "WorkflowMemory",
    "WorkflowRef",
    "WorkflowStep",
    "current_run",
    "store_from",
]

__version__ = "0.1.0"

_HOME = {
    "Run": "flowmem.agents",
    "WorkflowMemory": "flowmem.agents",
    "current_run": "flowmem.agents",
    "store_from": "flowmem.jobs.factories",
    "InductionRun": "flowmem.models",
    "Step": "flowmem.models",
    "Trajectory": "flowmem.models",
    "Workflow": "flowmem.models",
    "WorkflowRef": "flowmem.models",
    "WorkflowStep": "flowmem.models",
    "Settings": "flowmem.settings",
    "Store": "flowmem.storage",
}
"""Public name -> the module that defines it (imported on first access)."""


__getattr__, __dir__ = lazy_exports(__name__, _HOME, __all__, globals())
