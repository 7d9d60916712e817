"""A dashboard page opened cold reads the study's frames and computes the report once (issue 23: the OTHER
by arm page computed it twice — its verdict counts asked the cached loader with the arguments spelt another
way, which ``st.cache_data`` keys apart — and was twice as slow as the others at 1,000,000 rows)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import streamlit as st

from mcqaudit.app import report as app_report
from mcqaudit.app import rows as rw
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


@pytest.mark.parametrize("page", PAGES)
def test_a_cold_page_computes_the_report_beside_its_own_reads(
    ui_db: Path, page: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every page but Review starts the report in a thread as the run starts, the sidebar's and the page's
    own reads run meanwhile, and the page waits for that computation; Review computes none."""
    threads: list[str] = []
    entered = threading.Event()
    real_frames, real_choices = app_report.load_frames, rw.study_choices

    def load_frames(*args: Any, **kw: Any) -> Any:
        threads.append(threading.current_thread().name)
        entered.set()
        return real_frames(*args, **kw)

    def study_choices(*args: Any, **kw: Any) -> Any:
        # the sidebar's first read, held until the report has started (as it does on a study of any size,
        # where the read waits for the connection the report holds): no race in this test
        entered.wait(30 if page != "review" else 0)
        return real_choices(*args, **kw)

    monkeypatch.setattr(app_report, "load_frames", load_frames)
    monkeypatch.setattr(rw, "study_choices", study_choices)
    st.cache_data.clear()
    at = app(ui_db, page)
    at.run()
    no_exceptions(at)
    assert threads == ([] if page == "review" else ["mcqaudit-analysis"])


def test_a_report_that_failed_in_the_thread_is_computed_again_by_the_page(
    ui_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What goes wrong in the thread is neither lost nor shown from there: the page's own call computes the
    report again (and shows what goes wrong there)."""
    threads: list[str] = []
    real = app_report.load_frames

    def load_frames(*args: Any, **kw: Any) -> Any:
        threads.append(threading.current_thread().name)
        if threading.current_thread().name == "mcqaudit-analysis":
            raise RuntimeError("the computation in the thread fails")
        return real(*args, **kw)

    monkeypatch.setattr(app_report, "load_frames", load_frames)
    st.cache_data.clear()
    at = app(ui_db, "overview")
    at.run()
    no_exceptions(at)
    assert at.title[0].value == "Overview"
    assert len(threads) <= 2 and threads[-1] != "mcqaudit-analysis", threads
