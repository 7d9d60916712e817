"""SQL for reviews: confirm / override / retract, review history, spot-check queues, review-log export/import.

Reviews are append-only (DESIGN §1, §6). A review records who, when, the verdict it replaced (``prior_verdict``,
``prior_source``) and the judge fingerprint it was made against; a retraction is a new review row pointing at
the one it withdraws. The current verdict is derived by the ``effective_reviews`` / ``graded_rows`` views, never
stored, so every metric follows a review at once.

Each write is one short transaction through :meth:`Study.write` (bounded retry on DuckDB's cross-process
lock), which is what lets two review sessions and a ``grade`` run share a file.

A review log (CSV or JSONL, columns :data:`LOG_COLUMNS`) carries reviews between copies of a study.
Importing is idempotent: a review is identified by (row_id, action, reviewer, created_at), so importing the
same log twice adds nothing. A log naming a row the study lacks, or carrying an illegal value, is refused
whole with each problem named by line.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from mcqaudit.store.db import Study, utcnow
from mcqaudit.vocab import CORRECT, INCORRECT, LETTERS, VERDICTS

CONFIRM, OVERRIDE, RETRACT = "confirm", "override", "retract"
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
    if verdict == CORRECT:
        if letter not in (None, gold):
            raise ReviewError(f"a CORRECT verdict picks the gold letter {gold}, not {letter}")
        letter = gold
    elif verdict == INCORRECT:
        if letter == gold:
            raise ReviewError(f"{letter} is the gold letter: the verdict would be CORRECT")
    elif letter is not None:
        raise ReviewError("an OTHER verdict picks no letter")
    return verdict, letter


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
    (CORRECT / INCORRECT / OTHER) with an optional picked letter.
    """
    who = _reviewer(reviewer)
    if action not in (CONFIRM, OVERRIDE):
        raise ReviewError(f"action must be confirm or override, not {action!r}")
    with study.write() as con:
        st = _row_state(con, row_id)
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
        return _insert(
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


def retract_review(
    study: Study, review_id: int, *, reviewer: str, note: str | None = None, origin: str = "dashboard"
) -> int:
    """Withdraw an earlier confirm/override (appends a ``retract`` review); returns the new review_id."""
    who = _reviewer(reviewer)
    with study.write() as con:
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
        return _insert(
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
     WHEN (CASE WHEN g.naive_letter IS NULL THEN 'OTHER' WHEN g.naive_letter = g.gold_letter THEN 'CORRECT'
                ELSE 'INCORRECT' END) <> g.final_verdict
       OR (g.user_letter IS NOT NULL AND (CASE WHEN g.user_letter = g.gold_letter THEN 'CORRECT'
                ELSE 'INCORRECT' END) <> g.final_verdict)
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
    queue_id: int
    name: str
    strategy: str
    seed: int
    size: int
    arms: list[str]
    rows: int
    strata: dict[str, dict[str, int]] = field(default_factory=dict)


def create_spot_check(
    study: Study,
    *,
    size: int,
    seed: int = 0,
    strategy: str = UNIFORM,
    arms: Iterable[str] | None = None,
    name: str | None = None,
    created_by: str | None = None,
) -> SpotCheck:
    """Draw and persist a seeded sample of ``size`` rows *per arm*.

    ``uniform``: every row of the arm equally likely (for unbiased judge-agreement figures). ``stratified``:
    a third each from rows where a parser disagrees with the verdict, rows that are OTHER or ungraded, and
    the rest (for hunting artifacts). The draw orders rows by ``md5(seed:row_id)``, so the same seed on the
    same rows gives the same sample; the queue interleaves arms in a seeded order.
    """
    if strategy not in STRATEGIES:
        raise ReviewError(f"strategy must be uniform or stratified, not {strategy!r}")
    if size < 1:
        raise ReviewError("a spot check needs at least one row per arm")
    seed = int(seed)
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
        q_arm, q_stratum, q_n = [], [], []
        strata: dict[str, dict[str, int]] = {}
        for arm in chosen:
            a = avail.get(arm, {})
            quota = allocate(size, a) if strategy == STRATIFIED else {"all": min(size, a.get("all", 0))}
            strata[arm] = {k: v for k, v in quota.items()}
            for s, n in quota.items():
                q_arm.append(arm)
                q_stratum.append(s)
                q_n.append(n)
        qid = int(con.execute("SELECT nextval('queue_seq')").fetchone()[0])  # type: ignore[index]
        label = (name or "").strip() or f"{strategy} {size}/arm seed {seed}"
        con.execute(
            "INSERT INTO spot_checks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [qid, label, strategy, seed, int(size), chosen, created_by, utcnow()],
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
    return SpotCheck(qid, label, strategy, seed, int(size), chosen, n_rows, strata)


def spot_checks(study: Study) -> pd.DataFrame:
    """Every queue with its progress: rows, and rows with an effective review."""
    return study.query_df(
        """SELECT s.queue_id, s.name, s.strategy, s.seed, s.size, s.arms, s.created_by, s.created_at,
                  count(r.row_id) AS rows, count(e.row_id) AS reviewed
           FROM spot_checks s
           LEFT JOIN spot_check_rows r USING (queue_id)
           LEFT JOIN effective_reviews e ON e.row_id = r.row_id
           GROUP BY ALL ORDER BY s.queue_id"""
    )


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


def review_log_csv(study: Study) -> str:
    """The review log as CSV text (UTC ISO-8601 times; empty cell = no value)."""
    df = review_log(study)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(LOG_COLUMNS)
    for rec in df.itertuples(index=False):
        w.writerow(
            [
                "" if pd.isna(v) else _iso(v) if c == "created_at" else v
                for c, v in zip(LOG_COLUMNS, rec, strict=True)
            ]
        )
    return buf.getvalue()


@dataclass
class ImportResult:
    added: int = 0
    already_present: int = 0
    lines: int = 0


def _read_log(path: Path) -> list[tuple[int, dict[str, str]]]:
    """(line number, record) pairs; every value a string, "" for none."""
    text = path.read_text(encoding="utf-8-sig")
    out: list[tuple[int, dict[str, str]]] = []
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        for k, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ReviewImportError([f"{path}:{k}: not a JSON object ({exc.msg})"]) from None
            if not isinstance(obj, dict):
                raise ReviewImportError([f"{path}:{k}: not a JSON object"])
            out.append((k, {key: "" if v is None else str(v) for key, v in obj.items()}))
        return out
    reader = csv.DictReader(io.StringIO(text))
    missing = [
        c for c in ("row_id", "action", "reviewer", "created_at") if c not in (reader.fieldnames or [])
    ]
    if missing:
        raise ReviewImportError([f"{path}:1: header: missing column(s) {', '.join(missing)}"])
    last = 1
    for rec in reader:
        start = last + 1  # a quoted field may span lines: the record starts after the previous one ended
        last = reader.line_num
        out.append((start, {k: (v or "") for k, v in rec.items() if k is not None}))
    return out


def _parse_time(s: str) -> datetime:
    t = datetime.fromisoformat(s.strip().replace("Z", "+00:00"))
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).astimezone(UTC)


def import_review_log(study: Study, path: str | Path, *, origin: str | None = None) -> ImportResult:
    """Append the reviews of a log that the study does not have yet (see the module docstring)."""
    p = Path(path)
    if not p.exists():
        raise ReviewImportError([f"{p}: no such file"])
    records = _read_log(p)
    origin = origin or f"import:{p.name}"
    problems: list[str] = []
    with study.write() as con:
        ids = sorted({r.get("row_id", "").strip() for _, r in records} - {""})
        known: dict[str, tuple[str, int, str]] = {
            rid: (gold, int(n), arm)
            for rid, gold, n, arm in con.execute(
                "SELECT row_id, gold_letter, len(options), arm FROM gen_rows WHERE row_id IN (SELECT unnest(?))",
                [ids],
            ).fetchall()
        }
        existing = {
            (rid, action, reviewer, t.astimezone(UTC)): int(review_id)
            for review_id, rid, action, reviewer, t in con.execute(
                "SELECT review_id, row_id, action, reviewer, created_at FROM reviews WHERE row_id IN (SELECT unnest(?))",
                [ids],
            ).fetchall()
        }
        parsed: list[dict[str, Any]] = []
        by_source_id: dict[str, tuple[str, str, str, datetime]] = {}
        for line, r in records:
            where = f"{p}:{line}"
            rid = r.get("row_id", "").strip()
            action = r.get("action", "").strip().lower()
            errs: list[str] = []
            if not rid:
                errs.append(f"{where}: row_id: missing")
            elif rid not in known:
                errs.append(f"{where}: row_id: {rid!r} is not a row of this study")
            elif r.get("arm") and r["arm"] != known[rid][2]:
                errs.append(f"{where}: arm: {r['arm']!r}, but row {rid!r} belongs to arm {known[rid][2]!r}")
            if action not in ACTIONS:
                errs.append(f"{where}: action: must be one of {', '.join(ACTIONS)}, not {action!r}")
            reviewer = r.get("reviewer", "").strip()
            if not reviewer:
                errs.append(f"{where}: reviewer: missing")
            try:
                created = _parse_time(r.get("created_at", ""))
            except ValueError:
                errs.append(f"{where}: created_at: not an ISO-8601 time: {r.get('created_at', '')!r}")
                created = None
            verdict = r.get("verdict", "").strip().upper() or None
            letter = r.get("picked_letter", "").strip().upper() or None
            retracts = r.get("retracts", "").strip()
            if action in (CONFIRM, OVERRIDE) and rid in known:
                gold, n, _ = known[rid]
                try:
                    verdict, letter = check_verdict(verdict, letter, gold, n)
                except ReviewError as exc:
                    errs.append(f"{where}: verdict: {exc}")
            if action == RETRACT and not retracts:
                errs.append(f"{where}: retracts: a retraction names the review_id it withdraws")
            queue = r.get("queue_id", "").strip()
            if errs:
                problems += errs
                continue
            assert created is not None
            key = (rid, action, reviewer, created)
            src = r.get("review_id", "").strip()
            if src:
                by_source_id[src] = key
            parsed.append(
                {
                    "line": line,
                    "key": key,
                    "row_id": rid,
                    "action": action,
                    "verdict": verdict if action != RETRACT else None,
                    "picked_letter": letter if action != RETRACT else None,
                    "note": r.get("note") or None,
                    "reviewer": reviewer,
                    "created_at": created,
                    "prior_verdict": r.get("prior_verdict") or None,
                    "prior_source": r.get("prior_source") or None,
                    "fingerprint": r.get("fingerprint") or None,
                    "retracts_src": retracts or None,
                    "queue_id": int(queue) if queue.isdigit() else None,
                }
            )
        for rec in parsed:
            if rec["retracts_src"] is not None and rec["retracts_src"] not in by_source_id:
                problems.append(
                    f"{p}:{rec['line']}: retracts: review {rec['retracts_src']} is not in this log"
                )
        if problems:
            raise ReviewImportError(problems)
        result = ImportResult(lines=len(records))
        seen: dict[tuple[str, str, str, datetime], int] = dict(existing)
        # targets before retractions, then time order: the log's own order may be anything
        parsed.sort(key=lambda x: (x["action"] == RETRACT, x["created_at"]))
        for rec in parsed:
            if rec["key"] in seen:
                result.already_present += 1
                continue
            target = None
            if rec["retracts_src"] is not None:
                target = seen.get(by_source_id[rec["retracts_src"]])
                if target is None:
                    raise ReviewImportError(
                        [f"{p}:{rec['line']}: retracts: review {rec['retracts_src']} could not be matched"]
                    )
            new_id = _insert(
                con,
                row_id=rec["row_id"],
                action=rec["action"],
                verdict=rec["verdict"],
                picked_letter=rec["picked_letter"],
                note=rec["note"],
                reviewer=rec["reviewer"],
                created_at=rec["created_at"],
                prior_verdict=rec["prior_verdict"],
                prior_source=rec["prior_source"],
                fingerprint=rec["fingerprint"],
                retracts=target,
                queue_id=None,  # queue ids are local to the study that drew them
                origin=origin,
            )
            seen[rec["key"]] = new_id
            result.added += 1
    return result
