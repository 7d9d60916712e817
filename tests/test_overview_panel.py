"""The Overview's first lines about judges and reviewers (issue 21 "Done means"): a study graded by two judges
and reviewed by two people says, under its findings, whether the finding holds under both judges and how far
the reviewers agree, with n; a study with one judge says it is not checked against another. Streamlit's
AppTest on study files graded through the real ``openai`` client by scripted judges on 127.0.0.1, labels
brought in with ``mcqaudit reviews import``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.overview_panel_study import N, panel_study
from tests.ui_study import BOOT, app, no_exceptions, report_of


@pytest.fixture(autouse=True)
def _bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", str(BOOT))


def _caption(at) -> str:  # type: ignore[no-untyped-def]
    return " ".join(c.value for c in at.caption)


def test_two_judges_and_two_reviewers_on_the_first_screen(tmp_path: Path) -> None:
    db = panel_study(tmp_path, panel=True)
    rep = report_of(db)
    at = app(db, "overview").run()
    no_exceptions(at)
    shown = _caption(at)
    d = rep["delta_accuracy"]["steered"]
    assert d["items"] == N
    assert "Judge panel: 2 judges (primary scripted" in shown and "panel second" in shown
    assert f"the Δ holds under both judges for steered (n={N} items)" in shown
    assert f"Krippendorff's α {rep['judge_panel']['alpha']['value']:.2f}" in shown
    assert f"(n={rep['judge_panel']['alpha']['n']} rows)" in shown
    # the reviewers: 20 rows, bob's OTHER on rows 0, 5, 10, 15 -> 16 of 20 agree
    assert "Reviewers agree on 80.0 % [" in shown and "of 20 rows reviewed by two or more people" in shown
    assert "n=20" in shown and "preliminary: under 100 rows" in shown
    assert "4 rows where they disagree (the latest review is final there): 0 settled by a later review" in shown
    # the finding itself, among the findings, with its n
    found = next(f for f in rep["findings"] if f["kind"] == "judge_panel")
    assert f"holds under both judges (n={N} items)" in found["text"]
    bullets = " ".join(m.value for m in at.markdown)
    assert "holds under both judges" in bullets
    # the findings come first; the line sits between them and the headline cards
    assert [s.value for s in at.subheader][:1] == ["Findings"]


def test_one_judge_says_so(tmp_path: Path) -> None:
    db = panel_study(tmp_path, panel=False)
    at = app(db, "overview").run()
    no_exceptions(at)
    shown = _caption(at)
    assert "One judge: the finding is not checked against another" in shown
    assert "Reviewers agree on 80.0 % [" in shown  # the reviewers are measured without a panel too


def test_one_judge_and_one_reviewer_say_so_under_the_findings(ui_db: Path) -> None:
    at = app(ui_db, "overview").run()
    no_exceptions(at)
    assert "One judge: the finding is not checked against another" in _caption(at)
    assert "Reviewers agree" not in _caption(at)
