"""SQL for browsing rows: filtered, paged row lists, one row's detail, and verdict counts per cell.

Everything reads the public ``graded_rows`` view, so what the dashboard lists is exactly what the metrics
count. A parser's verdict for a row is the ``verdict_of`` rule macro, as in :mod:`mcqaudit.store.frames`
(letter = gold → CORRECT, another letter → INCORRECT, no letter → OTHER; the strict pre-filter only where it
gave a letter, a framework parser only where it was run), so a confusion-matrix cell lists exactly the rows
it counts. Filters are parameters; the only SQL text chosen from input is a column name from a fixed list.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from mcqaudit.metrics.rules import arm_order
from mcqaudit.review.filters import (
    NO_LETTER,
    NO_VERDICT,
    REVIEWER_FILTER_VALUES,
    REVIEWERS_SETTLED,
    LetterCell,
    RowFilter,
)
from mcqaudit.review.log import FORMULA_CELL
from mcqaudit.review.queues import SECOND_REVIEW
from mcqaudit.store import export
from mcqaudit.store.db import Study
from mcqaudit.store.export import ExportProgress
from mcqaudit.store.reviews import LATEST_BY_REVIEWER, SECOND_REVIEWED, review_history
from mcqaudit.vocab import LETTERS, OTHER, PARSER_NAIVE, PARSER_STRICT, PARSER_USER, VERDICTS

# letters stored on gen_rows (and so on graded_rows); any other parser name lives in parser_letters
_ROW_PARSER_COLUMNS = {
    PARSER_STRICT: "strict_letter",
    PARSER_NAIVE: "naive_letter",
    PARSER_USER: "user_letter",
}

LIST_COLUMNS = [
    "arm",
    "item_id",
    "orientation",
    "sample",
    "final_verdict",
    "verdict_source",
    "judge_status",
    "gold_letter",
    "picked_letter",
    "reviewed",
    "truncated",
    "answer",
    "generation",
    "row_id",
]


class UnknownParser(ValueError):
    pass


def known_parsers(study: Study) -> list[str]:
    """strict, naive, user (when any row has a user letter), then the framework parsers that were run."""
    with study.connect() as con:
        out = [PARSER_STRICT, PARSER_NAIVE]
        if (con.execute("SELECT EXISTS (FROM gen_rows WHERE user_letter IS NOT NULL)").fetchone() or (False,))[0]:
            out.append(PARSER_USER)
        out += [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT parser FROM parser_letters WHERE parser NOT IN ('strict', 'naive', 'user') "
                "ORDER BY parser"
            ).fetchall()
        ]
    return out


def _parser_verdict(letter: str) -> str:
    return f"verdict_of({letter}, g.gold_letter)"


@dataclass
class _Query:
    joins: list[str] = field(default_factory=list)
    join_params: list[Any] = field(default_factory=list)
    where: list[str] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)

    def parser_letter(self, parser: str, alias: str) -> tuple[str, bool]:
        """The SQL expression of ``parser``'s letter, and whether the parser only covers joined rows."""
        col = _ROW_PARSER_COLUMNS.get(parser)
        if col is not None:
            return f"g.{col}", False
        if not parser or not parser.replace("_", "").isalnum():
            raise UnknownParser(f"unknown parser {parser!r}")
        self.joins.append(f"JOIN parser_letters {alias} ON {alias}.row_id = g.row_id AND {alias}.parser = ?")
        self.join_params.append(parser)
        return f"{alias}.letter", True

    def disagreement(self, parser: str, alias: str) -> str:
        """Rows where ``parser`` disagrees with the final verdict (graded rows the parser covers)."""
        letter, _ = self.parser_letter(parser, alias)
        cond = f"g.final_verdict IS NOT NULL AND ({_parser_verdict(letter)}) <> g.final_verdict"
        if parser == PARSER_STRICT:
            cond += f" AND {letter} IS NOT NULL"
        return cond


def _reviewers_rows(value: str) -> str:
    """The rows whose reviewers disagree, or settled a disagreement (``value``, see
    :data:`~mcqaudit.review.filters.REVIEWER_FILTER_VALUES`): over each person's latest review in force,
    ranked newest first per row (k = 1 is the row's effective review), the latest verdicts differ; settled
    when the reviews before the newest (k > 1) already differ among themselves."""
    if value not in REVIEWER_FILTER_VALUES:
        raise ValueError(f"a reviewers filter is one of {', '.join(REVIEWER_FILTER_VALUES)}, not {value!r}")
    ranked = (
        "SELECT row_id, verdict, row_number() OVER (PARTITION BY row_id ORDER BY created_at DESC, review_id DESC) "
        f"AS k FROM ({LATEST_BY_REVIEWER})"
    )
    settled = "count(DISTINCT verdict) FILTER (k > 1) >= 2"
    return (
        f"SELECT row_id FROM ({ranked}) GROUP BY row_id HAVING count(DISTINCT verdict) >= 2 "
        f"AND {'' if value == REVIEWERS_SETTLED else 'NOT '}({settled})"
    )


def _build(f: RowFilter) -> _Query:
    q = _Query()

    def any_of(col: str, values: Sequence[Any]) -> None:
        q.where.append(f"{col} IN (SELECT unnest(?))")
        q.params.append(list(values))

    if f.arms:
        any_of("g.arm", f.arms)
    if f.orientations:
        any_of("g.orientation", f.orientations)
    if f.verdicts:
        graded = [v for v in f.verdicts if v in VERDICTS]
        parts = []
        if graded:
            parts.append("g.final_verdict IN (SELECT unnest(?))")
            q.params.append(graded)
        if NO_VERDICT in f.verdicts:
            parts.append("g.final_verdict IS NULL")
        q.where.append("(" + (" OR ".join(parts) or "false") + ")")
    if f.judge_statuses:
        any_of("g.judge_status", f.judge_statuses)
    if f.reviewed is not None:
        q.where.append("g.review_verdict IS NOT NULL" if f.reviewed else "g.review_verdict IS NULL")
    if f.reviewers:
        q.where.append(f"g.row_id IN ({_reviewers_rows(f.reviewers)})")
    if f.search.strip():
        s = f.search.strip()
        like = "%" + s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        q.where.append(
            "(g.row_id = ? OR g.item_id ILIKE ? ESCAPE '\\' OR g.question ILIKE ? ESCAPE '\\' "
            "OR g.generation ILIKE ? ESCAPE '\\' OR g.reasoning ILIKE ? ESCAPE '\\')"
        )
        q.params += [s, like, like, like, like]
    if f.disagree_parser:
        q.where.append(q.disagreement(f.disagree_parser, "pd"))
    if isinstance(f.cell, LetterCell):
        _letter_cell(q, f.cell)
    elif f.cell is not None:
        c = f.cell
        if c.verdict not in VERDICTS or c.parser_verdict not in VERDICTS:
            raise ValueError(f"a confusion cell takes two of {', '.join(VERDICTS)}")
        letter, _ = q.parser_letter(c.parser, "pc")
        q.where.append(f"g.final_verdict = ? AND ({_parser_verdict(letter)}) = ?")
        q.params += [c.verdict, c.parser_verdict]
        if c.parser == PARSER_STRICT:
            q.where.append(f"{letter} IS NOT NULL")
    if f.queue_id is not None:
        q.joins.append("JOIN spot_check_rows q ON q.row_id = g.row_id AND q.queue_id = ?")
        q.join_params.append(int(f.queue_id))
    return q


def _letter_of(letter: str) -> str:
    """A displayed letter, or ``none``, as the SQL text a letter cell compares: no letter, or one beyond the
    row's displayed options, is ``none`` (as in :mod:`mcqaudit.store.frames`, whose letters the metrics count)."""
    return f"CASE WHEN {letter} IS NOT NULL AND ascii({letter}) - 65 < length(g.orientation) THEN {letter} ELSE '{NO_LETTER}' END"


def _letter_cell(q: _Query, c: LetterCell) -> None:
    """Rows of one letter-confusion cell: a known reference (OTHER → none, else the picked letter; an answered
    row without one in range is left out) and the parser's letter, on the rows the parser is compared on
    (strict: those it resolved; a framework parser: those it was run on)."""
    for v in (c.reference, c.letter):
        if not (v == NO_LETTER or (len(v) == 1 and v in LETTERS)):
            raise ValueError(f"a letter cell takes a letter A-Z or {NO_LETTER!r}, not {v!r}")
    letter, _ = q.parser_letter(c.parser, "pl")
    reference = (
        f"CASE WHEN g.final_verdict = '{OTHER}' THEN '{NO_LETTER}' "
        "WHEN g.final_verdict IS NOT NULL AND ascii(g.picked_letter) - 65 < length(g.orientation) THEN g.picked_letter END"
    )
    q.where.append(f"({reference}) = ? AND ({_letter_of(letter)}) = ?")
    q.params += [c.reference, c.letter]
    if c.parser == PARSER_STRICT:
        q.where.append(f"({_letter_of(letter)}) <> '{NO_LETTER}'")


def _needs_verdicts(f: RowFilter) -> bool:
    """Whether the filter reads a verdict column. When not, a list reads ``gen_rows``, which has the same rows
    and the same values in every column the filter and the order use, without the view's joins."""
    return bool(
        f.verdicts or f.judge_statuses or f.reviewed is not None or f.disagree_parser or f.cell is not None
    )


def _from(f: RowFilter, *, view: bool = True) -> tuple[str, list[Any]]:
    """FROM … WHERE … of the list ``f`` over ``graded_rows`` (``view``), else over ``gen_rows`` where the filter
    allows (:func:`_needs_verdicts`)."""
    qq = _build(f)
    source = "graded_rows" if view or _needs_verdicts(f) else "gen_rows"
    sql = f"FROM {source} g " + " ".join(qq.joins)
    if qq.where:
        sql += " WHERE " + " AND ".join(qq.where)
    return sql, qq.join_params + qq.params


def count_rows(study: Study, f: RowFilter) -> int:
    sql, params = _from(f, view=False)
    return int(study.query(f"SELECT count(*) {sql}", params)[0][0])


# the list's order (see _ordered_from) as one comparable value: ordinal NULLS LAST is (IS NULL, ordinal)
_QUEUE_ORDER, _QUEUE_KEY = "q.position, g.row_id", "(q.position, g.row_id)"
_LIST_ORDER = (
    "a.ordinal NULLS LAST, g.arm, g.item_id, length(g.orientation), g.orientation, g.sample, g.row_id"
)
_LIST_KEY = (
    "(a.ordinal IS NULL, coalesce(a.ordinal, 0), g.arm, g.item_id, length(g.orientation), g.orientation, "
    "g.sample, g.row_id)"
)


def _ordered_from(f: RowFilter, *, view: bool = True) -> tuple[str, list[Any], str, str, str]:
    """(FROM … WHERE …, its parameters, the list's ORDER BY keys, the same order as one comparable key, extra
    select columns): queue order for a queue, else arm (ingest order), item, orientation, sample — and row_id
    last, so the order is total."""
    sql, params = _from(f, view=view)
    if f.queue_id is not None:
        return sql, params, _QUEUE_ORDER, _QUEUE_KEY, ", q.position AS queue_position"
    sql = sql.replace(" g ", " g LEFT JOIN arms a ON a.arm = g.arm ", 1)
    return sql, params, _LIST_ORDER, _LIST_KEY, ""


def list_rows(
    study: Study, f: RowFilter, limit: int = 50, offset: int = 0, snippet: int = 160
) -> pd.DataFrame:
    """One page of rows (columns :data:`LIST_COLUMNS`, ``answer`` and ``generation`` cut to ``snippet``
    characters), in queue order for a queue, else by arm (ingest order), item, orientation, sample."""
    sql, params, order, _, extra = _ordered_from(f)
    cols = ", ".join(
        f"left(g.{c}, ?) AS {c}"
        if c in ("answer", "generation")
        else "g.review_verdict IS NOT NULL AS reviewed"
        if c == "reviewed"
        else f"g.{c}"
        for c in LIST_COLUMNS
    )
    return study.query_df(
        f"SELECT {cols}{extra} {sql} ORDER BY {order} LIMIT ? OFFSET ?",
        [snippet, snippet, *params, int(limit), int(offset)],
    )


@dataclass(frozen=True)
class ListPosition:
    """Where one row sits in a row list: its 0-based position, the list's length, and its neighbours."""

    row_id: str
    position: int
    total: int
    previous: str | None
    next: str | None


def _queue_only(f: RowFilter) -> bool:
    """A spot-check queue with no other condition: its list is ``spot_check_rows`` alone, in queue order, which
    is read without the ``graded_rows`` view (every queue row is a row of the study: rows are only deleted
    to be re-inserted by ``ingest --replace``, in the same transaction)."""
    return f.queue_id is not None and f == RowFilter(queue_id=f.queue_id)


def list_position(study: Study, f: RowFilter, row_id: str) -> ListPosition | None:
    """The position of ``row_id`` in the list ``f`` (None when the row is not in it), in one query."""
    if _queue_only(f):
        rec = study.query(
            """SELECT row_id, pos, total, prev_id, next_id FROM (
                   SELECT q.row_id, row_number() OVER w - 1 AS pos, count(*) OVER () AS total,
                          lag(q.row_id) OVER w AS prev_id, lead(q.row_id) OVER w AS next_id
                   FROM spot_check_rows q WHERE q.queue_id = ?
                   WINDOW w AS (ORDER BY q.position, q.row_id)
               ) WHERE row_id = ?""",
            [int(f.queue_id or 0), row_id],
        )
        return _position(rec)
    return _list_position(study, f, row_id)


def _position(rec: list[tuple[Any, ...]]) -> ListPosition | None:
    if not rec:
        return None
    rid, pos, total, prev_id, next_id = rec[0]
    return ListPosition(str(rid), int(pos), int(total), prev_id, next_id)


def _list_position(study: Study, f: RowFilter, row_id: str) -> ListPosition | None:
    """:func:`list_position` for any filter: the rows before it, all rows, and the neighbours by one scan with
    aggregates over the list's order key (a window would sort the whole list)."""
    sql, params, _, key, _ = _ordered_from(f, view=False)
    rec = study.query(
        f"""WITH l AS (SELECT g.row_id, {key} AS k {sql}), me AS (SELECT k FROM l WHERE row_id = ?)
            SELECT any_value(l.row_id) FILTER (l.k = me.k), count(*) FILTER (l.k < me.k), count(*),
                   arg_max(l.row_id, l.k) FILTER (l.k < me.k), arg_min(l.row_id, l.k) FILTER (l.k > me.k)
            FROM l, me""",
        [*params, row_id],
    )
    return _position(rec) if rec and rec[0][0] is not None else None


def row_at(study: Study, f: RowFilter, position: int) -> str | None:
    """The id of the row at ``position`` (0-based) of the list ``f``; None past either end."""
    if position < 0:
        return None
    if _queue_only(f):
        rec = study.query(
            "SELECT row_id FROM spot_check_rows WHERE queue_id = ? ORDER BY position, row_id LIMIT 1 OFFSET ?",
            [int(f.queue_id or 0), int(position)],
        )
        return str(rec[0][0]) if rec else None
    return _row_at(study, f, position)


def _row_at(study: Study, f: RowFilter, position: int) -> str | None:
    """:func:`row_at` over ``graded_rows``, for any filter."""
    if position < 0:
        return None
    sql, params, order, _, _ = _ordered_from(f, view=False)
    rec = study.query(f"SELECT g.row_id {sql} ORDER BY {order} LIMIT 1 OFFSET ?", [*params, int(position)])
    return str(rec[0][0]) if rec else None


def _reviewed_rows(con: Any, queue_id: int) -> str:
    """The rows that count as reviewed in this queue, as SQL: those with an effective review; in a
    second_review queue, those that two or more people have reviewed."""
    rec = con.execute("SELECT strategy FROM spot_checks WHERE queue_id = ?", [int(queue_id)]).fetchone()
    return f"({SECOND_REVIEWED})" if rec is not None and rec[0] == SECOND_REVIEW else "effective_reviews"


def next_unreviewed(study: Study, queue_id: int, after: str | None = None) -> str | None:
    """The queue's first row not reviewed yet (no effective review; in a second_review queue, not reviewed by
    two people) after ``after`` (in queue order), wrapping round to the start, ``after`` itself left out;
    None when no other row of the queue is unreviewed."""
    with study.connect() as con:
        done = _reviewed_rows(con, queue_id)
        rec = con.execute(
            f"""SELECT q.row_id FROM spot_check_rows q
               LEFT JOIN {done} e ON e.row_id = q.row_id
               WHERE q.queue_id = ? AND e.row_id IS NULL AND q.row_id IS DISTINCT FROM ?
               ORDER BY q.position <= coalesce(
                           (SELECT position FROM spot_check_rows WHERE queue_id = ? AND row_id = ?), -1),
                        q.position
               LIMIT 1""",
            [int(queue_id), after, int(queue_id), after],
        ).fetchone()
    return str(rec[0]) if rec else None


@dataclass(frozen=True)
class ReviewPanel:
    """Everything the Review page shows about one row, read through one connection."""

    row: dict[str, Any] | None  # see :func:`row_detail`
    position: ListPosition | None  # None: the row is not in the list
    item: pd.DataFrame  # :func:`item_rows` of its item
    progress: pd.DataFrame  # the queue's rows and reviewed rows per arm (empty outside a queue)
    next_unreviewed: str | None  # the queue's next unreviewed row after this one (None outside a queue)


def review_panel(study: Study, f: RowFilter, row_id: str) -> ReviewPanel:
    with study.connect():  # every query below reuses this one connection
        row = row_detail(study, row_id)
        position = list_position(study, f, row_id)
        item = item_rows(study, str(row["item_id"])) if row else pd.DataFrame()
        if f.queue_id is None:
            return ReviewPanel(row, position, item, pd.DataFrame(), None)
        progress = queue_progress(study, f.queue_id)
        return ReviewPanel(row, position, item, progress, next_unreviewed(study, f.queue_id, row_id))


# A queue's rows and their arms never change once drawn (spot_check_rows is only inserted into, and a row_id
# is derived from its arm), so the arms of a queue's rows are read from gen_rows (a scan) once per queue and
# process; what a review changes (which of them are reviewed) is read from spot_check_rows ⋈ effective_reviews.
# Keyed by the file and the queue's (id, created_at), so another study file at the same path is read anew.
_QUEUE_ARMS_ROWS: dict[tuple[str, int, Any], dict[str, str]] = {}
_QUEUE_ARMS_MAX = 64


def _queue_arms(study: Study, queue_id: int) -> tuple[list[str], dict[str, int], dict[str, str]] | None:
    """(the arms the queue was drawn over, in its order; its rows per arm; arm of each of its rows), or None
    when the queue is deleted or unknown."""
    with study.connect() as con:
        rec = con.execute(
            "SELECT arms, created_at FROM spot_checks WHERE queue_id = ? AND deleted_at IS NULL",
            [int(queue_id)],
        ).fetchone()
        if rec is None:
            return None
        key = (str(study.path.resolve()), int(queue_id), rec[1])
        hit = _QUEUE_ARMS_ROWS.get(key)
        if hit is None:
            rows = con.execute(
                """SELECT r.row_id, g.arm FROM spot_check_rows r JOIN gen_rows g USING (row_id)
                   WHERE r.queue_id = ?""",
                [int(queue_id)],
            ).fetchall()
            hit = dict(rows)
            if len(_QUEUE_ARMS_ROWS) >= _QUEUE_ARMS_MAX:
                _QUEUE_ARMS_ROWS.pop(next(iter(_QUEUE_ARMS_ROWS)))
            _QUEUE_ARMS_ROWS[key] = hit
    arms = list(rec[0] or [])
    per_arm: dict[str, int] = dict.fromkeys(arms, 0)
    for arm in hit.values():
        if arm in per_arm:
            per_arm[arm] += 1
    return arms, per_arm, hit


def queue_progress(study: Study, queue_id: int) -> pd.DataFrame:
    """:func:`~mcqaudit.store.reviews.spot_check_progress` of one queue (same columns, rows and order), without
    a scan of ``gen_rows`` per call: the arms of the queue's rows are read once (see ``_QUEUE_ARMS_ROWS``), the
    reviewed rows from ``spot_check_rows`` ⋈ ``effective_reviews``."""
    with study.connect() as con:
        got = _queue_arms(study, queue_id)
        if got is None:
            return pd.DataFrame(
                {
                    "queue_id": pd.Series(dtype="int32"),
                    "arm": pd.Series(dtype=object),
                    "rows": pd.Series(dtype="int64"),
                    "reviewed": pd.Series(dtype="int64"),
                }
            )
        arms, per_arm, arm_of = got
        reviewed = _reviewed_rows(con, queue_id)
        reviewed_ids = [
            r[0]
            for r in con.execute(
                f"""SELECT r.row_id FROM spot_check_rows r JOIN {reviewed} e USING (row_id)
                   WHERE r.queue_id = ?""",
                [int(queue_id)],
            ).fetchall()
        ]
    done: dict[str, int] = dict.fromkeys(arms, 0)
    for rid in reviewed_ids:
        arm = arm_of.get(rid)
        if arm in done:
            done[arm] += 1
    return pd.DataFrame(
        {
            "queue_id": pd.Series([int(queue_id)] * len(arms), dtype="int32"),
            "arm": pd.Series(arms, dtype="str"),
            "rows": pd.Series([per_arm[a] for a in arms], dtype="int64"),
            "reviewed": pd.Series([done[a] for a in arms], dtype="int64"),
        }
    )


def item_rows(study: Study, item_id: str) -> pd.DataFrame:
    """Every row of one item (all arms, orientations, samples): picked letter and verdicts, for the
    side-by-side view."""
    return study.query_df(
        """SELECT g.row_id, g.arm, g.orientation, g.sample, g.gold_letter, g.picked_letter, g.final_verdict,
                  g.verdict_source, g.review_verdict IS NOT NULL AS reviewed
           FROM graded_rows g LEFT JOIN arms a ON a.arm = g.arm
           WHERE g.item_id = ?
           ORDER BY a.ordinal NULLS LAST, g.arm, length(g.orientation), g.orientation, g.sample""",
        [item_id],
    )


def row_ids(study: Study, f: RowFilter, limit: int | None = None) -> list[str]:
    """The ids of the matching rows, in list order."""
    df = list_rows(study, f, limit=limit if limit is not None else 2**62, offset=0, snippet=0)
    return [str(r) for r in df["row_id"].tolist()]


def row_detail(study: Study, row_id: str) -> dict[str, Any] | None:
    """Everything about one row: its ``graded_rows`` columns, every parser's letter, the judge's
    configuration and error, every judge's verdict (:func:`row_judges`), and its review history (oldest
    first). None when the row is unknown."""
    with study.connect() as con:
        cur = con.execute("SELECT * FROM graded_rows WHERE row_id = ?", [row_id])
        names = [d[0] for d in cur.description]
        rec = cur.fetchone()
        if rec is None:
            return None
        row: dict[str, Any] = dict(zip(names, rec, strict=True))
        row["options"] = list(row["options"])
        extra = con.execute(
            "SELECT model, metadata, source_line, usage FROM gen_rows WHERE row_id = ?", [row_id]
        ).fetchone()
        row["model"], row["metadata"], row["source_line"], usage = extra if extra else (None, None, None, None)
        # what the model's reply said it used (docs/design.md §3), as an object
        row["usage"] = json.loads(usage) if isinstance(usage, str) else usage
        parsers = {
            PARSER_STRICT: row["strict_letter"],
            PARSER_NAIVE: row["naive_letter"],
            PARSER_USER: row["user_letter"],
        }
        for parser, letter in con.execute(
            "SELECT parser, letter FROM parser_letters WHERE row_id = ? AND parser NOT IN ('strict', 'naive', 'user') "
            "ORDER BY parser",
            [row_id],
        ).fetchall():
            parsers[parser] = letter
        row["parser_letters"] = parsers
        judge = None
        if row["judge_fingerprint"] is not None:
            j = con.execute(
                """SELECT c.model, c.shape, c.temperature, c.standin, v.error, v.judged_at, v.attempts, v.base_url
                   FROM current_judge v LEFT JOIN judge_configs c USING (fingerprint)
                   WHERE v.row_id = ? AND v.fingerprint = ?""",  # the reply graded_rows shows (warm: just read)
                [row_id, row["judge_fingerprint"]],
            ).fetchone()
            if j is not None:
                keys = (
                    "model",
                    "shape",
                    "temperature",
                    "standin",
                    "error",
                    "judged_at",
                    "attempts",
                    "base_url",
                )
                judge = dict(zip(keys, j, strict=True))
                judge["standin"] = bool(judge["standin"])
        row["judge"] = judge
        row["judges"] = row_judges(con, row)
    row["history"] = review_history(study, row_id)
    return row


JUDGE_KEYS = ("fingerprint", "model", "role", "status", "verdict", "letter", "reply", "standin")


def row_judges(con: Any, row: dict[str, Any]) -> list[dict[str, Any]]:
    """Every judge's verdict of one row (``row``: its ``graded_rows`` columns and ``judge``): the primary
    judge's (the one its final verdict comes from: role ``primary``) first, then each panel judge's
    (``grade --panel``, role ``panel``, in the order they were added), as dicts of :data:`JUDGE_KEYS`. A panel
    judge that has not graded a row the primary judge graded is listed with status None; with no panel judge
    the list is the primary's alone (no query), and it is empty when no judge graded the row."""
    out: list[dict[str, Any]] = []
    primary = row["judge_fingerprint"]
    if primary is not None:
        j = row.get("judge") or {}
        out.append(dict(zip(JUDGE_KEYS, (primary, j.get("model"), "primary", row["judge_status"],
                                         row["judge_verdict"], row["judge_letter"], row["judge_reply"],
                                         bool(j.get("standin"))), strict=True)))  # fmt: skip
    panel = con.execute("SELECT fingerprint FROM panel_judges ORDER BY added_at, fingerprint").fetchall()
    if not panel:
        return out
    recs = con.execute(
        """SELECT p.fingerprint, c.model, v.status, v.verdict, v.letter, v.reply, coalesce(c.standin, false)
           FROM panel_judges p LEFT JOIN judge_configs c USING (fingerprint)
           LEFT JOIN judge_verdicts v ON v.fingerprint = p.fingerprint AND v.row_id = ?
           ORDER BY p.added_at, p.fingerprint""",
        [row["row_id"]],
    ).fetchall()
    graded = row["judge_status"] == "ok"
    for fp, model, status, verdict, letter, reply, standin in recs:
        if status is not None or graded:
            out.append(dict(zip(JUDGE_KEYS, (fp, model, "panel", status, verdict, letter, reply, bool(standin)),
                                strict=True)))  # fmt: skip
    return out


def verdict_counts(study: Study) -> pd.DataFrame:
    """Rows, CORRECT, INCORRECT, OTHER and ungraded counts per arm and orientation (final verdicts)."""
    return study.query_df(
        """SELECT g.arm, g.orientation, count(*) AS rows,
               count(*) FILTER (g.final_verdict = 'CORRECT') AS correct,
               count(*) FILTER (g.final_verdict = 'INCORRECT') AS incorrect,
               count(*) FILTER (g.final_verdict = 'OTHER') AS other,
               count(*) FILTER (g.final_verdict IS NULL) AS ungraded
           FROM graded_rows g LEFT JOIN arms a ON a.arm = g.arm
           GROUP BY g.arm, g.orientation, a.ordinal
           ORDER BY a.ordinal NULLS LAST, g.arm, length(g.orientation), g.orientation"""
    )


def study_choices(study: Study) -> dict[str, list[str]]:
    """The values the filters offer: arms (ingest order), orientations, judge statuses, parsers."""
    with study.connect() as con:
        # one scan of the rows for both lists (a study has few (arm, orientation) pairs), then each ordered
        pairs = con.execute(
            """SELECT DISTINCT g.arm, a.ordinal, g.orientation FROM gen_rows g LEFT JOIN arms a USING (arm)"""
        ).fetchall()
        parsers = known_parsers(study)  # the same connection (nested)
    return {
        "arms": arm_order([a for a, _, _ in pairs], {a: o for a, o, _ in pairs if o is not None}),
        "orientations": sorted({o for _, _, o in pairs}, key=lambda o: (len(o), o)),
        "judge_statuses": ["skipped", "pending", "ok", "error"],
        "parsers": parsers,
    }


EXPORT_FORMATS = ("csv", "parquet", "jsonl")


def export_rows(study: Study, path: str, fmt: str, progress: ExportProgress | None = None) -> int:
    """Write every row of ``graded_rows`` (final verdicts) to ``path`` as csv, parquet or jsonl; the number of
    rows written. Parquet and JSON Lines add each row's ``reviews`` and ``panel_verdicts`` beside the view's
    columns (:mod:`mcqaudit.store.export`: nested lists of structs, arrays of objects), and say ``progress``
    after each batch. CSV keeps the view's columns alone (options as a JSON array). In CSV a text cell that a
    spreadsheet would run as a formula (it starts with = + - @, a tab or a carriage return; a generation can)
    is written behind a single quote, as the review log's cells are
    (:func:`mcqaudit.store.reviews.neutralise_cell`); Parquet and JSON keep every value exact. A write the OS
    refused (a full disk) is raised as that ``OSError``."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(EXPORT_FORMATS)}, not {fmt!r}")
    if fmt == "parquet":
        return export.write_parquet(study, Path(path), progress)
    if fmt == "jsonl":
        return export.write_jsonl(study, Path(path), progress)
    # COPY cannot take the target as a parameter; the path is ours (a temp file), quoted defensively
    target = "'" + path.replace("'", "''") + "'"
    order = "FROM graded_rows ORDER BY arm, item_id, orientation, sample"
    with study.connect() as con:
        # the view's own text columns (names from our schema, never from input)
        text = [
            str(c[0])
            for c in con.execute("DESCRIBE SELECT * FROM graded_rows").fetchall()
            if c[1] == "VARCHAR"
        ]
        neutral = [
            f'CASE WHEN regexp_matches("{c}", ?) THEN \'\'\'\' || "{c}" ELSE "{c}" END AS "{c}"' for c in text
        ]
        select = f"SELECT * REPLACE ({', '.join([*neutral, 'to_json(options)::VARCHAR AS options'])}) {order}"
        try:
            con.execute(f"COPY ({select}) TO {target} (FORMAT csv, HEADER true)", [FORMULA_CELL] * len(text))
        except duckdb.Error as exc:
            export.reraise_os(exc)
            raise
        rows = int((con.execute("SELECT count(*) FROM gen_rows").fetchone() or (0,))[0])
    if progress is not None:
        progress(rows, rows)
    return rows
