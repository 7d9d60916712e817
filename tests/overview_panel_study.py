"""A small study graded by two judges and reviewed by two people (a helper module, not a test module): the
Overview tests' (tests/test_overview_panel.py, tests/test_overview_panel_browser.py). Graded through the real
``openai`` client by scripted judges on 127.0.0.1; labels brought in with ``mcqaudit reviews import``."""

from __future__ import annotations

import csv
from pathlib import Path

from mcqaudit.store import Study
from tests.helpers import run_cli
from tests.judge_servers import Call, Reply, ScriptedJudge, add_rows, heuristic

N = 30
OPTS = ["a red fruit", "a yellow fruit", "a green vegetable", "a root vegetable"]


def panel_study(tmp_path: Path, panel: bool) -> Path:
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
