"""Persistence in LanceDB: the only subpackage that imports lancedb."""

from flowmem.storage.store import (
    NotFoundError,
    Store,
    StoreAccessError,
    StoreError,
    StoreLocationError,
    VersionConflictError,
    pick_version,
)

__all__ = [
    "NotFoundError",
    "Store",
    "StoreAccessError",
    "StoreError",
    "StoreLocationError",
    "VersionConflictError",
    "pick_version",
]
