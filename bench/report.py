"""The performance figures of one run of `python -m bench`, side by side in one table."""

from __future__ import annotations

from typing import Any

from rich.table import Table

__all__ = ["table"]


def _ms(value: Any, unit: str = "ms") -> str:
    return "—" if value is None else f"{value:,.2f} {unit}"


def table(r: dict[str, Any]) -> Table:
    """The side-by-side table of one run's results."""
    t = Table("measure", "flowmem", "numpy exact", "LanceDB flat", "LanceDB IVF_PQ", "memharness", "ratio")
    mh_add, mh_search = r.get("memharness_add_us_median"), r.get("memharness_search_ms_p50_2k")
    ratio = f"{mh_add / r['hook_step_us_median']:,.0f}x fewer µs than memharness add" if mh_add else ""
    t.add_row(
        "hook run.step p50 / p99",
        f"{r['hook_step_us_median']:.2f} / {r['hook_step_us_p99']:.2f} µs",
        "",
        "",
        "",
        _ms(mh_add, "µs") + " (add_workflow)" if mh_add else "—",
        ratio,
    )
    if r.get("hook_step_us_median_before") is not None:
        t.add_row(
            f"hook run.step p50 / p99, {r['hook_before']}",
            f"{r['hook_step_us_median_before']:.2f} / {r['hook_step_us_p99_before']:.2f} µs",
            "",
            "",
            "",
            "",
            f"{r['hook_p50_ratio']:.2f}x / {r['hook_p99_ratio']:.2f}x (this checkout / {r['hook_before']})",
        )
    if r.get("agent_start_s") is not None:
        before = r.get("agent_start_s_before")
        t.add_row(
            "agent start: import + open + first step",
            _ms(r["agent_start_s"], "s"),
            "",
            "",
            "",
            "",
            f"{r['agent_start_ratio']:.2f}x {r['agent_start_before']} ({before:.2f} s)" if before else "",
        )
    for key in ("10k", "100k", "1m"):
        s = r.get(f"search_{key}")
        if not s:
            continue
        versus = f"{s['vs_numpy']:.2f}x numpy; recall@3 {s['recall_at_3']:.3f}"
        if mh_search and key == "10k":
            versus += f"; memharness at 2k: {mh_search / s['flowmem_p50_ms']:,.0f}x slower"
        t.add_row(
            f"search k=3 at {key} p50",
            _ms(s["flowmem_p50_ms"]),
            _ms(s["numpy_p50_ms"]),
            _ms(s.get("lance_flat_p50_ms")),
            _ms(s.get("lance_ivfpq_p50_ms")),
            _ms(mh_search) + " (at 2k)" if mh_search and key == "10k" else "—",
            versus,
        )
        t.add_row(
            f"memory at {key}",
            f"{s['rss_mb']:,.0f} MB RSS",
            f"{s['vectors_mb']:,.0f} MB of vectors",
            "",
            "",
            "",
            f"{s['rss_mb'] / max(s['vectors_mb'], 1e-9):.1f}x the vectors; "
            f"load {s['load_s']:.1f} s, ANN {s['ann_build_s']:.1f} s",
        )
    t.add_row("ingest + induce 10k (CLI)", _ms(r["induce_10k_s"], "s"), "", "", "", "—", "")
    flow_ratio = r.get("flow_vs_cli_ratio") or r["induce_flow_10k_s"] / r["induce_10k_s"]
    server = r.get("prefect_server_start_s")
    t.add_row(
        "the same as the Prefect flow",
        _ms(r["induce_flow_10k_s"], "s"),
        "",
        "",
        "",
        "—",
        f"{flow_ratio:.2f}x the CLI (server running)"
        + (f"; temporary server start {server:.1f} s, apart" if server is not None else ""),
    )
    notes = [
        f"{r[key]:.0%} {label}"
        for key, label in (
            ("incremental_cpu_ratio", "in CPU time"),
            ("incremental_inprocess_ratio", "in one long-lived process"),
            ("induce_nothing_new_ratio", "for a run that finds nothing new"),
        )
        if r.get(key) is not None
    ]
    t.add_row(
        "incremental run, 1% new",
        f"{r['incremental_ratio']:.0%} of a full run",
        "",
        "",
        "",
        "—",
        "; ".join(notes),
    )
    api = [f"1 client p50 {r['api_search_ms_p50_1']:.1f} ms"]
    if r.get("api_search_ms_p99_8") is not None:
        api.insert(0, f"p99 {r['api_search_ms_p99_8']:.1f} ms, {r['api_search_errors_8']} errors")
    if r.get("api_search_rps_32") is not None:
        api.append(f"32 clients {r['api_search_rps_32']:,.0f} req/s (p99 {r['api_search_ms_p99_32']:.1f} ms)")
    if r.get("api_workers"):
        api.append(f"{r['api_workers']} workers")
    t.add_row(
        "HTTP search, 8 clients",
        f"{r['api_search_rps_8']:,.0f} req/s",
        "",
        "",
        "",
        "no server",
        "; ".join(api),
    )
    if "memharness_skipped" in r:
        t.caption = f"memharness skipped: {r['memharness_skipped']}"
    return t
