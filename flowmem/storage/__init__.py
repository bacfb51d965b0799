"""Persistence in LanceDB: the only subpackage that imports lancedb."""

from flowmem.storage.store import NotFoundError, Store, StoreError, VersionConflictError, pick_version

__all__ = ["NotFoundError", "Store", "StoreError", "VersionConflictError", "pick_version"]
