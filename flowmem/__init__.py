"""flowmem: online workflow induction for LLM agents.

Importing flowmem does nothing but define names: stores, directories and threads are created
when a store or memory is first used.
"""

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
