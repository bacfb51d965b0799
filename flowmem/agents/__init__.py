"""What a running agent touches: the memory it records into, and the recording hooks."""

from flowmem.agents.memory import WorkflowMemory
from flowmem.agents.procedures import FoundWorkflow
from flowmem.agents.recording import Run, current_run
from flowmem.retrieval.search import Hit

__all__ = ["FoundWorkflow", "Hit", "Run", "WorkflowMemory", "current_run"]
