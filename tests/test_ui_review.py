"""The Review page through AppTest: filters, the row detail (untrusted text as plain text), confirm / override /
retract, blind mode, spot-check queues — and that a review moves graded_rows and the Overview at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcqaudit.store import Study
from tests.test_ui_fixture import BOOT, XSS, _ui_db, _ui_template, app, no_exceptions  # noqa: F401


@pytest.fixture(autouse=True)
def _bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", str(BOOT))


def shown_row_id(at) -> str:
    line = [m.value for m in at.markdown if m.value.startswith("**Row** `")][0]
    return line.split("`")[1]


def count_line(at) -> int:
    line = [
        m.value for m in at.markdown if m.value.endswith(" rows match.") or " rows · showing " in m.value
    ][0]
    return int(line.split("**")[1])


def metric(at, label: str) -> str:
    return {m.label: m.value for m in at.metric}[label]


def test_override_changes_graded_rows_and_the_overview(ui_db: Path) -> None:
    s = Study(ui_db)
    before = app(ui_db, "overview").run()
    other_before = metric(before, "OTHER rate · base")

    at = app(ui_db, "review").run()
    no_exceptions(at)
    # no reviewer yet: nothing can be saved
    assert at.button(key=[b.key for b in at.button if b.key.startswith("override-")][0]).disabled
    at.text_input(key="w:reviewer").input("alice").run()
    at.multiselect(key="w:f_arms").set_value(["base"]).run()
    at.multiselect(key="w:f_verdicts").set_value(["CORRECT"]).run()
    n_correct = s.query("SELECT count(*) FROM graded_rows WHERE arm = 'base' AND final_verdict = 'CORRECT'")[
        0
    ][0]
    assert count_line(at) == n_correct
    rid = shown_row_id(at)
    assert metric(at, "final verdict") == "CORRECT"
    at.radio(key=f"verdict-{rid}").set_value("OTHER").run()
    at.text_input(key=f"note-{rid}").input("refuses, then guesses")
    at.button(key=f"override-{rid}").click().run()
    no_exceptions(at)
    assert any("Saved review #1" in x.value for x in at.success)

    row = s.query(
        "SELECT final_verdict, verdict_source, reviewer, picked_letter FROM graded_rows WHERE row_id = ?",
        [rid],
    )[0]
    assert row == ("OTHER", "review", "alice", None)
    log = s.query(
        "SELECT action, verdict, note, prior_verdict, prior_source, fingerprint, origin FROM reviews"
    )
    assert log[0][:5] == ("override", "OTHER", "refuses, then guesses", "CORRECT", row and log[0][4])
    assert log[0][4] in ("prefilter", "judge") and log[0][6] == "dashboard"
    # the filtered list (base, CORRECT) lost the row at once
    assert count_line(at) == n_correct - 1

    after = app(ui_db, "overview").run()
    base_rows = s.query("SELECT count(*) FROM graded_rows WHERE arm = 'base'")[0][0]
    n_other = s.query("SELECT count(*) FROM graded_rows WHERE arm = 'base' AND final_verdict = 'OTHER'")[0][0]
    assert metric(after, "OTHER rate · base") == f"{100 * n_other / base_rows:.1f} %" != other_before
    assert "1 reviews recorded; 1 rows reviewed by 1 reviewer(s)." in [m.value for m in after.markdown]


def test_generation_with_markup_is_shown_as_plain_text(ui_db: Path) -> None:
    at = app(ui_db, "review", reviewer="bob").run()
    at.text_input(key="w:f_search").input("<script>").run()
    no_exceptions(at)
    assert count_line(at) == 1
    assert XSS in [c.value for c in at.code]
    # never through Markdown or HTML
    assert not any("<script>" in m.value or "onerror" in m.value for m in at.markdown)
    assert not at.get("html")


def test_confirm_retract_and_history(ui_db: Path) -> None:
    s = Study(ui_db)
    at = app(ui_db, "review", reviewer="carol").run()
    rid = shown_row_id(at)
    final = metric(at, "final verdict")
    at.button(key=f"confirm-{rid}").click().run()
    no_exceptions(at)
    assert s.query("SELECT action, verdict FROM reviews")[0] == ("confirm", final)
    assert metric(at, "source") == "review"
    assert at.selectbox(key=f"retract-id-{rid}").value == 1
    at.button(key=f"retract-{rid}").click().run()
    no_exceptions(at)
    assert s.query("SELECT action, retracts, reviewer FROM reviews ORDER BY review_id")[1] == (
        "retract",
        1,
        "carol",
    )
    assert s.query("SELECT verdict_source FROM graded_rows WHERE row_id = ?", [rid])[0][0] in (
        "judge",
        "prefilter",
    )
    hist = [d.value for d in at.dataframe if "status" in d.value.columns][0]
    assert list(hist["status"]) == ["retracted", "retraction"]


def test_blind_mode_hides_the_judge_until_the_reviewer_decides(ui_db: Path) -> None:
    s = Study(ui_db)
    at = app(ui_db, "review", reviewer="dan", blind=True).run()
    no_exceptions(at)
    rid = shown_row_id(at)
    assert not at.metric  # no final verdict, no source
    assert not [d for d in at.dataframe if "letter" in d.value.columns]  # no parser letters
    assert "final_verdict" not in at.dataframe[0].value.columns  # nor in the row list
    assert not [b for b in at.button if b.key.startswith("confirm-")]
    final = s.query("SELECT final_verdict FROM graded_rows WHERE row_id = ?", [rid])[0][0]
    at.radio(key=f"verdict-{rid}").set_value(final).run()
    assert at.button(key=f"override-{rid}").label == "Save decision"
    at.button(key=f"override-{rid}").click().run()
    no_exceptions(at)
    # agreeing blind is recorded as a confirmation; then the judge is revealed
    assert s.query("SELECT action, verdict, reviewer FROM reviews")[0] == ("confirm", final, "dan")
    assert metric(at, "final verdict") == final
    assert [d for d in at.dataframe if "letter" in d.value.columns]


def test_filters_match_the_database(ui_db: Path) -> None:
    s = Study(ui_db)
    at = app(ui_db, "review").run()
    assert count_line(at) == s.query("SELECT count(*) FROM graded_rows")[0][0]
    at.selectbox(key="w:f_disagree").set_value("naive").run()
    n = s.query(
        """SELECT count(*) FROM graded_rows WHERE (CASE WHEN naive_letter IS NULL THEN 'OTHER'
           WHEN naive_letter = gold_letter THEN 'CORRECT' ELSE 'INCORRECT' END) <> final_verdict"""
    )[0][0]
    assert count_line(at) == n > 0
    at.multiselect(key="w:f_orientations").set_value(["BCDA"]).run()
    at.multiselect(key="w:f_statuses").set_value(["ok"]).run()
    n2 = s.query(
        """SELECT count(*) FROM graded_rows WHERE orientation = 'BCDA' AND judge_status = 'ok' AND
           (CASE WHEN naive_letter IS NULL THEN 'OTHER' WHEN naive_letter = gold_letter THEN 'CORRECT'
            ELSE 'INCORRECT' END) <> final_verdict"""
    )[0][0]
    assert count_line(at) == n2 > 0
    at.radio(key="w:f_reviewed").set_value("reviewed").run()
    assert count_line(at) == 0
    # next / previous walk the list
    at.radio(key="w:f_reviewed").set_value("all rows").run()
    first = shown_row_id(at)
    at.button(key="next").click().run()
    second = shown_row_id(at)
    assert second != first
    at.button(key="prev").click().run()
    assert shown_row_id(at) == first


def test_spot_check_queue_is_seeded_persisted_and_walked(ui_db: Path) -> None:
    s = Study(ui_db)
    at = app(ui_db, "review", reviewer="erin").run()
    at.number_input(key="q_size").set_value(5)
    at.number_input(key="q_seed").set_value(7)
    at.radio(key="q_strategy").set_value("stratified")
    at.button(key="FormSubmitter:new_queue-Draw sample").click().run()
    no_exceptions(at)
    q = s.query("SELECT queue_id, strategy, seed, size, arms, created_by FROM spot_checks")
    assert q == [(1, "stratified", 7, 5, ["base", "steered"], "erin")]
    queue = [r[0] for r in s.query("SELECT row_id FROM spot_check_rows WHERE queue_id = 1 ORDER BY position")]
    assert len(queue) == 10
    assert at.session_state["queue"] == 1
    assert shown_row_id(at) == queue[0]
    assert any(p.proto.text == "0 of 10 rows reviewed" for p in at.get("progress"))
    # reviewing in a queue moves on to the next row and the progress follows
    at.button(key=f"confirm-{queue[0]}").click().run()
    no_exceptions(at)
    assert shown_row_id(at) == queue[1]
    assert any(p.proto.text == "1 of 10 rows reviewed" for p in at.get("progress"))
    assert s.query("SELECT queue_id FROM reviews")[0][0] == 1
    at.button(key="prev").click().run()
    assert shown_row_id(at) == queue[0]
