"""Small shared pieces of the pages: provenance banners, flags with links, plain-text boxes, page links."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st

from mcqaudit.report import STANDIN_BANNER, UNAUDITED_BANNER
from mcqaudit.ui import state
from mcqaudit.ui.tables import md_escape

DEMO_BANNER = (
    "Demo data: the generations in this study were written by sample_runs/simulate.py, a simulated "
    "respondent, not a real model."
)

FLAG_HELP = {
    "suspected_parser_artifact": "a parser's letters give a different Δ than the judge: the parser, not the model, made (or hid) the effect",
    "orientation_instability": "the effect depends on the option order: position bias, not the intervention",
    "other_rate_rise": "the treated arm says OTHER more often: recompute with OTHER excluded",
    "parser_disagreement": "a parser disagrees with the verdicts on more than 5 % of rows",
    "judge_config_mixed": "arms were graded by different judge configurations",
    "judge_unaudited": "no person has checked the judge yet",
    "ungraded_rows": "some rows have no verdict (judge error or pending)",
    "logprob_mismatch": "log-prob and text accuracy differ by more than 5 pp",
}


def provenance(report: Mapping[str, Any] | None, meta: Mapping[str, str | None]) -> None:
    """The banners every page starts with: stand-in judge, unaudited study, demo data (``report`` None:
    from the study settings alone)."""
    from mcqaudit.demo import is_demo

    study = (report or {}).get("study", {})
    if study.get("standin_judge"):
        st.warning(STANDIN_BANNER, icon=":material/warning:")
    if study.get("unaudited") or (report is None and (meta.get("unaudited") or "").lower() == "true"):
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


def flags(
    flag_list: Sequence[Mapping[str, Any]], *, only: Sequence[str] | None = None, links: bool = True
) -> None:
    """Each flag with its evidence and a link to the page that shows it (``only``: these flag names)."""
    shown = [f for f in flag_list if only is None or f["name"] in only]
    if not shown:
        if only is None:
            st.success("No diagnostic fired.")
        return
    for k, f in enumerate(shown):
        with st.container(border=True, key=f"flag-{k}-{f['name']}"):
            arm = f" · arm {md_escape(f['arm'])}" if f.get("arm") else ""
            st.markdown(f":material/flag: **{f['name']}**{arm} — {md_escape(FLAG_HELP.get(f['name'], ''))}")
            st.markdown(md_escape(f["evidence"]))
            if links and f.get("page"):
                page_link(f["page"], label=f"Evidence: {f['page']} →")


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
