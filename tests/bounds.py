"""Time bounds of commands run in tests, stated in an idle machine's seconds.

A one-line error "within 10 s" is about what flowmem waits for (connect and read timeouts,
retries), not about how long Python takes to import lancedb on a machine whose cores are busy
with other processes: there start-up alone took 25 s of a 10 s bound. `idle_bound` stretches a
bound by how many processes wait for each core (the 1-minute load average per core, at least
1), so the bound holds its meaning on a loaded machine and is the bound itself on an idle one.
"""

from __future__ import annotations

import os

__all__ = ["idle_bound"]


def idle_bound(seconds: float) -> float:
    """`seconds` on an idle machine, in this machine's seconds now."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average (not Unix): the bound as it is
        return seconds
    return seconds * max(1.0, load / (os.cpu_count() or 1))
