"""What the store raises: `StoreError` and its kinds.

A leaf: it imports nothing of flowmem, so every storage module (the migrations included) can
raise them without importing the store's plumbing.
"""

from __future__ import annotations

__all__ = [
    "NotFoundError",
    "ObjectStoreError",
    "StoreAccessError",
    "StoreError",
    "StoreLocationError",
    "VersionConflictError",
]


class StoreError(RuntimeError):
    """The store cannot do what was asked; the message says why."""


class NotFoundError(StoreError, LookupError):
    """No such trajectory, workflow, version or run."""


class VersionConflictError(StoreError):
    """A workflow version that would overwrite or skip an existing one."""


class StoreLocationError(StoreError, ValueError):
    """A store location that cannot be one (`flowmem.storage.location.ACCEPTED` says what can)."""


class StoreAccessError(StoreError):
    """The operating system refused the store: read-only, no permission, no space."""


class ObjectStoreError(StoreAccessError):
    """The object store of an `s3://` (or other object-store) location refused or did not
    answer: a missing bucket, an endpoint that cannot be reached, refused credentials, a
    bucket in another region. A configuration error: the message names the location and what
    to do (`flowmem.storage.object_store.access_problem`)."""
