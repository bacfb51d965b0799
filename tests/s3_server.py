"""The tests' S3 server: moto's, in a thread of the session (`s3`), with one bucket, and a
fresh key prefix per test (`prefix`). Tests of object storage and of `flowmem maintain` on it
import the fixtures from here."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from flowmem.flows.local import free_port
from flowmem.settings import Settings

__all__ = ["BUCKET", "KEY", "S3Server", "prefix", "s3"]

BUCKET = "flowmem-tests"
KEY = "testing"
"""Access key id and secret of the test server (moto accepts any)."""


@dataclass(frozen=True)
class S3Server:
    """The test session's S3 server."""

    endpoint: str
    client: Any
    """A boto3 S3 client of it."""

    def settings(self, prefix: str, **kw: Any) -> Settings:
        """Settings on `s3://BUCKET/<prefix>`, endpoint and credentials from the settings."""
        return Settings(
            db=f"s3://{BUCKET}/{prefix}",
            s3_endpoint=self.endpoint,
            s3_region="us-east-1",
            s3_access_key_id=KEY,
            s3_secret_access_key=SecretStr(KEY),
            s3_allow_http=True,
            **kw,
        )

    def env(self, prefix: str) -> dict[str, str]:
        """The same as FLOWMEM_* variables, for commands and other processes."""
        return {
            "FLOWMEM_DB": f"s3://{BUCKET}/{prefix}",
            "FLOWMEM_NAMESPACE": "default",
            "FLOWMEM_S3_ENDPOINT": self.endpoint,
            "FLOWMEM_S3_REGION": "us-east-1",
            "FLOWMEM_S3_ACCESS_KEY_ID": KEY,
            "FLOWMEM_S3_SECRET_ACCESS_KEY": KEY,
            "FLOWMEM_S3_ALLOW_HTTP": "true",
        }

    def keys(self, prefix: str) -> list[str]:
        """The object keys under a prefix, relative to it."""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/")
        return [o["Key"].removeprefix(prefix + "/") for page in pages for o in page.get("Contents", [])]


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """moto's S3 server in a thread, on a free port, with one bucket; the tests are skipped
    (saying why) only when it cannot start."""
    try:
        import boto3  # type: ignore[import-untyped]
        from moto.server import ThreadedMotoServer
    except ImportError as err:
        pytest.skip(f"no S3 test server: {err} (`make setup` installs moto[server] and boto3)")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        server.start()
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id=KEY,
            aws_secret_access_key=KEY,
        )
        client.create_bucket(Bucket=BUCKET)
    except Exception as err:  # a port taken meanwhile, a server that does not answer
        server.stop()
        pytest.skip(f"the S3 test server did not start: {err}")
    yield S3Server(endpoint=endpoint, client=client)
    server.stop()


@pytest.fixture
def prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A prefix no other test uses; the working directory is a fresh one (to see that nothing
    is written locally instead)."""
    monkeypatch.chdir(tmp_path)
    return f"t-{uuid.uuid4().hex[:12]}"
