"""SQL for carrying reviews out of the study into a framework's own log (`reviews export --inspect`): the
rows of given (item_id, sample) keys with their current verdicts. Read-only."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from mcqaudit.store.db import Study


def rows_for_samples(study: Study, keys: Sequence[tuple[str, int]]) -> pd.DataFrame:
    """Rows (every arm) whose (item_id, sample) is one of ``keys``, with what matching them to a log and
    writing their verdicts back needs: content, the final verdict and its source, the picked option."""
    if not keys:
        return pd.DataFrame(
            columns=["row_id", "arm", "item_id", "sample", "orientation", "question", "options", "gold_letter",
                     "gold_option", "generation", "final_verdict", "verdict_source", "picked_letter",
                     "picked_option", "judge_fingerprint"]
        )  # fmt: skip
    items = [k[0] for k in keys]
    samples = [int(k[1]) for k in keys]
    return study.query_df(
        """SELECT g.row_id, g.arm, g.item_id, g.sample, g.orientation, g.question, g.options, g.gold_letter,
                  g.gold_option, g.generation, g.final_verdict, g.verdict_source, g.picked_letter,
                  g.picked_option, g.judge_fingerprint
           FROM graded_rows g
           JOIN (SELECT unnest(?::VARCHAR[]) AS item_id, unnest(?::INTEGER[]) AS sample) k
             USING (item_id, sample)
           ORDER BY g.arm, g.item_id, g.sample""",
        [items, samples],
    )
