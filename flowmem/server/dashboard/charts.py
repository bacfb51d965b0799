"""Charts as SVG made on the server: no script, no chart library, every text escaped."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from markupsafe import Markup, escape

from flowmem.server.dashboard.detail import VersionPoint
from flowmem.server.dashboard.views import Bucket, Point

__all__ = ["PALETTE", "cluster_svg", "learning_svg", "versions_svg"]

PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
    "#393b79",
)
"""Cluster colours, cycled."""

_W, _H, _PAD = 640, 260, 40


def _svg(body: str, label: str, *, width: int = _W, height: int = _H) -> Markup:
    return Markup(
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}" '
        f'xmlns="http://www.w3.org/2000/svg">{body}</svg>'
    )


def _axes(y_max: float, y_label: str, fmt: Callable[[float], str]) -> str:
    parts = [
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - 10}" y2="{_H - _PAD}" class="axis"/>',
        f'<line x1="{_PAD}" y1="10" x2="{_PAD}" y2="{_H - _PAD}" class="axis"/>',
        f'<text x="4" y="14" class="label">{escape(y_label)}</text>',
    ]
    for frac in (0.0, 0.5, 1.0):
        y = _H - _PAD - frac * (_H - _PAD - 20)
        parts.append(
            f'<text x="{_PAD - 4}" y="{y + 4:.1f}" class="tick" text-anchor="end">{fmt(frac * y_max)}</text>'
        )
    return "".join(parts)


def versions_svg(points: Sequence[VersionPoint]) -> Markup:
    """Bars per version, oldest first: runs served, and of those the successes."""
    if not points:
        return Markup("")
    top = max(max(p.served for p in points), 1)
    slot = (_W - _PAD - 20) / len(points)
    bar = max(min(slot / 3, 40), 2)
    parts = [_axes(top, "runs served", lambda v: f"{v:.0f}")]
    for i, p in enumerate(points):
        x = _PAD + 10 + i * slot
        for j, (value, cls) in enumerate(((p.served, "served"), (p.successes, "success"))):
            h = value / top * (_H - _PAD - 20)
            parts.append(
                f'<rect x="{x + j * bar:.1f}" y="{_H - _PAD - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'class="{cls}"><title>{escape(p.label)}: {cls} {value}</title></rect>'
            )
        parts.append(f'<text x="{x:.1f}" y="{_H - _PAD + 16}" class="tick">{escape(p.label)}</text>')
    return _svg("".join(parts), "served and successful runs per version")


def learning_svg(buckets: Sequence[Bucket]) -> Markup:
    """Success rate per period of runs served a workflow (solid) and of runs served none (dashed)."""
    if not buckets:
        return Markup("")
    step = (_W - _PAD - 30) / max(len(buckets) - 1, 1)
    parts = [_axes(1.0, "success rate", lambda v: f"{v:.1f}")]
    for attr, cls in (("served_rate", "served"), ("other_rate", "other")):
        xy = [
            (_PAD + 10 + i * step, _H - _PAD - rate * (_H - _PAD - 20), b.label, rate)
            for i, b in enumerate(buckets)
            if (rate := getattr(b, attr)) is not None
        ]
        if len(xy) > 1:
            line = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in xy)
            parts.append(f'<polyline points="{line}" class="line {cls}"/>')
        for x, y, label, rate in xy:
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" class="{cls}">'
                f"<title>{escape(label)}: {cls} {rate:.2f}</title></circle>"
            )
    return _svg("".join(parts), "success rate of runs served a workflow and of runs served none")


def cluster_svg(points: Sequence[Point], href: Callable[[str], str]) -> Markup:
    """The runs as circles coloured by cluster (grey: no cluster); failed runs drawn as rings.
    Each circle's title is its task; a circle whose cluster has a workflow links to it."""
    size, pad = 600, 12
    parts = []
    for p in points:
        colour = "#bbbbbb" if p.cluster is None else PALETTE[p.cluster % len(PALETTE)]
        cx, cy = pad + p.x * (size - 2 * pad), pad + (1 - p.y) * (size - 2 * pad)
        paint = f'fill="none" stroke="{colour}" stroke-width="2"' if p.failed else f'fill="{colour}"'
        outcome = "failed" if p.failed else "ok"
        cluster = "no cluster" if p.cluster is None else f"cluster {p.cluster}"
        circle = (
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" {paint} class="pt {outcome}" '
            f'data-cluster="{"" if p.cluster is None else p.cluster}">'
            f"<title>{escape(p.task)} ({cluster}, {outcome})</title></circle>"
        )
        if p.workflow_id is not None:
            circle = f'<a href="{escape(href(p.workflow_id))}">{circle}</a>'
        parts.append(circle)
    return _svg("".join(parts), "task embeddings by cluster", width=size, height=size)
