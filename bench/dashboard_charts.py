"""The dashboard's cluster map on the WorkBench store: server time per request and page size.

Builds a store from ../shared/data/workbench_trajectories.jsonl.gz (its 4,197 runs, all of one
agent; one induction run, rule inducer, default settings), or reuses the one an earlier run
left in <tmp>/flowmem-bench-dashboard-charts/ (keyed by the data file's size and time and the
store's schema version; --fresh builds it again). Then times GET /clusters in process
(FastAPI's TestClient: the request's whole handling, no network):

- the first request after the app starts, which also opens the store's tables;
- then `repeats` more: p50 and p90 against the 1 s bar, and the page's size against 300 KB.

The learning curve page is timed the same way, for reference.

Usage: python bench/dashboard_charts.py [DATA_DIR] [--repeats N] [--fresh]   (default: 20)
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

from flowmem.induction.inducers.rule import RuleInducer
from flowmem.interchange import Rejection, read_trajectories
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.server.api import create_app
from flowmem.settings import Settings
from flowmem.storage.migrations import SCHEMA_VERSION

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.paths import SHARED_DATA

__all__ = ["MAX_BYTES", "MAX_P50_S", "main", "workbench_store"]

MAX_P50_S = 1.0
"""The bar for the cluster map's median server time (issue 28)."""
MAX_BYTES = 300_000
"""The bar for its page size (issue 28)."""
DATA = "workbench_trajectories.jsonl.gz"
BUILT = "built"
"""The file a finished build leaves beside the store: a store without it is built again."""


def workbench_store(data: Path, *, fresh: bool = False) -> tuple[Settings, float | None]:
    """Settings on the WorkBench store (ingested and induced once), and the seconds the build
    took (None: an earlier build was reused)."""
    source = data / DATA
    stat = source.stat()
    home = Path(tempfile.gettempdir()) / "flowmem-bench-dashboard-charts"
    folder = home / f"{stat.st_size}-{int(stat.st_mtime)}-schema{SCHEMA_VERSION}"
    settings = Settings(db=str(folder / "db"))
    if (folder / BUILT).exists() and not fresh:
        return settings, None
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    start = time.perf_counter()
    runs = [t for t in read_trajectories(source, settings) if not isinstance(t, Rejection)]
    store = store_from(settings)
    store_trajectories(store, runs, settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    (folder / BUILT).write_text(f"{len(runs)} runs\n")
    return settings, time.perf_counter() - start


def _timed(api: TestClient, path: str) -> tuple[float, int]:
    start = time.perf_counter()
    response = api.get(path)
    seconds = time.perf_counter() - start
    assert response.status_code == 200, (path, response.status_code)
    return seconds, len(response.content)


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _report(api: TestClient, path: str, repeats: int) -> tuple[float, int]:
    """Print the first request's time and the p50 / p90 of `repeats` more; (p50, bytes)."""
    first, size = _timed(api, path)
    times = [_timed(api, path)[0] for _ in range(repeats)]
    p50, p90 = statistics.median(times), _percentile(times, 0.9)
    print(
        f"GET {path:<10} first {first:6.3f} s   p50 {p50:6.3f} s   p90 {p90:6.3f} s   "
        f"({repeats} requests)   {size / 1000:6.1f} KB"
    )
    return p50, size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data", nargs="?", type=Path, default=SHARED_DATA, help="the shared data folder")
    parser.add_argument("--repeats", type=int, default=20, help="requests timed after the first")
    parser.add_argument("--fresh", action="store_true", help="build the store again")
    args = parser.parse_args(argv)
    settings, built = workbench_store(args.data, fresh=args.fresh)
    how = "reused" if built is None else f"built in {built:.1f} s"
    print(f"store: {settings.db} ({how})")
    api = TestClient(create_app(settings))
    p50, size = _report(api, "/clusters", args.repeats)
    _report(api, "/learning", args.repeats)
    shown = re.search(r'<p id="shown" class="meta"><b>(.*?)</b>', api.get("/clusters").text)
    print(f"cluster map: {shown.group(1) if shown else 'the page does not say how many runs it shows'}")
    ok_time, ok_size = p50 <= MAX_P50_S, size <= MAX_BYTES
    print(
        f"cluster map p50 {p50:.3f} s (bar {MAX_P50_S:.0f} s: {'met' if ok_time else 'MISSED'}); "
        f"page {size / 1000:.1f} KB (bar {MAX_BYTES / 1000:.0f} KB: {'met' if ok_size else 'MISSED'})"
    )
    return 0 if ok_time and ok_size else 1


if __name__ == "__main__":
    raise SystemExit(main())
