"""Who may read and write through the dashboard: the API's tokens, a login cookie, CSRF checks.

Reads need the token when FLOWMEM_API_READ_TOKEN=true, as the API's do: a browser proves it
once on the login form and gets an HttpOnly, SameSite=Strict cookie holding an HMAC of the
token (never the token). Writes (rollback) need the token too — typed into the confirmation
form or proven by that cookie — and pass two CSRF checks: the form's hidden token must equal
the CSRF cookie set with the form (double submit), and a request's Origin (or, without one,
its Referer) must be this server.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import Response

from flowmem.settings import Settings

__all__ = ["CSRF_COOKIE", "SESSION_COOKIE", "Guard"]

SESSION_COOKIE = "flowmem_session"
"""The cookie that proves the browser gave the token."""

CSRF_COOKIE = "flowmem_csrf"
"""The double-submit CSRF cookie."""


class Guard:
    """The token checks of one dashboard."""

    def __init__(self, settings: Settings) -> None:
        token = settings.api_token.get_secret_value() if settings.api_token is not None else None
        self._token = token.encode() if token else None
        self.read_token = settings.api_read_token
        """True when reads need the token."""

    @property
    def writable(self) -> bool:
        """False when no token is configured: the dashboard then refuses every write."""
        return self._token is not None

    def _session(self) -> str:
        assert self._token is not None
        return hmac.new(self._token, b"flowmem dashboard session", hashlib.sha256).hexdigest()

    def token_ok(self, given: str | None) -> bool:
        """True when `given` is the configured token (compared in constant time)."""
        if self._token is None or not given:
            return False
        return hmac.compare_digest(given.encode("utf-8", "replace"), self._token)

    def signed_in(self, request: Request) -> bool:
        """True when the request carries the login cookie or the bearer token."""
        if self._token is None:
            return False
        cookie = request.cookies.get(SESSION_COOKIE, "")
        if cookie and hmac.compare_digest(cookie.encode(), self._session().encode()):
            return True
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self.token_ok(credentials.strip())

    def may_read(self, request: Request) -> bool:
        """True when reads are open or the request proves the token."""
        return not self.read_token or self.signed_in(request)

    def sign_in(self, response: Response, request: Request) -> None:
        """Set the login cookie on a response."""
        response.set_cookie(
            SESSION_COOKIE,
            self._session(),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )

    @staticmethod
    def csrf_value(request: Request) -> str:
        """The CSRF token for a form: the browser's CSRF cookie, or a fresh random one."""
        return request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)

    @staticmethod
    def set_csrf(response: Response, request: Request, value: str) -> None:
        """Set the CSRF cookie a form's hidden token must match."""
        response.set_cookie(
            CSRF_COOKIE,
            value,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )

    @staticmethod
    def csrf_ok(request: Request, form_value: str | None) -> bool:
        """True when the form's CSRF token equals its cookie and the request comes from this
        server's own pages."""
        cookie = request.cookies.get(CSRF_COOKIE, "")
        if not cookie or not form_value or not hmac.compare_digest(cookie.encode(), form_value.encode()):
            return False
        source = request.headers.get("origin") or request.headers.get("referer")
        if source is None:
            return True  # neither is sent by some clients; the double submit still holds
        parts = urlsplit(source)
        return f"{parts.scheme}://{parts.netloc}" == f"{request.url.scheme}://{request.url.netloc}"
