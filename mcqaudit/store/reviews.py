"""SQL for reviews: confirm / override / retract, review history, spot-check queues, review-log export/import.

Reviews are append-only (docs/design.md §1, §6). A review records who, when, the verdict it replaced (``prior_verdict``,
``prior_source``) and the judge fingerprint it was made against; a retraction is a new review row pointing at
the one it withdraws. The effective review of each row is kept in the ``effective_reviews`` table (schema
migration 6), re-derived from ``reviews`` for the rows a write touches in that write's transaction
(:func:`~mcqaudit.store.schema.refresh_effective_reviews`), so ``graded_rows`` and every metric follow a review
at once without a window over every review on each read.

Each write is one short transaction through :meth:`Study.write` (bounded retry on DuckDB's cross-process
lock), which is what lets two review sessions and a ``grade`` run share a file.

A review log (CSV or JSONL, columns :data:`LOG_COLUMNS`) carries reviews between copies of a study, and
after them its spot-check queues (lines with action ``queue``, columns :data:`QUEUE_COLUMNS`), which the import
recreates, so judge agreement in the copy rests on the same uniform spot check. The CSV neutralises cells a
spreadsheet would run as formulas (:func:`neutralise_cell`); the import restores them (:func:`restore_cell`).
Saves and imported labels become a confirm or an override by one rule (:mod:`mcqaudit.review.rules`).
Importing is idempotent: a review is identified by (row_id, action, reviewer, created_at), so importing the
same log twice adds nothing. A log naming a row the study lacks, or carrying an illegal value, is refused
whole with each problem named by line.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from mcqaudit.review.rules import CONFIRM, OVERRIDE, decision_action
from mcqaudit.store.db import Study, StudyError, utcnow
from mcqaudit.store.schema import ROWS_IN_LIST, refresh_effective_reviews
from mcqaudit.vocab import CORRECT, INCORRECT, LETTERS, VERDICTS, verdict_of

RETRACT = "retract"
ACTIONS = (CONFIRM, OVERRIDE, RETRACT)
UNIFORM, STRATIFIED = "uniform", "stratified"
STRATEGIES = (UNIFORM, STRATIFIED)

LOG_COLUMNS = [
    "review_id",
    "row_id",
    "arm",
    "item_id",
    "orientation",
    "sample",
    "action",
    "verdict",
    "picked_letter",
    "note",
    "reviewer",
    "created_at",
    "prior_verdict",
    "prior_source",
    "fingerprint",
    "retracts",
    "queue_id",
    "origin",
]


QUEUE = "queue"  # the action of a review log's queue-membership lines (not a review)
QUEUE_COLUMNS = [
    "queue_name",
    "queue_strategy",
    "queue_seed",
    "queue_size",
    "queue_per_arm",
    "queue_arms",
    "queue_position",
]
EXPORT_COLUMNS = LOG_COLUMNS + QUEUE_COLUMNS  # what `reviews export` writes


class ReviewError(ValueError):
    """A review that cannot be recorded (unknown row, illegal verdict or letter, nothing to confirm)."""


class ReviewImportError(ValueError):
    """A review log with problems; nothing of it was written. ``problems`` are "FILE:LINE: field: reason"."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        shown = self.problems[:50]
        more = len(self.problems) - len(shown)
        super().__init__("\n".join(shown) + (f"\n... and {more} more" if more else ""))


@dataclass(frozen=True)
class _RowState:
    row_id: str
    gold_letter: str
    n_options: int
    final_verdict: str | None
    verdict_source: str | None
    picked_letter: str | None
    fingerprint: str | None


def _row_state(con: duckdb.DuckDBPyConnection, row_id: str) -> _RowState:
    rec = con.execute(
        """SELECT row_id, gold_letter, len(options), final_verdict, verdict_source, picked_letter,
                  judge_fingerprint
           FROM graded_rows WHERE row_id = ?""",
        [row_id],
    ).fetchone()
    if rec is None:
        raise ReviewError(f"no row {row_id!r} in this study")
    return _RowState(*rec)


def check_verdict(
    verdict: str | None, picked: str | None, gold: str, n_options: int
) -> tuple[str, str | None]:
    """The (verdict, picked letter) a review stores; raises ReviewError when they contradict each other.

    A CORRECT review picks the gold letter (filled in when not given); INCORRECT may name the wrong letter
    it picked; OTHER picks none.
    """
    if verdict not in VERDICTS:
        raise ReviewError(f"verdict must be one of {', '.join(VERDICTS)}, not {verdict!r}")
    letter = (picked or "").strip().upper() or None
    if letter is not None and (len(letter) != 1 or letter not in LETTERS[:n_options]):
        raise ReviewError(f"picked letter {picked!r} is not one of this row's letters {LETTERS[:n_options]}")
    if letter is not None and verdict_of(letter, gold) != verdict:  # the letter implies another verdict
        if verdict == CORRECT:
            raise ReviewError(f"a CORRECT verdict picks the gold letter {gold}, not {letter}")
        if verdict == INCORRECT:
            raise ReviewError(f"{letter} is the gold letter: the verdict would be CORRECT")
        raise ReviewError("an OTHER verdict picks no letter")
    if verdict == CORRECT:
        letter = gold
    return verdict, letter


@contextlib.contextmanager
def _writing(study: Study, outcome: str) -> Iterator[duckdb.DuckDBPyConnection]:
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


def _reviewer(name: str | None) -> str:
    n = (name or "").strip()
    if not n:
        raise ReviewError("a review needs a reviewer name")
    return n


def _insert(
    con: duckdb.DuckDBPyConnection,
    *,
    row_id: str,
    action: str,
    verdict: str | None,
    picked_letter: str | None,
    note: str | None,
    reviewer: str,
    created_at: datetime,
    prior_verdict: str | None,
    prior_source: str | None,
    fingerprint: str | None,
    retracts: int | None,
    queue_id: int | None,
    origin: str | None,
) -> int:
    rid = con.execute("SELECT nextval('review_seq')").fetchone()[0]  # type: ignore[index]
    con.execute(
        """INSERT INTO reviews (review_id, row_id, action, verdict, picked_letter, note, reviewer, created_at,
                                prior_verdict, prior_source, fingerprint, retracts, queue_id, origin)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [
            rid,
            row_id,
            action,
            verdict,
            picked_letter,
            (note or "").strip() or None,
            reviewer,
            created_at,
            prior_verdict,
            prior_source,
            fingerprint,
            retracts,
            queue_id,
            origin,
        ],
    )
    return int(rid)


def add_review(
    study: Study,
    row_id: str,
    *,
    reviewer: str,
    action: str = OVERRIDE,
    verdict: str | None = None,
    picked_letter: str | None = None,
    note: str | None = None,
    queue_id: int | None = None,
    origin: str = "dashboard",
) -> int:
    """Append a confirm or override of one row's current verdict; returns the new review_id.

    ``confirm`` keeps the current final verdict (and its picked letter); ``override`` sets ``verdict``
    (CORRECT / INCORRECT / OTHER) with an optional picked letter. An override that keeps the row's verdict
    and letter (:func:`mcqaudit.review.rules.decision_action`, read against the row as this write finds it)
    is recorded as the confirm it is.
    """
    who = _reviewer(reviewer)
    if action not in (CONFIRM, OVERRIDE):
        raise ReviewError(f"action must be confirm or override, not {action!r}")
    with _writing(study, "nothing was saved") as con:
        st = _row_state(con, row_id)
        if action == OVERRIDE:
            verdict, _ = check_verdict(verdict, picked_letter, st.gold_letter, st.n_options)
            picked_letter = (picked_letter or "").strip().upper() or None
            action = decision_action(verdict, picked_letter, st.final_verdict, st.picked_letter)
        if action == CONFIRM:
            if st.final_verdict is None:
                raise ReviewError(
                    "this row has no verdict yet (judge pending or failed): override it instead"
                )
            if verdict not in (None, st.final_verdict):
                raise ReviewError(f"confirm keeps the verdict {st.final_verdict}; use override for {verdict}")
            verdict = st.final_verdict
            if picked_letter is None:
                picked_letter = st.picked_letter
        verdict, letter = check_verdict(verdict, picked_letter, st.gold_letter, st.n_options)
        rid = _insert(
            con,
            row_id=row_id,
            action=action,
            verdict=verdict,
            picked_letter=letter,
            note=note,
            reviewer=who,
            created_at=utcnow(),
            prior_verdict=st.final_verdict,
            prior_source=st.verdict_source,
            fingerprint=st.fingerprint,
            retracts=None,
            queue_id=queue_id,
            origin=origin,
        )
        refresh_effective_reviews(con, ROWS_IN_LIST, [[row_id]])
        return rid


def retract_review(
    study: Study, review_id: int, *, reviewer: str, note: str | None = None, origin: str = "dashboard"
) -> int:
    """Withdraw an earlier confirm/override (appends a ``retract`` review); returns the new review_id."""
    who = _reviewer(reviewer)
    with _writing(study, "nothing was saved") as con:
        rec = con.execute(
            "SELECT row_id, action FROM reviews WHERE review_id = ?", [int(review_id)]
        ).fetchone()
        if rec is None:
            raise ReviewError(f"no review #{review_id}")
        row_id, action = rec
        if action == RETRACT:
            raise ReviewError(f"review #{review_id} is itself a retraction")
        done = con.execute(
            "SELECT review_id FROM reviews WHERE action = 'retract' AND retracts = ?", [int(review_id)]
        ).fetchone()
        if done is not None:
            raise ReviewError(f"review #{review_id} was already retracted by #{done[0]}")
        st = _row_state(con, row_id)
        rid = _insert(
            con,
            row_id=row_id,
            action=RETRACT,
            verdict=None,
            picked_letter=None,
            note=note,
            reviewer=who,
            created_at=utcnow(),
            prior_verdict=st.final_verdict,
            prior_source=st.verdict_source,
            fingerprint=st.fingerprint,
            retracts=int(review_id),
            queue_id=None,
            origin=origin,
        )
        refresh_effective_reviews(con, ROWS_IN_LIST, [[row_id]])
        return rid


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


# --- spot-check queues -------------------------------------------------------------------------------------
# A row is in the "disagreement" stratum when the naive parser or the user's own parser gives a verdict other
# than the final one, in the "other" stratum when its final verdict is OTHER or it has none yet.
_STRATUM = """
CASE WHEN g.final_verdict IS NULL OR g.final_verdict = 'OTHER' THEN 'other'
     WHEN verdict_of(g.naive_letter, g.gold_letter) <> g.final_verdict
       OR (g.user_letter IS NOT NULL AND verdict_of(g.user_letter, g.gold_letter) <> g.final_verdict)
     THEN 'disagreement'
     ELSE 'rest' END"""
STRATA = ("disagreement", "other", "rest")


def allocate(size: int, available: dict[str, int]) -> dict[str, int]:
    """Split ``size`` rows over the strata in equal shares, giving what a small stratum cannot use to the
    others (in the order of :data:`STRATA`)."""
    quota = dict.fromkeys(STRATA, 0)
    left = min(size, sum(available.get(s, 0) for s in STRATA))
    while left > 0:
        open_ = [s for s in STRATA if available.get(s, 0) > quota[s]]
        share, extra = divmod(left, len(open_))
        for k, s in enumerate(open_):
            take = min(share + (1 if k < extra else 0), available[s] - quota[s])
            quota[s] += take
            left -= take
    return quota


@dataclass(frozen=True)
class SpotCheck:
    """A drawn queue. ``size`` is per arm when ``per_arm``, else the queue's total; ``strata`` is the number of
    rows drawn per arm and stratum (stratum ``all`` for a uniform draw), so each arm's share stays visible."""

    queue_id: int
    name: str
    strategy: str
    seed: int
    size: int
    arms: list[str]
    rows: int
    strata: dict[str, dict[str, int]] = field(default_factory=dict)
    per_arm: bool = True

    @property
    def by_arm(self) -> dict[str, int]:
        """Rows drawn per arm, in the order of ``arms``."""
        return {a: sum(self.strata.get(a, {}).values()) for a in self.arms}


def split_total(size: int, available: dict[str, int], order: Sequence[str]) -> dict[str, int]:
    """Split a queue's total ``size`` over arms in proportion to their rows (largest remainder; ties go to the
    arm earlier in ``order``), never more than an arm has."""
    total = sum(available.get(a, 0) for a in order)
    size = min(size, total)
    if total == 0:
        return dict.fromkeys(order, 0)
    exact = {a: size * available.get(a, 0) / total for a in order}
    share = {a: int(exact[a]) for a in order}
    left = size - sum(share.values())
    by_remainder = sorted(order, key=lambda a: (-(exact[a] - share[a]), order.index(a)))
    for a in by_remainder[:left]:
        share[a] += 1
    return share


def _label(strategy: str, size: int, per_arm: bool, seed: int) -> str:
    return f"{strategy} {size}/arm seed {seed}" if per_arm else f"{strategy} {size} total seed {seed}"


def create_spot_check(
    study: Study,
    *,
    size: int,
    per_arm: bool = True,
    seed: int = 0,
    strategy: str = UNIFORM,
    arms: Iterable[str] | None = None,
    name: str | None = None,
    created_by: str | None = None,
) -> SpotCheck:
    """Draw and persist a seeded sample of ``size`` rows per arm (``per_arm``) or in total.

    ``uniform``: every row equally likely (for unbiased judge-agreement figures): per arm, within each arm;
    in total, over the chosen arms' rows together, so each arm's share follows its row count. ``stratified``:
    a third each from rows where a parser disagrees with the verdict, rows that are OTHER or ungraded, and
    the rest (for hunting artifacts); in total, the size is first split over arms in proportion to their rows
    (:func:`split_total`), then over strata inside each arm. The draw orders rows by ``md5(seed:row_id)``, so
    the same seed on the same rows gives the same sample; the queue interleaves arms in a seeded order.
    """
    if strategy not in STRATEGIES:
        raise ReviewError(f"strategy must be uniform or stratified, not {strategy!r}")
    if size < 1:
        raise ReviewError("a spot check needs at least one row" + (" per arm" if per_arm else ""))
    seed, size, per_arm = int(seed), int(size), bool(per_arm)
    with study.write() as con:
        known = [r[0] for r in con.execute("SELECT DISTINCT arm FROM gen_rows ORDER BY arm").fetchall()]
        chosen = list(dict.fromkeys(arms)) if arms else known
        unknown = [a for a in chosen if a not in known]
        if unknown:
            raise ReviewError(f"unknown arm(s): {', '.join(unknown)}")
        if not chosen:
            raise ReviewError("the study has no rows to sample")
        con.execute(
            f"""CREATE OR REPLACE TEMP TABLE mq_cand AS
                SELECT g.row_id, g.arm, {_STRATUM if strategy == STRATIFIED else "'all'"} AS stratum,
                       md5(?::VARCHAR || ':' || g.row_id) AS draw
                FROM graded_rows g WHERE g.arm IN (SELECT unnest(?))""",
            [str(seed), chosen],
        )
        counts = con.execute("SELECT arm, stratum, count(*) FROM mq_cand GROUP BY ALL").fetchall()
        avail: dict[str, dict[str, int]] = {}
        for arm, stratum, n in counts:
            avail.setdefault(arm, {})[stratum] = int(n)
        if per_arm:
            arm_size = dict.fromkeys(chosen, size)
        elif strategy == UNIFORM:
            # the first `size` rows of the whole draw; taking each arm's first k_a rows below gives the same set
            arm_size = dict.fromkeys(chosen, 0)
            arm_size.update(
                (arm, int(n))
                for arm, n in con.execute(
                    "SELECT arm, count(*) FROM (SELECT arm FROM mq_cand ORDER BY draw, row_id LIMIT ?) GROUP BY arm",
                    [size],
                ).fetchall()
            )
        else:
            arm_size = split_total(size, {a: sum(avail.get(a, {}).values()) for a in chosen}, chosen)
        q_arm, q_stratum, q_n = [], [], []
        strata: dict[str, dict[str, int]] = {}
        for arm in chosen:
            a = avail.get(arm, {})
            k = arm_size[arm]
            quota = allocate(k, a) if strategy == STRATIFIED else {"all": min(k, a.get("all", 0))}
            strata[arm] = dict(quota)
            for s, n in quota.items():
                q_arm.append(arm)
                q_stratum.append(s)
                q_n.append(n)
        qid = int(con.execute("SELECT nextval('queue_seq')").fetchone()[0])  # type: ignore[index]
        label = (name or "").strip() or _label(strategy, size, per_arm, seed)
        con.execute(
            """INSERT INTO spot_checks (queue_id, name, strategy, seed, size, arms, created_by, created_at, per_arm)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [qid, label, strategy, seed, size, chosen, created_by, utcnow(), per_arm],
        )
        con.execute(
            """INSERT INTO spot_check_rows
               SELECT ?, (row_number() OVER (ORDER BY md5(?::VARCHAR || ':order:' || row_id)) - 1)::INTEGER, row_id
               FROM (
                   SELECT c.row_id, row_number() OVER (PARTITION BY c.arm, c.stratum ORDER BY c.draw, c.row_id) AS rk,
                          q.n
                   FROM mq_cand c JOIN (SELECT unnest(?) AS arm, unnest(?) AS stratum, unnest(?) AS n) q
                        ON q.arm = c.arm AND q.stratum = c.stratum
               ) WHERE rk <= n""",
            [qid, str(seed), q_arm, q_stratum, q_n],
        )
        got = con.execute("SELECT count(*) FROM spot_check_rows WHERE queue_id = ?", [qid]).fetchone()
        n_rows = int(got[0]) if got else 0
        con.execute("DROP TABLE mq_cand")
    return SpotCheck(qid, label, strategy, seed, size, chosen, n_rows, strata, per_arm)


def _live_queue(con: duckdb.DuckDBPyConnection, queue_id: int) -> None:
    rec = con.execute("SELECT deleted_at FROM spot_checks WHERE queue_id = ?", [int(queue_id)]).fetchone()
    if rec is None:
        raise ReviewError(f"no spot-check queue #{queue_id}")
    if rec[0] is not None:
        raise ReviewError(f"spot-check queue #{queue_id} was deleted")


def rename_spot_check(study: Study, queue_id: int, name: str) -> None:
    """Give a queue a new name (trimmed, non-empty). Its rows and seed do not change."""
    label = (name or "").strip()
    if not label:
        raise ReviewError("a spot-check queue needs a non-empty name")
    with study.write() as con:
        _live_queue(con, queue_id)
        con.execute("UPDATE spot_checks SET name = ? WHERE queue_id = ?", [label, int(queue_id)])


def delete_spot_check(study: Study, queue_id: int, *, deleted_by: str | None = None) -> None:
    """Soft-delete a queue: it is hidden from :func:`spot_checks` and no longer counts as a uniform spot check
    (judge agreement, the parser-disagreement sample); who and when are kept with it. The reviews made while
    working through it are untouched: they are the audit trail, and still count as reviews everywhere."""
    with study.write() as con:
        _live_queue(con, queue_id)
        con.execute(
            "UPDATE spot_checks SET deleted_at = ?, deleted_by = ? WHERE queue_id = ?",
            [utcnow(), (deleted_by or "").strip() or None, int(queue_id)],
        )


def spot_checks(study: Study) -> pd.DataFrame:
    """Every queue that is not deleted, with its progress: rows, and rows with an effective review.

    Columns: queue_id, name, strategy, seed, size, per_arm, arms, created_by, created_at, rows, reviewed.
    """
    return study.query_df(
        """SELECT s.queue_id, s.name, s.strategy, s.seed, s.size, s.per_arm, s.arms, s.created_by, s.created_at,
                  count(r.row_id) AS rows, count(e.row_id) AS reviewed
           FROM spot_checks s
           LEFT JOIN spot_check_rows r USING (queue_id)
           LEFT JOIN effective_reviews e ON e.row_id = r.row_id
           WHERE s.deleted_at IS NULL
           GROUP BY ALL ORDER BY s.queue_id"""
    )


def spot_check_progress(study: Study, queue_id: int | None = None) -> pd.DataFrame:
    """Per queue (not deleted; or only ``queue_id``) and arm: rows drawn and rows with an effective review.

    Columns: queue_id, arm, rows, reviewed; every arm the queue was drawn over appears (with 0 rows when a
    small total left it none), in the queue's arm order.
    """
    return study.query_df(
        """WITH qa AS (
               SELECT s.queue_id, a.arm, a.k
               FROM spot_checks s, unnest(s.arms) WITH ORDINALITY AS a(arm, k)
               WHERE s.deleted_at IS NULL AND (CAST(? AS INTEGER) IS NULL OR s.queue_id = ?)
           )
           SELECT qa.queue_id, qa.arm, count(r.row_id) AS rows, count(e.row_id) AS reviewed
           FROM qa
           LEFT JOIN (spot_check_rows r JOIN gen_rows g USING (row_id))
                  ON r.queue_id = qa.queue_id AND g.arm = qa.arm
           LEFT JOIN effective_reviews e ON e.row_id = r.row_id
           GROUP BY qa.queue_id, qa.arm, qa.k ORDER BY qa.queue_id, qa.k""",
        [queue_id, queue_id],
    )


def queue_row_ids(study: Study, queue_id: int) -> list[str]:
    """The row_ids of a queue in queue order (a deleted queue's too: its rows are kept)."""
    with study.connect() as con:
        if con.execute("SELECT 1 FROM spot_checks WHERE queue_id = ?", [int(queue_id)]).fetchone() is None:
            raise ReviewError(f"no spot-check queue #{queue_id}")
        return [
            r[0]
            for r in con.execute(
                "SELECT row_id FROM spot_check_rows WHERE queue_id = ? ORDER BY position", [int(queue_id)]
            ).fetchall()
        ]


# --- the review log ----------------------------------------------------------------------------------------
def review_log(study: Study) -> pd.DataFrame:
    """Every review ever recorded (retractions included), oldest first, columns :data:`LOG_COLUMNS`."""
    return study.query_df(
        """SELECT r.review_id, r.row_id, g.arm, g.item_id, g.orientation, g.sample, r.action, r.verdict,
                  r.picked_letter, r.note, r.reviewer, r.created_at, r.prior_verdict, r.prior_source,
                  r.fingerprint, r.retracts, r.queue_id, r.origin
           FROM reviews r LEFT JOIN gen_rows g USING (row_id)
           ORDER BY r.created_at, r.review_id"""
    )


def _iso(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v) or v is pd.NaT:
        return ""
    if isinstance(v, datetime | pd.Timestamp):
        t = v if v.tzinfo else v.replace(tzinfo=UTC)
        return t.astimezone(UTC).isoformat()
    return str(v)


def queue_log(study: Study) -> pd.DataFrame:
    """One line per row of every spot-check queue that is not deleted, in queue order, as the review log
    carries them (action :data:`QUEUE`; columns :data:`EXPORT_COLUMNS`): the row (row_id, arm, item_id,
    orientation, sample), the queue's id in this study, who drew it and when (reviewer, created_at), and its
    definition (queue_name, queue_strategy, queue_seed, queue_size, queue_per_arm, queue_arms as a JSON
    array, queue_position)."""
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


# A cell that a spreadsheet would run as a formula (OWASP "CSV injection"): one that starts with = + - @, a
# tab or a carriage return. The CSV export prefixes such a cell with a single quote, which spreadsheets show
# as text; so that the import can undo exactly that, a cell that starts with quotes followed by one of those
# characters gets one more quote too (the import removes one quote from every cell of that shape).
FORMULA_CELL = r"^'*[=+\-@\t\r]"  # Python's re and DuckDB's RE2 read it alike (store/rows.py export_rows)
_FORMULA = re.compile(FORMULA_CELL)


def neutralise_cell(text: str) -> str:
    """A CSV cell that no spreadsheet runs as a formula; :func:`restore_cell` undoes it."""
    return "'" + text if _FORMULA.match(text) else text


def restore_cell(text: str) -> str:
    """The cell :func:`neutralise_cell` was given."""
    return text[1:] if text.startswith("'") and _FORMULA.match(text) else text


def review_log_csv(study: Study) -> str:
    """The review log as CSV text (UTC ISO-8601 times; empty cell = no value): every review (columns
    :data:`LOG_COLUMNS`), then one line per row of each spot-check queue (action ``queue``, with the
    :data:`QUEUE_COLUMNS`), so that importing it into a copy of the study recreates the queues. Cells that a
    spreadsheet would run as a formula are neutralised (:func:`neutralise_cell`); the import restores them."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(EXPORT_COLUMNS)
    for df, columns in ((review_log(study), LOG_COLUMNS), (queue_log(study), EXPORT_COLUMNS)):
        for rec in df.itertuples(index=False):
            cells = [
                "" if pd.isna(v) else _iso(v) if c == "created_at" else str(v)
                for c, v in zip(columns, rec, strict=True)
            ]
            cells += [""] * (len(EXPORT_COLUMNS) - len(cells))
            w.writerow([neutralise_cell(v) for v in cells])
    return buf.getvalue()


@dataclass
class ImportResult:
    added: int = 0
    already_present: int = 0
    lines: int = 0
    confirms: int = 0  # of the added reviews
    overrides: int = 0
    retractions: int = 0
    queues_added: int = 0  # spot-check queues the log carried that the study lacked
    queues_present: int = 0  # ... and that it had already


ROW_KEY = ("arm", "item_id", "orientation", "sample")
LABEL_COLUMNS = ["row_id", *ROW_KEY, "verdict", "picked_letter", "reviewer", "note", "reviewed_at"]


def _read_log(path: Path) -> tuple[list[tuple[int, dict[str, str]]], set[str], bool]:
    """(line number, record) pairs with every value a string ("" for none), the columns the file has, and
    whether it is CSV (which has a header line)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReviewImportError([f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from None
    except OSError as exc:
        raise ReviewImportError([f"{path}: cannot read the file: {exc.strerror or exc}"]) from None
    out: list[tuple[int, dict[str, str]]] = []
    if path.suffix.lower() in (".jsonl", ".ndjson", ".json") or text.lstrip().startswith("{"):
        cols: set[str] = set()
        for k, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ReviewImportError([f"{path}:{k}: not a JSON object ({exc.msg})"]) from None
            if not isinstance(obj, dict):
                raise ReviewImportError([f"{path}:{k}: not a JSON object"])
            cols.update(obj)
            out.append((k, {str(key): _text(v) for key, v in obj.items()}))
        return out, cols, False
    try:
        reader = csv.DictReader(io.StringIO(text))
        header = set(reader.fieldnames or [])
        last = 1
        for rec in reader:
            start = last + 1  # a quoted field may span lines: the record starts after the previous one ended
            last = reader.line_num
            # undo the export's formula neutralisation (review_log_csv), cell by cell
            out.append((start, {k: restore_cell(v or "") for k, v in rec.items() if k is not None}))
    except csv.Error as exc:
        raise ReviewImportError([f"{path}:{reader.line_num}: not readable as CSV ({exc})"]) from None
    return out, header, True


def _text(v: Any) -> str:
    """A JSONL value as the text a CSV cell would hold ("" for none; arrays and objects as JSON)."""
    if v is None:
        return ""
    if isinstance(v, list | dict):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _parse_time(s: str) -> datetime:
    t = datetime.fromisoformat(s.strip().replace("Z", "+00:00"))
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).astimezone(UTC)


@dataclass
class _Row:
    """What an import needs of one row: its identity, legal letters, and its current verdict (kept up to date
    as the import records reviews, so that a later label of the same row compares with the newer verdict)."""

    row_id: str
    key: tuple[str, str, str, int]
    gold: str
    n_options: int
    final_verdict: str | None
    verdict_source: str | None
    picked_letter: str | None
    fingerprint: str | None
    reviewed_at: datetime | None

    def reviewed(self, verdict: str, letter: str | None, at: datetime) -> None:
        # the effective review is the latest by time, then review_id (schema migration 2): a new one wins ties
        if self.reviewed_at is None or at >= self.reviewed_at:
            self.final_verdict, self.verdict_source, self.picked_letter = verdict, "review", letter
            self.reviewed_at = at


def _row_key(r: dict[str, str]) -> tuple[str, str, str, int] | None:
    """(arm, item_id, orientation, sample) of a record that names its row so; None when incomplete or the
    sample is not an integer."""
    arm, item, orient, sample = (r.get(k, "").strip() for k in ROW_KEY)
    if not (arm and item and orient) or not sample.lstrip("-").isdigit():
        return None
    return arm, item, orient, int(sample)


def _rows_for(
    con: duckdb.DuckDBPyConnection, ids: list[str], keys: list[tuple[str, str, str, int]]
) -> dict[str, _Row]:
    rows: dict[str, _Row] = {}
    for rec in con.execute(
        """SELECT g.row_id, g.arm, g.item_id, g.orientation, g.sample, g.gold_letter, len(g.options),
                  g.final_verdict, g.verdict_source, g.picked_letter, g.judge_fingerprint, g.reviewed_at
           FROM graded_rows g
           WHERE g.row_id IN (SELECT unnest(?))
              OR (g.arm, g.item_id, g.orientation, g.sample) IN (
                    SELECT (unnest(?), unnest(?), unnest(?), unnest(?)))""",
        [ids, *([k[i] for k in keys] for i in range(4))],
    ).fetchall():
        rid, arm, item, orient, sample, gold, n, final, source, letter, fp, at = rec
        rows[rid] = _Row(rid, (arm, item, orient, int(sample)), gold, int(n), final, source, letter, fp, at)
    return rows


def _named_row(
    where: str, r: dict[str, str], known: dict[str, _Row], by_key: dict[tuple[str, str, str, int], _Row]
) -> tuple[_Row | None, list[str]]:
    """The study's row a record names (by row_id, or by arm, item_id, orientation, sample), or the problems."""
    errs: list[str] = []
    row: _Row | None = None
    rid = r.get("row_id", "").strip()
    if rid:
        row = known.get(rid)
        if row is None:
            errs.append(f"{where}: row_id: {rid!r} is not a row of this study")
        else:
            for col, have in zip(ROW_KEY, row.key, strict=True):
                given = r.get(col, "").strip()
                if given and given != str(have):
                    errs.append(f"{where}: {col}: {given!r}, but row {rid!r} has {col} {have!r}")
    elif all(r.get(k, "").strip() for k in ROW_KEY):
        key = _row_key(r)
        if key is None:
            errs.append(f"{where}: sample: not an integer: {r['sample'].strip()!r}")
        else:
            row = by_key.get(key)
            if row is None:
                errs.append(
                    f"{where}: {', '.join(ROW_KEY)}: no row of this study is arm {key[0]!r}, "
                    f"item_id {key[1]!r}, orientation {key[2]!r}, sample {key[3]}"
                )
    else:
        lacking = [k for k in ROW_KEY if not r.get(k, "").strip()]
        errs.append(
            f"{where}: row_id: missing, and so is {', '.join(lacking)}: name the row by row_id or by "
            f"{', '.join(ROW_KEY)}"
        )
    return row, errs


@dataclass
class _Queue:
    """A spot-check queue as a review log carries it: its definition and its rows in queue order."""

    name: str
    strategy: str
    seed: int
    size: int
    per_arm: bool
    arms: list[str]
    created_by: str | None
    created_at: datetime
    line: int
    rows: dict[int, str] = field(default_factory=dict)  # position -> row_id

    def definition(self) -> tuple[Any, ...]:
        return (self.name, self.strategy, self.seed, self.size, self.per_arm, tuple(self.arms))


def _parse_queue_lines(
    p: Path,
    lines: list[tuple[int, dict[str, str]]],
    known: dict[str, _Row],
    by_key: dict[tuple[str, str, str, int], _Row],
    problems: list[str],
) -> dict[str, _Queue]:
    """The queues of a review log's ``queue`` lines, by their id in the study that exported them; each
    problem is appended to ``problems`` as "FILE:LINE: field: reason"."""
    queues: dict[str, _Queue] = {}
    for line, r in lines:
        where = f"{p}:{line}"
        row, errs = _named_row(where, r, known, by_key)
        src = r.get("queue_id", "").strip()
        if not src:
            errs.append(f"{where}: queue_id: a queue line names its queue")
        name = r.get("queue_name", "").strip()
        if not name:
            errs.append(f"{where}: queue_name: missing")
        strategy = r.get("queue_strategy", "").strip()
        if strategy not in STRATEGIES:
            errs.append(f"{where}: queue_strategy: must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
        ints: dict[str, int] = {}
        for col in ("queue_seed", "queue_size", "queue_position"):
            raw = r.get(col, "").strip()
            if not raw.lstrip("-").isdigit():
                errs.append(f"{where}: {col}: not an integer: {raw!r}")
            else:
                ints[col] = int(raw)
        per_arm = r.get("queue_per_arm", "").strip().lower()
        if per_arm not in ("true", "false"):
            errs.append(f"{where}: queue_per_arm: must be true or false, not {per_arm!r}")
        try:
            arms = json.loads(r.get("queue_arms", "") or "null")
        except ValueError:
            arms = None
        if not (isinstance(arms, list) and all(isinstance(a, str) for a in arms)):
            errs.append(f"{where}: queue_arms: not a JSON array of arm names")
        try:
            created = _parse_time(r.get("created_at", ""))
        except ValueError:
            errs.append(f"{where}: created_at: not an ISO-8601 time: {r.get('created_at', '')!r}")
        if errs:
            problems += errs
            continue
        assert row is not None
        q = _Queue(name, strategy, ints["queue_seed"], ints["queue_size"], per_arm == "true", arms,
                   r.get("reviewer", "").strip() or None, created, line)  # fmt: skip
        have = queues.setdefault(src, q)
        if have.definition() != q.definition():
            problems.append(f"{where}: queue_id: queue {src} is defined otherwise on line {have.line}")
        elif ints["queue_position"] in have.rows:
            problems.append(
                f"{where}: queue_position: queue {src} has position {ints['queue_position']} twice"
            )
        else:
            have.rows[ints["queue_position"]] = row.row_id
    return queues


def _recreate_queues(con: duckdb.DuckDBPyConnection, queues: dict[str, _Queue]) -> tuple[dict[str, int], int]:
    """Give each queue of a log its id in this study: the queue this study already has with the same strategy,
    seed and rows in the same order (deleted or not, so an import never brings back a queue someone deleted),
    else a new one with the log's name, seed, size, arms, author and time. Returns (log id -> id here, how
    many were new)."""
    have: dict[tuple[Any, ...], int] = {}
    for qid, strategy, seed, rows in con.execute(
        """SELECT s.queue_id, s.strategy, s.seed, list(r.row_id ORDER BY r.position)
           FROM spot_checks s JOIN spot_check_rows r USING (queue_id) GROUP BY ALL ORDER BY s.queue_id"""
    ).fetchall():
        have.setdefault((strategy, int(seed), tuple(rows)), int(qid))
    ids: dict[str, int] = {}
    added = 0
    for src, q in queues.items():
        rows = [q.rows[k] for k in sorted(q.rows)]
        key = (q.strategy, q.seed, tuple(rows))
        if key not in have:
            qid = int(con.execute("SELECT nextval('queue_seq')").fetchone()[0])  # type: ignore[index]
            con.execute(
                """INSERT INTO spot_checks (queue_id, name, strategy, seed, size, arms, created_by, created_at,
                                            per_arm) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [qid, q.name, q.strategy, q.seed, q.size, q.arms, q.created_by, q.created_at, q.per_arm],
            )
            con.execute(
                "INSERT INTO spot_check_rows SELECT ?, (k - 1)::INTEGER, row_id FROM unnest(?) WITH ORDINALITY AS t(row_id, k)",
                [qid, rows],
            )
            have[key] = qid
            added += 1
        ids[src] = have[key]
    return ids, added


def _check_letters(
    where: str, verdict: str | None, letter: str | None, row: _Row
) -> tuple[tuple[str, str | None] | None, str | None]:
    """check_verdict, with its complaint filed under the field it is about."""
    try:
        return check_verdict(verdict, letter, row.gold, row.n_options), None
    except ReviewError as exc:
        field_ = "verdict" if verdict not in VERDICTS else "picked_letter"
        return None, f"{where}: {field_}: {exc}"


def import_review_log(
    study: Study, path: str | Path, *, origin: str | None = None, reviewer: str | None = None
) -> ImportResult:
    """Append the reviews of a review log or a label file that the study does not have yet.

    A record with an ``action`` is a review-log record (the columns of :data:`LOG_COLUMNS`, as ``reviews
    export`` writes them), known by (row_id, action, reviewer, created_at). A record without one is a *label*
    (:data:`LABEL_COLUMNS`: a person's verdict from elsewhere): it is recorded as ``confirm`` when it agrees
    with the row's current final verdict (and picked letter, when it names one), else as ``override``, with
    the row's current verdict, source and judge fingerprint as the prior; ``reviewed_at`` (ISO-8601) is its
    time, else the time of the import. A row is named by ``row_id`` or by (arm, item_id, orientation, sample).
    ``reviewer`` names the reviewer of records that have none.

    Idempotent: a timed label is known by (row_id, reviewer, time) among the study's confirms and overrides; an
    untimed one by (row_id, reviewer, verdict, note, picked letter when given) among the confirms and
    overrides earlier imports recorded, retracted ones included, so re-importing a file never brings back a
    review that someone withdrew. A file with any problem is refused whole (:class:`ReviewImportError`, each
    problem as "FILE:LINE: field: reason") and nothing of it is written.
    """
    p = Path(path)
    if not p.exists():
        raise ReviewImportError([f"{p}: no such file"])
    if p.is_dir():
        raise ReviewImportError([f"{p}: is a folder, not a review log"])
    records, cols, is_csv = _read_log(p)
    origin = origin or f"import:{p.name}"
    default_reviewer = (reviewer or "").strip()
    head: list[str] = []
    if is_csv and "row_id" not in cols and not set(ROW_KEY) <= cols:
        head.append(f"{p}:1: header: no row_id column (nor all of {', '.join(ROW_KEY)}) to name the rows")
    if is_csv and "action" not in cols and "verdict" not in cols:
        head.append(f"{p}:1: header: no verdict column")
    if records and "reviewer" not in cols and not default_reviewer:
        head.append(
            f"{p}:1: reviewer: the file has no reviewer column; name the reviewer with --reviewer NAME"
        )
    if head:
        raise ReviewImportError(head)
    now = utcnow()
    problems: list[str] = []
    with _writing(study, "nothing was imported") as con:
        ids = sorted({r.get("row_id", "").strip() for _, r in records} - {""})
        keys = [
            key for _, r in records if not r.get("row_id", "").strip() and (key := _row_key(r)) is not None
        ]
        known = _rows_for(con, ids, keys)
        by_key = {row.key: row for row in known.values()}
        existing: dict[tuple[Any, ...], int] = {}
        untimed: dict[tuple[Any, ...], list[tuple[str | None, int]]] = {}
        for review_id, rid, action, who, t, verdict, letter, note, from_import in con.execute(
            """SELECT review_id, row_id, action, reviewer, created_at, verdict, picked_letter, note,
                      starts_with(coalesce(origin, ''), 'import:')
               FROM reviews WHERE row_id IN (SELECT unnest(?))""",
            [sorted(known)],
        ).fetchall():
            at = t.astimezone(UTC)
            existing[("log", rid, action, who, at)] = int(review_id)
            if action != RETRACT:
                existing.setdefault(("label", rid, who, at), int(review_id))
                if from_import:
                    untimed.setdefault((rid, who, verdict, note), []).append((letter, int(review_id)))

        parsed: list[dict[str, Any]] = []
        by_source_id: dict[str, tuple[Any, ...]] = {}
        queue_lines = [(line, r) for line, r in records if r.get("action", "").strip().lower() == QUEUE]
        records = [(line, r) for line, r in records if r.get("action", "").strip().lower() != QUEUE]
        queues = _parse_queue_lines(p, queue_lines, known, by_key, problems)
        for line, r in records:
            where = f"{p}:{line}"
            row, errs = _named_row(where, r, known, by_key)
            action = r.get("action", "").strip().lower()
            if action and action not in ACTIONS:
                errs.append(f"{where}: action: must be one of {', '.join(ACTIONS)}, not {action!r}")
            who = r.get("reviewer", "").strip() or default_reviewer
            if not who:
                errs.append(f"{where}: reviewer: missing (or name one for the whole file with --reviewer)")
            time_field = "created_at" if r.get("created_at", "").strip() or action else "reviewed_at"
            raw_time = r.get(time_field, "").strip() or r.get("reviewed_at", "").strip()
            created: datetime | None = None
            if raw_time or action:
                try:
                    created = _parse_time(raw_time)
                except ValueError:
                    errs.append(f"{where}: {time_field}: not an ISO-8601 time: {raw_time!r}")
            verdict = r.get("verdict", "").strip().upper() or None
            letter = r.get("picked_letter", "").strip().upper() or None
            retracts = r.get("retracts", "").strip()
            if not action and verdict is None:
                errs.append(f"{where}: verdict: missing (one of {', '.join(VERDICTS)})")
            elif action != RETRACT and row is not None:
                checked, problem = _check_letters(where, verdict, letter, row)
                if problem:
                    errs.append(problem)
                elif checked:
                    verdict, letter = checked
            if action == RETRACT and not retracts:
                errs.append(f"{where}: retracts: a retraction names the review_id it withdraws")
            if errs:
                problems += errs
                continue
            assert row is not None
            note = (r.get("note") or "").strip() or None
            if action:
                assert created is not None
                key_: tuple[Any, ...] = ("log", row.row_id, action, who, created)
            elif created is not None:
                key_ = ("label", row.row_id, who, created)
            else:
                key_ = ("untimed", row.row_id, who, verdict, note, letter)
            src = r.get("review_id", "").strip()
            if src:
                by_source_id[src] = key_
            queue = r.get("queue_id", "").strip()
            parsed.append(
                {
                    "line": line,
                    "key": key_,
                    "row": row,
                    "action": action,
                    "verdict": verdict if action != RETRACT else None,
                    "picked_letter": letter if action != RETRACT else None,
                    "given_letter": r.get("picked_letter", "").strip().upper() or None,
                    "note": note,
                    "reviewer": who,
                    "created_at": created,
                    "prior_verdict": r.get("prior_verdict") or None,
                    "prior_source": r.get("prior_source") or None,
                    "fingerprint": r.get("fingerprint") or None,
                    "retracts_src": retracts or None,
                    "queue_id": queue or None,
                }
            )
        for rec in parsed:
            if rec["retracts_src"] is not None and rec["retracts_src"] not in by_source_id:
                problems.append(
                    f"{p}:{rec['line']}: retracts: review {rec['retracts_src']} is not in this log"
                )
        if problems:
            raise ReviewImportError(problems)
        queue_ids, queues_added = _recreate_queues(con, queues)
        result = ImportResult(
            lines=len(records) + len(queue_lines),
            queues_added=queues_added,
            queues_present=len(queues) - queues_added,
        )
        touched: set[str] = set()
        retracted: list[int] = []
        seen: dict[tuple[Any, ...], int] = dict(existing)
        # targets before retractions, then time order (untimed labels: the import's time, in file order)
        parsed.sort(key=lambda x: (x["action"] == RETRACT, x["created_at"] or now))
        for rec in parsed:
            row = rec["row"]
            key_ = rec["key"]
            if key_[0] == "untimed":
                _, rid, who, verdict, note, given = key_
                match = [i for lt, i in untimed.get((rid, who, verdict, note), []) if given in (None, lt)]
                if match:
                    seen.setdefault(key_, match[0])
            if key_ in seen:
                result.already_present += 1
                continue
            at = rec["created_at"] or now
            action, verdict, letter = rec["action"], rec["verdict"], rec["picked_letter"]
            prior = (rec["prior_verdict"], rec["prior_source"], rec["fingerprint"])
            if not action:
                action = decision_action(verdict, rec["given_letter"], row.final_verdict, row.picked_letter)
                if action == CONFIRM and rec["given_letter"] is None:
                    letter = row.picked_letter if verdict != CORRECT else letter
                prior = (row.final_verdict, row.verdict_source, row.fingerprint)
            target = None
            if rec["retracts_src"] is not None:
                target = seen.get(by_source_id[rec["retracts_src"]])
                if target is None:
                    raise ReviewImportError(
                        [f"{p}:{rec['line']}: retracts: review {rec['retracts_src']} could not be matched"]
                    )
            new_id = _insert(
                con,
                row_id=row.row_id,
                action=action,
                verdict=verdict,
                picked_letter=letter,
                note=rec["note"],
                reviewer=rec["reviewer"],
                created_at=at,
                prior_verdict=prior[0],
                prior_source=prior[1],
                fingerprint=prior[2],
                retracts=target,
                queue_id=queue_ids.get(rec["queue_id"]) if rec["queue_id"] else None,  # its id in this study
                origin=origin,
            )
            seen[key_] = new_id
            touched.add(row.row_id)
            if target is not None:
                retracted.append(int(target))
            if key_[0] == "untimed":
                untimed.setdefault(key_[1:5], []).append((letter, new_id))
            if action != RETRACT:
                row.reviewed(verdict, letter, at)
            result.added += 1
            if action == CONFIRM:
                result.confirms += 1
            elif action == OVERRIDE:
                result.overrides += 1
            else:
                result.retractions += 1
        if retracted:  # a log's retraction may name a review of another row: re-derive that row too
            touched.update(
                r[0]
                for r in con.execute(
                    "SELECT row_id FROM reviews WHERE review_id IN (SELECT unnest(?::BIGINT[]))", [retracted]
                ).fetchall()
            )
        if touched:
            refresh_effective_reviews(con, ROWS_IN_LIST, [sorted(touched)])
    return result
