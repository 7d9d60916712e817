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
