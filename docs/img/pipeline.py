"""Draw docs/img/pipeline.svg, the README's picture of flowmem's loop (no dependencies).

Usage (from the repo root): python docs/img/pipeline.py  — tests/test_docs_pipeline.py checks
that the committed SVG is what this script draws.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

OUT = Path(__file__).with_name("pipeline.svg")

BOXES = [
    ("Agents", ["record runs through hooks", "(task, steps, outcome)"]),
    ("Store", ["LanceDB: trajectories,", "scrubbed, deduplicated"]),
    ("Scheduled flows", ["Prefect: embed, cluster,", "induce, learn"]),
    ("Workflow versions", ["{placeholders}, pitfalls,", "tagged runs, rollback"]),
]
W, H, GAP, TOP, LEFT = 190, 78, 46, 20, 10


def svg() -> str:
    """The picture as SVG text."""
    width = LEFT * 2 + len(BOXES) * W + (len(BOXES) - 1) * GAP
    height = TOP + H + 70
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif">',
        '<defs><marker id="a" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#444"/></marker></defs>',
        f'<rect width="{width}" height="{height}" fill="#fff"/>',
    ]
    for i, (title, lines) in enumerate(BOXES):
        x = LEFT + i * (W + GAP)
        parts.append(
            f'<rect x="{x}" y="{TOP}" width="{W}" height="{H}" rx="10" fill="#eef4fb" stroke="#3b6ea5"/>'
        )
        parts.append(
            f'<text x="{x + W / 2}" y="{TOP + 24}" text-anchor="middle" font-size="15" '
            f'font-weight="bold" fill="#1d3d5e">{escape(title)}</text>'
        )
        for j, line in enumerate(lines):
            parts.append(
                f'<text x="{x + W / 2}" y="{TOP + 46 + j * 17}" text-anchor="middle" font-size="12" '
                f'fill="#333">{escape(line)}</text>'
            )
        if i + 1 < len(BOXES):
            y = TOP + H / 2
            parts.append(
                f'<line x1="{x + W}" y1="{y}" x2="{x + W + GAP - 2}" y2="{y}" stroke="#444" '
                'stroke-width="1.6" marker-end="url(#a)"/>'
            )
    first, last = LEFT + W / 2, LEFT + (len(BOXES) - 1) * (W + GAP) + W / 2
    bottom, loop = TOP + H, TOP + H + 34
    parts.append(
        f'<path d="M{last},{bottom} L{last},{loop} L{first},{loop} L{first},{bottom + 2}" fill="none" '
        'stroke="#444" stroke-width="1.6" marker-end="url(#a)"/>'
    )
    parts.append(
        f'<text x="{(first + last) / 2}" y="{loop + 18}" text-anchor="middle" font-size="12" fill="#333">'
        "served back to the agents: search / context, hot-reloaded; outcomes promote or demote "
        "versions</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    OUT.write_text(svg())
    print(OUT)
