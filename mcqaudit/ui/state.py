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
# the Review page's filters (see mcqaudit.store.rows.RowFilter)
F_ARMS = "f_arms"
F_ORIENTATIONS = "f_orientations"
F_VERDICTS = "f_verdicts"
F_STATUSES = "f_statuses"
F_DISAGREE = "f_disagree"  # parser name or None
F_REVIEWED = "f_reviewed"  # one of REVIEWED_CHOICES
F_SEARCH = "f_search"
F_CELL = "f_cell"  # a confusion cell handed over from Parsers vs judge (dict) or None
POS = "pos"  # 0-based position of the shown row within the Review list
QUEUE = "queue"  # active spot-check queue_id, or None
PARSER = "parser"  # the parser chosen on Parsers vs judge
PARSER_ARM = "parser_arm"
PARSER_ORIENT = "parser_orient"
CELL = "cell"  # the selected confusion cell: dict(parser, verdict, parser_verdict, arm, orientation)
OTHER_ARM = "other_arm"  # arm whose OTHER rows are listed on OTHER by arm
FLASH = "flash"  # (kind, message) shown once after a write
LIST_SELECTION = "list_selection"  # last row selection seen in the Review list (to detect a new click)
GOTO = "goto"  # the Review page's "row number" input (re-seeded from POS on every run)
LIST_TOTAL = "list_total"  # rows in the Review list as last drawn (bounds Next after a save in a queue)

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
    F_SEARCH: "",
    F_CELL: None,
    POS: 0,
    QUEUE: None,
    PARSER: None,
    PARSER_ARM: None,
    PARSER_ORIENT: ALL_ORIENTATIONS,
    CELL: None,
    OTHER_ARM: None,
    FLASH: None,
    LIST_SELECTION: None,
    LIST_TOTAL: 0,
}

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
