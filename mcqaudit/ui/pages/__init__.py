"""One module per dashboard page. Each has ``render_*`` (draws from DataFrames / the report dict) and
``page()`` (loads them through :mod:`mcqaudit.ui.data` and calls it)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from mcqaudit.metrics.results import Report
from mcqaudit.ui import data, state


@dataclass(frozen=True)
class Loaded:
    path: str
    version: data.Version
    report: Report
    meta: dict[str, str | None]


def load() -> Loaded:
    """The study's report and settings. The page's own first reads were made before it ran, with the
    sidebar's, while the report computes in the thread this run started (``PageSpec.reads``,
    :func:`mcqaudit.ui.data.first_reads`): the page finds them cached."""
    path = st.session_state[state.DB_PATH]
    v = data.study_version(path)
    return Loaded(path, v, data.report(path, v, data.bootstrap()), data.meta(path, v))
