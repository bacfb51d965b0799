"""The Prefect servers the tests start: the harness's (started before `prefect_test_harness`,
which then uses it), each on a copy of one database migrated once for a worker
(`upgrade_command`, `seed_database`): a new database costs a server ~3.5 s of CPU to migrate
(measured)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from flowmem.flows.local import PrefectServer
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
    """The server `prefect_test_harness` starts (Prefect's temporary server: the same uvicorn
    command and environment, `flowmem.flows.local`'s), but started ahead of the harness, which
    then uses it instead of starting one and waiting; on a copy of the `migrated` database."""

    def __init__(self, home: Path, migrated: Path) -> None:
        self.home, self.migrated = home, migrated
        self.server: PrefectServer | None = None

    def start(self) -> None:
        if self.server is not None:
            return
        database = seed_database(self.migrated, self.home, "prefect-test.db")
        env = {
            **os.environ,
            "PREFECT_HOME": str(self.home),
            "DO_NOT_TRACK": os.environ.get("DO_NOT_TRACK", "1"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": os.environ.get("PREFECT_SERVER_ANALYTICS_ENABLED", "false"),
            "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{database}",
        }
        self.server = PrefectServer(env=env, temporary=True, name="harness's Prefect server")

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return None if self.server is None else self.server.process

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.port

    @property
    def api_url(self) -> str:
        assert self.server is not None
        return self.server.api_url

    def healthy(self) -> bool:
        """Wait until it answers /health, however long it takes to start while it runs (a slow or
        loaded machine only makes this longer; READY_LIMIT stops a server that never answers);
        False if it exited first (the harness then starts its own)."""
        assert self.server is not None
        try:
            self.server.ready(READY_LIMIT)
        except RuntimeError:
            self.server.stop()
            return False
        return True
