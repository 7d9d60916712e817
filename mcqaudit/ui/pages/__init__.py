"""One module per dashboard page. Each has ``render_*`` (draws from DataFrames / the report dict) and
``page()`` (loads them through :mod:`mcqaudit.ui.data` and calls it)."""

from __future__ import annotations

from collections.abc import Callable
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


def load(*early: Callable[[str, data.Version], object]) -> Loaded:
    """The study's report and settings. ``early``: the page's own cached reads, made first, while the report
    computes in the thread this run started (:func:`mcqaudit.ui.data.start_analysis`); the page then finds
    them cached."""
    path = st.session_state[state.DB_PATH]
    v = data.study_version(path)
    for read in early:
        read(path, v)
    return Loaded(path, v, data.report(path, v, data.bootstrap()), data.meta(path, v))
