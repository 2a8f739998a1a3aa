"""Small charts drawn as inline SVG on the server side: no plotting library, no script, nothing fetched."""

from __future__ import annotations

from html import escape

KEPT, DROPPED, OTHER = "#3b7dd8", "#d9534f", "#9aa5b1"


def _num(v: float) -> str:
    if v >= 1e9:
        return f"{v / 1e9:.1f}G"
    if v >= 1e6:
        return f"{v / 1e6:.1f}M"
    if v >= 1e4:
        return f"{v / 1e3:.0f}k"
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:.3g}"


def funnel(stages: list[dict], *, width: int = 760) -> str:
    """One row per stage: the rows it kept (blue) and dropped (red), scaled to the largest input."""
    if not stages:
        return ""
    top = max(max(s["rows_in"], s["rows_out"]) for s in stages) or 1
    label_w, row_h, bar_w = 190, 22, width - 190 - 90
    rows = []
    for k, s in enumerate(stages):
        y = k * row_h
        kept_w = bar_w * s["rows_out"] / top
        drop_w = bar_w * max(0, s["rows_in"] - s["rows_out"]) / top
        rows.append(
            f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{escape(s["name"])}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{kept_w:.1f}" height="{row_h - 6}" fill="{KEPT}">'
            f'<title>{escape(s["name"])}: {s["rows_out"]:,} kept</title></rect>'
            f'<rect x="{label_w + kept_w:.1f}" y="{y + 3}" width="{drop_w:.1f}" height="{row_h - 6}" '
            f'fill="{DROPPED}"><title>{escape(s["name"])}: {s["rows_in"] - s["rows_out"]:,} dropped</title></rect>'
            f'<text x="{label_w + kept_w + drop_w + 6:.1f}" y="{y + 15}">{_num(s["rows_out"])}</text>')
    height = len(stages) * row_h + 4
    return (f'<svg class="chart" role="img" aria-label="funnel" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}">{"".join(rows)}</svg>')


def bars(items: list[tuple[str, float]], *, width: int = 860, color: str = DROPPED, label_w: int = 380) -> str:
    """Horizontal bars, one per (label, value), in the order given."""
    if not items:
        return ""
    top = max(v for _, v in items) or 1
    row_h, bar_w = 20, width - label_w - 70
    parts = []
    for k, (label, value) in enumerate(items):
        y = k * row_h
        w = bar_w * value / top
        short = label if len(label) <= 56 else label[:53] + "..."
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{escape(short)}</text>'
                     f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" fill="{color}">'
                     f'<title>{escape(label)}: {value:,}</title></rect>'
                     f'<text x="{label_w + w + 6:.1f}" y="{y + 14}">{_num(value)}</text>')
    height = len(items) * row_h + 4
    return (f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
            f'{"".join(parts)}</svg>')


def histogram(bins: list[tuple[float, float, int]], *, compare: list[tuple[float, float, int]] | None = None,
              width: int = 360, height: int = 150) -> str:
    """Vertical bars over numeric bins; `compare` (same bins) drawn beside each bar in red, each series scaled
    to its own total so their shapes compare."""
    if not bins:
        return '<p class="muted">no values</p>'
    pad_l, pad_b, plot_h = 8, 30, height - 38
    n = len(bins)
    slot = (width - 2 * pad_l) / n
    series = [(bins, KEPT)] + ([(compare, DROPPED)] if compare else [])
    parts = []
    for j, (data, color) in enumerate(series):
        total = sum(c for _, _, c in data) or 1
        top = max(c / total for _, _, c in data) or 1
        w = slot / len(series) - 1
        for k, (lo, hi, c) in enumerate(data):
            h = plot_h * (c / total) / top
            x = pad_l + k * slot + j * (w + 1)
            parts.append(f'<rect x="{x:.1f}" y="{plot_h - h + 4:.1f}" width="{max(w, 0.5):.1f}" height="{h:.1f}" '
                         f'fill="{color}"><title>{_num(lo)}–{_num(hi)}: {c:,}</title></rect>')
    lo, hi = bins[0][0], bins[-1][1]
    parts.append(f'<text x="{pad_l}" y="{height - pad_b + 16}">{_num(lo)}</text>'
                 f'<text x="{width - pad_l}" y="{height - pad_b + 16}" text-anchor="end">{_num(hi)}</text>')
    return (f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
            f'{"".join(parts)}</svg>')
