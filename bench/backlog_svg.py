"""The curve of ``bench/backlog_scaling.py``: each rate against the backlog, as a fraction of
its rate at the smallest backlog, drawn as a small hand-written SVG (no plotting library, no
network). Each point is labelled with its measured rate; the dashed line is the 0.9 target.

    .venv/bin/python bench/backlog_svg.py < line.json > docs/img/backlog_scaling.svg
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 60, 170, 30, 50
Y_MAX = 1.3
SERIES = (
    ("postgres", "drain_per_s", "Postgres drain", "#1f77b4"),
    ("redis", "drain_per_s", "Redis drain", "#d62728"),
    ("postgres", "enqueue_per_s", "Postgres enqueue", "#2ca02c"),
    ("redis", "enqueue_per_s", "Redis enqueue", "#ff7f0e"),
    ("postgres", "batch_enqueue_per_s", "Postgres batch", "#9467bd"),
)


def _x(size: int, sizes: list[int]) -> float:
    low, high = math.log10(sizes[0]), math.log10(sizes[-1])
    span = (high - low) or 1.0
    return LEFT + (math.log10(size) - low) / span * (WIDTH - LEFT - RIGHT)


def _y(fraction: float) -> float:
    return TOP + (1 - min(fraction, Y_MAX) / Y_MAX) * (HEIGHT - TOP - BOTTOM)


def _label(size: int) -> str:
    return f"{size // 1_000_000}M" if size >= 1_000_000 else f"{size // 1000}k"


def draw(line: dict[str, Any]) -> str:
    sizes: list[int] = line["sizes"]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="18" font-size="13">Rate against backlog, as a fraction of the '
        f"rate at {_label(sizes[0])}</text>",
        f'<text x="{WIDTH - 10}" y="18" text-anchor="end" fill="#888">{line["at"]}</text>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0, 1.25):
        y = _y(tick)
        out.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#eee"/>'
        )
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:g}</text>')
    target = _y(0.9)
    out.append(
        f'<line x1="{LEFT}" y1="{target:.1f}" x2="{WIDTH - RIGHT}" y2="{target:.1f}" '
        'stroke="#888" stroke-dasharray="4 3"/>'
    )
    out.append(f'<text x="{WIDTH - RIGHT + 4}" y="{target + 4:.1f}" fill="#888">target 0.9</text>')
    for size in sizes:
        x = _x(size, sizes)
        out.append(
            f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">'
            f"{_label(size)}</text>"
        )
    out.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 12}" text-anchor="middle">'
        "ready rows behind the measured window (log scale)</text>"
    )
    for index, (driver, figure, name, colour) in enumerate(SERIES):
        rates = [line[driver][f"ready_{size}"][figure] for size in sizes]
        base = rates[0] or 1.0
        points = [(_x(s, sizes), _y(r / base)) for s, r in zip(sizes, rates, strict=True)]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for (x, y), rate in zip(points, rates, strict=True):
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>')
            out.append(
                f'<text x="{x + 4:.1f}" y="{y - 5 - 9 * (index % 2):.1f}" fill="{colour}" '
                f'font-size="9">{rate:,.0f}/s</text>'
            )
        legend_y = TOP + 16 * index
        out.append(
            f'<line x1="{WIDTH - RIGHT + 10}" y1="{legend_y + 40}" x2="{WIDTH - RIGHT + 30}" '
            f'y2="{legend_y + 40}" stroke="{colour}" stroke-width="2"/>'
        )
        out.append(f'<text x="{WIDTH - RIGHT + 34}" y="{legend_y + 44}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(draw(json.loads(sys.stdin.read().strip().splitlines()[-1])))
