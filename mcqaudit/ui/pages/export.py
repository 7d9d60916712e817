"""Export: the report (HTML, Markdown, JSON), rows with final verdicts (CSV, Parquet), the review log (CSV);
what grading cost so far (the tokens each judge reply's usage reported, per judge configuration); and
importing a review log (as `mcqaudit reviews import` does)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import streamlit as st

from mcqaudit.app.info import JudgeUsage
from mcqaudit.app.reviews import StudyError
from mcqaudit.metrics.results import Report
from mcqaudit.review.log import ReviewImportError
from mcqaudit.ui import components, data, state, tables
from mcqaudit.ui.pages import load


def render_export(report: Report, meta: Mapping[str, str | None], path: str) -> None:
    from mcqaudit.report import to_html, to_markdown

    st.title("Export")
    components.provenance(report, meta)
    stem = Path(path).stem
    st.subheader("Report")
    st.caption("The same numbers as every page (and as `mcqaudit report`), flags first.")
    c1, c2, c3 = st.columns(3)
    c1.download_button(
        "Report (HTML)",
        lambda: to_html(report),
        f"{stem}-report.html",
        "text/html",
        key="dl_html",
        on_click="ignore",
    )
    c2.download_button(
        "Report (Markdown)",
        lambda: to_markdown(report),
        f"{stem}-report.md",
        "text/markdown",
        key="dl_md",
        on_click="ignore",
    )
    c3.download_button(
        "Report (JSON)",
        lambda: json.dumps(report, indent=2, ensure_ascii=False) + "\n",
        f"{stem}-report.json",
        "application/json",
        key="dl_json",
        on_click="ignore",
    )
    st.subheader("Rows with final verdicts")
    st.caption(
        f"All {report.get('rows', 0)} rows of graded_rows (the public view), with their final verdict and its source."
    )
    c1, c2 = st.columns(2)
    c1.download_button(
        "Rows (CSV)",
        lambda: data.export_rows(path, "csv"),
        f"{stem}-rows.csv",
        "text/csv",
        key="dl_rows_csv",
        on_click="ignore",
    )
    c2.download_button(
        "Rows (Parquet)",
        lambda: data.export_rows(path, "parquet"),
        f"{stem}-rows.parquet",
        "application/vnd.apache.parquet",
        key="dl_rows_parquet",
        on_click="ignore",
    )
    st.subheader("Review log")
    st.caption(
        "Every review, retractions included, with reviewer, time, prior verdict and judge fingerprint. "
        "A collaborator brings it into their copy with `mcqaudit reviews import FILE --db STUDY`."
    )
    st.download_button(
        "Review log (CSV)",
        lambda: data.review_log_csv(path),
        f"{stem}-reviews.csv",
        "text/csv",
        key="dl_reviews",
        on_click="ignore",
    )
    render_cost(usage(path, data.study_version(path)))
    render_import(path)
    components.flash()


@st.cache_data(show_spinner=False, max_entries=8)
def usage(path: str, version: data.Version) -> dict[str, JudgeUsage]:
    """Per judge fingerprint, the usage its replies reported (``info --json``'s ``judge_usage``)."""
    from mcqaudit.app.info import judge_usage

    return judge_usage(data.get_study(path))


COST_COLUMNS = [
    "fingerprint",
    "model",
    "replies",
    "prompt tokens",
    "completion tokens",
    "replies without usage",
    "requests failed",
]


def cost_frame(
    usage: Mapping[str, JudgeUsage], price_in: float = 0.0, price_out: float = 0.0
) -> pd.DataFrame:
    """One row per judge configuration: its replies (n), the tokens those that reported usage reported, how
    many did not (unknown, not counted), requests that got no reply, and with both prices the cost of the
    counted tokens in USD ("or more" when some replies reported no usage)."""
    rows = []
    for fp, u in usage.items():
        row: dict[str, object] = {
            "fingerprint": fp,
            "model": u["model"],
            "replies": f"{u['requests']:,}",
            "prompt tokens": f"{u['prompt_tokens']:,}",
            "completion tokens": f"{u['completion_tokens']:,}",
            "replies without usage": f"{u['requests_without_usage']:,}",
            "requests failed": f"{u['requests_failed']:,}",
        }
        if price_in > 0 and price_out > 0:
            cost = (u["prompt_tokens"] * price_in + u["completion_tokens"] * price_out) / 1e6
            row["cost (USD)"] = f"{cost:,.4f}" + (" or more" if u["requests_without_usage"] else "")
        rows.append(row)
    return pd.DataFrame(
        rows, columns=[*COST_COLUMNS, *(["cost (USD)"] if price_in > 0 and price_out > 0 else [])]
    )


def render_cost(usage: Mapping[str, JudgeUsage]) -> None:
    """What grading cost so far: the tokens per judge configuration, as the endpoint reported them."""
    st.subheader("What grading cost so far")
    if not usage:
        st.caption("No judge has been run on this study: no tokens spent.")
        return
    unknown = sum(u["requests_without_usage"] for u in usage.values())
    st.caption(
        "Tokens as the judge endpoint reported them in each reply's `usage` (`mcqaudit info --json`: "
        "`judge_usage`), summed per judge configuration over its replies (re-asks and batch lines each one; rows "
        "answered from earlier replies sent nothing); the tokens are those of the replies that reported them. "
        + (
            f"**{unknown:,}** replies reported no usage: their tokens are unknown and not counted (never as 0). "
            if unknown
            else "Every reply reported its usage. "
        )
        + "The study holds no prices: give yours to see the cost (the Batch API bills half; this does not know "
        "which replies came through it)."
    )
    c1, c2 = st.columns(2)
    p_in = c1.number_input("USD per million prompt tokens", min_value=0.0, value=0.0, step=0.5, key="cost_in")
    p_out = c2.number_input(
        "USD per million completion tokens", min_value=0.0, value=0.0, step=0.5, key="cost_out"
    )
    st.dataframe(cost_frame(usage, float(p_in), float(p_out)), hide_index=True, width="stretch")


def render_import(path: str) -> None:
    """The expander that imports a review log or labels (``mcqaudit reviews import``)."""
    with st.expander("Import a review log or your team's labels"):
        st.caption(
            "A review log from `reviews export`, or labels: `row_id` (or `arm, item_id, orientation, sample`), "
            "`verdict`, optional `picked_letter, reviewer, note, reviewed_at`."
        )
        up = st.file_uploader("Review log or labels (CSV or JSONL)", type=["csv", "jsonl"], key="import_log")
        who = st.text_input(
            "Reviewer for lines without one",
            value=st.session_state.get(state.REVIEWER) or "",
            key="import_reviewer",
        )
        if up is not None and st.button("Import", key="import_go", disabled=data.read_only(path)):
            with tempfile.TemporaryDirectory() as tmp:
                p = Path(tmp) / Path(up.name).name
                p.write_bytes(up.getvalue())
                try:
                    res = data.import_review_log(
                        path, str(p), origin=f"import:{up.name}", reviewer=who.strip() or None
                    )
                except ReviewImportError as exc:
                    st.error(
                        "Nothing imported:\n\n"
                        + "\n".join(f"- {tables.md_escape(x)}" for x in exc.problems[:20])
                    )
                except StudyError as exc:
                    st.error(f"Nothing imported: {tables.md_escape(str(exc))}")
                else:
                    state.flash(
                        "success",
                        f"Imported {res.added} reviews ({res.confirms} confirmations, {res.overrides} overrides; "
                        f"{res.already_present} already present).",
                    )
                    st.rerun()


def page() -> None:
    c = load()
    render_export(c.report, c.meta, c.path)
