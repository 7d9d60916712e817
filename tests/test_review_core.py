"""The pure review modules (mcqaudit/review/): legality and decisions, a draw's allocation, reading a review
log into typed records, row filters. No study: every input is built here."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime

import pytest

from mcqaudit.review import filters, log, queues
from mcqaudit.review.rules import (
    CONFIRM,
    OVERRIDE,
    Decision,
    ReviewError,
    RowState,
    check_verdict,
    decide,
    label_decision,
    reviewer_name,
)

ROW = RowState("r1", "A", 4, "INCORRECT", "judge", "B", "fp1")


# --- rules -------------------------------------------------------------------------------------------------
def test_check_verdict_fills_the_gold_letter_and_refuses_contradictions() -> None:
    assert check_verdict("CORRECT", None, "A", 4) == ("CORRECT", "A")
    assert check_verdict("INCORRECT", " c ", "A", 4) == ("INCORRECT", "C")
    assert check_verdict("OTHER", "", "A", 4) == ("OTHER", None)
    for verdict, letter, words in [
        ("MAYBE", None, "verdict must be one of"),
        ("INCORRECT", "E", "not one of this row's letters ABCD"),
        ("CORRECT", "B", "picks the gold letter A, not B"),
        ("INCORRECT", "A", "A is the gold letter"),
        ("OTHER", "B", "an OTHER verdict picks no letter"),
    ]:
        with pytest.raises(ReviewError, match=words):
            check_verdict(verdict, letter, "A", 4)


def test_decide_records_an_override_that_keeps_verdict_and_letter_as_a_confirm() -> None:
    assert decide(OVERRIDE, "INCORRECT", "b", ROW) == Decision(CONFIRM, "INCORRECT", "B")
    assert decide(OVERRIDE, "INCORRECT", "C", ROW) == Decision(OVERRIDE, "INCORRECT", "C")
    assert decide(OVERRIDE, "INCORRECT", None, ROW) == Decision(CONFIRM, "INCORRECT", "B")  # keeps the letter
    assert decide(CONFIRM, None, None, ROW) == Decision(CONFIRM, "INCORRECT", "B")
    assert decide(OVERRIDE, "CORRECT", None, ROW) == Decision(OVERRIDE, "CORRECT", "A")


def test_decide_refuses_what_cannot_be_recorded() -> None:
    ungraded = RowState("r2", "A", 4, None, None, None, None)
    with pytest.raises(ReviewError, match="no verdict yet"):
        decide(CONFIRM, None, None, ungraded)
    with pytest.raises(ReviewError, match="confirm keeps the verdict INCORRECT; use override for OTHER"):
        decide(CONFIRM, "OTHER", None, ROW)
    with pytest.raises(ReviewError, match="action must be confirm or override"):
        decide("retract", None, None, ROW)
    assert decide(OVERRIDE, "OTHER", None, ungraded) == Decision(OVERRIDE, "OTHER", None)


def test_label_decision_keeps_the_rows_letter_only_when_the_label_names_none() -> None:
    assert label_decision("INCORRECT", None, None, ROW) == Decision(CONFIRM, "INCORRECT", "B")
    assert label_decision("INCORRECT", "C", "C", ROW) == Decision(OVERRIDE, "INCORRECT", "C")
    assert label_decision("CORRECT", "A", None, ROW) == Decision(OVERRIDE, "CORRECT", "A")


def test_reviewer_name() -> None:
    assert reviewer_name("  ann ") == "ann"
    with pytest.raises(ReviewError, match="needs a reviewer name"):
        reviewer_name("  ")


# --- queues ------------------------------------------------------------------------------------------------
def test_allocate_gives_what_a_small_stratum_cannot_use_to_the_others() -> None:
    assert queues.allocate(9, {"disagreement": 3, "other": 3, "rest": 3}) == dict.fromkeys(queues.STRATA, 3)
    assert queues.allocate(10, {"disagreement": 0, "other": 2, "rest": 100}) == {
        "disagreement": 0, "other": 2, "rest": 8
    }  # fmt: skip
    assert queues.allocate(50, {"other": 4}) == {"disagreement": 0, "other": 4, "rest": 0}


def test_arm_sizes_and_quotas() -> None:
    avail = {"a": {"all": 10}, "b": {"all": 2}}
    assert queues.arm_sizes("uniform", 5, True, ["a", "b"], avail) == {"a": 5, "b": 5}
    assert queues.quotas("uniform", {"a": 5, "b": 5}, ["a", "b"], avail) == {"a": {"all": 5}, "b": {"all": 2}}
    assert queues.arm_sizes("uniform", 4, False, ["a", "b"], avail, {"a": 4}) == {"a": 4, "b": 0}
    strat = {"a": {"rest": 30}, "b": {"rest": 10, "other": 20}}
    assert queues.arm_sizes("stratified", 6, False, ["a", "b"], strat) == {"a": 3, "b": 3}
    assert queues.quotas("stratified", {"a": 3, "b": 3}, ["a", "b"], strat)["b"] == {
        "disagreement": 0, "other": 2, "rest": 1
    }  # fmt: skip


def test_draw_checks_arms_and_label() -> None:
    with pytest.raises(ReviewError, match="strategy must be uniform, stratified, judges_disagree or second_review"):
        queues.check_draw("random", 5, True)
    with pytest.raises(ReviewError, match="at least one row per arm"):
        queues.check_draw("uniform", 0, True)
    assert queues.choose_arms(["b", "a", "b"], ["a", "b"]) == ["b", "a"]
    assert queues.choose_arms(None, ["a", "b"]) == ["a", "b"]
    with pytest.raises(ReviewError, match="unknown arm"):
        queues.choose_arms(["z"], ["a"])
    with pytest.raises(ReviewError, match="no rows to sample"):
        queues.choose_arms(None, [])
    assert queues.queue_label("uniform", 20, False, 0) == "uniform 20 total seed 0"
    assert queues.queue_label("stratified", 5, True, 3) == "stratified 5/arm seed 3"


# --- the review log ----------------------------------------------------------------------------------------
T0 = datetime(2026, 1, 1, tzinfo=UTC)
KNOWN = {
    "r1": log.LogRow("r1", "A", 4, "INCORRECT", "judge", "B", "fp1", ("m", "q1", "ABCD", 0), None),
    "r2": log.LogRow("r2", "C", 3, None, None, None, None, ("m", "q2", "ABC", 0), None),
}


def _csv(*lines: str) -> log.RawLog:
    return log.parse_log_text("\n".join(lines) + "\n", "f.csv", jsonl=False)


def test_csv_and_jsonl_read_into_the_same_records() -> None:
    csv_log = _csv("row_id,verdict,note", "r1,OTHER,'=1+1")
    jsonl = log.parse_log_text(json.dumps({"row_id": "r1", "verdict": "OTHER", "note": "=1+1"}), "f.jsonl",
                               jsonl=True)  # fmt: skip
    assert csv_log.is_csv and not jsonl.is_csv
    assert (
        csv_log.records[0].cells
        == jsonl.records[0].cells
        == {"row_id": "r1", "verdict": "OTHER", "note": "=1+1"}
    )
    assert csv_log.records[0].line == 2 and jsonl.records[0].line == 1
    assert (
        log.is_jsonl(".JSONL", "") and log.is_jsonl(".txt", ' {"a": 1}') and not log.is_jsonl(".csv", "a,b")
    )
    with pytest.raises(log.ReviewImportError, match=r"f.jsonl:1: not a JSON object"):
        log.parse_log_text("[1]", "f.jsonl", jsonl=True)


def test_header_problems() -> None:
    assert log.header_problems(_csv("note", "x"), "f.csv", "") == [
        "f.csv:1: header: no row_id column (nor all of arm, item_id, orientation, sample) to name the rows",
        "f.csv:1: header: no verdict column",
        "f.csv:1: reviewer: the file has no reviewer column; name the reviewer with --reviewer NAME",
    ]
    assert log.header_problems(_csv("row_id,verdict", "r1,OTHER"), "f.csv", "ann") == []


def test_check_log_types_labels_and_log_records() -> None:
    raw = _csv(
        "review_id,row_id,arm,item_id,orientation,sample,action,verdict,picked_letter,reviewer,created_at,retracts",
        "7,r1,,,,,override,incorrect,c,ann,2026-01-01T00:00:00Z,",
        "8,r1,,,,,retract,,,ann,2026-01-02T00:00:00Z,7",
        ",,m,q2,ABC,0,,CORRECT,,ben,,",
    )
    assert log.named_rows(raw) == (["r1"], [("m", "q2", "ABC", 0)])
    checked = log.check_log(raw, "f.csv", KNOWN, "")
    first, retraction, label = checked.reviews
    assert (first.action, first.verdict, first.picked_letter, first.created_at) == (
        "override",
        "INCORRECT",
        "C",
        T0,
    )
    assert (retraction.verdict, retraction.retracts_src) == (None, "7")
    assert (label.row_id, label.action, label.verdict, label.picked_letter, label.created_at) == (
        "r2", "", "CORRECT", "C", None
    )  # fmt: skip
    assert label.key == ("untimed", "r2", "ben", "CORRECT", None, "C")
    assert checked.by_source_id == {"7": first.key, "8": retraction.key} and checked.lines == 3
    with pytest.raises(FrozenInstanceError):
        first.verdict = "OTHER"  # type: ignore[misc]


def test_check_log_names_every_problem_by_line_and_field() -> None:
    raw = _csv(
        "row_id,action,verdict,picked_letter,reviewer,created_at,retracts",
        "r9,,OTHER,,ann,,",
        "r1,,CORRECT,B,ann,,",
        "r1,undo,OTHER,,,yesterday,",
        "r1,retract,,,ann,2026-01-01T00:00:00Z,",
    )
    with pytest.raises(log.ReviewImportError) as err:
        log.check_log(raw, "f.csv", KNOWN, "")
    assert err.value.problems == [
        "f.csv:2: row_id: 'r9' is not a row of this study",
        "f.csv:3: picked_letter: a CORRECT verdict picks the gold letter A, not B",
        "f.csv:4: action: must be one of confirm, override, retract, not 'undo'",
        "f.csv:4: reviewer: missing (or name one for the whole file with --reviewer)",
        "f.csv:4: created_at: not an ISO-8601 time: 'yesterday'",
        "f.csv:5: retracts: a retraction names the review_id it withdraws",
    ]


def test_queue_lines_become_one_queue_in_position_order() -> None:
    head = "row_id,action,reviewer,created_at,queue_id,queue_name,queue_strategy,queue_seed,queue_size,queue_per_arm,queue_arms,queue_position"
    raw = _csv(
        head,
        'r2,queue,ann,2026-01-01T00:00:00Z,3,q,uniform,0,2,true,"[""m""]",1',
        'r1,queue,ann,2026-01-01T00:00:00Z,3,q,uniform,0,2,true,"[""m""]",0',
    )
    ((src, q),) = log.check_log(raw, "f.csv", KNOWN, "").queues.items()
    assert (src, q.rows, q.arms, q.per_arm, q.created_by, q.line) == (
        "3",
        ("r1", "r2"),
        ("m",),
        True,
        "ann",
        2,
    )
    bad = _csv(head, 'r1,queue,ann,2026-01-01T00:00:00Z,3,q,uniform,0,2,maybe,"[""m""]",0',
               'r2,queue,ann,2026-01-01T00:00:00Z,3,q,uniform,0,2,true,"[""m""]",0')  # fmt: skip
    with pytest.raises(log.ReviewImportError) as err:
        log.check_log(bad, "f.csv", KNOWN, "")
    assert err.value.problems == ["f.csv:2: queue_per_arm: must be true or false, not 'maybe'"]


def test_matches_know_untimed_labels_by_verdict_note_and_letter() -> None:
    stored = [log.StoredReview(5, "r1", "override", "ann", T0, "OTHER", None, None, True)]
    m = log.Matches.of(stored)
    assert ("log", "r1", "override", "ann", T0) in m.seen and ("label", "r1", "ann", T0) in m.seen
    raw = _csv("row_id,verdict,reviewer", "r1,OTHER,ann", "r1,OTHER,ben")
    again, other = log.check_log(raw, "f.csv", KNOWN, "").reviews
    assert m.present(again) and not m.present(other)
    m.recorded(other, 6, None)
    assert m.present(other)


def test_neutralised_cells_round_trip_and_log_csv_pads_lines() -> None:
    for text in ["=SUM(A1)", "'=x", "+1", "plain", "''@a", ""]:
        assert log.restore_cell(log.neutralise_cell(text)) == text
    text = log.log_csv([["1", "r1"]])
    header, line = text.splitlines()
    assert header.split(",") == log.EXPORT_COLUMNS and line.split(",") == ["1", "r1", *[""] * 23]


# --- filters -----------------------------------------------------------------------------------------------
def test_row_filter_round_trips_through_its_dict() -> None:
    for f in [
        filters.RowFilter(arms=("a",), verdicts=(filters.NO_VERDICT,), queue_id=3),
        filters.RowFilter(cell=filters.ConfusionCell("naive", "CORRECT", "OTHER")),
        filters.RowFilter(cell=filters.LetterCell("naive", "A", filters.NO_LETTER)),
    ]:
        assert filters.RowFilter.from_dict(json.loads(json.dumps(f.as_dict()))) == f
