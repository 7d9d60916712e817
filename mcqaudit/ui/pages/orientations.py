"""Orientations: accuracy per orientation per arm with CIs, Δ per orientation, circular accuracy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from mcqaudit import plots
from mcqaudit.ui import components, tables
from mcqaudit.ui.pages import load


def render_orientations(report: Mapping[str, Any], meta: Mapping[str, str | None]) -> None:
    st.title("Orientations")
    components.provenance(report, meta)
    components.flags(report["flags"], only=["design_imbalance", "orientation_instability"], links=False)
    st.markdown(
        "Every item is asked in several option orders. An intervention that changes knowledge moves accuracy "
        "the same way in every orientation; a position preference helps where the gold sits in the preferred "
        "place and hurts elsewhere."
    )
    st.subheader("Accuracy by orientation (%)")
    st.dataframe(tables.accuracy_by_orientation(report), hide_index=True, key="acc_by_orientation")
    st.plotly_chart(plots.fig_orientation_accuracy(report), key="fig_orientation_accuracy")
    st.subheader(f"Δaccuracy vs control ({tables.md_escape(report.get('control_arm'))}) by orientation (pp)")
    d = tables.delta_by_orientation(report)
    if len(d):
        st.dataframe(d, hide_index=True, key="delta_by_orientation")
    else:
        st.caption("No arm is compared with the control.")
    st.plotly_chart(plots.fig_delta_by_orientation(report), key="fig_delta_by_orientation")
    st.subheader("Circular accuracy")
    st.caption("Share of items CORRECT in every orientation they were shown in (MMBench CircularEval).")
    st.dataframe(tables.circular(report), hide_index=True, key="circular")


def page() -> None:
    c = load()
    render_orientations(c.report, c.meta)
