"""A study graded by two judges for the review tests of issue 21 (a helper module, not a test module): 60 prose
rows over two arms, graded through the real `grade` command and the real `openai` client by a scripted
primary judge on 127.0.0.1 and then, with `grade --panel`, by a scripted panel judge that answers OTHER on
every row whose generation says "take N" with N % 5 == 0 — 12 rows, the hand count :data:`DISAGREE`.
"""

from __future__ import annotations

from pathlib import Path

from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.store import Study
from tests.helpers import judge_rows, run_cli
from tests.judge_servers import Call, Reply, ScriptedJudge, add_rows, heuristic

N = 60
PRIMARY_MODEL, PANEL_MODEL = "scripted", "second"
PRIMARY, PANEL = JudgeConfig(model=PRIMARY_MODEL).fingerprint, JudgeConfig(model=PANEL_MODEL).fingerprint
# the rows the two judges disagree on, by hand: takes 0, 5, ..., 55 (even takes are arm base, odd steered)
DISAGREE = [f"r{k:05d}" for k in range(0, N, 5)]
ARM_OF = {f"r{k:05d}": "base" if k % 2 == 0 else "steered" for k in range(N)}


def contrary(call: Call) -> Reply:
    """The heuristic, except OTHER on every row whose take is a multiple of 5."""
    reply = heuristic(call)
    assert isinstance(reply, Reply)
    take = int(call.user.split("(take ")[1].split(")")[0])
    return Reply("OTHER") if take % 5 == 0 else reply


def _grade(db: Path, url: str, model: str, *extra: str) -> None:
    proc = run_cli("grade", "--db", str(db), "--judge-model", model, "--judge-base-url", url, *extra)
    assert proc.returncode == 0, proc.stderr


def build_panel_study(db: Path, *, panel: str | None = "contrary") -> Path:
    """The study at ``db``: rows, the primary judge's verdicts and, unless ``panel`` is None, a panel judge's
    (``contrary``: disagreeing on :data:`DISAGREE`; ``same``: agreeing on every row)."""
    study = Study(db, create=True)
    rows = judge_rows(N)
    for k, r in enumerate(rows):
        r["arm"] = ARM_OF[r["row_id"]]
        r["item_id"] = f"item{k // 2}"  # each item in both arms
    add_rows(study, rows)
    with ScriptedJudge(heuristic, model=PRIMARY_MODEL) as one:
        _grade(db, one.base_url, PRIMARY_MODEL)
    if panel is not None:
        with ScriptedJudge(contrary if panel == "contrary" else heuristic, model=PANEL_MODEL) as two:
            _grade(db, two.base_url, PANEL_MODEL, "--panel")
    return db
