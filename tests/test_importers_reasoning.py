"""Framework importers and reasoning models (issue 20): real Inspect logs whose outputs carry `ContentReasoning`
and `stop_reason = max_tokens` (made here by Inspect's own runner with `mockllm/model`, tests/reasoning_logs.py)
and a real lm-eval log whose responses hold `<think>` blocks inline, one never closed
(tests/fixtures/lmeval_reasoning/). What the importers make of them, and what ingest then stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcqaudit.ingest import inspect_log, lmeval
from mcqaudit.ingest.fields import Record
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
    assert unit == "sample" and len(rows) == 8

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


# ------------------------------------------------------------------------------------------------ lm-eval
def test_lm_eval_keeps_the_raw_response_with_its_thinking() -> None:
    """lm-eval logs the response as the model gave it (`resps`) and records no finish reason: the importer
    passes the text through verbatim, with no reasoning or finish_reason field, for ingest to split."""
    _, records = lmeval.read_samples(LM_THINK)
    assert len(records) == 16 and all(r.row is not None for r in records)
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
