"""SQL behind `mcqaudit info`: what a study holds, as plain tables (no pandas: `info` starts fast)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcqaudit.store.db import Study


@dataclass
class Table:
    """A small result table: column names and rows of plain values (str, int, float, None)."""

    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)


def _table(cur: Any) -> Table:
    return Table([d[0] for d in cur.description], [list(r) for r in cur.fetchall()])


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
    rows_by_arm_orientation: Table  # arm, then one column of counts per orientation
    parser_coverage: Table  # parser, rows with a letter, share
    verdicts: Table  # arm x verdict_source/judge_status counts
    rejected: Table  # source, line, field, reason (latest first, capped)
    rejected_total: int


_VERDICTS = """
SELECT arm, coalesce(verdict_source, 'ungraded (' || judge_status || ')') AS source,
       count(*) FILTER (final_verdict = 'CORRECT') AS correct,
       count(*) FILTER (final_verdict = 'INCORRECT') AS incorrect,
       count(*) FILTER (final_verdict = 'OTHER') AS other,
       count(*) AS rows
FROM graded_rows WHERE {scope} GROUP BY ALL
"""


def merge_verdicts(
    rows: list[list[Any]], plus: list[list[Any]], minus: list[list[Any]], arms: list[str]
) -> list[list[Any]]:
    """The ``verdicts`` table's rows ``rows``, plus the counts of ``plus``, less those of ``minus`` (rows keyed
    by arm and source); a row whose counts come to 0 is dropped, and the rest ordered as the table orders them
    (by the arm's place in ``arms``, the study's order, then by source: as DuckDB orders text, by code point)."""
    out: dict[tuple[Any, Any], list[int]] = {}
    for sign, part in ((1, rows), (1, plus), (-1, minus)):
        for arm, source, *counts in part:
            got = out.setdefault((arm, source), [0] * len(counts))
            for k, c in enumerate(counts):
                got[k] += sign * int(c)
    keep = [[arm, source, *c] for (arm, source), c in out.items() if c[-1]]
    place = {a: k for k, a in enumerate(arms)}
    return sorted(
        keep,
        key=lambda r: (place.get(r[0], len(place)), (r[0] is None, r[0] or ""), (r[1] is None, r[1] or "")),
    )


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
        ).fetchall()
        cov = _table(
            con.execute(
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
            )
        )
        # the arms in their order (as the table of rows above), then the source
        verdicts = _table(
            con.execute(
                f"SELECT v.* FROM ({_VERDICTS.format(scope='true')}) v LEFT JOIN arms a USING (arm) "
                "ORDER BY a.ordinal NULLS LAST, v.arm, v.source"
            )
        )
        rejected_total = con.execute("SELECT count(*) FROM rejected_rows").fetchone()[0]  # type: ignore[index]
        rejected = _table(
            con.execute(
                "SELECT source, line, field, reason FROM rejected_rows ORDER BY ingest_id DESC, line LIMIT ?",
                [rejected_cap],
            )
        )
        meta = dict(con.execute("SELECT key, value FROM study_meta").fetchall())
    return StudySummary(
        path=str(study.path),
        created=meta.get("created"),
        control_arm=meta.get("control_arm"),
        unaudited=meta.get("unaudited") == "true",
        arms=arms,
        items=int(items),
        rows=int(rows),
        orientations=orientations,
        rows_by_arm_orientation=_pivot(by),
        parser_coverage=cov,
        verdicts=verdicts,
        rejected=rejected,
        rejected_total=int(rejected_total),
    )


def _pivot(by: list[tuple[Any, ...]]) -> Table:
    """``(arm, orientation, n, ...)`` rows as one row per arm and one column per orientation, both in the order
    they first appear (missing cells 0)."""
    arms: dict[str, dict[str, int]] = {}
    orients: dict[str, None] = {}
    for arm, orientation, n, *_ in by:
        arms.setdefault(arm, {})[orientation] = arms.get(arm, {}).get(orientation, 0) + int(n)
        orients[orientation] = None
    return Table(["arm", *orients], [[arm, *(c.get(o, 0) for o in orients)] for arm, c in arms.items()])
