"""SQL for carrying reviews out of the study into a framework's own log (`reviews export --inspect`): the
rows of given (item_id, sample) keys with their current verdicts, and the review log, as typed records
(:mod:`mcqaudit.review.corrections`). Read-only."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pandas as pd

from mcqaudit.review.corrections import LoggedReview, SampleRow
from mcqaudit.store.db import Study
from mcqaudit.store.reviews import review_log


def rows_for_samples(study: Study, keys: Sequence[tuple[str, int]]) -> list[SampleRow]:
    """Rows (every arm) whose (item_id, sample) is one of ``keys``, in arm, item_id, sample order."""
    if not keys:
        return []
    items = [k[0] for k in keys]
    samples = [int(k[1]) for k in keys]
    got = study.query(
        """SELECT g.row_id, g.arm, g.item_id, g.sample, g.question, g.options, g.generation, g.gold_option,
                  g.final_verdict, g.verdict_source, g.picked_option, g.judge_fingerprint
           FROM graded_rows g
           JOIN (SELECT unnest(?::VARCHAR[]) AS item_id, unnest(?::INTEGER[]) AS sample) k
             USING (item_id, sample)
           ORDER BY g.arm, g.item_id, g.sample""",
        [items, samples],
    )
    return [
        SampleRow(
            rid, arm, item, int(sample), question, tuple(options), generation, gold, final, source, picked, fp
        )  # fmt: skip
        for rid, arm, item, sample, question, options, generation, gold, final, source, picked, fp in got
    ]


def _opt(v: object) -> object:
    return None if v is None or (not isinstance(v, list | tuple) and pd.isna(v)) else v


def _str(v: object) -> str | None:
    x = _opt(v)
    return None if x is None else str(x)


def _int(v: object) -> int | None:
    x = _opt(v)
    return None if x is None else int(str(x))


def _utc(v: object) -> datetime:
    ts = v.to_pydatetime() if isinstance(v, pd.Timestamp) else v
    assert isinstance(ts, datetime)
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def logged_reviews(study: Study) -> list[LoggedReview]:
    """Every review ever recorded (retractions included), oldest first."""
    return [
        LoggedReview(
            review_id=int(r["review_id"]),
            row_id=str(r["row_id"]),
            action=str(r["action"]),
            verdict=_str(r["verdict"]),
            picked_letter=_str(r["picked_letter"]),
            note=_str(r["note"]),
            reviewer=str(r["reviewer"]),
            created_at=_utc(r["created_at"]),
            prior_verdict=_str(r["prior_verdict"]),
            prior_source=_str(r["prior_source"]),
            fingerprint=_str(r["fingerprint"]),
            retracts=_int(r["retracts"]),
            queue_id=_int(r["queue_id"]),
            origin=_str(r["origin"]),
        )
        for r in review_log(study).to_dict("records")
    ]
