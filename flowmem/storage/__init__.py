"""Persistence in LanceDB: the only subpackage that imports lancedb.

`Store`, `pick_version` and `LoggedTransition` are imported when first used, so that a module
that only checks a location or catches a store error (an agent opening its memory:
`flowmem.agents.memory`) loads none of the store's modules, numpy among them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowmem.lazy import lazy_exports
from flowmem.storage.errors import (
    NotFoundError,
    StoreAccessError,
    StoreError,
    StoreLocationError,
    VersionConflictError,
)

if TYPE_CHECKING:
    from flowmem.storage.store import Store, pick_version
    from flowmem.storage.version_state import LoggedTransition

__all__ = [
    "LoggedTransition",
    "NotFoundError",
    "Store",
    "StoreAccessError",
    "StoreError",
    "StoreLocationError",
    "VersionConflictError",
    "pick_version",
]

_HOME = {
    "LoggedTransition": "flowmem.storage.version_state",
    "Store": "flowmem.storage.store",
    "pick_version": "flowmem.storage.store",
}
"""Public name -> the module that defines it (imported on first access)."""


__getattr__, __dir__ = lazy_exports(__name__, _HOME, __all__, globals())
