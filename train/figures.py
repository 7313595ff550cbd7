"""Reliability diagrams as self-contained SVG files (no plotting library: Debian's python3-matplotlib is
not among the trainer's dependencies, and a diagram is a few lines and circles).

A diagram plots, per method, each non-empty confidence bin's mean top-label confidence (x) against its
accuracy (y); the diagonal is perfect calibration, points below it are overconfident. A point's area
follows the share of rows in its bin. Input: {series name: list of metrics.reliability_bins dicts}.
"""

from xml.sax.saxutils import escape

SIZE, MARGIN = 360, 48  # plot square and margin, in SVG pixels
COLOURS = ("#1b6ca8", "#d1495b", "#2e933c", "#8c5e9e", "#e08e0b")


def _x(value):
    return MARGIN + value * SIZE


def _y(value):
    return MARGIN + (1.0 - value) * SIZE


def reliability_svg(title, series):
    """The SVG text of one reliability diagram: axes, the diagonal, one polyline + dots per series."""
    width, height = SIZE + 2 * MARGIN + 190, SIZE + 2 * MARGIN
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{MARGIN}" y="{MARGIN - 18}" font-size="14">{escape(title)}</text>',
           f'<rect x="{MARGIN}" y="{MARGIN}" width="{SIZE}" height="{SIZE}" fill="none" stroke="#444"/>',
           f'<line x1="{_x(0)}" y1="{_y(0)}" x2="{_x(1)}" y2="{_y(1)}" stroke="#999" stroke-dasharray="4 4"/>']
    for tick in range(0, 11, 2):
        v = tick / 10
        out.append(f'<text x="{_x(v)}" y="{_y(0) + 16}" text-anchor="middle">{v:.1f}</text>')
        out.append(f'<text x="{_x(0) - 6}" y="{_y(v) + 4}" text-anchor="end">{v:.1f}</text>')
        out.append(f'<line x1="{_x(0)}" y1="{_y(v)}" x2="{_x(1)}" y2="{_y(v)}" stroke="#eee"/>')
    out.append(f'<text x="{_x(0.5)}" y="{_y(0) + 34}" text-anchor="middle">mean confidence (top label)</text>')
    out.append(f'<text transform="translate({_x(0) - 34},{_y(0.5)}) rotate(-90)" text-anchor="middle">'
               'accuracy</text>')
    for i, (name, bins) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        points = " ".join(f"{_x(b['confidence']):.1f},{_y(b['accuracy']):.1f}" for b in bins)
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for b in bins:
            radius = 2.0 + 10.0 * b["share"] ** 0.5
            out.append(f'<circle cx="{_x(b["confidence"]):.1f}" cy="{_y(b["accuracy"]):.1f}" r="{radius:.1f}" '
                       f'fill="{colour}" fill-opacity="0.35" stroke="{colour}"/>')
        y = MARGIN + 12 + 20 * i
        out.append(f'<line x1="{SIZE + MARGIN + 16}" y1="{y - 4}" x2="{SIZE + MARGIN + 36}" y2="{y - 4}" '
                   f'stroke="{colour}" stroke-width="3"/>')
        out.append(f'<text x="{SIZE + MARGIN + 42}" y="{y}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_reliability_svg(path, title, series):
    with open(path, "w", encoding="utf-8") as f:
        f.write(reliability_svg(title, series))
