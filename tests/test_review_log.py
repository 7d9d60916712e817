"""The review log on its way to a collaborator (issues 17 and 18): `reviews export` carries the spot-check
queues and `reviews import` recreates them, so judge agreement in the collaborator's copy is computed on the
same basis; the CSV neutralises cells a spreadsheet would run as formulas and the import restores them; and
an import that meets a full disk says so in one line and writes nothing."""

from __future__ import annotations

import csv
import errno
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcqaudit.app import reviews as rv
from mcqaudit.app.report import build_report
from mcqaudit.review import log as review_log
from mcqaudit.store import Study, StudyError
from tests.helpers import mounted_tmpfs, run_cli

NEXT = {"CORRECT": "INCORRECT", "INCORRECT": "OTHER", "OTHER": "CORRECT"}


def agreement(path: Path) -> str:
    """Every judge-agreement figure of the report (all arms, and per arm), as JSON text."""
    rep: dict[str, Any] = build_report(path, n_boot=200)
    per_arm = {a: m.get("judge_agreement") for a, m in sorted(rep["metrics"].items())}
    return json.dumps({"all": rep.get("judge_agreement"), "arms": per_arm}, sort_keys=True)


def _review_queue_and_more(s: Study, queue_id: int, extra: int) -> None:
    """Review every row of the queue (every third an override), and ``extra`` rows outside any queue, each
    outside row against the judge, so that "all reviewed rows" and "the uniform spot check" differ."""
    rows = rv.queue_row_ids(s, queue_id)
    for k, rid in enumerate(rows):
        final = s.query("SELECT final_verdict FROM graded_rows WHERE row_id = ?", [rid])[0][0]
        if final is None or k % 3 == 0:
            rv.add_review(s, rid, reviewer="ann", verdict=NEXT.get(final, "OTHER"), queue_id=queue_id)
        else:
            rv.add_review(s, rid, reviewer="ann", action="confirm", queue_id=queue_id)
    outside = s.query(
        """SELECT row_id, final_verdict FROM graded_rows
           WHERE final_verdict IS NOT NULL AND row_id NOT IN (SELECT row_id FROM spot_check_rows)
           ORDER BY row_id LIMIT ?""",
        [extra],
    )
    for rid, final in outside:
        rv.add_review(s, rid, reviewer="ben", verdict=NEXT[final], note="=1+1")


def test_export_import_keeps_the_queues_and_judge_agreement(ui_db: Path, tmp_path: Path) -> None:
    copy = tmp_path / "collaborator.duckdb"
    shutil.copy(ui_db, copy)  # the collaborator's copy: the same rows and verdicts, no queues, no reviews
    src = Study(ui_db)
    uniform = rv.create_spot_check(src, size=4, per_arm=True, seed=7, name="team audit", created_by="ann")
    stratified = rv.create_spot_check(src, size=6, per_arm=False, seed=3, strategy="stratified")
    _review_queue_and_more(src, uniform.queue_id, extra=12)
    before = agreement(ui_db)
    assert json.loads(before)["all"]["sample"] == "uniform"

    log = tmp_path / "reviews.csv"
    run_cli("reviews", "export", "--db", str(ui_db), "--out", str(log), check=True)
    proc = run_cli("reviews", "import", str(log), "--db", str(copy), check=True)
    assert "2 spot-check queues recreated" in proc.stdout, proc.stdout
    assert agreement(copy) == before  # exactly: the same rows, the same basis, the same figures

    dst = Study(copy)
    sql = (
        "SELECT queue_id, name, strategy, seed, size, per_arm, arms, created_by, created_at FROM spot_checks"
    )
    for q in (uniform, stratified):
        got = dst.query(sql + " WHERE name = ?", [q.name])
        assert len(got) == 1
        qid, *definition = got[0]
        assert definition == list(src.query(sql + " WHERE queue_id = ?", [q.queue_id])[0][1:])
        assert rv.queue_row_ids(dst, qid) == rv.queue_row_ids(src, q.queue_id)
    # the reviews made in the queue are in the recreated queue there
    in_queue = dst.query(
        "SELECT count(*) FROM reviews r JOIN spot_checks s USING (queue_id) WHERE s.name = 'team audit'"
    )
    assert in_queue[0][0] == len(rv.queue_row_ids(src, uniform.queue_id))

    # idempotent: again into the copy, and back into the source, adds no review and no queue
    for target in (copy, ui_db):
        queues = Study(target).query("SELECT count(*) FROM spot_checks")[0][0]
        reviews = Study(target).query("SELECT count(*) FROM reviews")[0][0]
        again = run_cli("reviews", "import", str(log), "--db", str(target), check=True)
        assert "0 reviews imported" in again.stdout and "recreated" not in again.stdout, again.stdout
        assert Study(target).query("SELECT count(*) FROM spot_checks")[0][0] == queues
        assert Study(target).query("SELECT count(*) FROM reviews")[0][0] == reviews
    assert agreement(copy) == before
    # and the copy exports the same log, but for the ids and origins local to each study
    again_log = tmp_path / "again.csv"
    run_cli("reviews", "export", "--db", str(copy), "--out", str(again_log), check=True)
    local = {"review_id", "queue_id", "origin", "retracts"}

    def portable(p: Path) -> list[dict[str, str]]:
        return [
            {k: v for k, v in r.items() if k not in local} for r in csv.DictReader(p.open(encoding="utf-8"))
        ]

    assert portable(again_log) == portable(log)


def test_export_says_how_many_reviews_and_queues_it_wrote(ui_db: Path, tmp_path: Path) -> None:
    """A note may span lines and every row of a queue is a line too: the count the export states is of
    reviews, and the queues are named apart (it read "50 reviews" for 10 reviews and a queue of 40 rows)."""
    db = ui_db  # this test's own copy
    s = Study(db)
    q = rv.create_spot_check(s, size=3, per_arm=True, seed=1, name="a queue")
    first, second = rv.queue_row_ids(s, q.queue_id)[:2]
    rv.add_review(s, first, reviewer="ann", action="confirm", note="first line\nsecond line\nthird line")
    rv.add_review(s, second, reviewer="ann", action="confirm")
    queue_rows = len(rv.queue_row_ids(s, q.queue_id))
    out = tmp_path / "reviews.csv"
    proc = run_cli("reviews", "export", "--db", str(db), "--out", str(out), check=True)
    assert f"wrote {out} (2 reviews, and 1 spot-check queue ({queue_rows} rows) for `reviews import` to recreate)" in (
        proc.stderr
    ), proc.stderr
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert sum(r["action"] != "queue" for r in rows) == 2 and sum(r["action"] == "queue" for r in rows) == queue_rows
    assert out.read_text(encoding="utf-8").count("\n") - 1 > 2 + queue_rows  # the note's lines: no line count


def test_without_the_queues_the_basis_changes(ui_db: Path, tmp_path: Path) -> None:
    """What the issue saw: the same reviews without their queue are no uniform spot check any more."""
    copy = tmp_path / "collaborator.duckdb"
    shutil.copy(ui_db, copy)
    src = Study(ui_db)
    q = rv.create_spot_check(src, size=4, per_arm=True, seed=7)
    _review_queue_and_more(src, q.queue_id, extra=12)
    log = tmp_path / "reviews.csv"
    log.write_text(rv.review_log_csv(src), encoding="utf-8")
    reviews_only = tmp_path / "reviews-only.csv"
    rows = list(csv.DictReader(log.open(encoding="utf-8")))
    with reviews_only.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(r for r in rows if r["action"] != review_log.QUEUE)
    rv.import_review_log(Study(copy), reviews_only)
    assert json.loads(agreement(copy))["all"]["sample"] == "all"


HOSTILE = [
    "=cmd|' /C calc'!A0",
    "=1+1",
    "@SUM(1)",
    "+1",
    "-2",
    "\tTAB",
    "\rCR",
    "'=already quoted",
    "''+x",
    "'plain",
]


def test_csv_cells_are_neutralised_and_restored(ui_db: Path, tmp_path: Path) -> None:
    s = Study(ui_db)
    rows = [
        r[0]
        for r in s.query(
            "SELECT row_id FROM graded_rows WHERE final_verdict IS NOT NULL ORDER BY row_id LIMIT 10"
        )
    ]
    for rid, text in zip(rows, HOSTILE, strict=True):
        rv.add_review(s, rid, reviewer=text, action="confirm", note=text)
    rv.create_spot_check(s, size=3, per_arm=False, seed=1, name='=HYPERLINK("http://x")', created_by="@me")
    text = rv.review_log_csv(s)
    cells = [c for rec in csv.reader(io.StringIO(text)) for c in rec]
    # no cell a spreadsheet would run: every one that starts = + - @ tab or CR is behind a quote
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert "'=cmd|' /C calc'!A0" in cells and "'=1+1" in cells and "'@SUM(1)" in cells and "'-2" in cells
    assert "''=already quoted" in cells and "'''+x" in cells and "'plain" in cells  # quoted once more / as is
    # the import restores each cell exactly: into a copy without the reviews, the same notes and reviewers
    copy = tmp_path / "copy.duckdb"
    log = tmp_path / "log.csv"
    log.write_text(text, encoding="utf-8")
    fresh = Study(ui_db).query("SELECT count(*) FROM reviews")[0][0]
    assert fresh == len(HOSTILE)
    shutil.copy(ui_db, copy)
    c = Study(copy)
    with c.write() as con:
        con.execute("DELETE FROM reviews")
        con.execute("DELETE FROM effective_reviews")
        con.execute("DELETE FROM spot_check_rows")
        con.execute("DELETE FROM spot_checks")
    rv.import_review_log(c, log)
    got = sorted(c.query("SELECT reviewer, note FROM reviews"))
    assert got == sorted(s.query("SELECT reviewer, note FROM reviews"))  # (a note's edges are trimmed)
    assert ("=cmd|' /C calc'!A0", "=cmd|' /C calc'!A0") in got and ("''+x", "''+x") in got
    assert c.query("SELECT name, created_by FROM spot_checks") == [('=HYPERLINK("http://x")', "@me")]
    assert rv.import_review_log(s, log).added == 0  # and back into the source: nothing new


@pytest.mark.parametrize("value", HOSTILE)
def test_neutralise_then_restore_is_the_identity(value: str) -> None:
    assert review_log.restore_cell(review_log.neutralise_cell(value)) == value
    assert review_log.neutralise_cell(value)[:1] not in ("=", "+", "-", "@", "\t", "\r")


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real tmpfs (as in tests/test_write_errors.py), to be filled by the test: 8 MB, as the smallest study
    file DuckDB writes is 3.4 MB."""
    with mounted_tmpfs(tmp_path / "full", "8m") as mnt:
        yield mnt


def fill(folder: Path) -> Path:
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as fh, pytest.raises(OSError) as exc:
        while True:
            fh.write(b"\0" * 4096)
            fh.flush()
    assert exc.value.errno == errno.ENOSPC
    return filler


def test_import_on_a_full_disk_is_one_line_and_writes_nothing(full_disk: Path, tmp_path: Path) -> None:
    from tests.helpers import write_jsonl

    src = tmp_path / "src.duckdb"
    gens = [
        {
            "item_id": f"i{k}",
            "arm": "base",
            "question": f"q{k}",
            "options": ["a", "b"],
            "gold": 0,
            "generation": "A",
        }
        for k in range(40)
    ]
    run_cli("ingest", str(write_jsonl(tmp_path / "g.jsonl", gens)), "--db", str(src), check=True)
    study = full_disk / "study.duckdb"
    shutil.copy(src, study)
    rows = [r[0] for r in Study(src).query("SELECT row_id FROM gen_rows ORDER BY row_id")]
    log = tmp_path / "labels.csv"
    long_note = "x" * 20_000  # enough to need more pages than the disk has left
    with log.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["row_id", "verdict", "reviewer", "note"])
        w.writerows([rid, "OTHER", "ann", long_note] for rid in rows)
    before = study.read_bytes()
    filler = fill(full_disk)
    proc = run_cli("reviews", "import", str(log), "--db", str(study))
    # a review saved from the dashboard meets the same disk: the page shows this line ("Not saved …")
    with pytest.raises(StudyError, match="no space left on the device; nothing was saved"):
        rv.add_review(Study(study), rows[0], reviewer="ann", verdict="OTHER", note=long_note)
    filler.unlink()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "no space left" in proc.stderr.lower() and "nothing was imported" in proc.stderr, proc.stderr
    assert study.read_bytes() == before or Study(study).query("SELECT count(*) FROM reviews")[0][0] == 0
    assert Study(study).query("SELECT count(*) FROM reviews")[0][0] == 0
    # with room again, the same import works
    assert run_cli("reviews", "import", str(log), "--db", str(study)).returncode == 0
    assert Study(study).query("SELECT count(*) FROM reviews")[0][0] == len(rows)


def test_rows_csv_neutralises_formulas_and_parquet_stays_exact(ui_db: Path, tmp_path: Path) -> None:
    """The Export page's rows CSV: a generation (or any text cell) that starts like a formula is written behind
    a quote; the Parquet export keeps it exact."""
    import pandas as pd

    from mcqaudit.store.rows import export_rows

    s = Study(ui_db)
    rids = [r[0] for r in s.query("SELECT row_id FROM gen_rows ORDER BY row_id LIMIT 4")]
    texts = ["=cmd|' /C calc'!A0", "@SUM(1)", "-2 is my answer", "'=quoted"]
    with s.write() as con:  # a generation a model could write (set directly: the fixture has none such)
        for rid, text in zip(rids, texts, strict=True):
            con.execute("UPDATE gen_rows SET generation = ? WHERE row_id = ?", [text, rid])
    export_rows(s, str(tmp_path / "rows.csv"), "csv")
    export_rows(s, str(tmp_path / "rows.parquet"), "parquet")
    by_csv = pd.read_csv(tmp_path / "rows.csv", keep_default_na=False).set_index("row_id")["generation"]
    by_pq = pd.read_parquet(tmp_path / "rows.parquet").set_index("row_id")["generation"]
    assert [by_csv[r] for r in rids] == ["'=cmd|' /C calc'!A0", "'@SUM(1)", "'-2 is my answer", "''=quoted"]
    assert [by_pq[r] for r in rids] == texts
    cells = [c for rec in csv.reader((tmp_path / "rows.csv").open(encoding="utf-8")) for c in rec]
    assert not [
        c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and not c[1:].isdigit())
    ]
