"""Review with a panel of judges and more than one reviewer (issue 21; docs/design.md §8): every judge's verdict
on the row, the `judges_disagree` queue, the "reviewers disagree" filter that a third person settles, and a
second reviewer's queue worked blind to the first review.

The study is graded by two scripted judges on 127.0.0.1 through the real `grade` command and `openai`
client (tests/panel_study.py): they disagree on 12 rows known by hand. Pages run in AppTest; the real
Chromium run is tests/test_review_panel_browser.py.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from mcqaudit.app import reviews as rv
from mcqaudit.app.rows import next_unreviewed, row_detail, row_ids
from mcqaudit.review.filters import REVIEWERS_DISAGREE, REVIEWERS_SETTLED, RowFilter
from mcqaudit.store import Study
from mcqaudit.store.rows import queue_progress
from mcqaudit.ui.agreement import judges_frame
from tests.helpers import run_cli
from tests.panel_study import ARM_OF, DISAGREE, PANEL, PRIMARY, N, build_panel_study
from tests.ui_study import BOOT, app, no_exceptions


@pytest.fixture(autouse=True)
def _bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", str(BOOT))


@pytest.fixture(scope="module")
def panel_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_panel_study(tmp_path_factory.mktemp("panel") / "template.duckdb")


@pytest.fixture
def panel_db(panel_template: Path, tmp_path: Path) -> Path:
    """A copy per test (the dashboard caches one study per path)."""
    return Path(shutil.copy(panel_template, tmp_path / "study.duckdb"))


def _queue(s: Study, qid: int) -> list[str]:
    return [
        r[0]
        for r in s.query("SELECT row_id FROM spot_check_rows WHERE queue_id = ? ORDER BY position", [qid])
    ]


def _first_by_md5(rows: list[str], seed: int, k: int) -> set[str]:
    """The first ``k`` of ``rows`` in the draw order md5(seed:row_id), computed here, not by the store."""
    return set(sorted(rows, key=lambda r: (hashlib.md5(f"{seed}:{r}".encode()).hexdigest(), r))[:k])


def _cli(*args: str) -> Any:
    return run_cli("reviews", *args)


# --- every judge's verdict on the row ------------------------------------------------------------------
def test_the_hand_count_holds_in_the_study(panel_db: Path) -> None:
    differ = Study(panel_db).query(
        "SELECT a.row_id FROM judge_verdicts a JOIN judge_verdicts b USING (row_id) "
        "WHERE a.fingerprint = ? AND b.fingerprint = ? AND a.verdict <> b.verdict ORDER BY 1",
        [PRIMARY, PANEL],
    )
    assert [r[0] for r in differ] == DISAGREE


def test_row_detail_has_every_judges_verdict_and_letter(panel_db: Path, tmp_path: Path) -> None:
    s = Study(panel_db)
    # take 5: "… it is a yellow fruit" → the primary picks B (INCORRECT, gold A); the panel judge says OTHER
    got = row_detail(s, "r00005")["judges"]  # type: ignore[index]
    assert got == [
        {"fingerprint": PRIMARY, "model": "scripted", "role": "primary", "status": "ok", "verdict": "INCORRECT",
         "letter": "B", "reply": "B", "standin": False},
        {"fingerprint": PANEL, "model": "second", "role": "panel", "status": "ok", "verdict": "OTHER",
         "letter": None, "reply": "OTHER", "standin": False},
    ]  # fmt: skip
    frame = judges_frame(row_detail(s, "r00005"))  # type: ignore[arg-type]
    assert frame is not None and list(frame["vs primary"]) == ["—", "differs"]
    same = row_detail(s, "r00004")["judges"]  # type: ignore[index]
    assert [(j["role"], j["verdict"], j["letter"]) for j in same] == [
        ("primary", "CORRECT", "A"),
        ("panel", "CORRECT", "A"),
    ]
    assert list(judges_frame(row_detail(s, "r00004"))["vs primary"]) == ["—", "same"]  # type: ignore[arg-type, index]
    # one judge: the primary's verdict alone, and nothing more for the page to show
    one = Study(build_panel_study(tmp_path / "one.duckdb", panel=None))
    alone = row_detail(one, "r00005")
    assert [(j["role"], j["verdict"]) for j in alone["judges"]] == [("primary", "INCORRECT")]  # type: ignore[index]
    assert judges_frame(alone) is None  # type: ignore[arg-type]


def _judges_table(at: Any) -> Any:
    hits = [d.value for d in at.dataframe if "vs primary" in d.value.columns]
    return hits[0] if hits else None


def _row_line(at: Any) -> str:
    return [m.value for m in at.markdown if m.value.startswith("**Row** `")][0].split("`")[1]


def test_the_review_page_shows_every_judge_unless_blind(panel_db: Path, tmp_path: Path) -> None:
    at = app(panel_db, "review", reviewer="ann", row="r00005").run()
    no_exceptions(at)
    assert _row_line(at) == "r00005"
    table = _judges_table(at)
    assert table is not None
    assert table[["judge", "model", "verdict", "letter", "vs primary", "status"]].values.tolist() == [
        ["primary", "scripted", "INCORRECT", "B", "—", "ok"],
        ["panel", "second", "OTHER", "—", "differs", "ok"],
    ]
    assert list(table["fingerprint"]) == [PRIMARY, PANEL]
    assert any(
        m.value.startswith("**Every judge** (the primary") and "1 differs" in m.value for m in at.markdown
    )
    # blind mode hides every judge with the judge
    blind = app(panel_db, "review", reviewer="bo", row="r00005", blind=True).run()
    no_exceptions(blind)
    assert _judges_table(blind) is None and not blind.metric
    # a study with one judge looks as it always did
    one = build_panel_study(tmp_path / "one.duckdb", panel=None)
    plain = app(one, "review", reviewer="ann", row="r00005").run()
    no_exceptions(plain)
    assert _judges_table(plain) is None and not [m for m in plain.markdown if "Every judge" in m.value]
    assert {m.label for m in plain.metric} >= {"final verdict", "source"}


# --- the judges_disagree queue -------------------------------------------------------------------------
def test_judges_disagree_draws_exactly_the_rows_the_judges_differ_on(panel_db: Path) -> None:
    s = Study(panel_db)
    every = rv.create_spot_check(s, size=100, strategy="judges_disagree")  # per arm: all of them
    assert sorted(_queue(s, every.queue_id)) == DISAGREE
    assert every.by_arm == {"base": 6, "steered": 6} and every.rows == 12
    assert every.name == "judges_disagree 100/arm seed 0"
    # per-arm quotas, seeded: 4 of each arm's 6, the first 4 in md5(seed:row_id) order
    four = rv.create_spot_check(s, size=4, seed=3, strategy="judges_disagree")
    rows = _queue(s, four.queue_id)
    for arm in ("base", "steered"):
        mine = [r for r in DISAGREE if ARM_OF[r] == arm]
        assert {r for r in rows if ARM_OF[r] == arm} == _first_by_md5(mine, 3, 4)
    again = rv.create_spot_check(s, size=4, seed=3, strategy="judges_disagree")
    assert _queue(s, again.queue_id) == rows  # same seed, same rows, same order
    # a total is the first 5 of the whole seeded draw, each arm what it has among them
    five = rv.create_spot_check(s, size=5, per_arm=False, seed=7, strategy="judges_disagree")
    assert set(_queue(s, five.queue_id)) == _first_by_md5(DISAGREE, 7, 5)
    assert sum(five.by_arm.values()) == 5
    # one arm only; the command line gives the same draw as the use case
    base = rv.create_spot_check(s, size=50, strategy="judges_disagree", arms=["base"])
    assert sorted(_queue(s, base.queue_id)) == [r for r in DISAGREE if ARM_OF[r] == "base"]
    p = _cli("queue", "--db", str(panel_db), "--strategy", "judges_disagree", "--size", "4", "--seed", "3",
             "--per-arm", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["rows"] == rows
    p = _cli("queue", "--db", str(panel_db), "--strategy", "judges_disagree", "--size", "12")
    assert p.returncode == 0 and "12 rows (judges_disagree, seed 0, 12 total; arms base, steered)" in p.stdout


def test_judges_disagree_says_why_it_draws_nothing(tmp_path: Path) -> None:
    one = build_panel_study(tmp_path / "one.duckdb", panel=None)
    p = _cli("queue", "--db", str(one), "--strategy", "judges_disagree", "--size", "5")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "judges_disagree: the study has no panel judge" in p.stderr and "grade --panel" in p.stderr
    same = build_panel_study(tmp_path / "same.duckdb", panel="same")
    p = _cli("queue", "--db", str(same), "--strategy", "judges_disagree", "--size", "5")
    assert (
        p.returncode == 1
        and (
            "the primary and panel judges give the same verdict on every row of arms base, steered they both "
            "graded (60 rows): nothing to draw"
        )
        in p.stderr
    )
    p = _cli("queue", "--db", str(same), "--strategy", "judges_disagree", "--size", "5", "--arm", "steered")
    assert p.returncode == 1 and "every row of arm steered they both graded (30 rows)" in p.stderr
    p = _cli(
        "queue", "--db", str(same), "--strategy", "judges_disagree", "--size", "5", "--of-reviewer", "ann"
    )
    assert p.returncode == 2 and "--of-reviewer goes with --strategy second_review" in p.stderr
    for db in (one, same):
        assert Study(db).query("SELECT count(*) FROM spot_checks") == [(0,)]  # nothing written
    # the dashboard's form says the same, and draws nothing
    at = app(one, "review", reviewer="ann").run()
    at.radio(key="q_strategy").set_value("judges_disagree")
    at.button(key="FormSubmitter:new_queue-Draw sample").click().run()
    no_exceptions(at)
    assert any("the study has no panel judge" in e.value for e in at.error)
    assert Study(one).query("SELECT count(*) FROM spot_checks") == [(0,)]


def test_a_judges_disagree_queue_drawn_and_worked_on_the_dashboard(panel_db: Path) -> None:
    s = Study(panel_db)
    at = app(panel_db, "review", reviewer="ann").run()
    at.number_input(key="q_size").set_value(3)
    at.radio(key="q_strategy").set_value("judges_disagree")
    at.button(key="FormSubmitter:new_queue-Draw sample").click().run()
    no_exceptions(at)
    queue = _queue(s, 1)
    assert len(queue) == 6 and set(queue) <= set(DISAGREE)
    assert any(
        "Spot check #1 drawn: 6 rows (judges_disagree, seed 0; base: 3, steered: 3)" in x.value
        for x in at.success
    )
    for k in range(2):
        rid = _row_line(at)
        assert rid == queue[k]
        table = _judges_table(at)
        assert table is not None and list(table["vs primary"]) == ["—", "differs"]
        at.button(key=f"confirm-{rid}").click().run()
    assert [r[0] for r in s.query("SELECT row_id FROM reviews ORDER BY review_id")] == queue[:2]


# --- reviewers disagree, and a third person settles -------------------------------------------------------
def _review(s: Study, rid: str, who: str, verdict: str) -> int:
    return rv.add_review(s, rid, reviewer=who, action="override", verdict=verdict)


def test_reviewers_disagree_and_a_third_person_settles(panel_db: Path) -> None:
    s = Study(panel_db)
    r = [f"r{k:05d}" for k in range(10, 17)]
    _review(s, r[0], "ann", "CORRECT"), _review(s, r[0], "bob", "CORRECT")  # agree
    _review(s, r[1], "ann", "CORRECT"), _review(s, r[1], "bob", "INCORRECT")  # disagree
    for who, v in (("ann", "INCORRECT"), ("bob", "OTHER"), ("cy", "INCORRECT")):
        _review(s, r[2], who, v)  # settled by cy
    _review(s, r[3], "ann", "CORRECT")  # one reviewer
    _review(s, r[4], "ann", "CORRECT")
    rv.retract_review(s, _review(s, r[4], "bob", "OTHER"), reviewer="bob")  # bob withdrew: one reviewer left
    for who, v in (("ann", "CORRECT"), ("bob", "INCORRECT"), ("ann", "INCORRECT")):
        _review(s, r[5], who, v)  # ann came round: they agree
    for who, v in (("ann", "CORRECT"), ("bob", "INCORRECT"), ("cy", "CORRECT"), ("bob", "INCORRECT")):
        _review(s, r[6], who, v)  # bob had the last word against two: not settled

    def listed(value: str) -> list[str]:
        return row_ids(s, RowFilter(reviewers=value))

    assert set(listed(REVIEWERS_DISAGREE)) == {r[1], r[6]} and listed(REVIEWERS_SETTLED) == [r[2]]
    first, then = listed(REVIEWERS_DISAGREE)  # list order: arm base (r00016) before steered (r00011)
    # the filter on the page; a third person works through it and settles the first row
    at = app(panel_db, "review", reviewer="dee").run()
    at.selectbox(key="w:f_reviewers").set_value(REVIEWERS_DISAGREE).run()
    no_exceptions(at)
    assert _row_line(at) == first
    assert any(m.value == "Row **1** of **2** matching rows" for m in at.markdown)
    at.radio(key=f"verdict-{first}").set_value("OTHER").run()
    at.button(key=f"override-{first}").click().run()
    no_exceptions(at)
    # their review is the latest, so it is the final verdict; the row is settled
    assert s.query(
        "SELECT final_verdict, verdict_source, reviewer FROM graded_rows WHERE row_id = ?", [first]
    ) == [("OTHER", "review", "dee")]
    assert listed(REVIEWERS_DISAGREE) == [then] and set(listed(REVIEWERS_SETTLED)) == {first, r[2]}
    assert _row_line(at) == then  # the next row of the list
    assert any("reviewers disagree" in e.label for e in at.expander)


def test_two_reviewers_imported_then_a_third_settles(panel_db: Path, tmp_path: Path) -> None:
    s = Study(panel_db)
    rows = [f"r{k:05d}" for k in range(20, 30)]
    gold = {r: "CORRECT" for r in rows}
    ann = tmp_path / "ann.csv"
    ann.write_text(
        "row_id,verdict,reviewer,reviewed_at\n"
        + "".join(f"{r},{gold[r]},ann,2026-11-01T10:00:{k:02d}Z\n" for k, r in enumerate(rows)),
        encoding="utf-8",
    )
    split = set(rows[2:5])  # bob says OTHER on three of them
    bob = tmp_path / "bob.jsonl"
    bob.write_text(
        "".join(
            json.dumps({"row_id": r, "verdict": "OTHER" if r in split else gold[r],
                        "reviewed_at": f"2026-11-02T09:00:{k:02d}Z"}) + "\n"
            for k, r in enumerate(rows)
        ),
        encoding="utf-8",
    )  # fmt: skip
    for f, extra in ((ann, []), (bob, ["--reviewer", "bob"])):
        p = _cli("import", str(f), "--db", str(panel_db), *extra)
        assert p.returncode == 0, p.stderr
    assert s.query("SELECT count(DISTINCT reviewer), count(*) FROM reviews") == [(2, 20)]
    disagree = row_ids(s, RowFilter(reviewers=REVIEWERS_DISAGREE))
    assert set(disagree) == split
    # bob's later import is what each row says now
    assert {
        r[0]
        for r in s.query("SELECT row_id FROM graded_rows WHERE reviewer = 'bob' AND final_verdict = 'OTHER'")
    } == split
    # a third person settles one on the dashboard: theirs is the latest review, so it is final
    at = app(panel_db, "review", reviewer="cy").run()
    at.selectbox(key="w:f_reviewers").set_value(REVIEWERS_DISAGREE).run()
    rid = _row_line(at)
    assert rid == disagree[0]
    at.radio(key=f"verdict-{rid}").set_value("CORRECT").run()
    at.button(key=f"override-{rid}").click().run()
    no_exceptions(at)
    assert s.query("SELECT final_verdict, reviewer FROM graded_rows WHERE row_id = ?", [rid]) == [
        ("CORRECT", "cy")
    ]
    assert row_ids(s, RowFilter(reviewers=REVIEWERS_DISAGREE)) == disagree[1:] and len(disagree) == 3
    assert row_ids(s, RowFilter(reviewers=REVIEWERS_SETTLED)) == [rid]


# --- a second reviewer, blind to the first review ----------------------------------------------------------
FIRST_NOTE = "ann-was-sure-of-this"


def _first_reviews(s: Study) -> list[str]:
    """ann reviews r00030 … r00039 (OTHER, with a note); bob reviews r00031 too; ann withdraws r00032."""
    rows = [f"r{k:05d}" for k in range(30, 40)]
    ids = {r: rv.add_review(s, r, reviewer="ann", verdict="OTHER", note=FIRST_NOTE) for r in rows}
    rv.add_review(s, rows[1], reviewer="bob", action="confirm")
    rv.retract_review(s, ids[rows[2]], reviewer="ann")
    return [r for r in rows if r not in (rows[1], rows[2])]


def test_a_second_review_queue_draws_rows_one_person_reviewed(
    panel_db: Path, panel_template: Path, tmp_path: Path
) -> None:
    s = Study(panel_db)
    only_ann = _first_reviews(s)
    p = _cli("queue", "--db", str(panel_db), "--strategy", "second_review", "--of-reviewer", "ann",
             "--size", "50", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert sorted(out["rows"]) == only_ann  # 8 rows: not bob's second one, not the withdrawn one
    qid = out["queue_id"]
    # a row counts as reviewed once a second person has reviewed it: none yet, though ann reviewed them all
    first = _queue(s, qid)
    queues = rv.spot_checks(s).set_index("queue_id")
    assert (
        queues.loc[qid, "strategy"] == "second_review"
        and queues.loc[qid, "name"] == "second review of ann 50 total seed 0"
    )
    assert int(queues.loc[qid, "reviewed"]) == 0 and next_unreviewed(s, qid) == first[0]
    rv.add_review(s, first[0], reviewer="ann", action="confirm")  # ann again: still one person
    assert next_unreviewed(s, qid) == first[0]
    rv.add_review(s, first[0], reviewer="cy", verdict="INCORRECT", queue_id=qid)
    assert next_unreviewed(s, qid) == first[1]
    assert int(rv.spot_checks(s).set_index("queue_id").loc[qid, "reviewed"]) == 1
    progress = rv.spot_check_progress(s, qid)
    assert progress.equals(queue_progress(s, qid))
    assert int(progress["reviewed"].sum()) == 1 and int(progress["rows"].sum()) == 8
    # the listing says so, and the link opens blind
    listing = {q["queue_id"]: q for q in json.loads(_cli("queues", "--db", str(panel_db), "--json").stdout)}
    assert listing[qid]["reviewed"] == 1 and listing[qid]["url"].endswith(f"queue={qid}&blind=1")
    text = _cli(
        "queue", "--db", str(panel_db), "--strategy", "second_review", "--of-reviewer", "ann", "--size", "2"
    ).stdout
    assert "blind mode" in text and "&blind=1" in text
    # nobody else's rows, a reviewer with none, options without the strategy
    p = _cli(
        "queue", "--db", str(panel_db), "--strategy", "second_review", "--of-reviewer", "zed", "--size", "5"
    )
    assert (
        p.returncode == 1
        and (
            "second_review: no row of arms base, steered was reviewed by 'zed' alone; reviewers with rows of their "
            "own: ann (7 rows)"
        )
        in p.stderr
    )  # r00030 has cy's review now
    p = _cli("queue", "--db", str(panel_db), "--size", "5", "--of-queue", str(qid))
    assert p.returncode == 2 and "--of-queue goes with --strategy second_review" in p.stderr
    # the review log carries the queue: importing it into another copy recreates it, rows and strategy
    log = tmp_path / "log.csv"
    assert _cli("export", "--db", str(panel_db), "--out", str(log)).returncode == 0
    copy = Path(shutil.copy(panel_template, tmp_path / "copy.duckdb"))
    assert _cli("import", str(log), "--db", str(copy)).returncode == 0
    there = Study(copy).query("SELECT queue_id FROM spot_checks WHERE strategy = 'second_review' ORDER BY 1")
    assert [_queue(Study(copy), q) for (q,) in there] == [_queue(s, q) for q in (qid, qid + 1)]


def test_a_second_review_of_an_earlier_queue(panel_db: Path) -> None:
    s = Study(panel_db)
    first = rv.create_spot_check(s, size=6, per_arm=False, seed=1, name="first pass")
    rows = _queue(s, first.queue_id)
    for r in rows[:4]:
        rv.add_review(s, r, reviewer="ann", action="confirm", queue_id=first.queue_id)
    rv.add_review(
        s, "r00059" if "r00059" not in rows else "r00058", reviewer="ann", action="confirm"
    )  # elsewhere
    second = rv.create_spot_check(
        s, size=10, per_arm=False, strategy="second_review", of_queue=first.queue_id
    )
    assert (
        sorted(_queue(s, second.queue_id)) == sorted(rows[:4])
        and second.name == f"second review of #{first.queue_id} 10 total seed 0"
    )
    both = rv.create_spot_check(
        s, size=10, strategy="second_review", of_reviewer=" ann ", of_queue=first.queue_id
    )
    assert sorted(_queue(s, both.queue_id)) == sorted(rows[:4]) and both.of_reviewer == "ann"
    with pytest.raises(rv.ReviewError, match="no spot-check queue #99"):
        rv.create_spot_check(s, size=3, strategy="second_review", of_queue=99)
    with pytest.raises(
        rv.ReviewError, match="no row of arms base, steered in queue #1 was reviewed by 'bob' alone"
    ):
        rv.create_spot_check(s, size=3, strategy="second_review", of_reviewer="bob", of_queue=first.queue_id)


def _page_text(at: Any) -> str:
    """Everything the page shows as text: Markdown, captions, code, alerts, metrics and every table cell."""
    parts: list[str] = []
    for group in (at.markdown, at.caption, at.code, at.info, at.warning, at.success, at.error):
        parts += [str(e.value) for e in group]
    parts += [f"{m.label} {m.value}" for m in at.metric]
    parts += [d.value.to_csv() for d in at.dataframe]
    parts += [str(x.label) for x in at.expander]
    return "\n".join(parts)


def test_a_second_review_worked_blind_never_shows_the_first_review(panel_db: Path) -> None:
    s = Study(panel_db)
    only_ann = _first_reviews(s)
    sc = rv.create_spot_check(s, size=4, per_arm=False, strategy="second_review", of_reviewer="ann", seed=2)
    queue = _queue(s, sc.queue_id)
    at = app(panel_db, "review", reviewer="bo", blind=True, queue=sc.queue_id).run()
    no_exceptions(at)
    for k in range(2):
        rid = _row_line(at)
        assert rid == queue[k] and rid in only_ann
        text = _page_text(at)
        assert FIRST_NOTE not in text and "Review history" not in text and "Every judge" not in text
        assert "final verdict" not in text and "OTHER" not in text  # ann said OTHER; the judges, CORRECT
        assert not [d for d in at.dataframe if "reviewer" in d.value.columns or "status" in d.value.columns]
        assert any(
            c.value.startswith("A second review: a row counts as reviewed once a second person")
            for c in at.caption
        )
        assert any(f"{k} of 4 rows reviewed" in str(p.proto.text) for p in at.get("progress"))
        at.radio(key=f"verdict-{rid}").set_value("INCORRECT").run()
        at.button(key=f"override-{rid}").click().run()
        no_exceptions(at)
    got = s.query(
        "SELECT row_id, action, verdict, reviewer, queue_id FROM reviews WHERE reviewer = 'bo' ORDER BY review_id"
    )
    assert got == [
        (queue[0], "override", "INCORRECT", "bo", sc.queue_id),
        (queue[1], "override", "INCORRECT", "bo", sc.queue_id),
    ]
    assert _row_line(at) == queue[2]
    # back on a row bo decided, everything shows, ann's review included
    at.button(key="prev").click().run()
    assert _row_line(at) == queue[1] and FIRST_NOTE in _page_text(at)
    # opened without blind mode, the page says to turn it on
    open_ = app(panel_db, "review", reviewer="ed", queue=sc.queue_id).run()
    assert any("Turn on **Blind mode**" in w.value for w in open_.warning)


def test_a_second_review_drawn_on_the_dashboard_turns_blind_mode_on(panel_db: Path) -> None:
    s = Study(panel_db)
    only_ann = _first_reviews(s)
    at = app(panel_db, "review", reviewer="bo").run()
    at.number_input(key="q_size").set_value(3)
    at.radio(key="q_per").set_value("in total")
    at.radio(key="q_strategy").set_value("second_review")
    assert at.selectbox(key="q_of_reviewer").options == ["(anyone's rows)", "ann (8 rows)"]
    at.selectbox(key="q_of_reviewer").set_value("ann")
    at.button(key="FormSubmitter:new_queue-Draw sample").click().run()
    no_exceptions(at)
    queue = _queue(s, 1)
    assert len(queue) == 3 and set(queue) <= set(only_ann)
    assert s.query("SELECT strategy, name FROM spot_checks") == [
        ("second_review", "second review of ann 3 total seed 0")
    ]
    assert at.session_state["blind"] is True and at.toggle(key="w:blind").value is True
    assert _row_line(at) == queue[0] and FIRST_NOTE not in _page_text(at)
    assert N == 60  # the study the counts above come from
