"""The Overview's first lines about judges and reviewers (issue 21 "Done means"): a study graded by two judges
and reviewed by two people says, under its findings, whether the finding holds under both judges and how far
the reviewers agree, with n; a study with one judge says it is not checked against another. Streamlit's
AppTest on study files graded through the real ``openai`` client by scripted judges on 127.0.0.1, labels
brought in with ``mcqaudit reviews import``."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mcqaudit.store import Study
from tests.helpers import run_cli
from tests.judge_servers import Call, Reply, ScriptedJudge, add_rows, heuristic
from tests.ui_study import BOOT, app, no_exceptions, report_of

N = 30
OPTS = ["a red fruit", "a yellow fruit", "a green vegetable", "a root vegetable"]


@pytest.fixture(autouse=True)
def _bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", str(BOOT))


def _study(tmp_path: Path, panel: bool) -> Path:
    """30 items in two arms (steered names the gold on 2 of 3 items, base on 1 of 3); a second judge that
    answers OTHER on items i % 10 == 3 (6 of the 60 rows), then two reviewers on 20 rows who disagree on 4."""
    study = Study(tmp_path / "s.duckdb", create=True)
    rows = []
    for arm in ("base", "steered"):
        for i in range(N):
            gold = i % 3 == 0 if arm == "base" else i % 3 != 2
            rows.append(dict(row_id=f"{arm}-{i}", arm=arm, item_id=f"q{i:02d}", options=OPTS, gold_letter="A",
                             generation=f"On item {i}: it is {OPTS[0] if gold else OPTS[2]}."))  # fmt: skip
    add_rows(study, rows)

    def second(call: Call) -> Reply:
        i = int(call.user.split("On item ")[1].split(":")[0])
        reply = heuristic(call)
        assert isinstance(reply, Reply)
        return Reply("OTHER") if i % 10 == 3 else reply

    with ScriptedJudge(heuristic) as one, ScriptedJudge(second, model="second") as two:
        base = ["grade", "--db", str(study.path), "--judge-base-url"]
        assert run_cli(*base, one.base_url, "--judge-model", "scripted").returncode == 0
        if panel:
            assert run_cli(*base, two.base_url, "--judge-model", "second", "--panel").returncode == 0
    for who, day in (("ann", 1), ("bob", 2)):
        path = tmp_path / f"{who}.csv"
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["row_id", "verdict", "reviewer", "reviewed_at"])
            for i in range(20):
                right = i % 3 != 2
                v = "OTHER" if who == "bob" and i % 5 == 0 else ("CORRECT" if right else "INCORRECT")
                w.writerow([f"steered-{i}", v, who, f"2026-01-0{day}T10:00:{i:02d}Z"])
        assert run_cli("reviews", "import", str(path), "--db", str(study.path)).returncode == 0
    return study.path


def _caption(at) -> str:  # type: ignore[no-untyped-def]
    return " ".join(c.value for c in at.caption)


def test_two_judges_and_two_reviewers_on_the_first_screen(tmp_path: Path) -> None:
    db = _study(tmp_path, panel=True)
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
    assert "4 rows where they disagree settled by the latest review" in shown
    # the finding itself, among the findings, with its n
    found = next(f for f in rep["findings"] if f["kind"] == "judge_panel")
    assert f"holds under both judges (n={N} items)" in found["text"]
    bullets = " ".join(m.value for m in at.markdown)
    assert "holds under both judges" in bullets
    # the findings come first; the line sits between them and the headline cards
    assert [s.value for s in at.subheader][:1] == ["Findings"]


def test_one_judge_says_so(tmp_path: Path) -> None:
    db = _study(tmp_path, panel=False)
    at = app(db, "overview").run()
    no_exceptions(at)
    shown = _caption(at)
    assert "One judge: the finding is not checked against another" in shown
    assert "Reviewers agree on 80.0 % [" in shown  # the reviewers are measured without a panel too
