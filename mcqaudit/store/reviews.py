"""SQL for reviews: the review records, their history, spot-check queues, and what the review log reads and
writes. Every function runs SQL and returns typed rows; what is legal, and what a decision is recorded as,
is decided in :mod:`mcqaudit.review` and the transactions are the use case's (:mod:`mcqaudit.app.reviews`).

Reviews are append-only (docs/design.md §1, §6). A review records who, when, the verdict it replaced (``prior_verdict``,
``prior_source``) and the judge fingerprint it was made against; a retraction is a new review row pointing at
the one it withdraws. The effective review of each row is kept in the ``effective_reviews`` table (schema
migration 6), re-derived from ``reviews`` for the rows a write touches in that write's transaction
(:func:`refresh`), so ``graded_rows`` and every metric follow a review at once without a window over every
review on each read.

Each write is one short transaction through :meth:`Study.write` (bounded retry on DuckDB's cross-process
lock; :func:`writing` turns a full disk into one line), which is what lets two review sessions and a
``grade`` run share a file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import duckdb

from mcqaudit.review.log import LogQueue, LogRow, RowKey, StoredReview
from mcqaudit.review.queues import DONE_BY, JUDGES_DISAGREE, SECOND_REVIEW, STRATIFIED
from mcqaudit.review.rules import NewReview, ReviewError, RowState
from mcqaudit.store.db import Study, StudyError
from mcqaudit.store.schema import ROWS_IN_LIST, refresh_effective_reviews

if TYPE_CHECKING:  # (ingest and grade import this module: pandas only where a frame is asked for)
    import pandas as pd

Connection = duckdb.DuckDBPyConnection


@contextlib.contextmanager
def writing(study: Study, outcome: str) -> Iterator[Connection]:
    """:meth:`Study.write`, with a full disk (or another failure to write the file) as one
    :class:`StudyError` line that ends with ``outcome``: the transaction did not commit, so nothing of it is
    in the study. DuckDB meets a full disk at COMMIT, writing the WAL (``TransactionException: Failed to
    commit``), or while a large statement spills (``IOException``)."""
    try:
        with study.write() as con:
            yield con
    except (duckdb.IOException, duckdb.OutOfMemoryException, duckdb.TransactionException) as exc:
        text = str(exc)
        if isinstance(exc, duckdb.TransactionException) and "Failed to commit" not in text:
            raise
        if "No space left" in text or "disk is full" in text.lower():
            reason = "no space left on the device"
        else:
            reason = (
                text.splitlines()[0].removeprefix("TransactionContext Error: ")
                if text
                else type(exc).__name__
            )
        raise StudyError(f"{study.path}: cannot be written: {reason}; {outcome}") from None


def row_state(con: Connection, row_id: str) -> RowState:
    """The row a review is about, as this connection sees it; ReviewError when the study lacks it."""
    rec = con.execute(
        """SELECT row_id, gold_letter, len(options), final_verdict, verdict_source, picked_letter,
                  judge_fingerprint
           FROM graded_rows WHERE row_id = ?""",
        [row_id],
    ).fetchone()
    if rec is None:
        raise ReviewError(f"no row {row_id!r} in this study")
    rid, gold, n, final, source, letter, fp = rec
    return RowState(str(rid), str(gold), int(n), final, source, letter, fp)


def insert_review(con: Connection, r: NewReview) -> int:
    """Append one review record; returns its review_id."""
    got = con.execute("SELECT nextval('review_seq')").fetchone()
    assert got is not None
    rid = int(got[0])
    con.execute(
        """INSERT INTO reviews (review_id, row_id, action, verdict, picked_letter, note, reviewer, created_at,
                                prior_verdict, prior_source, fingerprint, retracts, queue_id, origin)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [rid, r.row_id, r.action, r.verdict, r.picked_letter, (r.note or "").strip() or None, r.reviewer,
         r.created_at, r.prior_verdict, r.prior_source, r.fingerprint, r.retracts, r.queue_id, r.origin],
    )  # fmt: skip
    return rid


def refresh(con: Connection, row_ids: Sequence[str]) -> None:
    """Re-derive the effective review of these rows (inside the write that changed their reviews)."""
    refresh_effective_reviews(con, ROWS_IN_LIST, [sorted(row_ids)])


def review_target(con: Connection, review_id: int) -> tuple[str, str] | None:
    """(row_id, action) of a review, None when there is no such review."""
    rec = con.execute("SELECT row_id, action FROM reviews WHERE review_id = ?", [int(review_id)]).fetchone()
    return None if rec is None else (str(rec[0]), str(rec[1]))


def retraction_of(con: Connection, review_id: int) -> int | None:
    """The review_id of the retraction that withdrew a review, None when none did."""
    rec = con.execute(
        "SELECT review_id FROM reviews WHERE action = 'retract' AND retracts = ?", [int(review_id)]
    ).fetchone()
    return None if rec is None else int(rec[0])


def retract_for_replaced_rows(con: duckdb.DuckDBPyConnection, rows_table: str, ingest_id: int) -> int:
    """Inside an ingest's transaction: withdraw the effective review of every row whose generation
    ``ingest --replace`` overwrites (a new ``retract`` record each, reviews stay append-only). ``rows_table``
    is a table name of the caller's (never input) with a ``row_id`` column; returns how many were retracted."""
    got = con.execute(
        f"""
        INSERT INTO reviews (review_id, row_id, action, note, reviewer, created_at, retracts, origin)
        SELECT nextval('review_seq'), r.row_id, 'retract',
               'generation replaced by ingest ' || ?::VARCHAR, 'mcqaudit', now(), r.review_id, 'ingest --replace'
        FROM effective_reviews r WHERE r.row_id IN (SELECT row_id FROM {rows_table})
        """,
        [ingest_id],
    ).fetchone()
    refresh_effective_reviews(con, f"row_id IN (SELECT row_id FROM {rows_table})")
    return int(got[0]) if got else 0


def review_history(study: Study, row_id: str) -> pd.DataFrame:
    """Every review of a row, oldest first, with ``status``: effective, superseded, retracted or retraction."""
    return study.query_df(
        """SELECT r.review_id, r.action, r.verdict, r.picked_letter, r.note, r.reviewer, r.created_at,
                  r.prior_verdict, r.prior_source, r.fingerprint, r.retracts, r.queue_id, r.origin,
                  CASE WHEN r.action = 'retract' THEN 'retraction'
                       WHEN x.review_id IS NOT NULL THEN 'retracted'
                       WHEN e.review_id IS NOT NULL THEN 'effective'
                       ELSE 'superseded' END AS status
           FROM reviews r
           LEFT JOIN (SELECT DISTINCT retracts AS review_id FROM reviews WHERE action = 'retract') x
                  ON x.review_id = r.review_id
           LEFT JOIN (SELECT review_id FROM effective_reviews WHERE row_id = ?) e ON e.review_id = r.review_id
           WHERE r.row_id = ?
           ORDER BY r.created_at, r.review_id""",
        [row_id, row_id],
    )


def review_counts(study: Study) -> dict[str, int]:
    """Reviews recorded (all actions), rows with an effective review, and reviewers."""
    rec = study.query(
        """SELECT (SELECT count(*) FROM reviews), (SELECT count(*) FROM effective_reviews),
                  (SELECT count(DISTINCT reviewer) FROM reviews)"""
    )[0]
    return {"reviews": int(rec[0]), "reviewed_rows": int(rec[1]), "reviewers": int(rec[2])}


# --- each person's review of a row ---------------------------------------------------------------------
# Each reviewer's review in force of each row: their latest confirm/override that no retraction withdraws (by
# created_at, ties to the later review_id: the effective review's rule, per person). The row's effective
# review is the latest of these. What "reviewers disagree", a second review and reviewer agreement read.
LATEST_BY_REVIEWER = """
SELECT row_id, reviewer, verdict, picked_letter, created_at, review_id FROM reviews
WHERE action <> 'retract'
  AND review_id NOT IN (SELECT retracts FROM reviews WHERE action = 'retract' AND retracts IS NOT NULL)
QUALIFY row_number() OVER (PARTITION BY row_id, reviewer ORDER BY created_at DESC, review_id DESC) = 1
"""
# rows that DONE_BY or more people have reviewed: a second_review queue's reviewed rows
SECOND_REVIEWED = f"SELECT row_id FROM ({LATEST_BY_REVIEWER}) GROUP BY row_id HAVING count(*) >= {DONE_BY}"
# rows that one person alone has reviewed, with who: what a second review draws from
_ONE_REVIEWER = f"""
SELECT row_id, any_value(reviewer) AS reviewer FROM ({LATEST_BY_REVIEWER}) GROUP BY row_id HAVING count(*) = 1
"""


def sole_reviewer_rows(con: Connection) -> dict[str, int]:
    """Each reviewer and the rows that they alone have reviewed, most rows first."""
    return {
        str(who): int(n)
        for who, n in con.execute(
            f"SELECT reviewer, count(*) FROM ({_ONE_REVIEWER}) GROUP BY 1 ORDER BY 2 DESC, 1"
        ).fetchall()
    }


# --- spot-check queues -------------------------------------------------------------------------------------
# A row is in the "disagreement" stratum when the naive parser or the user's own parser gives a verdict other
# than the final one, in the "other" stratum when its final verdict is OTHER or it has none yet
# (mcqaudit.review.queues.STRATA).
_STRATUM = """
CASE WHEN g.final_verdict IS NULL OR g.final_verdict = 'OTHER' THEN 'other'
     WHEN verdict_of(g.naive_letter, g.gold_letter) <> g.final_verdict
       OR (g.user_letter IS NOT NULL AND verdict_of(g.user_letter, g.gold_letter) <> g.final_verdict)
     THEN 'disagreement'
     ELSE 'rest' END"""

# rows on which the primary judge (the row's current judge outcome, which never is a panel judge's) and a
# panel judge both gave an ok verdict: "both graded"; with different verdicts: a judges_disagree candidate
_BOTH_JUDGED = """
SELECT c.row_id, c.verdict AS primary_verdict, p.verdict AS panel_verdict
FROM current_judge c JOIN judge_verdicts p USING (row_id)
WHERE c.status = 'ok' AND p.status = 'ok' AND p.fingerprint IN (SELECT fingerprint FROM panel_judges)
"""
JUDGES_DISAGREE_ROWS = f"SELECT DISTINCT row_id FROM ({_BOTH_JUDGED}) WHERE panel_verdict <> primary_verdict"


def study_arms(con: Connection) -> list[str]:
    """The study's arms, sorted."""
    return [str(r[0]) for r in con.execute("SELECT DISTINCT arm FROM gen_rows ORDER BY arm").fetchall()]


def panel_judge_count(con: Connection) -> int:
    """How many panel judges the study has (`grade --panel`)."""
    got = con.execute("SELECT count(*) FROM panel_judges").fetchone()
    return int(got[0]) if got else 0


def both_judged_count(con: Connection, arms: Sequence[str]) -> int:
    """Rows of ``arms`` that the primary judge and some panel judge both graded (ok verdicts)."""
    got = con.execute(
        f"""SELECT count(DISTINCT b.row_id) FROM ({_BOTH_JUDGED}) b JOIN gen_rows g USING (row_id)
            WHERE g.arm IN (SELECT unnest(?))""",
        [list(arms)],
    ).fetchone()
    return int(got[0]) if got else 0


def _candidate_rows(strategy: str, of_reviewer: str | None, of_queue: int | None) -> tuple[str, list[object]]:
    """The condition on ``g.row_id`` a strategy draws from (SQL from fixed pieces; values as parameters)."""
    if strategy == JUDGES_DISAGREE:
        return f"AND g.row_id IN ({JUDGES_DISAGREE_ROWS})", []
    if strategy != SECOND_REVIEW:
        return "", []
    cond = f"AND g.row_id IN (SELECT row_id FROM ({_ONE_REVIEWER}) WHERE (CAST(? AS VARCHAR) IS NULL OR reviewer = ?))"
    params: list[object] = [of_reviewer, of_reviewer]
    if of_queue is not None:
        cond += " AND g.row_id IN (SELECT row_id FROM spot_check_rows WHERE queue_id = ?)"
        params.append(int(of_queue))
    return cond, params


def stage_candidates(
    con: Connection,
    strategy: str,
    seed: int,
    arms: Sequence[str],
    *,
    of_reviewer: str | None = None,
    of_queue: int | None = None,
) -> dict[str, dict[str, int]]:
    """Stage the rows of ``arms`` that ``strategy`` draws from as a draw's candidates (temp table ``mq_cand``:
    each row's stratum and its seeded draw order ``md5(seed:row_id)``); returns the candidates per arm and
    stratum. ``judges_disagree``: rows where the primary's and a panel judge's ok verdicts differ;
    ``second_review``: rows one person alone reviewed (``of_reviewer``; rows of queue ``of_queue``)."""
    cond, params = _candidate_rows(strategy, of_reviewer, of_queue)
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE mq_cand AS
            SELECT g.row_id, g.arm, {_STRATUM if strategy == STRATIFIED else "'all'"} AS stratum,
                   md5(?::VARCHAR || ':' || g.row_id) AS draw
            FROM graded_rows g WHERE g.arm IN (SELECT unnest(?)) {cond}""",
        [str(seed), list(arms), *params],
    )
    avail: dict[str, dict[str, int]] = {}
    for arm, stratum, n in con.execute("SELECT arm, stratum, count(*) FROM mq_cand GROUP BY ALL").fetchall():
        avail.setdefault(str(arm), {})[str(stratum)] = int(n)
    return avail


def first_candidates_by_arm(con: Connection, size: int) -> dict[str, int]:
    """How many of the first ``size`` staged candidates in draw order each arm has."""
    return {
        str(arm): int(n)
        for arm, n in con.execute(
            "SELECT arm, count(*) FROM (SELECT arm FROM mq_cand ORDER BY draw, row_id LIMIT ?) GROUP BY arm",
            [size],
        ).fetchall()
    }


def next_queue_id(con: Connection) -> int:
    got = con.execute("SELECT nextval('queue_seq')").fetchone()
    assert got is not None
    return int(got[0])


def insert_queue(
    con: Connection,
    *,
    name: str,
    strategy: str,
    seed: int,
    size: int,
    arms: Sequence[str],
    created_by: str | None,
    created_at: datetime,
    per_arm: bool,
) -> int:
    """A new spot-check queue (no rows yet); returns its queue_id."""
    qid = next_queue_id(con)
    con.execute(
        """INSERT INTO spot_checks (queue_id, name, strategy, seed, size, arms, created_by, created_at, per_arm)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [qid, name, strategy, seed, size, list(arms), created_by, created_at, per_arm],
    )
    return qid


def insert_drawn_rows(con: Connection, queue_id: int, seed: int, quotas: dict[str, dict[str, int]]) -> int:
    """Draw each arm's and stratum's quota of staged candidates (the first in draw order) into the queue, in a
    seeded order that interleaves arms; drops the staged candidates; returns the rows drawn."""
    q_arm = [a for a, by in quotas.items() for _ in by]
    q_stratum = [s for by in quotas.values() for s in by]
    q_n = [n for by in quotas.values() for n in by.values()]
    con.execute(
        """INSERT INTO spot_check_rows
           SELECT ?, (row_number() OVER (ORDER BY md5(?::VARCHAR || ':order:' || row_id)) - 1)::INTEGER, row_id
           FROM (
               SELECT c.row_id, row_number() OVER (PARTITION BY c.arm, c.stratum ORDER BY c.draw, c.row_id) AS rk,
                      q.n
               FROM mq_cand c JOIN (SELECT unnest(?) AS arm, unnest(?) AS stratum, unnest(?) AS n) q
                    ON q.arm = c.arm AND q.stratum = c.stratum
           ) WHERE rk <= n""",
        [queue_id, str(seed), q_arm, q_stratum, q_n],
    )
    got = con.execute("SELECT count(*) FROM spot_check_rows WHERE queue_id = ?", [queue_id]).fetchone()
    con.execute("DROP TABLE mq_cand")
    return int(got[0]) if got else 0


def live_queue(con: Connection, queue_id: int) -> None:
    """ReviewError unless the queue exists and is not deleted."""
    rec = con.execute("SELECT deleted_at FROM spot_checks WHERE queue_id = ?", [int(queue_id)]).fetchone()
    if rec is None:
        raise ReviewError(f"no spot-check queue #{queue_id}")
    if rec[0] is not None:
        raise ReviewError(f"spot-check queue #{queue_id} was deleted")


def set_queue_name(con: Connection, queue_id: int, name: str) -> None:
    con.execute("UPDATE spot_checks SET name = ? WHERE queue_id = ?", [name, int(queue_id)])


def mark_queue_deleted(con: Connection, queue_id: int, deleted_at: datetime, deleted_by: str | None) -> None:
    con.execute(
        "UPDATE spot_checks SET deleted_at = ?, deleted_by = ? WHERE queue_id = ?",
        [deleted_at, deleted_by, int(queue_id)],
    )


def _reviewed_in_queue(strategy: str) -> str:
    """A queue's row is reviewed when it has an effective review; in a second_review queue, once two or more
    people have reviewed it (``strategy``: the queue's strategy column; e: effective_reviews and d:
    SECOND_REVIEWED, left-joined on the row)."""
    return f"CASE WHEN {strategy} = '{SECOND_REVIEW}' THEN d.row_id IS NOT NULL ELSE e.row_id IS NOT NULL END"


def _spot_checks_sql() -> str:
    return f"""SELECT s.queue_id, s.name, s.strategy, s.seed, s.size, s.per_arm, s.arms, s.created_by, s.created_at,
                  count(r.row_id) AS rows, count(r.row_id) FILTER ({_reviewed_in_queue("s.strategy")}) AS reviewed
           FROM spot_checks s
           LEFT JOIN spot_check_rows r USING (queue_id)
           LEFT JOIN effective_reviews e ON e.row_id = r.row_id
           LEFT JOIN ({SECOND_REVIEWED}) d ON d.row_id = r.row_id
           WHERE s.deleted_at IS NULL
           GROUP BY ALL ORDER BY s.queue_id"""


def _progress_sql() -> str:
    return f"""WITH qa AS (
               SELECT s.queue_id, s.strategy, a.arm, a.k
               FROM spot_checks s, unnest(s.arms) WITH ORDINALITY AS a(arm, k)
               WHERE s.deleted_at IS NULL AND (CAST(? AS INTEGER) IS NULL OR s.queue_id = ?)
           )
           SELECT qa.queue_id, qa.arm, count(r.row_id) AS rows,
                  count(r.row_id) FILTER ({_reviewed_in_queue("qa.strategy")}) AS reviewed
           FROM qa
           LEFT JOIN (spot_check_rows r JOIN gen_rows g USING (row_id))
                  ON r.queue_id = qa.queue_id AND g.arm = qa.arm
           LEFT JOIN effective_reviews e ON e.row_id = r.row_id
           LEFT JOIN ({SECOND_REVIEWED}) d ON d.row_id = r.row_id
           GROUP BY qa.queue_id, qa.arm, qa.k ORDER BY qa.queue_id, qa.k"""


def spot_checks(study: Study) -> pd.DataFrame:
    """Every queue that is not deleted, with its progress: rows, and rows with an effective review (in a
    second_review queue: rows two or more people have reviewed).

    Columns: queue_id, name, strategy, seed, size, per_arm, arms, created_by, created_at, rows, reviewed.
    """
    return study.query_df(_spot_checks_sql())


def spot_check_records(study: Study) -> list[dict[str, Any]]:
    """:func:`spot_checks` as a list of dicts (``created_by`` None where nobody was named)."""
    return study.query_records(_spot_checks_sql())


def spot_check_progress(study: Study, queue_id: int | None = None) -> pd.DataFrame:
    """Per queue (not deleted; or only ``queue_id``) and arm: rows drawn and rows reviewed (an effective review;
    in a second_review queue, reviews by two or more people).

    Columns: queue_id, arm, rows, reviewed; every arm the queue was drawn over appears (with 0 rows when a
    small total left it none), in the queue's arm order.
    """
    return study.query_df(_progress_sql(), [queue_id, queue_id])


def spot_check_progress_records(study: Study, queue_id: int | None = None) -> list[dict[str, Any]]:
    """:func:`spot_check_progress` as a list of dicts."""
    return study.query_records(_progress_sql(), [queue_id, queue_id])


def queue_row_ids(study: Study, queue_id: int) -> list[str]:
    """The row_ids of a queue in queue order (a deleted queue's too: its rows are kept)."""
    with study.connect() as con:
        if con.execute("SELECT 1 FROM spot_checks WHERE queue_id = ?", [int(queue_id)]).fetchone() is None:
            raise ReviewError(f"no spot-check queue #{queue_id}")
        return [
            str(r[0])
            for r in con.execute(
                "SELECT row_id FROM spot_check_rows WHERE queue_id = ? ORDER BY position", [int(queue_id)]
            ).fetchall()
        ]


# --- the review log ----------------------------------------------------------------------------------------
def review_log(study: Study) -> pd.DataFrame:
    """Every review ever recorded (retractions included), oldest first, columns
    :data:`~mcqaudit.review.log.LOG_COLUMNS`."""
    return study.query_df(
        """SELECT r.review_id, r.row_id, g.arm, g.item_id, g.orientation, g.sample, r.action, r.verdict,
                  r.picked_letter, r.note, r.reviewer, r.created_at, r.prior_verdict, r.prior_source,
                  r.fingerprint, r.retracts, r.queue_id, r.origin
           FROM reviews r LEFT JOIN gen_rows g USING (row_id)
           ORDER BY r.created_at, r.review_id"""
    )


def queue_log(study: Study) -> pd.DataFrame:
    """One line per row of every spot-check queue that is not deleted, in queue order, as the review log
    carries them (action ``queue``; columns :data:`~mcqaudit.review.log.EXPORT_COLUMNS`): the row (row_id,
    arm, item_id, orientation, sample), the queue's id in this study, who drew it and when (reviewer,
    created_at), and its definition (queue_name, queue_strategy, queue_seed, queue_size, queue_per_arm,
    queue_arms as a JSON array, queue_position)."""
    return study.query_df(
        """SELECT NULL::BIGINT AS review_id, r.row_id, g.arm, g.item_id, g.orientation, g.sample,
                  'queue' AS action, NULL AS verdict, NULL AS picked_letter, NULL AS note,
                  s.created_by AS reviewer, s.created_at, NULL AS prior_verdict, NULL AS prior_source,
                  NULL AS fingerprint, NULL::BIGINT AS retracts, s.queue_id, NULL AS origin,
                  s.name AS queue_name, s.strategy AS queue_strategy, s.seed AS queue_seed,
                  s.size AS queue_size, CASE WHEN s.per_arm THEN 'true' ELSE 'false' END AS queue_per_arm,
                  to_json(s.arms)::VARCHAR AS queue_arms, r.position AS queue_position
           FROM spot_checks s JOIN spot_check_rows r USING (queue_id) LEFT JOIN gen_rows g USING (row_id)
           WHERE s.deleted_at IS NULL
           ORDER BY s.queue_id, r.position"""
    )


def log_rows(con: Connection, ids: Sequence[str], keys: Sequence[RowKey]) -> dict[str, LogRow]:
    """The rows a log names (by row_id, or by arm, item_id, orientation, sample), by row_id."""
    rows: dict[str, LogRow] = {}
    for rec in con.execute(
        """SELECT g.row_id, g.arm, g.item_id, g.orientation, g.sample, g.gold_letter, len(g.options),
                  g.final_verdict, g.verdict_source, g.picked_letter, g.judge_fingerprint, g.reviewed_at
           FROM graded_rows g
           WHERE g.row_id IN (SELECT unnest(?))
              OR (g.arm, g.item_id, g.orientation, g.sample) IN (
                    SELECT (unnest(?), unnest(?), unnest(?), unnest(?)))""",
        [list(ids), *([k[i] for k in keys] for i in range(4))],
    ).fetchall():
        rid, arm, item, orient, sample, gold, n, final, source, letter, fp, at = rec
        rows[rid] = LogRow(rid, gold, int(n), final, source, letter, fp, (arm, item, orient, int(sample)), at)
    return rows


def stored_reviews(con: Connection, row_ids: Sequence[str]) -> list[StoredReview]:
    """Every review of these rows (what an import matches its records against)."""
    return [
        StoredReview(int(review_id), rid, action, who, t, verdict, letter, note, bool(from_import))
        for review_id, rid, action, who, t, verdict, letter, note, from_import in con.execute(
            """SELECT review_id, row_id, action, reviewer, created_at, verdict, picked_letter, note,
                      starts_with(coalesce(origin, ''), 'import:')
               FROM reviews WHERE row_id IN (SELECT unnest(?))""",
            [sorted(row_ids)],
        ).fetchall()
    ]


QueueIdentity = tuple[str, int, tuple[str, ...]]  # (strategy, seed, row_ids in queue order)


def queue_identities(con: Connection) -> dict[QueueIdentity, int]:
    """Every queue of the study (deleted ones too) by its strategy, seed and rows in order; the first id of each."""
    have: dict[QueueIdentity, int] = {}
    for qid, strategy, seed, rows in con.execute(
        """SELECT s.queue_id, s.strategy, s.seed, list(r.row_id ORDER BY r.position)
           FROM spot_checks s JOIN spot_check_rows r USING (queue_id) GROUP BY ALL ORDER BY s.queue_id"""
    ).fetchall():
        have.setdefault((str(strategy), int(seed), tuple(rows)), int(qid))
    return have


def insert_log_queue(con: Connection, q: LogQueue) -> int:
    """A queue a review log carries, as a new queue of this study with its rows; returns its queue_id."""
    qid = insert_queue(con, name=q.name, strategy=q.strategy, seed=q.seed, size=q.size, arms=q.arms,
                       created_by=q.created_by, created_at=q.created_at, per_arm=q.per_arm)  # fmt: skip
    con.execute(
        "INSERT INTO spot_check_rows SELECT ?, (k - 1)::INTEGER, row_id FROM unnest(?) WITH ORDINALITY AS t(row_id, k)",
        [qid, list(q.rows)],
    )
    return qid


def rows_of_reviews(con: Connection, review_ids: Sequence[int]) -> list[str]:
    """The rows these reviews are about."""
    return [
        str(r[0])
        for r in con.execute(
            "SELECT row_id FROM reviews WHERE review_id IN (SELECT unnest(?::BIGINT[]))", [list(review_ids)]
        ).fetchall()
    ]
