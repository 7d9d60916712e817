"""`reviews export --inspect LOG --out NEW_LOG`: reviews of rows imported from a real Inspect log (the fixtures
were written by inspect-ai 0.3.285) become score edits in a copy, read back with the real package."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from mcqaudit.app.grade import GradeOptions, grade
from mcqaudit.app.reviews import add_review, retract_review, review_log_csv
from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.store import Study
from mcqaudit.vocab import LETTERS
from tests.helpers import run_cli
from tests.judge_servers import ScriptedJudge, heuristic
from tests.reasoning_logs import make_in_subprocess

inspect_log = pytest.importorskip("inspect_ai.log")
FIXTURES = Path(__file__).parent / "fixtures" / "inspect"


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _study(tmp_path: Path, log: Path, name: str = "study.duckdb") -> tuple[Study, dict, str]:
    db = tmp_path / name
    run_cli("ingest", str(log), "--db", str(db), "--quiet", check=True)
    study = Study(db)
    with ScriptedJudge(heuristic) as srv:
        cfg = JudgeConfig(model="scripted")
        summary = grade(study, GradeOptions(cfg, base_url=srv.base_url, backoff_base_s=0.01))
    rows = {
        (i, s): {"row_id": r, "options": list(o), "verdict": v}
        for r, i, s, o, v in study.query(
            "SELECT row_id, item_id, sample, options, final_verdict FROM graded_rows"
        )
    }
    return study, rows, summary.fingerprint


def _score(log, item: str, epoch: int):
    s = next(s for s in log.samples if s.id == item and s.epoch == epoch)
    return s, s.scores["choice"]


def test_reviews_become_score_edits_with_provenance_and_unreviewed_samples_stay(tmp_path: Path) -> None:
    src = tmp_path / "plain.eval"
    shutil.copy(FIXTURES / "plain.eval", src)
    before = _sha(src)
    study, rows, fp = _study(tmp_path, src)
    geo, planet, sun, arith0, arith1 = (
        rows[k]["row_id"]
        for k in [("geo-fr", 0), ("planet-red", 0), ("tf-sun", 0), ("arith-7", 0), ("arith-7", 1)]
    )
    add_review(study, geo, reviewer="ann", action="confirm", verdict="CORRECT", note="clear")
    add_review(study, planet, reviewer="ann", verdict="CORRECT")  # override; CORRECT implies the gold letter
    add_review(study, sun, reviewer="bob", verdict="OTHER", note="refuses to pick")
    wrong = add_review(study, arith0, reviewer="bob", verdict="INCORRECT", picked_letter="D", note="says 8")
    retract_review(study, wrong, reviewer="bob", note="misread: it says 7")
    add_review(study, arith1, reviewer="cy", verdict="INCORRECT", picked_letter="D")
    csv_before = review_log_csv(study)

    out = tmp_path / "audited.eval"
    proc = run_cli("reviews", "export", "--db", str(study.path), "--inspect", str(src), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "6 score edit(s) on 5 sample(s)" in proc.stderr
    assert _sha(src) == before  # the original is never touched

    orig = inspect_log.read_eval_log(str(src))
    new = inspect_log.read_eval_log(str(out))
    reviews = {r["review_id"]: r for r in study.query_df("SELECT * FROM reviews").to_dict("records")}

    s, sc = _score(new, "geo-fr", 1)
    assert (sc.value, sc.answer, sc.explanation) == ("C", "A", "CORRECT: clear")
    assert len(sc.history) == 2 and sc.history[0].provenance is None  # Inspect keeps the original first
    prov = sc.history[1].provenance
    assert prov.author == "ann" and prov.reason == "clear"
    geo_review = next(r for r in reviews.values() if r["row_id"] == geo)
    assert prov.timestamp == geo_review["created_at"]
    assert prov.metadata["row_id"] == geo and prov.metadata["action"] == "confirm"
    assert prov.metadata["judge_fingerprint"] is None  # the pre-filter resolved it: no judge involved

    _, sc = _score(new, "planet-red", 1)  # the model said Venus (A); the reviewer calls it right: Mars, B
    assert (sc.value, sc.answer) == ("C", "B") and sc.history[0].value == "I"

    _, sc = _score(new, "tf-sun", 1)  # OTHER is I with no answer, and says so
    assert (sc.value, sc.answer, sc.explanation) == ("I", None, "OTHER: refuses to pick")
    assert sc.history[1].provenance.metadata["judge_fingerprint"] == fp  # the judge graded this row

    _, sc = _score(new, "arith-7", 1)  # override then retraction: two edits, back to the judge's verdict
    assert [h.value for h in sc.history] == ["C", "I", "C"] and sc.value == "C" and sc.answer == "C"
    assert sc.history[1].answer == "D" and sc.history[2].provenance.reason == "misread: it says 7"
    assert sc.history[2].provenance.metadata["action"] == "retract"

    _, sc = _score(new, "arith-7", 2)  # epoch 2 is sample 1
    assert (sc.value, sc.answer, sc.history[1].provenance.author) == ("I", "D", "cy")

    edited = {("geo-fr", 1), ("planet-red", 1), ("tf-sun", 1), ("arith-7", 1), ("arith-7", 2)}
    for o in orig.samples:
        n = next(x for x in new.samples if x.id == o.id and x.epoch == o.epoch)
        if (o.id, o.epoch) not in edited:
            assert n.scores["choice"].model_dump() == o.scores["choice"].model_dump()
            assert n.scores["choice"].history == []
    # the headline metric follows the edits
    acc = new.results.scores[0].metrics["accuracy"].value
    values = [x.scores["choice"].value for x in new.samples]
    assert acc == pytest.approx(values.count("C") / len(values))
    # and the CSV export is what it was
    plain = run_cli("reviews", "export", "--db", str(study.path))
    assert plain.returncode == 0 and plain.stdout == csv_before


@pytest.mark.parametrize("fixture", ["plain.eval", "solver_shuffle.eval", "dataset_shuffle.json"])
def test_the_answer_is_the_picked_options_letter_over_the_samples_choices(
    tmp_path: Path, fixture: str
) -> None:
    src = FIXTURES / fixture
    study, rows, _ = _study(tmp_path, src)
    r = rows[("planet-red", 0)]
    jupiter = LETTERS[r["options"].index("Jupiter")]  # displayed letter, in the order the model saw
    add_review(study, r["row_id"], reviewer="ann", verdict="INCORRECT", picked_letter=jupiter)
    out = tmp_path / ("new" + src.suffix)
    proc = run_cli("reviews", "export", "--db", str(study.path), "--inspect", str(src), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    s, sc = _score(inspect_log.read_eval_log(str(out)), "planet-red", 1)
    assert sc.value == "I" and sc.answer == LETTERS[s.choices.index("Jupiter")]


def test_refuses_another_log_the_original_and_missing_flags(tmp_path: Path) -> None:
    study, rows, _ = _study(tmp_path, FIXTURES / "plain.eval")
    add_review(study, rows[("geo-fr", 0)]["row_id"], reviewer="ann", verdict="INCORRECT")
    db = str(study.path)
    other = run_cli("reviews", "export", "--db", db, "--inspect", str(FIXTURES / "dataset_shuffle.json"),
                    "--out", str(tmp_path / "x.json"))  # fmt: skip
    assert other.returncode == 1 and "is not the log these rows came from" in other.stderr
    assert not (tmp_path / "x.json").exists()
    wrong_arm = run_cli("reviews", "export", "--db", db, "--inspect", str(FIXTURES / "plain.eval"), "--arm", "base",
                        "--out", str(tmp_path / "x.eval"))  # fmt: skip
    assert wrong_arm.returncode == 1 and "arm 'base'" in wrong_arm.stderr
    copy = tmp_path / "copy.eval"
    shutil.copy(FIXTURES / "plain.eval", copy)
    same = run_cli("reviews", "export", "--db", db, "--inspect", str(copy), "--out", str(copy))
    assert same.returncode == 1 and "never writes to it" in same.stderr
    no_out = run_cli("reviews", "export", "--db", db, "--inspect", str(copy))
    assert no_out.returncode == 2 and "--out" in no_out.stderr
    bad_ext = run_cli(
        "reviews", "export", "--db", db, "--inspect", str(copy), "--out", str(tmp_path / "x.csv")
    )
    assert bad_ext.returncode == 1 and ".eval or .json" in bad_ext.stderr
    for p in (other, wrong_arm, same, no_out, bad_ext):
        assert "Traceback" not in p.stderr


# ------------------------------------------------------------------------------- a reasoning model's log
@pytest.fixture(scope="module")
def reasoning_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Inspect logs whose outputs carry ContentReasoning and stop_reason max_tokens (tests/reasoning_logs.py)."""
    return make_in_subprocess(tmp_path_factory.mktemp("reasoning-logs"))


def _content_types(sample) -> list[str]:
    return [c.type for c in sample.output.choices[0].message.content] if sample.output.choices else []


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_export_into_a_log_whose_samples_carry_reasoning(
    tmp_path: Path, reasoning_logs: dict, fmt: str
) -> None:
    """Rows matched on the answer text (the reasoning is not part of a sample's generation); the edits land on
    the right samples and the new log keeps every ContentReasoning block and stop reason as it was."""
    src = tmp_path / f"reasoning.{fmt}"
    shutil.copy(reasoning_logs[fmt], src)
    before = _sha(src)
    study, rows, _ = _study(tmp_path, src)
    think, cut, late = (
        rows[(i, 0)]["row_id"] for i in ("think-then-answer", "cut-in-thinking", "cut-after-answer")
    )
    add_review(study, think, reviewer="ann", verdict="INCORRECT", picked_letter="B", note="means Rome")
    add_review(study, cut, reviewer="ann", verdict="OTHER", note="ran out of tokens while thinking")
    add_review(study, late, reviewer="bob", action="confirm")
    out = tmp_path / f"audited.{fmt}"
    proc = run_cli("reviews", "export", "--db", str(study.path), "--inspect", str(src), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "3 score edit(s) on 3 sample(s)" in proc.stderr
    assert _sha(src) == before

    orig = inspect_log.read_eval_log(str(src))
    new = inspect_log.read_eval_log(str(out))
    s, sc = _score(new, "think-then-answer", 1)
    assert (sc.value, sc.answer, sc.explanation) == ("I", "B", "INCORRECT: means Rome")
    assert _content_types(s) == ["reasoning", "text"]
    s, sc = _score(new, "cut-in-thinking", 1)
    assert (sc.value, sc.answer, sc.explanation) == ("I", None, "OTHER: ran out of tokens while thinking")
    assert sc.history[0].value == "N"  # Inspect's choice() scorer: no response
    assert s.output.stop_reason == "max_tokens" and _content_types(s) == ["reasoning"]
    _, sc = _score(new, "cut-after-answer", 1)
    assert (sc.value, sc.answer) == ("C", "C") and sc.history[1].provenance.author == "bob"
    for o in orig.samples:
        n = next(x for x in new.samples if x.id == o.id and x.epoch == o.epoch)
        assert n.output.model_dump() == o.output.model_dump()  # reasoning, text, stop reason, usage
        if o.id not in ("think-then-answer", "cut-in-thinking", "cut-after-answer"):
            assert n.scores["choice"].model_dump() == o.scores["choice"].model_dump()
    # the new log reads as the same rows, reasoning and all (only the edited scores' letters moved)
    assert _import(out) == _import(src)


def _import(path: Path) -> list[dict]:
    from mcqaudit.ingest.inspect_log import read_log

    return [{k: v for k, v in r.row.items() if k != "parsed_letter"} for r in read_log(path)[1] if r.row]
