"""The "Group by" select of Overview, Orientations and OTHER by arm (docs/design.md §7 ``by_group``).

A study whose rows (or items) carry metadata gets a select of its keys on those pages; choosing one shows
the page's figures per value of the key — Overview: accuracy, OTHER rate and Δaccuracy per group; Orientations:
accuracy by group and by orientation within each group; OTHER by arm: OTHER (and truncated) rate and their Δs
per group — each with its n, small groups (under 20 items) marked and given no Δ. "No grouping" (the
default) adds nothing else to the page, and a study without metadata gets no select at all. The key chosen
is kept for the session (:data:`~mcqaudit.ui.state.GROUP_BY`), so every page shows the same grouping.

The figures come from :func:`mcqaudit.app.report.groups_of` (the report's ``by_group``), cached per (study
version, resamples, control, key), on the report's control arm.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from mcqaudit.app.report import GroupByError, groups_of, load_frames, metadata_keys
from mcqaudit.metrics.results import GroupArm, Notes, Report
from mcqaudit.reading import any_truncated, group_label
from mcqaudit.report import note_label
from mcqaudit.ui import data, state, tables

NO_GROUPING = "no grouping"
LABEL = "Group by"


@st.cache_data(show_spinner=False, max_entries=8)
def keys(path: str, version: data.Version) -> list[str]:
    """The metadata keys of the study's rows and items."""
    return metadata_keys(data.get_study(path))


@st.cache_data(show_spinner="Computing the figures by group…", max_entries=8)
def grouped(path: str, version: data.Version, n_boot: int, control: str | None, key: str) -> dict[str, Any]:
    """``by_group``, ``group_by`` and their notes for one key: what :func:`with_groups` adds to a report."""
    frames = load_frames(data.get_study(path), "final", [key])
    notes: Notes = {}
    by, facts = groups_of(frames, control, notes, n_boot=n_boot, seed=data.SEED)
    return {"by_group": by, "group_by": facts, "notes": notes}


def with_groups(report: Report, path: str, key: str) -> Report | None:
    """A copy of ``report`` with ``by_group`` and ``group_by`` for ``key`` (and their notes); None, with a
    warning on the page, for a key the figures cannot be grouped by (too many values)."""
    v = data.study_version(path)
    try:
        g = grouped(path, v, data.bootstrap(), report.get("control_arm"), key)
    except GroupByError as exc:
        st.warning(tables.md_escape(str(exc).removeprefix("--by ")))
        return None
    out: Report = {**report, "by_group": g["by_group"], "group_by": g["group_by"]}
    out["notes"] = {**report.get("notes", {}), **g["notes"]}
    return out


def choose(path: str) -> str | None:
    """The Group by select (only for a study with metadata): the key chosen, or None for no grouping."""
    options = keys(path, data.study_version(path))
    if not options:
        return None
    chosen_before = st.session_state.get(state.GROUP_BY)
    if chosen_before is not None and chosen_before not in options:  # another study's key
        state.set_value(state.GROUP_BY, None)
    chosen = st.selectbox(
        LABEL,
        [NO_GROUPING, *options],
        key=state.bind(state.GROUP_BY, st.session_state.get(state.GROUP_BY) or NO_GROUPING),
        on_change=_sync,
        help="Break this page's figures down by a metadata key of the rows (e.g. the subject): each group "
        "with its n; groups under 20 items are marked small and get no Δ.",
    )
    return None if chosen == NO_GROUPING else str(chosen)


def _sync() -> None:
    value = st.session_state[state.widget_key(state.GROUP_BY)]
    st.session_state[state.GROUP_BY] = None if value == NO_GROUPING else value


# --- tables (pure: from the report dict) -------------------------------------------------------------------
def _entries(report: Report, key: str) -> list[tuple[str, str, GroupArm]]:
    """(group label with its items, arm label, entry) for every group and arm, in the report's order."""
    out = []
    for value, entry in (report.get("by_group") or {}).get(key, {}).items():
        for arm, e in entry.items():
            out.append((group_label(report, key, value, items=True), tables.arm_label(report, arm), e))
    return out


def _delta(report: Report, arm_label: str, e: GroupArm, metric: str) -> str:
    if arm_label == tables.arm_label(report, str(report.get("control_arm"))):
        return ""
    m = e.get(metric)
    if m is None:
        return "n/a (small)" if e["small"] else "n/a (see notes)"
    return tables.pct(m, sign=True)  # type: ignore[arg-type]


def overview_table(report: Report, key: str) -> pd.DataFrame:
    """Per group and arm: rows, accuracy, answered accuracy and OTHER rate with CI and n, the Δaccuracy vs
    control, and whether the group is small."""
    rows = []
    for group, arm, e in _entries(report, key):
        rows.append(
            {
                key: group,
                "arm": arm,
                "rows": e["rows"],
                "accuracy %": tables.pct(e["accuracy"]),
                "answered accuracy %": tables.pct(e["answered_accuracy"]),
                "OTHER rate %": tables.pct(e["other_rate"]),
                "Δaccuracy (pp)": _delta(report, arm, e, "delta_accuracy"),
                "small": e["small"],
            }
        )
    return pd.DataFrame(rows)


def orientation_table(report: Report, key: str) -> pd.DataFrame:
    """Per group and arm: accuracy in each orientation (CI and n), beside the group's accuracy."""
    orients = list((report.get("study") or {}).get("orientations") or [])
    rows = []
    for group, arm, e in _entries(report, key):
        by = e["accuracy_by_orientation"]
        rows.append({key: group, "arm": arm, "accuracy %": tables.pct(e["accuracy"]),
                     **{o: tables.pct(by[o]) if o in by else "" for o in orients}})  # fmt: skip
    return pd.DataFrame(rows)


def other_table(report: Report, key: str) -> pd.DataFrame:
    """Per group and arm: OTHER rate and its Δ, and where rows were cut by the token limit, the truncated
    rate and its Δ."""
    cut = any_truncated(report)
    rows = []
    for group, arm, e in _entries(report, key):
        row: dict[str, object] = {
            key: group,
            "arm": arm,
            "rows": e["rows"],
            "OTHER rate %": tables.pct(e["other_rate"]),
            "Δ OTHER rate (pp)": _delta(report, arm, e, "delta_other_rate"),
        }
        if cut:
            row["truncated rate %"] = tables.pct(e["truncated_rate"])
            row["Δ truncated rate (pp)"] = _delta(report, arm, e, "delta_truncated_rate")
        row["small"] = e["small"]
        rows.append(row)
    return pd.DataFrame(rows)


# --- the blocks each page calls once ------------------------------------------------------------------------
def _caption(report: Report, key: str) -> None:
    facts = report["group_by"][key]
    missing = (
        f" Rows whose metadata lacks {key} are the group {facts['missing']}." if facts["missing"] else ""
    )
    small = (
        f" Small (under {facts['min_items']} items: shown with their n, no Δ, no finding): "
        + ", ".join(f"{v} ({facts['items'][v]} items)" for v in facts["small"])
        + "."
        if facts["small"]
        else ""
    )
    st.caption(
        tables.md_escape(
            f"{facts['groups']} groups by {facts['path']}; each group's CIs resample its own items and are not "
            f"corrected for the number of groups compared.{missing}{small}"
        )
    )
    notes = {k: v for k, v in (report.get("notes") or {}).items() if k.startswith(f"by_group.{key}.")}
    if notes:
        with st.expander(f"Notes ({len(notes)}): group figures that could not be computed, and why"):
            for k, v in notes.items():
                st.markdown(f"- {tables.md_escape(note_label(k, report))}: {tables.md_escape(v)}")


def overview_block(report: Report, path: str) -> None:
    """Overview: accuracy, OTHER rate and the Δaccuracy vs control per group."""
    from mcqaudit.plots import fig_group_delta

    key = choose(path)
    rep = with_groups(report, path, key) if key is not None else None
    if key is None or rep is None:
        return
    st.subheader(f"By {tables.md_escape(key)}")
    _caption(rep, key)
    st.plotly_chart(fig_group_delta(rep, key), key="fig_group_delta", config={"displaylogo": False})
    st.dataframe(overview_table(rep, key), hide_index=True, key="group_overview")


def orientations_block(report: Report, path: str) -> None:
    """Orientations: accuracy per group and arm, and by orientation within each group."""
    from mcqaudit.plots import fig_group_rates

    key = choose(path)
    rep = with_groups(report, path, key) if key is not None else None
    if key is None or rep is None:
        return
    st.subheader(f"Accuracy by {tables.md_escape(key)}")
    _caption(rep, key)
    st.plotly_chart(fig_group_rates(rep, key), key="fig_group_accuracy", config={"displaylogo": False})
    st.dataframe(orientation_table(rep, key), hide_index=True, key="group_orientations")


def other_block(report: Report, path: str) -> None:
    """OTHER by arm: OTHER rate (and truncated rate) per group and arm, and their Δs vs control."""
    from mcqaudit.plots import fig_group_rates

    key = choose(path)
    rep = with_groups(report, path, key) if key is not None else None
    if key is None or rep is None:
        return
    st.subheader(f"OTHER rate by {tables.md_escape(key)}")
    _caption(rep, key)
    st.plotly_chart(
        fig_group_rates(rep, key, "other_rate"), key="fig_group_other", config={"displaylogo": False}
    )
    if any_truncated(rep):
        st.plotly_chart(
            fig_group_rates(rep, key, "truncated_rate"),
            key="fig_group_truncated",
            config={"displaylogo": False},
        )
    st.dataframe(other_table(rep, key), hide_index=True, key="group_other")
