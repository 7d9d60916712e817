"""Static SVG drawings of the report's plotly figures, for the HTML report. Pure: no I/O, no JavaScript.

The HTML report must work offline and stay small; plotly.js alone is about 4.8 MB, so the report draws the
same figures (:mod:`mcqaudit.plots`, which the dashboard shows interactively) as inline SVG: grouped bars
and markers with error bars on categorical axes, reference ticks, horizontal lines, and heatmap panels.
Hover text becomes each mark's SVG ``<title>`` (a tooltip). Only what those figures use is supported.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from mcqaudit.formatting import short_label

PALETTE = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880")
W, H = 760, 340
ML, MR, MT, MB = 60, 20, 56, 60


def _t(s: object) -> str:
    """Escape for SVG; labels arrive entity-escaped for plotly.js (plots._txt), so unescape first."""
    return html.escape(html.unescape(str(s)))


def _lines(s: object) -> str:
    """A plotly hover text's ``<br>`` as the line break of an SVG tooltip."""
    return str(s).replace("<br>", "\n")


def _num(x: float) -> str:
    return f"{x:.1f}"


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + k * step, 10) for k in range(int((hi - first) / step + 1e-9) + 1)]


def _shown(layout: Mapping[str, Any], axis: str) -> dict[str, str]:
    """Category -> the label ``axis`` shows for it (``tickvals`` / ``ticktext``: a long name cut), where set."""
    ax = layout.get(axis) or {}
    return {str(v): str(t) for v, t in zip(ax.get("tickvals") or [], ax.get("ticktext") or [], strict=False)}


def _title(layout: Mapping[str, Any]) -> str:
    t = layout.get("title")
    return str(t.get("text", "") if isinstance(t, Mapping) else t or "")


def figure_svg(fig: Any) -> str:
    """An ``<svg>`` element drawing a plotly figure of :mod:`mcqaudit.plots`."""
    spec = fig.to_plotly_json() if hasattr(fig, "to_plotly_json") else dict(fig)
    data: list[dict[str, Any]] = [dict(d) for d in spec.get("data", [])]
    layout: dict[str, Any] = dict(spec.get("layout", {}))
    if any(d.get("type") == "heatmap" for d in data):
        return _heatmaps(data, layout)
    if any(d.get("orientation") == "h" for d in data):
        return _forest(data, layout)
    return _categorical(data, layout)


def _svg(body: list[str], title: str, height: int = H) -> str:
    # a title wider than the drawing (~8 px a character at 14 px, bold) in a smaller font, down to 10 px
    size = max(10.0, min(14.0, 14 * (W - 20) / (8 * max(len(html.unescape(title)), 1))))
    return (
        f'<svg viewBox="0 0 {W} {height}" width="100%" '
        f'style="max-width:{W}px" role="img" aria-label="{_t(title)}" font-family="system-ui,sans-serif" '
        f'font-size="12"><text x="{W / 2}" y="22" text-anchor="middle" font-size="{size:g}" font-weight="600">'
        f"{_t(title)}</text>" + "".join(body) + "</svg>"
    )


def _err(d: Mapping[str, Any], k: int) -> tuple[float | None, float | None]:
    e = d.get("error_y") or {}
    plus, minus = e.get("array"), e.get("arrayminus")
    p = plus[k] if plus is not None and k < len(plus) else None
    m = minus[k] if minus is not None and k < len(minus) else p
    return p, m


def _base(d: Mapping[str, Any], k: int) -> float:
    """Where bar ``k`` of a series starts: its ``base`` (a bar stacked on another), else 0."""
    b = d.get("base")
    if isinstance(b, Sequence) and not isinstance(b, str):
        v = b[k] if k < len(b) else None
        return float(v) if v is not None else 0.0
    return float(b) if isinstance(b, int | float) else 0.0


def _slots(series: list[dict[str, Any]]) -> tuple[list[int], int]:
    """Each series' place within a category, and how many places: series that share an ``offsetgroup``
    share a place (a stack, with ``base``), every other series has its own."""
    keys = [
        str(d.get("offsetgroup")) if d.get("offsetgroup") is not None else f"#{i}" for i, d in enumerate(series)
    ]
    order = list(dict.fromkeys(keys))
    return [order.index(k) for k in keys], max(len(order), 1)


def _categorical(data: list[dict[str, Any]], layout: Mapping[str, Any]) -> str:
    title = _title(layout)
    cats: list[str] = []
    for d in data:
        for x in d.get("x") or []:
            if str(x) not in cats:
                cats.append(str(x))
    if not cats:
        return _svg(
            [f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" fill="#666">no data</text>'], title, 80
        )
    ticks_ = [
        d
        for d in data
        if d.get("type") == "scatter" and "line-ew" in str((d.get("marker") or {}).get("symbol", ""))
    ]
    series = [d for d in data if d not in ticks_]
    lines = [s for s in layout.get("shapes") or [] if s.get("type") == "line" and s.get("y0") == s.get("y1")]
    vals: list[float] = [0.0]
    for d in data:
        for k, y in enumerate(d.get("y") or []):
            if y is None:
                continue
            p, m = _err(d, k)
            top = y + _base(d, k)
            vals += [top + (p or 0.0), top - (m or 0.0)]
    vals += [float(s["y0"]) for s in lines]
    yr = (layout.get("yaxis") or {}).get("range")
    lo, hi = (float(yr[0]), float(yr[1])) if yr else (min(vals), max(vals))
    if not yr:
        pad = (hi - lo) * 0.08 or 1.0
        lo, hi = (lo - pad if lo < 0 else lo), hi + pad
    pw, ph = W - ML - MR, H - MT - MB

    def Y(v: float) -> float:
        return MT + ph * (1 - (min(max(v, lo), hi) - lo) / ((hi - lo) or 1.0))

    body: list[str] = []
    for tv in _ticks(lo, hi):
        body.append(f'<line x1="{ML}" x2="{W - MR}" y1="{_num(Y(tv))}" y2="{_num(Y(tv))}" stroke="#e5e9f0"/>'
                    f'<text x="{ML - 6}" y="{_num(Y(tv) + 4)}" text-anchor="end" fill="#444">{tv:g}</text>')  # fmt: skip
    ytitle = (layout.get("yaxis") or {}).get("title")
    ytext = ytitle.get("text") if isinstance(ytitle, Mapping) else ytitle
    if ytext:
        body.append(f'<text transform="translate(14 {MT + ph / 2}) rotate(-90)" text-anchor="middle" '
                    f'fill="#444">{_t(ytext)}</text>')  # fmt: skip
    slot = pw / len(cats)
    place, n = _slots(series)
    bw = slot * 0.8 / n
    body += _category_labels(cats, _shown(layout, "xaxis"), slot)
    for si, d in enumerate(series):
        color = ((d.get("marker") or {}).get("color") if isinstance((d.get("marker") or {}).get("color"), str)
                 else PALETTE[si % len(PALETTE)])  # fmt: skip
        xs, ys, hov = d.get("x") or [], d.get("y") or [], d.get("hovertext") or []
        for k, (x, y) in enumerate(zip(xs, ys, strict=False)):
            if y is None:
                continue
            cx = ML + slot * (cats.index(str(x)) + 0.5) - slot * 0.4 + bw * (place[si] + 0.5)
            tip = f"<title>{_t(d.get('name', ''))} {_t(x)}: {_t(_lines(hov[k] if k < len(hov) else y))}</title>"
            b0 = _base(d, k)
            top = y + b0
            if d.get("type") == "bar":
                y0, y1 = Y(b0 if b0 else (0.0 if lo <= 0 <= hi else lo)), Y(top)
                body.append(f'<rect x="{_num(cx - bw / 2)}" y="{_num(min(y0, y1))}" width="{_num(bw * 0.92)}" '
                            f'height="{_num(abs(y1 - y0))}" fill="{color}">{tip}</rect>')  # fmt: skip
                body += _bar_label(d, k, cx, (y0 + y1) / 2, abs(y1 - y0))
            else:
                body.append(f'<circle cx="{_num(cx)}" cy="{_num(Y(y))}" r="5" fill="{color}">{tip}</circle>')
            p, m = _err(d, k)
            if p is not None and m is not None:
                a, b = Y(top + p), Y(top - m)
                body.append(f'<path d="M{_num(cx)} {_num(a)}V{_num(b)}M{_num(cx - 4)} {_num(a)}h8M{_num(cx - 4)} '
                            f'{_num(b)}h8" stroke="#333" fill="none"/>')  # fmt: skip
    for d in ticks_:
        for x, y in zip(d.get("x") or [], d.get("y") or [], strict=False):
            if y is not None and str(x) in cats:
                cx = ML + slot * (cats.index(str(x)) + 0.5)
                body.append(f'<line x1="{_num(cx - slot * 0.42)}" x2="{_num(cx + slot * 0.42)}" y1="{_num(Y(y))}" '
                            f'y2="{_num(Y(y))}" stroke="#000" stroke-width="2"><title>{_t(d.get("name", ""))}: '
                            f"{y:.1f}</title></line>")  # fmt: skip
    for s in lines:
        yv = Y(float(s["y0"]))
        color = (s.get("line") or {}).get("color", "grey")
        body.append(f'<line x1="{ML}" x2="{W - MR}" y1="{_num(yv)}" y2="{_num(yv)}" stroke="{_t(color)}" '
                    'stroke-dasharray="3 3"/>')  # fmt: skip
    for a in layout.get("annotations") or []:
        if a.get("text") and a.get("y") is not None and a.get("yref", "y") == "y":
            body.append(f'<text x="{W - MR - 4}" y="{_num(Y(float(a["y"])) - 4)}" text-anchor="end" '
                        f'fill="#666">{_t(a["text"])}</text>')  # fmt: skip
    legend, extra = _legend(series, ticks_, H)
    return _svg(body + legend, title, int(H + extra))


def _category_labels(cats: list[str], shown: Mapping[str, str], slot: float) -> list[str]:
    """The categories' labels under the plot (a long name as the figure cuts it, whole in its tooltip),
    slanted where they would overlap."""
    labels = [shown.get(c, c) for c in cats]
    tilt = max(len(html.unescape(c)) for c in labels) * 6.5 > slot
    out: list[str] = []
    for c, (cat, label) in enumerate(zip(cats, labels, strict=True)):
        cx = ML + slot * (c + 0.5)
        whole = f"<title>{_t(cat)}</title>" if label != cat else ""
        if tilt:
            out.append(
                f'<text transform="translate({_num(cx)} {H - MB + 12}) rotate(-18)" text-anchor="end" '
                f'fill="#444" font-size="10">{whole}{_t(label)}</text>'
            )
        else:
            out.append(
                f'<text x="{_num(cx)}" y="{H - MB + 16}" text-anchor="middle" fill="#444">{whole}{_t(label)}</text>'
            )
    return out


def _bar_label(d: Mapping[str, Any], k: int, cx: float, cy: float, height: float) -> list[str]:
    """A bar's ``text`` (a count, "12 of 40"), inside the bar when it is tall enough, else above it."""
    text = d.get("text")
    label = text[k] if isinstance(text, Sequence) and not isinstance(text, str) and k < len(text) else None
    if not label:
        return []
    y = cy + 4 if height >= 16 else cy - height / 2 - 4
    return [
        f'<text x="{_num(cx)}" y="{_num(y)}" text-anchor="middle" font-size="10" fill="#111">{_t(label)}</text>'
    ]


def _legend(series: list[dict[str, Any]], ticks_: list[dict[str, Any]], bottom: float) -> tuple[list[str], float]:
    """The legend: a swatch and the name of each named series, then of each tick trace; and the height it adds.
    On one line above the plot where it fits there (in a smaller font, down to 9 px); else in lines under the
    drawing, which ends ``bottom`` high without it, each name whole."""
    legend = [(d.get("name"), PALETTE[i % len(PALETTE)]) for i, d in enumerate(series) if d.get("name")]
    legend += [(d.get("name"), "#000") for d in ticks_ if d.get("name")]
    names = [html.unescape(str(name)) for name, _ in legend]
    room = W - ML - MR
    need = sum(24 + 7 * len(n) for n in names)
    scale = max(min(1.0, (room - 24 * len(names)) / max(need - 24 * len(names), 1)), 0.75)
    out: list[str] = []
    if sum(24 + 7 * scale * len(n) for n in names) <= room:
        font = f' font-size="{_num(12 * scale)}"' if scale < 1.0 else ""
        x = float(ML)
        for name, (_, color) in zip(names, legend, strict=True):
            out.append(f'<rect x="{_num(x)}" y="{MT - 18}" width="10" height="10" fill="{color}"/>'
                       f'<text x="{_num(x + 14)}" y="{MT - 9}" fill="#333"{font}>{html.escape(name)}</text>')  # fmt: skip
            x += 24 + 7 * scale * len(name)
        return out, 0.0
    x, line = float(ML), 0
    for name, (_, color) in zip(names, legend, strict=True):
        width = 22 + 6.2 * len(name)  # 11 px
        if x > ML and x + width > W - MR:
            x, line = float(ML), line + 1
        y = bottom + 4 + 18 * line
        out.append(f'<rect x="{_num(x)}" y="{_num(y)}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{_num(x + 14)}" y="{_num(y + 9)}" fill="#333" font-size="11">{html.escape(name)}</text>')  # fmt: skip
        x += width
    return out, 18.0 * (line + 1) + 8


def _columns(data: list[dict[str, Any]], layout: Mapping[str, Any]) -> int:
    """How many panels a row the figure lays its traces out in: the distinct domains of their x axes."""
    domains = {
        tuple((layout.get("xaxis" + str(d.get("xaxis") or "x")[1:]) or {}).get("domain") or ()) for d in data
    }
    return max(len(domains), 1)


def _heatmaps(data: list[dict[str, Any]], layout: Mapping[str, Any]) -> str:
    """One panel per heatmap trace, in the rows the figure lays them out in (:func:`_columns` a row): count in
    each cell, shade by count within the panel; a panel's title cut to its width (whole in its tooltip)."""
    title = _title(layout)
    heads = [a.get("text", "") for a in layout.get("annotations") or []]
    n = len(data)
    per_row = min(_columns(data, layout), max(n, 1))
    rows = -(-n // per_row)
    left = 150
    xshown, yshown = _shown(layout, "xaxis"), _shown(layout, "yaxis")
    pw = (W - left - MR) / per_row
    ph = H - MT - 70 if rows == 1 else 150
    step = ph + 50  # a row of panels: the panels, their columns' names, the next row's titles
    body: list[str] = []
    for k, d in enumerate(data):
        z: Sequence[Sequence[float]] = d.get("z") or []
        xs, ys = list(d.get("x") or []), list(d.get("y") or [])
        top = max((v for r in z for v in r), default=0) or 1
        x0, y0 = left + (k % per_row) * pw, MT + (k // per_row) * step
        cw, chh = (pw - 12) / max(len(xs), 1), ph / max(len(ys), 1)
        if k < len(heads):
            head = html.unescape(str(heads[k]))
            px = 12 if per_row <= 2 else 10
            shown = short_label(head, max(int((pw - 4) / (px * 0.62)), 8))
            whole = f"<title>{html.escape(head)}</title>" if shown != head else ""
            body.append(f'<text x="{_num(x0 + pw / 2)}" y="{_num(y0 - 6)}" text-anchor="middle" font-weight="600" '
                        f'font-size="{px}">{whole}{html.escape(shown)}</text>')  # fmt: skip
        for r, row in enumerate(z):
            if k % per_row == 0 and r < len(ys):
                label = yshown.get(str(ys[r]), str(ys[r]))
                whole = f"<title>{_t(ys[r])}</title>" if label != str(ys[r]) else ""
                body.append(f'<text x="{left - 6}" y="{_num(y0 + chh * (r + 0.5) + 4)}" text-anchor="end" '
                            f'fill="#444">{whole}{_t(label)}</text>')  # fmt: skip
            for c, v in enumerate(row):
                share = float(v) / top
                shade = f"rgb({int(247 - 200 * share)},{int(251 - 150 * share)},{int(255 - 80 * share)})"
                ink = "#fff" if share > 0.6 else "#000"
                body.append(f'<rect x="{_num(x0 + cw * c)}" y="{_num(y0 + chh * r)}" width="{_num(cw - 2)}" '
                            f'height="{_num(chh - 2)}" fill="{shade}"><title>{_t(ys[r] if r < len(ys) else "")} / '
                            f'{_t(xs[c] if c < len(xs) else "")}: {v}</title></rect>'
                            f'<text x="{_num(x0 + cw * (c + 0.5))}" y="{_num(y0 + chh * (r + 0.5) + 4)}" '
                            f'text-anchor="middle" fill="{ink}">{v}</text>')  # fmt: skip
        for c, x in enumerate(xs):
            x = xshown.get(str(x), x)
            x = str(x).split(": ", 1)[-1] if len(str(x)) * 6 > cw else x  # "naive: OTHER" → "OTHER"
            body.append(f'<text x="{_num(x0 + cw * (c + 0.5))}" y="{_num(y0 + ph + 16)}" text-anchor="middle" '
                        f'fill="#444" font-size="10">{_t(x)}</text>')  # fmt: skip
    return _svg(body, title, H if rows == 1 else int(MT + (rows - 1) * step + ph + 40))


def _err_x(d: Mapping[str, Any], k: int) -> tuple[float | None, float | None]:
    return _err({"error_y": d.get("error_x")}, k)


_LABEL_CHARS = 40  # a group label longer than this is cut (whole in its tooltip)


def _forest(data: list[dict[str, Any]], layout: Mapping[str, Any]) -> str:
    """A forest plot (:func:`mcqaudit.plots.fig_group_rates`, ``fig_group_delta``): one row per category of
    the y axis, first on top, one marker per series side by side within the row, its CI a horizontal
    whisker; vertical reference lines (``add_vline``) dashed. The height grows with the rows."""
    title = _title(layout)
    cats: list[str] = []
    for d in data:
        for y in d.get("y") or []:
            if str(y) not in cats:
                cats.append(str(y))
    if not cats:
        return _svg([f'<text x="{W / 2}" y="40" text-anchor="middle" fill="#666">no data</text>'], title, 80)
    row_h = 12 + 9 * max(1, len(data))
    ml = 12 + 6.2 * min(max(len(html.unescape(c)) for c in cats), _LABEL_CHARS + 1)
    height = MT + row_h * len(cats) + MB
    lines = [s for s in layout.get("shapes") or [] if s.get("type") == "line" and s.get("x0") == s.get("x1")]
    vals: list[float] = [float(s["x0"]) for s in lines]
    for d in data:
        for k, x in enumerate(d.get("x") or []):
            if x is not None:
                p, m = _err_x(d, k)
                vals += [x + (p or 0.0), x - (m or 0.0)]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    pad = (hi - lo) * 0.06 or 1.0
    lo, hi = lo - pad, hi + pad
    pw = W - ml - MR

    def X(v: float) -> float:
        return ml + pw * (v - lo) / ((hi - lo) or 1.0)

    bottom = MT + row_h * len(cats)
    body: list[str] = []
    for tv in _ticks(lo, hi):
        body.append(f'<line x1="{_num(X(tv))}" x2="{_num(X(tv))}" y1="{MT}" y2="{bottom}" stroke="#e5e9f0"/>'
                    f'<text x="{_num(X(tv))}" y="{bottom + 16}" text-anchor="middle" fill="#444">{tv:g}</text>')  # fmt: skip
    xtitle = (layout.get("xaxis") or {}).get("title")
    xtext = xtitle.get("text") if isinstance(xtitle, Mapping) else xtitle
    if xtext:
        body.append(
            f'<text x="{_num(ml + pw / 2)}" y="{bottom + 36}" text-anchor="middle" fill="#444">{_t(xtext)}</text>'
        )
    for r, cat in enumerate(cats):
        plain = html.unescape(cat)
        short = plain if len(plain) <= _LABEL_CHARS else plain[: _LABEL_CHARS - 1] + "…"
        cy = MT + row_h * (r + 0.5)
        if r % 2:
            body.append(
                f'<rect x="{ml}" y="{_num(MT + row_h * r)}" width="{_num(pw)}" height="{_num(row_h)}" fill="#f7f9fb"/>'
            )
        body.append(f'<text x="{_num(ml - 6)}" y="{_num(cy + 4)}" text-anchor="end" fill="#444">'
                    f"<title>{_t(cat)}</title>{_t(short)}</text>")  # fmt: skip
    for s in lines:
        xv = X(float(s["x0"]))
        color = (s.get("line") or {}).get("color", "grey")
        body.append(f'<line x1="{_num(xv)}" x2="{_num(xv)}" y1="{MT}" y2="{bottom}" stroke="{_t(color)}" '
                    'stroke-dasharray="3 3"/>')  # fmt: skip
    n = max(1, len(data))
    for si, d in enumerate(data):
        color = PALETTE[si % len(PALETTE)]
        hov = d.get("hovertext") or []
        for k, (x, y) in enumerate(zip(d.get("x") or [], d.get("y") or [], strict=False)):
            if x is None:
                continue
            cy = MT + row_h * (cats.index(str(y)) + (si + 1) / (n + 1))
            p, m = _err_x(d, k)
            if p is not None and m is not None:
                a, b = X(x - m), X(x + p)
                body.append(f'<path d="M{_num(a)} {_num(cy)}H{_num(b)}M{_num(a)} {_num(cy - 3)}v6M{_num(b)} '
                            f'{_num(cy - 3)}v6" stroke="{color}" fill="none"/>')  # fmt: skip
            tip = f"<title>{_t(d.get('name', ''))} {_t(y)}: {_t(_lines(hov[k] if k < len(hov) else x))}</title>"
            body.append(f'<circle cx="{_num(X(x))}" cy="{_num(cy)}" r="4.5" fill="{color}">{tip}</circle>')
    legend, extra = _legend(data, [], height)
    return _svg(body + legend, title, int(height + extra))


__all__ = ["figure_svg"]
