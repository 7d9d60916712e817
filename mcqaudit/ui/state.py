"""Session-state keys (one place) and :func:`init_state`, which gives each its default once per session.

Widgets never own long-lived state: a widget's own key is dropped by Streamlit when a page that does not
draw it runs, so values that must survive page changes (reviewer, filters, positions) live under the keys
below, and widgets are bound to them with :func:`bind` / :func:`sync`.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

DB_PATH = "db_path"  # the study file this session looks at
PAGES = "pages"  # the st.Page objects of this run, by name (for links and switch_page)
REVIEWER = "reviewer"  # reviewer name, kept for the session
BLIND = "blind"  # blind mode: hide judge verdict and parser letters until the reviewer has decided
# the Review page's filters (see mcqaudit.review.filters.RowFilter)
F_ARMS = "f_arms"
F_ORIENTATIONS = "f_orientations"
F_VERDICTS = "f_verdicts"
F_STATUSES = "f_statuses"
F_DISAGREE = "f_disagree"  # parser name or None
F_REVIEWED = "f_reviewed"  # one of REVIEWED_CHOICES
F_REVIEWERS = "f_reviewers"  # one of mcqaudit.review.filters.REVIEWER_FILTER_VALUES, or None
F_SEARCH = "f_search"
F_CELL = "f_cell"  # a confusion cell handed over from Parsers vs judge (dict) or None
ROW = "row"  # row_id shown on Review (None: the list's first row, or the queue's first unreviewed one)
QUEUE = "queue"  # active spot-check queue_id, or None
URL_READ = "url_read"  # the URL's query parameters were applied to this session (once, at its start)
PARSER = "parser"  # the parser chosen on Parsers vs judge
PARSER_ARM = "parser_arm"
PARSER_ORIENT = "parser_orient"
CELL = "cell"  # the selected confusion cell: dict(parser, verdict, parser_verdict, arm, orientation)
OTHER_ARM = "other_arm"  # arm whose OTHER rows are listed on OTHER by arm
GROUP_BY = "group_by"  # the metadata key the Group by select breaks figures down by (None: no grouping)
FLASH = "flash"  # (kind, message) shown once after a write

ALL_ORIENTATIONS = "all orientations"
REVIEWED_CHOICES = ("all rows", "unreviewed", "reviewed")

DEFAULTS: dict[str, Any] = {
    DB_PATH: None,
    REVIEWER: "",
    BLIND: False,
    F_ARMS: [],
    F_ORIENTATIONS: [],
    F_VERDICTS: [],
    F_STATUSES: [],
    F_DISAGREE: None,
    F_REVIEWED: REVIEWED_CHOICES[0],
    F_REVIEWERS: None,
    F_SEARCH: "",
    F_CELL: None,
    ROW: None,
    QUEUE: None,
    URL_READ: False,
    PARSER: None,
    PARSER_ARM: None,
    PARSER_ORIENT: ALL_ORIENTATIONS,
    CELL: None,
    OTHER_ARM: None,
    GROUP_BY: None,
    FLASH: None,
}

# URL query parameters (docs/design.md §8 review automation contract)
Q_ROW, Q_QUEUE, Q_REVIEWER, Q_BLIND = "row", "queue", "reviewer", "blind"

_WIDGET = "w:"


def init_state() -> None:
    """Give every key its default unless the session already has it (idempotent)."""
    for key, value in DEFAULTS.items():
        if key not in st.session_state:
            st.session_state[key] = value.copy() if isinstance(value, list | dict) else value


def widget_key(key: str) -> str:
    return _WIDGET + key


def bind(key: str, value: Any | None = None) -> str:
    """The widget key for session key ``key``, seeded from it (or ``value``) when the widget is new."""
    wkey = widget_key(key)
    if wkey not in st.session_state:
        st.session_state[wkey] = st.session_state.get(key) if value is None else value
    return wkey


def sync(key: str) -> None:
    """on_change callback: copy the widget's value into the long-lived key."""
    st.session_state[key] = st.session_state[widget_key(key)]


def set_value(key: str, value: Any) -> None:
    """Set a long-lived value from code; its widget is re-seeded the next time it is drawn."""
    st.session_state[key] = value
    st.session_state.pop(widget_key(key), None)


def flash(kind: str, message: str) -> None:
    st.session_state[FLASH] = (kind, message)


def read_url() -> bool:
    """Apply the URL's ``row``, ``queue``, ``reviewer`` and ``blind`` to a new session (a reload, a shared
    link); later runs keep the session's own values. True when the URL asks for the Review page."""
    s = st.session_state
    if s.get(URL_READ):
        return False
    s[URL_READ] = True
    qp = st.query_params
    if qp.get(Q_REVIEWER, "").strip():
        set_value(REVIEWER, qp[Q_REVIEWER].strip())
    if Q_BLIND in qp:
        set_value(BLIND, qp[Q_BLIND].strip().lower() in ("1", "true", "yes", "on"))
    wants_review = False
    if qp.get(Q_QUEUE, "").strip().isdigit():
        set_value(QUEUE, int(qp[Q_QUEUE]))
        wants_review = True
    if qp.get(Q_ROW, "").strip():
        s[ROW] = qp[Q_ROW].strip()
        wants_review = True
    return wants_review


def write_url(**values: str | None) -> None:
    """Make the URL name these values (None: drop the parameter); unchanged parameters are not rewritten."""
    qp = st.query_params
    for key, value in values.items():
        if value is None or value == "":
            if key in qp:
                del qp[key]
        elif qp.get(key) != value:
            qp[key] = value


def write_session_url() -> None:
    """The parameters every page keeps in its URL: the reviewer name and blind mode."""
    s = st.session_state
    write_url(**{Q_REVIEWER: (s.get(REVIEWER) or "").strip() or None, Q_BLIND: "1" if s.get(BLIND) else None})
