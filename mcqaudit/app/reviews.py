"""The reviews use case (docs/design.md §6, §8): record and retract reviews, draw and manage spot-check
queues, export the review log (CSV, or into an Inspect log) and import one.

Each function takes a study (a path or an open :class:`~mcqaudit.store.db.Study`; a write opens it through
:func:`mcqaudit.app.study.open_study`) and owns its transaction: one short write each, so two review sessions
and a ``grade`` run can share a file. What is legal and what a decision is recorded as is
:mod:`mcqaudit.review.rules`; a draw's allocation is :mod:`mcqaudit.review.queues`; reading a log is
:mod:`mcqaudit.review.log`; the SQL is :mod:`mcqaudit.store.reviews`. The CLI's ``reviews`` commands and the
dashboard's Review and Export pages call this module.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcqaudit.app.info import refresh, reviews_changing
from mcqaudit.app.study import open_study
from mcqaudit.review.log import (
    EXPORT_COLUMNS,
    LOG_COLUMNS,
    CheckedLog,
    LogReview,
    LogRow,
    Matches,
    ReviewImportError,
    check_log,
    header_problems,
    is_jsonl,
    log_csv,
    named_rows,
    parse_log_text,
)
from mcqaudit.review.queues import (
    EQUAL_CHANCE,
    JUDGES_DISAGREE,
    SECOND_REVIEW,
    STRATEGIES,
    UNIFORM,
    SpotCheck,
    arm_sizes,
    check_draw,
    choose_arms,
    no_first_review,
    no_judge_disagreement,
    no_panel_judge,
    quotas,
)
from mcqaudit.review.queues import queue_label as _queue_label
from mcqaudit.review.rules import (
    CONFIRM,
    OVERRIDE,
    RETRACT,
    NewReview,
    ReviewError,
    decide,
    label_decision,
    reviewer_name,
)
from mcqaudit.store import reviews as sql
from mcqaudit.store.db import Study, StudyError, utcnow

if TYPE_CHECKING:
    import pandas as pd

    from mcqaudit.inspect_edits import InspectExport

__all__ = [
    "CONFIRM",
    "JUDGES_DISAGREE",
    "OVERRIDE",
    "RETRACT",
    "SECOND_REVIEW",
    "STRATEGIES",
    "ImportResult",
    "ReviewError",
    "ReviewImportError",
    "SpotCheck",
    "StudyError",
    "add_review",
    "create_spot_check",
    "delete_spot_check",
    "export_to_inspect",
    "import_review_log",
    "queue_row_ids",
    "rename_spot_check",
    "retract_review",
    "review_counts",
    "review_history",
    "review_log",
    "first_reviewers",
    "review_log_csv",
    "spot_check_progress",
    "spot_checks",
]

StudyLike = str | Path | Study


# --- reviews -----------------------------------------------------------------------------------------------
def add_review(
    study: StudyLike,
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
    and letter (:func:`mcqaudit.review.rules.decide`, read against the row as this write finds it) is
    recorded as the confirm it is.
    """
    who = reviewer_name(reviewer)
    if action not in (CONFIRM, OVERRIDE):
        raise ReviewError(f"action must be confirm or override, not {action!r}")
    s = open_study(study)
    with sql.writing(s, "nothing was saved") as con:
        row = sql.row_state(con, row_id)
        d = decide(action, verdict, picked_letter, row)
        rid = sql.insert_review(
            con,
            NewReview(row_id, d.action, d.verdict, d.picked_letter, note, who, utcnow(), row.final_verdict,
                      row.verdict_source, row.fingerprint, None, queue_id, origin),
        )  # fmt: skip
        with reviews_changing(s, con, [row_id]):  # info's cache follows the review
            sql.refresh(con, [row_id])
        return rid


def retract_review(
    study: StudyLike, review_id: int, *, reviewer: str, note: str | None = None, origin: str = "dashboard"
) -> int:
    """Withdraw an earlier confirm/override (appends a ``retract`` review); returns the new review_id."""
    who = reviewer_name(reviewer)
    s = open_study(study)
    with sql.writing(s, "nothing was saved") as con:
        target = sql.review_target(con, review_id)
        if target is None:
            raise ReviewError(f"no review #{review_id}")
        row_id, action = target
        if action == RETRACT:
            raise ReviewError(f"review #{review_id} is itself a retraction")
        done = sql.retraction_of(con, review_id)
        if done is not None:
            raise ReviewError(f"review #{review_id} was already retracted by #{done}")
        row = sql.row_state(con, row_id)
        rid = sql.insert_review(
            con,
            NewReview(row_id, RETRACT, None, None, note, who, utcnow(), row.final_verdict, row.verdict_source,
                      row.fingerprint, int(review_id), None, origin),
        )  # fmt: skip
        with reviews_changing(s, con, [row_id]):  # info's cache follows the review
            sql.refresh(con, [row_id])
        return rid


def review_history(study: StudyLike, row_id: str) -> pd.DataFrame:
    """Every review of a row, oldest first, with ``status``: effective, superseded, retracted or retraction."""
    return sql.review_history(open_study(study), row_id)


def review_counts(study: StudyLike) -> dict[str, int]:
    """Reviews recorded (all actions), rows with an effective review, and reviewers."""
    return sql.review_counts(open_study(study))


def first_reviewers(study: StudyLike) -> dict[str, int]:
    """Each reviewer with rows that they alone have reviewed (what a second review of their rows draws from),
    and how many, most first."""
    with open_study(study).connect() as con:
        return sql.sole_reviewer_rows(con)


# --- spot-check queues -------------------------------------------------------------------------------------
def create_spot_check(
    study: StudyLike,
    *,
    size: int,
    per_arm: bool = True,
    seed: int = 0,
    strategy: str = UNIFORM,
    arms: Iterable[str] | None = None,
    name: str | None = None,
    created_by: str | None = None,
    of_reviewer: str | None = None,
    of_queue: int | None = None,
) -> SpotCheck:
    """Draw and persist a seeded sample of ``size`` rows per arm (``per_arm``) or in total.

    ``uniform``: every row equally likely (for unbiased judge-agreement figures): per arm, within each arm;
    in total, over the chosen arms' rows together, so each arm's share follows its row count. ``stratified``:
    a third each from rows where a parser disagrees with the verdict, rows that are OTHER or ungraded, and
    the rest (for hunting artifacts); in total, the size is first split over arms in proportion to their rows
    (:func:`~mcqaudit.review.queues.split_total`), then over strata inside each arm. ``judges_disagree``: as
    uniform, over the rows where the primary judge's and a panel judge's verdicts differ. ``second_review``:
    as uniform, over the rows one person alone has reviewed (``of_reviewer``, when given; rows of queue
    ``of_queue``, when given), for a second reviewer: in its queue a row is reviewed once two people have
    reviewed it. A strategy with nothing to draw from says why (:class:`ReviewError`). The draw orders rows
    by ``md5(seed:row_id)``, so the same seed on the same rows gives the same sample; the queue interleaves
    arms in a seeded order.
    """
    of_reviewer = (of_reviewer or "").strip() or None
    check_draw(strategy, size, per_arm, of_reviewer, of_queue)
    seed, size, per_arm = int(seed), int(size), bool(per_arm)
    s = open_study(study)
    with s.write() as con:
        chosen = choose_arms(arms, sql.study_arms(con))
        if of_queue is not None:
            sql.live_queue(con, int(of_queue))
        if strategy == JUDGES_DISAGREE and not sql.panel_judge_count(con):
            raise ReviewError(no_panel_judge())
        avail = sql.stage_candidates(con, strategy, seed, chosen, of_reviewer=of_reviewer, of_queue=of_queue)
        if not any(sum(by.values()) for by in avail.values()):
            _nothing_to_draw(con, strategy, chosen, of_reviewer, of_queue)
        first = sql.first_candidates_by_arm(con, size) if not per_arm and strategy in EQUAL_CHANCE else None
        sizes = arm_sizes(strategy, size, per_arm, chosen, avail, first)
        strata = quotas(strategy, sizes, chosen, avail)
        label = (name or "").strip() or _queue_label(strategy, size, per_arm, seed, of_reviewer, of_queue)
        qid = sql.insert_queue(con, name=label, strategy=strategy, seed=seed, size=size, arms=chosen,
                               created_by=created_by, created_at=utcnow(), per_arm=per_arm)  # fmt: skip
        n_rows = sql.insert_drawn_rows(con, qid, seed, strata)
    return SpotCheck(qid, label, strategy, seed, size, chosen, n_rows, strata, per_arm, of_reviewer, of_queue)


def _nothing_to_draw(
    con: sql.Connection, strategy: str, arms: list[str], of_reviewer: str | None, of_queue: int | None
) -> None:
    """Raise :class:`ReviewError` saying why a judges_disagree or second_review draw has no row to draw from
    (a uniform or stratified draw of a study's rows always has some)."""
    if strategy == JUDGES_DISAGREE:
        raise ReviewError(no_judge_disagreement(sql.both_judged_count(con, arms), arms))
    if strategy == SECOND_REVIEW:
        raise ReviewError(no_first_review(sql.sole_reviewer_rows(con), arms, of_reviewer, of_queue))


def rename_spot_check(study: StudyLike, queue_id: int, name: str) -> None:
    """Give a queue a new name (trimmed, non-empty). Its rows and seed do not change."""
    label = (name or "").strip()
    if not label:
        raise ReviewError("a spot-check queue needs a non-empty name")
    with open_study(study).write() as con:
        sql.live_queue(con, queue_id)
        sql.set_queue_name(con, queue_id, label)


def delete_spot_check(study: StudyLike, queue_id: int, *, deleted_by: str | None = None) -> None:
    """Soft-delete a queue: it is hidden from :func:`spot_checks` and no longer counts as a uniform spot check
    (judge agreement, the parser-disagreement sample); who and when are kept with it. The reviews made while
    working through it are untouched: they are the audit trail, and still count as reviews everywhere."""
    with open_study(study).write() as con:
        sql.live_queue(con, queue_id)
        sql.mark_queue_deleted(con, queue_id, utcnow(), (deleted_by or "").strip() or None)


def spot_checks(study: StudyLike) -> pd.DataFrame:
    """Every queue that is not deleted, with its progress (:func:`mcqaudit.store.reviews.spot_checks`)."""
    return sql.spot_checks(open_study(study))


def spot_check_progress(study: StudyLike, queue_id: int | None = None) -> pd.DataFrame:
    """Per queue and arm: rows drawn and rows reviewed (:func:`mcqaudit.store.reviews.spot_check_progress`)."""
    return sql.spot_check_progress(open_study(study), queue_id)


def queue_listing(study: StudyLike) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(every queue not deleted, each queue's progress per arm) as lists of dicts: what `reviews queues` lists,
    read without pandas (a command line listing: 0.6 s with it at 1 M rows, most of it importing pandas)."""
    s = open_study(study)
    return sql.spot_check_records(s), sql.spot_check_progress_records(s)


def queue_row_ids(study: StudyLike, queue_id: int) -> list[str]:
    """The row_ids of a queue in queue order (a deleted queue's too: its rows are kept)."""
    return sql.queue_row_ids(open_study(study), queue_id)


# --- the review log: export --------------------------------------------------------------------------------
def review_log(study: StudyLike) -> pd.DataFrame:
    """Every review ever recorded (retractions included), oldest first, columns :data:`LOG_COLUMNS`."""
    return sql.review_log(open_study(study))


def _iso(v: object) -> str:
    """A time as UTC ISO-8601 (a time without a zone is UTC)."""
    if isinstance(v, datetime):  # pd.Timestamp is a datetime
        t = v if v.tzinfo else v.replace(tzinfo=UTC)
        return t.astimezone(UTC).isoformat()
    return str(v)


def _cell(column: str, v: object) -> str:
    """A log cell as text: "" for no value, ``created_at`` in UTC ISO-8601."""
    import pandas as pd  # (the log export reads a frame; the rest of this module needs no pandas)

    if pd.isna(v):
        return ""
    return _iso(v) if column == "created_at" else str(v)


def review_log_csv(study: StudyLike) -> str:
    """The review log as CSV text (UTC ISO-8601 times; empty cell = no value): every review (columns
    :data:`LOG_COLUMNS`), then one line per row of each spot-check queue (action ``queue``, with the queue
    columns), so that importing it into a copy of the study recreates the queues. Cells that a spreadsheet
    would run as a formula are neutralised (:func:`~mcqaudit.review.log.neutralise_cell`); the import
    restores them."""
    return review_log_file(study).text


@dataclass(frozen=True)
class ReviewLog:
    """The review log's CSV text (:func:`review_log_csv`) and what it holds: reviews, and spot-check queues
    with their rows (a note may span lines, and a queue's rows are lines too: its lines count neither)."""

    text: str
    reviews: int
    queues: int
    queue_rows: int


def review_log_file(study: StudyLike) -> ReviewLog:
    """:func:`review_log_csv`, with its counts."""
    s = open_study(study)
    lines: list[list[str]] = []
    reviews, queued = sql.review_log(s), sql.queue_log(s)
    for df, columns in ((reviews, LOG_COLUMNS), (queued, EXPORT_COLUMNS)):
        for rec in df.itertuples(index=False):
            lines.append([_cell(c, v) for c, v in zip(columns, rec, strict=True)])
    queues = int(queued["queue_id"].nunique()) if len(queued) else 0
    return ReviewLog(log_csv(lines), len(reviews), queues, len(queued))


def export_to_inspect(
    study: StudyLike, log_path: Path, out_path: Path, *, arm: str | None = None
) -> InspectExport:
    """Write a copy of the Inspect log ``log_path`` to ``out_path`` with every review of its rows as a score
    edit (:mod:`mcqaudit.inspect_edits`); the rows and their reviews are gathered here from the study."""
    from mcqaudit import inspect_edits
    from mcqaudit.store.corrections import logged_reviews, rows_for_samples

    s = open_study(study)
    log = inspect_edits.read_samples(log_path, out_path)
    rows = rows_for_samples(s, list(log.samples))
    return inspect_edits.write_corrections(log, rows, logged_reviews(s), arm=arm)


# --- the review log: import --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImportResult:
    """What an import did: reviews added (by kind) and already present, lines read, queues recreated."""

    added: int = 0
    already_present: int = 0
    lines: int = 0
    confirms: int = 0  # of the added reviews
    overrides: int = 0
    retractions: int = 0
    queues_added: int = 0  # spot-check queues the log carried that the study lacked
    queues_present: int = 0  # ... and that it had already


def _read_text(p: Path) -> str:
    """A log file's text, or one problem line."""
    if not p.exists():
        raise ReviewImportError([f"{p}: no such file"])
    if p.is_dir():
        raise ReviewImportError([f"{p}: is a folder, not a review log"])
    try:
        return p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReviewImportError([f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from None
    except OSError as exc:
        raise ReviewImportError([f"{p}: cannot read the file: {exc.strerror or exc}"]) from None


def _recreate_queues(con: sql.Connection, log: CheckedLog) -> tuple[dict[str, int], int]:
    """Give each queue of a log its id in this study: the queue this study already has with the same strategy,
    seed and rows in the same order (deleted or not, so an import never brings back a queue someone deleted),
    else a new one with the log's name, seed, size, arms, author and time. Returns (log id -> id here, how
    many were new)."""
    have = sql.queue_identities(con)
    ids: dict[str, int] = {}
    added = 0
    for src, q in log.queues.items():
        key = (q.strategy, q.seed, q.rows)
        if key not in have:
            have[key] = sql.insert_log_queue(con, q)
            added += 1
        ids[src] = have[key]
    return ids, added


@dataclass
class _Tally:
    added: int = 0
    already_present: int = 0
    confirms: int = 0
    overrides: int = 0
    retractions: int = 0

    def count(self, action: str) -> None:
        self.added += 1
        if action == CONFIRM:
            self.confirms += 1
        elif action == OVERRIDE:
            self.overrides += 1
        else:
            self.retractions += 1


def _new_review(
    rec: LogReview, row: LogRow, at: datetime, retracts: int | None, queue_id: int | None, origin: str
) -> NewReview:
    """What a log record is recorded as: a log record as it was; a label as a confirm or override of the row
    as it is now (:func:`~mcqaudit.review.rules.label_decision`), with the row's verdict as its prior."""
    if rec.action:
        return NewReview(rec.row_id, rec.action, rec.verdict, rec.picked_letter, rec.note, rec.reviewer, at,
                         rec.prior_verdict, rec.prior_source, rec.fingerprint, retracts, queue_id, origin)  # fmt: skip
    assert rec.verdict is not None
    d = label_decision(rec.verdict, rec.picked_letter, rec.given_letter, row)
    return NewReview(rec.row_id, d.action, d.verdict, d.picked_letter, rec.note, rec.reviewer, at,
                     row.final_verdict, row.verdict_source, row.fingerprint, retracts, queue_id, origin)  # fmt: skip


def _write_reviews(
    con: sql.Connection,
    log: CheckedLog,
    rows: dict[str, LogRow],
    queue_ids: dict[str, int],
    *,
    source: str,
    origin: str,
    now: datetime,
) -> _Tally:
    """Append the log's reviews the study lacks: targets before retractions, then in time order (untimed
    labels at the import's time, in file order); each label compares with its row as the import left it."""
    matches = Matches.of(sql.stored_reviews(con, list(rows)))
    tally = _Tally()
    touched: set[str] = set()
    retracted: list[int] = []
    for rec in sorted(log.reviews, key=lambda x: (x.action == RETRACT, x.created_at or now)):
        if matches.present(rec):
            tally.already_present += 1
            continue
        at = rec.created_at or now
        target = None
        if rec.retracts_src is not None:
            target = matches.seen.get(log.by_source_id[rec.retracts_src])
            if target is None:
                raise ReviewImportError(
                    [f"{source}:{rec.line}: retracts: review {rec.retracts_src} could not be matched"]
                )
        queue_id = queue_ids.get(rec.queue_src) if rec.queue_src else None  # its id in this study
        new = _new_review(rec, rows[rec.row_id], at, target, queue_id, origin)
        new_id = sql.insert_review(con, new)
        matches.recorded(rec, new_id, new.picked_letter)
        touched.add(rec.row_id)
        if target is not None:
            retracted.append(int(target))
        if new.action != RETRACT:
            rows[rec.row_id] = rows[rec.row_id].reviewed(new.verdict, new.picked_letter, at)
        tally.count(new.action)
    if retracted:  # a log's retraction may name a review of another row: re-derive that row too
        touched.update(sql.rows_of_reviews(con, retracted))
    if touched:
        sql.refresh(con, sorted(touched))
    return tally


def import_review_log(
    study: StudyLike, path: str | Path, *, origin: str | None = None, reviewer: str | None = None
) -> ImportResult:
    """Append the reviews of a review log or a label file that the study does not have yet.

    A record with an ``action`` is a review-log record (the columns of :data:`LOG_COLUMNS`, as ``reviews
    export`` writes them), known by (row_id, action, reviewer, created_at). A record without one is a *label*
    (:data:`~mcqaudit.review.log.LABEL_COLUMNS`: a person's verdict from elsewhere): it is recorded as
    ``confirm`` when it agrees with the row's current final verdict (and picked letter, when it names one),
    else as ``override``, with the row's current verdict, source and judge fingerprint as the prior;
    ``reviewed_at`` (ISO-8601) is its time, else the time of the import. A row is named by ``row_id`` or by
    (arm, item_id, orientation, sample). ``reviewer`` names the reviewer of records that have none.

    Idempotent: a timed label is known by (row_id, reviewer, time) among the study's confirms and overrides; an
    untimed one by (row_id, reviewer, verdict, note, picked letter when given) among the confirms and
    overrides earlier imports recorded, retracted ones included, so re-importing a file never brings back a
    review that someone withdrew. A file with any problem is refused whole (:class:`ReviewImportError`, each
    problem as "FILE:LINE: field: reason") and nothing of it is written.

    The steps: read the file (:func:`~mcqaudit.review.log.parse_log_text`), check its header, match the rows
    it names, check every line against them (:func:`~mcqaudit.review.log.check_log`), recreate its queues,
    write its reviews — all in one transaction.
    """
    p = Path(path)
    text = _read_text(p)
    raw = parse_log_text(text, str(p), jsonl=is_jsonl(p.suffix, text))
    default_reviewer = (reviewer or "").strip()
    head = header_problems(raw, str(p), default_reviewer)
    if head:
        raise ReviewImportError(head)
    now = utcnow()
    s = open_study(study)
    with sql.writing(s, "nothing was imported") as con:
        rows = sql.log_rows(con, *named_rows(raw))
        log = check_log(raw, str(p), rows, default_reviewer)
        queue_ids, queues_added = _recreate_queues(con, log)
        tally = _write_reviews(
            con, log, rows, queue_ids, source=str(p), origin=origin or f"import:{p.name}", now=now
        )
    if tally.added or queues_added:
        refresh(s)  # a log's queues and reviews: info's cache computed again, for the next info
    return ImportResult(
        added=tally.added,
        already_present=tally.already_present,
        lines=log.lines,
        confirms=tally.confirms,
        overrides=tally.overrides,
        retractions=tally.retractions,
        queues_added=queues_added,
        queues_present=len(log.queues) - queues_added,
    )
