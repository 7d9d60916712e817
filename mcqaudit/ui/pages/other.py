"""OTHER by arm: OTHER and ungraded rates per arm and orientation, the answered-accuracy recomputation,
the share of OTHER that the token limit cut (when any row was truncated), and the OTHER rows themselves."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import streamlit as st

from mcqaudit import plots
from mcqaudit.metrics.results import Report
from mcqaudit.reading import any_truncated
from mcqaudit.review.filters import RowFilter
from mcqaudit.ui import components, data, groups, state, tables
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
    components.flags(
        report["flags"], only=["other_rate_rise", "truncation_rise", "ungraded_rows"], links=False
    )
    st.markdown(
        "OTHER: the generation picks no single option (refusal, hedge, several options, none). Ungraded: no "
        "verdict yet (judge error or pending) — counted apart, never folded into OTHER. Answered accuracy "
        "recomputes accuracy with OTHER rows left out: when an arm says OTHER more often, compare it with "
        "accuracy before reading a Δ as a change in knowledge."
    )
    st.dataframe(tables.other_by_arm(report), hide_index=True, key="other_by_arm")
    st.plotly_chart(plots.fig_other_rate(report), key="fig_other_rate")
    if any_truncated(report):
        st.subheader("Cut by the token limit")
        st.markdown(
            "Truncated: the generation stopped at the token limit (finish_reason length) or its reasoning block "
            "never closed. A truncated row with no answer is OTHER by rule — the model never answered — so an "
            "arm that thinks longer can read as one that refuses more. The bar above splits each arm's OTHER "
            "into the rows the token limit cut and the rest; the Δ OTHER rate with the truncated rows left out "
            "is what remains of an OTHER change once they are taken out."
        )
        st.dataframe(truncation_by_arm(report), hide_index=True, key="truncation_by_arm")
        st.dataframe(truncation_by_orientation(report), hide_index=True, key="truncation_by_orientation")
    st.subheader("By arm and orientation")
    st.dataframe(tables.rates_by_orientation(counts), hide_index=True, key="rates_by_orientation")
    groups.other_block(report, path)

    st.subheader("The OTHER rows")
    arms = list(report["arms"])
    if not arms:
        return
    if st.session_state.get(state.OTHER_ARM) not in arms:
        state.set_value(state.OTHER_ARM, arms[-1])
    arm = st.selectbox(
        "Arm", arms, key=state.bind(state.OTHER_ARM), on_change=state.sync, args=(state.OTHER_ARM,)
    )
    # the length from the verdict counts (the frames the report read: what a count over graded_rows gives,
    # tests/test_dashboard_data.py), so that the page reads the one page of rows it shows
    total = int(counts.loc[counts["arm"] == arm, "other"].sum())
    df = data.page_of(path, other_rows(arm), LIST_LIMIT, 0)
    st.markdown(
        f"**{total}** OTHER rows in {tables.md_escape(arm)}"
        + (f" (first {LIST_LIMIT} shown)" if total > LIST_LIMIT else "")
    )
    shown = ["row_id", "item_id", "orientation", "verdict_source", "judge_status", "answer", "truncated"]
    st.dataframe(
        df[[c for c in shown if c in df.columns]],
        hide_index=True,
        key="other_rows",
    )
    if st.button(f"Review these {total} rows →", key="other_to_review", disabled=total == 0):
        send_to_review(arms=[arm], verdicts=[OTHER])


def other_rows(arm: str) -> RowFilter:
    return RowFilter(arms=(arm,), verdicts=(OTHER,))


def early_rows(path: str, version: data.Version) -> None:
    """The OTHER rows of the arm the list will show (the one chosen, else the last), read beside the report:
    the arms in the sidebar's order are the report's (both :func:`mcqaudit.metrics.rules.arm_order`)."""
    arms = data.choices(path, version)["arms"]
    chosen = st.session_state.get(state.OTHER_ARM)
    arm = chosen if chosen in arms else (arms[-1] if arms else None)
    if arm is not None:
        data.page_of(path, other_rows(arm), LIST_LIMIT, 0)


def truncation_by_arm(report: Report) -> pd.DataFrame:
    """Per arm: the truncated rate (of all rows, with its CI and n), the OTHER rows the token limit cut of
    the arm's OTHER rows, and against the control the Δ truncated rate and the Δ OTHER rate with the truncated
    rows left out."""
    rows = []
    for a in report["arms"]:
        x = report["metrics"][a]
        d = (report.get("delta_accuracy") or {}).get(a)
        other, cut = int(x.get("other_rows") or 0), int(x.get("truncated_other_rows") or 0)
        rows.append(
            {
                "arm": tables.arm_label(report, a),
                "rows": int(x["rows"]),
                "truncated rows": int(x.get("truncated_rows") or 0),
                "truncated rate %": tables.pct(x.get("truncated_rate")),
                "OTHER rows cut by the token limit": f"{cut:,} of {other:,}",
                "Δ truncated rate (pp)": tables.pct(d.get("truncated_rate"), sign=True) if d else "",
                "Δ OTHER rate, truncated left out (pp)": (
                    tables.pct(d.get("other_rate_untruncated"), sign=True) if d else ""
                ),
            }
        )
    return pd.DataFrame(rows)


def truncation_by_orientation(report: Report) -> pd.DataFrame:
    """Per arm and orientation: the truncated rate with its CI and n (rows)."""
    rows = []
    for a in report["arms"]:
        for o, m in (report["metrics"][a].get("truncated_rate_by_orientation") or {}).items():
            rows.append(
                {"arm": tables.arm_label(report, a), "orientation": o, "truncated rate %": tables.pct(m)}
            )
    return pd.DataFrame(rows, columns=["arm", "orientation", "truncated rate %"])


def page() -> None:
    c = load()
    render_other(c.report, c.meta, data.verdict_counts(c.path, c.version), c.path)
