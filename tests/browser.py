"""Headless Chromium for the dashboard's browser tests: Debian's chromium driven by Playwright's
sync API, the dashboard under uvicorn on 127.0.0.1, and a page that records every console
error, page error and failed request. With FLOWMEM_TEST_SCREENSHOTS set, a screenshot of every
page they visit goes to tests/screenshots/ (git-ignored)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from flowmem.flows.local import free_port
from flowmem.server.api import create_app
from flowmem.settings import Settings
from tests.processes import READY_LIMIT

CHROMIUM = shutil.which("chromium")
SHOTS = Path(__file__).parent / "screenshots"
SCREENSHOTS = "FLOWMEM_TEST_SCREENSHOTS"
"""Set it (to anything) to keep a full-page PNG of every page the browser tests visit in SHOTS,
for a reviewer to look at: `FLOWMEM_TEST_SCREENSHOTS=1 make test`. Unset, none is taken: they
check nothing, and cost chromium ~10 s of CPU a run (60 pages, measured)."""
ARGS = [
    "--no-sandbox",  # we run as root
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
BROWSER_LIMIT_MS = int(READY_LIMIT * 1000) // 3
"""Playwright's bound on a launch, a navigation or an action (milliseconds): one that never
happens, not a speed budget."""


@contextmanager
def serving(settings: Settings) -> Iterator[str]:
    """The dashboard of `settings` under uvicorn in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + READY_LIMIT  # a bound, not a budget: it waits while it starts
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def chromium(sync_playwright: Any) -> Iterator[Any]:
    """Debian's chromium, headless."""
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=ARGS, headless=True, timeout=BROWSER_LIMIT_MS
        )
        try:
            yield browser
        finally:
            browser.close()


class Watched:
    """A page with every console error, page error and failed request it saw."""

    def __init__(self, page: Any, base: str) -> None:
        self.page, self.base = page, base
        self.problems: list[str] = []

        def console(m: Any) -> None:
            if m.type == "error":
                self.problems.append(f"console: {m.text}")

        def response(r: Any) -> None:
            if r.status >= 400:
                self.problems.append(f"HTTP {r.status}: {r.url}")

        page.on("console", console)
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(f"request failed: {r.url} {r.failure}"))
        page.on("response", response)

    def visit(self, path: str, shot: str) -> Any:
        """Open `path`, check it answered 200 and nothing failed, keep its screenshot (`keep`)."""
        response = self.page.goto(self.base + path)
        assert response is not None and response.status == 200, path
        self.shot(shot)
        return response

    def shot(self, name: str) -> None:
        """Nothing may have failed so far; keep a screenshot of the whole page (`keep`)."""
        keep(self.page, name)
        assert self.problems == [], self.page.url


def keep(page: Any, name: str) -> Path | None:
    """A screenshot of the whole page as SHOTS/<name>.png, when SCREENSHOTS is set: its path."""
    if not os.environ.get(SCREENSHOTS):
        return None
    SHOTS.mkdir(exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@contextmanager
def watched_page(browser: Any, base: str) -> Iterator[Watched]:
    """A fresh browser context at a desktop size, its page watched."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(BROWSER_LIMIT_MS)  # Playwright's 30 s can pass on a loaded machine
    context.set_default_navigation_timeout(BROWSER_LIMIT_MS)
    try:
        yield Watched(context.new_page(), base)
    finally:
        context.close()
