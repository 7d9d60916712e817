"""Parsers vs judge: per parser, the 3×3 confusion with the verdicts (a cell lists its rows), the
disagreement rate against the 5 % line, and the Δ each parser would have reported beside the judge's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from mcqaudit import plots
from mcqaudit.formatting import naive_words
from mcqaudit.metrics import PARSER_DISAGREEMENT_MAX
from mcqaudit.store.rows import ConfusionCell, RowFilter
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


def _pick_cell(cell: dict[str, Any]) -> None:
    st.session_state[state.CELL] = cell


def render_parsers(report: Mapping[str, Any], meta: Mapping[str, str | None], path: str) -> None:
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
    if entry is None:
        st.info(tables.md_escape(f"The {parser} parser has no rows in {arm}" + (f", {o}" if o else "") + "."))
    else:
        rate = entry.get("rate")
        if rate and rate.get("value") is not None:
            above = rate["value"] > PARSER_DISAGREEMENT_MAX
            line = f"{PARSER_DISAGREEMENT_MAX * 100:.0f} % line"
            st.metric(
                tables.md_escape(f"disagreement · {parser} · {arm}" + (f" · {o}" if o else "")),
                f"{rate['value'] * 100:.1f} %",
                delta=("above" if above else "below") + f" the {line}",
                delta_color="inverse" if above else "normal",
                help=f"95 % CI {tables.pct(rate)}, n = {rate['n']} rows (item-clustered)",
            )
        st.markdown(
            "**Verdict (rows) × the parser's verdict (columns).** Click a count to list exactly those rows."
        )
        conf = entry["confusion"]
        head = st.columns(4)
        head[0].markdown("&nbsp;")
        for k, v in enumerate(VERDICTS, start=1):
            head[k].markdown(f"**{parser}: {v}**")
        for r in VERDICTS:
            cols = st.columns(4)
            cols[0].markdown(f"**verdict: {r}**")
            for k, c in enumerate(VERDICTS, start=1):
                n = int(conf[r][c])
                cell = {"parser": parser, "arm": arm, "orientation": o, "verdict": r, "parser_verdict": c}
                cols[k].button(
                    f"{n}",
                    key=f"cell-{r}-{c}",
                    type="primary" if st.session_state.get(state.CELL) == cell else "secondary",
                    on_click=_pick_cell,
                    args=(cell,),
                    help=f"verdict {r}, {parser} says {c}"
                    + (" (agreement)" if r == c else " (disagreement)"),
                    width="stretch",
                )
        chosen = st.session_state.get(state.CELL)
        if chosen and chosen["parser"] == parser and chosen["arm"] == arm and chosen["orientation"] == o:
            f = RowFilter(
                arms=(arm,),
                orientations=(o,) if o else (),
                cell=ConfusionCell(parser, chosen["verdict"], chosen["parser_verdict"]),
            )
            df, total = data.rows(path, f, LIST_LIMIT, 0)
            st.markdown(
                f"**{total} rows** with verdict {chosen['verdict']} where {tables.md_escape(parser)} says "
                f"{chosen['parser_verdict']}" + (f" (first {LIST_LIMIT} shown)" if total > LIST_LIMIT else "")
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
                        "generation",
                    ]
                ],
                hide_index=True,
                key="cell_rows",
            )
            if st.button(f"Review these {total} rows →", key="cell_to_review", disabled=total == 0):
                send_to_review(arms=[arm], orientations=[o] if o else [], cell=f.cell)
    st.plotly_chart(plots.fig_parser_confusion(report, parser), key="fig_parser_confusion")

    st.subheader("Disagreement with the verdicts, every parser (%)")
    st.dataframe(tables.disagreement_rates(report), hide_index=True, key="disagreement_rates")
    st.plotly_chart(plots.fig_parser_disagreement(report), key="fig_parser_disagreement")

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
