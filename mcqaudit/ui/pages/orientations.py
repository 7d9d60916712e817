"""Orientations: accuracy per orientation per arm with CIs, Δ per orientation, circular accuracy."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from mcqaudit import plots
from mcqaudit.metrics.results import Report
from mcqaudit.ui import components, groups, tables
from mcqaudit.ui.pages import load


def render_orientations(report: Report, meta: Mapping[str, str | None], path: str) -> None:
    st.title("Orientations")
    components.provenance(report, meta)
    components.flags(report["flags"], only=["design_imbalance", "orientation_instability"], links=False)
    st.markdown(
        "Every item is asked in several option orders. An intervention that changes knowledge moves accuracy "
        "the same way in every orientation; a position preference helps where the gold sits in the preferred "
        "place and hurts elsewhere."
    )
    fams = tables.families(report)
    if len(fams) > 1:
        st.caption(
            "Items fall into families by their orientation set (each family's items are shown in the same "
            "orientations). Orientations are compared only within a family: AB and ABCD are shown to "
            "different items."
        )
    elif not fams:
        st.caption("No item family (the items sharing one orientation set) has enough items to break down.")
    st.subheader("Accuracy by orientation (%)")
    for k, fam in enumerate(fams):
        st.markdown(f"**{tables.md_escape(tables.family_caption(fam))}**")
        st.dataframe(
            tables.accuracy_by_orientation(report, fam), hide_index=True, key=f"acc_by_orientation_{k}"
        )
        st.plotly_chart(plots.fig_orientation_accuracy(report, fam), key=f"fig_orientation_accuracy_{k}")
    st.subheader(f"Δaccuracy vs control ({tables.md_escape(report.get('control_arm'))}) by orientation (pp)")
    compared = any(d is not None for d in (report.get("delta_accuracy") or {}).values())
    if not compared:
        st.caption("No arm is compared with the control.")
    for k, fam in enumerate(fams if compared else []):
        st.markdown(f"**{tables.md_escape(tables.family_caption(fam))}**")
        st.dataframe(
            tables.delta_by_orientation(report, fam), hide_index=True, key=f"delta_by_orientation_{k}"
        )
        st.plotly_chart(plots.fig_delta_by_orientation(report, fam), key=f"fig_delta_by_orientation_{k}")
    st.subheader("Circular accuracy")
    st.caption("Share of items CORRECT in every orientation they were shown in (MMBench CircularEval).")
    st.dataframe(tables.circular(report), hide_index=True, key="circular")
    groups.orientations_block(report, path)


def page() -> None:
    c = load()
    render_orientations(c.report, c.meta, c.path)
