"""Charts as SVG made on the server: no script, no chart library, every text escaped.

Every chart names its axes; a chart with nothing to draw says what is missing instead."""

from __future__ import annotations

import colorsys
import math
from collections.abc import Callable, Sequence

from markupsafe import Markup, escape

from flowmem.server.dashboard.clustermap import ClusterMap, Point
from flowmem.server.dashboard.detail import VersionPoint
from flowmem.server.dashboard.views import Bucket

__all__ = ["NOISE", "cluster_colours", "cluster_svg", "learning_svg", "versions_svg"]

NOISE = "#8f959e"
"""Points in no cluster: a grey no cluster colour is (every cluster colour is saturated)."""

_BANDS = ((0.72, 0.44), (0.80, 0.30), (0.62, 0.58))
"""(saturation, lightness) of the three bands cluster colours take in turn."""

_W, _H = 640, 280
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 14, 12, 52
"""The plot area's margins: room for the ticks and the axis titles."""


def _svg(body: str, label: str, *, width: int = _W, height: int = _H) -> Markup:
    return Markup(
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}" '
        f'xmlns="http://www.w3.org/2000/svg">{body}</svg>'
    )


def _empty(text: str) -> Markup:
    return Markup(f'<p class="empty">{escape(text)}</p>')


def _y(frac: float) -> float:
    """The y coordinate of `frac` (0..1) of the plot area's height."""
    return _H - _BOTTOM - frac * (_H - _BOTTOM - _TOP)


def _axes(x_title: str, y_title: str, y_ticks: Sequence[tuple[float, str]]) -> str:
    """Both axes, their titles, and the y ticks as (fraction of the height, text)."""
    bottom, mid_y = _H - _BOTTOM, (_TOP + _H - _BOTTOM) / 2
    parts = [
        f'<line x1="{_LEFT}" y1="{bottom}" x2="{_W - _RIGHT}" y2="{bottom}" class="axis"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{bottom}" class="axis"/>',
        f'<text x="{(_LEFT + _W - _RIGHT) / 2:.0f}" y="{_H - 6}" class="label x" text-anchor="middle">'
        f"{escape(x_title)}</text>",
        f'<text x="14" y="{mid_y:.0f}" class="label y" text-anchor="middle" '
        f'transform="rotate(-90 14 {mid_y:.0f})">{escape(y_title)}</text>',
    ]
    for frac, text in y_ticks:
        y = _y(frac)
        parts.append(
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{escape(text)}</text>'
        )
    return "".join(parts)


def _x_ticks(labels: Sequence[str], xs: Sequence[float]) -> str:
    """Tick labels under the x axis, thinned to at most 12 so they never overlap."""
    every = max(1, math.ceil(len(labels) / 12))
    return "".join(
        f'<text x="{x:.1f}" y="{_H - _BOTTOM + 16}" class="tick" text-anchor="middle">{escape(label)}</text>'
        for i, (label, x) in enumerate(zip(labels, xs, strict=True))
        if i % every == 0 or i == len(labels) - 1
    )


def _count_ticks(top: int) -> list[tuple[float, str]]:
    """Whole-number ticks from 0 to `top` (at most three, never two the same)."""
    values = sorted({0, round(top / 2), top})
    return [(v / top, str(v)) for v in values]


def versions_svg(points: Sequence[VersionPoint]) -> Markup:
    """Bars per version, oldest first: runs served, and of those the successes; a sentence
    instead when no version was ever served."""
    if not points or not any(p.served for p in points):
        return _empty("Never served: no run has been given any version of this workflow yet.")
    top = max(p.served for p in points)
    slot = (_W - _LEFT - _RIGHT - 10) / len(points)
    bar = max(min(slot / 3, 40), 2)
    parts = [_axes("version (the day it was created)", "runs", _count_ticks(top))]
    for i, p in enumerate(points):
        x = _LEFT + 10 + i * slot
        for j, (value, cls) in enumerate(((p.served, "served"), (p.successes, "success"))):
            h = value / top * (_H - _BOTTOM - _TOP)
            parts.append(
                f'<rect x="{x + j * bar:.1f}" y="{_y(0) - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'class="{cls}"><title>{escape(p.label)}: {cls} {value}</title></rect>'
            )
        if not p.served:
            parts.append(f'<text x="{x:.1f}" y="{_y(0) - 4:.1f}" class="tick">not served</text>')
    parts.append(
        _x_ticks([p.label for p in points], [_LEFT + 10 + (i + 1 / 3) * slot for i in range(len(points))])
    )
    return _svg("".join(parts), "served and successful runs per version")


def learning_svg(buckets: Sequence[Bucket], *, x_title: str) -> Markup:
    """Success rate per period of runs served a workflow (solid) and of runs served none
    (dashed); empty when no period has a run with an outcome."""
    if not any(b.served_runs or b.other_runs for b in buckets):
        return Markup("")
    step = (_W - _LEFT - _RIGHT - 20) / max(len(buckets) - 1, 1)
    xs = [_LEFT + 10 + i * step for i in range(len(buckets))]
    ticks = [(f, f"{f:.0%}") for f in (0.0, 0.5, 1.0)]
    parts = [_axes(x_title, "success rate", ticks), _x_ticks([b.tick for b in buckets], xs)]
    for attr, cls in (("served_rate", "served"), ("other_rate", "other")):
        xy = [
            (x, _y(rate), b.label, rate)
            for x, b in zip(xs, buckets, strict=True)
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


def cluster_colours(ids: Sequence[int]) -> dict[int, str]:
    """A colour for each cluster of one agent, no two the same (up to 1,000 clusters): hues
    spread around the wheel in three bands of lightness, neighbouring ids far apart."""
    ordered = sorted(set(ids))
    slots = max(1, math.ceil(len(ordered) / len(_BANDS)))
    stride = next(s for s in range(max(1, round(slots * 0.382)), slots + 1) if math.gcd(s, slots) == 1)
    colours = {}
    for i, cid in enumerate(ordered):
        band, slot = i % len(_BANDS), i // len(_BANDS)
        hue = ((slot * stride) % slots + band / len(_BANDS)) / slots
        saturation, lightness = _BANDS[band]
        r, g, b = colorsys.hls_to_rgb(hue, lightness, saturation)
        colours[cid] = f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
    return colours


_MAP, _MAP_PAD, _MAP_AXIS = 600, 12, 22
"""The map's plot size, the margin inside it, and the room for its axis titles."""


def _circle(p: Point, size: int) -> str:
    cx = _MAP_AXIS + _MAP_PAD + p.x * (size - 2 * _MAP_PAD)
    cy = _MAP_PAD + (1 - p.y) * (size - 2 * _MAP_PAD)
    r = min(4 + 1.3 * (math.sqrt(p.runs) - 1), 9)
    where = "no cluster" if p.cluster is None else f"cluster {p.cluster}"
    runs = "1 run" if p.runs == 1 else f"{p.runs} runs"
    cls = "pt failed" if p.failed == p.runs else "pt"
    return (
        f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" class="{cls}">'
        f"<title>{escape(p.task)} ({where}; {runs}, {p.failed} failed)</title></circle>"
    )


def cluster_svg(found: ClusterMap, colours: dict[int, str], href: Callable[[str], str]) -> Markup:
    """The task texts as circles, coloured by cluster (`colours`; grey: no cluster), one group
    per cluster; a text whose every run failed is a ring, a bigger circle has more runs. A
    cluster with a workflow links to it; each circle's title is its task."""
    if not found.points:
        return Markup("")
    groups: dict[int | None, list[Point]] = {}
    for p in found.points:
        groups.setdefault(p.cluster, []).append(p)
    size = _MAP
    parts = []
    for cid in sorted(groups, key=lambda c: -1 if c is None else c):  # noise below the clusters
        colour = NOISE if cid is None else colours[cid]
        circles = "".join(_circle(p, size) for p in groups[cid])
        wid = groups[cid][0].workflow_id
        if wid is not None:
            circles = f'<a href="{escape(href(wid))}">{circles}</a>'
        kind = "noise" if cid is None else "cluster"
        parts.append(
            f'<g class="{kind}" data-cluster="{"" if cid is None else cid}" fill="{colour}" '
            f'stroke="{colour}">{circles}</g>'
        )
    bottom, left = size, _MAP_AXIS
    parts.append(
        f'<line x1="{left}" y1="{bottom}" x2="{left + size}" y2="{bottom}" class="axis"/>'
        f'<line x1="{left}" y1="0" x2="{left}" y2="{bottom}" class="axis"/>'
        f'<text x="{left + size / 2:.0f}" y="{bottom + 16}" class="label x" text-anchor="middle">'
        "first principal component of the task embeddings →</text>"
        f'<text x="14" y="{size / 2:.0f}" class="label y" text-anchor="middle" '
        f'transform="rotate(-90 14 {size / 2:.0f})">second principal component →</text>'
    )
    label = f"task embeddings of agent {found.agent} by cluster"
    return _svg("".join(parts), label, width=size + left, height=size + _MAP_AXIS)
