"""Framework importers and reasoning models (issue 20): real Inspect logs whose outputs carry `ContentReasoning`
and `stop_reason = max_tokens` (made here by Inspect's own runner with `mockllm/model`, tests/reasoning_logs.py)
and a real lm-eval log whose responses hold `<think>` blocks inline, one never closed
(tests/fixtures/lmeval_reasoning/). What the importers make of them, and what ingest then stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mcqaudit.app.grade import GradeOptions, grade
from mcqaudit.app.ingest import ingest_file
from mcqaudit.ingest import inspect_log, lmeval
from mcqaudit.ingest.fields import Record
from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.store import Study
from mcqaudit.vocab import LETTERS
from tests.helpers import run_cli
from tests.judge_servers import ScriptedJudge, heuristic
from tests.reasoning_logs import LONG_THOUGHT, make_in_subprocess

ROOT = Path(__file__).resolve().parents[1]
LM_THINK = next((ROOT / "tests" / "fixtures" / "lmeval_reasoning").glob("samples_mcq_think_*.jsonl"))


@pytest.fixture(scope="module")
def inspect_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """reasoning.eval and reasoning.json, written by Inspect's own runner (in a subprocess)."""
    pytest.importorskip("inspect_ai")
    return make_in_subprocess(tmp_path_factory.mktemp("inspect-reasoning"))


def _rows(records: list[Record]) -> dict[str, dict[str, Any]]:
    assert all(r.row is not None for r in records), [(r.field, r.reason) for r in records if r.row is None]
    return {r.row["item_id"]: r.row for r in records if r.row is not None}


# ------------------------------------------------------------------------------------------------ Inspect
@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_inspect_content_reasoning_is_the_rows_reasoning(inspect_logs: dict[str, Path], fmt: str) -> None:
    unit, records = inspect_log.read_log(inspect_logs[fmt])
    rows = _rows(records)
    assert unit == "sample" and len(rows) == 9

    r = rows["think-then-answer"]  # the thinking names B; the answer is A
    assert r["generation"] == "ANSWER: A"
    assert r["reasoning"] == "Option B is the capital of Italy, not France. So B is out."
    assert (r["finish_reason"], r["parsed_letter"]) == ("stop", "A")
    assert r["usage"] == {"prompt_tokens": len(r["prompt"].split()), "completion_tokens": 41}

    # several blocks joined by a blank line; a redacted block gives its summary, or says it was redacted
    r = rows["two-blocks"]
    assert r["reasoning"] == "3 + 4 = 7.\n\n[redacted reasoning]\n\nChecked the sum again: C."
    assert r["generation"] == "C" and "c2lnbmF0dXJl" not in r["reasoning"]  # never the opaque signature

    # the token budget ran out while it thought: no text, stop_reason max_tokens -> length
    r = rows["cut-in-thinking"]
    assert (r["generation"], r["finish_reason"]) == ("", "length")
    assert r["reasoning"] == "Venus is bright, so ANSWER: A? Wait, the red one is"
    assert r["parsed_letter"] is None and r["usage"]["completion_tokens"] == 64

    r = rows["cut-after-answer"]  # answered, then cut; a long reasoning Inspect stored as an attachment
    assert (r["generation"], r["finish_reason"]) == ("ANSWER: C", "length")
    assert r["reasoning"] == LONG_THOUGHT.strip()
    assert rows["context-full"]["finish_reason"] == "length"  # model_length: the context window was full

    # no ContentReasoning: no reasoning field, the text as it is (ingest splits an inline block itself)
    assert "reasoning" not in rows["plain"] and rows["plain"]["generation"] == "A"
    inline = rows["inline-think"]
    assert "reasoning" not in inline
    assert inline["generation"] == "<think>People once thought so (A).</think>\n\nB"
    # other stop reasons are kept as given
    assert (rows["filtered"]["finish_reason"], rows["filtered"]["generation"]) == ("content_filter", "")


def test_inspect_samples_without_reasoning_import_as_before() -> None:
    """The committed logs (no reasoning): the same rows as before, with only finish_reason and usage added."""
    _, records = inspect_log.read_log(ROOT / "tests" / "fixtures" / "inspect" / "plain.eval")
    for rec in records:
        assert rec.row is not None and "reasoning" not in rec.row
        assert rec.row["finish_reason"] == "stop"
        assert set(rec.row["usage"]) == {"prompt_tokens", "completion_tokens"}
        assert rec.row["usage"]["completion_tokens"] == 5


def test_inspect_unknown_stop_reason_and_bad_usage(inspect_logs: dict[str, Path], tmp_path: Path) -> None:
    log = json.loads(inspect_logs["json"].read_text(encoding="utf-8"))
    for s in log["samples"]:
        outputs = [s["output"]] + [e["output"] for e in s["events"] if e.get("event") == "model"]
        for out in outputs:
            if s["id"] == "plain":
                out["choices"][0]["stop_reason"] = "unknown"  # Inspect's word for none
            if s["id"] == "filtered":
                out["choices"][0]["stop_reason"] = "  refusal_v2 "  # a word never seen: kept, stripped
            if s["id"] == "two-blocks":
                out["usage"]["output_tokens"] = "thirty"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(log), encoding="utf-8")
    _, records = inspect_log.read_log(edited)
    by_label = {r.label.split(",")[0].removeprefix("id "): r for r in records}
    assert "finish_reason" not in (by_label["plain"].row or {})
    assert (by_label["filtered"].row or {})["finish_reason"] == "refusal_v2"
    bad = by_label["two-blocks"]
    assert bad.row is None and bad.field == "usage"
    assert bad.reason == "input_tokens and output_tokens are not token counts: [41, 'thirty']"
    # through ingest: one line naming the file, the sample and the field; nothing written
    db = tmp_path / "s.duckdb"
    p = run_cli("ingest", str(edited), "--db", str(db), "--quiet")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert (
        f"{edited}:sample {bad.number}: usage: input_tokens and output_tokens are not token counts: "
        "[41, 'thirty'] (id two-blocks, epoch 1)" in p.stderr.splitlines()
    ), p.stderr
    assert not db.exists()


# ------------------------------------------------------------------------------------------------ lm-eval
def test_lm_eval_keeps_the_raw_response_with_its_thinking() -> None:
    """lm-eval logs the response as the model gave it (`resps`) and records no finish reason: the importer
    passes the text through verbatim, with no reasoning or finish_reason field, for ingest to split."""
    _, records = lmeval.read_samples(LM_THINK)
    assert len(records) == 18 and all(r.row is not None for r in records)
    raw = [json.loads(line)["resps"][0][0] for line in LM_THINK.read_text(encoding="utf-8").splitlines()]
    rows = [r.row for r in records if r.row is not None]
    assert [r["generation"] for r in rows] == raw  # verbatim, leading whitespace and all
    for r in rows:
        assert not {"reasoning", "finish_reason", "usage"} & set(r), r
        assert r["arm"] == "scripted-thinker"
    by = {(r["item_id"], tuple(r["options"])): r for r in rows}
    first = {r["item_id"]: r for r in reversed(rows)}  # each item's first orientation (as given)
    assert first["think-then-answer"]["generation"].startswith("<think>Option B is the capital of Italy")
    assert first["context-full"]["generation"] == "<reasoning>Insects have six; spiders"  # never closes
    assert first["inline-think"]["generation"].startswith("  <think>")
    assert first["filtered"]["generation"] == ""
    # lm-eval's own strict-match filter read the letter in the unclosed thinking: kept as the user parser's
    cut = by[("cut-in-thinking", ("Mars", "Jupiter", "Saturn", "Venus"))]
    assert cut["parsed_letter"] == "D" and "ANSWER: D?" in cut["generation"]


# ------------------------------------------------------------------------------------ after ingest
def _graded(study: Study) -> pd.DataFrame:
    return study.query_df("SELECT * FROM graded_rows ORDER BY item_id, orientation")


def test_inspect_reasoning_log_through_ingest_and_the_judge(
    inspect_logs: dict[str, Path], tmp_path: Path
) -> None:
    db = tmp_path / "s.duckdb"
    p = run_cli("ingest", str(inspect_logs["eval"]), "--db", str(db), "--quiet")
    assert p.returncode == 0, p.stderr
    assert "9 rows loaded; 7 with reasoning kept apart from the answer; 3 truncated" in p.stdout
    study = Study(db)
    df = _graded(study).set_index("item_id")
    assert len(df) == 9

    r = df.loc["think-then-answer"]  # parsers read the answer, not the thinking that names B
    assert (r.answer, r.generation, r.finish_reason, bool(r.truncated)) == (
        "ANSWER: A",
        "ANSWER: A",
        "stop",
        False,
    )
    assert r.reasoning.startswith("Option B is") and (r.strict_letter, r.final_verdict) == ("A", "CORRECT")
    r = df.loc["two-blocks"]
    assert (r.answer, r.strict_letter, r.final_verdict) == ("C", "C", "CORRECT")
    assert r.reasoning == "3 + 4 = 7.\n\n[redacted reasoning]\n\nChecked the sum again: C."

    # cut off while thinking, no text: truncated, OTHER by rule, never judged
    for item in ("cut-in-thinking", "context-full"):
        r = df.loc[item]
        assert (r.answer, r.finish_reason, bool(r.truncated)) == ("", "length", True), item
        assert (r.final_verdict, r.verdict_source) == ("OTHER", "rule"), item
        assert pd.isna(r.strict_letter) and pd.isna(r.naive_letter), item  # not the A in the thinking
    # cut off after it answered: graded like any other row, and still marked
    r = df.loc["cut-after-answer"]
    assert (r.answer, bool(r.truncated), r.final_verdict) == ("ANSWER: C", True, "CORRECT")
    assert r.reasoning == LONG_THOUGHT.strip()

    r = df.loc["plain"]  # no reasoning at all: as before
    assert (r.answer, r.generation, bool(r.truncated)) == ("A", "A", False) and pd.isna(r.reasoning)
    r = df.loc["inline-think"]  # no ContentReasoning, an inline block: ingest splits it
    assert r.generation == "<think>People once thought so (A).</think>\n\nB"
    assert (r.answer, r.reasoning, r.strict_letter) == ("B", "People once thought so (A).", "B")
    assert r.final_verdict == "CORRECT" and not r.truncated
    r = df.loc["filtered"]
    assert (r.finish_reason, bool(r.truncated), r.final_verdict) == ("content_filter", False, "OTHER")

    usage = study.query("SELECT item_id, usage FROM gen_rows WHERE item_id = 'cut-in-thinking'")[0][1]
    assert json.loads(usage)["completion_tokens"] == 64

    _judge_sees_only_the_prose_answer(study)
    assert _graded(study).set_index("item_id").loc["think-then-prose"].final_verdict == "CORRECT"
    again = run_cli("ingest", str(inspect_logs["eval"]), "--db", str(db), "--quiet")
    assert again.returncode == 0 and "0 rows loaded; 9 unchanged" in again.stdout


def _judge_sees_only_the_prose_answer(study: Study) -> None:
    """Every row but think-then-prose is resolved by the pre-filter or a rule (the truncated ones with no
    answer among them); that one reaches the judge as its answer, without the thinking (which names the
    Atlantic too, so the scripted judge would call it OTHER)."""
    with ScriptedJudge(heuristic) as srv:
        grade(study, GradeOptions(JudgeConfig(model="scripted"), base_url=srv.base_url, backoff_base_s=0.01))
        calls = list(srv.calls)
    n = int(study.query("SELECT count(*) FROM graded_rows WHERE item_id = 'think-then-prose'")[0][0])
    assert len(calls) == n
    for call in calls:
        assert call.parsed is not None and call.parsed.generation == "It is the Pacific Ocean."
        assert "Atlantic is large" not in call.user


def test_lm_eval_think_blocks_through_ingest(study: Study) -> None:
    res = ingest_file(study, LM_THINK)
    assert res.loaded == 18 and res.format == "lm-eval"
    df = _graded(study)
    assert df.finish_reason.isna().all()  # lm-eval records none
    letter = {(r.item_id, r.orientation): r for r in df.itertuples()}
    for r in df.itertuples():
        shown = list(r.options)
        if r.item_id == "think-then-answer":
            assert r.answer == f"ANSWER: {LETTERS[shown.index('Paris')]}" and not r.truncated
            assert r.reasoning.startswith("Option ") and r.final_verdict == "CORRECT"
        elif r.item_id == "two-blocks":
            assert (r.answer, r.reasoning) == (
                LETTERS[shown.index("7")],
                "3 + 4 = 7.\n\nChecked the sum again.",
            )
        elif r.item_id in ("cut-in-thinking", "context-full"):  # the block never closes
            assert (r.answer, bool(r.truncated), r.final_verdict, r.verdict_source) == (
                "",
                True,
                "OTHER",
                "rule",
            )
        elif r.item_id == "cut-after-answer":  # <Thinking>, any case
            assert (
                r.reasoning == LONG_THOUGHT.strip()
                and r.strict_letter == LETTERS[shown.index("Carbon dioxide")]
            )
        elif r.item_id == "inline-think":  # after leading whitespace
            assert r.answer == LETTERS[shown.index("False")] and r.reasoning.startswith("People once")
            assert r.final_verdict == "CORRECT"
        elif r.item_id == "think-then-prose":
            assert r.answer == "It is the Pacific Ocean." and pd.isna(r.strict_letter)
        elif r.item_id == "plain":
            assert (r.answer, r.generation) == (r.generation, LETTERS[shown.index("True")]) and pd.isna(
                r.reasoning
            )
        else:
            assert (r.item_id, r.answer, bool(r.truncated)) == ("filtered", "", False)
    # lm-eval's own filter read the letter in the unclosed thinking: its number counts a phantom answer
    cut = letter[("cut-in-thinking", "BCDA")]
    assert cut.user_letter == "D" and cut.final_verdict == "OTHER"
    _judge_sees_only_the_prose_answer(study)
    prose = _graded(study).query("item_id == 'think-then-prose'")
    assert len(prose) == 2 and set(prose.final_verdict) == {"CORRECT"}
