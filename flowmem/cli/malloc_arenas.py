"""glibc's malloc arenas limited, for the commands that run until stopped (api, dashboard, mcp, serve).

glibc gives each thread that allocates its own malloc arena, up to 8 per core; a server's
threads (uvicorn's, the thread pool's, LanceDB's) then spread what they free over many arenas
that are never given back, and its RSS creeps up under a steady stream of writes
(docs/reliability.md#a-write-path-that-stays-flat). Four arenas keep it from creeping far;
two kept it lower but made each request cost more as the run went on (threads waiting on
each other's arenas): measured over 20,000 API writes. Nothing happens at
import; the `flowmem` command calls `limit_malloc_arenas` before a long-running command starts.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["M_ARENA_MAX", "SERVER_ARENAS", "limit_malloc_arenas"]

M_ARENA_MAX = -8
"""glibc's `mallopt` parameter for the most arenas (malloc.h)."""

SERVER_ARENAS = 4
"""The arenas a long-running command keeps (what MALLOC_ARENA_MAX=4 does when set by hand)."""


def limit_malloc_arenas(arenas: int = SERVER_ARENAS) -> bool:
    """Let glibc's malloc use at most `arenas` arenas from now on; True when it did.

    A no-op (False) on anything but glibc on Linux (macOS, Windows, musl), when the
    environment sets MALLOC_ARENA_MAX (that choice stands), and when `mallopt` cannot be found
    or refuses; it never raises. Arenas made before the call stay: call it before threads start.
    """
    if not sys.platform.startswith("linux") or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return False
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: glibc's malloc
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        mallopt.restype = ctypes.c_int
        return bool(mallopt(M_ARENA_MAX, arenas))
    except (OSError, ValueError, AttributeError):  # no such name, no libc, no symbol
        return False
