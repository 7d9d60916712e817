"""The counts behind ``mcqaudit info``'s flags, aggregated in DuckDB (no numpy, no pandas): a
:class:`~mcqaudit.metrics.facts.FactCounts` for :func:`mcqaudit.metrics.facts.quick_flags`.

Every row is coded by the frames' own SQL (:func:`mcqaudit.store.frames.rows_sql`, the final verdicts), so the
counts are those :func:`mcqaudit.metrics.compute` bins with numpy; here GROUP BYs sum them: per arm, per
(arm, judge fingerprint), gold positions per option count, and per parser and item the rows each parser flag
reads, whose item-cluster sums ``k, Σn, Σd, Σd², Σd·n, Σn²`` give the clustered rates.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mcqaudit.metrics.facts import FactCounts, Letters, LogprobCounts, ParserCounts, Sample, Sums6
from mcqaudit.store.frames import _LOGPROB_SQL, _UNIFORM_SQL, Facts, Scope, rows_sql, study_facts
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
WHERE p.parser NOT IN ('strict', 'naive', 'user') AND r.verdict <> {_NONE} AND {{p_scope}} AND {{g_scope}}
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
    FROM ({_LOGPROB_SQL.replace("WHERE g.option_logprobs", "WHERE {scope} AND g.option_logprobs")}) lp
    JOIN mcq_fact_rows r USING (rn) WHERE r.verdict <> {_NONE}
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


def _ints(values: Sequence[object]) -> list[int]:
    return [int(v or 0) for v in values]  # type: ignore[call-overload]


def _parser_sums(
    con: duckdb.DuckDBPyConnection,
    names: list[str],
    frameworks: list[str],
    scope: Scope | None,
    tr: Callable[[str], str],
) -> dict[str, list[int]]:
    """Per parser: its graded rows, then the cluster sums of :data:`_PARSERS` (integers, as DuckDB sums them)."""
    base = [n for n in names if n not in frameworks]
    parts = [_PARSER_ROWS.format(pos=f"{n}_pos") for n in base]
    params: list[object] = list(base)
    if frameworks:
        parts.append(
            _FRAMEWORK_ROWS.format(
                p_scope=f"p.{scope.rows}" if scope else "true",
                g_scope=f"g.{scope.items}" if scope else "true",
            )
        )
    return {
        str(r[0]): _ints(r[1:])
        for r in con.execute(tr(_PARSERS.format(rows=" UNION ALL ".join(parts))), params).fetchall()
    }


def _parsers(names: list[str], got: dict[str, list[int]]) -> list[ParserCounts]:
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


# What a review can change of the counts (it changes a row's final verdict, picked letter and human review,
# nothing else): :func:`review_counts` sums them over some items' rows, and each is a sum over items, so the
# study's counts after a review are those before, less its items' counts before, plus their counts after.
REVIEWED_KEYS = ("graded_by_arm", "reviewed", "n_reviews", "parsers", "logprob")


def raw_counts(
    con: duckdb.DuckDBPyConnection, f: Facts, scope: Scope | None = None, names: list[str] | None = None
) -> dict[str, Any]:
    """The counts beneath :class:`~mcqaudit.metrics.facts.FactCounts` as plain JSON values (integers, names as
    keys), over the whole study, or (``scope``: some items' rows) the part of :data:`REVIEWED_KEYS` those rows
    add, for the parsers ``names`` (the whole study's): :func:`counts_of` turns them into FactCounts."""
    sql, params = rows_sql("final", f, scope)
    uniform = f"{_UNIFORM_SQL} AND g.{scope.items}" if scope else _UNIFORM_SQL
    # with a scope, the tables are read from their scoped copies (:func:`scoped_copies`)
    tr = _scoped if scope is not None else _whole
    con.execute(tr(_ROWS.format(rows=sql, uniform=uniform)), params)
    try:
        arms = f.arms
        out: dict[str, Any] = {}
        per_arm = con.execute(_ARMS).fetchall()
        out["graded_by_arm"] = {arms[ai]: int(graded) for ai, _, graded, _ in per_arm if graded}
        n_items, reviewed, any_user, max_opt = con.execute(_TOTALS).fetchone()  # type: ignore[misc]
        out["reviewed"] = int(reviewed)
        if scope is not None:
            got = con.execute(f"SELECT count(*) FROM {scope.reviews} WHERE {scope.rows}").fetchone()
            out["n_reviews"] = int(got[0]) if got else 0
        else:
            out["n_reviews"] = f.n_reviews
            out["rows_by_arm"] = {arms[ai]: int(n) for ai, n, _, _ in per_arm}
            out["items_by_arm"] = {arms[ai]: int(it) for ai, _, _, it in per_arm}
            out["fp_rows"] = [
                [arms[int(ai)], f.fps[int(k)], int(n)] for ai, k, n in con.execute(_FINGERPRINTS).fetchall()
            ]
            out["n_items"], out["any_user"], out["max_opt"] = int(n_items), bool(any_user), int(max_opt)
            top = int(max_opt) + 1
            out["gold"] = [[int(a), int(b), int(c)] for a, b, c in con.execute(_GOLD, [top - 1]).fetchall()]
            out["names"] = ["strict", "naive", *(["user"] if any_user else []), *f.frameworks]
            out["static"] = {
                "arms": arms,
                "orientations": f.orientations,
                "configs": f.configs,
                "unaudited": (f.meta.get("unaudited") or "").lower() == "true",
                "frameworks": f.frameworks,
                "fps": f.fps,
                "panel_fps": f.panel_fps,
                "all_fps": f.all_fps,
            }
        out["parsers"] = _parser_sums(
            con, list(names or []) if scope else out["names"], f.frameworks, scope, tr
        )
        lp_scope = f"g.{scope.items}" if scope else "true"
        out["logprob"] = {
            arms[ai]: _ints(rest) for ai, *rest in con.execute(tr(_LOGPROB.format(scope=lp_scope))).fetchall()
        }
    finally:
        con.execute("DROP TABLE IF EXISTS mcq_fact_rows")
    return out


# The big tables a scope's counts read, and their copies holding the scope's rows alone (:func:`scoped_copies`).
_SCOPED = {
    "gen_rows": "mcq_scope_gen",
    "parser_letters": "mcq_scope_letters",
    "judge_verdicts": "mcq_scope_verdicts",
    "current_judge": "mcq_scope_judge",
}
_SCOPED_READ = re.compile(r"\b(FROM|JOIN) (" + "|".join(_SCOPED) + r")\b")


def _whole(sql: str) -> str:
    return sql


def _scoped(sql: str) -> str:
    """``sql`` reading the scope's copies (:data:`_SCOPED`) wherever it reads one of the big tables."""
    return _SCOPED_READ.sub(lambda m: f"{m[1]} {_SCOPED[m[2]]}", sql)


@contextlib.contextmanager
def scoped_copies(con: duckdb.DuckDBPyConnection, row_ids: Sequence[str]) -> Iterator[Scope]:
    """Every row of the items of ``row_ids`` (what a review of those rows can change of the counts), as their
    :class:`Scope`; inside, the rows of those items in each big table the counts read are copied into a small
    temporary table (:data:`_SCOPED`), which :func:`raw_counts` and :func:`verdict_rows` over the scope read
    instead: each big table is scanned once, not once per query that reads it, however many queries read the
    scope (the counts before and after a review), and the copy of the generations numbers its rows alike
    (rowid) for every one of them."""
    gen, letters, verdicts, judge = (_SCOPED[t] for t in _SCOPED)
    try:
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {gen} AS SELECT * FROM gen_rows WHERE item_id IN "
            "(SELECT item_id FROM gen_rows WHERE row_id IN (SELECT unnest(?::VARCHAR[])))",
            [sorted(set(row_ids))],
        )
        got = con.execute(f"SELECT row_id, item_id FROM {gen}").fetchall()
        for table, copy in ((t, c) for t, c in _SCOPED.items() if t != "gen_rows"):
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE {copy} AS SELECT * FROM {table} "
                f"WHERE row_id IN (SELECT row_id FROM {gen})"
            )
        yield Scope.of(sorted({i for _, i in got}), [r for r, _ in got])
    finally:
        for copy in (gen, letters, verdicts, judge):
            con.execute(f"DROP TABLE IF EXISTS {copy}")


# The summary's verdicts table (store/summary.py), over a scope's rows: graded_rows' verdict, source and judge
# status (schema.GRADED_ROWS_VIEW), with the effective reviews read from the scope's relation.
_VERDICTS = """
WITH b AS (
    SELECT g.arm, g.strict_letter, g.gold_letter, g.is_blank, r.verdict AS review_verdict,
        CASE WHEN j.status = 'ok' THEN j.verdict END AS judge_verdict,
        coalesce(j.status, CASE WHEN needs_judge(g.strict_letter, g.is_blank) THEN 'pending' ELSE 'skipped' END)
            AS judge_status
    FROM gen_rows g
    LEFT JOIN (SELECT * FROM current_judge WHERE {rows}) j USING (row_id)
    LEFT JOIN (SELECT row_id, verdict FROM {reviews} WHERE {rows}) r USING (row_id)
    WHERE g.{items}
), v AS (
    SELECT arm, judge_status,
        final_verdict(review_verdict, judge_verdict, strict_letter, gold_letter, is_blank) AS final_verdict,
        verdict_source(review_verdict, judge_verdict, strict_letter, is_blank) AS verdict_source
    FROM b
)
SELECT arm, coalesce(verdict_source, 'ungraded (' || judge_status || ')') AS source,
       count(*) FILTER (final_verdict = 'CORRECT') AS correct,
       count(*) FILTER (final_verdict = 'INCORRECT') AS incorrect,
       count(*) FILTER (final_verdict = 'OTHER') AS other,
       count(*) AS rows
FROM v GROUP BY ALL
"""


def verdict_rows(con: duckdb.DuckDBPyConnection, scope: Scope) -> list[list[Any]]:
    """The rows of the summary's ``verdicts`` table (arm, source, correct, incorrect, other, rows) that the
    scope's rows add."""
    sql = _VERDICTS.format(rows=scope.rows, reviews=scope.reviews, items=scope.items)
    return [list(r) for r in con.execute(_scoped(sql)).fetchall()]


def _add(old: Any, plus: Any, minus: Any) -> Any:
    """``old + plus - minus`` over the counts of :data:`REVIEWED_KEYS` (integers, or dicts of integers or of
    lists of integers); a key whose counts all come to 0 is dropped, as a GROUP BY would not list it."""
    if isinstance(old, int):
        return old + int(plus or 0) - int(minus or 0)
    out: dict[str, Any] = {}
    for k in dict.fromkeys([*old, *(plus or {}), *(minus or {})]):
        o, p, m = old.get(k), (plus or {}).get(k), (minus or {}).get(k)
        ref = o if o is not None else p if p is not None else m
        if isinstance(ref, list):
            z = [0] * len(ref)
            v = [a + b - c for a, b, c in zip(o or z, p or z, m or z, strict=True)]
            if any(v):
                out[k] = v
        else:
            n = int(o or 0) + int(p or 0) - int(m or 0)
            if n:
                out[k] = n
    return out


def apply_review(raw: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The study's raw counts after a write that changed reviews only: ``raw`` (before it), less ``before``
    plus ``after`` (:func:`raw_counts` over the items of the rows it touched, before and after it)."""
    return {**raw, **{k: _add(raw[k], after[k], before[k]) for k in REVIEWED_KEYS}}


def state_facts(raw: dict[str, Any]) -> Facts:
    """The :class:`~mcqaudit.store.frames.Facts` that :func:`raw_counts` over a whole study read (what a
    review leaves as it is), for :func:`raw_counts` over some of its items."""
    st = raw["static"]
    return Facts(
        meta={"unaudited": "true" if st["unaudited"] else None},
        arms=list(st["arms"]),
        orientations=list(st["orientations"]),
        configs=st["configs"],
        panel_fps=list(st["panel_fps"]),
        all_fps=list(st["all_fps"]),
        fps=list(st["fps"]),
        frameworks=list(st["frameworks"]),
        n_reviews=int(raw["n_reviews"]),
    )


def counts_of(raw: dict[str, Any]) -> FactCounts:
    """:class:`~mcqaudit.metrics.facts.FactCounts` of :func:`raw_counts` over a whole study."""
    st = raw["static"]
    arms: list[str] = st["arms"]
    top = int(raw["max_opt"]) + 1
    gold: dict[int, list[int]] = {}
    for n_opt, p, n in raw["gold"]:
        if n_opt >= 2:
            gold.setdefault(int(n_opt), [0] * top)[int(p)] += int(n)
    fp_rows = {(arm, fp): n for arm, fp, n in raw["fp_rows"]}
    arm_fps: dict[str, dict[str, int]] = {}
    for arm in arms:
        for fp in st["fps"]:
            if fp_rows.get((arm, fp)):
                arm_fps.setdefault(arm, {})[fp] = fp_rows[(arm, fp)]
    return FactCounts(
        arms=arms,
        orientations=st["orientations"],
        n_items=int(raw["n_items"]),
        rows_by_arm={a: int(raw["rows_by_arm"].get(a, 0)) for a in arms},
        graded_by_arm={a: int(raw["graded_by_arm"].get(a, 0)) for a in arms},
        items_by_arm={a: int(raw["items_by_arm"].get(a, 0)) for a in arms},
        arm_fingerprints=arm_fps,
        judge_configs=st["configs"],
        unaudited=bool(st["unaudited"]),
        n_reviews=int(raw["n_reviews"]),
        uniform_reviewed_rows=int(raw["reviewed"]),
        gold_counts=gold,
        parsers=_parsers(raw["names"], raw["parsers"]),
        logprob={
            arm: LogprobCounts(int(n), int(lpc), int(txc), int(items), _floats(sums))
            for arm, (n, lpc, txc, items, *sums) in raw["logprob"].items()
        },
    )


def fact_counts(study: Study) -> FactCounts:
    """The study's :class:`~mcqaudit.metrics.facts.FactCounts` (final verdicts), in one connection."""
    with study.connect() as con:
        return counts_of(raw_counts(con, study_facts(con)))
