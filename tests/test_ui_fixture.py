"""The dashboard tests' fixture study itself (built by tests/ui_study.py)."""

from __future__ import annotations

from pathlib import Path

from mcqaudit.store import Study
from tests.ui_study import ARMS, N_ITEMS, ORIENTATIONS, XSS


# --- the fixture itself -------------------------------------------------------------------------------------
def test_fixture_study_is_graded_and_has_the_markup_row(ui_db: Path) -> None:
    s = Study(ui_db)
    n, graded, judged = s.query(
        "SELECT count(*), count(final_verdict), count(*) FILTER (judge_status = 'ok') FROM graded_rows"
    )[0]
    assert n == N_ITEMS * len(ORIENTATIONS) * len(ARMS)
    assert graded == n and judged > 0
    assert s.query("SELECT count(*) FROM graded_rows WHERE generation = ?", [XSS])[0][0] == 1
    assert s.get_meta("control_arm") == "base"
