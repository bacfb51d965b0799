"""flowmem's own simulated office: tools, task families and a scripted agent (demo data).

`simulate(n, seed=...)` is the one-call entry point; `World`, `make_tasks` and `ScriptedAgent`
are the pieces it is made of.
"""

from __future__ import annotations

from flowmem.sim.agent import SOURCE, ScriptedAgent, simulate
from flowmem.sim.families import FAMILIES, MULTI_FAMILIES, SINGLE_FAMILIES, Family, Task, make_tasks
from flowmem.sim.records import (
    NOW,
    USER_ADDRESS,
    BoardTask,
    Contact,
    Customer,
    Email,
    Event,
    SentMail,
    ToolError,
)
from flowmem.sim.tools import TOOLS
from flowmem.sim.world import World

__all__ = [
    "FAMILIES",
    "MULTI_FAMILIES",
    "NOW",
    "SINGLE_FAMILIES",
    "SOURCE",
    "TOOLS",
    "USER_ADDRESS",
    "BoardTask",
    "Contact",
    "Customer",
    "Email",
    "Event",
    "Family",
    "ScriptedAgent",
    "SentMail",
    "Task",
    "ToolError",
    "World",
    "make_tasks",
    "simulate",
]
