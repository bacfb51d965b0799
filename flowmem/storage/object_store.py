"""What Lance is told about an object store: the settings' endpoint, region and credentials as
the `storage_options` every LanceDB connection and Lance dataset of a store opens with.

Nothing to configure for safe concurrent commits on S3: Lance (pylance 13, the release
LanceDB 0.40 bundles) writes each table version's manifest with a conditional put
(`If-None-Match: *`), so of two writers committing the same version one fails, re-reads and
retries, and no commit is lost. That holds only where the server honours the header: AWS S3,
MinIO, R2 and moto do; a server that ignores it loses commits silently (measured in
docs/operations.md, "Object storage (S3)"). For such a server, Lance's DynamoDB commit store
(`s3+ddb://bucket/prefix?ddbTableName=...`) is the way.
"""

from __future__ import annotations

from flowmem.settings import Settings
from flowmem.storage.location import SCHEMES

__all__ = ["storage_options"]

_S3 = ("s3", "s3+ddb")


def storage_options(settings: Settings) -> dict[str, str] | None:
    """The `storage_options` of the store's location, or None for a local path (and for an
    object store with nothing set: Lance then reads the standard environment alone).

    The `s3_*` settings are given only for an `s3://` or `s3+ddb://` location and only when set,
    so whatever they leave unset still comes from the AWS environment variables."""
    scheme = settings.db.split("://", 1)[0].lower() if "://" in settings.db else "file"
    if scheme == "file" or scheme not in SCHEMES:
        return None
    options = dict(settings.storage_options)
    if scheme in _S3:
        secret = settings.s3_secret_access_key
        token = settings.s3_session_token
        given = {
            "aws_endpoint": settings.s3_endpoint,
            "aws_region": settings.s3_region,
            "aws_access_key_id": settings.s3_access_key_id,
            "aws_secret_access_key": secret.get_secret_value() if secret else None,
            "aws_session_token": token.get_secret_value() if token else None,
            "allow_http": "true" if settings.s3_allow_http else None,
        }
        options |= {k: v for k, v in given.items() if v}
    return options or None
