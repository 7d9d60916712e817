"""The Review page through AppTest: filters, the row detail (untrusted text as plain text), confirm / override /
retract, blind mode, spot-check queues — and that a review moves graded_rows and the Overview at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcqaudit.store import Study
from mcqaudit.ui.components import _MARK_STYLE
from mcqaudit.ui.pages.review import TRUNCATED_BADGE
from tests.reasoning_study import CUT_TOKENS
from tests.ui_study import BOOT, XSS, app, no_exceptions


@pytest.fixture(autouse=True)
def _bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", str(BOOT))


def shown_row_id(at) -> str:
    line = [m.value for m in at.markdown if m.value.startswith("**Row** `")][0]
    return line.split("`")[1]


def count_line(at) -> int:
    """The length of the list on screen ("Row **k** of **N** …"; 0 when nothing matches)."""
    if any(i.value == "No rows match." for i in at.info):
        return 0
    line = [m.value for m in at.markdown if m.value.startswith("Row **") and " of **" in m.value][0]
    return int(line.split("**")[3])


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
    assert "1 review recorded; 1 row reviewed by 1 reviewer." in [m.value for m in after.markdown]


def test_generation_with_markup_is_shown_as_plain_text(ui_db: Path) -> None:
    at = app(ui_db, "review", reviewer="bob").run()
    at.text_input(key="w:f_search").input("<script>").run()
    no_exceptions(at)
    assert count_line(at) == 1
    # never through Markdown; the only HTML is the escaped text with the naive parser's span marked
    assert not any("<script>" in m.value or "onerror" in m.value for m in at.markdown)
    import html as html_lib

    bodies = [h.proto.body for h in at.get("html") if "mq-generation" in h.proto.body]
    assert len(bodies) == 1
    body = bodies[0]
    assert "<script" not in body and "<img" not in body and "&lt;/script&gt; &lt;img src=x" in body
    inner = body[body.index(">") + 1 : body.rindex("</pre>")]
    assert (
        html_lib.unescape(
            inner.replace(
                f'<mark data-testid="mq-parser-span" title="naive parser took C here" style="{_MARK_STYLE}">',
                "",
            ).replace("</mark>", "")
        )
        == XSS
    )


def test_confirm_retract_and_history(ui_db: Path) -> None:
    s = Study(ui_db)
    at = app(ui_db, "review", reviewer="carol").run()
    rid = shown_row_id(at)
    final = metric(at, "final verdict")
    at.button(key=f"confirm-{rid}").click().run()
    no_exceptions(at)
    assert s.query("SELECT action, verdict FROM reviews")[0] == ("confirm", final)
    assert shown_row_id(at) != rid  # a save moves on to the next row of the list
    at.button(key="prev").click().run()
    assert shown_row_id(at) == rid
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
    assert not at.get("html") or not any("mq-parser-span" in h.proto.body for h in at.get("html"))
    at.radio(key=f"verdict-{rid}").set_value(final).run()
    assert at.button(key=f"override-{rid}").label == "Save override"
    at.button(key=f"override-{rid}").click().run()
    no_exceptions(at)
    # agreeing blind is recorded as a confirmation; back on the row, the judge is revealed
    assert s.query("SELECT action, verdict, reviewer FROM reviews")[0] == ("confirm", final, "dan")
    assert shown_row_id(at) != rid
    at.button(key="prev").click().run()
    assert shown_row_id(at) == rid
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
    assert any(p.proto.text.startswith("0 of 10 rows reviewed (base 0/5") for p in at.get("progress"))
    # reviewing in a queue moves on to the next row and the progress follows
    at.button(key=f"confirm-{queue[0]}").click().run()
    no_exceptions(at)
    assert shown_row_id(at) == queue[1]
    assert any(p.proto.text.startswith("1 of 10 rows reviewed") for p in at.get("progress"))
    assert s.query("SELECT queue_id FROM reviews")[0][0] == 1
    at.button(key="prev").click().run()
    assert shown_row_id(at) == queue[0]


# --- state rules of the review flow (docs/design.md §8) ----------------------------------------------------------------
def _queue(s: Study, size: int = 4, **kw) -> list[str]:
    from mcqaudit.app.reviews import create_spot_check

    sc = create_spot_check(s, size=size, seed=3, **kw)
    return [
        r[0]
        for r in s.query(
            "SELECT row_id FROM spot_check_rows WHERE queue_id = ? ORDER BY position", [sc.queue_id]
        )
    ]


def test_the_queue_and_reviewer_survive_every_save_and_the_url_names_the_row(ui_db: Path) -> None:
    s = Study(ui_db)
    queue = _queue(s, size=2)  # 4 rows over two arms
    at = app(ui_db, "review", reviewer="fay").run()
    at.selectbox(key="w:queue").set_value(1).run()
    for k in range(4):
        rid = shown_row_id(at)
        assert rid == queue[k]
        assert at.query_params["row"] == rid and at.query_params["queue"] == "1"
        assert at.query_params["reviewer"] == "fay"
        at.button(key=f"confirm-{rid}").click().run()
        no_exceptions(at)
        # the selector keeps the queue (its label has no live count that would reset it), and the name stays
        assert at.selectbox(key="w:queue").value == 1 and at.session_state["queue"] == 1
        assert at.text_input(key="w:reviewer").value == "fay"
    assert [r[0] for r in s.query("SELECT row_id FROM reviews ORDER BY review_id")] == queue
    assert any("Every row of this queue is reviewed." in x.value for x in at.success)
    assert shown_row_id(at) == queue[3]  # the last save keeps the row on screen


def test_a_reload_restores_row_queue_reviewer_and_blind_mode(ui_db: Path) -> None:
    s = Study(ui_db)
    queue = _queue(s)
    at = app(ui_db, "overview")
    at.query_params.update({"row": queue[2], "queue": "1", "reviewer": "gus", "blind": "1"})
    at.run()
    no_exceptions(at)
    assert [t.value for t in at.title] == ["Review"]  # ?row= opens Review even from another page
    assert shown_row_id(at) == queue[2]
    assert at.session_state["queue"] == 1 and at.session_state["reviewer"] == "gus"
    assert at.session_state["blind"] is True and at.toggle(key="w:blind").value is True
    assert not at.metric  # blind: nothing of the judge on screen
    # ?queue= alone opens the queue at its first unreviewed row
    from mcqaudit.app.reviews import add_review

    add_review(s, queue[0], reviewer="zed", action="confirm")
    at2 = app(ui_db, "review")
    at2.query_params.update({"queue": "1"})
    at2.run()
    assert shown_row_id(at2) == queue[1]


def test_a_save_moves_to_the_next_unreviewed_row_of_the_queue(ui_db: Path) -> None:
    from mcqaudit.app.reviews import add_review

    s = Study(ui_db)
    queue = _queue(s, size=3)  # 6 rows over two arms
    # another reviewer has done rows 1 and 2 already
    for rid in queue[1:3]:
        add_review(s, rid, reviewer="other", action="confirm")
    at = app(ui_db, "review", reviewer="hal", queue=1).run()
    assert shown_row_id(at) == queue[0]
    at.button(key=f"confirm-{queue[0]}").click().run()
    assert shown_row_id(at) == queue[3]  # rows 1 and 2 are skipped
    # Previous still walks the queue one row at a time, reviewed rows included
    at.button(key="prev").click().run()
    assert shown_row_id(at) == queue[2]
    # a save on a reviewed row moves on to the next unreviewed one after it, wrapping round
    at.radio(key=f"verdict-{queue[2]}").set_value("OTHER").run()
    at.button(key=f"override-{queue[2]}").click().run()
    assert shown_row_id(at) == queue[3]


def test_a_save_lands_on_the_row_whose_button_was_pressed(ui_db: Path) -> None:
    s = Study(ui_db)
    at = app(ui_db, "review", reviewer="ida").run()
    first = shown_row_id(at)
    button = at.button(key=f"confirm-{first}")
    # the session moves on (another tab, a key press) before the click arrives
    at.session_state["row"] = "somewhere else"
    button.click().run()
    no_exceptions(at)
    assert s.query("SELECT row_id, action FROM reviews") == [(first, "confirm")]


def test_parsers_table_says_strict_defers_and_spans_are_marked(ui_db: Path) -> None:
    s = Study(ui_db)
    rid = s.query(
        "SELECT row_id FROM graded_rows WHERE strict_letter IS NULL AND naive_letter IS NOT NULL "
        "AND generation LIKE 'A valid choice%' LIMIT 1"
    )[0][0]
    at = app(ui_db, "review", reviewer="joe", row=rid).run()
    no_exceptions(at)
    assert shown_row_id(at) == rid
    table = [d.value for d in at.dataframe if "verdict it implies" in d.value.columns][0]
    strict = table[table["parser"] == "strict"].iloc[0]
    assert strict["letter"] == "—" and strict["verdict it implies"].startswith("defers")
    gen = s.query("SELECT generation FROM graded_rows WHERE row_id = ?", [rid])[0][0]
    body = [h.proto.body for h in at.get("html") if "mq-generation" in h.proto.body][0]
    # "A valid choice…": the naive parser took the A of the opening word
    assert '<mark data-testid="mq-parser-span"' in body and ">A</mark>" in body
    assert body.count("<mark") == 1 and gen[1:] in body


def test_the_same_item_side_by_side(ui_db: Path) -> None:
    s = Study(ui_db)
    rid, item = s.query("SELECT row_id, item_id FROM graded_rows ORDER BY row_id LIMIT 1")[0]
    at = app(ui_db, "review", reviewer="kim", row=rid).run()
    table = [d.value for d in at.dataframe if any("(gold" in str(c) for c in d.value.columns)][0]
    rows = s.query(
        "SELECT arm, orientation, gold_letter, picked_letter, final_verdict, row_id FROM graded_rows WHERE item_id = ?",
        [item],
    )
    assert table.shape == (2, 2)  # arms × orientations
    for arm, orient, gold, picked, final, row_id in rows:
        cell = table.loc[arm, f"{orient} (gold {gold})"]
        assert f"{picked or '—'} · {final}" in cell
        assert cell.startswith("▶") == (row_id == rid)


def test_a_read_only_study_is_browsed_and_nothing_can_be_saved(ui_db: Path, monkeypatch) -> None:
    """A study shared read-only (file, folder or disk) opens read-only (see tests/test_reviews.py for the
    detection); the Review page then browses it with every write control disabled, and says why."""
    from mcqaudit.ui import data

    monkeypatch.setattr(data, "get_study", lambda path: Study(path, read_only=True))
    at = app(ui_db, "review", reviewer="lee").run()
    no_exceptions(at)
    assert any("read-only" in w.value for w in at.warning)
    rid = shown_row_id(at)
    assert at.button(key=f"confirm-{rid}").disabled
    at.radio(key=f"verdict-{rid}").set_value("OTHER").run()
    assert at.button(key=f"override-{rid}").disabled
    assert at.button(key="next").disabled is False  # browsing still works
    at.button(key="next").click().run()
    assert shown_row_id(at) != rid
    assert Study(ui_db).query("SELECT count(*) FROM reviews")[0][0] == 0


def _side_by_side_reference(rows, current: str, hidden: bool):  # type: ignore[no-untyped-def]
    """The side-by-side table as pandas string arithmetic and two pivots (the straightforward computation)."""
    from mcqaudit.ui.pages.review import UNGRADED

    r = rows.copy()
    multi = r["sample"].nunique() > 1
    r["column"] = (
        r["orientation"]
        + (" s" + r["sample"].astype(str) if multi else "")
        + " (gold "
        + r["gold_letter"]
        + ")"
    )
    if hidden:
        r["cell"] = r["reviewed"].map({True: "✓ reviewed", False: "·"})
    else:
        r["cell"] = (
            r["picked_letter"].fillna("—")
            + " · "
            + r["final_verdict"].fillna(UNGRADED)
            + r["reviewed"].map({True: " ✓", False: ""})
        )
    r.loc[r["row_id"] == current, "cell"] = "▶ " + r.loc[r["row_id"] == current, "cell"]
    cols = list(dict.fromkeys(r["column"]))
    arms = list(dict.fromkeys(r["arm"]))
    cells = r.pivot(index="arm", columns="column", values="cell").reindex(index=arms, columns=cols)
    ids = r.pivot(index="arm", columns="column", values="row_id").reindex(index=arms, columns=cols)
    return cells.fillna("").rename_axis(None, axis=1), ids


@pytest.mark.parametrize("samples", [1, 2])
@pytest.mark.parametrize("hidden", [False, True])
def test_side_by_side_matches_the_pivot(ui_db: Path, samples: int, hidden: bool) -> None:
    """The item's table (plain Python) equals pandas' pivot of the item's rows: ungraded rows, rows without a
    letter, reviewed rows, an arm lacking an orientation, several samples."""
    import pandas as pd

    from mcqaudit.store import rows as rw
    from mcqaudit.ui.pages.review import side_by_side

    s = Study(ui_db)
    for (item,) in s.query("SELECT DISTINCT item_id FROM gen_rows ORDER BY item_id LIMIT 4"):
        df = rw.item_rows(s, item)
        extra = df.assign(sample=1, row_id=df["row_id"] + "-s1") if samples > 1 else df.iloc[:0]
        df = pd.concat([df, extra], ignore_index=True)
        df.loc[1, ["final_verdict", "picked_letter"]] = None  # ungraded
        df.loc[2, "reviewed"] = True
        df = df.drop(index=3).reset_index(drop=True)  # one arm lacks one orientation
        for current in (df["row_id"].iloc[0], df["row_id"].iloc[-1], "not-in-the-item"):
            want_cells, want_ids = _side_by_side_reference(df, current, hidden)
            cells, ids = side_by_side(df, current, hidden)
            pd.testing.assert_frame_equal(cells, want_cells)
            pd.testing.assert_frame_equal(ids, want_ids.astype(object).where(want_ids.notna(), None))


# --- a reasoning model's rows: the answer first, the reasoning collapsed, the truncated badge -------------------------
@pytest.fixture(scope="module")
def reasoning_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.reasoning_study import build_reasoning_study

    return build_reasoning_study(tmp_path_factory.mktemp("reasoning") / "study.duckdb")


@pytest.fixture
def reasoning_db(reasoning_template: Path, tmp_path: Path) -> Path:
    import shutil

    dst = tmp_path / "study.duckdb"
    shutil.copy(reasoning_template, dst)
    return dst


def _thinker_row(db: Path, kind: str, orientation: str = "ABCD") -> tuple[str, str]:
    """(row id, gold letter) of the thinker row of ``kind`` (tests/reasoning_study.py)."""
    from tests.reasoning_study import KINDS

    item = f"r{KINDS.index(kind):02d}"
    return Study(db).query(
        "SELECT row_id, gold_letter FROM graded_rows WHERE arm = 'thinker' AND item_id = ? AND orientation = ?",
        [item, orientation],
    )[0]


def _answer_box(at) -> str:  # type: ignore[no-untyped-def]
    """The one marked answer box on screen (our <pre> with the parser's span)."""
    bodies = [h.proto.body for h in at.get("html") if "mq-generation" in h.proto.body]
    assert len(bodies) == 1, bodies
    return bodies[0]


def _left_column_texts(at) -> list[str]:  # type: ignore[no-untyped-def]
    """The left column's elements in screen order, as (kind: text) strings, expanders by their label."""
    out: list[str] = []

    def walk(node) -> None:  # type: ignore[no-untyped-def]
        kind = getattr(node, "type", "")
        if kind == "expander":
            out.append(f"expander: {node.label}")
        elif kind in ("markdown", "caption", "code", "html"):
            out.append(f"{kind}: {getattr(node, 'value', None) or node.proto.body}")
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(_panel_left(at))
    return out


def _panel_left(at):  # type: ignore[no-untyped-def]
    """The review panel's left column: the first column holding the generation's heading."""
    for col in at.columns:
        texts = [m.value for m in col.markdown]
        if any(t.startswith(("**Answer**", "**Generation**")) for t in texts):
            return col
    raise AssertionError("no column shows the row's text")


def test_a_reasoning_row_shows_its_answer_first_marked_and_its_reasoning_collapsed(
    reasoning_db: Path,
) -> None:
    from tests.reasoning_study import thinking

    rid, gold = _thinker_row(reasoning_db, "letters")
    at = app(reasoning_db, "review", reviewer="rae", row=rid).run()
    no_exceptions(at)
    assert shown_row_id(at) == rid
    left = _left_column_texts(at)
    heading = [i for i, t in enumerate(left) if t.startswith("markdown: **Answer**")]
    box = [i for i, t in enumerate(left) if t.startswith("html:") and "mq-generation" in t]
    reasoning = [i for i, t in enumerate(left) if t.startswith("expander: Reasoning")]
    question = [i for i, t in enumerate(left) if t.startswith("markdown: **Question**")]
    assert heading and box and reasoning and question
    assert heading[0] < box[0] < reasoning[0] < question[0]  # the answer first, the reasoning under it
    # the span is marked in the answer (the bare letter), never in the thinking that names other letters
    body = _answer_box(at)
    assert body.endswith(f">{gold}</mark></pre>") and body.count("<mark") == 1
    assert "tempting" not in body
    exp = [e for e in at.expander if e.label.startswith("Reasoning")]
    assert (
        len(exp) == 1
        and exp[0].label
        == f"Reasoning ({len(thinking(gold)):,} characters; not read by the parsers or the judge)"
    )
    assert exp[0].proto.expanded is False  # collapsed until the reviewer opens it
    assert [c.value for c in exp[0].code] == [thinking(gold)]  # verbatim, as text
    assert not any(m.value.startswith(TRUNCATED_BADGE) for m in at.markdown)  # finished: no badge
    assert any("310 completion tokens" in c.value for c in at.caption)  # in the metadata line


def test_an_inline_think_block_is_shown_as_the_reasoning(reasoning_db: Path) -> None:
    from tests.reasoning_study import thinking

    rid, gold = _thinker_row(reasoning_db, "inline", "BCDA")
    at = app(reasoning_db, "review", reviewer="rae", row=rid).run()
    no_exceptions(at)
    body = _answer_box(at)
    assert "think" not in body and "tempting" not in body and body.endswith(f"nswer is {gold}.</pre>")
    # a framework parser's span: the letter it took from the answer
    at.segmented_control(key=f"hl-{rid}").set_value("mmlu_pro_chain").run()
    assert _answer_box(at).endswith(f">{gold}</mark>.</pre>")
    exp = [e for e in at.expander if e.label.startswith("Reasoning")]
    assert [c.value for c in exp[0].code] == [thinking(gold)]


def test_a_hostile_reasoning_shows_as_its_characters(reasoning_db: Path) -> None:
    from tests.reasoning_study import HOSTILE

    rid, _ = _thinker_row(reasoning_db, "hostile")
    at = app(reasoning_db, "review", reviewer="rae", row=rid).run()
    no_exceptions(at)
    exp = [e for e in at.expander if e.label.startswith("Reasoning")][0]
    assert [c.value for c in exp.code] == [HOSTILE]
    assert not exp.markdown and not exp.get("html")  # nothing of it through Markdown or HTML
    assert not any("<script>" in m.value or "[link]" in m.value for m in at.markdown)
    assert "alert" not in _answer_box(at)


_CUT_CAPTION = (
    f"the model was stopped by the token limit · finish_reason length · {CUT_TOKENS:,} completion tokens "
    "(120 prompt)"
)


@pytest.mark.parametrize(
    ("kind", "why", "says"),
    [
        (
            "cut",
            _CUT_CAPTION,
            "No answer: the model was cut off by the token limit while thinking. OTHER by rule.",
        ),
        (
            "unclosed",
            _CUT_CAPTION,
            "No answer: the model was cut off by the token limit while thinking. OTHER by rule.",
        ),
        (
            "unclosed_stop",
            "the reasoning block never closes · finish_reason stop",
            "No answer: the reasoning block never closes, so the model never answered. OTHER by rule.",
        ),
    ],
)
def test_a_row_cut_off_while_thinking_says_so_plainly(
    reasoning_db: Path, kind: str, why: str, says: str
) -> None:
    rid, _ = _thinker_row(reasoning_db, kind)
    at = app(reasoning_db, "review", reviewer="rae", row=rid).run()
    no_exceptions(at)
    assert [m.value for m in at.markdown if m.value.startswith(TRUNCATED_BADGE)] == [TRUNCATED_BADGE]
    captions = [c.value for c in at.caption]
    assert why in captions
    assert says in captions
    assert not [h for h in at.get("html") if "mq-generation" in h.proto.body]  # no answer to mark
    assert [e for e in at.expander if e.label.startswith("Reasoning")]  # the thinking is still there to read
    assert metric(at, "final verdict") == "OTHER" and metric(at, "source") == "rule"
    table = [d.value for d in at.dataframe if "verdict it implies" in d.value.columns][0]
    assert table.set_index("parser").loc["strict", "verdict it implies"] == "OTHER (empty answer: by rule)"


def test_a_row_cut_off_after_answering_shows_its_answer_and_the_badge(reasoning_db: Path) -> None:
    rid, gold = _thinker_row(reasoning_db, "cut_answered")
    at = app(reasoning_db, "review", reviewer="rae", row=rid).run()
    no_exceptions(at)
    assert [m.value for m in at.markdown if m.value.startswith(TRUNCATED_BADGE)]
    assert _answer_box(at).endswith(f"nswer is {gold}, because</pre>")
    at.segmented_control(key=f"hl-{rid}").set_value("mmlu_pro_chain").run()
    assert _answer_box(at).endswith(f">{gold}</mark>, because</pre>")
    assert not any(c.value.startswith("No answer") for c in at.caption)


def test_a_row_without_reasoning_looks_as_before(reasoning_db: Path) -> None:
    s = Study(reasoning_db)
    rid = s.query("SELECT row_id FROM graded_rows WHERE arm = 'base' ORDER BY row_id LIMIT 1")[0][0]
    at = app(reasoning_db, "review", reviewer="rae", row=rid).run()
    no_exceptions(at)
    assert "**Generation** (verbatim)" in [m.value for m in at.markdown]
    assert not any(m.value.startswith("**Answer**") for m in at.markdown)
    assert not [e for e in at.expander if e.label.startswith("Reasoning")]
    assert not any(m.value.startswith(TRUNCATED_BADGE) for m in at.markdown)


def test_the_row_list_shows_the_answer_and_a_truncated_column(reasoning_db: Path) -> None:
    at = app(reasoning_db, "review", reviewer="rae").run()
    at.multiselect(key="w:f_arms").set_value(["thinker"]).run()
    no_exceptions(at)
    lists = [d.value for d in at.dataframe if "answer" in d.value.columns and "#" in d.value.columns]
    assert len(lists) == 1
    view = lists[0]
    assert "generation" not in view.columns
    assert not any(str(a).startswith("<think>") for a in view["answer"])
    s = Study(reasoning_db)
    want = s.query("SELECT count(*) FROM graded_rows WHERE arm = 'thinker' AND truncated")[0][0]
    assert int(view["truncated"].sum()) == want == 4 * 2
