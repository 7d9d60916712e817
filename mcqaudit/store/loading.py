"""SQL for `mcqaudit ingest`: staging, validation with line numbers, canonical orders, parsers, the write.

The whole load of one file runs inside one transaction (see `Study.write`): either every good row lands,
or (without --skip-bad) nothing does. Validation happens in SQL over a staged table of (line, JSON text)
so that a million rows are checked without a Python loop; the only per-row Python is the strict
pre-filter, and only for the short generations that could possibly be bare answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa

from mcqaudit.store.schema import refresh_current_judge, refresh_effective_reviews
from mcqaudit.vocab import LETTERS, WHITESPACE

# Field order of the staged JSON object: index i+1 in the extracted list f[].
FIELDS = (
    "item_id",
    "arm",
    "question",
    "options",
    "gold",
    "generation",
    "orientation",
    "prompt",
    "sample",
    "parsed_letter",
    "option_logprobs",
    "model",
    "metadata",
)
F = {name: i + 1 for i, name in enumerate(FIELDS)}
REQUIRED = ("item_id", "arm", "question", "options", "gold", "generation")

# json_type() names -> the JSON words a user knows
_JSON_WORDS = (
    "CASE {t} WHEN 'VARCHAR' THEN 'a string' WHEN 'BIGINT' THEN 'an integer' WHEN 'UBIGINT' THEN 'an integer' "
    "WHEN 'DOUBLE' THEN 'a number' WHEN 'BOOLEAN' THEN 'a boolean' WHEN 'NULL' THEN 'null' "
    "WHEN 'ARRAY' THEN 'an array' WHEN 'OBJECT' THEN 'an object' ELSE {t} END"
)


def _in_range(expr: str) -> str:
    """SQL: `expr` is one option letter within the row's option count (no per-row regex: patterns built
    from row values would be compiled once per row)."""
    return f"(length({expr}) = 1 AND ascii({expr}) BETWEEN 65 AND 64 + n_opt)"


def _word(expr: str) -> str:
    return _JSON_WORDS.format(t=expr)


class StageError(ValueError):
    """A CSV or Parquet file that DuckDB cannot read at all."""


@dataclass
class LoadResult:
    loaded: int = 0
    unchanged: int = 0
    replaced: int = 0
    duplicates_in_file: int = 0
    rejected: int = 0
    errors: list[tuple[int, str, str, str | None]] = field(default_factory=list)  # line, field, reason, raw
    error_count: int = 0
    new_arms: list[str] = field(default_factory=list)
    new_items: int = 0


def _count(con: duckdb.DuckDBPyConnection, sql_text: str, params: list | None = None) -> int:
    row = con.execute(sql_text, params or []).fetchone()
    return int(row[0]) if row else 0


def create_staging(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE staged (line BIGINT, text VARCHAR, pre_error VARCHAR)")


def stage_batch(
    con: duckdb.DuckDBPyConnection,
    lines: Sequence[int],
    texts: Sequence[str | None],
    pre_errors: Sequence[str | None],
) -> None:
    """Append one batch of raw JSON lines (with line numbers, and any error found before parsing)."""
    batch = pa.table(
        {
            "line": pa.array(lines, pa.int64()),
            "text": pa.array(texts, pa.string()),
            "pre_error": pa.array(pre_errors, pa.string()),
        }
    )
    con.register("_batch", batch)
    try:
        con.execute("INSERT INTO staged SELECT line, text, pre_error FROM _batch")
    finally:
        con.unregister("_batch")


def stage_csv(
    con: duckdb.DuckDBPyConnection, path: str, columns: Mapping[str, str] | None = None
) -> list[str]:
    """Stage a CSV file as JSON objects, one per data row (row numbers count data rows from 1); returns the
    header's column names.

    CSV has no types: `options` (a JSON array or object), `option_logprobs` and `metadata` are JSON strings,
    `gold` and `sample` digits are integers, and an empty cell is an absent field. ``columns`` (field ->
    column, docs/design.md §3 `--map`) says which column holds each field; a staged object keeps the column names.
    """
    create_staging(con)
    try:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _csv AS "
            "SELECT row_number() OVER () AS _row, * FROM read_csv(?, all_varchar = true, header = true)",
            [path],
        )
    except duckdb.Error as exc:
        raise StageError(str(exc).split("\n")[0]) from None
    header = [r[0] for r in con.execute("DESCRIBE _csv").fetchall() if r[0] != "_row"]
    cols = set(header)
    parts = []
    seen: set[str] = set()
    for name in FIELDS:
        col = (columns or {}).get(name, name)
        if col not in cols or col in seen:
            continue
        seen.add(col)
        c = _ident(col)
        if name == "generation":
            # an empty cell is an empty generation, which is legal (OTHER by rule)
            parts.append(f"{_lit(col)}, to_json(coalesce({c}, ''))")
            continue
        if name in ("options", "option_logprobs", "metadata"):
            # invalid JSON stays a string, so validation reports the field's type instead of dropping it
            expr = f"CASE WHEN json_valid({c}) THEN json({c}) ELSE to_json({c}) END"
        elif name in ("gold", "sample"):
            expr = (
                f"CASE WHEN regexp_full_match(trim({c}), '[0-9]+') THEN json(trim({c})) ELSE to_json({c}) END"
            )
        else:
            expr = f"to_json({c})"
        parts.append(f"{_lit(col)}, CASE WHEN {c} IS NULL OR {c} = '' THEN NULL ELSE {expr} END")
    obj = "json_object(" + ", ".join(parts) + ")" if parts else "'{}'"
    # json_object keeps NULL members as null; strip them so an empty cell reads as absent
    con.execute(f"INSERT INTO staged SELECT _row, json_merge_patch('{{}}', {obj})::VARCHAR, NULL FROM _csv")
    con.execute("DROP TABLE _csv")
    return header


def stage_parquet(con: duckdb.DuckDBPyConnection, path: str) -> list[str]:
    """Stage a Parquet file as JSON objects, one per row; returns its column names."""
    create_staging(con)
    try:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _pq AS SELECT * EXCLUDE (file_row_number), file_row_number + 1 AS _row "
            "FROM read_parquet(?, file_row_number = true)",
            [path],
        )
    except duckdb.Error as exc:
        raise StageError(str(exc).split("\n")[0]) from None
    header = [r[0] for r in con.execute("DESCRIBE _pq").fetchall() if r[0] != "_row"]
    con.execute("INSERT INTO staged SELECT _row, to_json(_pq)::VARCHAR, NULL FROM _pq")
    con.execute("DROP TABLE _pq")
    return header


def first_record_keys(con: duckdb.DuckDBPyConnection) -> list[str] | None:
    """The keys of the first staged line, when it is a JSON object (None otherwise: its own error says why)."""
    row = con.execute(
        "SELECT CASE WHEN json_type(text::JSON) = 'OBJECT' THEN json_keys(text::JSON) END FROM staged "
        "WHERE pre_error IS NULL AND json_valid(text) ORDER BY line LIMIT 1"
    ).fetchone()
    return None if row is None or row[0] is None else list(row[0])


def any_record_has(con: duckdb.DuckDBPyConnection, column: str) -> bool:
    """Whether any staged line is a JSON object with this key."""
    return bool(
        _count(
            con,
            "SELECT count(*) FROM (SELECT 1 FROM staged WHERE pre_error IS NULL AND json_valid(text) "
            "AND json_exists(text, ?) LIMIT 1)",
            [_path(column)],
        )
    )


def _lit(text: str) -> str:
    """A SQL string literal (for names that come from a file's header or a `--map`)."""
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _path(column: str) -> str:
    """The JSON path of a top-level key (`--map` refuses column names with a double quote)."""
    return '$."' + column + '"'


def staged_count(con: duckdb.DuckDBPyConnection) -> int:
    return _count(con, "SELECT count(*) FROM staged")


_FIELD = re.compile(r"\bf\[(\d+)\]")
_TYPE_OF_FIELD = re.compile(r"json_type\(f\[(\d+)\]\)")


def _per_line_checks(default_arm: str | None) -> tuple[str, str]:
    """(a SELECT of (line, field, reason) over `xb` for every problem visible within one line,
    a boolean expression over `x` that is true for the lines with any such problem).

    The flag is computed in one pass over all rows; the detailed reasons only for the flagged few.
    """
    f = F
    checks: list[str] = []
    conds: list[str] = []

    def add(fld: str, cond: str, reason: str) -> None:
        checks.append(
            f"SELECT line, '{fld}' AS field, {reason} AS reason FROM xb WHERE coalesce({cond}, false)"
        )
        conds.append(f"coalesce({cond}, false)")

    add("line", "pre_error IS NOT NULL", "pre_error")
    add("line", "pre_error IS NULL AND j IS NULL", "'not valid JSON'")
    add("line", "j IS NOT NULL AND jt <> 'OBJECT'", f"'not a JSON object (got ' || {_word('jt')} || ')'")
    ok = "j IS NOT NULL AND jt = 'OBJECT'"
    for name in REQUIRED:
        t = f"json_type(f[{f[name]}])"
        if name == "arm":
            absent = f"f[{f['arm']}] IS NULL" if default_arm is None else "false"
            add(name, f"{ok} AND {absent}", "'missing required field (or pass --arm)'")
        else:
            add(name, f"{ok} AND f[{f[name]}] IS NULL", "'missing required field'")
        if name in ("item_id", "arm", "question", "generation"):
            add(
                name,
                f"{ok} AND f[{f[name]}] IS NOT NULL AND {t} <> 'VARCHAR'",
                f"'must be a string, got ' || {_word(t)}",
            )
    add(
        "item_id",
        f"{ok} AND json_type(f[{f['item_id']}]) = 'VARCHAR' AND trim(f[{f['item_id']}]->>'$') = ''",
        "'must not be empty'",
    )
    if default_arm is not None:
        add(
            "arm",
            f"{ok} AND json_type(f[{f['arm']}]) = 'VARCHAR' AND f[{f['arm']}]->>'$' <> getvariable('default_arm')",
            "'arm ' || (f["
            + str(f["arm"])
            + "]->>'$') || ' contradicts --arm ' || getvariable('default_arm')",
        )
    add(
        "arm",
        f"{ok} AND json_type(f[{f['arm']}]) = 'VARCHAR' AND trim(f[{f['arm']}]->>'$') = ''",
        "'must not be empty'",
    )
    # options
    o = f"f[{f['options']}]"
    add(
        "options",
        f"{ok} AND {o} IS NOT NULL AND json_type({o}) NOT IN ('ARRAY', 'OBJECT')",
        f"'must be a list of option texts, got ' || {_word(f'json_type({o})')}",
    )
    # an options object whose keys are A, B, ... in order was read as the list of its values (`n`, in load)
    add(
        "options",
        f"{ok} AND json_type({o}) = 'OBJECT'",
        "'an options object needs the displayed letters A, B, ... in order as its keys, got ' || "
        "coalesce(nullif(array_to_string(json_keys(o_raw), ', '), ''), 'none')",
    )
    arr = f"{ok} AND json_type({o}) = 'ARRAY'"
    add(
        "options",
        f"{arr} AND json_array_length({o}) > 0 AND list_distinct(json_type({o}, '$[*]')) <> ['VARCHAR']",
        "'every option must be a string'",
    )
    arr_s = f"{arr} AND n_opt IS NOT NULL"
    add("options", f"{arr_s} AND n_opt < 2", "'needs at least 2 options, got ' || n_opt")
    add("options", f"{arr_s} AND n_opt > {len(LETTERS)}", f"'at most {len(LETTERS)} options, got ' || n_opt")
    add(
        "options",
        f"{arr_s} AND len(list_distinct(opts)) < n_opt",
        "'duplicate option texts: ' || array_to_string(list_filter(list_distinct(opts), lambda v: len(list_filter(opts, lambda w: w = v)) > 1), ', ')",
    )
    add(
        "options",
        f"{arr_s} AND list_bool_or(list_transform(opts, lambda v: trim(v) = ''))",
        "'an option text is empty'",
    )
    # gold
    g = f"f[{f['gold']}]"
    gold_text = f"upper(trim({g}->>'$'))"
    gt = f"json_type({g})"
    add(
        "gold",
        f"{ok} AND {g} IS NOT NULL AND {gt} NOT IN ('VARCHAR', 'BIGINT', 'UBIGINT')",
        f"'must be a letter or a 0-based index, got ' || {_word(gt)}",
    )
    add(
        "gold",
        f"{arr_s} AND n_opt BETWEEN 2 AND {len(LETTERS)} AND {gt} IN ('BIGINT', 'UBIGINT') "
        f"AND NOT (TRY_CAST({g} AS BIGINT) BETWEEN 0 AND n_opt - 1)",
        f"'index ' || {g}::VARCHAR || ' is out of range for ' || n_opt || ' options (0..' || (n_opt - 1) || ')'",
    )
    add(
        "gold",
        f"{arr_s} AND n_opt BETWEEN 2 AND {len(LETTERS)} AND {gt} = 'VARCHAR' AND NOT {_in_range(gold_text)}",
        f"'''' || ({g}->>'$') || ''' is not a letter in A..' || chr(64 + n_opt)",
    )
    # optional fields
    for name, want, word in (
        ("orientation", "VARCHAR", "a string"),
        ("prompt", "VARCHAR", "a string"),
        ("model", "VARCHAR", "a string"),
        ("parsed_letter", "VARCHAR", "a string or null"),
        ("metadata", "OBJECT", "an object"),
        ("option_logprobs", "OBJECT", "an object"),
    ):
        t = f"json_type(f[{f[name]}])"
        add(
            name,
            f"{ok} AND f[{f[name]}] IS NOT NULL AND {t} NOT IN ('{want}', 'NULL')",
            f"'must be {word}, got ' || {_word(t)}",
        )
    s = f"f[{f['sample']}]"
    add(
        "sample",
        f"{ok} AND {s} IS NOT NULL AND json_type({s}) NOT IN ('BIGINT', 'UBIGINT', 'NULL')",
        f"'must be a non-negative integer, got ' || {_word(f'json_type({s})')}",
    )
    add(
        "sample",
        f"{ok} AND json_type({s}) = 'BIGINT' AND TRY_CAST({s} AS BIGINT) < 0",
        "'must be a non-negative integer, got ' || " + s + "::VARCHAR",
    )
    add(
        "sample",
        f"{ok} AND json_type({s}) IN ('BIGINT', 'UBIGINT') AND TRY_CAST({s} AS INTEGER) IS NULL",
        "'is too large'",
    )
    pl = f"f[{f['parsed_letter']}]"
    pl_text = f"upper(trim({pl}->>'$'))"
    add(
        "parsed_letter",
        f"{arr_s} AND n_opt BETWEEN 2 AND {len(LETTERS)} AND json_type({pl}) = 'VARCHAR' "
        f"AND NOT {_in_range(pl_text)}",
        f"'''' || ({pl}->>'$') || ''' is not a letter in A..' || chr(64 + n_opt)",
    )
    lp = f"f[{f['option_logprobs']}]"
    add(
        "option_logprobs",
        f"{arr_s} AND n_opt BETWEEN 2 AND {len(LETTERS)} AND json_type({lp}) = 'OBJECT' AND NOT "
        f"list_bool_and(list_transform(json_keys({lp}), lambda k: {_in_range('k')}))",
        "'keys must be option letters in A..' || chr(64 + n_opt)",
    )
    add(
        "option_logprobs",
        f"{arr_s} AND n_opt BETWEEN 2 AND {len(LETTERS)} AND json_type({lp}) = 'OBJECT' AND "
        f"list_bool_and(list_transform(json_keys({lp}), lambda k: length(k) = 1 AND ascii(k) BETWEEN 65 AND 90)) AND NOT "
        f"list_bool_and(list_transform(json_keys({lp}), lambda k: json_type(json_extract({lp}, '$.' || k)) IN ('BIGINT', 'UBIGINT', 'DOUBLE')))",
        "'values must be numbers (log-probabilities)'",
    )
    add(
        "orientation",
        f"{arr_s} AND n_opt BETWEEN 2 AND {len(LETTERS)} AND json_type(f[{f['orientation']}]) = 'VARCHAR' "
        f"AND (length(f[{f['orientation']}]->>'$') <> n_opt OR array_to_string(list_sort(string_split(f[{f['orientation']}]->>'$', '')), '') "
        f"<> left('{LETTERS}', n_opt))",
        f"'''' || (f[{f['orientation']}]->>'$') || ''' is not an orientation label for ' || n_opt || ' options (a permutation of ' || left('{LETTERS}', n_opt) || ')'",
    )
    # json_type of each field is computed once per row in `x` (column t)
    union, any_bad = "\nUNION ALL\n".join(checks), " OR ".join(conds)
    union, any_bad = (_FIELD.sub(r"f\1", _TYPE_OF_FIELD.sub(r"t\1", q)) for q in (union, any_bad))
    return union, any_bad


def load(
    con: duckdb.DuckDBPyConnection,
    *,
    ingest_id: int,
    source: str,
    default_arm: str | None,
    replace: bool,
    skip_bad: bool,
    strict: Callable[[str, Sequence[str]], str | None],
    strict_max_extra: int,
    naive_pattern: Callable[[int], str],
    framework_patterns: dict[str, tuple[str, ...]],
    error_cap: int = 200,
    memory_limit: str = "1GB",
    columns: Mapping[str, str] | None = None,
) -> LoadResult:
    """Validate the staged rows and write the good ones; returns what happened.

    ``columns`` (field -> key of the staged object, from `--map`) says where each field is read from; a
    field not named there is read from the key of its own name. When errors exist and ``skip_bad`` is
    false, nothing is written (the caller rolls back).
    """
    col = {name: (columns or {}).get(name, name) for name in FIELDS}
    res = LoadResult()
    f = F
    # bounded memory: DuckDB spills the big intermediate tables to disk beyond this; order comes from `line`
    con.execute("SET memory_limit = ?", [memory_limit])
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET VARIABLE default_arm = ?", [default_arm])
    union, any_bad = _per_line_checks(default_arm)

    def parse_cte(columnar: bool) -> str:
        """The parsed fields of every staged line. `columnar` reads the fields into one column each (a
        STRUCT: fast, JSON null reads as absent) for the one-pass flag; otherwise into a list with JSON null
        kept, for the detailed reasons on the flagged lines."""
        if columnar:
            spec = json.dumps({col[n]: "JSON" for n in FIELDS})
            fields = f"from_json(j, {_lit(spec)}) AS s"
            cols = ", ".join(f"s.{_ident(col[n])} AS f{i}" for i, n in enumerate(FIELDS, start=1))
        else:
            paths = ", ".join(_lit(_path(col[n])) for n in FIELDS)
            fields = f"json_extract(j, [{paths}]) AS s"
            cols = ", ".join(f"s[{i}] AS f{i}" for i in range(1, len(FIELDS) + 1))
        o = f"f{f['options']}"
        # an options object {"A": text, "B": text, ...} (keys the displayed letters in order) is its values
        letter_keys = (
            f"list_bool_and(list_transform(json_keys({o}), lambda k, i: k = chr((64 + i)::INTEGER)))"
        )
        return f"""
        WITH v AS (
            SELECT line, pre_error, CASE WHEN pre_error IS NULL AND json_valid(text) THEN text::JSON END AS j
            FROM staged
        ), e0 AS (
            SELECT line, pre_error, j, json_type(j) AS jt, {cols}
            FROM (SELECT *, {fields} FROM v)
        ), e AS (
            SELECT * REPLACE (
                CASE WHEN json_type({o}) = 'OBJECT' AND (json_keys({o}) = [] OR {letter_keys})
                     THEN to_json(json_extract({o}, '$.*')) ELSE {o} END AS {o}
            ), {o} AS o_raw
            FROM e0
        ), x AS (
            SELECT *,
                {", ".join(f"json_type(f{i}) AS t{i}" for i in range(1, len(FIELDS) + 1))},
                CASE WHEN jt = 'OBJECT' AND json_type({o}) = 'ARRAY'
                      AND (json_array_length({o}) = 0 OR list_distinct(json_type({o}, '$[*]')) = ['VARCHAR'])
                     THEN from_json({o}, '["VARCHAR"]') END AS opts,
                len(opts)::INTEGER AS n_opt
            FROM e
        )
        """

    # One pass over every row: typed columns, and a flag for rows with any problem visible within the line.
    # The typed expressions run only for unflagged rows (CASE), so a bad value cannot raise here.
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE parsed AS
        {parse_cte(columnar=True)}
        SELECT line, bad,
            CASE WHEN NOT bad THEN f{f["item_id"]}->>'$' END AS item_id,
            CASE WHEN NOT bad THEN coalesce(f{f["arm"]}->>'$', getvariable('default_arm')) END AS arm,
            CASE WHEN NOT bad THEN f{f["question"]}->>'$' END AS question,
            CASE WHEN NOT bad THEN opts END AS options,
            n_opt,
            CASE WHEN bad THEN NULL
                 WHEN t{f["gold"]} = 'VARCHAR' THEN upper(trim(f{f["gold"]}->>'$'))
                 ELSE chr(65 + TRY_CAST(f{f["gold"]} AS INTEGER)) END AS gold_letter,
            CASE WHEN NOT bad THEN f{f["generation"]}->>'$' END AS generation,
            CASE WHEN NOT bad THEN f{f["orientation"]}->>'$' END AS given_orientation,
            CASE WHEN NOT bad THEN f{f["prompt"]}->>'$' END AS prompt,
            CASE WHEN NOT bad THEN coalesce(TRY_CAST(f{f["sample"]} AS INTEGER), 0) END AS sample,
            CASE WHEN NOT bad THEN upper(trim(f{f["parsed_letter"]}->>'$')) END AS user_letter,
            CASE WHEN NOT bad AND t{f["option_logprobs"]} = 'OBJECT' THEN f{f["option_logprobs"]} END AS option_logprobs,
            CASE WHEN NOT bad THEN f{f["model"]}->>'$' END AS model,
            CASE WHEN NOT bad AND t{f["metadata"]} = 'OBJECT' THEN f{f["metadata"]} END AS metadata
        FROM (SELECT *, ({any_bad}) AS bad FROM x)
        """
    )
    con.execute("CREATE OR REPLACE TEMP TABLE errs (line BIGINT, field VARCHAR, reason VARCHAR)")
    if _count(con, "SELECT count(*) FROM parsed WHERE bad"):
        # the detailed reasons, only for the flagged lines
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE xb AS
            {parse_cte(columnar=False)}
            SELECT * FROM x WHERE line IN (SELECT line FROM parsed WHERE bad)
            """
        )
        con.execute(f"INSERT INTO errs SELECT line, field, reason FROM ({union})")
        # the flag and the reasons are two renderings of the same checks: a flagged line without a reason
        # would vanish silently, so it stops the load instead
        unexplained = _count(
            con, "SELECT count(*) FROM parsed WHERE bad AND line NOT IN (SELECT line FROM errs)"
        )
        if unexplained:
            raise RuntimeError(
                f"internal error: {unexplained} rows flagged bad without a reason; nothing written"
            )
        con.execute("DELETE FROM parsed WHERE bad")
    # canonical orders: the study's items, else the first good row of this file
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE canon AS
        SELECT item_id, options AS canon, gold_index, origin, NULL::BIGINT AS first_line, false AS is_new FROM items
        UNION ALL
        SELECT item_id, arg_min(options, line), NULL, 'first-row', min(line), true
        FROM parsed WHERE item_id NOT IN (SELECT item_id FROM items) GROUP BY item_id
        """
    )
    ns = [int(r[0]) for r in con.execute("SELECT DISTINCT n_opt FROM parsed ORDER BY 1").fetchall()]
    naive_letter, naive_params = naive_letter_sql(ns, naive_pattern)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE final AS
        SELECT *,
            'r' || left(md5(arm || chr(31) || item_id || chr(31) || coalesce(derived, '') || chr(31) || sample::VARCHAR), 20) AS row_id,
            {naive_letter} AS naive_letter,
            NULL::VARCHAR AS strict_letter
        FROM (
            SELECT p.*, c.canon, c.origin, c.first_line,
                list_sort(p.options) = list_sort(c.canon) AS same_set,
                CASE WHEN list_sort(p.options) = list_sort(c.canon)
                     THEN array_to_string(list_transform(p.options, lambda o: chr(64 + list_position(c.canon, o))), '')
                END AS derived,
                p.options[ascii(p.gold_letter) - 64] AS gold_option,
                CASE WHEN c.gold_index IS NOT NULL THEN c.canon[c.gold_index + 1] END AS known_gold
            FROM parsed p JOIN canon c USING (item_id)
        )
        """,
        naive_params,
    )
    con.execute("DROP TABLE parsed")
    # gold consistency: every row of an item names the same gold option (the item's, else its first row's)
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE gold_ref AS
        SELECT item_id, coalesce(any_value(known_gold), arg_min(gold_option, line)) AS gold_ref_option
        FROM final WHERE same_set GROUP BY item_id
        """
    )
    con.execute(
        """
        INSERT INTO errs
        SELECT line, 'options',
            'the option set differs from item ' || item_id || '''s ' ||
            CASE WHEN origin = 'first-row' AND first_line IS NOT NULL THEN '(first seen at line ' || first_line || ')'
                 ELSE '(' || CASE origin WHEN 'items' THEN 'items file' ELSE 'already in the study' END || ')' END ||
            ': ' || to_json(canon)::VARCHAR
        FROM final WHERE NOT same_set
        UNION ALL
        SELECT line, 'orientation',
            '''' || given_orientation || ''' contradicts the option order, which is ''' || derived || ''''
        FROM final WHERE same_set AND given_orientation IS NOT NULL AND given_orientation <> derived
        UNION ALL
        SELECT g.line, 'gold',
            'gold option ' || to_json(g.gold_option)::VARCHAR || ' differs from item ' || g.item_id ||
            '''s gold option ' || to_json(r.gold_ref_option)::VARCHAR
        FROM final g JOIN gold_ref r USING (item_id)
        WHERE g.same_set AND g.gold_option <> r.gold_ref_option
        """
    )
    con.execute("DELETE FROM final WHERE line IN (SELECT line FROM errs)")
    # duplicates within the file: identical ones are dropped, conflicting ones are errors
    con.execute(
        """
        INSERT INTO errs
        SELECT k.line, 'generation',
            'duplicate of line ' || f.line || ' (same arm, item, orientation, sample) with a different generation'
        FROM final k JOIN (SELECT row_id, min(line) AS line, arg_min(generation, line) AS generation
                           FROM final WHERE row_id IN (SELECT row_id FROM final GROUP BY row_id HAVING count(*) > 1)
                           GROUP BY row_id) f USING (row_id)
        WHERE k.line <> f.line AND k.generation <> f.generation
        """
    )
    res.duplicates_in_file = _count(
        con, "SELECT count(*) - count(DISTINCT row_id) FROM final WHERE line NOT IN (SELECT line FROM errs)"
    )
    if not replace:
        con.execute(
            """
            INSERT INTO errs
            SELECT k.line, 'generation',
                'conflicts with the row already in the study (ingest ' || r.ingest_id ||
                ', same arm, item, orientation, sample, different generation); pass --replace to overwrite it'
            FROM final k JOIN gen_rows r USING (row_id)
            WHERE k.generation <> r.generation
            """
        )

    res.error_count = _count(con, "SELECT count(*) FROM errs")
    res.errors = [
        (int(r[0]), r[1], r[2], r[3])
        for r in con.execute(
            "SELECT e.line, e.field, e.reason, s.text FROM errs e LEFT JOIN staged s USING (line) "
            "ORDER BY e.line, e.field LIMIT ?",
            [error_cap],
        ).fetchall()
    ]
    if res.error_count and not skip_bad:
        return res
    if res.error_count:
        con.execute(
            """
            INSERT INTO rejected_rows
            SELECT ?, ?, e.line, e.field, e.reason, s.text FROM errs e LEFT JOIN staged s USING (line)
            """,
            [ingest_id, source],
        )
        res.rejected = _count(con, "SELECT count(DISTINCT line) FROM errs")

    con.execute("DELETE FROM final WHERE line IN (SELECT line FROM errs)")
    # identical duplicates within the file: keep the first line of each
    con.execute(
        """
        DELETE FROM final WHERE line IN (
            SELECT k.line FROM final k
            JOIN (SELECT row_id, min(line) AS first FROM final GROUP BY row_id HAVING count(*) > 1) d USING (row_id)
            WHERE k.line <> d.first
        )
        """
    )
    res.unchanged = _count(
        con, "SELECT count(*) FROM final f JOIN gen_rows r USING (row_id) WHERE f.generation = r.generation"
    )
    con.execute(
        "DELETE FROM final WHERE row_id IN (SELECT f.row_id FROM final f JOIN gen_rows r USING (row_id) "
        "WHERE f.generation = r.generation)"
    )
    replaced = [
        r[0]
        for r in con.execute(
            "SELECT row_id FROM final WHERE row_id IN (SELECT row_id FROM gen_rows)"
        ).fetchall()
    ]
    res.replaced = len(replaced)
    if replaced:
        _retire_replaced(con, ingest_id)
        con.execute("DELETE FROM gen_rows WHERE row_id IN (SELECT row_id FROM final)")

    # new items keep the canonical order of their first row (or the items file's, inserted earlier)
    res.new_items = _count(
        con,
        """
        INSERT INTO items
        SELECT c.item_id, arg_min(f.question, f.line), c.canon,
               list_position(c.canon, arg_min(f.gold_option, f.line)) - 1, NULL, 'first-row'
        FROM canon c JOIN final f USING (item_id) WHERE c.is_new
        GROUP BY c.item_id, c.canon
        """,
    )
    res.new_arms = [
        r[0]
        for r in con.execute(
            """
        INSERT INTO arms
        SELECT arm, (SELECT coalesce(max(ordinal), 0) FROM arms) + row_number() OVER (ORDER BY min(line)), ?
        FROM final WHERE arm NOT IN (SELECT arm FROM arms) GROUP BY arm
        RETURNING arm
        """,
            [ingest_id],
        ).fetchall()
    ]

    _run_parsers(con, strict, strict_max_extra, framework_patterns)

    con.execute(
        """
        INSERT INTO gen_rows
        SELECT row_id, arm, item_id, derived, sample, question, options, gold_letter, generation,
            is_blank(generation),
            prompt, model, metadata, option_logprobs, user_letter, naive_letter, strict_letter, ?, line
        FROM final
        """,
        [ingest_id],
    )
    res.loaded = _count(con, "SELECT count(*) FROM final")
    con.execute(
        """
        INSERT INTO parser_letters
        SELECT row_id, parser, letter FROM fw_letters
        """
    )
    return res


def _retire_replaced(con: duckdb.DuckDBPyConnection, ingest_id: int) -> None:
    """A replaced generation invalidates its judge verdicts and parser letters; its reviews are retracted
    by a new review record (reviews stay append-only)."""
    con.execute("DELETE FROM judge_verdicts WHERE row_id IN (SELECT row_id FROM final)")
    refresh_current_judge(con, "row_id IN (SELECT row_id FROM final)")
    con.execute("DELETE FROM parser_letters WHERE row_id IN (SELECT row_id FROM final)")
    con.execute(
        """
        INSERT INTO reviews (review_id, row_id, action, note, reviewer, created_at, retracts, origin)
        SELECT nextval('review_seq'), r.row_id, 'retract',
               'generation replaced by ingest ' || ?::VARCHAR, 'mcqaudit', now(), r.review_id, 'ingest --replace'
        FROM effective_reviews r WHERE r.row_id IN (SELECT row_id FROM final)
        """,
        [ingest_id],
    )
    refresh_effective_reviews(con, "row_id IN (SELECT row_id FROM final)")


def _run_parsers(
    con: duckdb.DuckDBPyConnection,
    strict: Callable[[str, Sequence[str]], str | None],
    strict_max_extra: int,
    framework_patterns: dict[str, tuple[str, ...]],
) -> None:
    # naive letters were computed with `final`; strict is Python, but only for generations short enough
    # to be a bare answer
    cand = con.execute(
        """
        SELECT row_id, generation, options FROM final
        WHERE length(trim(generation, ?)) <= list_max(list_transform(options, lambda o: length(o))) + ?
        """,
        # what Python's str.strip() removes, as strict measures (DuckDB's one-argument trim() removes spaces)
        [WHITESPACE, strict_max_extra],
    ).fetchall()
    hits_id: list[str] = []
    hits_letter: list[str] = []
    for row_id, gen, opts in cand:
        letter = strict(gen, opts)
        if letter is not None:
            hits_id.append(row_id)
            hits_letter.append(letter)
    if hits_id:
        con.register("_strict", pa.table({"row_id": hits_id, "letter": hits_letter}))
        try:
            con.execute(
                "UPDATE final SET strict_letter = s.letter FROM _strict s WHERE final.row_id = s.row_id"
            )
        finally:
            con.unregister("_strict")

    fw_sql, fw_params = framework_letters_sql(framework_patterns, "final")
    con.execute("CREATE OR REPLACE TEMP TABLE fw_letters AS " + fw_sql, fw_params)


# The SQL side of the parsers that ingest runs in DuckDB (RE2), over a table with columns (row_id, generation,
# n_opt); tests/test_parsers.py calls these same two builders to check them against mcqaudit.parsers.


def naive_letter_sql(ns: Sequence[int], naive_pattern: Callable[[int], str]) -> tuple[str, list]:
    """(SQL expression over ``generation`` and ``n_opt``, its parameters): the naive parser's letter, for rows
    with any of the option counts ``ns``; NULL when it finds none."""
    if not ns:
        return "NULL::VARCHAR", []
    case = "CASE n_opt " + " ".join("WHEN ? THEN regexp_extract(generation, ?, 0)" for _ in ns) + " END"
    params: list = []
    for n in ns:
        params += [n, naive_pattern(n)]
    return f"upper(nullif({case}, ''))", params


def framework_letters_sql(framework_patterns: dict[str, tuple[str, ...]], table: str) -> tuple[str, list]:
    """(a SELECT of (row_id, parser, letter) over ``table``, its parameters): each framework parser's letter
    per row. The first pattern that matches (non-empty group 1) wins; an out-of-range letter reads as no
    letter (it does not fall through to the next pattern). ``table`` is a name of this module's, never input."""
    selects = []
    params: list = []
    for name, patterns in framework_patterns.items():
        if not patterns:
            continue
        first = (
            "coalesce(" + ", ".join("nullif(regexp_extract(generation, ?, 1), '')" for _ in patterns) + ")"
        )
        params += [name, *patterns]
        selects.append(
            f"SELECT row_id, ? AS parser, CASE WHEN length(l) = 1 AND ascii(l) BETWEEN 65 AND 64 + n_opt THEN l END AS letter "
            f"FROM (SELECT row_id, n_opt, upper({first}) AS l FROM {table})"
        )
    if not selects:
        return (
            "SELECT NULL::VARCHAR AS row_id, NULL::VARCHAR AS parser, NULL::VARCHAR AS letter WHERE false",
            [],
        )
    return " UNION ALL ".join(selects), params


def upsert_items(
    con: duckdb.DuckDBPyConnection, items: Iterable[tuple[str, str, list[str], int, str | None]]
) -> tuple[int, list[str]]:
    """Insert items from an items file; an item already in the study must have the same option set.

    Returns (new items, conflict messages). The canonical order of an existing item is never changed.
    """
    rows = list(items)
    if not rows:
        return 0, []
    con.register(
        "_items",
        pa.table(
            {
                "item_id": [r[0] for r in rows],
                "question": [r[1] for r in rows],
                "options": [r[2] for r in rows],
                "gold_index": [r[3] for r in rows],
                "metadata": [r[4] for r in rows],
            }
        ),
    )
    try:
        conflicts = [
            f"item {r[0]}: its option set differs from the one already in the study: {r[1]}"
            for r in con.execute(
                """
                SELECT n.item_id, to_json(i.options)::VARCHAR FROM _items n JOIN items i USING (item_id)
                WHERE list_sort(n.options) <> list_sort(i.options)
                """
            ).fetchall()
        ]
        if conflicts:
            return 0, conflicts
        n = con.execute(
            """
            INSERT INTO items
            SELECT item_id, question, options, gold_index, metadata::JSON, 'items'
            FROM _items WHERE item_id NOT IN (SELECT item_id FROM items)
            """
        ).fetchone()
        return int(n[0]) if n else 0, []
    finally:
        con.unregister("_items")


def next_ingest_id(con: duckdb.DuckDBPyConnection) -> int:
    return _count(con, "SELECT nextval('ingest_seq')")


def record_ingest(
    con: duckdb.DuckDBPyConnection, ingest_id: int, source: str, fmt: str, res: LoadResult
) -> None:
    con.execute(
        "INSERT INTO ingests VALUES (?, ?, ?, ?, ?, ?, ?, now())",
        [ingest_id, source, fmt, res.loaded, res.unchanged, res.replaced, res.rejected],
    )
