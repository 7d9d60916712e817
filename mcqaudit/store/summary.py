"""SQL behind `mcqaudit info`: what a study holds."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mcqaudit.store.db import Study


@dataclass
class StudySummary:
    path: str
    created: str | None
    control_arm: str | None
    unaudited: bool
    arms: list[str]
    items: int
    rows: int
    orientations: list[str]
    rows_by_arm_orientation: pd.DataFrame  # arm x orientation counts
    parser_coverage: pd.DataFrame  # parser, rows with a letter, share
    verdicts: pd.DataFrame  # arm x verdict_source/judge_status counts
    rejected: pd.DataFrame  # source, line, field, reason (latest first, capped)
    rejected_total: int
    ingests: pd.DataFrame


def summarise(study: Study, rejected_cap: int = 20) -> StudySummary:
    with study.connect() as con:
        arms = [r[0] for r in con.execute("SELECT arm FROM arms ORDER BY ordinal").fetchall()]
        items = con.execute("SELECT count(*) FROM items").fetchone()[0]  # type: ignore[index]
        rows = con.execute("SELECT count(*) FROM gen_rows").fetchone()[0]  # type: ignore[index]
        orientations = [
            r[0]
            for r in con.execute(
                "SELECT orientation FROM gen_rows GROUP BY orientation ORDER BY length(orientation), orientation"
            ).fetchall()
        ]
        by = con.execute(
            """
            SELECT g.arm, g.orientation, count(*) AS n, min(a.ordinal) AS ord FROM gen_rows g JOIN arms a USING (arm)
            GROUP BY g.arm, g.orientation ORDER BY ord, length(g.orientation), g.orientation
            """
        ).df()
        cov = con.execute(
            """
            SELECT parser, count(letter) AS rows_with_letter, count(*) AS rows,
                   round(count(letter) / count(*), 4) AS share
            FROM (
                SELECT 'strict' AS parser, strict_letter AS letter FROM gen_rows
                UNION ALL SELECT 'naive', naive_letter FROM gen_rows
                UNION ALL SELECT 'user', user_letter FROM gen_rows
                UNION ALL SELECT parser, letter FROM parser_letters
            ) GROUP BY parser ORDER BY parser
            """
        ).df()
        verdicts = con.execute(
            """
            SELECT arm, coalesce(verdict_source, 'ungraded (' || judge_status || ')') AS source,
                   count(*) FILTER (final_verdict = 'CORRECT') AS correct,
                   count(*) FILTER (final_verdict = 'INCORRECT') AS incorrect,
                   count(*) FILTER (final_verdict = 'OTHER') AS other,
                   count(*) AS rows
            FROM graded_rows GROUP BY ALL ORDER BY arm, source
            """
        ).df()
        rejected_total = con.execute("SELECT count(*) FROM rejected_rows").fetchone()[0]  # type: ignore[index]
        rejected = con.execute(
            "SELECT source, line, field, reason FROM rejected_rows ORDER BY ingest_id DESC, line LIMIT ?",
            [rejected_cap],
        ).df()
        ingests = con.execute(
            "SELECT ingest_id, source, format, rows_loaded, rows_unchanged, rows_replaced, rows_rejected, finished_at "
            "FROM ingests ORDER BY ingest_id"
        ).df()
        meta = dict(con.execute("SELECT key, value FROM study_meta").fetchall())
    if not by.empty:
        # counts stay integers (a mean-aggregating pivot printed 299.0)
        by = by.pivot_table(
            index="arm", columns="orientation", values="n", aggfunc="sum", fill_value=0, sort=False
        ).astype("int64")
    return StudySummary(
        path=str(study.path),
        created=meta.get("created"),
        control_arm=meta.get("control_arm"),
        unaudited=meta.get("unaudited") == "true",
        arms=arms,
        items=int(items),
        rows=int(rows),
        orientations=orientations,
        rows_by_arm_orientation=by,
        parser_coverage=cov,
        verdicts=verdicts,
        rejected=rejected,
        rejected_total=int(rejected_total),
        ingests=ingests,
    )
