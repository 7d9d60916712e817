"""The counts behind ``mcqaudit info``'s flags, aggregated in DuckDB (no numpy, no pandas): a
:class:`~mcqaudit.metrics.facts.FactCounts` for :func:`mcqaudit.metrics.facts.quick_flags`.

Every row is coded by the frames' own SQL (:func:`mcqaudit.store.frames.rows_sql`, the final verdicts), so the
counts are those :func:`mcqaudit.metrics.compute` bins with numpy; here GROUP BYs sum them: per arm, per
(arm, judge fingerprint), gold positions per option count, and per parser and item the rows each parser flag
reads, whose item-cluster sums ``k, Σn, Σd, Σd², Σd·n, Σn²`` give the clustered rates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mcqaudit.metrics.facts import FactCounts, Letters, LogprobCounts, ParserCounts, Sample, Sums6
from mcqaudit.store.frames import _LOGPROB_SQL, _UNIFORM_SQL, rows_sql, study_facts
from mcqaudit.vocab import VerdictCode

if TYPE_CHECKING:
    import duckdb

    from mcqaudit.store.db import Study

_NONE, _CORRECT, _INCORRECT, _OTHER = (
    int(c) for c in (VerdictCode.NONE, VerdictCode.CORRECT, VerdictCode.INCORRECT, VerdictCode.OTHER)
)

# one row per generation: the frames' codes, the picked letter as the metrics read it (a letter beyond the
# displayed options is none), and whether the row is in a uniform spot check
_ROWS = """
CREATE OR REPLACE TEMP TABLE mcq_fact_rows AS
SELECT r.rn, r.ai, r.ii, r.gold_pos, r.n_opt, r.verdict, r.human, r.fp, r.strict_pos, r.naive_pos, r.user_pos,
    CASE WHEN r.pick_pos < r.n_opt THEN r.pick_pos ELSE -1 END AS pick, u.rn IS NOT NULL AS uni
FROM ({rows}) r LEFT JOIN ({uniform}) u USING (rn)
"""

_ARMS = f"""
SELECT ai, count(*), count(*) FILTER (verdict <> {_NONE}), count(DISTINCT ii) FROM mcq_fact_rows GROUP BY ai
"""
_FINGERPRINTS = "SELECT ai, fp, count(*) FROM mcq_fact_rows WHERE fp >= 0 GROUP BY ai, fp"
_TOTALS = f"""
SELECT coalesce(max(ii) + 1, 0), count(*) FILTER (human <> {_NONE} AND uni), coalesce(bool_or(user_pos >= 0), false),
    coalesce(max(n_opt), 0)
FROM mcq_fact_rows
"""
_GOLD = "SELECT n_opt, least(greatest(gold_pos, 0), ?) AS p, count(*) FROM mcq_fact_rows GROUP BY ALL"

# A parser's letter as its tally reads it (a letter beyond the displayed options is none), on graded rows.
_PARSER_ROWS = f"SELECT ? AS parser, ii, uni, verdict, pick, gold_pos, CASE WHEN {{pos}} >= n_opt THEN -1 ELSE {{pos}} END AS pos FROM mcq_fact_rows WHERE verdict <> {_NONE}"  # noqa: E501
_FRAMEWORK_ROWS = f"""
SELECT p.parser, r.ii, r.uni, r.verdict, r.pick, r.gold_pos,
    CASE WHEN coalesce(ascii(p.letter) - 65, -1) >= r.n_opt THEN -1 ELSE coalesce(ascii(p.letter) - 65, -1) END AS pos
FROM parser_letters p JOIN gen_rows g USING (row_id) JOIN mcq_fact_rows r ON r.rn = g.rowid
WHERE p.parser NOT IN ('strict', 'naive', 'user') AND r.verdict <> {_NONE}
"""  # noqa: E501


def _sums(n: str, d: str) -> str:
    """The cluster sums over items of per-item counts ``n`` and ``d``: k, Σn, Σd, Σd², Σd·n, Σn²."""
    return f"count(*) FILTER ({n} > 0), sum({n}), sum({d}), sum({d} * {d}), sum({d} * {n}), sum({n} * {n})"


_KINDS = ("mis", "wrong", "fab", "miss")
# Per parser and item: the compared rows (the strict pre-filter only where it read a letter) and those whose
# verdicts differ; the compared rows whose reference letter is known and each way of misreading it; both on
# every row and on the rows of the uniform spot check. Then per parser: their cluster sums over items.
_PARSERS = f"""
WITH p AS ({{rows}}), c AS (
    SELECT parser, ii, uni, pos,
        parser <> 'strict' OR pos >= 0 AS cmp,
        CASE WHEN pos = gold_pos THEN {_CORRECT} WHEN pos < 0 THEN {_OTHER} ELSE {_INCORRECT} END <> verdict AS dis,
        verdict = {_OTHER} OR pick >= 0 AS known,
        CASE WHEN verdict = {_OTHER} THEN -1 ELSE pick END AS ref
    FROM p
), e AS (
    SELECT parser, ii, uni, cmp, dis, cmp AND known AS kn,
        ref >= 0 AND pos >= 0 AND pos <> ref AS wrong, pos >= 0 AND ref < 0 AS fab, ref >= 0 AND pos < 0 AS miss
    FROM c
), it AS (
    SELECT parser, ii, count(*) AS total,
        count(*) FILTER (cmp) AS n, count(*) FILTER (cmp AND dis) AS d,
        count(*) FILTER (cmp AND uni) AS nu, count(*) FILTER (cmp AND dis AND uni) AS du,
        count(*) FILTER (kn) AS nk, count(*) FILTER (kn AND uni) AS nku,
        count(*) FILTER (kn AND (wrong OR fab OR miss)) AS mis, count(*) FILTER (kn AND uni AND (wrong OR fab OR miss)) AS misu,
        count(*) FILTER (kn AND wrong) AS wrong, count(*) FILTER (kn AND uni AND wrong) AS wrongu,
        count(*) FILTER (kn AND fab) AS fab, count(*) FILTER (kn AND uni AND fab) AS fabu,
        count(*) FILTER (kn AND miss) AS miss, count(*) FILTER (kn AND uni AND miss) AS missu
    FROM e GROUP BY parser, ii
)
SELECT parser, sum(total), {_sums("n", "d")}, {_sums("nu", "du")},
    {", ".join(_sums("nk", k) for k in _KINDS)}, {", ".join(_sums("nku", k + "u") for k in _KINDS)}
FROM it GROUP BY parser
"""  # noqa: E501

# Per arm, graded rows with option_logprobs (their argmax letter): rows, argmax gold, text CORRECT, items; and
# the cluster sums of the mismatch between the argmax and the text's letter on rows whose letter is known.
_LOGPROB = f"""
WITH l AS (
    SELECT r.ai, r.ii, r.verdict, r.pick, r.gold_pos, lp.lp_pos
    FROM ({_LOGPROB_SQL}) lp JOIN mcq_fact_rows r USING (rn) WHERE r.verdict <> {_NONE}
), k AS (
    SELECT ai, ii, count(*) AS n, count(*) FILTER (lp_pos = gold_pos) AS lpc,
        count(*) FILTER (verdict = {_CORRECT}) AS txc,
        count(*) FILTER (verdict = {_OTHER} OR pick >= 0) AS nk,
        count(*) FILTER ((verdict = {_OTHER} OR pick >= 0) AND (verdict = {_OTHER} OR lp_pos < 0 OR lp_pos <> pick)) AS dk
    FROM l GROUP BY ai, ii
)
SELECT ai, sum(n), sum(lpc), sum(txc), count(*), {_sums("nk", "dk")} FROM k GROUP BY ai
"""  # noqa: E501


def _floats(values: Sequence[object]) -> Sums6:
    return [float(v or 0) for v in values]  # type: ignore[arg-type]


def _sample(pooled: list[Sums6], spot: list[Sums6]) -> Sample:
    return Sample(pooled, spot if spot[0][1] > 0 else None)


def _parsers(con: duckdb.DuckDBPyConnection, names: list[str], frameworks: list[str]) -> list[ParserCounts]:
    base = [n for n in names if n not in frameworks]
    parts = [_PARSER_ROWS.format(pos=f"{n}_pos") for n in base]
    params: list[object] = list(base)
    if frameworks:
        parts.append(_FRAMEWORK_ROWS)
    got = {
        r[0]: r[1:] for r in con.execute(_PARSERS.format(rows=" UNION ALL ".join(parts)), params).fetchall()
    }
    out: list[ParserCounts] = []
    for name in names:
        r = got.get(name)
        if r is None or not r[0]:
            continue  # no graded row read by this parser
        v_pool, v_spot = _floats(r[1:7]), _floats(r[7:13])
        kinds = [_floats(r[13 + 6 * j : 19 + 6 * j]) for j in range(8)]
        letters = Letters(_sample(kinds[:4], kinds[4:])) if kinds[0][1] > 0 else None
        out.append(ParserCounts(name, _sample([v_pool], [v_spot]), letters))
    return out


def fact_counts(study: Study) -> FactCounts:
    """The study's :class:`~mcqaudit.metrics.facts.FactCounts` (final verdicts), in one connection."""
    with study.connect() as con:
        f = study_facts(con)
        sql, params = rows_sql("final", f)
        con.execute(_ROWS.format(rows=sql, uniform=_UNIFORM_SQL), params)
        try:
            arms = f.arms
            per_arm = {a: (0, 0, 0) for a in arms}
            for ai, n, graded, items in con.execute(_ARMS).fetchall():
                per_arm[arms[ai]] = (int(n), int(graded), int(items))
            fp_rows = {(int(ai), int(k)): int(n) for ai, k, n in con.execute(_FINGERPRINTS).fetchall()}
            n_items, reviewed, any_user, max_opt = con.execute(_TOTALS).fetchone()  # type: ignore[misc]
            top = int(max_opt) + 1
            gold: dict[int, list[int]] = {}
            for n_opt, p, n in con.execute(_GOLD, [top - 1]).fetchall():
                if n_opt >= 2:
                    gold.setdefault(int(n_opt), [0] * top)[int(p)] += int(n)
            names = ["strict", "naive", *(["user"] if any_user else []), *f.frameworks]
            parsers = _parsers(con, names, f.frameworks)
            logprob = {
                arms[ai]: LogprobCounts(int(n), int(lpc), int(txc), int(items), _floats(sums))
                for ai, n, lpc, txc, items, *sums in con.execute(_LOGPROB).fetchall()
            }
        finally:
            con.execute("DROP TABLE IF EXISTS mcq_fact_rows")
    arm_fps: dict[str, dict[str, int]] = {}
    for a, arm in enumerate(arms):
        for k, fp in enumerate(f.fps):
            if fp_rows.get((a, k)):
                arm_fps.setdefault(arm, {})[fp] = fp_rows[(a, k)]
    return FactCounts(
        arms=arms,
        orientations=f.orientations,
        n_items=int(n_items),
        rows_by_arm={a: per_arm[a][0] for a in arms},
        graded_by_arm={a: per_arm[a][1] for a in arms},
        items_by_arm={a: per_arm[a][2] for a in arms},
        arm_fingerprints=arm_fps,
        judge_configs=f.configs,
        unaudited=(f.meta.get("unaudited") or "").lower() == "true",
        n_reviews=f.n_reviews,
        uniform_reviewed_rows=int(reviewed),
        gold_counts=gold,
        parsers=parsers,
        logprob=logprob,
    )
