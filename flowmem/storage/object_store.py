"""What Lance is told about an object store: the settings' endpoint, region and credentials as
the `storage_options` every LanceDB connection and Lance dataset of a store opens with.

Nothing to configure for safe concurrent commits on S3: Lance (pylance 13, the release
LanceDB 0.40 bundles) writes each table version's manifest with a conditional put
(`If-None-Match: *`), so of two writers committing the same version one fails, re-reads and
retries, and no commit is lost. That holds only where the server honours the header: AWS S3,
MinIO, R2 and moto do; a server that ignores it loses commits silently (measured in
docs/operations.md, "Object storage (S3)"). For such a server, Lance's DynamoDB commit store
(`s3+ddb://bucket/prefix?ddbTableName=...`) is the way.

A location that cannot serve is one line naming it and what to do (`access_problem`): a missing
bucket, an endpoint that does not answer (`check_endpoint` asks it for one answer first, so a
closed port, an address that drops packets or a server that never answers fails within
`storage_connect_timeout`, not after Lance's retries), refused credentials, a bucket in
another region. Every request Lance makes is bounded by the `storage_*` settings (`bounds`).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from flowmem.settings import Settings
from flowmem.storage.errors import ObjectStoreError
from flowmem.storage.location import SCHEMES

__all__ = ["Failure", "access_problem", "bounds", "check_endpoint", "endpoint", "failure", "storage_options"]

_S3 = ("s3", "s3+ddb")


def _scheme(db: str) -> str:
    return db.split("://", 1)[0].lower() if "://" in db else "file"


def bounds(settings: Settings) -> dict[str, str]:
    """Lance's options for the timeouts and retries of every object-store request, from the
    `storage_*` settings (durations as Lance's parser takes them: `1500ms`, whole seconds)."""
    return {
        "connect_timeout": f"{round(settings.storage_connect_timeout * 1000)}ms",
        "timeout": f"{round(settings.storage_timeout * 1000)}ms",
        "client_max_retries": str(settings.storage_retries),
        "client_retry_timeout": str(math.ceil(settings.storage_retry_timeout)),
    }


def storage_options(settings: Settings) -> dict[str, str] | None:
    """The `storage_options` of the store's location, or None for a local path.

    An object store always gets the request bounds (`bounds`; a key of `settings.storage_options`
    wins over them). The `s3_*` settings are given only for an `s3://` or `s3+ddb://` location
    and only when set, so whatever they leave unset still comes from the AWS environment
    variables; they win over the same keys of `settings.storage_options`."""
    scheme = _scheme(settings.db)
    if scheme == "file" or scheme not in SCHEMES:
        return None
    options = bounds(settings) | dict(settings.storage_options)
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
    return options


def endpoint(settings: Settings) -> str | None:
    """The endpoint URL an `s3://` location is served from when one is set (FLOWMEM_S3_ENDPOINT,
    an `endpoint` in FLOWMEM_STORAGE_OPTIONS, AWS_ENDPOINT_URL or AWS_ENDPOINT), else None (AWS's
    own, chosen by region)."""
    if _scheme(settings.db) not in _S3:
        return None
    given = settings.storage_options
    return (
        settings.s3_endpoint
        or given.get("aws_endpoint")
        or given.get("endpoint")
        or os.environ.get("AWS_ENDPOINT_URL")
        or os.environ.get("AWS_ENDPOINT")
    )


def _where(settings: Settings, url: str | None = None) -> str:
    """The location, and the endpoint it is served from (`url`, else the configured one)."""
    served = url or endpoint(settings)
    return f"FLOWMEM_DB={settings.db}" + (f" (endpoint {served})" if served else "")


def check_endpoint(settings: Settings) -> None:
    """Ask an explicit object-store endpoint for one answer within `storage_connect_timeout` to
    connect and as long again to answer: an unsigned, empty listing of the bucket (path-style),
    to which any answer will do but one that says `NoSuchBucket`. An endpoint that refuses or
    drops connections, takes them and never answers, or says the bucket does not exist fails
    here in one line, not after Lance's tries (each list request 6 times over ~2 s, each with
    the client's retries and timeout). Nothing is done for a local path, AWS's own endpoints,
    or requests that may go through a proxy.

    Raises:
        ObjectStoreError: if the endpoint cannot be reached, does not answer, or says that the
            bucket does not exist.
    """
    url = endpoint(settings)
    if not url or _proxied(settings):
        return
    import http.client  # here: opening a store on a local path loads no HTTP client
    import ssl

    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    wait = settings.storage_connect_timeout
    connection = kind(parts.hostname or "", parts.port, timeout=wait)
    try:
        try:
            connection.connect()
        except TimeoutError as err:
            raise ObjectStoreError(_unreachable(settings, url, f"no connection within {wait:g} s")) from err
        except ssl.SSLError:
            return  # it answered, in TLS: what Lance makes of its certificate is Lance's to say
        except OSError as err:
            raise ObjectStoreError(_unreachable(settings, url, (err.strerror or str(err)).lower())) from err
        try:
            connection.request("GET", _listing(settings))
            said = connection.getresponse().read(4096)
        except TimeoutError as err:
            why = f"it took the connection but sent no answer within {wait:g} s"
            raise ObjectStoreError(_unreachable(settings, url, why)) from err
        except (OSError, http.client.HTTPException):
            return  # it answered something: Lance's requests tell what
    finally:
        connection.close()
    if b"<Code>NoSuchBucket</Code>" in said:
        raise ObjectStoreError(_no_bucket(settings, url))


def _proxied(settings: Settings) -> bool:
    """Whether requests may go through a proxy (`proxy_url`, or a proxy variable set): this
    check connects directly, so it is left to Lance's requests."""
    names = ("http_proxy", "https_proxy", "all_proxy")
    return "proxy_url" in settings.storage_options or any(k.lower() in names for k in os.environ)


def _listing(settings: Settings) -> str:
    """The path of an empty listing of the store's bucket, path-style (or `/` where requests
    are virtual-hosted: the bucket is then in the host name, which this check does not use)."""
    options = settings.storage_options
    hosted = options.get("aws_virtual_hosted_style_request", options.get("virtual_hosted_style_request"))
    if str(hosted).lower() == "true":
        return "/"
    return f"/{quote(_bucket(settings.db))}?list-type=2&max-keys=0"


def _no_bucket(settings: Settings, url: str | None) -> str:
    bucket, at = _bucket(settings.db), url or endpoint(settings)
    flag = f" --endpoint-url {at}" if at and "amazonaws.com" not in at else ""
    return (
        f"the bucket {bucket!r} of {_where(settings, url)} does not exist: create it "
        f"(`aws s3 mb s3://{bucket}{flag}`, or the provider's console), "
        "or set FLOWMEM_DB to a bucket that exists"
    )


def _unreachable(settings: Settings, url: str, why: str) -> str:
    return (
        f"cannot reach the object store at {url} for FLOWMEM_DB={settings.db} ({why}): check "
        "FLOWMEM_S3_ENDPOINT (or AWS_ENDPOINT_URL) and that the server runs; "
        "FLOWMEM_STORAGE_CONNECT_TIMEOUT bounds the wait"
    )


@dataclass(frozen=True)
class Failure:
    """What an object store answered to a failed request, as read from Lance's error text."""

    status: int | None
    """The HTTP status, when the store answered."""
    code: str | None
    """The S3 error code (`NoSuchBucket`, `InvalidAccessKeyId`, ...), when the body has one."""
    message: str | None
    """The error's own message, when the body has one."""
    url: str | None
    """The URL of the request (its scheme, host and port name the endpoint)."""
    connect: str | None
    """Why no answer came (`connection refused`, `timed out`, `dns error`), when none did."""
    region: str | None = None
    """The bucket's region, when the answer names it (a request signed for another region)."""

    @property
    def said(self) -> str:
        """The store's own words (`Code: Message`), or its HTTP status."""
        if self.code:
            return f"{self.code}: {self.message}" if self.message else self.code
        return f"HTTP {self.status}"


_STATUS = re.compile(r"status(?: code)?: (\d{3})\b")
_CODE = re.compile(r"<Code>([^<]+)</Code>")
_MESSAGE = re.compile(r"<Message>([^<]+)</Message>")
_URL = re.compile(r"(?:uri: Some\(|GET |PUT |HEAD |POST |DELETE )(https?://[^\s)]+)")
_REGION = re.compile(r"expecting '([\w-]+)'|<Region>([\w-]+)</Region>|x-amz-bucket-region: ?([\w-]+)")
_NO_ANSWER = (
    ("connection refused", "connection refused"),
    ("dns error", "the host name does not resolve"),
    ("failed to lookup address", "the host name does not resolve"),
    ("timed out", "timed out"),
    ("operation timed out", "timed out"),
    ("connection reset", "connection reset"),
    ("kind: connect", "no connection"),
    ("tcp connect error", "no connection"),
    ("error sending request", "no answer"),
)


def failure(err: BaseException) -> Failure | None:
    """What the object store answered behind an exception (its causes looked at too), or None
    when nothing in it is an object-store request's failure."""
    texts: list[str] = []
    seen: BaseException | None = err
    while seen is not None and len(texts) < 8:
        texts.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    text = "\n".join(texts).replace('\\"', '"')
    if "S3" not in text and "object store" not in text.lower() and "<Code>" not in text:
        return None
    status = _STATUS.search(text)
    code, message, url = _CODE.search(text), _MESSAGE.search(text), _URL.search(text)
    lowered = text.lower()
    connect = None if status else next((why for key, why in _NO_ANSWER if key in lowered), None)
    if not (status or code or connect):
        return None
    origin = None
    if url:
        parts = urlsplit(url.group(1))
        origin = f"{parts.scheme}://{parts.netloc}"
    return Failure(
        status=int(status.group(1)) if status else None,
        code=code.group(1) if code else None,
        message=message.group(1) if message else None,
        url=origin,
        connect=connect,
        region=next((g for g in region.groups() if g), None) if (region := _REGION.search(text)) else None,
    )


_CREDENTIALS = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AccessDenied",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "AllAccessDisabled",
        "InvalidClientTokenId",
    }
)
_REGION_CODES = frozenset(
    {"AuthorizationHeaderMalformed", "PermanentRedirect", "IllegalLocationConstraintException"}
)
_CREDENTIAL_VARIABLES = (
    "set FLOWMEM_S3_ACCESS_KEY_ID and FLOWMEM_S3_SECRET_ACCESS_KEY (and FLOWMEM_S3_SESSION_TOKEN for "
    "temporary credentials), or AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, to "
    "credentials that may read and write the bucket"
)


def _bucket(db: str) -> str:
    return db.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]


def access_problem(err: BaseException, settings: Settings) -> str | None:
    """One line for an object store that refused or did not answer (naming the location and
    what to do), or None when `err` is no such failure (or the location is a local path)."""
    scheme = _scheme(settings.db)
    found = failure(err) if scheme in SCHEMES and scheme != "file" else None
    if found is None:
        return None
    if found.connect:
        return _unreachable(settings, found.url or endpoint(settings) or "its endpoint", found.connect)
    bucket, where = _bucket(settings.db), _where(settings, found.url)
    if found.code == "NoSuchBucket":
        return _no_bucket(settings, found.url)
    if found.code in _REGION_CODES or found.status == 301:
        to = (
            f"FLOWMEM_S3_REGION={found.region}"
            if found.region
            else "FLOWMEM_S3_REGION to the bucket's region"
        )
        return (
            f"the bucket {bucket!r} of {where} is in another region ({found.said}): set {to} (or AWS_REGION)"
        )
    if found.code in _CREDENTIALS or found.status in (401, 403):
        return f"the object store refused the credentials for {where} ({found.said}): {_CREDENTIAL_VARIABLES}"
    return None
