"""A dashboard page opened cold reads the study's frames and computes the report once (issue 23: the OTHER
by arm page computed it twice — its verdict counts asked the cached loader with the arguments spelt another
way, which ``st.cache_data`` keys apart — and was twice as slow as the others at 1,000,000 rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import streamlit as st

from mcqaudit.app import report as app_report
from tests.ui_study import BOOT, app, no_exceptions

PAGES = ["overview", "orientations", "other", "parsers", "bias", "export", "review"]


@pytest.fixture(autouse=True)
def _bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", str(BOOT))


@pytest.mark.parametrize("page", PAGES)
def test_a_cold_page_computes_the_report_at_most_once(
    ui_db: Path, page: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real_frames, real_report = app_report.load_frames, app_report.report_from_frames

    def load_frames(*args: Any, **kw: Any) -> Any:
        calls.append("frames")
        return real_frames(*args, **kw)

    def report_from_frames(*args: Any, **kw: Any) -> Any:
        calls.append("report")
        return real_report(*args, **kw)

    monkeypatch.setattr(app_report, "load_frames", load_frames)
    monkeypatch.setattr(app_report, "report_from_frames", report_from_frames)
    st.cache_data.clear()
    at = app(ui_db, page)
    at.run()
    no_exceptions(at)
    assert calls.count("report") <= 1 and calls.count("frames") <= 1, calls
    if page != "review":
        assert calls.count("report") == 1, calls
    calls.clear()
    at.run()  # warm: from the cache
    assert calls == []
