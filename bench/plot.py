"""Line charts as plain SVG, so the benches need no plotting library."""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
W, H = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 40, 50


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        out = []
        exp = math.floor(math.log10(lo))
        while 10 ** exp <= hi * 1.0001:
            for m in (1, 2, 5):
                v = m * 10 ** exp
                if lo * 0.9999 <= v <= hi * 1.0001:
                    out.append(v)
            exp += 1
        return out
    raw = (hi - lo) / 5 or 1.0
    step = 10 ** math.floor(math.log10(raw))
    step = next(s * step for s in (1, 2, 5, 10) if s * step >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def _label(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 10 or v == int(v) else f"{v:g}"


def line_chart(path: Path, title: str, xlabel: str, ylabel: str,
               series: dict[str, list[tuple[float, float]]], *, log_y: bool = False,
               hline: tuple[float, str] | None = None) -> None:
    """Write one chart: each series a polyline with dots; ``hline`` a dashed target."""
    points = [p for s in series.values() for p in s if p[1] == p[1]]
    if not points:
        return
    xs = [x for x, _ in points]
    ys = [y for _, y in points] + ([hline[0]] if hline else [])
    x0, x1 = 0.0, max(xs) * 1.05
    if log_y:
        y0 = 10 ** math.floor(math.log10(max(min(y for y in ys if y > 0), 1e-3)))
        y1 = 10 ** math.ceil(math.log10(max(ys)))
    else:
        y0, y1 = 0.0, max(ys) * 1.1 or 1.0
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        if log_y:
            y = max(y, y0)
            return TOP + ph - (math.log10(y) - math.log10(y0)) / \
                (math.log10(y1) - math.log10(y0)) * ph
        return TOP + ph - (y - y0) / (y1 - y0) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{escape(title)}</text>']
    for t in _ticks(y0, y1, log_y):
        y = sy(t)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" '
                   f'stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_label(t)}</text>')
    for t in _ticks(x0, x1, False):
        x = sx(t)
        out.append(f'<line x1="{x:.1f}" y1="{TOP + ph}" x2="{x:.1f}" y2="{TOP + ph + 4}" '
                   f'stroke="#333"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + ph + 18}" text-anchor="middle">'
                   f'{_label(t)}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" '
               f'stroke="#333"/>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 10}" text-anchor="middle">'
               f'{escape(xlabel)}</text>')
    out.append(f'<text x="16" y="{TOP + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {TOP + ph / 2})">{escape(ylabel)}</text>')
    if hline:
        y = sy(hline[0])
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" '
                   f'stroke="#888" stroke-dasharray="6 4"/>')
        out.append(f'<text x="{W - RIGHT - 4}" y="{y - 4:.1f}" text-anchor="end" '
                   f'fill="#555">{escape(hline[1])}</text>')
    for i, (name, pts) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        pts = sorted(p for p in pts if p[1] == p[1])
        if not pts:
            continue
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" '
                   f'stroke-width="2"/>')
        out += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{color}"/>'
                for x, y in pts]
        ly = TOP + 16 + 16 * i
        out.append(f'<rect x="{LEFT + 10}" y="{ly - 9}" width="12" height="3" fill="{color}"/>')
        out.append(f'<text x="{LEFT + 28}" y="{ly - 4}">{escape(name)}</text>')
    out.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")
