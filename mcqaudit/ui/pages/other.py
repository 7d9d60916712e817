"""OTHER by arm: OTHER and ungraded rates per arm and orientation, the answered-accuracy recomputation,
and the OTHER rows themselves."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import streamlit as st

from mcqaudit import plots
from mcqaudit.metrics.results import Report
from mcqaudit.review.filters import RowFilter
from mcqaudit.ui import components, data, state, tables
from mcqaudit.ui.pages import load
from mcqaudit.ui.pages.review import send_to_review
from mcqaudit.vocab import OTHER

LIST_LIMIT = 200


def render_other(
    report: Report,
    meta: Mapping[str, str | None],
    counts: pd.DataFrame,
    path: str,
) -> None:
    st.title("OTHER by arm")
    components.provenance(report, meta)
    components.flags(report["flags"], only=["other_rate_rise", "ungraded_rows"], links=False)
    st.markdown(
        "OTHER: the generation picks no single option (refusal, hedge, several options, none). Ungraded: no "
        "verdict yet (judge error or pending) — counted apart, never folded into OTHER. Answered accuracy "
        "recomputes accuracy with OTHER rows left out: when an arm says OTHER more often, compare it with "
        "accuracy before reading a Δ as a change in knowledge."
    )
    st.dataframe(tables.other_by_arm(report), hide_index=True, key="other_by_arm")
    st.plotly_chart(plots.fig_other_rate(report), key="fig_other_rate")
    st.subheader("By arm and orientation")
    st.dataframe(tables.rates_by_orientation(counts), hide_index=True, key="rates_by_orientation")

    st.subheader("The OTHER rows")
    arms = list(report["arms"])
    if not arms:
        return
    if st.session_state.get(state.OTHER_ARM) not in arms:
        state.set_value(state.OTHER_ARM, arms[-1])
    arm = st.selectbox(
        "Arm", arms, key=state.bind(state.OTHER_ARM), on_change=state.sync, args=(state.OTHER_ARM,)
    )
    f = RowFilter(arms=(arm,), verdicts=(OTHER,))
    df, total = data.rows(path, f, LIST_LIMIT, 0)
    st.markdown(
        f"**{total}** OTHER rows in {tables.md_escape(arm)}"
        + (f" (first {LIST_LIMIT} shown)" if total > LIST_LIMIT else "")
    )
    st.dataframe(
        df[["row_id", "item_id", "orientation", "verdict_source", "judge_status", "generation"]],
        hide_index=True,
        key="other_rows",
    )
    if st.button(f"Review these {total} rows →", key="other_to_review", disabled=total == 0):
        send_to_review(arms=[arm], verdicts=[OTHER])


def page() -> None:
    c = load()
    render_other(c.report, c.meta, data.verdict_counts(c.path, c.version), c.path)
