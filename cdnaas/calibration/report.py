"""A calibrated QoE curve beside the model it replaces: text rows and an SVG chart."""
from xml.sax.saxutils import escape

from cdnaas.common.charts import sparkline
from cdnaas.planning import models

WIDTH, HEIGHT, MARGIN = 640, 320, 48
COLOURS = ("#d62728", "#1f77b4")


def curves(calibrated, reference, reference_kind="paper"):
    """``[(label, Model)]``: the calibrated model (a document) and the reference (a Model),
    labelled ``reference_kind`` (``paper``: a shipped model; ``in use``: the one the
    flavor's template names, an earlier calibration say)."""
    ours = models.parse(calibrated, origin="calibrated")
    return [(f"calibrated ({ours.name})", ours), (f"{reference_kind} ({reference.name})", reference)]


def span(pairs):
    """Viewers per vCPU from 0 to a little past the furthest last point of any curve."""
    return 1.15 * max(model.qoe.xs[-1] for _label, model in pairs)


def rows(pairs, width=48):
    """Per curve: a sparkline of MOS over the same viewer axis, its last load at MOS 3.6
    (the paper's 'acceptable') and its best MOS."""
    top = span(pairs)
    xs = [top * (i + 0.5) / width for i in range(width)]
    out = []
    for label, model in pairs:
        acceptable = model.max_load_for_mos(3.6)
        out.append({"curve": label,
                    "chart": sparkline([model.mos(x) for x in xs], 1.0, 5.0),
                    "best_mos": round(model.best_mos, 2),
                    "viewers_at_mos_3.6": None if acceptable is None else round(acceptable),
                    "last_point": round(model.qoe.xs[-1])})
    return out, round(top)


def svg(pairs, title):
    """An SVG line chart of MOS (1-5) against viewers per vCPU, one line per curve,
    measured points marked."""
    top = span(pairs)
    plot_w, plot_h = WIDTH - 2 * MARGIN, HEIGHT - 2 * MARGIN

    def x(value):
        return MARGIN + plot_w * value / top

    def y(mos):
        return MARGIN + plot_h * (5.0 - mos) / 4.0

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
             f'<text x="{MARGIN}" y="20" font-size="13">{escape(title)}</text>']
    for mos in (1, 2, 3, 4, 5):
        parts.append(f'<line x1="{MARGIN}" x2="{WIDTH - MARGIN}" y1="{y(mos):.1f}" '
                     f'y2="{y(mos):.1f}" stroke="#ddd"/>'
                     f'<text x="{MARGIN - 8}" y="{y(mos) + 4:.1f}" text-anchor="end">{mos}</text>')
    for i in range(6):
        value = top * i / 5
        parts.append(f'<text x="{x(value):.1f}" y="{HEIGHT - MARGIN + 16}" '
                     f'text-anchor="middle">{value:,.0f}</text>')
    parts.append(f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" text-anchor="middle">'
                 'concurrent HD viewers per vCPU</text>'
                 f'<text x="14" y="{HEIGHT / 2}" transform="rotate(-90 14 {HEIGHT / 2})" '
                 'text-anchor="middle">MOS</text>')
    for index, (label, model) in enumerate(pairs):
        colour = COLOURS[index % len(COLOURS)]
        points = [(0.0, model.qoe.ys[0])] + list(zip(model.qoe.xs, model.qoe.ys))
        points.append((model.qoe.xs[-1], models.MOS_FLOOR))  # beyond the last point: the floor
        path = " ".join(f"{x(px):.1f},{y(py):.1f}" for px, py in points)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        parts += [f'<circle cx="{x(px):.1f}" cy="{y(py):.1f}" r="3" fill="{colour}"/>'
                  for px, py in zip(model.qoe.xs, model.qoe.ys)]
        parts.append(f'<text x="{WIDTH - MARGIN}" y="{MARGIN + 14 * index}" text-anchor="end" '
                     f'fill="{colour}">{escape(label)}</text>')
    parts.append("</svg>\n")
    return "\n".join(parts)
