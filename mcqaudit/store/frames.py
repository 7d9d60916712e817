"""The SQL that loads the compact frames :mod:`mcqaudit.metrics` works on, out of a study file.

DuckDB does the joins and resolves every row's verdict (the rule macros the ``graded_rows`` view calls, see
:mod:`mcqaudit.store.schema`, over the base tables so that no text column is read). What comes back is one narrow row of
small integer codes per generation — no strings: arms, items and orientations are dense codes (``ai``,
``ii``, ``oi``) indexing the lists in :class:`~mcqaudit.metrics.StudyInfo`; verdicts are
:class:`~mcqaudit.vocab.VerdictCode` values (0 CORRECT, 1 INCORRECT, 2 OTHER, -1 NONE: ungraded), the SQL rendered
from that enum (:func:`verdict_code_sql`); letters are 0-based displayed positions, -1 = none.
The metrics module aggregates these with vectorised numpy (bincount), which on a 1,000,000-row study is
several times faster than a GROUP BY per statistic here.

Two verdict views (docs/design.md §7): ``final`` is ``graded_rows.final_verdict``/``picked_letter``; ``judge`` is the
automated verdict alone — judge, else pre-filter, else rule — i.e. the final verdict with human reviews
taken out. A row without a verdict in the chosen view is ungraded.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcqaudit.metrics.rules import arm_order
from mcqaudit.vocab import VERDICT_CODES, VerdictCode, VerdictView

if TYPE_CHECKING:  # numpy and the metrics' frames are imported where frames are built: `info` reads this
    import duckdb  # module's SQL (mcqaudit.store.facts) without them
    import numpy as np

    from mcqaudit.metrics.inputs import Columns, Grouping, StudyFrames, StudyInfo
    from mcqaudit.store.db import Study

VERDICT_VIEWS: tuple[str, str] = ("final", "judge")
BASE_PARSERS = ("strict", "naive", "user")

# every arm, registered (with its ingest ordinal) or only in gen_rows (NULL): ordered by metrics.rules.arm_order
_ARMS_SQL = """
SELECT arm, ordinal FROM arms
UNION ALL SELECT DISTINCT arm, NULL FROM gen_rows WHERE arm NOT IN (SELECT arm FROM arms)
"""
_ORIENTATIONS_SQL = "SELECT DISTINCT orientation FROM gen_rows ORDER BY length(orientation), orientation"


def verdict_code_sql(v: str) -> str:
    """SQL mapping verdict expression ``v`` to its :class:`~mcqaudit.vocab.VerdictCode` (NULL or an unknown
    value: ``NONE``), rendered from the enum."""
    whens = " ".join(f"WHEN '{c.name}' THEN {int(c)}" for c in VERDICT_CODES)
    return f"coalesce(CASE {v} {whens} END, {int(VerdictCode.NONE)})::TINYINT"


def _pos(letter: str) -> str:
    return f"coalesce(ascii({letter}) - 65, -1)::TINYINT"


# One row per generation. The judge source is judge_verdicts itself when it holds a single fingerprint
# (its primary key then makes it one row per row_id), else the current_judge view (latest per row).
_ROWS_SQL = """
WITH ax AS (
    SELECT arm, (list_position(?::VARCHAR[], arm) - 1)::SMALLINT AS ai
    FROM (SELECT DISTINCT arm FROM gen_rows WHERE {scope})
), ox AS (
    SELECT orientation, (list_position(?::VARCHAR[], orientation) - 1)::SMALLINT AS oi
    FROM (SELECT DISTINCT orientation FROM gen_rows WHERE {scope})
), ix AS (
    SELECT item_id, (row_number() OVER (ORDER BY item_id) - 1)::INTEGER AS ii
    FROM (SELECT DISTINCT item_id FROM gen_rows WHERE {scope})
), j AS (
    SELECT row_id, status, letter, verdict, fingerprint FROM {judge} WHERE {row_scope}
), r AS (
    SELECT row_id, verdict, picked_letter FROM {reviews} WHERE {row_scope}
), g AS (
    SELECT g.rowid AS rn, ax.ai, ox.oi, ix.ii, g.sample, g.orientation, g.gold_letter, g.is_blank, g.truncated,
        g.strict_letter, g.naive_letter, g.user_letter,
        CASE WHEN j.status = 'ok' THEN j.verdict END AS judge_verdict, j.letter AS judge_letter,
        CASE WHEN j.status = 'ok' THEN j.fingerprint END AS judge_fp,
        j.status AS judge_status,
        r.verdict AS review_verdict, r.picked_letter AS review_letter
    FROM gen_rows g
    JOIN ax USING (arm) JOIN ox USING (orientation) JOIN ix USING (item_id)
    LEFT JOIN j USING (row_id)
    LEFT JOIN r USING (row_id)
    WHERE {g_scope}
), f AS (
    SELECT *,
        final_verdict(NULL, judge_verdict, strict_letter, gold_letter, is_blank) AS auto_verdict,
        picked_letter(NULL, NULL, judge_verdict, judge_letter, strict_letter) AS auto_letter,
        final_verdict(review_verdict, judge_verdict, strict_letter, gold_letter, is_blank) AS final_verdict,
        picked_letter(review_verdict, review_letter, judge_verdict, judge_letter, strict_letter) AS final_letter
    FROM g
)
SELECT rn, ai, oi, ii, sample::INTEGER AS sample,
    (ascii(gold_letter) - 65)::TINYINT AS gold_pos,
    length(orientation)::TINYINT AS n_opt,
    {verdict} AS verdict,
    {pick} AS pick_pos,
    {auto} AS auto_verdict,
    {human} AS human,
    {strict} AS strict_pos,
    {naive} AS naive_pos,
    {user} AS user_pos,
    (coalesce(list_position(?::VARCHAR[], judge_fp), 0) - 1)::SMALLINT AS fp,
    ({verdict} = {none} AND coalesce(judge_status, 'pending') <> 'error') AS pending,
    coalesce(truncated, false) AS truncated
FROM f
"""

_FRAMEWORK_SQL = """
SELECT g.rowid AS rn, (list_position(?::VARCHAR[], p.parser) - 1)::TINYINT AS parser,
    coalesce(ascii(p.letter) - 65, -1)::TINYINT AS pos
FROM parser_letters p JOIN gen_rows g USING (row_id)
WHERE p.parser NOT IN ('strict', 'naive', 'user')
"""

# a panel judge's verdict records (`grade --panel`): beside the final verdicts, never in them
_PANEL_SQL = f"""
SELECT g.rowid AS rn, (list_position(?::VARCHAR[], v.fingerprint) - 1)::SMALLINT AS judge,
    {verdict_code_sql("CASE WHEN v.status = 'ok' THEN v.verdict END")} AS verdict,
    {_pos("CASE WHEN v.status = 'ok' THEN v.letter END")} AS pick_pos
FROM judge_verdicts v JOIN gen_rows g USING (row_id)
WHERE v.fingerprint IN (SELECT fingerprint FROM panel_judges)
"""

# each person's review in force on each row (docs/design.md §7 ``reviewer_agreement``): their latest
# confirm/override that no retraction withdraws — the rule of store.reviews.LATEST_BY_REVIEWER, which the
# Review page's reviewers filter reads (not imported: that module brings pandas, which the report does without)
# — ranked newest first per row (k = 1: the row's review in force)
_REVIEWERS_SQL = f"""
SELECT g.rowid AS rn, (list_position(?::VARCHAR[], r.reviewer) - 1)::SMALLINT AS reviewer,
    {verdict_code_sql("r.verdict")} AS verdict,
    (row_number() OVER (PARTITION BY r.row_id ORDER BY r.created_at DESC, r.review_id DESC))::SMALLINT AS k
FROM (
    SELECT row_id, reviewer, verdict, created_at, review_id FROM reviews
    WHERE action <> 'retract' AND verdict IS NOT NULL
      AND review_id NOT IN (SELECT retracts FROM reviews WHERE action = 'retract' AND retracts IS NOT NULL)
    QUALIFY row_number() OVER (PARTITION BY row_id, reviewer ORDER BY created_at DESC, review_id DESC) = 1
) r JOIN gen_rows g USING (row_id)
"""
_REVIEWER_NAMES_SQL = "SELECT DISTINCT reviewer FROM reviews WHERE action <> 'retract' ORDER BY 1"

_UNIFORM_SQL = """
SELECT DISTINCT g.rowid AS rn FROM spot_check_rows s
JOIN spot_checks q USING (queue_id) JOIN gen_rows g USING (row_id)
WHERE q.strategy = 'uniform' AND q.deleted_at IS NULL  -- a deleted queue is no spot check any more
"""

# The argmax letter of each row's option_logprobs: single-letter keys with a finite value only (NaN and
# ±Infinity are no log-prob of a pick); a tie at the maximum is no pick (-1), as is a row with no such key.
_LOGPROB_SQL = """
SELECT rn, (CASE WHEN count(DISTINCT pos) FILTER (lp = top) = 1 THEN min(pos) FILTER (lp = top) ELSE -1 END
    )::TINYINT AS lp_pos
FROM (
    SELECT rn, pos, lp, max(lp) OVER (PARTITION BY rn) AS top FROM (
        SELECT g.rowid AS rn, ascii(upper(e.key)) - 65 AS pos, TRY_CAST(e.value AS DOUBLE) AS lp
        FROM gen_rows g, json_each(g.option_logprobs) e
        WHERE g.option_logprobs IS NOT NULL AND length(e.key) = 1 AND upper(e.key) BETWEEN 'A' AND 'Z'
    ) WHERE isfinite(lp)
)
GROUP BY rn
"""

# A metadata key's value per row (`report --by metadata.KEY`): the row's own metadata, else its item's (an
# items file's metadata), as text; NULL where neither has the key (or holds null there). Read only when asked.
_GROUP_VALUES_SQL = """
SELECT g.rowid AS rn, coalesce(json_extract_string(g.metadata, $path), json_extract_string(i.metadata, $path)) AS val
FROM gen_rows g LEFT JOIN items i USING (item_id)
"""
_GROUP_SQL = f"""
WITH v AS ({_GROUP_VALUES_SQL})
SELECT rn, (coalesce(list_position($labels::VARCHAR[], val), 0) - 1)::INTEGER AS gi FROM v
"""
_GROUP_LABELS_SQL = f"SELECT DISTINCT val FROM ({_GROUP_VALUES_SQL}) WHERE val IS NOT NULL"
_METADATA_KEYS_SQL = """
SELECT DISTINCT k FROM (
    SELECT unnest(json_keys(metadata)) AS k FROM gen_rows WHERE json_type(metadata) = 'OBJECT'
    UNION ALL SELECT unnest(json_keys(metadata)) FROM items WHERE json_type(metadata) = 'OBJECT'
) ORDER BY k
"""


def json_key_path(key: str) -> str:
    """The JSONPath of top-level key ``key``, quoted: a key with dots, spaces or quotes is one key."""
    return '$."' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label_order(labels: list[str]) -> list[str]:
    """A key's values in reading order: numerically when every value is a number, else by text."""
    try:
        return sorted(labels, key=lambda v: (float(v), v))
    except ValueError:
        return sorted(labels)


def metadata_keys(study: Study) -> list[str]:
    """Every top-level key any row's (or item's) metadata has, sorted: what ``report --by metadata.KEY``
    can group by."""
    with study.connect() as con:
        return [str(r[0]) for r in con.execute(_METADATA_KEYS_SQL).fetchall()]


def _groupings(
    con: duckdb.DuckDBPyConnection, keys: Sequence[str], lookup: np.ndarray, n: int
) -> dict[str, Grouping]:
    """Each key's :class:`Grouping` of the frames' rows (``lookup``: rowid -> position in the rows)."""
    import numpy as np

    from mcqaudit.metrics.inputs import Grouping

    out: dict[str, Grouping] = {}
    for key in dict.fromkeys(keys):
        path = json_key_path(key)
        labels = _label_order([str(r[0]) for r in con.execute(_GROUP_LABELS_SQL, {"path": path}).fetchall()])
        got = _fetch(con, _GROUP_SQL, {"path": path, "labels": labels})
        codes = np.full(n, -1, dtype=np.int32)
        pos = lookup[got["rn"].astype(np.int64)] if len(got) else np.zeros(0, dtype=np.int64)
        keep = pos >= 0
        codes[pos[keep]] = got["gi"][keep]
        out[key] = Grouping(key=key, labels=labels, codes=codes)
    return out


def _rows_sql(view: VerdictView, single_fingerprint: bool, scope: Scope | None = None) -> str:
    final = view == "final"
    return _ROWS_SQL.format(
        scope=scope.items if scope else "true",
        row_scope=scope.rows if scope else "true",
        g_scope=f"g.{scope.items}" if scope else "true",
        reviews=scope.reviews if scope else "effective_reviews",
        judge="judge_verdicts" if single_fingerprint else "current_judge",
        verdict=verdict_code_sql("final_verdict" if final else "auto_verdict"),
        pick=_pos("final_letter" if final else "auto_letter"),
        auto=verdict_code_sql("auto_verdict"),
        human=verdict_code_sql("review_verdict"),
        strict=_pos("strict_letter"),
        naive=_pos("naive_letter"),
        user=_pos("user_letter"),
        none=int(VerdictCode.NONE),
    )


def _scalar(con: duckdb.DuckDBPyConnection, sql: str, params: list[object] | None = None) -> int:
    row = con.execute(sql, params or []).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _fetch(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[object] | dict[str, object] | None = None
) -> Columns:
    """numpy columns, no pandas (the CLI's report need not import it)."""
    import numpy as np

    from mcqaudit.metrics.inputs import Columns

    cols = con.execute(sql, params or []).fetchnumpy()
    return Columns({k: np.asarray(v) for k, v in cols.items()})


def _row_lookup(rowids: np.ndarray) -> np.ndarray:
    """rowid -> position in the rows frame (-1: none); DuckDB rowids are dense but need not be ordered in the
    result."""
    import numpy as np

    rn = rowids.astype(np.int64)
    lookup = np.full(int(rn.max()) + 1 if rn.size else 0, -1, dtype=np.int64)
    lookup[rn] = np.arange(rn.size)
    return lookup


def _judge_configs(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, object]]:
    return {
        fp: {"model": model, "shape": shape, "temperature": temp, "standin": bool(standin)}
        for fp, model, shape, temp, standin in con.execute(
            "SELECT fingerprint, model, shape, temperature, standin FROM judge_configs ORDER BY fingerprint"
        ).fetchall()
    }


@dataclass
class Facts:
    """What :func:`load_frames` (and ``info``'s flags, :mod:`mcqaudit.store.facts`) read besides the rows."""

    meta: dict[str, str | None]
    arms: list[str]
    orientations: list[str]
    configs: dict[str, dict[str, Any]]
    panel_fps: list[str]
    all_fps: list[str]
    fps: list[str]  # the final verdicts' configurations
    frameworks: list[str]
    n_reviews: int


def study_facts(con: duckdb.DuckDBPyConnection) -> Facts:
    meta = dict(con.execute("SELECT key, value FROM study_meta").fetchall())
    listed = con.execute(_ARMS_SQL).fetchall()
    panel_fps = [
        r[0]
        for r in con.execute("SELECT fingerprint FROM panel_judges ORDER BY added_at, fingerprint").fetchall()
    ]
    all_fps = [
        r[0] for r in con.execute("SELECT DISTINCT fingerprint FROM judge_verdicts ORDER BY 1").fetchall()
    ]
    frameworks = [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT parser FROM parser_letters WHERE parser NOT IN ('strict', 'naive', 'user') ORDER BY 1"
        ).fetchall()
    ]
    return Facts(
        meta=meta,
        arms=arm_order([a for a, _ in listed], {a: int(o) for a, o in listed if o is not None}),
        orientations=[r[0] for r in con.execute(_ORIENTATIONS_SQL).fetchall()],
        configs=_judge_configs(con),
        panel_fps=panel_fps,
        all_fps=all_fps,
        fps=[fp for fp in all_fps if fp not in panel_fps],
        frameworks=frameworks,
        n_reviews=_scalar(con, "SELECT count(*) FROM effective_reviews"),
    )


def sql_list(values: Sequence[str]) -> str:
    """A parenthesised list of SQL string literals (``'`` doubled: DuckDB's strings know no other escape)."""
    return (
        "(" + ", ".join("'" + str(v).replace("'", "''") + "'" for v in values) + ")" if values else "(NULL)"
    )


@dataclass(frozen=True)
class Scope:
    """Some items' rows: a condition on ``item_id`` selecting them, one on ``row_id`` (their row ids), and the
    relation their effective reviews are read from (``effective_reviews``, or one that stands for it as it
    was: columns row_id, verdict, picked_letter)."""

    items: str
    rows: str
    reviews: str = "effective_reviews"

    @classmethod
    def of(cls, item_ids: Sequence[str], row_ids: Sequence[str], reviews: str = "effective_reviews") -> Scope:
        return cls(
            f"item_id IN {sql_list(sorted(item_ids))}", f"row_id IN {sql_list(sorted(row_ids))}", reviews
        )


def rows_sql(verdicts: VerdictView, facts: Facts, scope: Scope | None = None) -> tuple[str, list[object]]:
    """The per-row SQL of the frames (one narrow row of codes per generation) and its parameters; with
    ``scope``, the rows of those items only (their ``ii`` then counts those items alone)."""
    return _rows_sql(verdicts, len(facts.all_fps) <= 1, scope), [facts.arms, facts.orientations, facts.fps]


_Side = tuple["Columns | None", "Columns | None", "Columns", "Columns | None"]


def _side_frames(con: duckdb.DuckDBPyConnection, f: Facts, reviewer_names: list[str]) -> _Side:
    """The frames beside the rows, keyed by rowid: framework letters, panel verdicts, log-prob picks and
    each reviewer's review in force (with two reviewers or more)."""
    try:
        return (
            _fetch(con, _FRAMEWORK_SQL, [f.frameworks]) if f.frameworks else None,
            _fetch(con, _PANEL_SQL, [f.panel_fps]) if f.panel_fps else None,
            _fetch(con, _LOGPROB_SQL),
            _fetch(con, _REVIEWERS_SQL, [reviewer_names]) if len(reviewer_names) > 1 else None,
        )
    finally:
        con.close()


def _study_info(
    study: Study, f: Facts, rows: Columns, in_uniform: np.ndarray, pending: np.ndarray, reviewer_names: list[str]
) -> StudyInfo:
    """The frames' :class:`~mcqaudit.metrics.inputs.StudyInfo`: the study's facts and what the rows give."""
    import numpy as np

    from mcqaudit.metrics.inputs import StudyInfo

    meta, arms, fps, frameworks = f.meta, f.arms, f.fps, f.frameworks
    parsers = ["strict", "naive"]
    if (rows["user_pos"] >= 0).any():
        parsers.append("user")
    parsers += frameworks
    n_items = int(rows["ii"].max()) + 1 if len(rows) else 0
    ai = rows["ai"]
    rows_by_arm = np.bincount(ai, minlength=len(arms)) if len(rows) else np.zeros(len(arms), dtype=np.int64)
    arm_fps: dict[str, dict[str, int]] = {}
    fpc = rows["fp"]
    if len(fps):
        counts = np.bincount(ai[fpc >= 0] * len(fps) + fpc[fpc >= 0], minlength=len(arms) * len(fps))
        for a, arm in enumerate(arms):
            for k, fp in enumerate(fps):
                if counts[a * len(fps) + k]:
                    arm_fps.setdefault(arm, {})[fp] = int(counts[a * len(fps) + k])
    return StudyInfo(
        path=str(study.path),
        created=meta.get("created"),
        unaudited=(meta.get("unaudited") or "").lower() == "true",
        arms=arms,
        orientations=f.orientations,
        stored_control=meta.get("control_arm"),
        n_items=n_items,
        rows_by_arm={a: int(rows_by_arm[k]) for k, a in enumerate(arms)},
        judge_configs=f.configs,
        arm_fingerprints=arm_fps,
        n_reviews=f.n_reviews,
        uniform_spot_check_rows=int(in_uniform.sum()),
        pending_by_arm={
            a: int(n) for a, n in zip(arms, np.bincount(ai[pending], minlength=len(arms)), strict=True) if n
        },
        parsers=parsers,
        frameworks=frameworks,
        panel_judges=f.panel_fps,
        reviewers=reviewer_names,
    )


def load_frames(
    study: Study, verdicts: VerdictView = "final", by: Sequence[str] = (), *, defer: bool = False
) -> StudyFrames:
    """Study facts and the per-row frame, in one short-lived connection. ``by``: metadata keys whose value
    per row the frames also carry (``StudyFrames.groups``); none by default, and then no metadata is read.

    The rows are read first (on both cores); then the framework letters, log-probs, panel verdicts and
    reviewers' reviews on a second cursor, beside the spot check and the groups on this one. ``defer``: return
    without waiting for them, to be read beside the metrics that need the rows alone
    (:meth:`StudyFrames.ready` waits for them) — only inside a connection the caller holds
    (``with study.connect():``) until the frames are ready; otherwise they are read before this returns."""
    import numpy as np

    from mcqaudit.metrics.inputs import StudyFrames

    if verdicts not in VERDICT_VIEWS:
        raise ValueError(f"verdicts must be one of {', '.join(VERDICT_VIEWS)}, not {verdicts!r}")
    defer = defer and study.connected
    with study.connect() as con:
        f = study_facts(con)
        reviewer_names = [r[0] for r in con.execute(_REVIEWER_NAMES_SQL).fetchall()]
        rows = _fetch(con, *rows_sql(verdicts, f))
        pool = ThreadPoolExecutor(1)
        later = pool.submit(_side_frames, con.cursor(), f, reviewer_names)
        pool.shutdown(wait=False)
        try:
            uniform = _fetch(con, _UNIFORM_SQL)
            lookup = _row_lookup(rows.pop("rn"))
            groups = _groupings(con, by, lookup, len(rows)) if by else {}
        except BaseException:
            wait([later])  # the second cursor is done with the connection before it closes
            raise

        def to_row(df: Columns | None) -> Columns | None:
            if df is None:
                return None
            pos = lookup[df.pop("rn").astype(np.int64)]
            df["row"] = pos
            keep = pos >= 0
            return df if keep.all() else df.take(keep)

        def side() -> dict[str, Columns | None]:
            try:
                framework, panel, logprob, reviewers = later.result()
            except BaseException:  # Ctrl-C while waiting: the second cursor is done before the connection closes
                wait([later])
                raise
            return {
                "framework": to_row(framework),
                "panel": to_row(panel),
                "logprob": to_row(logprob),
                "reviewers": to_row(reviewers),
            }

        if not defer:
            wait([later])  # the second cursor is done with the connection before it closes

    uniform_rows = to_row(uniform)
    in_uniform = np.zeros(len(rows), dtype=bool)
    if uniform_rows is not None and len(uniform_rows):
        in_uniform[uniform_rows["row"]] = True
    rows["uniform"] = in_uniform
    # ungraded rows the judge has not answered yet (not failed): the report says its figures are provisional
    pending = np.asarray(rows.pop("pending"), dtype=bool)

    info = _study_info(study, f, rows, in_uniform, pending, reviewer_names)
    frames = StudyFrames(info=info, verdicts=verdicts, rows=rows, groups=groups, pending=side)
    return frames if defer else frames.ready()
