"""The dashboard's shared analysis (mcqaudit/ui/data.py) against the straightforward queries it replaces."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mcqaudit.app.report import build_report, load_frames
from mcqaudit.store import Study
from mcqaudit.store import rows as rw


@pytest.fixture(scope="module")
def review_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.builders import build_review_study

    return build_review_study(tmp_path_factory.mktemp("dash-review") / "s.duckdb")


def _study_with_reviews(db: Path) -> Study:
    """The study with a few reviews, some overturning the judge: final verdicts differ from automated ones."""
    from mcqaudit.app import reviews as rv

    study = Study(db)
    ids = [r[0] for r in study.query("SELECT row_id FROM gen_rows ORDER BY row_id LIMIT 6")]
    for k, rid in enumerate(ids):
        rv.add_review(study, rid, verdict=("OTHER", "CORRECT", "INCORRECT")[k % 3], reviewer="t")
    return study


@pytest.mark.parametrize("which", ["ui", "review"])
def test_verdict_counts_from_the_frames_equal_the_graded_rows_query(
    which: str, ui_db: Path, review_db: Path
) -> None:
    from mcqaudit.ui.data import counts_of

    study = _study_with_reviews(ui_db if which == "ui" else review_db)
    want = rw.verdict_counts(study)
    got = counts_of(load_frames(study, "final"))
    assert len(want) > 1
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True), check_dtype=False)


def test_the_cached_analysis_is_the_report(ui_db: Path) -> None:
    import streamlit as st

    from mcqaudit.ui import data

    st.cache_data.clear()
    path = str(ui_db)
    v = data.study_version(path)
    rep, counts = data.analysis(path, v, 200)
    want = build_report(Study(ui_db), n_boot=200, seed=data.SEED)
    assert rep == want
    assert data.report(path, v, 200) == want
    assert counts.equals(data.counts_of(load_frames(Study(ui_db))))


@pytest.mark.parametrize("page", ["overview", "orientations", "other", "export"])
def test_a_cold_page_opens_the_study_for_the_report_first_then_once_for_its_reads(
    page: str, ui_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's render with every cache cleared opens the study file once for the report's read of it
    (first, in the analysis thread: everything else waits for it) and once for the sidebar's and the page's own
    reads together; a second render opens it not at all. (Each open is ~10 ms of CPU taken from the metrics
    running beside the reads.)"""
    import threading

    import streamlit as st

    from mcqaudit.store.sidecars import report_cache_path
    from tests.ui_study import BOOT, app, no_exceptions

    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", str(BOOT))
    opens: list[str] = []
    real = Study._open

    def counted(self: Study):  # type: ignore[no-untyped-def]
        opens.append(threading.current_thread().name)
        return real(self)

    no_exceptions(app(ui_db, page).run())  # the study opened for this process (once per server, per study)
    monkeypatch.setattr(Study, "_open", counted)
    st.cache_data.clear()
    report_cache_path(ui_db).unlink(missing_ok=True)
    no_exceptions(app(ui_db, page).run())
    assert len(opens) == 2 and opens[0] == "mcqaudit-analysis" and opens[1] != opens[0], opens
    opens.clear()
    no_exceptions(app(ui_db, page).run())
    assert opens == []


def test_a_second_session_gets_the_analysis_under_way(ui_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sessions opening report pages of the study as it is: the second gets the first's analysis and its
    "read" event (its own thread would wait on the entry's compute lock, and its page on the whole computation);
    once that analysis has ended, a page starts a new one."""
    import threading
    import time

    from mcqaudit.ui import data

    gate = threading.Event()
    ran: list[str] = []

    def slow(path: str, version: object, n_boot: int, control: object) -> None:
        ran.append(path)
        assert gate.wait(30)

    monkeypatch.setattr(data, "_analysis", slow)
    path = str(ui_db)
    first = data.start_analysis(path)
    second = data.start_analysis(path)
    assert second is first and not first.is_set()
    gate.set()
    assert first.wait(30)
    deadline = time.monotonic() + 30
    while data._RUNNING and time.monotonic() < deadline:
        time.sleep(0.01)
    third = data.start_analysis(path)
    assert third is not first and third.wait(30)
    assert ran == [path, path]
