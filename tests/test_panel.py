"""Panel judges (`grade --panel`, docs/design.md §5, issue 21): a second judge grades the rows the primary
judge graded, and its verdicts are stored beside the final ones, never in them. Every judge here is a
scripted server or the stand-in on 127.0.0.1, reached through the real `openai` client (no LLM can be
reached from this machine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcqaudit.app.grade import GradeOptions, grade_batch
from mcqaudit.grade.batch import BatchOptions
from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.standin.server import STANDIN_MODEL, StandinServer
from mcqaudit.store import Study
from mcqaudit.store.frames import load_frames
from mcqaudit.vocab import VerdictCode
from tests.helpers import judge_rows, run_cli
from tests.judge_servers import Call, Reply, ScriptedJudge, add_rows, heuristic

N = 60
GRADED = (
    "SELECT row_id, judge_status, judge_letter, final_verdict, verdict_source, judge_fingerprint "
    "FROM graded_rows ORDER BY row_id"
)


def contrary(call: Call) -> Reply:
    """A judge that disagrees with the heuristic on every row whose generation says 'take N' with N % 5 == 0:
    it answers OTHER there (12 of 60 rows)."""
    reply = heuristic(call)
    assert isinstance(reply, Reply)
    take = int(call.user.split("(take ")[1].split(")")[0])
    return Reply("OTHER") if take % 5 == 0 else reply


def _study(tmp_path: Path) -> Study:
    study = Study(tmp_path / "s.duckdb", create=True)
    rows = judge_rows(N)
    for k, r in enumerate(rows):
        r["arm"] = "base" if k % 2 == 0 else "steered"
    add_rows(study, rows)
    return study


def _grade(study: Study, url: str, *extra: str, model: str = "scripted") -> tuple[int, str, str]:
    proc = run_cli("grade", "--db", str(study.path), "--judge-model", model, "--judge-base-url", url, *extra)
    return proc.returncode, proc.stdout, proc.stderr


def test_a_panel_judge_grades_beside_the_final_verdicts(tmp_path: Path) -> None:
    study = _study(tmp_path)
    primary, panel = JudgeConfig(model="scripted").fingerprint, JudgeConfig(model="second").fingerprint
    with ScriptedJudge(heuristic) as one, ScriptedJudge(contrary, model="second") as two:
        code, _, err = _grade(study, two.base_url, "--panel", model="second")
        assert code == 2 and "no primary judge yet: grade it first without --panel" in err
        assert two.count == 0
        assert _grade(study, one.base_url)[0] == 0
        before = study.query(GRADED)
        code, _, err = _grade(study, one.base_url, "--panel")  # the primary's own configuration
        assert code == 2 and "is the study's primary judge" in err and one.count == N
        # resumable: a first run stopped at 20 rows, a second sends only the rest
        code, out, err = _grade(study, two.base_url, "--panel", "--limit", "20", "--json", model="second")
        assert code == 0, err
        first = json.loads(out)
        assert (first["panel"], first["in_scope"], first["targeted"], first["graded"]) == (True, N, 20, 20)
        assert two.count == 20
        code, out, err = _grade(study, two.base_url, "--panel", "--json", model="second")
        assert code == 0, err
        assert (json.loads(out)["already_ok"], json.loads(out)["graded"], two.count) == (20, N - 20, N)
        # a run without --panel under the panel's configuration would store verdicts that never count
        code, _, err = _grade(study, two.base_url, model="second")
        assert code == 2 and "is a panel judge of the study" in err and "pass --panel" in err
    # the final verdicts are the primary's, untouched; the panel's sit beside them
    assert study.query(GRADED) == before
    assert study.query("SELECT DISTINCT fingerprint FROM current_judge") == [(primary,)]
    assert study.query("SELECT count(*) FROM judge_verdicts WHERE fingerprint = ? AND status = 'ok'", [panel]) == [
        (N,)
    ]
    differ = study.query(
        "SELECT count(*) FROM judge_verdicts a JOIN judge_verdicts b USING (row_id) "
        "WHERE a.fingerprint = ? AND b.fingerprint = ? AND a.verdict <> b.verdict",
        [primary, panel],
    )
    assert differ == [(12,)]  # the hand count: takes 0, 5, ..., 55
    frames = load_frames(study)
    assert frames.info.panel_judges == [panel]
    assert frames.panel is not None and len(frames.panel) == N
    assert int((frames.panel["verdict"] == int(VerdictCode.OTHER)).sum()) == 12 + int(
        (frames.rows["verdict"] == int(VerdictCode.OTHER)).sum()
    )
    assert list(frames.info.arm_fingerprints["base"]) == [primary]  # no judge_config_mixed from a panel
    info = run_cli("info", "--db", str(study.path))
    lines = {fp: next(ln for ln in info.stdout.splitlines() if fp in ln) for fp in (primary, panel)}
    assert "[primary: final verdicts]" in lines[primary] and "[panel: beside the final verdicts]" in lines[panel]


def test_panel_only_grades_rows_the_primary_graded(tmp_path: Path) -> None:
    study = _study(tmp_path)
    add_rows(study, [dict(row_id="strict", options=["x", "y"], generation="B", strict_letter="B"),
                     dict(row_id="blank", options=["x", "y"], generation=" ")])  # fmt: skip
    failing = {"r00003", "r00004"}

    def flaky(call: Call) -> Reply:
        take = int(call.user.split("(take ")[1].split(")")[0])
        return Reply("??") if f"r{take:05d}" in failing else heuristic(call)  # type: ignore[return-value]

    with ScriptedJudge(flaky) as one, ScriptedJudge(heuristic, model="second") as two:
        assert _grade(study, one.base_url)[0] == 3  # two rows in error
        code, out, err = _grade(study, two.base_url, "--panel", "--json", model="second")
        assert code == 0, err
        assert json.loads(out)["targeted"] == N - 2 == two.count
        sent = {c.parsed.generation for c in two.calls if c.parsed is not None}
    assert not any("take 3)" in g or "take 4)" in g for g in sent)


def test_panel_through_the_batch_api(tmp_path: Path) -> None:
    study = _study(tmp_path)
    with ScriptedJudge(heuristic) as one:
        assert _grade(study, one.base_url)[0] == 0
    before = study.query(GRADED)
    with StandinServer() as standin:
        opts = GradeOptions(JudgeConfig(model=STANDIN_MODEL), base_url=standin.base_url, timeout_s=10.0,
                            max_retries=2, backoff_base_s=0.01, panel=True)  # fmt: skip
        summary = grade_batch(study, opts, BatchOptions(poll_interval_s=0.02, poll_max_s=0.1))
    assert summary.exit_code == 0 and summary.graded == N and summary.panel
    assert study.query(GRADED) == before
    fp = JudgeConfig(model=STANDIN_MODEL).fingerprint
    assert study.query("SELECT fingerprint FROM panel_judges") == [(fp,)]
    assert study.query("SELECT count(*) FROM judge_verdicts WHERE fingerprint = ?", [fp]) == [(N,)]


@pytest.mark.parametrize("flag", ["--no-judge"])
def test_panel_needs_a_judge(tmp_path: Path, flag: str) -> None:
    study = _study(tmp_path)
    proc = run_cli("grade", "--db", str(study.path), "--panel", flag)
    assert proc.returncode == 2 and "--panel needs a judge" in proc.stderr
