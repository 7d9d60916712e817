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


# --- queues: per arm or in total, rename, soft delete ----------------------------------------------------------
ARM_ITEMS = {"a": 6, "b": 12, "c": 24}  # x 2 orientations: 12, 24 and 48 rows


def _three_arms(path: Path) -> Study:
    """Three arms with unequal row counts; the strict pre-filter resolves two rows in three, the rest is prose."""
    from mcqaudit.ingest import ingest_file
    from tests.conftest import write_jsonl

    rows = []
    for arm, n in ARM_ITEMS.items():
        for i in range(n):
            for orient, opts, gold in (("AB", ["yes", "no"], "A"), ("BA", ["no", "yes"], "B")):
                gen = {0: "I am not sure.", 1: gold, 2: "AB"[gold == "A"]}[i % 3]
                rows.append(
                    {
                        "item_id": f"q{i:02d}",
                        "arm": arm,
                        "question": f"Is {i} fine?",
                        "options": opts,
                        "gold": gold,
                        "orientation": orient,
                        "generation": gen,
                    }
                )
    s = Study(path, create=True)
    ingest_file(s, write_jsonl(path.with_suffix(".jsonl"), rows))
    return s


def _queue(s: Study, qid: int) -> list[str]:
    return [
        r[0]
        for r in s.query("SELECT row_id FROM spot_check_rows WHERE queue_id = ? ORDER BY position", [qid])
    ]


def _by_arm(s: Study, qid: int) -> dict[str, int]:
    return dict(
        s.query(
            "SELECT g.arm, count(*) FROM spot_check_rows q JOIN gen_rows g USING (row_id) WHERE queue_id = ? GROUP BY ALL",
            [qid],
        )
    )


def test_queue_size_per_arm_or_in_total(tmp_path: Path) -> None:
    import hashlib

    s = _three_arms(tmp_path / "s.duckdb")
    per = rv.create_spot_check(s, size=10, seed=4)
    assert (per.per_arm, per.rows, per.by_arm, per.name) == (
        True,
        30,
        {"a": 10, "b": 10, "c": 10},
        "uniform 10/arm seed 4",
    )
    tot = rv.create_spot_check(s, size=21, per_arm=False, seed=4)
    assert (tot.per_arm, tot.rows, tot.name) == (False, 21, "uniform 21 total seed 4")
    assert tot.by_arm == _by_arm(s, tot.queue_id) and sum(tot.by_arm.values()) == 21
    # uniform in total = the first 21 rows of one seeded order over all three arms' rows together
    ids = [r[0] for r in s.query("SELECT row_id FROM gen_rows")]
    first = sorted(ids, key=lambda r: (hashlib.md5(f"4:{r}".encode()).hexdigest(), r))[:21]
    assert sorted(_queue(s, tot.queue_id)) == sorted(first)
    # stratified in total: 20 split 12:24:48 by largest remainder (2.86, 5.71, 11.43 -> 3, 6, 11)
    st = rv.create_spot_check(s, size=20, per_arm=False, seed=4, strategy="stratified")
    assert st.by_arm == _by_arm(s, st.queue_id) == {"a": 3, "b": 6, "c": 11}
    assert {a: sum(v.values()) for a, v in st.strata.items()} == st.by_arm
    assert st.name == "stratified 20 total seed 4"
    # a total larger than the study takes every row once
    assert rv.create_spot_check(s, size=500, per_arm=False, arms=["a", "b"]).by_arm == {"a": 12, "b": 24}
    prog = rv.spot_checks(s)
    assert list(prog["per_arm"]) == [True, False, False, False]
    assert list(prog["size"]) == [10, 21, 20, 500] and list(prog["rows"]) == [30, 21, 20, 36]
    per_arm = rv.spot_check_progress(s)
    assert list(per_arm.columns) == ["queue_id", "arm", "rows", "reviewed"]
    got = {(int(r.queue_id), r.arm): int(r.rows) for r in per_arm.itertuples()}
    assert {k: v for k, v in got.items() if k[0] == st.queue_id} == {
        (st.queue_id, "a"): 3,
        (st.queue_id, "b"): 6,
        (st.queue_id, "c"): 11,
    }
    with pytest.raises(rv.ReviewError, match="at least one row"):
        rv.create_spot_check(s, size=0, per_arm=False)


def test_split_total_is_proportional_and_deterministic() -> None:
    assert rv.split_total(20, {"a": 12, "b": 24, "c": 48}, ["a", "b", "c"]) == {"a": 3, "b": 6, "c": 11}
    assert rv.split_total(3, {"x": 5, "y": 5}, ["x", "y"]) == {"x": 2, "y": 1}  # a tie goes to the first arm
    assert rv.split_total(3, {"x": 5, "y": 5}, ["y", "x"]) == {"y": 2, "x": 1}
    assert rv.split_total(9, {"x": 1, "y": 0, "z": 2}, ["x", "y", "z"]) == {"x": 1, "y": 0, "z": 2}


@pytest.mark.parametrize("strategy", ["uniform", "stratified"])
@pytest.mark.parametrize("per_arm", [True, False], ids=["per-arm", "total"])
def test_queue_draw_is_determined_by_the_seed(tmp_path: Path, strategy: str, per_arm: bool) -> None:
    s = _three_arms(tmp_path / "s.duckdb")
    one, two, other = (
        rv.create_spot_check(s, size=9, per_arm=per_arm, seed=seed, strategy=strategy) for seed in (7, 7, 8)
    )
    assert _queue(s, one.queue_id) == _queue(s, two.queue_id)  # same rows, same order
    assert one.strata == two.strata
    assert _queue(s, one.queue_id) != _queue(s, other.queue_id)
    # a second copy of the same rows draws the same sample
    t = _three_arms(tmp_path / "t.duckdb")
    again = rv.create_spot_check(t, size=9, per_arm=per_arm, seed=7, strategy=strategy)
    assert _queue(t, again.queue_id) == _queue(s, one.queue_id)


def test_rename_and_delete_a_queue_keep_its_reviews(ui_db: Path) -> None:
    from mcqaudit.store.frames import load_frames

    s = Study(ui_db)
    q = rv.create_spot_check(s, size=4, seed=0, created_by="ann")
    keep = rv.create_spot_check(s, size=2, seed=1, strategy="stratified")
    rows = rv.queue_row_ids(s, q.queue_id)
    assert rows == _queue(s, q.queue_id) and len(rows) == 8
    rid = rows[0]
    review = rv.add_review(s, rid, reviewer="ann", action="confirm", queue_id=q.queue_id)
    assert load_frames(s).info.uniform_spot_check_rows == 8

    rv.rename_spot_check(s, q.queue_id, "  first pass  ")
    assert list(rv.spot_checks(s)["name"]) == ["first pass", keep.name]
    for bad in ("", "   "):
        with pytest.raises(rv.ReviewError, match="non-empty name"):
            rv.rename_spot_check(s, q.queue_id, bad)
    with pytest.raises(rv.ReviewError, match="no spot-check queue #99"):
        rv.rename_spot_check(s, 99, "x")
    with pytest.raises(rv.ReviewError, match="no spot-check queue #99"):
        rv.delete_spot_check(s, 99)

    rv.delete_spot_check(s, q.queue_id, deleted_by=" ben ")
    assert list(rv.spot_checks(s)["queue_id"]) == [keep.queue_id]
    assert set(rv.spot_check_progress(s)["queue_id"]) == {keep.queue_id}
    assert s.query(
        "SELECT deleted_by, deleted_at IS NOT NULL FROM spot_checks WHERE queue_id = ?", [q.queue_id]
    ) == [("ben", True)]
    # the review is the audit trail: untouched, still effective, still counted as a review
    assert s.query("SELECT review_id, queue_id FROM reviews") == [(review, q.queue_id)]
    assert s.query("SELECT verdict_source FROM graded_rows WHERE row_id = ?", [rid]) == [("review",)]
    assert rv.queue_row_ids(s, q.queue_id) == rows  # the drawn rows are kept too
    # ... but a deleted queue no longer counts as a uniform spot check
    frames = load_frames(s)
    assert (frames.info.uniform_spot_check_rows, frames.info.n_reviews) == (0, 1)
    with pytest.raises(rv.ReviewError, match="was deleted"):
        rv.delete_spot_check(s, q.queue_id)
    with pytest.raises(rv.ReviewError, match="was deleted"):
        rv.rename_spot_check(s, q.queue_id, "again")


def test_queues_drawn_before_migration_3_are_per_arm(tmp_path: Path) -> None:
    import duckdb

    from mcqaudit.store.schema import MIGRATIONS

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ)")
    for v in (1, 2):
        con.execute(MIGRATIONS[v - 1])
        con.execute("INSERT INTO schema_migrations VALUES (?, now())", [v])
    con.execute("INSERT INTO spot_checks VALUES (1, 'old', 'uniform', 0, 5, ['base'], NULL, now())")
    con.close()
    s = Study(path)
    assert s.query("SELECT max(version) FROM schema_migrations") == [(3,)]
    assert list(rv.spot_checks(s)["per_arm"]) == [True]
