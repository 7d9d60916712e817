"""Overview: flags first, the headline per arm, the control arm, judge fingerprints, review coverage."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from mcqaudit.formatting import md_rich, pairing_words, plural
from mcqaudit.metrics.results import Report
from mcqaudit.report import ci_words, names_in, note_label, panel_lines
from mcqaudit.ui import components, data, groups, tables
from mcqaudit.ui.pages import load


def render_findings(report: Report) -> None:
    """The study's story in a few sentences, each with its number, CI and n (written by the report)."""
    found = report.get("findings") or []
    st.subheader("Findings")
    # news first: whether the finding holds under every judge, how far the reviewers agree; a study with one
    # judge and no second reviewer gets its one line (a caveat) under the findings, which keep the first screen
    news_first = bool(report.get("judge_panel") or report.get("reviewer_agreement"))
    if news_first or not found:
        render_judges(report)
    if not found:
        st.caption("Nothing to report yet: no arm can be compared with the control.")
        return
    names = names_in(report)
    # checks that found nothing to worry about (the Δ holds per orientation, a parser in line with the
    # verdicts) are kept, one click away, so that the news stays in the first screen as arms are added
    quiet = [f for f in found if _is_quiet(f)]
    news = [f for f in found if not _is_quiet(f)]
    # each finding's words escaped (names are text), its `command` spans kept as code
    st.markdown("\n".join(f"- {md_rich(' '.join(f['text'].split()), names)}" for f in news))
    if quiet:
        with st.expander(f"{plural(len(quiet), 'more finding')}: checks that found the result holds"):
            st.markdown("\n".join(f"- {md_rich(' '.join(f['text'].split()), names)}" for f in quiet))
    if not news_first:
        render_judges(report)


def _is_quiet(f: Mapping[str, object]) -> bool:
    return (f.get("kind") == "orientation" and f.get("holds") is True) or (
        f.get("kind") == "parser" and f.get("artifact") is False
    )


def render_judges(report: Report) -> None:
    """Whether the finding holds under every judge on the panel (with Krippendorff's α), or that the study has
    one judge only; and how far the reviewers agree — each with its n (:func:`mcqaudit.report.panel_lines`)."""
    names = names_in(report)
    st.caption("  \n".join(md_rich(" ".join(line.split()), names) for line in panel_lines(report)))


CARDS_PER_ROW = 3


def render_cards(report: Report) -> None:
    """Headline figures per arm: accuracy and OTHER rate with their CI and n. Three cards a row at most: in a
    fourth the two figures of a card no longer fit its width ("71.…")."""
    arms = list(report["arms"])
    cols = st.columns(max(1, min(len(arms), CARDS_PER_ROW)))
    for k, arm in enumerate(arms):
        m = report["metrics"][arm]
        with cols[k % len(cols)], st.container(border=True):
            st.markdown(f"**{tables.md_escape(tables.arm_label(report, arm))}** · {int(m['rows'])} rows")
            c1, c2 = st.columns(2)
            acc, oth = m["accuracy"], m["other_rate"]
            c1.metric(
                f"accuracy · {tables.md_escape(arm)}",
                f"{acc['value'] * 100:.1f} %" if acc and acc["value"] is not None else tables.NA,
                help=f"95 % CI {tables.pct(acc)}; item-weighted; OTHER counts as not correct",
            )
            c2.metric(
                f"OTHER rate · {tables.md_escape(arm)}",
                f"{oth['value'] * 100:.1f} %" if oth and oth["value"] is not None else tables.NA,
                help=f"95 % CI {tables.pct(oth)}; ungraded rows are counted apart",
            )
            st.caption(f"accuracy {tables.pct(acc)} · OTHER rate {tables.pct(oth)}")


def render_overview(
    report: Report, meta: Mapping[str, str | None], counts: Mapping[str, int], path: str
) -> None:
    st.title("Overview")
    components.provenance(report, meta)
    render_cards(report)
    render_findings(report)
    kinds = len({f["name"] for f in report["flags"]})
    st.subheader(f"Flags ({plural(kinds, 'kind')}, {len(report['flags'])} in all)")
    components.flags(report["flags"])

    st.subheader("Headline")
    st.dataframe(tables.headline(report), hide_index=True, key="headline")
    boot = report.get("bootstrap", {})
    st.caption(
        f"Rates in percent with their n; CIs: {ci_words(boot)}; verdicts: {report['study'].get('verdicts')} (latest review, "
        "else judge, else pre-filter, else rule)."
    )

    st.subheader("Δ vs control")
    ctrl = report.get("control_arm")
    st.caption(f"Control arm: **{tables.md_escape(ctrl)}** (change it in the sidebar; stored in the study).")
    pw = tables.pairwise(report)
    if pw is not None:
        from mcqaudit.plots import fig_pairwise_delta

        st.plotly_chart(fig_pairwise_delta(report), key="pairwise", config={"displaylogo": False})
        with st.expander("The pairwise Δ as a table"):
            st.dataframe(pw, key="pairwise_table")
    d = tables.deltas(report)
    if len(d):
        how = pairing_words(report.get("delta_accuracy") or {})
        st.markdown(
            f"Δ vs control ({tables.md_escape(ctrl)}), in percentage points, {tables.md_escape(how)}:"
        )
        st.dataframe(d, hide_index=True, key="deltas")
    groups.overview_block(report, path)

    st.subheader("Judge")
    fps = tables.fingerprints(report)
    if len(fps):
        st.dataframe(fps, hide_index=True, key="fingerprints")
    else:
        st.caption("No judge verdicts yet (rows resolved by the strict pre-filter or rule only).")

    st.subheader("Reviews")
    st.markdown(
        f"{plural(counts['reviews'], 'review')} recorded; {plural(counts['reviewed_rows'], 'row')} reviewed by "
        f"{plural(counts['reviewers'], 'reviewer')}."
    )
    ag = tables.judge_agreement(report)
    if len(ag):
        st.dataframe(ag, hide_index=True, key="agreement")
    components.page_link("Review", label="Review rows →")
    notes = report.get("notes") or {}
    if notes:
        with st.expander(f"Notes ({len(notes)}): metrics that could not be computed, and why"):
            for k, v in notes.items():
                st.markdown(f"- {tables.md_escape(note_label(k, report))}: {tables.md_escape(v)}")


def page() -> None:
    c = load()
    render_overview(c.report, c.meta, data.review_counts(c.path, c.version), c.path)
