"""`python -m bench`'s table: every figure of the JSON it is given, in its row."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from bench.report import table

SEARCH = {
    "flowmem_p50_ms": 1.3,
    "numpy_p50_ms": 0.69,
    "vs_numpy": 1.88,
    "recall_at_3": 1.0,
    "rss_mb": 41.0,
    "vectors_mb": 15.0,
    "load_s": 0.1,
    "ann_build_s": 1.8,
}


def render(results: dict[str, Any]) -> str:
    console = Console(width=240, record=True)
    console.print(table(results))
    return console.export_text()


def results(**extra: Any) -> dict[str, Any]:
    return {
        "hook_step_us_median": 0.47,
        "hook_step_us_p99": 3.65,
        "search_10k": SEARCH,
        "induce_10k_s": 20.0,
        "induce_flow_10k_s": 25.0,
        "incremental_ratio": 0.155,
        "api_search_rps_8": 804.4,
        "api_search_ms_p50_1": 2.93,
        **extra,
    }


def test_the_table_shows_the_flow_ratio_the_server_start_and_the_incremental_figures() -> None:
    text = render(
        results(
            flow_vs_cli_ratio=1.23,
            prefect_server_start_s=10.7,
            incremental_cpu_ratio=0.081,
            induce_nothing_new_ratio=0.105,
            memharness_add_us_median=694.0,
            memharness_search_ms_p50_2k=424.0,
        )
    )
    assert "1.23x the CLI (server running); temporary server start 10.7 s, apart" in text
    assert (
        "16% of a full run" in text
        and "8% in CPU time" in text
        and "10% for a run that finds nothing new" in text
    )
    assert "804 req/s" in text and "1 client p50 2.9 ms" in text
    assert "1,477x fewer µs than memharness add" in text and "memharness at 2k: 326x slower" in text


def test_older_results_without_the_newer_keys_still_render() -> None:
    text = render(results(memharness_skipped="no Python 3.13"))
    assert "1.25x the CLI (server running)" in text and "temporary server" not in text
    assert "16% of a full run" in text and "memharness skipped: no Python 3.13" in text


def test_the_table_shows_the_apis_tail_errors_and_32_clients() -> None:
    text = render(
        results(
            api_search_ms_p99_8=9.87,
            api_search_errors_8=0,
            api_search_rps_32=1234.5,
            api_search_ms_p99_32=30.04,
            api_workers=2,
        )
    )
    assert "p99 9.9 ms, 0 errors" in text and "32 clients 1,234 req/s (p99 30.0 ms)" in text
    assert "2 workers" in text


def test_the_table_shows_the_hook_beside_the_revision_before_it() -> None:
    text = render(
        results(
            hook_before="e31b2b3",
            hook_step_us_median_before=0.65,
            hook_step_us_p99_before=2.86,
            hook_p50_ratio=0.72,
            hook_p99_ratio=1.28,
        )
    )
    assert "0.65 / 2.86 µs" in text and "0.72x / 1.28x (this checkout / e31b2b3)" in text
