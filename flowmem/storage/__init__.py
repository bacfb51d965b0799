"""Persistence in LanceDB: the only subpackage that imports lancedb."""

from flowmem.storage.errors import (
    NotFoundError,
    StoreAccessError,
    StoreError,
    StoreLocationError,
    VersionConflictError,
)
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
