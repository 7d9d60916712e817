"""Small shared pieces of the pages: provenance banners, flags with links, plain-text boxes, page links."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import streamlit as st

from mcqaudit.formatting import md_rich
from mcqaudit.metrics.results import Flag, Report
from mcqaudit.report import STANDIN_BANNER, UNAUDITED_BANNER
from mcqaudit.ui import state
from mcqaudit.ui.tables import md_escape

if TYPE_CHECKING:
    import pandas as pd

DEMO_BANNER = (
    "Demo data: the generations in this study were written by sample_runs/simulate.py, a simulated "
    "respondent, not a real model."
)

FLAG_HELP = {
    "suspected_parser_artifact": "a parser's letters give a different Δ than the judge: the parser, not the model, made (or hid) the effect",
    "orientation_instability": "the effect depends on the option order: position bias, not the intervention",
    "other_rate_rise": "the treated arm says OTHER more often: recompute with OTHER excluded",
    "truncation_rise": "the treated arm is cut by the token limit more often: its OTHER rise may be the token budget, not a preference",
    "parser_disagreement": "a parser misreads the answer's letter (or, where no letter is known, disagrees with the verdict) on more than 5 % of rows",
    "judge_config_mixed": "arms were graded by different judge configurations",
    "judge_unaudited": "no person has checked the judge yet",
    "ungraded_rows": "some rows have no verdict (judge error or pending)",
    "logprob_mismatch": "the argmax log-prob letter differs from the text's answer on more than 5 % of rows, or the two accuracies differ by more than 5 pp",
    "design_imbalance": "the design cannot separate position from content: position figures are unreadable",
}


def provenance(report: Report | None, meta: Mapping[str, str | None]) -> None:
    """The banners every page starts with: stand-in judge, unaudited study, demo data (``report`` None:
    from the study settings alone)."""
    from mcqaudit.demo import is_demo

    study = report.get("study") if report else None
    if study and study.get("standin_judge"):
        st.warning(STANDIN_BANNER, icon=":material/warning:")
    if (study and study.get("unaudited")) or (report is None and (meta.get("unaudited") or "").lower() == "true"):
        st.warning(UNAUDITED_BANNER, icon=":material/warning:")
    if is_demo(meta):
        st.info(DEMO_BANNER, icon=":material/science:")


def page_link(name: str, label: str | None = None, **kw: Any) -> None:
    pages = st.session_state.get(state.PAGES) or {}
    if name in pages:
        st.page_link(pages[name], label=label or f"Open {name}", **kw)


def switch_to(name: str) -> None:
    pages = st.session_state.get(state.PAGES) or {}
    if name in pages:
        st.switch_page(pages[name])


def flag_table(instances: Sequence[Flag]) -> pd.DataFrame:
    """One row per instance of a flag: arm, parser (where the flag names one), evidence, items, rows."""
    import pandas as pd

    # the columns made with their dtypes at once (a drop and two casts afterwards took ~2 ms a table)
    cols: dict[str, object] = {"arm": [f.get("arm") or "—" for f in instances]}
    if any(f.get("parser") for f in instances):
        cols["parser"] = [f.get("parser") or "—" for f in instances]
    cols["evidence"] = [f["evidence"] for f in instances]
    for c in ("items", "rows"):
        cols[c] = pd.array([f.get(c) for f in instances], dtype="Int64")
    return pd.DataFrame(cols)


def flags(
    flag_list: Sequence[Flag], *, only: Sequence[str] | None = None, links: bool = True
) -> None:
    """The flags grouped by name: one card per flag name with what it means, a compact table of its
    instances (arm, parser, evidence, n) and a link to the page that shows the evidence (``only``: these
    flag names)."""
    shown = [f for f in flag_list if only is None or f["name"] in only]
    if not shown:
        if only is None:
            st.success("No diagnostic fired.")
        return
    groups: dict[str, list[Flag]] = {}
    for f in shown:
        groups.setdefault(f["name"], []).append(f)
    for name, instances in groups.items():
        with st.container(border=True, key=f"flag-{name}"):
            count = f" ({len(instances)})" if len(instances) > 1 else ""
            st.markdown(f":material/flag: **{name}**{count} — {md_escape(FLAG_HELP.get(name, ''))}")
            if len(instances) == 1 and not instances[0].get("arm") and instances[0].get("items") is None:
                st.markdown(md_rich(instances[0]["evidence"]))
            else:
                st.dataframe(flag_table(instances), hide_index=True, key=f"flagtable-{name}")
            page = instances[0].get("page")
            if links and page:
                page_link(page, label=f"Evidence: {page} →")


def plain_text(text: str | None, *, empty: str = "(empty)") -> None:
    """Untrusted text (a generation, a judge reply) shown verbatim: never rendered as Markdown or HTML."""
    if text is None or text == "":
        st.caption(empty)
        return
    st.code(text, language=None, wrap_lines=True)


def flash() -> None:
    msg = st.session_state.get(state.FLASH)
    if msg:
        kind, text = msg
        # success messages are ours; an error may quote user input, so it is shown escaped
        st.success(text) if kind == "success" else st.error(md_escape(text))
        st.session_state[state.FLASH] = None


_TEXT_STYLE = (
    "white-space: pre-wrap; word-break: break-word; font-family: 'Source Code Pro', monospace; "
    "font-size: 0.85rem; line-height: 1.5; background: rgba(151, 166, 195, 0.12); border-radius: 0.5rem; "
    "padding: 0.75rem 1rem; margin: 0;"
)
_MARK_STYLE = (
    "background: #ffd54f; color: #000; border-radius: 0.2rem; padding: 0 0.1rem; outline: 1px solid #f9a825;"
)


def highlighted_text(text: str, start: int, end: int, title: str) -> None:
    """Untrusted text shown verbatim with one span marked: every character of the text is HTML-escaped and
    only our own ``<pre>`` and ``<mark>`` tags are markup, so nothing in the text can become an element."""
    esc = html.escape
    body = (
        esc(text[:start])
        + f'<mark data-testid="mq-parser-span" title="{esc(title)}" style="{_MARK_STYLE}">'
        + esc(text[start:end])
        + "</mark>"
        + esc(text[end:])
    )
    st.html(f'<pre data-testid="mq-generation" style="{_TEXT_STYLE}">{body}</pre>')
