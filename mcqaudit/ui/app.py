"""Routing: the page list, which study this session looks at, and the sidebar every page shares.

``dashboard.py`` calls :func:`main`. The study path comes from (first found) the session, ``--db PATH``
after ``--`` on the ``streamlit run`` line, the ``MCQAUDIT_DB`` environment variable, else the demo study
(built on first use). Tests run one page with ``main(default="review")``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from mcqaudit.ui import data, state
from mcqaudit.ui.tables import md_escape

ENV_DB = "MCQAUDIT_DB"


@dataclass(frozen=True)
class PageSpec:
    name: str  # the title; flags name their page by it (mcqaudit.metrics.FLAG_PAGES)
    url: str
    icon: str
    render: Callable[[], None]
    report: bool = True  # the page shows the report (:func:`mcqaudit.ui.data.analysis`)
    # the page's own cached reads, made with the sidebar's in one open of the study before the page runs
    # (:func:`mcqaudit.ui.data.first_reads`); the page then finds them cached
    reads: tuple[Callable[[str, data.Version], object], ...] = ()


def _specs() -> list[PageSpec]:
    from mcqaudit.ui import groups
    from mcqaudit.ui.pages import bias, export, orientations, other, overview, parsers, review

    return [
        PageSpec("Overview", "overview", ":material/dashboard:", overview.page,
                 reads=(data.review_counts, groups.keys)),
        PageSpec("Orientations", "orientations", ":material/swap_vert:", orientations.page, reads=(groups.keys,)),
        PageSpec("OTHER by arm", "other", ":material/help:", other.page, reads=(groups.keys, other.early_rows)),
        PageSpec("Parsers vs judge", "parsers", ":material/compare:", parsers.page),
        PageSpec("Bias", "bias", ":material/balance:", bias.page),
        PageSpec("Review", "review", ":material/rate_review:", review.page, report=False),
        PageSpec("Export", "export", ":material/download:", export.page, reads=(export.usage,)),
    ]  # fmt: skip


def db_from_argv(argv: list[str]) -> str | None:
    """``--db PATH`` / ``--db=PATH`` or a lone ``*.duckdb`` argument."""
    for k, a in enumerate(argv):
        if a == "--db" and k + 1 < len(argv):
            return argv[k + 1]
        if a.startswith("--db="):
            return a.split("=", 1)[1]
    for a in argv[1:]:
        if a.endswith(".duckdb"):
            return a
    return None


def resolve_db() -> str:
    if st.session_state.get(state.DB_PATH):
        return str(st.session_state[state.DB_PATH])
    path = db_from_argv(sys.argv) or os.environ.get(ENV_DB)
    if not path:
        from mcqaudit.demo import build_demo

        with st.spinner("Building the demo study (ingest + grade with the stand-in judge)…"):
            path = str(build_demo())
    path = str(Path(path).resolve())
    st.session_state[state.DB_PATH] = path
    return path


def sidebar(path: str) -> None:
    with st.sidebar:
        st.caption(f"Study: {md_escape(Path(path).name)}", help=md_escape(path))
        st.text_input(
            "Reviewer",
            key=state.bind(state.REVIEWER),
            on_change=state.sync,
            args=(state.REVIEWER,),
            placeholder="your name",
            help="Recorded with every review you make in this session.",
        )
        st.toggle(
            "Blind mode",
            key=state.bind(state.BLIND),
            on_change=state.sync,
            args=(state.BLIND,),
            help="Hide the judge's verdict and the parsers' letters until you have decided.",
        )
        control_arm(path)
        if data.read_only(path):
            st.caption(":material/lock: Read-only study: every page reads it; nothing can be saved.")


def _set_control(path: str) -> None:
    data.set_control(path, st.session_state[CONTROL_KEY])


CONTROL_KEY = "control_arm_select"
CONTROL_SOURCES = {
    "stored": "stored in the study",
    "named control/base": "the arm named control or base",
    "first ingested": "the first arm ingested: nobody chose it",
    "--control": "chosen for this run",
}


def control_arm(path: str) -> None:
    """The control arm every comparison uses, on every page: the study's stored choice, changeable here
    (stored in the study, so reports and other sessions follow)."""
    v = data.study_version(path)
    arms = data.choices(path, v)["arms"]
    if len(arms) < 2:
        return
    ctrl, source = data.control(path, v)
    st.session_state[CONTROL_KEY] = ctrl if ctrl in arms else arms[0]
    st.selectbox(
        "Control arm",
        arms,
        key=CONTROL_KEY,
        on_change=_set_control,
        args=(path,),
        disabled=data.read_only(path),
        help=f"Every Δ compares an arm with this one ({CONTROL_SOURCES.get(source, source)}). Stored in the "
        "study: reports and other sessions use it too.",
    )


def main(default: str = "overview") -> None:
    st.set_page_config(page_title="mcqaudit", page_icon=":material/fact_check:", layout="wide")
    # less empty space above each page's title, so the first screen holds the findings and the decision
    # ... and an element of the previous run (greyed while a rerun streams in) takes no clicks: a click on
    # the previous row's controls would land on a row no longer on screen
    st.html(
        '<style>[data-testid="stMainBlockContainer"] { padding-top: 2.5rem; }'
        ' [data-stale="true"] { pointer-events: none; }</style>'
    )
    state.init_state()
    wants_review = state.read_url()  # a reload or a shared link: ?row= / ?queue= open Review there
    path = resolve_db()
    if not Path(path).exists():
        st.error(f"No study file at {path}. Create one with `mcqaudit ingest`.")
        st.stop()
    specs = _specs()
    pages = {
        s.name: st.Page(s.render, title=s.name, icon=s.icon, url_path=s.url, default=s.url == default)
        for s in specs
    }
    st.session_state[state.PAGES] = pages
    nav = st.navigation(list(pages.values()))
    if wants_review and nav.title != "Review":
        st.switch_page(pages["Review"], query_params=st.query_params.to_dict())
    spec = next((s for s in specs if s.name == nav.title), None)
    if spec is not None and spec.report:
        # the report computes while the sidebar and the page read their own, once it has read the study
        data.start_analysis(path).wait(data.FRAMES_WAIT_S)
    data.first_reads(path, spec.reads if spec is not None else ())
    sidebar(path)
    state.write_session_url()
    if nav.title != "Review":
        state.write_url(**{state.Q_ROW: None, state.Q_QUEUE: None})
    nav.run()
