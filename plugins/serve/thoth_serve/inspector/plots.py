"""Inline SVG line plots and the entity graph: markup built here with every label escaped, no script."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from html import escape

from markupsafe import Markup

WIDTH, HEIGHT, PAD = 600, 200, 36


def cumulative(times: Iterable[float]) -> list[tuple[float, float]]:
    """(time, how many records existed by then) for each record's `at`, oldest first."""
    ordered = sorted(t for t in times if isinstance(t, int | float) and math.isfinite(t) and t > 0)
    return [(t, float(n)) for n, t in enumerate(ordered, start=1)]


def _stamp(at: float, span: float) -> str:
    return time.strftime("%m-%d %H:%M" if span >= 3600 else "%H:%M:%S", time.localtime(at))


def _number(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.2g}"


def scale(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points in the plot's box: x left to right, y bottom (the smallest, or 0) to top."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(0.0, min(ys)), max(ys)
    dx, dy = (x1 - x0) or 1.0, (y1 - y0) or 1.0
    inner_w, inner_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD
    return [
        (round(PAD + (x - x0) / dx * inner_w, 1), round(HEIGHT - PAD - (y - y0) / dy * inner_h, 1)) for x, y in points
    ]


def line_plot(points: Sequence[tuple[float, float]], *, title: str, unit: str) -> Markup:
    """A line plot of (unix time, value) points with its title as the accessible name; a note when empty."""
    label = escape(title)
    if not points:
        return Markup(f'<p class="empty">{label}: no samples yet.</p>')
    points = sorted(points)
    drawn = " ".join(f"{x},{y}" for x, y in scale(points))
    low, high = min(0.0, min(p[1] for p in points)), max(p[1] for p in points)
    last = points[-1][1]
    span = points[-1][0] - points[0][0]
    summary = escape(f"{title}: {len(points)} samples, latest {_number(last)} {unit}, highest {_number(high)} {unit}")
    bottom = HEIGHT - PAD
    return Markup(
        f'<svg class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{summary}">'
        f"<title>{summary}</title>"
        f'<line class="axis" x1="{PAD}" y1="{bottom}" x2="{WIDTH - PAD}" y2="{bottom}"/>'
        f'<line class="axis" x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{bottom}"/>'
        f'<polyline class="series" points="{drawn}"/>'
        f'<text x="{PAD - 4}" y="{PAD + 4}" text-anchor="end">{escape(_number(high))}</text>'
        f'<text x="{PAD - 4}" y="{bottom}" text-anchor="end">{escape(_number(low))}</text>'
        f'<text x="{PAD}" y="{HEIGHT - 8}">{escape(_stamp(points[0][0], span))}</text>'
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - 8}" text-anchor="end">{escape(_stamp(points[-1][0], span))}</text>'
        f'<text x="{WIDTH - PAD}" y="{PAD - 12}" text-anchor="end">{escape(unit)}</text>'
        "</svg>"
    )


def graph(nodes: Sequence[str], edges: Sequence[tuple[str, str, str]], *, title: str) -> Markup:
    """Nodes on a circle joined by labelled edges (source, relation, target); every label escaped.

    Targets that are not among `nodes` (plain values: a city, a name) are drawn as hollow points.
    """
    names = list(dict.fromkeys([*nodes, *(e[0] for e in edges), *(e[2] for e in edges)]))
    if not names:
        return Markup(f'<p class="empty">{escape(title)}: no entities yet.</p>')
    size, radius = 420, 150
    centre = size / 2
    at = {
        name: (
            round(centre + radius * math.cos(2 * math.pi * i / len(names) - math.pi / 2), 1),
            round(centre + radius * math.sin(2 * math.pi * i / len(names) - math.pi / 2), 1),
        )
        for i, name in enumerate(names)
    }
    parts = [
        f'<svg class="graph" viewBox="0 0 {size} {size}" role="img" '
        f'aria-label="{escape(title)}: {len(names)} entities, {len(edges)} links"><title>{escape(title)}</title>'
    ]
    for source, relation, target in edges:
        (x1, y1), (x2, y2) = at[source], at[target]
        parts.append(f'<line class="edge" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}"/>')
        parts.append(
            f'<text class="relation" x="{round((x1 + x2) / 2, 1)}" y="{round((y1 + y2) / 2, 1)}">'
            f"{escape(relation[:24])}</text>"
        )
    for name, (x, y) in at.items():
        kind = "node" if name in nodes else "value"
        parts.append(f'<circle class="{kind}" cx="{x}" cy="{y}" r="6"/>')
        parts.append(f'<text class="name" x="{x}" y="{y - 10}" text-anchor="middle">{escape(name[:28])}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
