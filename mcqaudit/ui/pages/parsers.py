"""Parsers vs judge: per parser, the 3×3 confusion with the verdicts and, beside it, the letter confusion
with the reference letters, ``none`` included (a cell of either lists its rows); the disagreement and
misread rates against the 5 % line, and the Δ each parser would have reported beside the judge's."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from mcqaudit import plots
from mcqaudit.formatting import naive_words, plural
from mcqaudit.metrics import PARSER_DISAGREEMENT_MAX
from mcqaudit.metrics.results import LetterRates, Metric, OrientationDisagreement, ParserDisagreement, Report
from mcqaudit.review.filters import Cell, ConfusionCell, LetterCell, RowFilter
from mcqaudit.ui import components, data, state, tables
from mcqaudit.ui.pages import load
from mcqaudit.ui.pages.review import send_to_review
from mcqaudit.vocab import VERDICTS

LIST_LIMIT = 200

PARSER_HELP = {
    "strict": "mcqaudit's pre-filter: only whole-answer replies; compared on the rows it resolved",
    "naive": "{naive} — the fragile baseline",
    "user": "the letter your own pipeline parsed (parsed_letter)",
}


def _pick_cell(cell: dict[str, str | None]) -> None:
    st.session_state[state.CELL] = cell


def _rate_metric(box: DeltaGenerator, label: str, rate: Metric | None, what: str) -> None:
    """A rate against the 5 % line, with its CI and n in the help."""
    value = rate["value"] if rate else None
    if value is None:
        return
    above = value > PARSER_DISAGREEMENT_MAX
    box.metric(
        tables.md_escape(label),
        f"{value * 100:.1f} %",
        delta=("above" if above else "below") + f" the {PARSER_DISAGREEMENT_MAX * 100:.0f} % line",
        delta_color="inverse" if above else "normal",
        help=f"95 % CI {tables.pct(rate)} rows (item-clustered); compared on {what}",
    )


def _verdict_matrix(
    entry: ParserDisagreement | OrientationDisagreement, parser: str, arm: str, o: str | None
) -> None:
    st.markdown(
        "**Verdict (rows) × the parser's verdict (columns).** Click a count to list exactly those rows."
    )
    conf = entry["confusion"]
    head = st.columns(4)
    head[0].markdown("&nbsp;")
    for k, v in enumerate(VERDICTS, start=1):
        head[k].markdown(f"**{tables.md_escape(parser)}: {v}**")
    for r in VERDICTS:
        cols = st.columns(4)
        cols[0].markdown(f"**verdict: {r}**")
        for k, c in enumerate(VERDICTS, start=1):
            cell: dict[str, str | None] = {
                "parser": parser, "arm": arm, "orientation": o, "verdict": r, "parser_verdict": c
            }  # fmt: skip
            cols[k].button(
                f"{int(conf[r][c])}",
                key=f"cell-{r}-{c}",
                type="primary" if st.session_state.get(state.CELL) == cell else "secondary",
                on_click=_pick_cell,
                args=(cell,),
                help=f"verdict {r}, {parser} says {c}" + (" (agreement)" if r == c else " (disagreement)"),
                width="stretch",
            )


def _letter_matrix(letters: LetterRates, parser: str, arm: str, o: str | None) -> None:
    """The letter confusion as a heatmap of buttons: reference letter (rows) × the parser's letter (columns),
    ``none`` included; a cell's shade is its share of the largest count of its kind (agreement in blue,
    misreads in red); a click lists its rows."""
    conf = letters["confusion"]
    keys = list(conf)
    m = letters.get("misread")
    st.markdown(
        "**Reference letter (rows) × the parser's letter (columns)**, `none` included: the picked letter, "
        f"none for OTHER, on the {m['n'] if m else 0} rows whose letter is known. Click a count to list its rows."
    )
    same = max([conf[k][k] for k in keys] + [1])
    off = max([conf[r][c] for r in keys for c in keys if r != c] + [1])
    css = []
    head = st.columns(len(keys) + 1)
    head[0].markdown("&nbsp;")
    for k, c in enumerate(keys, start=1):
        head[k].markdown(f"**{tables.md_escape(parser)}: {c}**")
    for r in keys:
        cols = st.columns(len(keys) + 1)
        cols[0].markdown(f"**reference: {r}**")
        for k, c in enumerate(keys, start=1):
            n = int(conf[r][c])
            key = f"lcell-{r}-{c}"
            if n:
                alpha = 0.15 + 0.6 * n / (same if r == c else off)
                rgb = "31, 119, 180" if r == c else "214, 39, 40"
                css.append(f".st-key-{key} button {{ background-color: rgba({rgb}, {alpha:.2f}); }}")
            cell: dict[str, str | None] = {
                "kind": "letter",
                "parser": parser,
                "arm": arm,
                "orientation": o,
                "reference": r,
                "letter": c,
            }
            cols[k].button(
                f"{n}",
                key=key,
                type="primary" if st.session_state.get(state.CELL) == cell else "secondary",
                on_click=_pick_cell,
                args=(cell,),
                help=f"reference {r}, {parser} reads {c}" + (" (agreement)" if r == c else " (misread)"),
                width="stretch",
            )
    if css:  # our own rules, keyed by letters only: nothing from the data is written into them
        st.html("<style>" + "\n".join(css) + "</style>")
    parts = [
        f"{label} {tables.pct(rate)}"
        for rate, label in ((letters.get("wrong_letter"), "another letter"),
                            (letters.get("fabricated"), "a letter made up for none"),
                            (letters.get("missed"), "no letter where there is one"))
    ]  # fmt: skip
    st.caption("Of those rows, % with 95 % CI and n: " + "; ".join(parts) + ".")


def _cell_rows(path: str, parser: str, arm: str, o: str | None) -> None:
    """The rows of the chosen cell (of either matrix), when it belongs to this parser, arm and orientation."""
    chosen = st.session_state.get(state.CELL)
    if not chosen or (chosen["parser"], chosen["arm"], chosen["orientation"]) != (parser, arm, o):
        return
    cell: Cell = (
        LetterCell(parser, chosen["reference"], chosen["letter"])
        if chosen.get("kind") == "letter"
        else ConfusionCell(parser, chosen["verdict"], chosen["parser_verdict"])
    )
    f = RowFilter(arms=(arm,), orientations=(o,) if o else (), cell=cell)
    df, total = data.rows(path, f, LIST_LIMIT, 0)
    st.markdown(
        f"**{plural(total, 'row')}** with {tables.md_escape(cell.describe())}"
        + (f" (first {LIST_LIMIT} shown)" if total > LIST_LIMIT else "")
    )
    st.dataframe(
        df[
            [
                "row_id",
                "item_id",
                "orientation",
                "gold_letter",
                "picked_letter",
                "verdict_source",
                "truncated",
                "answer",
            ]
        ],
        hide_index=True,
        key="cell_rows",
    )
    if st.button(f"Review these {total} rows →", key="cell_to_review", disabled=total == 0):
        send_to_review(arms=[arm], orientations=[o] if o else [], cell=cell)


def render_parsers(report: Report, meta: Mapping[str, str | None], path: str) -> None:
    st.title("Parsers vs judge")
    components.provenance(report, meta)
    components.flags(report["flags"], only=["suspected_parser_artifact", "parser_disagreement"], links=False)
    parsers = tables.parsers_of(report)
    arms = list(report["arms"])
    if not parsers or not arms:
        st.info("No parser letters to compare yet.")
        return
    orients = [state.ALL_ORIENTATIONS, *report["study"].get("orientations", [])]
    for key, options in ((state.PARSER, parsers), (state.PARSER_ARM, arms), (state.PARSER_ORIENT, orients)):
        if st.session_state.get(key) not in options:
            state.set_value(key, options[0] if key != state.PARSER or "naive" not in options else "naive")
    c1, c2, c3 = st.columns(3)
    parser = c1.selectbox(
        "Parser", parsers, key=state.bind(state.PARSER), on_change=state.sync, args=(state.PARSER,)
    )
    arm = c2.selectbox(
        "Arm", arms, key=state.bind(state.PARSER_ARM), on_change=state.sync, args=(state.PARSER_ARM,)
    )
    orient = c3.selectbox(
        "Orientation",
        orients,
        key=state.bind(state.PARSER_ORIENT),
        on_change=state.sync,
        args=(state.PARSER_ORIENT,),
    )
    st.caption(
        tables.md_escape(
            PARSER_HELP.get(parser, f"{parser}: a known framework's answer pattern, re-implemented").format(
                naive=naive_words(report)
            )
        )
    )
    o = None if orient == state.ALL_ORIENTATIONS else orient
    entry = tables.parser_entry(report, parser, arm, o)
    letters = tables.letters_entry(report, parser, arm, o)
    where = f"{parser} · {arm}" + (f" · {o}" if o else "")
    if entry is None:
        st.info(tables.md_escape(f"The {parser} parser has no rows in {arm}" + (f", {o}" if o else "") + "."))
    else:
        c1, c2 = st.columns(2)
        _rate_metric(c1, f"disagreement · {where}", entry.get("rate"), "verdicts")
        if letters is not None:
            _rate_metric(c2, f"misread letters · {where}", letters.get("misread"), "letters")
        left, right = st.columns([2, 3], gap="large")
        with left:
            _verdict_matrix(entry, parser, arm, o)
        with right:
            if letters is None:
                st.caption(
                    "No letter-level audit here: no graded row has a known reference letter (a gold-shape "
                    "judge names no letter)."
                )
            else:
                _letter_matrix(letters, parser, arm, o)
        _cell_rows(path, parser, arm, o)
    st.plotly_chart(plots.fig_parser_confusion(report, parser), key="fig_parser_confusion")

    st.subheader("Disagreement with the verdicts, every parser (%)")
    st.dataframe(tables.disagreement_rates(report), hide_index=True, key="disagreement_rates")
    st.plotly_chart(plots.fig_parser_disagreement(report), key="fig_parser_disagreement")
    st.subheader("Letters misread, every parser (%)")
    st.caption(
        "The share of answers whose letter the parser reads differently from the reference letter (the picked "
        "letter, none for OTHER), on the rows where that letter is known; beside it, how many of them were "
        "another letter, a letter made up for an answer that picks none, and a letter missed."
    )
    st.dataframe(tables.letter_rates(report), hide_index=True, key="letter_rates")

    st.subheader(
        f"The Δaccuracy each parser would have reported (vs {tables.md_escape(report.get('control_arm'))})"
    )
    pdl = tables.parser_deltas(report)
    if len(pdl):
        st.dataframe(pdl, hide_index=True, key="parser_deltas")
    st.plotly_chart(plots.fig_delta_by_parser(report), key="fig_delta_by_parser")


def page() -> None:
    c = load()
    render_parsers(c.report, c.meta, c.path)
