"""The tables that schema migration 6 keeps in step with the writers (``current_judge``, ``effective_reviews``)
against the definitions they replaced: the window functions of migrations 1 and 2, computed here, straight
over ``judge_verdicts`` and ``reviews``, as the reference.

Three ways in: the public path (ingest, grade against a scripted judge on 127.0.0.1 through the real
``openai`` client under two fingerprints with errors then ok, reviews, overrides, retractions, an imported
log with older times, ``ingest --replace``); seeded random batches straight into the store's write path
(replayed replies with earlier times, ties, several fingerprints in one batch, both update paths); and a
study written at migration 4, whose ``graded_rows`` must read the same after the upgrade.
"""

from __future__ import annotations

import contextlib
import csv
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from mcqaudit.app import reviews as rv
from mcqaudit.app.grade import GradeOptions, grade
from mcqaudit.app.ingest import ingest_file
from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.store import Study, judging
from mcqaudit.store.judging import VerdictRecord, write_judged
from mcqaudit.store.schema import GRADED_ROWS_VIEW, GRADED_ROWS_VIEW_V8, MIGRATIONS
from tests.helpers import write_jsonl
from tests.judge_servers import Call, ScriptedJudge, Status, add_rows, heuristic

# --- the reference: the definitions of migrations 1, 2 and 4, read-time windows over every reply and review --
OLD_CURRENT_JUDGE = """
SELECT * EXCLUDE (rn) FROM (
    SELECT jv.*, row_number() OVER (PARTITION BY row_id ORDER BY judged_at DESC, fingerprint) AS rn
    FROM judge_verdicts jv
) WHERE rn = 1"""
OLD_EFFECTIVE_REVIEWS = """
SELECT * EXCLUDE (rn) FROM (
    SELECT r.*, row_number() OVER (PARTITION BY row_id ORDER BY created_at DESC, review_id DESC) AS rn
    FROM reviews r
    WHERE r.action <> 'retract'
      AND r.review_id NOT IN (SELECT retracts FROM reviews WHERE action = 'retract' AND retracts IS NOT NULL)
) WHERE rn = 1"""
# migration 4's graded_rows, with its macros spelled as they were (final verdict and letter chosen by the
# text of verdict_source)
def _old_graded_rows(view: str) -> str:
    return (
        view.replace("CREATE OR REPLACE VIEW graded_rows AS", "")
        .replace("LEFT JOIN current_judge j", f"LEFT JOIN ({OLD_CURRENT_JUDGE}) j")
        .replace("LEFT JOIN effective_reviews r", f"LEFT JOIN ({OLD_EFFECTIVE_REVIEWS}) r")
        .replace(
            "final_verdict(review_verdict, judge_verdict, strict_letter, gold_letter, is_blank)",
            """CASE verdict_source(review_verdict, judge_verdict, strict_letter, is_blank)
            WHEN 'review' THEN review_verdict WHEN 'judge' THEN judge_verdict
            WHEN 'prefilter' THEN verdict_of(strict_letter, gold_letter) WHEN 'rule' THEN 'OTHER' END""",
        )
        .replace(
            "picked_letter(review_verdict, review_letter, judge_verdict, judge_letter, strict_letter)",
            """CASE verdict_source(review_verdict, judge_verdict, strict_letter, false)
            WHEN 'review' THEN review_letter WHEN 'judge' THEN judge_letter WHEN 'prefilter' THEN strict_letter END""",
        )
        .strip()
        .rstrip(";")
    )


OLD_GRADED_ROWS = _old_graded_rows(GRADED_ROWS_VIEW)
# the same before migration 9 (no answer, reasoning, finish_reason, truncated)
OLD_GRADED_ROWS_V8 = _old_graded_rows(GRADED_ROWS_VIEW_V8)
REASONING_COLUMNS = ("answer", "reasoning", "finish_reason", "truncated")


def _rows(con: Any, sql: str) -> list[tuple]:
    return sorted(con.execute(sql).fetchall(), key=repr)


def assert_maintained(study: Study) -> int:
    """The maintained tables and graded_rows equal the reference; returns how many rows have a judge outcome."""
    assert (
        "CASE verdict_source" in OLD_GRADED_ROWS and "LEFT JOIN (" in OLD_GRADED_ROWS
    )  # the reference is built
    with study.connect() as con:
        cj = _rows(con, "SELECT * FROM current_judge")
        assert cj == _rows(con, OLD_CURRENT_JUDGE)
        assert _rows(con, "SELECT * FROM effective_reviews") == _rows(con, OLD_EFFECTIVE_REVIEWS)
        assert _rows(con, "SELECT * FROM graded_rows") == _rows(con, OLD_GRADED_ROWS)
        cols = [d[0] for d in con.execute("SELECT * FROM graded_rows LIMIT 0").description]
        assert cols == [d[0] for d in con.execute(OLD_GRADED_ROWS + " LIMIT 0").description]
    return len(cj)


# --- 1: the public path ---------------------------------------------------------------------------------------
QUESTION = "Which river flows through Paris?"
OPTIONS = ["the Seine", "the Thames", "the Danube", "the Tiber"]
GENERATIONS = [
    "I'd go with the Seine.",
    "The Thames, surely.",
    "No idea, sorry.",
    "It is the Danube.",
    "Maybe the Tiber?",
    "B",
    "   ",
    "the Seine or the Thames",
]


def _gen_file(path: Path, replaced: dict[int, str] | None = None) -> Path:
    rows = []
    for k, gen in enumerate(GENERATIONS):
        for arm in ("base", "steered"):
            rows.append(
                {
                    "item_id": f"i{k}",
                    "arm": arm,
                    "question": QUESTION,
                    "options": OPTIONS,
                    "gold": "A",
                    "generation": (replaced or {}).get(k, gen) if arm == "base" else gen,
                }
            )
    return write_jsonl(path, rows)


def _opts(url: str, **config: Any) -> GradeOptions:
    return GradeOptions(
        JudgeConfig(model="scripted", **config),
        base_url=url,
        concurrency=4,
        timeout_s=5.0,
        max_retries=0,
        backoff_base_s=0.01,
        flush_interval_s=0.05,
    )  # type: ignore[arg-type]


def test_the_public_path_keeps_the_tables_equal_to_the_old_definitions(tmp_path: Path) -> None:
    study = Study(tmp_path / "s.duckdb", create=True)
    ingest_file(study, _gen_file(tmp_path / "g.jsonl"))
    assert assert_maintained(study) == 0

    failing = {"on": True}

    def flaky(call: Call) -> Any:
        if failing["on"] and call.parsed is not None and "Tiber" in call.parsed.generation:
            return Status(500)
        return heuristic(call)

    with ScriptedJudge(flaky) as srv:
        first = grade(study, _opts(srv.base_url))
        assert first.errors > 0  # the Tiber rows end in error under the first fingerprint
        n = assert_maintained(study)
        assert n and study.query("SELECT count(*) FROM current_judge WHERE status = 'error'")[0][0] > 0
        failing["on"] = False
        grade(study, _opts(srv.base_url))  # errors then ok
        assert study.query("SELECT count(*) FROM current_judge WHERE status = 'error'") == [(0,)]
        assert_maintained(study)
        grade(study, _opts(srv.base_url, temperature=0.1))  # a second fingerprint: later, so current
        assert_maintained(study)
    assert study.query("SELECT count(DISTINCT fingerprint) FROM judge_verdicts") == [(2,)]
    assert study.query("SELECT count(DISTINCT fingerprint) FROM current_judge") == [(1,)]

    ids = [
        r[0] for r in study.query("SELECT row_id FROM graded_rows WHERE final_verdict IS NOT NULL ORDER BY 1")
    ]
    first_review = rv.add_review(study, ids[0], reviewer="ann", action=rv.CONFIRM)
    rv.add_review(study, ids[1], reviewer="ann", verdict="OTHER")
    rv.add_review(study, ids[1], reviewer="bob", verdict="INCORRECT")  # supersedes ann's
    assert_maintained(study)
    rv.retract_review(study, first_review, reviewer="ann")
    later = study.query("SELECT max(review_id) FROM reviews WHERE row_id = ?", [ids[1]])[0][0]
    rv.retract_review(study, later, reviewer="bob")  # ann's OTHER is in force again
    assert_maintained(study)
    assert study.query("SELECT review_verdict FROM graded_rows WHERE row_id = ?", [ids[1]]) == [("OTHER",)]

    # a collaborator's labels, older than the local reviews: they must not win over newer ones
    old = datetime(2020, 1, 1, tzinfo=UTC).isoformat()
    log = tmp_path / "labels.csv"
    with log.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["row_id", "verdict", "reviewer", "reviewed_at"])
        w.writerow([ids[1], "CORRECT", "carol", old])  # older than ann's OTHER
        w.writerow([ids[2], "OTHER", "carol", old])  # the row's only review
        w.writerow([ids[3], "CORRECT", "carol", ""])  # untimed: the import's time
    res = rv.import_review_log(study, log)
    assert res.added == 3
    assert_maintained(study)
    assert study.query("SELECT review_verdict FROM graded_rows WHERE row_id = ?", [ids[1]]) == [("OTHER",)]

    # a review log round trip with a retraction in it, into a copy made before the reviews
    export = tmp_path / "log.csv"
    export.write_text(rv.review_log_csv(study), encoding="utf-8")
    other = Study(tmp_path / "other.duckdb", create=True)
    ingest_file(other, _gen_file(tmp_path / "g.jsonl"))
    assert rv.import_review_log(other, export).added == study.query("SELECT count(*) FROM reviews")[0][0]
    assert_maintained(other)

    # a replaced generation drops its judge outcome and retracts its reviews
    replaced_row = study.query("SELECT row_id FROM graded_rows WHERE arm = 'base' AND item_id = 'i1'")[0][0]
    rv.add_review(study, replaced_row, reviewer="ann", verdict="CORRECT")
    ingest_file(study, _gen_file(tmp_path / "g2.jsonl", replaced={1: "The Seine it is."}), replace=True)
    assert study.query("SELECT count(*) FROM current_judge WHERE row_id = ?", [replaced_row]) == [(0,)]
    assert study.query("SELECT count(*) FROM effective_reviews WHERE row_id = ?", [replaced_row]) == [(0,)]
    assert_maintained(study)


# --- 2: seeded random batches through the store's write path ------------------------------------------------
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("lookup_max", [0, 2048], ids=["by-scan", "by-lookup"])
def test_random_batches_with_replays_and_ties_match_the_old_definition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lookup_max: int
) -> None:
    monkeypatch.setattr(judging, "_LOOKUP_MAX_ROWS", lookup_max)
    study = Study(tmp_path / "s.duckdb", create=True)
    ids = add_rows(
        study,
        [{"row_id": f"r{k:03d}", "generation": f"text {k}", "options": ["a", "b", "c"]} for k in range(40)],
    )
    rng = random.Random(7)
    fps = ["fp-a", "fp-b", "fp-c"]
    for batch in range(60):
        recs = []
        for _ in range(rng.randint(1, 12)):
            ok = rng.random() < 0.6
            letter = rng.choice("ABC") if ok else None
            recs.append(
                VerdictRecord(
                    row_id=rng.choice(ids),
                    fingerprint=rng.choice(fps),
                    status="ok" if ok else "error",
                    letter=letter,
                    verdict=("CORRECT" if letter == "A" else "INCORRECT") if ok else None,
                    reply=letter or "garbage",
                    rationale=None,
                    error=None if ok else "HTTP 500",
                    prompt_hash=f"h{batch}",
                    base_url="http://127.0.0.1",
                    attempts=1,
                    # mostly later than before, sometimes a replayed reply from long ago; ties on purpose
                    judged_at=T0
                    + timedelta(seconds=rng.choice([batch, batch, batch, 0, rng.randint(0, batch)])),
                )
            )
        write_judged(study, [], recs)
        assert_maintained(study)
    assert study.query("SELECT count(DISTINCT fingerprint) FROM current_judge")[0][0] == 3


def test_reviews_retractions_and_older_imports_match_the_old_definition(tmp_path: Path) -> None:
    study = Study(tmp_path / "s.duckdb", create=True)
    ids = add_rows(
        study,
        [
            {"row_id": f"r{k}", "generation": "B", "strict_letter": "B", "options": ["a", "b"]}
            for k in range(6)
        ],
    )
    rng = random.Random(3)
    made: list[int] = []
    for step in range(40):
        r = rng.random()
        if r < 0.5 or not made:
            made.append(
                rv.add_review(
                    study, rng.choice(ids), reviewer=f"p{step % 3}", verdict=rng.choice(["CORRECT", "OTHER"])
                )
            )
        elif r < 0.75:
            with contextlib.suppress(rv.ReviewError):  # already retracted
                rv.retract_review(study, rng.choice(made), reviewer="p0")
        else:
            log = tmp_path / f"l{step}.jsonl"
            at = T0 - timedelta(
                days=rng.randint(0, 3), seconds=rng.choice([0, 0, 5])
            )  # older than local ones
            write_jsonl(
                log,
                [
                    {
                        "row_id": rng.choice(ids),
                        "verdict": "OTHER",
                        "reviewer": "imp",
                        "reviewed_at": at.isoformat(),
                    }
                    for _ in range(rng.randint(1, 3))
                ],
            )
            rv.import_review_log(study, log)
        assert_maintained(study)


# --- 3: a study written at migration 4 ------------------------------------------------------------------------
def test_a_study_at_migration_4_reads_the_same_after_the_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "v4.duckdb"
    con = duckdb.connect(str(path))
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ)")
    for v in range(1, 5):
        con.execute(MIGRATIONS[v - 1])
        con.execute("INSERT INTO schema_migrations VALUES (?, now())", [v])
    rng = random.Random(11)
    gens = ["B", "   ", "the answer is maybe", "A", "prose"]
    for k in range(30):
        gen = gens[k % len(gens)]
        con.execute(
            """INSERT INTO gen_rows (row_id, arm, item_id, orientation, sample, question, options, gold_letter,
                   generation, is_blank, strict_letter, naive_letter, ingest_id)
               VALUES (?, ?, ?, 'ABC', 0, 'Q?', ['x', 'y', 'z'], 'B', ?, ?, ?, 'A', 1)""",
            [
                f"r{k:02d}",
                ("base", "steered")[k % 2],
                f"i{k // 2}",
                gen,
                not gen.strip(),
                gen if gen in "AB" else None,
            ],
        )
        for fp in rng.sample(["fp-a", "fp-b", "fp-c"], rng.randint(0, 3)):
            ok = rng.random() < 0.7
            con.execute(
                """INSERT INTO judge_verdicts (row_id, fingerprint, status, letter, verdict, reply, judged_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?)""",
                [
                    f"r{k:02d}",
                    fp,
                    "ok" if ok else "error",
                    "C" if ok else None,
                    "INCORRECT" if ok else None,
                    "C" if ok else "??",
                    T0 + timedelta(seconds=rng.choice([0, 0, 1, 2])),  # ties decided by fingerprint
                ],
            )
    for k in range(40):
        review_id = k + 1
        retract = k > 5 and rng.random() < 0.3
        target = rng.randint(1, review_id - 1) if retract else None
        row = f"r{rng.randint(0, 29):02d}"
        if retract:
            row = con.execute("SELECT row_id FROM reviews WHERE review_id = ?", [target]).fetchone()[0]
        con.execute(
            """INSERT INTO reviews (review_id, row_id, action, verdict, picked_letter, reviewer, created_at, retracts)
               VALUES (?, ?, ?, ?, ?, 'x', ?, ?)""",
            [
                review_id,
                row,
                "retract" if retract else "override",
                None if retract else "OTHER",
                None,
                T0 + timedelta(days=rng.choice([-30, 0, 1])),  # an imported log keeps its older times
                target,
            ],
        )
    before = _rows(con, "SELECT * FROM graded_rows")
    assert before == _rows(con, OLD_GRADED_ROWS_V8)  # the reference reads migration 4's view exactly
    assert any(r[20] is not None for r in before)  # some review in force
    con.close()

    study = Study(path)
    assert study.query("SELECT max(version) FROM schema_migrations") == [(len(MIGRATIONS),)]
    with study.connect() as c:
        assert _rows(c, f"SELECT * EXCLUDE ({', '.join(REASONING_COLUMNS)}) FROM graded_rows") == before
        # rows stored before migration 9 are read whole, as they were: the answer is the generation
        assert c.execute(
            "SELECT count(*) FROM graded_rows WHERE answer IS DISTINCT FROM generation OR reasoning IS NOT NULL "
            "OR finish_reason IS NOT NULL OR truncated IS DISTINCT FROM false"
        ).fetchall() == [(0,)]
        assert c.execute(
            "SELECT table_type FROM information_schema.tables WHERE table_name = 'current_judge'"
        ).fetchall() == [("BASE TABLE",)]
    assert assert_maintained(study) > 0


def test_a_study_connection_draws_no_duckdb_progress_bar(tmp_path: Path) -> None:
    """DuckDB prints its own bar on stdout for a query over 2 s (on a busy machine, a report's): every
    connection a Study opens, read-write or read-only, turns it off, so that a command's output does not
    depend on the machine's speed. Asked in a plain interpreter, as a command runs (under pytest DuckDB
    starts with the bar off)."""
    import subprocess
    import sys

    path = tmp_path / "s.duckdb"
    Study(path, create=True)
    code = (
        "import sys, duckdb; from mcqaudit.store import Study\n"
        "print(duckdb.connect().execute(\"SELECT current_setting('enable_progress_bar')\").fetchone()[0])\n"
        "for ro in (False, True):\n"
        "    with Study(sys.argv[1], read_only=ro).connect() as con:\n"
        "        print(con.execute(\"SELECT current_setting('enable_progress_bar')\").fetchone()[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False", "False"], out.stdout + out.stderr
