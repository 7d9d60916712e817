"""The study file's schema as numbered migrations (SQL text), the rules as SQL macros, and the public
`graded_rows` view (docs/design.md §6).

Each migration runs once, in order, inside one transaction; `schema_migrations` records which ran.
The views are re-created by every migration that changes them.

``graded_rows`` joins ``gen_rows`` with two tables of one row per row that the writers keep up to date in
the transaction of each write (migration 6; they were read-time window views before): ``current_judge``, the
row's latest judge outcome, and ``effective_reviews``, its review in force (:func:`refresh_current_judge`,
:func:`refresh_effective_reviews`; the rules are stated above ``CURRENT_JUDGE_COLUMNS``).

The rules (docs/design.md §1) live here once, as macros every query calls (the view, :mod:`~mcqaudit.store.frames`,
:mod:`~mcqaudit.store.rows`, :mod:`~mcqaudit.store.reviews`, :mod:`~mcqaudit.store.loading`):

- ``verdict_of(letter, gold)``: the verdict a picked letter implies (gold → CORRECT, another → INCORRECT,
  none → OTHER); Python twin :func:`mcqaudit.vocab.verdict_of`.
- ``is_blank(text)``: nothing but what Python's ``str.strip()`` removes (OTHER by rule, never judged);
  Python twin :func:`mcqaudit.vocab.is_blank`.
- ``needs_judge(strict_letter, blank)``: a row goes to the judge unless the pre-filter or the rule resolved
  it (``judge_status`` is then ``skipped`` until a judge answers anyway).
- ``verdict_source(review_verdict, judge_verdict, strict_letter, blank)``: the final-verdict precedence —
  latest review, else judge, else strict pre-filter, else rule; NULL while the row has no verdict.
- ``final_verdict(review_verdict, judge_verdict, strict_letter, gold, blank)`` and
  ``picked_letter(review_verdict, review_letter, judge_verdict, judge_letter, strict_letter)``: the verdict
  and letter of that source. Pass NULL reviews for the automated verdict alone (frames' ``judge`` view).

A change to a rule is a new migration that re-runs ``RULE_MACROS`` (and the view, if it changes).
"""

from __future__ import annotations

from collections.abc import Sequence

from duckdb import DuckDBPyConnection

from mcqaudit.parsers import WS
from mcqaudit.vocab import (
    CORRECT,
    INCORRECT,
    OTHER,
    SOURCE_JUDGE,
    SOURCE_PREFILTER,
    SOURCE_REVIEW,
    SOURCE_RULE,
)

_FIRST_VIEWS = """
CREATE OR REPLACE VIEW current_judge AS
SELECT * EXCLUDE (rn) FROM (
    SELECT jv.*, row_number() OVER (PARTITION BY row_id ORDER BY judged_at DESC, fingerprint) AS rn
    FROM judge_verdicts jv
) WHERE rn = 1;

CREATE OR REPLACE VIEW effective_reviews AS
SELECT * EXCLUDE (rn) FROM (
    SELECT r.*, row_number() OVER (PARTITION BY row_id ORDER BY review_id DESC) AS rn
    FROM reviews r
    WHERE r.action <> 'retract'
      AND r.review_id NOT IN (SELECT retracts FROM reviews WHERE action = 'retract' AND retracts IS NOT NULL)
) WHERE rn = 1;
"""

# the rules, once (see the module docstring); every name is CREATE OR REPLACE, so a later migration re-runs it
RULE_MACROS = f"""
CREATE OR REPLACE MACRO verdict_of(letter, gold) AS
    CASE WHEN letter IS NULL THEN '{OTHER}' WHEN letter = gold THEN '{CORRECT}' ELSE '{INCORRECT}' END;

CREATE OR REPLACE MACRO is_blank(text) AS regexp_full_match(text, '{WS}*');

CREATE OR REPLACE MACRO needs_judge(strict_letter, blank) AS NOT blank AND strict_letter IS NULL;

CREATE OR REPLACE MACRO verdict_source(review_verdict, judge_verdict, strict_letter, blank) AS
    CASE
        WHEN review_verdict IS NOT NULL THEN '{SOURCE_REVIEW}'
        WHEN judge_verdict IS NOT NULL THEN '{SOURCE_JUDGE}'
        WHEN strict_letter IS NOT NULL THEN '{SOURCE_PREFILTER}'
        WHEN blank THEN '{SOURCE_RULE}'
    END;

CREATE OR REPLACE MACRO final_verdict(review_verdict, judge_verdict, strict_letter, gold, blank) AS
    -- the verdict of verdict_source(...), spelled as one coalesce (a CASE over that CASE's text cost
    -- a quarter of a graded_rows scan)
    coalesce(
        review_verdict,
        judge_verdict,
        CASE WHEN strict_letter IS NOT NULL THEN verdict_of(strict_letter, gold) WHEN blank THEN '{OTHER}' END
    );

CREATE OR REPLACE MACRO picked_letter(review_verdict, review_letter, judge_verdict, judge_letter, strict_letter) AS
    -- the letter of that source; the rule picks none, and then strict_letter is NULL too
    CASE
        WHEN review_verdict IS NOT NULL THEN review_letter
        WHEN judge_verdict IS NOT NULL THEN judge_letter
        ELSE strict_letter
    END;
"""

GRADED_ROWS_VIEW = """
CREATE OR REPLACE VIEW graded_rows AS
WITH base AS (
    SELECT
        g.row_id, g.arm, g.item_id, g.orientation, g.sample, g.question, g.options, g.gold_letter,
        g.options[ascii(g.gold_letter) - 64] AS gold_option,
        g.generation, g.prompt, g.user_letter, g.naive_letter, g.strict_letter, g.is_blank,
        coalesce(g.answer, g.generation) AS answer, g.reasoning, g.finish_reason, g.truncated,
        j.letter AS judge_letter,
        CASE WHEN j.status = 'ok' THEN j.verdict END AS judge_verdict,
        coalesce(j.status, CASE WHEN needs_judge(g.strict_letter, g.is_blank) THEN 'pending' ELSE 'skipped' END)
            AS judge_status,
        j.reply AS judge_reply, j.rationale AS judge_rationale, j.fingerprint AS judge_fingerprint,
        r.verdict AS review_verdict, r.reviewer, r.created_at AS reviewed_at,
        r.picked_letter AS review_letter
    FROM gen_rows g
    LEFT JOIN current_judge j USING (row_id)
    LEFT JOIN effective_reviews r USING (row_id)
), picked AS (
    SELECT *,
        final_verdict(review_verdict, judge_verdict, strict_letter, gold_letter, is_blank) AS final_verdict,
        verdict_source(review_verdict, judge_verdict, strict_letter, is_blank) AS verdict_source,
        picked_letter(review_verdict, review_letter, judge_verdict, judge_letter, strict_letter) AS picked_letter
    FROM base
)
SELECT
    row_id, arm, item_id, orientation, sample, question, options, gold_letter, gold_option,
    generation, prompt, user_letter, naive_letter, strict_letter, judge_letter, judge_verdict, judge_status,
    judge_reply, judge_rationale, judge_fingerprint, review_verdict, reviewer, reviewed_at, final_verdict,
    verdict_source, picked_letter,
    CASE WHEN picked_letter IS NOT NULL THEN options[ascii(picked_letter) - 64] END AS picked_option,
    CASE WHEN picked_letter IS NOT NULL THEN ascii(picked_letter) - 65 END AS picked_position,
    answer, reasoning, finish_reason, truncated
FROM picked;
"""

# graded_rows as migrations 4 and 6 made it, before gen_rows had the answer's columns (migration 9)
_REASONING_BASE = "        coalesce(g.answer, g.generation) AS answer, g.reasoning, g.finish_reason, g.truncated,\n"
_REASONING_OUT = ",\n    answer, reasoning, finish_reason, truncated\nFROM picked;"
GRADED_ROWS_VIEW_V8 = GRADED_ROWS_VIEW.replace(_REASONING_BASE, "").replace(_REASONING_OUT, "\nFROM picked;")
if "answer" in GRADED_ROWS_VIEW_V8:
    raise AssertionError("GRADED_ROWS_VIEW changed: update GRADED_ROWS_VIEW_V8")

# The current judge outcome and the effective review of each row, as the tables of migration 6 hold them.
# Writers keep them up to date in the transaction that changes judge_verdicts or reviews
# (:func:`refresh_current_judge`, :func:`refresh_effective_reviews`); these are the rules they apply (the
# definitions of migrations 1 and 2, which computed them at read time):
# - the current judge outcome is the latest by judged_at, ties broken by fingerprint;
# - the effective review is the latest confirm/override that no retraction withdraws, by created_at, ties
#   broken by the later review_id (an imported log keeps its own, older times).
CURRENT_JUDGE_COLUMNS = (
    "row_id, fingerprint, status, letter, verdict, reply, rationale, error, prompt_hash, base_url, "
    "attempts, judged_at"
)
EFFECTIVE_REVIEW_COLUMNS = (
    "review_id, row_id, action, verdict, picked_letter, note, reviewer, created_at, prior_verdict, prior_source, "
    "fingerprint, retracts, queue_id, origin"
)
# - a panel judge's verdicts (`grade --panel`, the fingerprints in panel_judges, migration 10) are stored
#   beside the final ones, never in them: they are no current judge outcome.
_CURRENT_JUDGE_SELECT_V6 = f"""
SELECT {CURRENT_JUDGE_COLUMNS} FROM judge_verdicts
WHERE {{scope}}
QUALIFY row_number() OVER (PARTITION BY row_id ORDER BY judged_at DESC, fingerprint) = 1
"""
_CURRENT_JUDGE_SELECT = f"""
SELECT {CURRENT_JUDGE_COLUMNS} FROM judge_verdicts
WHERE ({{scope}}) AND fingerprint NOT IN (SELECT fingerprint FROM panel_judges)
QUALIFY row_number() OVER (PARTITION BY row_id ORDER BY judged_at DESC, fingerprint) = 1
"""
_EFFECTIVE_REVIEW_SELECT = f"""
SELECT {EFFECTIVE_REVIEW_COLUMNS} FROM reviews
WHERE action <> 'retract'
  AND review_id NOT IN (SELECT retracts FROM reviews WHERE action = 'retract' AND retracts IS NOT NULL)
  AND {{scope}}
QUALIFY row_number() OVER (PARTITION BY row_id ORDER BY created_at DESC, review_id DESC) = 1
"""


def refresh_current_judge(con: DuckDBPyConnection, scope: str = "true", params: Sequence[object] = ()) -> None:
    """Re-derive ``current_judge`` for the rows that ``scope`` (a condition on ``row_id``, with ``params``)
    selects, from ``judge_verdicts``; call it in the transaction that changed their verdicts."""
    con.execute(f"DELETE FROM current_judge WHERE {scope}", list(params))
    con.execute(
        f"INSERT INTO current_judge ({CURRENT_JUDGE_COLUMNS}) " + _CURRENT_JUDGE_SELECT.format(scope=scope),
        list(params),
    )


def refresh_effective_reviews(
    con: DuckDBPyConnection, scope: str = "true", params: Sequence[object] = ()
) -> None:
    """Re-derive ``effective_reviews`` for the rows that ``scope`` (a condition on ``row_id``, with
    ``params``) selects, from ``reviews``; call it in the transaction that added their reviews."""
    con.execute(f"DELETE FROM effective_reviews WHERE {scope}", list(params))
    con.execute(
        f"INSERT INTO effective_reviews ({EFFECTIVE_REVIEW_COLUMNS}) "
        + _EFFECTIVE_REVIEW_SELECT.format(scope=scope),
        list(params),
    )


def rebuild_current(con: DuckDBPyConnection) -> None:
    """Re-derive both maintained tables for every row: for code that writes judge_verdicts or reviews with its
    own SQL (test builders, benchmarks) instead of through :mod:`~mcqaudit.store.judging` and
    :mod:`~mcqaudit.store.reviews`."""
    refresh_current_judge(con)
    refresh_effective_reviews(con)


# a scope over a list of row ids (the one parameter)
ROWS_IN_LIST = "row_id IN (SELECT unnest(?::VARCHAR[]))"

# 5: the current judge outcome and the effective review are tables that the writers maintain (they were views
# with a window over every reply and review, computed on every read of graded_rows), backfilled here.
_MIGRATION_6 = (
    """
    DROP VIEW graded_rows;
    DROP VIEW current_judge;
    DROP VIEW effective_reviews;
    -- judge_verdicts' columns; one row per row that has any judge outcome
    CREATE TABLE current_judge (
        row_id VARCHAR PRIMARY KEY,
        fingerprint VARCHAR NOT NULL,
        status VARCHAR NOT NULL,
        letter VARCHAR,
        verdict VARCHAR,
        reply VARCHAR,
        rationale VARCHAR,
        error VARCHAR,
        prompt_hash VARCHAR,
        base_url VARCHAR,
        attempts INTEGER,
        judged_at TIMESTAMPTZ NOT NULL
    );
    -- reviews' columns; one row per row that has an effective review
    CREATE TABLE effective_reviews (
        review_id BIGINT NOT NULL,
        row_id VARCHAR PRIMARY KEY,
        action VARCHAR NOT NULL,
        verdict VARCHAR,
        picked_letter VARCHAR,
        note VARCHAR,
        reviewer VARCHAR NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        prior_verdict VARCHAR,
        prior_source VARCHAR,
        fingerprint VARCHAR,
        retracts BIGINT,
        queue_id INTEGER,
        origin VARCHAR
    );
    """
    + f"INSERT INTO current_judge ({CURRENT_JUDGE_COLUMNS}) "
    + _CURRENT_JUDGE_SELECT_V6.format(scope="true")
    + ";\n"
    + f"INSERT INTO effective_reviews ({EFFECTIVE_REVIEW_COLUMNS}) "
    + _EFFECTIVE_REVIEW_SELECT.format(scope="true")
    + ";\n"
)

MIGRATIONS: list[str] = [
    # 1: the whole first schema
    """
    CREATE TABLE study_meta (key VARCHAR PRIMARY KEY, value VARCHAR);

    CREATE SEQUENCE ingest_seq START 1;
    CREATE TABLE ingests (
        ingest_id INTEGER PRIMARY KEY,
        source VARCHAR NOT NULL,
        format VARCHAR NOT NULL,
        rows_loaded BIGINT,
        rows_unchanged BIGINT,
        rows_replaced BIGINT,
        rows_rejected BIGINT,
        finished_at TIMESTAMPTZ
    );

    CREATE TABLE arms (arm VARCHAR PRIMARY KEY, ordinal INTEGER NOT NULL, first_ingest INTEGER);

    CREATE TABLE items (
        item_id VARCHAR PRIMARY KEY,
        question VARCHAR NOT NULL,
        options VARCHAR[] NOT NULL,      -- canonical order, fixed the first time the study sees the item
        gold_index INTEGER,              -- canonical gold index, when known
        metadata JSON,
        origin VARCHAR NOT NULL          -- 'items' (from --items) or 'first-row'
    );

    CREATE TABLE gen_rows (
        row_id VARCHAR PRIMARY KEY,
        arm VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        orientation VARCHAR NOT NULL,
        sample INTEGER NOT NULL,
        question VARCHAR NOT NULL,
        options VARCHAR[] NOT NULL,      -- displayed order
        gold_letter VARCHAR NOT NULL,    -- displayed letter
        generation VARCHAR NOT NULL,
        is_blank BOOLEAN NOT NULL,
        prompt VARCHAR,
        model VARCHAR,
        metadata JSON,
        option_logprobs JSON,
        user_letter VARCHAR,
        naive_letter VARCHAR,
        strict_letter VARCHAR,
        ingest_id INTEGER NOT NULL,
        source_line BIGINT
    );

    -- letters of the known framework patterns (docs/design.md §4); one row per (row, parser), letter NULL = no match
    CREATE TABLE parser_letters (
        row_id VARCHAR NOT NULL,
        parser VARCHAR NOT NULL,
        letter VARCHAR,
        PRIMARY KEY (row_id, parser)
    );

    CREATE TABLE rejected_rows (
        ingest_id INTEGER NOT NULL,
        source VARCHAR NOT NULL,
        line BIGINT,
        field VARCHAR,
        reason VARCHAR NOT NULL,
        raw VARCHAR
    );

    CREATE TABLE judge_configs (
        fingerprint VARCHAR PRIMARY KEY,
        model VARCHAR NOT NULL,
        shape VARCHAR NOT NULL,
        temperature DOUBLE NOT NULL,
        max_tokens INTEGER,
        seed INTEGER,
        template_version VARCHAR,
        config JSON NOT NULL,            -- the full fingerprint payload (template text, exemplars, ...)
        standin BOOLEAN NOT NULL DEFAULT false,
        first_used TIMESTAMPTZ
    );

    -- the current judge outcome per (row, fingerprint); re-runs replace error rows only
    CREATE TABLE judge_verdicts (
        row_id VARCHAR NOT NULL,
        fingerprint VARCHAR NOT NULL,
        status VARCHAR NOT NULL,         -- ok | error
        letter VARCHAR,
        verdict VARCHAR,
        reply VARCHAR,
        rationale VARCHAR,
        error VARCHAR,
        prompt_hash VARCHAR,
        base_url VARCHAR,
        attempts INTEGER,
        judged_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (row_id, fingerprint)
    );

    -- every raw reply ever received (append-only); the legal ones are the (fingerprint, prompt) cache
    CREATE TABLE judge_replies (
        fingerprint VARCHAR NOT NULL,
        prompt_hash VARCHAR NOT NULL,
        status VARCHAR NOT NULL,
        reply VARCHAR,
        value VARCHAR,                   -- the parsed legal value, NULL when illegal
        rationale VARCHAR,
        error VARCHAR,
        base_url VARCHAR,
        tokens_in INTEGER,
        tokens_out INTEGER,
        received_at TIMESTAMPTZ NOT NULL
    );

    CREATE SEQUENCE review_seq START 1;
    -- append-only: a retraction is a new row pointing at the review it retracts
    CREATE TABLE reviews (
        review_id BIGINT PRIMARY KEY,
        row_id VARCHAR NOT NULL,
        action VARCHAR NOT NULL,         -- confirm | override | retract
        verdict VARCHAR,
        picked_letter VARCHAR,
        note VARCHAR,
        reviewer VARCHAR NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        prior_verdict VARCHAR,
        prior_source VARCHAR,
        fingerprint VARCHAR,
        retracts BIGINT,
        queue_id INTEGER,
        origin VARCHAR                   -- 'dashboard', 'cli', or the imported file
    );

    CREATE SEQUENCE queue_seq START 1;
    CREATE TABLE spot_checks (
        queue_id INTEGER PRIMARY KEY,
        name VARCHAR NOT NULL,
        strategy VARCHAR NOT NULL,       -- uniform | stratified
        seed INTEGER NOT NULL,
        size INTEGER NOT NULL,
        arms VARCHAR[],
        created_by VARCHAR,
        created_at TIMESTAMPTZ NOT NULL
    );
    CREATE TABLE spot_check_rows (
        queue_id INTEGER NOT NULL,
        position INTEGER NOT NULL,
        row_id VARCHAR NOT NULL,
        PRIMARY KEY (queue_id, position)
    );
    """
    + _FIRST_VIEWS,  # graded_rows came here too until migration 4 made it read the rule macros
    # 2: the effective review of a row is the latest by review time (then review_id), not by review_id
    # alone: an imported review log (a collaborator's reviews) gets new review_ids but keeps its times,
    # so without this an older imported review would override a newer local one.
    """
    CREATE OR REPLACE VIEW effective_reviews AS
    SELECT * EXCLUDE (rn) FROM (
        SELECT r.*, row_number() OVER (PARTITION BY row_id ORDER BY created_at DESC, review_id DESC) AS rn
        FROM reviews r
        WHERE r.action <> 'retract'
          AND r.review_id NOT IN (SELECT retracts FROM reviews WHERE action = 'retract' AND retracts IS NOT NULL)
    ) WHERE rn = 1;
    """,
    # 3: spot-check queues record whether `size` was per arm (every queue before this one) or the queue's
    # total, and can be soft-deleted: a deleted queue is hidden and no longer counts as a uniform spot check,
    # while the reviews made in it stay (they are the audit trail).
    """
    ALTER TABLE spot_checks ADD COLUMN per_arm BOOLEAN NOT NULL DEFAULT true;
    ALTER TABLE spot_checks ADD COLUMN deleted_at TIMESTAMPTZ;
    ALTER TABLE spot_checks ADD COLUMN deleted_by VARCHAR;
    """,
    # 4: every rule once, as macros (RULE_MACROS); graded_rows reads them. Blank now means exactly what
    # Python's str.strip() removes (RE2's \s missed \v, U+0085 and \x1c-\x1f, so such a generation went to
    # the judge): rows stored before are re-read with the rule.
    RULE_MACROS
    + """
    UPDATE gen_rows SET is_blank = is_blank(generation) WHERE is_blank IS DISTINCT FROM is_blank(generation);
    """
    + GRADED_ROWS_VIEW_V8,
    # 5 (batch): submissions to the provider's Batch API (`grade --batch`, docs/design.md §5). A submission is
    # recorded once its input file is uploaded, before the batch is created (batch_id NULL until then), so a
    # re-run after a crash polls it, or creates it from the uploaded file, instead of submitting again. Its
    # lines name the prompts it carries: they are not sent again while it is open. Self-contained SQL.
    """
    CREATE TABLE judge_batches (
        input_file_id VARCHAR PRIMARY KEY,
        batch_id VARCHAR,                -- NULL until batches.create answered
        fingerprint VARCHAR NOT NULL,
        base_url VARCHAR,
        lines INTEGER NOT NULL,
        bytes BIGINT NOT NULL,
        status VARCHAR NOT NULL,         -- 'uploaded', then the provider's last status
        submitted_at TIMESTAMPTZ NOT NULL,
        collected_at TIMESTAMPTZ,        -- results written to the study; NULL while the batch is open
        error VARCHAR                    -- why the batch as a whole failed, expired or was lost
    );
    CREATE TABLE judge_batch_lines (
        input_file_id VARCHAR NOT NULL,
        custom_id VARCHAR NOT NULL,      -- the prompt hash
        prompt_hash VARCHAR NOT NULL,
        n_options INTEGER NOT NULL,      -- what the reply is parsed against
        PRIMARY KEY (input_file_id, custom_id)
    );
    """,
    # 6: see _MIGRATION_6 (the maintained current-judge and effective-review tables)
    _MIGRATION_6 + RULE_MACROS + GRADED_ROWS_VIEW_V8,
    # 7: parser_letters without its primary key, stored in (row_id, parser) order. Ingest already makes
    # (row_id, parser) unique (one row per parser for each new row; --replace deletes a row's letters
    # first), while the key's index cost ingest more than its framework regexes did (4 M rows: 5.9 s into
    # the keyed table against 2.7 s sorted, checkpoint included) and answered a one-row lookup in ~24 ms
    # (an ART on the pair is not used for row_id alone), where the sorted table's zone maps take ~1 ms.
    # Each ingest appends its rows in that order (store/loading.py).
    """
    CREATE TABLE parser_letters_v7 (
        row_id VARCHAR NOT NULL,
        parser VARCHAR NOT NULL,
        letter VARCHAR
    );
    INSERT INTO parser_letters_v7 SELECT row_id, parser, letter FROM parser_letters ORDER BY row_id, parser;
    DROP TABLE parser_letters;
    ALTER TABLE parser_letters_v7 RENAME TO parser_letters;
    """,
    # 8: gen_rows without its primary key either, appended in row_id order by each ingest. Ingest itself keeps
    # row_id unique (a duplicate in the input is a rejected line; a row already in the study is unchanged,
    # a conflict or replaced by --replace, which deletes it first: store/loading.py), and the key's index
    # was most of ingest's time: its single-threaded insert and its checkpoint. Row lookups by row_id skip
    # by zone maps over each ingest's sorted run.
    """
    CREATE TABLE gen_rows_v8 (
        row_id VARCHAR NOT NULL,
        arm VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        orientation VARCHAR NOT NULL,
        sample INTEGER NOT NULL,
        question VARCHAR NOT NULL,
        options VARCHAR[] NOT NULL,      -- displayed order
        gold_letter VARCHAR NOT NULL,    -- displayed letter
        generation VARCHAR NOT NULL,
        is_blank BOOLEAN NOT NULL,
        prompt VARCHAR,
        model VARCHAR,
        metadata JSON,
        option_logprobs JSON,
        user_letter VARCHAR,
        naive_letter VARCHAR,
        strict_letter VARCHAR,
        ingest_id INTEGER NOT NULL,
        source_line BIGINT
    );
    INSERT INTO gen_rows_v8 SELECT * FROM gen_rows ORDER BY row_id;
    DROP TABLE gen_rows;
    ALTER TABLE gen_rows_v8 RENAME TO gen_rows;
    """,
    # 9: a reasoning model's answer apart from its thinking (docs/design.md §3). ``answer`` is what the
    # parsers and the judge read, NULL where it is the generation itself (every row stored before: their
    # generations were read whole, as they still are); ``truncated``: finish_reason length, or an opening
    # reasoning block never closed. graded_rows gains answer, reasoning, finish_reason, truncated.
    """
    ALTER TABLE gen_rows ADD COLUMN answer VARCHAR;
    ALTER TABLE gen_rows ADD COLUMN reasoning VARCHAR;
    ALTER TABLE gen_rows ADD COLUMN finish_reason VARCHAR;
    ALTER TABLE gen_rows ADD COLUMN usage JSON;
    ALTER TABLE gen_rows ADD COLUMN truncated BOOLEAN DEFAULT false;
    UPDATE gen_rows SET truncated = false WHERE truncated IS NULL;
    """
    + GRADED_ROWS_VIEW,
    # 10: panel judges (`grade --panel`, docs/design.md §5): configurations whose verdicts are stored in
    # judge_verdicts beside the final ones and never become them (current_judge leaves them out). A
    # fingerprint is registered here before its first verdict is written, in its own transaction.
    """
    CREATE TABLE panel_judges (
        fingerprint VARCHAR PRIMARY KEY,
        added_at TIMESTAMPTZ NOT NULL
    );
    """,
]
