"""All SQL for grading: which rows go to the judge, the reply cache, batched writes, judge configurations.

Writes go through :meth:`Study.write` (one short transaction per batch, bounded retry on the lock), so a
dashboard can read the file between batches. Batches are inserted as Arrow tables: one statement per
table, not one per row, which keeps a 64-reply batch in the low milliseconds.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

import duckdb

from mcqaudit.bulk import paused_gc
from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.judge.replies import REPLY_ERROR_KINDS
from mcqaudit.store.db import Study, set_meta, utcnow
from mcqaudit.store.schema import CURRENT_JUDGE_COLUMNS, ROWS_IN_LIST, refresh_current_judge
from mcqaudit.vocab import OK

if TYPE_CHECKING:
    import pyarrow as pa

UNAUDITED_KEY = "unaudited"

# What a caller runs inside a batch write's transaction (:func:`write_judged`'s ``also``).
InTransaction = Callable[[duckdb.DuckDBPyConnection], None]


class TargetRow(NamedTuple):
    """A row that needs the judge: everything the prompt is rendered from (a named tuple: a run may target
    hundreds of thousands, built at once)."""

    row_id: str
    arm: str
    question: str
    options: tuple[str, ...]
    gold_letter: str
    generation: str  # the row's answer: what the judge reads (docs/design.md §3)
    reasoning: str | None = None  # sent only with `--judge-sees-reasoning`


@dataclass(frozen=True)
class CachedReply:
    value: str
    reply: str | None
    rationale: str | None


@dataclass(frozen=True)
class ReplyRecord:
    """One raw reply (or final failure) as received; appended to ``judge_replies``, never changed."""

    fingerprint: str
    prompt_hash: str
    status: str
    reply: str | None
    value: str | None
    rationale: str | None
    error: str | None
    base_url: str | None
    tokens_in: int | None
    tokens_out: int | None
    received_at: datetime


@dataclass(frozen=True)
class VerdictRecord:
    """The judge outcome for one (row, fingerprint): replaces an earlier error, never an ok verdict."""

    row_id: str
    fingerprint: str
    status: str
    letter: str | None
    verdict: str | None
    reply: str | None
    rationale: str | None
    error: str | None
    prompt_hash: str | None
    base_url: str | None
    attempts: int
    judged_at: datetime


@functools.cache
def _schemas() -> dict[str, pa.Schema]:
    """The Arrow schemas of the reply and verdict records a batch registers (pyarrow is imported on first use:
    `mcqaudit info` reads this module and need not load it)."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    reply = pa.schema(
        [
            ("fingerprint", pa.string()),
            ("prompt_hash", pa.string()),
            ("status", pa.string()),
            ("reply", pa.string()),
            ("value", pa.string()),
            ("rationale", pa.string()),
            ("error", pa.string()),
            ("base_url", pa.string()),
            ("tokens_in", pa.int32()),
            ("tokens_out", pa.int32()),
            ("received_at", ts),
        ]
    )
    verdict = pa.schema(
        [
            ("row_id", pa.string()),
            ("fingerprint", pa.string()),
            ("status", pa.string()),
            ("letter", pa.string()),
            ("verdict", pa.string()),
            ("reply", pa.string()),
            ("rationale", pa.string()),
            ("error", pa.string()),
            ("prompt_hash", pa.string()),
            ("base_url", pa.string()),
            ("attempts", pa.int32()),
            ("judged_at", ts),
        ]
    )
    return {"reply": reply, "verdict": verdict}


def _table(records: Sequence[Any], schema: str) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_pylist([r.__dict__ for r in records], schema=_schemas()[schema])


# --- selection ----------------------------------------------------------------------------------------

_NEEDS_JUDGE = "needs_judge(g.strict_letter, g.is_blank)"  # a rule macro (store.schema)


def known_arms(study: Study) -> list[str]:
    return [r[0] for r in study.query("SELECT arm FROM gen_rows GROUP BY arm ORDER BY min(ingest_id), arm")]


# the rows a panel judge grades: those the primary judge graded (an ok current verdict, docs/design.md §5)
_PRIMARY_GRADED = "g.row_id IN (SELECT row_id FROM current_judge WHERE status = 'ok')"


def select_rows(
    study: Study, fingerprint: str, arms: Sequence[str] = (), limit: int | None = None, *, panel: bool = False
) -> tuple[list[TargetRow], int]:
    """Rows needing the judge that have no ``ok`` verdict under ``fingerprint`` (error rows are retried); for
    a panel judge (``panel``), the rows the primary judge graded.

    Returns (rows in a stable order, cut to ``limit``; how many rows in scope already have an ok verdict).
    """
    arm_filter = "AND g.arm IN (SELECT unnest(?::VARCHAR[]))" if arms else ""
    arm_params: list[Any] = [list(arms)] if arms else []
    scope = _PRIMARY_GRADED if panel else _NEEDS_JUDGE
    sql = f"""
        SELECT g.row_id, g.arm, g.question, g.options, g.gold_letter, coalesce(g.answer, g.generation), g.reasoning
        FROM gen_rows g
        WHERE {scope} {arm_filter}
          AND NOT EXISTS (
              SELECT 1 FROM judge_verdicts v
              WHERE v.row_id = g.row_id AND v.fingerprint = ? AND v.status = 'ok')
        ORDER BY g.arm, g.item_id, g.sample, g.orientation, g.row_id
    """
    params = [*arm_params, fingerprint]
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    done_sql = f"""
        SELECT count(*) FROM gen_rows g JOIN judge_verdicts v ON v.row_id = g.row_id
        WHERE {scope} {arm_filter} AND v.fingerprint = ? AND v.status = 'ok'
    """
    with study.connect() as con, paused_gc():
        # column by column (Arrow), not row by row: at 700,000 rows 0.8 s against fetchall()'s 1.2 s
        cols = [c.to_pylist() for c in con.sql(sql, params=params).to_arrow_table().columns]
        already_ok = con.execute(done_sql, [*arm_params, fingerprint]).fetchone()
        cols[3] = [tuple(o) for o in cols[3]]
        targets = list(map(TargetRow._make, zip(*cols, strict=True)))
    return targets, int(already_ok[0]) if already_ok else 0


def resolution_counts(study: Study, arms: Sequence[str] = ()) -> dict[str, int]:
    """Rows in scope resolved by the pre-filter, by rule, and those that need a judge."""
    arm_filter = "WHERE g.arm IN (SELECT unnest(?::VARCHAR[]))" if arms else ""
    sql = f"""
        SELECT count(*) AS rows,
               count(*) FILTER (WHERE verdict_source(NULL, NULL, g.strict_letter, g.is_blank) = 'rule') AS rule,
               count(*) FILTER (WHERE verdict_source(NULL, NULL, g.strict_letter, g.is_blank) = 'prefilter')
                   AS prefilter,
               count(*) FILTER (WHERE {_NEEDS_JUDGE}) AS needs_judge
        FROM gen_rows g {arm_filter}
    """
    with study.connect() as con:
        cur = con.execute(sql, [list(arms)] if arms else [])
        names = [d[0] for d in cur.description]
        row = cur.fetchone()
    return dict(zip(names, (int(x) for x in row), strict=True)) if row else {}


def primary_graded_count(study: Study, arms: Sequence[str] = ()) -> int:
    """Rows in scope the primary judge graded (what a panel judge is asked to grade)."""
    arm_filter = "AND g.arm IN (SELECT unnest(?::VARCHAR[]))" if arms else ""
    with study.connect() as con:
        row = con.execute(
            f"SELECT count(*) FROM gen_rows g WHERE {_PRIMARY_GRADED} {arm_filter}", [list(arms)] if arms else []
        ).fetchone()
    return int(row[0]) if row else 0


def panel_fingerprints(study: Study) -> list[str]:
    """The study's panel judges, in the order they were added."""
    return [r[0] for r in study.query("SELECT fingerprint FROM panel_judges ORDER BY added_at, fingerprint")]


def primary_fingerprints(study: Study) -> dict[str, int]:
    """The configurations the final verdicts come from: fingerprint -> rows with an ok current verdict, most
    rows first (one, unless arms were graded under different ones: `judge_config_mixed`)."""
    rows = study.query(
        "SELECT fingerprint, count(*) FROM current_judge WHERE status = 'ok' GROUP BY 1 ORDER BY 2 DESC, 1"
    )
    return {fp: int(n) for fp, n in rows}


def panel_problem(study: Study, config: JudgeConfig, panel: bool) -> str | None:
    """Why a run under ``config`` (a panel judge's with ``panel``) cannot run on this study, or None
    (docs/design.md §5): a panel judge needs a primary judge and must not be it; a run without --panel must
    not be a panel judge's."""
    fp = config.fingerprint
    primary = {r[0] for r in study.query("SELECT DISTINCT fingerprint FROM current_judge")}
    is_panel = bool(study.query("SELECT count(*) FROM panel_judges WHERE fingerprint = ?", [fp])[0][0])
    if panel and not is_panel:
        if not primary:
            return (
                "--panel: the study has no primary judge yet: grade it first without --panel (the first judge "
                "configuration a study is graded with is its primary)"
            )
        if fp in primary:
            return (
                f"--panel: this configuration ({fp}) is the study's primary judge; a panel judge must differ in "
                "model, shape, temperature, max tokens, seed, exemplars, rationale or reasoning"
            )
    if not panel and is_panel:
        return (
            f"this configuration ({fp}) is a panel judge of the study: its verdicts are kept beside the final "
            "ones; pass --panel to grade with it again"
        )
    return None


def register_panel(study: Study, config: JudgeConfig) -> None:
    """Record ``config`` as a panel judge, before its first verdict (:func:`panel_problem` checked first)."""
    with study.write() as con:
        con.execute(
            "INSERT INTO panel_judges VALUES (?, ?) ON CONFLICT (fingerprint) DO NOTHING",
            [config.fingerprint, utcnow()],
        )


def has_legal_replies(study: Study, fingerprint: str) -> bool:
    """Whether any legal reply is stored under ``fingerprint`` (a fingerprint's first run has none, and
    needs no look-up of its prompts in the reply cache)."""
    rows = study.query(
        "SELECT EXISTS (SELECT 1 FROM judge_replies WHERE fingerprint = ? AND status = 'ok')", [fingerprint]
    )
    return bool(rows and rows[0][0])


def cached_replies(study: Study, fingerprint: str, hashes: Iterable[str]) -> dict[str, CachedReply]:
    """The earliest legal reply for each (fingerprint, prompt hash) that has one."""
    wanted = list(dict.fromkeys(hashes))
    if not wanted:
        return {}
    sql = """
        SELECT prompt_hash, arg_min(value, received_at), arg_min(reply, received_at),
               arg_min(rationale, received_at)
        FROM judge_replies
        WHERE fingerprint = ? AND status = 'ok' AND prompt_hash IN (SELECT unnest(?::VARCHAR[]))
        GROUP BY prompt_hash
    """
    with study.connect() as con:
        rows = con.execute(sql, [fingerprint, wanted]).fetchall()
    return {r[0]: CachedReply(r[1], r[2], r[3]) for r in rows}


# --- writes -------------------------------------------------------------------------------------------


def register_config(study: Study, config: JudgeConfig) -> None:
    """Record the frozen configuration under its fingerprint (first use wins; the payload is immutable)."""
    with study.write() as con:
        _register_config(con, config)


def _register_config(con: duckdb.DuckDBPyConnection, config: JudgeConfig) -> None:
    con.execute(
        """
            INSERT INTO judge_configs
                (fingerprint, model, shape, temperature, max_tokens, seed, template_version, config,
                 standin, first_used)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, false, ?)
            ON CONFLICT (fingerprint) DO NOTHING
            """,
        [
            config.fingerprint,
            config.model,
            config.shape,
            config.temperature,
            config.max_tokens,
            config.seed,
            config.fingerprint_payload()["template_version"],
            json.dumps(config.fingerprint_payload(), sort_keys=True, ensure_ascii=False),
            utcnow(),
        ],
    )


def _mark_standin(con: duckdb.DuckDBPyConnection, fingerprint: str) -> None:
    con.execute(
        "UPDATE judge_configs SET standin = true WHERE fingerprint = ? AND NOT standin", [fingerprint]
    )


def write_judged(
    study: Study,
    replies: Sequence[ReplyRecord],
    verdicts: Sequence[VerdictRecord],
    *,
    standin_fingerprint: str | None = None,
    also: InTransaction | None = None,
) -> None:
    """Append raw replies and upsert verdicts in one transaction.

    An ``ok`` verdict is never replaced (so a verdict is never duplicated or rewritten by a re-run); an
    ``error`` verdict is replaced by whatever the later attempt got. ``also`` runs in the same transaction
    (batch mode marks a submission collected with the results it brought).
    """
    with study.write() as con:
        _write_judged(con, replies, verdicts)
        if standin_fingerprint is not None:
            _mark_standin(con, standin_fingerprint)
        if also is not None:
            also(con)


def _write_judged(
    con: duckdb.DuckDBPyConnection, replies: Sequence[ReplyRecord], verdicts: Sequence[VerdictRecord]
) -> None:
    # One statement cannot update the same key twice: keep one record per key, preferring ok.
    by_key: dict[tuple[str, str], VerdictRecord] = {}
    for v in verdicts:
        key = (v.row_id, v.fingerprint)
        if key not in by_key or v.status == OK:
            by_key[key] = v
    if replies:
        con.register("mcq_batch_replies", _table(replies, "reply"))
        con.execute(
            """
            INSERT INTO judge_replies
                (fingerprint, prompt_hash, status, reply, value, rationale, error, base_url,
                 tokens_in, tokens_out, received_at)
            SELECT fingerprint, prompt_hash, status, reply, value, rationale, error, base_url,
                   tokens_in, tokens_out, received_at
            FROM mcq_batch_replies
            """
        )
        con.unregister("mcq_batch_replies")
    if by_key:
        con.register("mcq_batch_verdicts", _table(list(by_key.values()), "verdict"))
        written = con.execute(
            """
            INSERT INTO judge_verdicts
                (row_id, fingerprint, status, letter, verdict, reply, rationale, error, prompt_hash,
                 base_url, attempts, judged_at)
            SELECT row_id, fingerprint, status, letter, verdict, reply, rationale, error, prompt_hash,
                   base_url, attempts, judged_at
            FROM mcq_batch_verdicts
            ON CONFLICT (row_id, fingerprint) DO UPDATE SET
                status = excluded.status, letter = excluded.letter, verdict = excluded.verdict,
                reply = excluded.reply, rationale = excluded.rationale, error = excluded.error,
                prompt_hash = excluded.prompt_hash, base_url = excluded.base_url,
                attempts = excluded.attempts, judged_at = excluded.judged_at
            WHERE judge_verdicts.status <> 'ok'
            RETURNING row_id, fingerprint, judged_at
            """
        ).fetchall()
        con.unregister("mcq_batch_verdicts")
        panel = {r[0] for r in con.execute("SELECT fingerprint FROM panel_judges").fetchall()}
        # a panel judge's verdicts are stored beside the final ones, never in them
        _advance_current(con, [(by_key[(r, fp)], at) for r, fp, at in written if fp not in panel])


# --- verdicts that come with the input (mcqaudit.inspect's scorer, docs/design.md §10) -----------------


@dataclass(frozen=True)
class LoadedRow:
    """A row one load wrote, with what its judge prompt is rendered from (docs/design.md §5)."""

    row_id: str
    line: int  # the row's line (a framework log's record number) in its file
    question: str
    options: tuple[str, ...]
    gold_letter: str
    answer: str
    needs_judge: bool  # neither the pre-filter nor the rule resolved it


def loaded_rows(con: duckdb.DuckDBPyConnection, ingest_id: int) -> dict[int, LoadedRow]:
    """The rows load ``ingest_id`` wrote, by line (inside the load's transaction)."""
    got = con.execute(
        """SELECT row_id, source_line, question, options, gold_letter, coalesce(answer, generation),
                  needs_judge(strict_letter, is_blank)
           FROM gen_rows WHERE ingest_id = ? AND source_line IS NOT NULL""",
        [ingest_id],
    ).fetchall()
    return {int(r[1]): LoadedRow(r[0], int(r[1]), r[2], tuple(r[3]), r[4], r[5], bool(r[6])) for r in got}


def write_imported(
    con: duckdb.DuckDBPyConnection,
    configs: Sequence[JudgeConfig],
    replies: Sequence[ReplyRecord],
    verdicts: Sequence[VerdictRecord],
) -> None:
    """Judge verdicts that came with the input, in the load's own transaction: each configuration registered
    under its fingerprint, the raw replies appended, the verdicts upserted as :func:`write_judged` does (an
    ok verdict is never replaced)."""
    for config in configs:
        _register_config(con, config)
    _write_judged(con, replies, verdicts)


# Above this many rows a batch re-derives current_judge with one scan of judge_verdicts; below it, by index
# lookups on current_judge (a scan of a million verdicts costs ~50 ms, one lookup of 64 rows ~4 ms).
_LOOKUP_MAX_ROWS = 2048


def _advance_current(
    con: duckdb.DuckDBPyConnection, written: Sequence[tuple[VerdictRecord, datetime]]
) -> None:
    """Bring ``current_judge`` up to date with the verdicts a batch wrote (with their stored ``judged_at``).

    The current outcome of a row is its latest verdict by ``judged_at``, ties to the smaller fingerprint
    (:data:`mcqaudit.store.schema.CURRENT_JUDGE_COLUMNS`). A new verdict can only become current or lose to
    the current one, except when it replaced the current verdict itself with an earlier time (a replayed
    reply): then another fingerprint's verdict may win, and those rows are re-derived from judge_verdicts.
    """
    if not written:
        return
    by_row: dict[str, list[tuple[VerdictRecord, datetime]]] = {}
    for rec, at in written:
        by_row.setdefault(rec.row_id, []).append((rec, at))
    rows = sorted(by_row)
    if len(rows) > _LOOKUP_MAX_ROWS:
        refresh_current_judge(con, ROWS_IN_LIST, [rows])
        return
    marks = ", ".join("?" * len(rows))
    old = {
        r: (fp, at)
        for r, fp, at in con.execute(
            f"SELECT row_id, fingerprint, judged_at FROM current_judge WHERE row_id IN ({marks})", rows
        ).fetchall()
    }

    def rank(fp: str, at: datetime) -> tuple[datetime, _Desc]:
        return (at, _Desc(fp))  # later first, then the smaller fingerprint

    new: list[VerdictRecord] = []
    rederive: list[str] = []
    for r in rows:
        recs = by_row[r]
        best, best_at = max(recs, key=lambda x: rank(x[0].fingerprint, x[1]))
        cur = old.get(r)
        if cur is not None:
            cur_fp, cur_at = cur
            replaced = next((at for rec, at in recs if rec.fingerprint == cur_fp), None)
            if replaced is not None and replaced < cur_at:
                rederive.append(r)
                continue
            if replaced is None and rank(cur_fp, cur_at) > rank(best.fingerprint, best_at):
                continue  # the current verdict stays
        new.append(best)
    if new:
        marks = ", ".join("?" * len(new))
        con.execute(f"DELETE FROM current_judge WHERE row_id IN ({marks})", [v.row_id for v in new])
        con.register("mcq_batch_current", _table(new, "verdict"))
        con.execute(
            f"INSERT INTO current_judge ({CURRENT_JUDGE_COLUMNS}) SELECT {CURRENT_JUDGE_COLUMNS} FROM mcq_batch_current"
        )
        con.unregister("mcq_batch_current")
    if rederive:
        refresh_current_judge(con, ROWS_IN_LIST, [rederive])


class _Desc:
    """A string that sorts in reverse (so one ``max`` picks the latest time, then the smallest fingerprint)."""

    __slots__ = ("s",)

    def __init__(self, s: str) -> None:
        self.s = s

    def __lt__(self, other: _Desc) -> bool:
        return self.s > other.s

    def __gt__(self, other: _Desc) -> bool:
        return self.s < other.s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.s == other.s

    def __hash__(self) -> int:
        return hash(self.s)


def set_unaudited(study: Study, unaudited: bool) -> None:
    """`--no-judge` marks the study unaudited; a later real judge run clears the mark."""
    with study.write() as con:
        set_meta(con, UNAUDITED_KEY, "true" if unaudited else None)


def mark_audited(con: duckdb.DuckDBPyConnection) -> None:
    """The unaudited mark cleared inside a caller's transaction (a real judge run's last write)."""
    set_meta(con, UNAUDITED_KEY, None)


def is_standin(study: Study, fingerprint: str) -> bool:
    rows = study.query("SELECT standin FROM judge_configs WHERE fingerprint = ?", [fingerprint])
    return bool(rows and rows[0][0])


def is_unaudited(study: Study) -> bool:
    return study.get_meta(UNAUDITED_KEY) == "true"


# --- reading back -------------------------------------------------------------------------------------


class FingerprintSummary(TypedDict):
    """One judge configuration of the study and what it graded (a row of :func:`fingerprint_summary`)."""

    fingerprint: str
    model: str
    shape: str
    temperature: float
    max_tokens: int
    seed: int
    template_version: str
    standin: bool
    first_used: datetime
    rationale: bool
    sees_reasoning: bool
    # primary: final verdicts come from it (for some row); panel: `grade --panel`, beside them; superseded:
    # its verdicts were replaced by a later primary configuration's
    role: str
    base_urls: list[str]
    arms: list[str]
    rows_ok: int
    rows_error: int


def fingerprint_summary(study: Study) -> list[FingerprintSummary]:
    """One entry per judge configuration used in the study, oldest first (for `mcqaudit info`)."""
    sql = """
        WITH v AS (
            SELECT v.fingerprint, v.status, v.base_url, g.arm
            FROM judge_verdicts v LEFT JOIN gen_rows g USING (row_id)
        ), agg AS (
            SELECT fingerprint,
                   list(DISTINCT base_url ORDER BY base_url) FILTER (WHERE base_url IS NOT NULL) AS base_urls,
                   list(DISTINCT arm ORDER BY arm) FILTER (WHERE arm IS NOT NULL) AS arms,
                   count(*) FILTER (WHERE status = 'ok') AS rows_ok,
                   count(*) FILTER (WHERE status = 'error') AS rows_error
            FROM v GROUP BY fingerprint
        )
        SELECT c.fingerprint, c.model, c.shape, c.temperature, c.max_tokens, c.seed, c.template_version,
               c.standin, c.first_used,
               -- the payload holds "rationale" only when it is on (older configurations never have it)
               coalesce(json_extract_string(c.config, '$.rationale') = 'true', false) AS rationale,
               coalesce(json_extract_string(c.config, '$.sees_reasoning') = 'true', false) AS sees_reasoning,
               CASE WHEN c.fingerprint IN (SELECT fingerprint FROM panel_judges) THEN 'panel'
                    WHEN c.fingerprint IN (SELECT fingerprint FROM current_judge) THEN 'primary'
                    ELSE 'superseded' END AS role,
               coalesce(a.base_urls, []) AS base_urls, coalesce(a.arms, []) AS arms,
               coalesce(a.rows_ok, 0) AS rows_ok, coalesce(a.rows_error, 0) AS rows_error
        FROM judge_configs c LEFT JOIN agg a USING (fingerprint)
        ORDER BY c.first_used, c.fingerprint
    """
    out: list[FingerprintSummary] = []
    for d in study.query_records(sql):
        out.append(
            FingerprintSummary(
                fingerprint=d["fingerprint"],
                model=d["model"],
                shape=d["shape"],
                temperature=d["temperature"],
                max_tokens=d["max_tokens"],
                seed=d["seed"],
                template_version=d["template_version"],
                standin=d["standin"],
                first_used=d["first_used"],
                rationale=d["rationale"],
                sees_reasoning=d["sees_reasoning"],
                role=d["role"],
                base_urls=list(d["base_urls"] or []),
                arms=list(d["arms"] or []),
                rows_ok=int(d["rows_ok"]),
                rows_error=int(d["rows_error"]),
            )
        )
    return out


class JudgeUsage(TypedDict):
    """What one judge configuration's replies cost, as the endpoint reported it (a row of
    :func:`usage_by_fingerprint`): tokens summed over the replies that reported ``usage``; a reply without it
    is counted in ``requests_without_usage``, never as 0 tokens; ``requests_failed`` got no reply at all."""

    model: str
    prompt_tokens: int
    completion_tokens: int
    requests: int
    requests_without_usage: int
    requests_failed: int


def usage_by_fingerprint(study: Study) -> dict[str, JudgeUsage]:
    """Per judge fingerprint (oldest first), the ``usage`` its replies reported (``judge_replies``: every reply
    ever received, a re-ask and a batch line each one; rows answered from the cache sent nothing and are not
    here). A reply is a record with a legal value, a reply text, tokens, or an illegal-reply error kind; the
    rest are requests that failed without one (HTTP errors, timeouts, failed batch lines). A reply that
    reported only one of its two counts is counted without usage."""
    sql = """
        WITH r AS (
            SELECT fingerprint, tokens_in, tokens_out,
                   status = 'ok' OR reply IS NOT NULL OR tokens_in IS NOT NULL OR tokens_out IS NOT NULL
                       OR list_contains(?, split_part(coalesce(error, ''), ':', 1)) AS replied
            FROM judge_replies
        ), agg AS (
            SELECT fingerprint,
                   sum(tokens_in) FILTER (WHERE replied AND tokens_in IS NOT NULL AND tokens_out IS NOT NULL)
                       AS prompt_tokens,
                   sum(tokens_out) FILTER (WHERE replied AND tokens_in IS NOT NULL AND tokens_out IS NOT NULL)
                       AS completion_tokens,
                   count(*) FILTER (WHERE replied) AS requests,
                   count(*) FILTER (WHERE replied AND (tokens_in IS NULL OR tokens_out IS NULL)) AS without_usage,
                   count(*) FILTER (WHERE NOT replied) AS failed
            FROM r GROUP BY fingerprint
        )
        SELECT c.fingerprint, c.model, coalesce(a.prompt_tokens, 0), coalesce(a.completion_tokens, 0),
               coalesce(a.requests, 0), coalesce(a.without_usage, 0), coalesce(a.failed, 0)
        FROM judge_configs c LEFT JOIN agg a USING (fingerprint)
        ORDER BY c.first_used, c.fingerprint
    """
    out: dict[str, JudgeUsage] = {}
    for fp, model, p_tok, c_tok, n, unknown, failed in study.query(sql, [list(REPLY_ERROR_KINDS)]):
        out[fp] = JudgeUsage(
            model=model,
            prompt_tokens=int(p_tok),
            completion_tokens=int(c_tok),
            requests=int(n),
            requests_without_usage=int(unknown),
            requests_failed=int(failed),
        )
    return out
