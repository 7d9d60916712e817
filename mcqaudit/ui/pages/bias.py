"""Bias: picks by displayed position vs chance, first-position rate, RStd, consistency, log-prob check."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from mcqaudit import plots
from mcqaudit.metrics.results import Report
from mcqaudit.report import LOGPROB_WORDS
from mcqaudit.ui import components, tables
from mcqaudit.ui.pages import load


def render_bias(report: Report, meta: Mapping[str, str | None]) -> None:
    st.title("Bias")
    components.provenance(report, meta)
    components.flags(report["flags"], only=["design_imbalance", "logprob_mismatch"], links=False)
    st.subheader("Picks by displayed position (%)")
    if tables.picks_confounded(report):
        st.warning(
            "Confounded by the gold imbalance (design_imbalance): the gold letters are not balanced over the "
            "displayed positions, so these shares describe what the model picked but cannot separate a "
            "position preference from the answers. No chance level is given.",
            icon=":material/warning:",
        )
    st.dataframe(tables.position_picks(report), hide_index=True, key="position_picks")
    st.plotly_chart(plots.fig_position_picks(report), key="fig_position_picks")
    notes = report.get("notes") or {}
    for a in report["arms"]:
        n = notes.get(f"metrics.{a}.position_pick_rate")
        if n:
            st.caption(f"{tables.md_escape(a)}: {tables.md_escape(n)}")
    st.subheader("First position, RStd, consistency")
    st.dataframe(tables.bias_summary(report), hide_index=True, key="bias_summary")
    fams = tables.families(report)
    st.caption(
        "RStd: standard deviation over gold letters of the recall (share CORRECT), in percentage points — 0 "
        "when accuracy does not depend on where the gold sits. It compares gold letters within an item family "
        "(the items sharing one orientation set)"
        + ("; the headline is the families' RStd weighted by their items." if len(fams) > 1 else ".")
        + " Consistency: share of swapped pairs with the same verdict (two orientations), and mean share of "
        "orientations picking the plurality option."
    )
    st.subheader("Recall by gold letter (%)")
    for k, fam in enumerate(fams):
        if len(fams) > 1:
            st.markdown(f"**{tables.md_escape(tables.family_caption(fam))}**")
        st.dataframe(tables.recall_by_gold(report, fam), hide_index=True, key=f"recall_by_gold_{k}")
    lp = tables.logprob(report)
    if len(lp):
        st.subheader("Log-prob cross-check")
        st.dataframe(lp, hide_index=True, key="logprob")
        st.caption(LOGPROB_WORDS)


def page() -> None:
    c = load()
    render_bias(c.report, c.meta)
