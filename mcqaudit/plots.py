"""Plotly figures of a report dict (the JSON shape of :func:`mcqaudit.report.build_report`). Pure.

Each ``fig_*(report)`` returns a ``plotly.graph_objects.Figure``; the HTML report and the dashboard draw
the same figures. A figure whose data the report lacks (no reviews, no Δ) is still returned, empty but
titled with the reason, so a caller can always place it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from mcqaudit.formatting import LABEL_CHARS, pairing_words, plotly_text, short_labels
from mcqaudit.metrics.results import Metric, Report
from mcqaudit.metrics.rules import compared_arms
from mcqaudit.reading import (
    FamilyView,
    any_truncated,
    family_entry,
    first_family,
    group_label,
    report_families,
)
from mcqaudit.vocab import VERDICTS

# plotly_white, with the data defaults of the trace types these figures draw and of no other. Each figure
# copies its template and sends it to the browser: plotly_white carries defaults for 24 trace types (a copy
# ~7 ms, ~7 KB of JSON), this one for three (~3.5 ms, ~3 KB); what the figures look like is the same.
TRACE_TYPES = ("bar", "heatmap", "scatter")
TEMPLATE = "mcqaudit_white"


def _template() -> str:
    """:data:`TEMPLATE`'s name, the template registered with plotly at the first figure (~75 ms, loading
    plotly_white: not at import, which every dashboard page does, figure or not)."""
    if TEMPLATE not in pio.templates:
        white = pio.templates["plotly_white"]
        pio.templates[TEMPLATE] = go.layout.Template(
            layout=white.layout, data={t: white.data[t] for t in TRACE_TYPES}
        )
    return TEMPLATE


def _layout(**over: Any) -> dict[str, Any]:
    """The layout every figure starts from (:data:`_LAYOUT`, its template registered), ``over`` in place of its
    own values."""
    _template()
    return {**_LAYOUT, **over}


_LAYOUT: dict[str, Any] = {
    "template": TEMPLATE,
    "margin": {"l": 60, "r": 20, "t": 60, "b": 50},
    "height": 380,
}


_txt = plotly_text  # plotly.js reads a few HTML tags in labels: every name is shown as text


def _labels(report: Report, limit: int = LABEL_CHARS) -> dict[str, str]:
    """Each arm's name as a figure shows it on an axis, in a legend or over a panel: as text, one longer than
    ``limit`` cut in the middle (:func:`mcqaudit.formatting.short_labels`: told apart), so that a name of 100
    characters does not squeeze the plot into a strip beside its legend or under its tick labels. The hover
    names it whole."""
    return {a: _txt(s) for a, s in short_labels(report["arms"], limit).items()}


def _who(name: str, label: str) -> str:
    """A hover text's first line: ``name`` whole where the figure shows it cut as ``label``, else nothing."""
    return "" if _txt(name) == label else f"{_txt(name)}<br>"


def _ticks(fig: go.Figure, axis: Literal["x", "y"], values: Sequence[str], labels: Sequence[str]) -> None:
    """The categories ``values`` of ``axis`` (whole names: distinct) shown as ``labels``."""
    if list(values) != list(labels):
        update = fig.update_xaxes if axis == "x" else fig.update_yaxes
        update(tickvals=list(values), ticktext=list(labels))


def _err(ms: Sequence[Metric | None], scale: float = 1.0) -> dict[str, object]:
    plus: list[float | None] = []
    minus: list[float | None] = []
    for m in ms:
        lo, hi, v = (m.get("ci_low"), m.get("ci_high"), m.get("value")) if m else (None, None, None)
        if lo is None or hi is None or v is None:
            plus.append(None)
            minus.append(None)
        else:
            plus.append((hi - v) * scale)
            minus.append((v - lo) * scale)
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus}


def _val(m: Metric | None, scale: float = 1.0) -> float | None:
    v = m.get("value") if m else None
    return None if v is None else v * scale


def _empty(title: str, reason: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(**_layout(), title=f"{title} — {reason}")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def _ci_hover(m: Metric | None, scale: float = 100.0, unit: str = "%") -> str:
    v = m.get("value") if m else None
    if m is None or v is None:
        return "n/a"
    s = f"{v * scale:.1f}{unit}"
    lo, hi = m.get("ci_low"), m.get("ci_high")
    if lo is not None and hi is not None:
        s += f" [{lo * scale:.1f}, {hi * scale:.1f}]"
    return s + f" n={m.get('n')}"


def _family_of(report: Report, family: FamilyView | None) -> FamilyView:
    return family or first_family(report)


def _name_family(fig: go.Figure, family: FamilyView) -> go.Figure:
    """The figure's title, naming the item family it shows (orientations are compared only within one)."""
    label, _, items = family
    if label is not None:
        fig.update_layout(title=f"{fig.layout.title.text} — {_txt(label)} ({items} items)")
    return fig


def fig_orientation_accuracy(report: Report, family: FamilyView | None = None) -> go.Figure:
    """Accuracy per orientation with 95 % CIs, one bar group per arm, within one item family (default: the
    first of :func:`mcqaudit.report.report_families`)."""
    fam = _family_of(report, family)
    orients = fam[1]
    lab = _labels(report)
    fig = go.Figure()
    for arm in report["arms"]:
        by = family_entry(report["metrics"][arm], fam[0]).get("accuracy_by_orientation") or {}
        ms = [by.get(o) for o in orients]
        fig.add_bar(
            name=lab[arm],
            x=[_txt(o) for o in orients],
            y=[_val(m, 100) for m in ms],
            error_y=_err(ms, 100),
            hovertext=[_who(arm, lab[arm]) + _ci_hover(m) for m in ms],
        )
    fig.update_layout(**_layout(), title="Accuracy by orientation (95 % CI, items resampled)", barmode="group")
    fig.update_yaxes(title="accuracy (%)", range=[0, 105])
    fig.update_xaxes(title="orientation")
    return _name_family(fig, fam)


def fig_other_rate(report: Report) -> go.Figure:
    """OTHER rate and ungraded rate per arm with CIs. Where some row was cut by the token limit
    (:func:`mcqaudit.reading.any_truncated`), the OTHER bar is a stack: the OTHER rows cut by the token limit
    under the OTHER rows that were not, each labelled with its count of the arm's OTHER rows; the CI is the
    whole OTHER rate's, on top."""
    arms = report["arms"]
    lab = _labels(report)
    fig = go.Figure()
    x = [_txt(a) for a in arms]
    who = [_who(a, lab[a]) for a in arms]
    rates: tuple[tuple[Literal["other_rate", "ungraded_rate"], str], ...] = (
        ("other_rate", "OTHER rate"),
        ("ungraded_rate", "ungraded rate"),
    )
    cut = any_truncated(report)
    for key, label in rates:
        ms = [report["metrics"][a][key] for a in arms]
        if key == "other_rate" and cut:
            _other_stack(fig, report, x, ms, who)
            continue
        fig.add_bar(
            name=label,
            x=x,
            y=[_val(m, 100) for m in ms],
            error_y=_err(ms, 100),
            hovertext=[w + _ci_hover(m) for w, m in zip(who, ms, strict=True)],
            offsetgroup=key if cut else None,
        )
    title = "OTHER rate by arm (ungraded rows are counted apart)"
    if cut:
        title = "OTHER rate by arm: cut by the token limit, or not (ungraded rows are counted apart)"
    fig.update_layout(**_layout(), title=title, barmode="group")
    fig.update_yaxes(title="% of rows", rangemode="tozero")
    _ticks(fig, "x", x, [lab[a] for a in arms])
    return fig


def _other_stack(
    fig: go.Figure, report: Report, x: list[str], ms: Sequence[Metric | None], who: Sequence[str]
) -> None:
    """The OTHER bar of :func:`fig_other_rate` as two stacked parts (one ``offsetgroup``, the upper part's
    ``base`` the lower part's top): OTHER rows cut by the token limit, then the rest, as % of graded rows."""
    cut: list[float | None] = []
    rest: list[float | None] = []
    cut_text: list[str] = []
    rest_text: list[str] = []
    for a, m in zip(report["arms"], ms, strict=True):
        e = report["metrics"][a]
        graded, other = int(e.get("graded") or 0), int(e.get("other_rows") or 0)
        k = int(e.get("truncated_other_rows") or 0)
        v = _val(m, 100)
        c = 100 * k / graded if graded and v is not None else None
        cut.append(c)
        rest.append(None if v is None or c is None else max(v - c, 0.0))
        cut_text.append(f"{k:,} of {other:,} OTHER")
        rest_text.append(f"{other - k:,} of {other:,} OTHER")
    # no label on an empty part
    labels = [[t if not t.startswith("0 of") else "" for t in ts] for ts in (cut_text, rest_text)]
    fig.add_bar(
        name="OTHER, cut by the token limit",
        x=x,
        y=cut,
        offsetgroup="other_rate",
        text=labels[0],
        hovertext=[w + (f"{t} rows cut by the token limit ({c:.1f} % of graded rows)" if c is not None else "n/a")
                   for w, t, c in zip(who, cut_text, cut, strict=True)],
    )  # fmt: skip
    fig.add_bar(
        name="OTHER, not cut",
        x=x,
        y=rest,
        base=cut,
        offsetgroup="other_rate",
        text=labels[1],
        error_y=_err(ms, 100),
        hovertext=[
            f"{w}{t} rows not cut; OTHER rate {_ci_hover(m)}" for w, t, m in zip(who, rest_text, ms, strict=True)
        ],
    )


def fig_delta_by_orientation(report: Report, family: FamilyView | None = None) -> go.Figure:
    """Δaccuracy (treated − control) per orientation and over all of them, with CIs, within one item family
    (default: the first)."""
    fam = _family_of(report, family)
    orients = fam[1]
    deltas = {a: d for a, d in report["delta_accuracy"].items() if d is not None}
    if not deltas:
        return _empty("Δaccuracy by orientation", "no arm compared with the control")
    x = ["overall", *orients]
    lab, ctrl = _labels(report), str(report["control_arm"])
    fig = go.Figure()
    for arm, d in deltas.items():
        fd = family_entry(d, fam[0])
        ms = [fd.get("overall"), *[(fd.get("by_orientation") or {}).get(o) for o in orients]]
        name = f"{lab[arm]} − {lab.get(ctrl, _txt(ctrl))}"
        who = _who(f"{arm} − {ctrl}", name)
        fig.add_scatter(
            name=name,
            x=[_txt(v) for v in x],
            y=[_val(m, 100) for m in ms],
            error_y=_err(ms, 100),
            mode="markers",
            marker={"size": 10},
            hovertext=[
                who + _ci_hover(m, unit=" pp") + (f" MDE {mde * 100:.1f} pp" if m and (mde := m.get("mde")) else "")
                for m in ms
            ],
        )
    fig.add_hline(y=0, line_dash="dot", line_color="grey")
    fig.update_layout(
        **_layout(),
        title=_txt(f"Δaccuracy vs control by orientation (95 % CI; {pairing_words(deltas)})"),
        scattermode="group",
    )
    fig.update_yaxes(title="Δ accuracy (pp)")
    return _name_family(fig, fam)


def fig_delta_by_parser(report: Report) -> go.Figure:
    """The Δ each parser's letters would have reported, beside the verdicts' Δ."""
    dp = report.get("delta_accuracy_by_parser") or {}
    if not dp:
        return _empty("Δaccuracy by parser", "no arm compared with the control")
    lab = _labels(report)
    fig = go.Figure()
    for arm, by in dp.items():
        names = ["verdicts", *by]
        d = report["delta_accuracy"].get(arm)
        ms = [d["overall"] if d else None, *by.values()]
        fig.add_scatter(
            name=lab[arm],
            x=names,
            y=[_val(m, 100) for m in ms],
            error_y=_err(ms, 100),
            mode="markers",
            marker={"size": 10},
            hovertext=[_who(arm, lab[arm]) + _ci_hover(m, unit=" pp") for m in ms],
        )
    fig.add_hline(y=0, line_dash="dot", line_color="grey")
    fig.update_layout(
        **_layout(), title="Δaccuracy vs control as each parser would report it", scattermode="group"
    )
    fig.update_yaxes(title="Δ accuracy (pp)")
    return fig


PANELS_PER_ROW = 4  # a confusion matrix per arm: more arms than this go on further rows


def fig_parser_confusion(report: Report, parser: str, arm: str | None = None) -> go.Figure:
    """Verdicts (rows) × the parser's verdicts (columns); one panel per arm (:data:`PANELS_PER_ROW` a row, as
    many rows as that takes), or the one ``arm``."""
    arms = [arm] if arm is not None else list(report["arms"])
    arms = [a for a in arms if parser in (report["metrics"][a].get("parser_disagreement") or {})]
    if not arms:
        return _empty(f"{parser} vs verdicts", "the parser has no rows")
    per_row = min(len(arms), PANELS_PER_ROW)
    n_rows = -(-len(arms) // per_row)
    # a panel's title fits its panel: a shorter cut where the panels are many
    lab = _labels(report, {4: 22, 3: 28}.get(per_row, LABEL_CHARS))
    fig = make_subplots(
        rows=n_rows,
        cols=per_row,
        subplot_titles=[lab[a] for a in arms],
        horizontal_spacing=0.08,
        vertical_spacing=0.1 if n_rows > 1 else 0.0,
    )
    for k, a in enumerate(arms):
        row, col = k // per_row + 1, k % per_row + 1
        conf = report["metrics"][a]["parser_disagreement"][parser]["confusion"]
        z = [[conf[r][c] for c in VERDICTS] for r in VERDICTS]
        fig.add_heatmap(
            z=z,
            x=[f"{parser}: {c}" for c in VERDICTS],
            y=[f"verdict: {r}" for r in VERDICTS],
            text=z,
            texttemplate="%{text}",
            colorscale="Blues",
            showscale=False,
            hovertemplate=f"{_txt(a)}<br>%{{y}}, %{{x}}: %{{z}} rows<extra></extra>",
            row=row,
            col=col,
        )
        fig.update_yaxes(autorange="reversed", row=row, col=col, showticklabels=col == 1)
        # the columns' names under the lowest panel of each column only
        fig.update_xaxes(row=row, col=col, showticklabels=k + per_row >= len(arms))
    fig.update_layout(
        **_layout(height=340 + 240 * (n_rows - 1)), title=f"{_txt(parser)} parser vs verdicts (row counts)"
    )
    if per_row > 2:
        fig.update_annotations(font_size=12)
    return fig


def fig_parser_disagreement(report: Report) -> go.Figure:
    """Disagreement rate of each parser with the verdicts, per arm, with CIs."""
    lab = _labels(report)
    fig = go.Figure()
    for arm in report["arms"]:
        pd_ = report["metrics"][arm].get("parser_disagreement") or {}
        names = list(pd_)
        ms = [pd_[p]["rate"] for p in names]
        fig.add_bar(
            name=lab[arm],
            x=names,
            y=[_val(m, 100) for m in ms],
            error_y=_err(ms, 100),
            hovertext=[_who(arm, lab[arm]) + _ci_hover(m) for m in ms],
        )
    fig.add_hline(y=5, line_dash="dot", line_color="firebrick", annotation_text="5 % flag threshold")
    fig.update_layout(**_layout(), title="Parser disagreement with the verdicts", barmode="group")
    fig.update_yaxes(title="% of rows", rangemode="tozero")
    return fig


def fig_position_picks(report: Report) -> go.Figure:
    """Share of picks at each displayed position per arm, against chance (or the gold-letter share); where
    gold letters are unbalanced, the shares alone, titled as confounded by the gold imbalance."""
    lab = _labels(report)
    fig = go.Figure()
    baseline = None
    confounded = not any(report["metrics"][a].get("position_pick_rate") for a in report["arms"])
    shown = False
    for arm in report["arms"]:
        m = report["metrics"][arm]
        ppr = m.get("pick_share") if confounded else m.get("position_pick_rate")
        if not ppr:
            continue
        shown = True
        letters = list(ppr)
        ms = [ppr[x] for x in letters]
        fig.add_bar(
            name=lab[arm],
            x=letters,
            y=[_val(v, 100) for v in ms],
            error_y=_err(ms, 100),
            hovertext=[_who(arm, lab[arm]) + _ci_hover(v) for v in ms],
        )
        if baseline is None and not confounded:
            baseline = (
                letters,
                [None if (c := v.get("chance") if v else None) is None else c * 100 for v in ms],
            )
            kind = m.get("position_baseline", "uniform")
    if not shown:
        return _empty("Position picks", "no row has a picked letter")
    if baseline is not None:
        fig.add_scatter(
            name="chance (1/n)" if kind == "uniform" else "gold-letter share",
            x=baseline[0],
            y=baseline[1],
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 30, "line": {"width": 3}, "color": "black"},
        )
    fig.update_layout(**_layout(), title="Picks by displayed position vs chance", barmode="group")
    if confounded:
        fig.update_layout(
            title="Picks by displayed position — confounded by the gold imbalance (design_imbalance), no chance level"
        )
    fig.update_yaxes(title="% of picks", rangemode="tozero")
    fig.update_xaxes(title="displayed position")
    return fig


def fig_judge_agreement(report: Report) -> go.Figure:
    """Judge-vs-human agreement and Cohen's κ per arm (and pooled), on reviewed rows."""
    from mcqaudit.metrics import MIN_CI_ROWS
    from mcqaudit.reading import agreement_groups

    every = agreement_groups(report)
    if not every:
        return _empty("Judge vs human", "no reviewed rows yet")
    # a bar from 3 rows would read as a finding: groups under MIN_CI_ROWS are in the table, as counts only
    groups = [
        (_txt(name), ag)
        for name, ag in every
        if (a := ag.get("agreement")) is not None and a["n"] >= MIN_CI_ROWS
    ]
    if not groups:
        return _empty("Judge vs human", f"fewer than {MIN_CI_ROWS} reviewed rows: counts only, in the table")
    fig = go.Figure()
    for label, ms in (
        ("agreement", [g["agreement"] for _, g in groups]),
        ("Cohen's κ", [g["kappa"] for _, g in groups]),
    ):
        fig.add_bar(
            name=label,
            x=[n for n, _ in groups],
            y=[_val(m) for m in ms],
            error_y=_err(ms),
            hovertext=[_ci_hover(m, 1.0, "") for m in ms],
        )
    fig.update_layout(**_layout(), title="Judge vs human on reviewed rows", barmode="group")
    fig.update_yaxes(range=[min(0.0, *[(_val(g["kappa"]) or 0.0) for _, g in groups]), 1.05])
    lab = {_txt(a): s for a, s in _labels(report).items()}
    _ticks(fig, "x", [n for n, _ in groups], [lab.get(n, n) for n, _ in groups])
    return fig


def fig_pairwise_delta(report: Report) -> go.Figure:
    """With three or more arms: Δaccuracy of every pair (row arm − column arm, pp; paired on shared items,
    unpaired for a pair that shares none, and the title says which),
    each cell with its CI and n; a pair that could not be compared is left blank and says so."""
    pw = report.get("pairwise_delta")
    arms = list(report["arms"])
    if not pw or len(arms) < 3:
        return _empty("Δaccuracy between every pair of arms", "fewer than three arms")
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    for a in arms:
        zr: list[float | None] = []
        tr: list[str] = []
        for b in arms:
            m = (pw.get(a) or {}).get(b) if a != b else None
            v = m.get("value") if m else None
            if a == b:
                zr.append(None)
                tr.append("")
            elif not m or v is None:
                zr.append(None)
                tr.append("not compared")
            else:
                zr.append(v * 100)
                lo, hi = m.get("ci_low"), m.get("ci_high")
                ci = f"<br>[{lo * 100:+.1f}, {hi * 100:+.1f}]" if lo is not None and hi is not None else ""
                tr.append(f"{v * 100:+.1f}{ci}<br>n={int(m.get('n') or m.get('items') or 0)}")
        z.append(zr)
        text.append(tr)
    lim = max([abs(v) for r in z for v in r if v is not None] or [1.0])
    lab = _labels(report)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[_txt(a) for a in arms],
            y=[_txt(a) for a in arms],
            text=text,
            texttemplate="%{text}",
            colorscale="RdBu",
            zmid=0,
            zmin=-lim,
            zmax=lim,
            colorbar={"title": "Δ pp"},
            hoverinfo="skip",
        )
    )
    fig.update_layout(
        template=_template(),  # as every other figure (its own margins and height)
        title=_txt(f"Δaccuracy between every pair of arms (row − column, pp; {_pair_words(arms, pw)})"),
        xaxis_title="minus this arm",
        yaxis_title="this arm",
        yaxis_autorange="reversed",
        height=120 + 70 * len(arms),
    )
    _ticks(fig, "x", [_txt(a) for a in arms], [lab[a] for a in arms])
    _ticks(fig, "y", [_txt(a) for a in arms], [lab[a] for a in arms])
    return fig


def _pair_words(arms: Sequence[str], pw: Mapping[str, Mapping[str, Metric | None]]) -> str:
    _, pairs = compared_arms(arms, None)  # every pair once, in arm order
    return pairing_words({f"{a} − {b}": (pw.get(a) or {}).get(b) for a, b in pairs})


GroupRate = Literal["accuracy", "other_rate", "truncated_rate"]
GroupDeltaKey = Literal["delta_accuracy", "delta_other_rate", "delta_truncated_rate"]
_GROUP_WORDS = {
    "accuracy": "accuracy",
    "other_rate": "OTHER rate",
    "truncated_rate": "truncated rate",
    "delta_accuracy": "Δaccuracy",
    "delta_other_rate": "Δ OTHER rate",
    "delta_truncated_rate": "Δ truncated rate",
}


def _group_axis(report: Report, key: str) -> tuple[list[str], list[str]]:
    """The groups of ``by_group[key]`` in the report's order, and their labels (with their items; small
    ones marked)."""
    values = list((report.get("by_group") or {}).get(key) or {})
    return values, [_txt(group_label(report, key, v, items=True)) for v in values]


def _forest(fig: go.Figure, title: str, n_groups: int, n_series: int, axis: str) -> go.Figure:
    """A forest plot's layout: one row per group (the first on top), the series side by side within it."""
    height = 140 + max(1, n_groups) * (14 + 10 * max(1, n_series))
    fig.update_layout(
        **_layout(height=height, margin={"l": 200, "r": 20, "t": 70, "b": 50}),
        title=title,
        scattermode="group",
    )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title=axis)
    return fig


def fig_group_rates(report: Report, key: str, metric: GroupRate = "accuracy") -> go.Figure:
    """``report --by metadata.KEY``: each arm's ``metric`` in each group with its 95 % CI and n (a forest
    plot: one row per group, labelled with its items, one marker per arm); small groups are marked so."""
    values, labels = _group_axis(report, key)
    if not values:
        return _empty(f"{_GROUP_WORDS[metric]} by {_txt(key)}", "the report was not grouped by this key")
    groups = report["by_group"][key]
    lab = _labels(report)
    fig = go.Figure()
    for arm in report["arms"]:
        ms = [groups[v][arm][metric] if arm in groups[v] else None for v in values]
        fig.add_scatter(
            name=lab[arm],
            x=[_val(m, 100) for m in ms],
            y=labels,
            error_x=_err(ms, 100),
            mode="markers",
            marker={"size": 9},
            orientation="h",
            hovertext=[_who(arm, lab[arm]) + _ci_hover(m) for m in ms],
        )
    words = _GROUP_WORDS[metric]
    title = f"{words[:1].upper()}{words[1:]} by {_txt(key)} (95 % CI, each group's items resampled)"
    return _forest(fig, title, len(values), len(report["arms"]), f"{_GROUP_WORDS[metric]} (%)")


def fig_group_delta(report: Report, key: str, metric: GroupDeltaKey = "delta_accuracy") -> go.Figure:
    """``report --by metadata.KEY``: each treated arm's Δ against the control in each group, with its CI and
    n; a small group has no Δ (its row is empty, its label says small)."""
    values, labels = _group_axis(report, key)
    if not values:
        return _empty(f"{_GROUP_WORDS[metric]} by {_txt(key)}", "the report was not grouped by this key")
    groups = report["by_group"][key]
    ctrl = report.get("control_arm")
    treated = [a for a in report["arms"] if a != ctrl and any(a in groups[v] for v in values)]
    if not treated:
        return _empty(f"{_GROUP_WORDS[metric]} by {_txt(key)}", "no arm compared with the control")
    lab = _labels(report)
    fig = go.Figure()
    for arm in treated:
        ms = [groups[v][arm].get(metric) if arm in groups[v] else None for v in values]
        fig.add_scatter(
            name=f"{lab[arm]} − {lab.get(str(ctrl), _txt(ctrl))}",
            x=[_val(m, 100) for m in ms],
            y=labels,
            error_x=_err(ms, 100),
            mode="markers",
            marker={"size": 9},
            orientation="h",
            hovertext=[_who(arm, lab[arm]) + (_ci_hover(m, unit=" pp") if m else "no Δ (see the table)") for m in ms],
        )
    fig.add_vline(x=0, line_dash="dot", line_color="grey")
    title = _txt(f"{_GROUP_WORDS[metric]} vs control by {key} (95 % CI, within each group)")
    return _forest(fig, title, len(values), len(treated), f"{_GROUP_WORDS[metric]} (pp)")


def report_figures(report: Report) -> list[tuple[str, go.Figure]]:
    """The figures of the HTML report, titled, in order."""
    fams = report_families(report)

    def named(title: str, fam: FamilyView) -> str:
        return title if len(fams) == 1 or fam[0] is None else f"{title}: {fam[0]}"

    figs = [
        *[(named("Accuracy by orientation", f), fig_orientation_accuracy(report, f)) for f in fams],
        ("OTHER rate by arm", fig_other_rate(report)),
        *[(named("Δaccuracy by orientation", f), fig_delta_by_orientation(report, f)) for f in fams],
        ("Δaccuracy by parser", fig_delta_by_parser(report)),
        ("Parser disagreement", fig_parser_disagreement(report)),
    ]
    parsers: list[str] = []
    for arm in report["arms"]:
        for p in report["metrics"][arm].get("parser_disagreement") or {}:
            if p not in parsers:
                parsers.append(p)
    figs += [(f"{p} vs verdicts", fig_parser_confusion(report, p)) for p in parsers]
    figs.append(("Position picks", fig_position_picks(report)))
    if report.get("judge_agreement") or any(
        report["metrics"][a].get("judge_agreement") for a in report["arms"]
    ):
        figs.append(("Judge vs human", fig_judge_agreement(report)))
    for key in report.get("by_group") or {}:
        figs.append((f"Accuracy by {key}", fig_group_rates(report, key)))
        figs.append((f"Δaccuracy by {key}", fig_group_delta(report, key)))
    return figs
