"""Reviews in the store: append-only confirm / override / retract with provenance, the effective verdict,
spot-check queues, and the review log (export, idempotent import, line-level errors) with its CLI."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mcqaudit.app import reviews as rv
from mcqaudit.review import log as review_log
from mcqaudit.review import queues
from mcqaudit.review.filters import ConfusionCell, RowFilter
from mcqaudit.store import Study
from mcqaudit.store.rows import count_rows, list_rows
from tests.helpers import run_cli


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
    assert queues.allocate(9, {"disagreement": 1, "other": 10, "rest": 10}) == {
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
    from tests.builders import build_ui_study as build_study

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
    from mcqaudit.app.ingest import ingest_file
    from tests.helpers import write_jsonl

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
    assert queues.split_total(20, {"a": 12, "b": 24, "c": 48}, ["a", "b", "c"]) == {"a": 3, "b": 6, "c": 11}
    assert queues.split_total(3, {"x": 5, "y": 5}, ["x", "y"]) == {"x": 2, "y": 1}  # a tie goes to the first arm
    assert queues.split_total(3, {"x": 5, "y": 5}, ["y", "x"]) == {"y": 2, "x": 1}
    assert queues.split_total(9, {"x": 1, "y": 0, "z": 2}, ["x", "y", "z"]) == {"x": 1, "y": 0, "z": 2}


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
    assert s.query("SELECT max(version) FROM schema_migrations") == [(len(MIGRATIONS),)]
    assert list(rv.spot_checks(s)["per_arm"]) == [True]


# --- labels your team already has -----------------------------------------------------------------------------
def _pick(s: Study, where: str) -> tuple:
    return s.query(
        f"""SELECT row_id, arm, item_id, orientation, sample, gold_letter, final_verdict, verdict_source, picked_letter
            FROM graded_rows WHERE {where} ORDER BY row_id LIMIT 1"""
    )[0]


def _write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def test_label_import_by_row_id_with_reviewer(tmp_path: Path) -> None:
    s = _three_arms(tmp_path / "s.duckdb")
    ok = _pick(s, "verdict_source = 'prefilter' AND final_verdict = 'CORRECT'")
    wrong = _pick(s, "verdict_source = 'prefilter' AND final_verdict = 'INCORRECT'")
    other = _pick(s, f"verdict_source = 'prefilter' AND final_verdict = 'CORRECT' AND row_id > '{ok[0]}'")
    pending = _pick(s, "final_verdict IS NULL")
    labels = _write_csv(
        tmp_path / "labels.csv",
        ["row_id", "verdict", "picked_letter", "note"],
        [
            [ok[0], "correct", "", ""],  # agrees: confirm (case of the verdict does not matter)
            [wrong[0], "INCORRECT", "", "  agrees  "],  # agrees: confirm, keeps the picked letter
            [other[0], "OTHER", "", "hedges"],  # disagrees: override
            [pending[0], "INCORRECT", "AB"[pending[5] == "A"], ""],  # no verdict yet: override
        ],
    )
    with pytest.raises(rv.ReviewImportError) as e:
        rv.import_review_log(s, labels)
    assert e.value.problems == [
        f"{labels}:1: reviewer: the file has no reviewer column; name the reviewer with --reviewer NAME"
    ]
    before = datetime.now(UTC)
    res = rv.import_review_log(s, labels, reviewer=" ann ")
    after = datetime.now(UTC)
    assert (res.added, res.already_present, res.confirms, res.overrides) == (4, 0, 2, 2)
    got = s.query(
        """SELECT row_id, action, verdict, picked_letter, note, reviewer, prior_verdict, prior_source, origin, created_at
           FROM reviews ORDER BY review_id"""
    )
    assert [g[:9] for g in got] == [
        (ok[0], "confirm", "CORRECT", ok[5], None, "ann", "CORRECT", "prefilter", "import:labels.csv"),
        (
            wrong[0],
            "confirm",
            "INCORRECT",
            wrong[8],
            "agrees",
            "ann",
            "INCORRECT",
            "prefilter",
            "import:labels.csv",
        ),
        (other[0], "override", "OTHER", None, "hedges", "ann", "CORRECT", "prefilter", "import:labels.csv"),
        (
            pending[0],
            "override",
            "INCORRECT",
            "AB"[pending[5] == "A"],
            None,
            "ann",
            None,
            None,
            "import:labels.csv",
        ),
    ]
    assert all(before <= g[9] <= after for g in got)  # no reviewed_at: the time of the import
    assert s.query("SELECT final_verdict, verdict_source FROM graded_rows WHERE row_id = ?", [other[0]]) == [
        ("OTHER", "review")
    ]
    # the same file again adds nothing; another reviewer's identical labels are new reviews
    again = rv.import_review_log(s, labels, reviewer="ann")
    assert (again.added, again.already_present) == (0, 4)
    assert rv.import_review_log(s, labels, reviewer="ben").added == 4
    assert s.query("SELECT count(*) FROM reviews")[0][0] == 8


def test_label_import_by_row_key_jsonl_with_times(tmp_path: Path) -> None:
    import json

    s = _three_arms(tmp_path / "s.duckdb")
    a = _pick(s, "arm = 'c' AND final_verdict = 'CORRECT'")
    b = _pick(s, "arm = 'a' AND final_verdict = 'CORRECT'")
    lines = [
        {"arm": a[1], "item_id": a[2], "orientation": a[3], "sample": a[4], "verdict": "OTHER",
         "reviewer": "cho", "reviewed_at": "2025-03-04T05:06:07Z"},
        {"arm": b[1], "item_id": b[2], "orientation": b[3], "sample": str(b[4]), "verdict": "CORRECT",
         "picked_letter": b[5], "reviewer": "cho", "note": "fine", "reviewed_at": "2025-03-04 06:00:00"},
    ]  # fmt: skip
    f = tmp_path / "labels.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    res = rv.import_review_log(s, f, reviewer="ignored: the file names its reviewer")
    assert (res.added, res.confirms, res.overrides) == (2, 1, 1)
    assert s.query("SELECT row_id, action, reviewer, created_at FROM reviews ORDER BY review_id") == [
        (a[0], "override", "cho", datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)),
        (b[0], "confirm", "cho", datetime(2025, 3, 4, 6, 0, 0, tzinfo=UTC)),  # no zone given: UTC
    ]
    assert (rv.import_review_log(s, f).already_present, s.query("SELECT count(*) FROM reviews")[0][0]) == (
        2,
        2,
    )


def test_reimporting_labels_does_not_bring_back_a_retracted_one(tmp_path: Path) -> None:
    s = _three_arms(tmp_path / "s.duckdb")
    r = _pick(s, "final_verdict = 'CORRECT'")
    f = _write_csv(tmp_path / "l.csv", ["row_id", "verdict", "reviewer"], [[r[0], "OTHER", "ann"]])
    rv.import_review_log(s, f)
    (rid,) = s.query("SELECT review_id FROM reviews")[0]
    rv.retract_review(s, rid, reviewer="ann", note="mislabelled")
    assert rv.import_review_log(s, f).added == 0
    assert s.query("SELECT final_verdict FROM graded_rows WHERE row_id = ?", [r[0]]) == [("CORRECT",)]
    # a dashboard review with the same values is no imported label: the file's label is still new
    t = _pick(s, "final_verdict = 'INCORRECT'")
    rv.add_review(s, t[0], reviewer="ann", verdict="OTHER")
    g = _write_csv(tmp_path / "m.csv", ["row_id", "verdict", "reviewer"], [[t[0], "OTHER", "ann"]])
    assert (rv.import_review_log(s, g).confirms, rv.import_review_log(s, g).added) == (1, 0)


def test_label_import_refuses_bad_files_whole(tmp_path: Path) -> None:
    s = _three_arms(tmp_path / "s.duckdb")
    r = _pick(s, "arm = 'c' AND final_verdict = 'CORRECT'")
    wrong = "AB"[r[5] == "A"]
    f = _write_csv(
        tmp_path / "bad.csv",
        [
            "row_id",
            "arm",
            "item_id",
            "orientation",
            "sample",
            "verdict",
            "picked_letter",
            "reviewer",
            "reviewed_at",
        ],
        [
            [r[0], "", "", "", "", "OTHER", "", "ann", ""],  # 2: fine
            ["r-nope", "", "", "", "", "OTHER", "", "ann", ""],  # 3
            ["", "a", "q99", "AB", "0", "OTHER", "", "ann", ""],  # 4
            [r[0], "", "", "", "", "MAYBE", "", "ann", ""],  # 5
            [r[0], "", "", "", "", "CORRECT", wrong, "ann", ""],  # 6
            [r[0], "", "", "", "", "OTHER", "", "ann", "yesterday"],  # 7
            ["", "a", "", "AB", "", "OTHER", "", "ann", ""],  # 8
            ["", "a", "q00", "AB", "zero", "OTHER", "", "ann", ""],  # 9
            [r[0], "b", "", "", "", "OTHER", "", "ann", ""],  # 10
            [r[0], "", "", "", "", "", "", "ann", ""],  # 11
            [r[0], "", "", "", "", "OTHER", "", "", ""],  # 12
        ],
    )
    with pytest.raises(rv.ReviewImportError) as e:
        rv.import_review_log(s, f)
    assert e.value.problems == [
        f"{f}:3: row_id: 'r-nope' is not a row of this study",
        f"{f}:4: arm, item_id, orientation, sample: no row of this study is arm 'a', item_id 'q99', "
        "orientation 'AB', sample 0",
        f"{f}:5: verdict: verdict must be one of CORRECT, INCORRECT, OTHER, not 'MAYBE'",
        f"{f}:6: picked_letter: a CORRECT verdict picks the gold letter {r[5]}, not {wrong}",
        f"{f}:7: reviewed_at: not an ISO-8601 time: 'yesterday'",
        f"{f}:8: row_id: missing, and so is item_id, sample: name the row by row_id or by arm, item_id, "
        "orientation, sample",
        f"{f}:9: sample: not an integer: 'zero'",
        f"{f}:10: arm: 'b', but row {r[0]!r} has arm {r[1]!r}",
        f"{f}:11: verdict: missing (one of CORRECT, INCORRECT, OTHER)",
        f"{f}:12: reviewer: missing (or name one for the whole file with --reviewer)",
    ]
    assert s.query("SELECT count(*) FROM reviews")[0][0] == 0  # line 2 was fine, and is not written either
    # the command line: every problem on stderr, exit 1, no traceback, nothing written
    p = run_cli("reviews", "import", str(f), "--db", str(s.path))
    assert p.returncode == 1 and "Traceback" not in p.stderr and p.stdout == ""
    assert f"error: {f}: 10 problem(s); nothing imported" in p.stderr
    assert f"{f}:9: sample: not an integer: 'zero'" in p.stderr
    for bad, why in (
        ("\xff\xfe not text", "not UTF-8 text"),
        ('{"row_id": 1}\n[1]\n', ":2: not a JSON object"),
    ):
        g = tmp_path / ("x.jsonl" if "{" in bad else "x.csv")
        g.write_bytes(bad.encode("latin-1"))
        p = run_cli("reviews", "import", str(g), "--db", str(s.path), "--reviewer", "x")
        assert p.returncode == 1 and why in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert s.query("SELECT count(*) FROM reviews")[0][0] == 0


def test_an_export_imports_back_unchanged(ui_db: Path, tmp_path: Path) -> None:
    from tests.builders import build_ui_study as build_study

    src = Study(ui_db)
    r1 = _pick(src, "final_verdict = 'CORRECT'")
    r2 = _pick(src, "final_verdict = 'OTHER'")
    a = rv.add_review(src, r1[0], reviewer="ann", verdict="INCORRECT", note='picks, "quoted"\nsecond line')
    rv.add_review(src, r2[0], reviewer="ben", action="confirm")
    rv.retract_review(src, a, reviewer="ann")
    labels = _write_csv(tmp_path / "labels.csv", ["row_id", "verdict", "reviewer"], [[r1[0], "OTHER", "cho"]])
    rv.import_review_log(src, labels)
    log = tmp_path / "log.csv"
    log.write_text(rv.review_log_csv(src), encoding="utf-8")
    assert rv.import_review_log(src, log).added == 0  # back into its own study: nothing new

    dst = Study(build_study(tmp_path / "copy" / "dst.duckdb"))
    res = rv.import_review_log(dst, log)
    assert (res.added, res.confirms, res.overrides, res.retractions) == (4, 1, 2, 1)
    local = {"review_id", "retracts", "queue_id", "origin"}  # ids are the study's own; origin says "import"

    def rows(s: Study) -> list[dict]:
        df = rv.review_log(s)
        ids = dict(zip(df["review_id"], range(len(df)), strict=True))
        out = []
        for rec in df.to_dict("records"):
            rec = {k: (None if pd.isna(v) else v) for k, v in rec.items()}
            rec["retracts"] = None if rec["retracts"] is None else ids[rec["retracts"]]  # as a position
            out.append(rec)
        return out

    import pandas as pd

    src_rows, dst_rows = rows(src), rows(dst)
    keep = [c for c in review_log.LOG_COLUMNS if c not in local - {"retracts"}]
    assert [{k: r[k] for k in keep} for r in dst_rows] == [{k: r[k] for k in keep} for r in src_rows]
    verdicts = "SELECT row_id, final_verdict, verdict_source, picked_letter, reviewer FROM graded_rows ORDER BY row_id"
    assert dst.query(verdicts) == src.query(verdicts)
    assert rv.import_review_log(dst, log).added == 0


def test_cli_reviews_queue_and_friends(tmp_path: Path) -> None:
    import json

    s = _three_arms(tmp_path / "s.duckdb")
    db = str(s.path)
    p = run_cli(
        "reviews", "queue", "--db", db, "--size", "20", "--strategy", "stratified", "--seed", "3", "--json"
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)  # stdout is the JSON object and nothing else
    assert list(out) == ["queue_id", "rows"]
    assert out["rows"] == rv.queue_row_ids(s, out["queue_id"]) and len(out["rows"]) == 20
    assert _by_arm(s, out["queue_id"]) == {"a": 3, "b": 6, "c": 11}  # 20 is the total without --per-arm

    p = run_cli("reviews", "queue", "--db", db, "--size", "4", "--per-arm", "--arm", "a", "--arm", "c",
                "--name", "first look", "--reviewer", "ann", check=True)  # fmt: skip
    qid = out["queue_id"] + 1
    assert f"queue #{qid} 'first look': 8 rows (uniform, seed 0, 4/arm; arms a, c)" in p.stdout
    assert f"http://127.0.0.1:8501/review?queue={qid}" in p.stdout
    rv.add_review(s, rv.queue_row_ids(s, qid)[0], reviewer="ann", verdict="OTHER", queue_id=qid)

    p = run_cli("reviews", "queues", "--db", db, "--json", check=True)
    listed = json.loads(p.stdout)
    assert [(q["queue_id"], q["per_arm"], q["size"], q["rows"]) for q in listed] == [
        (out["queue_id"], False, 20, 20),
        (qid, True, 4, 8),
    ]
    assert listed[1]["created_by"] == "ann" and listed[1]["reviewed"] == 1
    assert sum(v["reviewed"] for v in listed[1]["by_arm"].values()) == 1
    assert {a: v["rows"] for a, v in listed[1]["by_arm"].items()} == {"a": 4, "c": 4}
    p = run_cli("reviews", "queues", "--db", db, check=True)
    assert f"#{qid} 'first look': uniform, seed 0, 4/arm; reviewed 1/8" in p.stdout

    run_cli("reviews", "queue-rename", str(qid), "  second look ", "--db", db, check=True)
    run_cli("reviews", "queue-delete", str(out["queue_id"]), "--db", db, "--reviewer", "ben", check=True)
    assert list(rv.spot_checks(s)["name"]) == ["second look"]
    assert s.query("SELECT count(*) FROM reviews")[0][0] == 1
    for args, code, msg in (
        (["queue-delete", str(out["queue_id"])], 1, "was deleted"),
        (["queue-rename", "99", "x"], 1, "no spot-check queue #99"),
        (["queue", "--size", "5", "--arm", "zz"], 1, "unknown arm(s): zz"),
        (["queue", "--size", "0"], 2, "--size must be at least 1"),
        (
            ["queue", "--size", "5", "--strategy", "random"],
            2,
            "--strategy must be one of uniform, stratified",
        ),
    ):
        p = run_cli("reviews", *args, "--db", db)
        assert (p.returncode, "Traceback" in p.stderr) == (code, False) and msg in p.stderr, p.stderr


def test_cli_reviews_import_labels_summary(tmp_path: Path) -> None:
    s = _three_arms(tmp_path / "s.duckdb")
    ok = _pick(s, "final_verdict = 'CORRECT'")
    f = _write_csv(
        tmp_path / "labels.csv",
        ["arm", "item_id", "orientation", "sample", "verdict"],
        [
            [ok[1], ok[2], ok[3], ok[4], "CORRECT"],
            [ok[1], ok[2], "BA" if ok[3] == "AB" else "AB", 0, "OTHER"],
        ],
    )
    p = run_cli("reviews", "import", str(f), "--db", str(s.path))
    assert p.returncode == 1 and "no reviewer column; name the reviewer with --reviewer NAME" in p.stderr
    p = run_cli("reviews", "import", str(f), "--db", str(s.path), "--reviewer", "ann", check=True)
    assert (
        p.stdout.strip()
        == f"{f}: 2 reviews imported; 0 already in the study (imported: 1 confirmation, 1 override)"
    )
    p = run_cli("reviews", "import", str(f), "--db", str(s.path), "--reviewer", "ann", check=True)
    assert p.stdout.strip() == f"{f}: 0 reviews imported; 2 already in the study"


def test_a_read_only_study_reads_and_refuses_writes(ui_db: Path, tmp_path: Path) -> None:
    from mcqaudit.store import StudyReadOnly
    from mcqaudit.store.frames import load_frames

    rw = Study(ui_db)
    rv.create_spot_check(rw, size=3, per_arm=False)
    rv.add_review(rw, rv.queue_row_ids(rw, 1)[0], reviewer="ann", verdict="OTHER")
    ro = Study(ui_db, read_only=True)
    assert list(rv.spot_checks(ro)["rows"]) == [3] and len(rv.spot_check_progress(ro)) == 2
    assert rv.review_log_csv(ro) == rv.review_log_csv(rw)
    assert load_frames(ro).info.n_reviews == 1
    with pytest.raises(StudyReadOnly, match="read-only"):
        rv.create_spot_check(ro, size=3)
    with pytest.raises(StudyReadOnly, match="read-only"):
        rv.import_review_log(ro, _write_csv(tmp_path / "l.csv", ["row_id", "verdict", "reviewer"], []))


def test_a_read_only_file_is_opened_read_only(ui_db: Path) -> None:
    import json
    import os

    rv.create_spot_check(Study(ui_db), size=2)
    folder = ui_db.parent
    ui_db.chmod(0o444)
    folder.chmod(0o555)
    try:
        if os.access(ui_db, os.W_OK):
            pytest.skip("running as root: permissions do not make a file read-only")
        assert Study(ui_db).read_only
        p = run_cli("reviews", "queues", "--db", str(ui_db), "--json", check=True)
        assert [q["rows"] for q in json.loads(p.stdout)] == [4]
        p = run_cli("reviews", "queue", "--db", str(ui_db), "--size", "2")
        assert p.returncode == 1 and "read-only" in p.stderr and "Traceback" not in p.stderr
    finally:
        folder.chmod(0o755)
        ui_db.chmod(0o644)


def test_a_read_only_study_of_an_older_schema_says_so(tmp_path: Path) -> None:
    import duckdb

    from mcqaudit.store import StudyError
    from mcqaudit.store.schema import MIGRATIONS

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ)")
    con.execute(MIGRATIONS[0])
    con.execute("INSERT INTO schema_migrations VALUES (1, now())")
    con.close()
    with pytest.raises(StudyError, match=r"read-only and was written by an older mcqaudit \(schema 1"):
        Study(path, read_only=True)
