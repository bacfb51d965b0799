"""The Prefect servers the tests start: the harness's (started before `prefect_test_harness`,
which then uses it), each on a copy of one database migrated once for a worker
(`upgrade_command`, `seed_database`): a new database costs a server ~3.5 s of CPU to migrate
(measured)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.processes import READY_LIMIT, Command

QUIET = {"DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def upgrade_command(database: Path) -> Command:
    """`prefect server database upgrade` of a new SQLite database at `database`: every migration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env |= QUIET | {
        "PREFECT_HOME": str(database.parent / "home"),
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{database}",
    }
    return Command([sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"], env)


def seed_database(migrated: Path, home: Path, name: str = "prefect.db") -> Path:
    """A copy of the `migrated` database as `home/name` (PREFECT_HOME's default database is
    prefect.db), for a server about to start there: it finds every migration applied."""
    home.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(migrated, home / name))


def stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class HarnessServer:
    """The server `prefect_test_harness` starts (the same uvicorn command and environment), but
    started before the harness, which then uses it instead of starting one; on a copy of the
    `migrated` database."""

    def __init__(self, home: Path, migrated: Path) -> None:
        self.home, self.migrated = home, migrated
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> None:
        if self.process is not None:
            return
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        database = seed_database(self.migrated, self.home, "prefect-test.db")
        env = {
            **os.environ,
            "PREFECT_HOME": str(self.home),
            "DO_NOT_TRACK": os.environ.get("DO_NOT_TRACK", "1"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": os.environ.get("PREFECT_SERVER_ANALYTICS_ENABLED", "false"),
            "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{database}",
            "PREFECT_UI_ENABLED": "0",
            "PREFECT__SERVER_EPHEMERAL": "1",
            "PREFECT__SERVER_FINAL": "1",
        }
        spec = importlib.util.find_spec("prefect")  # not imported here: the server imports it
        assert spec is not None and spec.origin is not None
        app_dir = str(Path(spec.origin).parent.parent)
        factory = "prefect.server.api.server:create_app"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", app_dir, "--factory", factory]
            + ["--host", "127.0.0.1", "--port", str(self.port), "--log-level", "error", "--lifespan", "on"],
            env=env,
        )

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def healthy(self) -> bool:
        """Wait until it answers /health, however long it takes to start while it runs (a slow or
        loaded machine only makes this longer; READY_LIMIT stops a server that never answers);
        False if it exited first (the harness then starts its own)."""
        import httpx

        assert self.process is not None
        deadline = time.monotonic() + READY_LIMIT
        with httpx.Client(timeout=READY_LIMIT) as client:
            while self.process.poll() is None and time.monotonic() < deadline:
                try:
                    if client.get(f"{self.api_url}/health").status_code == 200:
                        return True
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        stop(self.process)
        return False
