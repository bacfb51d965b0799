"""flowmem's own simulated office: tools, task families and a scripted agent (demo data).

`simulate(n, seed=...)` is the one-call entry point; `World`, `make_tasks` and `ScriptedAgent`
are the pieces it is made of. The demo's learning loop over it (memory against none, round by
round) is `flowmem.demo.loop`, not imported here.
"""

from __future__ import annotations

from flowmem.demo.agent import SOURCE, ScriptedAgent, simulate
from flowmem.demo.families import FAMILIES, MULTI_FAMILIES, SINGLE_FAMILIES, Family, Task, make_tasks
from flowmem.demo.records import (
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
from flowmem.demo.tools import TOOLS
from flowmem.demo.world import World

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
