"""The one confirm-or-override rule (mcqaudit/review/rules.py), and that the dashboard's save (through
``add_review``) and a label file's import record the same decision the same way, letter included."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from mcqaudit.app import reviews as rv
from mcqaudit.review.rules import CONFIRM, OVERRIDE, decision_action
from mcqaudit.store import Study

# (decision verdict, decision letter, current verdict, current letter) -> action
CASES = [
    ("INCORRECT", "C", "INCORRECT", "B", OVERRIDE),  # the letter counts (issue 17's blind-mode row)
    ("INCORRECT", "B", "INCORRECT", "B", CONFIRM),
    ("INCORRECT", None, "INCORRECT", "B", CONFIRM),  # no letter named: the row's letter is kept
    ("INCORRECT", None, "INCORRECT", None, CONFIRM),
    ("INCORRECT", "C", "INCORRECT", None, OVERRIDE),  # names a letter the row lacked
    ("CORRECT", None, "CORRECT", "A", CONFIRM),
    ("CORRECT", "A", "CORRECT", None, CONFIRM),  # CORRECT always picks the gold letter
    ("OTHER", None, "OTHER", None, CONFIRM),
    ("OTHER", None, "INCORRECT", "B", OVERRIDE),
    ("INCORRECT", "B", "CORRECT", "A", OVERRIDE),
    ("OTHER", None, None, None, OVERRIDE),  # no verdict yet: nothing to confirm
]


@pytest.mark.parametrize(
    "verdict,letter,current,current_letter,expected",
    CASES,
    ids=[f"{v}/{lt or '-'} on {c or 'none'}/{cl or '-'}" for v, lt, c, cl, _ in CASES],
)
def test_decision_action(
    verdict: str, letter: str | None, current: str | None, current_letter: str | None, expected: str
) -> None:
    assert decision_action(verdict, letter, current, current_letter) == expected


def _incorrect_row(s: Study) -> tuple[str, str, str]:
    """A row whose final verdict is INCORRECT with a picked letter, and another wrong letter of it."""
    rid, gold, picked, n = s.query(
        """SELECT row_id, gold_letter, picked_letter, len(options) FROM graded_rows
           WHERE final_verdict = 'INCORRECT' AND picked_letter IS NOT NULL ORDER BY row_id LIMIT 1"""
    )[0]
    other = next(x for x in "ABCDEFG"[:n] if x not in (gold, picked))
    return rid, picked, other


def test_save_and_import_record_a_decision_alike(ui_db: Path, tmp_path: Path) -> None:
    """Each decision of CASES that a real row can take, made once through ``add_review(action=override)`` (what
    the dashboard's Save override sends, blind or not) and once as a label imported into a copy: the same
    action, verdict and letter are stored."""
    copy = tmp_path / "copy.duckdb"
    shutil.copy(ui_db, copy)
    s, c = Study(ui_db), Study(copy)
    rid, picked, other = _incorrect_row(s)
    gold = s.query("SELECT gold_letter FROM graded_rows WHERE row_id = ?", [rid])[0][0]
    decisions = [("INCORRECT", other), ("INCORRECT", picked), ("INCORRECT", None), ("CORRECT", None),
                 ("CORRECT", gold), ("OTHER", None), ("OTHER", None), ("INCORRECT", other)]  # fmt: skip
    saved, imported = [], []
    for k, (verdict, letter) in enumerate(decisions):
        rv.add_review(s, rid, reviewer="ann", verdict=verdict, picked_letter=letter)
        saved.append(s.query("SELECT action, verdict, picked_letter FROM reviews ORDER BY review_id DESC")[0])
        f = tmp_path / f"label{k}.csv"
        with f.open("w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows(
                [["row_id", "verdict", "picked_letter", "reviewer", "reviewed_at"],
                 [rid, verdict, letter or "", "ann", f"2026-01-01T00:00:{k:02d}+00:00"]]
            )  # fmt: skip
        rv.import_review_log(c, f)
        imported.append(
            c.query("SELECT action, verdict, picked_letter FROM reviews ORDER BY review_id DESC")[0]
        )
    assert saved == imported
    assert saved == [
        ("override", "INCORRECT", other),
        ("override", "INCORRECT", picked),
        ("confirm", "INCORRECT", picked),
        ("override", "CORRECT", gold),
        ("confirm", "CORRECT", gold),
        ("override", "OTHER", None),
        ("confirm", "OTHER", None),
        ("override", "INCORRECT", other),
    ]
