"""The study file's schema as numbered migrations (SQL text), and the public `graded_rows` view (DESIGN §6).

Each migration runs once, in order, inside one transaction; `schema_migrations` records which ran.
The views are re-created by every migration that changes them.
"""

from __future__ import annotations

GRADED_ROWS_VIEW = """
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

CREATE OR REPLACE VIEW graded_rows AS
WITH base AS (
    SELECT
        g.row_id, g.arm, g.item_id, g.orientation, g.sample, g.question, g.options, g.gold_letter,
        g.options[ascii(g.gold_letter) - 64] AS gold_option,
        g.generation, g.prompt, g.user_letter, g.naive_letter, g.strict_letter,
        j.letter AS judge_letter,
        CASE WHEN j.status = 'ok' THEN j.verdict END AS judge_verdict,
        CASE
            WHEN g.is_blank OR g.strict_letter IS NOT NULL THEN coalesce(j.status, 'skipped')
            ELSE coalesce(j.status, 'pending')
        END AS judge_status,
        j.reply AS judge_reply, j.rationale AS judge_rationale, j.fingerprint AS judge_fingerprint,
        r.verdict AS review_verdict, r.reviewer, r.created_at AS reviewed_at,
        r.picked_letter AS review_letter,
        CASE WHEN g.is_blank THEN 'OTHER' END AS rule_verdict,
        CASE
            WHEN g.strict_letter IS NULL THEN NULL
            WHEN g.strict_letter = g.gold_letter THEN 'CORRECT' ELSE 'INCORRECT'
        END AS prefilter_verdict
    FROM gen_rows g
    LEFT JOIN current_judge j USING (row_id)
    LEFT JOIN effective_reviews r USING (row_id)
), decided AS (
    SELECT *,
        CASE
            WHEN review_verdict IS NOT NULL THEN 'review'
            WHEN judge_verdict IS NOT NULL THEN 'judge'
            WHEN prefilter_verdict IS NOT NULL THEN 'prefilter'
            WHEN rule_verdict IS NOT NULL THEN 'rule'
        END AS verdict_source
    FROM base
), picked AS (
    SELECT *,
        CASE verdict_source
            WHEN 'review' THEN review_verdict
            WHEN 'judge' THEN judge_verdict
            WHEN 'prefilter' THEN prefilter_verdict
            WHEN 'rule' THEN rule_verdict
        END AS final_verdict,
        CASE verdict_source
            WHEN 'review' THEN review_letter
            WHEN 'judge' THEN judge_letter
            WHEN 'prefilter' THEN strict_letter
        END AS picked_letter
    FROM decided
)
SELECT
    row_id, arm, item_id, orientation, sample, question, options, gold_letter, gold_option,
    generation, prompt, user_letter, naive_letter, strict_letter, judge_letter, judge_verdict, judge_status,
    judge_reply, judge_rationale, judge_fingerprint, review_verdict, reviewer, reviewed_at, final_verdict,
    verdict_source, picked_letter,
    CASE WHEN picked_letter IS NOT NULL THEN options[ascii(picked_letter) - 64] END AS picked_option,
    CASE WHEN picked_letter IS NOT NULL THEN ascii(picked_letter) - 65 END AS picked_position
FROM picked;
"""

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

    -- letters of the known framework patterns (DESIGN §4); one row per (row, parser), letter NULL = no match
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
    + GRADED_ROWS_VIEW,
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
]
