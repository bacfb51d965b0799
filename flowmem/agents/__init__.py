"""What a running agent touches: the memory it records into, and the recording hooks."""

from flowmem.agents.memory import WorkflowMemory
from flowmem.agents.recording import Run, current_run

__all__ = ["Run", "WorkflowMemory", "current_run"]
