"""Reviews in the store: append-only confirm / override / retract with provenance, the effective verdict,
spot-check queues, and the review log (export, idempotent import, line-level errors) with its CLI."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mcqaudit.store import Study
from mcqaudit.store import reviews as rv
from mcqaudit.store.rows import ConfusionCell, RowFilter, count_rows, list_rows
from tests.conftest import run_cli
from tests.test_ui_fixture import _ui_db, _ui_template  # noqa: F401


def _row(s: Study, where: str) -> tuple[str, str, str | None, str]:
    return s.query(
        f"SELECT row_id, gold_letter, final_verdict, verdict_source FROM graded_rows WHERE {where} ORDER BY row_id LIMIT 1"
    )[0]


def test_override_confirm_retract_keep_provenance(ui_db: Path) -> None:
    s = Study(ui_db)
    rid, gold, final, source = _row(s, "final_verdict = 'CORRECT' AND verdict_source = 'judge'")
    a = rv.add_review(s, rid, reviewer=" ann ", verdict="INCORRECT", note="picks the wrong option")
    b = rv.add_review(s, rid, reviewer="ben", action="confirm")
    assert s.query("SELECT final_verdict, verdict_source, reviewer FROM graded_rows WHERE row_id = ?", [rid])[
        0
    ] == (
        "INCORRECT",
        "review",
        "ben",
    )
    got = s.query(
        "SELECT review_id, action, verdict, reviewer, prior_verdict, prior_source, fingerprint IS NOT NULL FROM reviews ORDER BY review_id"
    )
    assert got == [
        (a, "override", "INCORRECT", "ann", "CORRECT", "judge", True),
        (b, "confirm", "INCORRECT", "ben", "INCORRECT", "review", True),
    ]
    rv.retract_review(s, b, reviewer="ben")
    assert s.query("SELECT final_verdict, reviewer FROM graded_rows WHERE row_id = ?", [rid])[0] == (
        "INCORRECT",
        "ann",
    )
    rv.retract_review(s, a, reviewer="ann")
    assert s.query("SELECT final_verdict, verdict_source FROM graded_rows WHERE row_id = ?", [rid])[0] == (
        final,
        source,
    )
    hist = rv.review_history(s, rid)
    assert list(hist["status"]) == ["retracted", "retracted", "retraction", "retraction"]
    with pytest.raises(rv.ReviewError, match="already retracted"):
        rv.retract_review(s, a, reviewer="ann")
    assert s.query("SELECT count(*) FROM reviews")[0][0] == 4  # append-only: nothing was updated or deleted


@pytest.mark.parametrize(
    ("verdict", "letter", "error"),
    [
        ("MAYBE", None, "verdict must be one of"),
        ("OTHER", "A", "OTHER verdict picks no letter"),
        ("CORRECT", "WRONG", "is not one of this row's letters"),
        ("INCORRECT", "GOLD", "is the gold letter"),
    ],
    ids=["illegal-verdict", "other-with-letter", "letter-out-of-range", "incorrect-gold"],
)
def test_illegal_reviews_are_refused(ui_db: Path, verdict: str, letter: str | None, error: str) -> None:
    s = Study(ui_db)
    rid, gold, _, _ = _row(s, "true")
    letter = {"GOLD": gold, "WRONG": "Z"}.get(letter or "", letter)
    with pytest.raises(rv.ReviewError, match=error):
        rv.add_review(s, rid, reviewer="x", verdict=verdict, picked_letter=letter)
    with pytest.raises(rv.ReviewError, match="reviewer name"):
        rv.add_review(s, rid, reviewer="  ", verdict="OTHER")
    with pytest.raises(rv.ReviewError, match="no row"):
        rv.add_review(s, "nope", reviewer="x", verdict="OTHER")
    assert s.query("SELECT count(*) FROM reviews")[0][0] == 0


def test_correct_review_picks_the_gold_letter(ui_db: Path) -> None:
    s = Study(ui_db)
    rid, gold, _, _ = _row(s, "final_verdict = 'OTHER'")
    rv.add_review(s, rid, reviewer="x", verdict="CORRECT")
    assert s.query("SELECT picked_letter, final_verdict FROM graded_rows WHERE row_id = ?", [rid])[0] == (
        gold,
        "CORRECT",
    )


def test_spot_checks_are_seeded_and_stratified(ui_db: Path) -> None:
    s = Study(ui_db)
    a = rv.create_spot_check(s, size=6, seed=1, strategy="uniform", created_by="q")
    b = rv.create_spot_check(s, size=6, seed=1, strategy="uniform")
    c = rv.create_spot_check(s, size=6, seed=2, strategy="uniform", arms=["steered"])
    rows = {
        q: [
            r[0]
            for r in s.query("SELECT row_id FROM spot_check_rows WHERE queue_id = ? ORDER BY position", [q])
        ]
        for q in (1, 2, 3)
    }
    assert a.rows == b.rows == 12 and c.rows == 6
    assert rows[1] == rows[2]  # same seed, same sample, same order
    arms = dict(s.query("SELECT row_id, arm FROM gen_rows"))
    assert {arms[r] for r in rows[3]} == {"steered"}
    d = rv.create_spot_check(s, size=9, seed=0, strategy="stratified")
    assert sum(d.strata["steered"].values()) == 9
    strata_rows = count_rows(s, RowFilter(queue_id=d.queue_id, arms=("steered",), verdicts=("OTHER",)))
    assert strata_rows >= d.strata["steered"]["other"] >= 3  # OTHER is oversampled (a third of the draw)
    prog = rv.spot_checks(s)
    assert list(prog["rows"]) == [12, 12, 6, 18] and list(prog["reviewed"]) == [0, 0, 0, 0]
    rv.add_review(s, rows[1][0], reviewer="x", action="confirm", queue_id=1)
    assert list(rv.spot_checks(s)["reviewed"])[:2] == [1, 1]
    assert rv.allocate(9, {"disagreement": 1, "other": 10, "rest": 10}) == {
        "disagreement": 1,
        "other": 4,
        "rest": 4,
    }
    with pytest.raises(rv.ReviewError, match="unknown arm"):
        rv.create_spot_check(s, size=3, arms=["nope"])


def test_confusion_cell_rows_match_the_parser_letters(ui_db: Path) -> None:
    s = Study(ui_db)
    for parser in ("naive", "user", "strict"):
        col = f"{parser}_letter"
        for verdict in ("CORRECT", "OTHER"):
            for pv in ("CORRECT", "INCORRECT", "OTHER"):
                f = RowFilter(cell=ConfusionCell(parser, verdict, pv))
                expected = s.query(
                    f"""SELECT count(*) FROM graded_rows WHERE final_verdict = ? AND
                        (CASE WHEN {col} IS NULL THEN 'OTHER' WHEN {col} = gold_letter THEN 'CORRECT'
                              ELSE 'INCORRECT' END) = ? {"AND strict_letter IS NOT NULL" if parser == "strict" else ""}""",
                    [verdict, pv],
                )[0][0]
                assert count_rows(s, f) == expected == len(list_rows(s, f, limit=1000))


def test_review_log_round_trip_is_idempotent(ui_db: Path, tmp_path: Path) -> None:
    src = Study(ui_db)
    r1, _, _, _ = _row(src, "final_verdict = 'CORRECT'")
    r2, _, _, _ = _row(src, "final_verdict = 'OTHER'")
    a = rv.add_review(src, r1, reviewer="ann", verdict="OTHER", note='quotes "and", commas\nand lines')
    rv.add_review(src, r2, reviewer="ann", action="confirm")
    rv.retract_review(src, a, reviewer="ann")
    log = tmp_path / "log.csv"
    log.write_text(rv.review_log_csv(src), encoding="utf-8")

    # a fresh copy of the same study (a collaborator's) without the reviews
    dst_path = tmp_path / "dst.duckdb"
    from tests.test_ui_fixture import build_study

    dst = Study(build_study(dst_path, grade_it=False))
    res = rv.import_review_log(dst, log)
    assert (res.added, res.already_present) == (3, 0)
    again = rv.import_review_log(dst, log)
    assert (again.added, again.already_present) == (0, 3)
    got = dst.query(
        "SELECT action, reviewer, note, retracts IS NOT NULL, origin FROM reviews ORDER BY review_id"
    )
    assert [g[:4] for g in got] == [
        ("override", "ann", 'quotes "and", commas\nand lines', False),
        ("confirm", "ann", None, False),
        ("retract", "ann", None, True),
    ]
    assert got[0][4] == "import:log.csv"
    # the retraction points at the imported override, so r1 has no effective review
    assert dst.query("SELECT review_verdict FROM graded_rows WHERE row_id = ?", [r1])[0][0] is None
    # importing back into the source adds nothing either
    assert rv.import_review_log(src, log).added == 0


def test_import_refuses_unknown_rows_naming_the_line(ui_db: Path, tmp_path: Path) -> None:
    s = Study(ui_db)
    rid, _, _, _ = _row(s, "true")
    t = datetime(2026, 1, 1, tzinfo=UTC)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        ["review_id", "row_id", "action", "verdict", "picked_letter", "reviewer", "created_at", "note"]
    )
    w.writerow([1, rid, "override", "OTHER", "", "ann", t.isoformat(), "multi\nline note"])
    w.writerow(
        [2, "r-not-in-study", "override", "OTHER", "", "ann", (t + timedelta(seconds=1)).isoformat(), ""]
    )
    w.writerow([3, rid, "override", "SURE", "", "ann", (t + timedelta(seconds=2)).isoformat(), ""])
    log = tmp_path / "bad.csv"
    log.write_text(buf.getvalue(), encoding="utf-8")
    with pytest.raises(rv.ReviewImportError) as e:
        rv.import_review_log(s, log)
    assert e.value.problems == [
        f"{log}:4: row_id: 'r-not-in-study' is not a row of this study",
        f"{log}:5: verdict: verdict must be one of CORRECT, INCORRECT, OTHER, not 'SURE'",
    ]
    assert s.query("SELECT count(*) FROM reviews")[0][0] == 0  # nothing written


def test_imported_older_review_does_not_override_a_newer_local_one(ui_db: Path, tmp_path: Path) -> None:
    s = Study(ui_db)
    rid, _, _, _ = _row(s, "final_verdict = 'CORRECT'")
    rv.add_review(s, rid, reviewer="local", verdict="INCORRECT")
    log = tmp_path / "old.csv"
    log.write_text(
        "row_id,action,verdict,reviewer,created_at\n"
        + f"{rid},override,OTHER,remote,2020-01-01T00:00:00+00:00\n",
        encoding="utf-8",
    )
    assert rv.import_review_log(s, log).added == 1
    assert s.query("SELECT final_verdict, reviewer FROM graded_rows WHERE row_id = ?", [rid])[0] == (
        "INCORRECT",
        "local",
    )


def test_cli_reviews_export_and_import(ui_db: Path, tmp_path: Path) -> None:
    s = Study(ui_db)
    rid, _, _, _ = _row(s, "true")
    rv.add_review(s, rid, reviewer="ann", verdict="OTHER")
    out = tmp_path / "log.csv"
    run_cli("reviews", "export", "--db", str(ui_db), "--out", str(out), check=True)
    assert out.read_text().splitlines()[0].split(",")[:3] == ["review_id", "row_id", "arm"]
    p = run_cli("reviews", "import", str(out), "--db", str(ui_db), check=True)
    assert "0 reviews imported; 1 already in the study" in p.stdout
    bad = tmp_path / "bad.csv"
    bad.write_text("row_id,action,verdict,reviewer,created_at\nnope,override,OTHER,x,2026-01-01T00:00:00Z\n")
    p = run_cli("reviews", "import", str(bad), "--db", str(ui_db))
    assert p.returncode == 1
    assert f"{bad}:2: row_id: 'nope' is not a row of this study" in p.stderr
