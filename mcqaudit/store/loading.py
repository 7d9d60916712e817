"""SQL for `mcqaudit ingest`: stage → validate → resolve items → write (docs/design.md §3).

The whole load of one file runs inside one transaction (see `Study.write`): either every good row lands,
or (without --skip-bad) nothing does.

- **Stage** puts every row into the temp table ``stg``: its line (or row) number, an error found before
  parsing, the JSON type of the record, and one JSON value per field (NULL when absent). JSONL takes DuckDB's
  typed fast path first (`read_json` with the columns given, every field a JSON value), which checks and
  types the rows as it reads them, straight into ``parsed`` (no ``stg``: the JSON values are not kept);
  when DuckDB cannot read the file, or its records do not match its lines one to one (blank lines), the
  file is staged line by line from Python instead (`stage_batch`, exact line numbers, a reason for each
  line that is not JSON). CSV and Parquet are read by `read_csv` / `read_parquet` and staged the same way.
- **Validate** runs :data:`CHECKS`, one declarative table of field checks, twice over at most: once as a
  single flag per row over every row, and, only when a row is flagged, as the reasons of the flagged rows.
  A JSONL file the fast path staged is restaged line by line before the reasons are read, so that every
  problem names its real line and its raw text.
- **Resolve** fixes each item's canonical order, derives orientations and row ids, and finds the problems
  between rows (option sets, gold, duplicates, conflicts with the study). The flag's pass already resolves
  the rows as if none were flagged (``canon``, then ``final`` straight from ``stg``), so a clean file is
  not written once more as ``parsed``; a flagged file gets ``parsed`` and is resolved from it.
- **Write** runs the parsers and inserts the rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from mcqaudit.files import line_chunks
from mcqaudit.ingest.fields import FIELDS, field_keys
from mcqaudit.ingest.fields import columns as _columns
from mcqaudit.reasoning import FINISH_LENGTH, REASONING_START, finish_reason_sql, split_reasoning
from mcqaudit.store.reviews import retract_for_replaced_rows
from mcqaudit.store.schema import refresh_current_judge
from mcqaudit.vocab import LETTERS, WHITESPACE

_MAX = len(LETTERS)
# the fields whose value is JSON (a CSV cell holds it as JSON text)
_JSON_FIELDS = ("options", "option_logprobs", "metadata", "usage")
USAGE_KEYS = ("prompt_tokens", "completion_tokens")

# json_type() names -> the JSON words a user knows
_JSON_WORDS = (
    "CASE {t} WHEN 'VARCHAR' THEN 'a string' WHEN 'BIGINT' THEN 'an integer' WHEN 'UBIGINT' THEN 'an integer' "
    "WHEN 'DOUBLE' THEN 'a number' WHEN 'BOOLEAN' THEN 'a boolean' WHEN 'NULL' THEN 'null' "
    "WHEN 'ARRAY' THEN 'an array' WHEN 'OBJECT' THEN 'an object' ELSE {t} END"
)


def _word(expr: str) -> str:
    return _JSON_WORDS.format(t=expr)


def _in_range(expr: str) -> str:
    """SQL: `expr` is one option letter within the row's option count (no per-row regex: patterns built
    from row values would be compiled once per row)."""
    return f"(length({expr}) = 1 AND ascii({expr}) BETWEEN 65 AND 64 + n_opt)"


class StageError(ValueError):
    """A CSV or Parquet file that DuckDB cannot read at all; ``line`` is the file's line DuckDB names, when
    it names one (a ragged row, an unterminated quote)."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.line = line


def _csv_error(exc: duckdb.Error) -> StageError:
    """DuckDB's CSV error as (the line it names, the reason), without its advice on reader options."""
    import re

    text = str(exc)
    found = re.search(r"CSV Error on Line: (\d+)", text)
    if found is None:
        return StageError(text.split("\n")[0])
    parts = [p.strip() for p in text.split("\n")]
    reason = next(
        (p for p in parts[1:] if p and not p.startswith(("Original Line:", "Possible", "*"))),
        "cannot be parsed",
    )
    return StageError(reason, int(found.group(1)))


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
    with_reasoning: int = 0  # loaded rows with a reasoning (a field, or a block split off)
    truncated: int = 0  # loaded rows cut off (docs/design.md §3)


def _count(con: duckdb.DuckDBPyConnection, sql_text: str, params: list[object] | None = None) -> int:
    row = con.execute(sql_text, params or []).fetchone()
    return int(row[0]) if row else 0


def _temp_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether this connection has the temporary table ``name`` (which of the staged tables a step left)."""
    return bool(_count(con, "SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name = ?", [name]))


@contextlib.contextmanager
def _then(con: duckdb.DuckDBPyConnection, *cleanups: str | Callable[[], object]) -> Iterator[None]:
    """Run ``cleanups`` (statements: drops, settings; or calls) after the block. When the block raised, a
    clean-up that fails too (a transaction DuckDB aborted, after memory or the disk ran out) does not hide
    its error."""

    def run() -> None:
        for c in cleanups:
            if isinstance(c, str):
                con.execute(c)
            else:
                c()

    try:
        yield
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            run()
        raise
    run()


def _lit(text: str) -> str:
    """A SQL string literal (for names that come from a file's header or a `--map`)."""
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _path(column: str) -> str:
    """The JSON path of a top-level key (`--map` refuses column names with a double quote)."""
    return '$."' + column + '"'




# DuckDB's memory limit for one ingest (MCQAUDIT_INGEST_MEMORY_LIMIT overrides it): at 1 M rows 650MB
# keeps the whole process under 0.9 GiB at the speed of 800MB (benchmarks/RESULTS.md)
_INGEST_MEMORY_MB = 650
INGEST_MEMORY_LIMIT = f"{_INGEST_MEMORY_MB}MB"


def memory_for_line(longest_line: int) -> str:
    """The memory limit for a file whose longest line is this long (bytes): the default, plus 32 times the
    line, at most half the machine's memory (never below the default). DuckDB's JSON functions allocate
    buffers of several times a line's size: a 50 MB generation staged line by line (a blank line in the
    file) ran out under 1.4 GB and peaked at 0.95 GiB under 2 GB; the limit is a ceiling, not a use."""
    import os

    want = _INGEST_MEMORY_MB + 32 * (longest_line >> 20)
    try:
        half = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2 >> 20
    except (ValueError, OSError, AttributeError):
        half = want
    return f"{max(min(want, half), _INGEST_MEMORY_MB)}MB"


def bounded_memory(con: duckdb.DuckDBPyConnection, memory_limit: str = INGEST_MEMORY_LIMIT) -> None:
    """DuckDB spills the big intermediate tables to disk beyond this limit."""
    con.execute("SET memory_limit = ?", [memory_limit])


# ---------------------------------------------------------------------------------------------------------
# stage

_STG_COLUMNS = ", ".join(f"{name} JSON" for name in FIELDS)


def create_staging(con: duckdb.DuckDBPyConnection) -> None:
    """The raw-text staging table of the line-by-line path: (line, JSON text, error found before parsing)."""
    con.execute("CREATE OR REPLACE TEMP TABLE staged (line BIGINT, text VARCHAR, pre_error VARCHAR)")


def stage_batch(
    con: duckdb.DuckDBPyConnection,
    lines: Sequence[int],
    texts: Sequence[str | None],
    pre_errors: Sequence[str | None],
) -> None:
    """Append one batch of raw JSON lines (with line numbers, and any error found before parsing)."""
    import pyarrow as pa

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


def stage_from_text(con: duckdb.DuckDBPyConnection, columns: Mapping[str, str] | None = None) -> None:
    """``staged`` (line, text) -> ``stg``: each field's JSON value read from its key (JSON null kept as
    null, so that a reason can say so)."""
    col = _columns(columns)
    paths = ", ".join(_lit(_path(col[n])) for n in FIELDS)
    fields = ", ".join(f"CASE WHEN jt = 'OBJECT' THEN e[{i}] END AS {n}" for i, n in enumerate(FIELDS, 1))
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE stg AS
        SELECT line, coalesce(pre_error, {_DUPLICATE_KEY}) AS pre_error, NULL::VARCHAR[] AS bad_utf8, jt, {fields}
        FROM (
            SELECT line, pre_error, json_type(j) AS jt, json_extract(j, [{paths}]) AS e,
                CASE WHEN json_type(j) = 'OBJECT' THEN json_keys(j) END AS keys
            FROM (SELECT line, pre_error, CASE WHEN pre_error IS NULL AND json_valid(text) THEN text::JSON END AS j
                  FROM staged)
        )
        """
    )


# a key twice in one object: JSON readers keep one of the two values (DuckDB the first), so it is refused
_DUPLICATE_KEY = (
    "CASE WHEN len(keys) <> len(list_distinct(keys)) THEN 'duplicate key ' || to_json(list_filter(keys, "
    "lambda k, i: list_position(keys, k) < i)[1])::VARCHAR || ' in the object: a JSON reader keeps only one "
    "of its values, so say it once' END"
)


def key_mentions(con: duckdb.DuckDBPyConnection, columns: Mapping[str, str] | None) -> dict[str, int]:
    """{key: rows of the fast path's ``parsed`` that have it}, for the keys the fields are read from."""
    col = _columns(columns)
    counts = ", ".join(f"count(*) FILTER (present & {1 << i} <> 0)" for i in range(len(FIELDS)))
    row = con.execute(f"SELECT {counts} FROM parsed").fetchone() or (0,) * len(FIELDS)
    out: dict[str, int] = {}
    for n, c in zip(FIELDS, row, strict=True):
        out[col[n]] = max(out.get(col[n], 0), int(c))
    return out


def stage_jsonl_fast(
    con: duckdb.DuckDBPyConnection,
    path: str,
    lines: Callable[[], int],
    columns: Mapping[str, str] | None,
    longest_line: int = 0,
    default_arm: str | None = None,
) -> bool:
    """DuckDB's typed fast path, in one pass over the file: `read_json` (one JSON value per field) checked
    and typed as it is read, straight into ``parsed`` (the typed values, the flag of every check but the
    orientation's, which :func:`flagged` adds, and ``present``: a bit per field with a value, for
    :func:`key_mentions`); the JSON values themselves are not kept. A line DuckDB cannot read stages as a row
    of nulls (``ignore_errors``: an error would abort the transaction), which the checks flag. False (nothing
    staged) when the records and the file's lines (``lines()``, counted first) are not one to one: blank
    lines would shift the numbers; ``longest_line`` bounds the longest line (read_json's buffer). Raises
    StageError when DuckDB cannot read the file at all."""
    col = _columns(columns)
    spec = "{" + ", ".join(f"{_lit(k)}: 'JSON'" for k in field_keys(columns)) + "}"
    fields = ", ".join(f"{_ident(col[n])} AS {n}" for n in FIELDS)
    source = f"""(
        SELECT NULL::BIGINT AS line, NULL::VARCHAR AS pre_error, NULL::VARCHAR[] AS bad_utf8, 'OBJECT' AS jt, {fields}
        FROM read_json(?, format = 'newline_delimited', records = true, columns = {spec},
                       ignore_errors = true, maximum_object_size = ?)
    )"""
    present = " + ".join(f"({n} IS NOT NULL)::INTEGER * {1 << i}" for i, n in enumerate(FIELDS))
    checked = _typed_select(_flag(checks(default_arm, orientation=False)), f", {present} AS present")
    con.execute("SET VARIABLE default_arm = ?", [default_arm])
    con.execute("SET preserve_insertion_order = true")  # the record order gives the line numbers
    try:
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE parsed AS {_validation_cte(source)} {checked}",
            # DuckDB's default (16 MB) unless a line is longer: a bigger buffer costs memory in every thread
            [path, max(longest_line, 16 << 20)],
        )
        # no row_number() window (it gathers every record in one place first): the rows keep the file's
        # order, so a row's line is its place in the table (rowids start high inside a transaction)
        con.execute("UPDATE parsed SET line = rowid - (SELECT min(rowid) FROM parsed) + 1")
    except (duckdb.OutOfMemoryException, duckdb.IOException):
        raise  # memory or a full disk (spill files), not the file: the caller says which
    except duckdb.Error as exc:
        raise StageError(str(exc).split("\n")[0]) from None
    if lines() != staged_count(con, "parsed"):
        con.execute("DROP TABLE parsed")
        return False
    return True


def stage_csv(
    con: duckdb.DuckDBPyConnection, path: str, columns: Mapping[str, str] | None = None
) -> list[str]:
    """Stage a CSV file (row numbers count data rows from 1); returns the header's column names.

    CSV has no types: `options` (a JSON array or object), `option_logprobs` and `metadata` are JSON strings,
    `gold` and `sample` digits are integers, and an empty cell is an absent field. ``columns`` (field ->
    column, docs/design.md §3 `--map`) says which column holds each field.
    """
    header = csv_header(path)
    # the dialect is given, not sniffed: a broken line is named by DuckDB instead of changing the dialect
    # (which read every good row as one column); a long cell is fine up to 256 MB
    spec = "{" + ", ".join(f"{_lit(h)}: 'VARCHAR'" for h in header) + "}"
    try:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _csv AS SELECT row_number() OVER () AS _row, * FROM read_csv(?, "
            "auto_detect = false, header = true, delim = ',', quote = '\"', escape = '\"', strict_mode = true, "
            f"max_line_size = {1 << 28}, columns = {spec})",
            [path],
        )
    except (duckdb.OutOfMemoryException, duckdb.IOException):
        raise  # memory or a full disk (spill files), not the file: the caller says which
    except duckdb.Error as exc:
        raise _csv_error(exc) from None
    have = set(header)
    col = _columns(columns)
    parts = []
    for name in FIELDS:
        if col[name] not in have:
            parts.append(f"NULL::JSON AS {name}")
            continue
        c = _ident(col[name])
        if name == "generation":
            # an empty cell is an empty generation, which is legal (OTHER by rule)
            expr = f"to_json(coalesce({c}, ''))"
        else:
            if name in _JSON_FIELDS:
                # invalid JSON stays a string, so validation reports the field's type instead of dropping it
                value = f"CASE WHEN json_valid({c}) THEN json({c}) ELSE to_json({c}) END"
            elif name in ("gold", "sample"):
                value = f"CASE WHEN regexp_full_match(trim({c}), '[0-9]+') THEN json(trim({c})) ELSE to_json({c}) END"
            else:
                value = f"to_json({c})"
            expr = f"CASE WHEN {c} IS NULL OR {c} = '' THEN NULL ELSE {value} END"
        parts.append(f"({expr})::JSON AS {name}")
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE stg AS SELECT _row AS line, NULL::VARCHAR AS pre_error, "
        f"NULL::VARCHAR[] AS bad_utf8, 'OBJECT' AS jt, {', '.join(parts)} FROM _csv"
    )
    con.execute("DROP TABLE _csv")
    return header


def csv_header(path: str) -> list[str]:
    """The column names of a CSV file's first record (a header cell may be quoted), after checking that the
    whole file is UTF-8 (DuckDB's CSV reader lets some bad bytes through). Raises StageError naming the line
    of the first bad byte, or for a file without a header."""
    import csv
    import io

    first = b""
    lines_before = 0  # lines before the current chunk, which starts at a line start
    with open(path, "rb") as fh:
        for data in line_chunks(fh, CSV_CHUNK):
            if lines_before == 0:
                first = data.split(b"\n", 1)[0]
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as exc:
                at = exc.start
                line = lines_before + data.count(b"\n", 0, at) + 1
                column = at - (data.rfind(b"\n", 0, at) + 1) + 1
                raise StageError(f"not valid UTF-8 (byte {data[at]:#04x} at column {column})", line) from None
            lines_before += data.count(b"\n")
    text = first.decode("utf-8").removeprefix("\ufeff").removesuffix("\r")
    row = next(csv.reader(io.StringIO(text)), [])
    if not row:
        raise StageError("no header row", 1)
    if len(row) == 1:
        # one column: most likely another delimiter, whose quoted cells read as an unterminated quote later
        found = max(((text.count(d), name) for d, name in _OTHER_DELIMITERS), default=(0, ""))
        if found[0]:
            raise StageError(
                f"the header has no comma but {found[0]} {found[1]}: the delimiter looks wrong; mcqaudit reads "
                "comma-separated CSV (save the file with commas, or as JSONL)",
                1,
            )
    return row


_OTHER_DELIMITERS = ((";", "semicolons"), ("\t", "tabs"), ("|", "pipes"))


CSV_CHUNK = 32 << 20


def stage_parquet(
    con: duckdb.DuckDBPyConnection, path: str, columns: Mapping[str, str] | None = None
) -> list[str]:
    """Stage a Parquet file, one JSON value per field; returns its column names."""
    try:
        cur = con.execute("SELECT * FROM read_parquet(?) LIMIT 0", [path])
        types = {d[0]: str(d[1]).upper() for d in cur.description or []}
        header = list(types)
        col = _columns(columns)
        parts = []
        binary = []
        for n in FIELDS:
            c = _ident(col[n])
            if col[n] not in types:
                parts.append(f"NULL::JSON AS {n}")
            elif types[col[n]] == "BLOB":
                # BINARY: its text when it is UTF-8 (never the escaped bytes); otherwise refused by name
                parts.append(f"to_json(coalesce(try(decode({c})), ''))::JSON AS {n}")
                binary.append(f"CASE WHEN {c} IS NOT NULL AND try(decode({c})) IS NULL THEN {_lit(n)} END")
            elif types[col[n]] == "BLOB[]":
                # list<binary> (options): each element as for BINARY, and refused when one is not UTF-8
                parts.append(
                    f"to_json(list_transform({c}, lambda b: coalesce(try(decode(b)), '')))::JSON AS {n}"
                )
                binary.append(
                    f"CASE WHEN list_bool_or(list_transform({c}, lambda b: b IS NOT NULL AND try(decode(b)) IS NULL)) "
                    f"THEN {_lit(n)} END"
                )
            else:
                parts.append(f"to_json({c})::JSON AS {n}")
        bad_utf8 = (
            f"nullif(list_filter([{', '.join(binary)}], lambda v: v IS NOT NULL), [])"
            if binary
            else "NULL::VARCHAR[]"
        )
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE stg AS SELECT file_row_number + 1 AS line, NULL::VARCHAR AS pre_error, "
            f"{bad_utf8} AS bad_utf8, 'OBJECT' AS jt, {', '.join(parts)} FROM read_parquet(?, file_row_number = true)",
            [path],
        )
    except (duckdb.OutOfMemoryException, duckdb.IOException):
        raise  # memory or a full disk (spill files), not the file: the caller says which
    except duckdb.Error as exc:
        raise StageError(str(exc).split("\n")[0]) from None
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


def staged_count(con: duckdb.DuckDBPyConnection, table: str = "stg") -> int:
    """The rows staged (``table``: ``stg``, or the fast path's ``parsed``)."""
    return _count(con, f"SELECT count(*) FROM {table}")


def all_columns_seen(con: duckdb.DuckDBPyConnection, columns: Mapping[str, str]) -> bool:
    """Whether every mapped field has a value in some row the fast path staged (``parsed``)."""
    seen = ", ".join(f"bool_or(present & {1 << FIELDS.index(name)} <> 0)" for name in columns)
    row = con.execute(f"SELECT {seen} FROM parsed").fetchone() if columns else (True,)
    return row is not None and all(bool(v) for v in row)


def raw_rows(con: duckdb.DuckDBPyConnection, lines: Sequence[int], table: str = "staged") -> dict[int, str]:
    """The raw text of some staged rows: from ``staged`` the line itself, from ``stg`` (CSV, Parquet) the
    row's fields as one JSON object."""
    if not lines:
        return {}
    import pyarrow as pa

    con.register("_want", pa.table({"line": pa.array(list(lines), pa.int64())}))
    try:
        if table == "staged":
            got = con.execute(
                "SELECT line, text FROM staged WHERE line IN (SELECT line FROM _want)"
            ).fetchall()
        else:
            obj = ", ".join(f"{_lit(n)}, {n}" for n in FIELDS)
            got = con.execute(
                f"SELECT line, json_merge_patch('{{}}', json_object({obj}))::VARCHAR FROM stg "
                "WHERE line IN (SELECT line FROM _want)"
            ).fetchall()
    finally:
        con.unregister("_want")
    return {int(line): text for line, text in got}


# ---------------------------------------------------------------------------------------------------------
# validate: one declarative table of checks


@dataclass(frozen=True)
class FieldSpec:
    """A field's JSON types (json_type names) and whether the row needs it. NULL among the types: a JSON
    null reads as absent."""

    name: str
    types: tuple[str, ...]
    required: bool
    type_message: str  # what the field must be, in the reason for a wrong type


SPECS: tuple[FieldSpec, ...] = (
    FieldSpec("item_id", ("VARCHAR",), True, "must be a string"),
    FieldSpec("arm", ("VARCHAR",), True, "must be a string"),
    FieldSpec("question", ("VARCHAR",), True, "must be a string"),
    FieldSpec("options", ("ARRAY", "OBJECT"), True, "must be a list of option texts"),
    FieldSpec("gold", ("VARCHAR", "BIGINT", "UBIGINT"), True, "must be a letter or a 0-based index"),
    FieldSpec("generation", ("VARCHAR",), True, "must be a string"),
    FieldSpec("orientation", ("VARCHAR", "NULL"), False, "must be a string"),
    FieldSpec("prompt", ("VARCHAR", "NULL"), False, "must be a string"),
    FieldSpec("sample", ("BIGINT", "UBIGINT", "NULL"), False, "must be a non-negative integer"),
    FieldSpec("parsed_letter", ("VARCHAR", "NULL"), False, "must be a string or null"),
    FieldSpec("option_logprobs", ("OBJECT", "NULL"), False, "must be an object"),
    FieldSpec("model", ("VARCHAR", "NULL"), False, "must be a string"),
    FieldSpec("metadata", ("OBJECT", "NULL"), False, "must be an object"),
    FieldSpec("reasoning", ("VARCHAR", "NULL"), False, "must be a string"),
    FieldSpec("finish_reason", ("VARCHAR", "NULL"), False, "must be a string"),
    FieldSpec(
        "usage", ("OBJECT", "NULL"), False, "must be an object with prompt_tokens and completion_tokens"
    ),
)


@dataclass(frozen=True)
class Check:
    """One problem a row can have: the field it is reported under, a predicate over the validation
    columns (see :func:`_validation_cte`), and the reason (a SQL string expression over the same columns)."""

    field: str
    predicate: str
    reason: str


_OK = "jt = 'OBJECT'"
_ARR = f"{_OK} AND t_options = 'ARRAY'"
_ARR_N = f"{_ARR} AND n_opt IS NOT NULL"
_N_OK = f"{_ARR_N} AND n_opt BETWEEN 2 AND {_MAX}"


# characters that show as nothing: soft hyphen, zero-width and joiners, bidi marks and overrides, word joiner
# and invisible operators, bidi isolates, BOM (RE2 syntax, so the SQL stays ASCII)
_INVISIBLE = r"[\x{00ad}\x{200b}-\x{200f}\x{202a}-\x{202e}\x{2060}-\x{2064}\x{2066}-\x{2069}\x{feff}]"


def _as_read(v: str) -> str:
    """SQL: a text as a reader tells it apart: invisible characters dropped, runs of whitespace one space,
    no outer spaces, NFC, lower case (options that are equal so are refused: they look identical)."""
    return (
        f"lower(nfc_normalize(trim(regexp_replace(regexp_replace({v}, '{_INVISIBLE}', '', 'g'), "
        "'\\s+', ' ', 'g'))))"
    )


# Characters NFC leaves as they are wherever they stand, in the blocks option texts are most often written
# in (Latin, Greek, Cyrillic, Hebrew, Arabic, Devanagari, Thai, punctuation and symbols, CJK, kana, Hangul
# syllables, full-width forms): assigned starters (canonical combining class 0) that NFC maps to themselves
# and that are the second character of no canonical composition (NFC_Quick_Check Yes). A text of ASCII and
# these only is in NFC, so nfc_normalize() is asked only about a text with another character (RE2 ranges;
# tests/test_ingest_nfc.py derives them again from unicodedata and checks them against DuckDB).
_NFC_STABLE = (
    r"\x{00a0}-\x{02ff}\x{0370}-\x{0373}\x{0375}-\x{0377}\x{037a}-\x{037d}\x{037f}\x{0384}-\x{0386}"
    r"\x{0388}-\x{038a}\x{038c}\x{038e}-\x{03a1}\x{03a3}-\x{0482}\x{0488}-\x{052f}\x{05be}\x{05c0}"
    r"\x{05c3}\x{05c6}\x{05d0}-\x{05ea}\x{05ef}-\x{05f4}\x{0600}-\x{060f}\x{061b}-\x{064a}"
    r"\x{0660}-\x{066f}\x{0671}-\x{06d5}\x{06dd}-\x{06de}\x{06e5}-\x{06e6}\x{06e9}\x{06ee}-\x{06ff}"
    r"\x{0900}-\x{093b}\x{093d}-\x{094c}\x{094e}-\x{0950}\x{0955}-\x{0957}\x{0960}-\x{097f}"
    r"\x{0e01}-\x{0e37}\x{0e3f}-\x{0e47}\x{0e4c}-\x{0e5b}\x{1e00}-\x{1f15}\x{1f18}-\x{1f1d}"
    r"\x{1f20}-\x{1f45}\x{1f48}-\x{1f4d}\x{1f50}-\x{1f57}\x{1f59}\x{1f5b}\x{1f5d}\x{1f5f}-\x{1f70}"
    r"\x{1f72}\x{1f74}\x{1f76}\x{1f78}\x{1f7a}\x{1f7c}\x{1f80}-\x{1fb4}\x{1fb6}-\x{1fba}"
    r"\x{1fbc}-\x{1fbd}\x{1fbf}-\x{1fc4}\x{1fc6}-\x{1fc8}\x{1fca}\x{1fcc}-\x{1fd2}\x{1fd6}-\x{1fda}"
    r"\x{1fdd}-\x{1fe2}\x{1fe4}-\x{1fea}\x{1fec}-\x{1fed}\x{1ff2}-\x{1ff4}\x{1ff6}-\x{1ff8}\x{1ffa}"
    r"\x{1ffc}\x{1ffe}\x{2002}-\x{2064}\x{2066}-\x{2071}\x{2074}-\x{208e}\x{2090}-\x{209c}"
    r"\x{20a0}-\x{20c0}\x{20dd}-\x{20e0}\x{20e2}-\x{20e4}\x{2100}-\x{2125}\x{2127}-\x{2129}"
    r"\x{212c}-\x{218b}\x{2190}-\x{2328}\x{232b}-\x{2426}\x{2440}-\x{244a}\x{2460}-\x{2adb}"
    r"\x{2add}-\x{2b73}\x{2b76}-\x{2b95}\x{2b97}-\x{2bff}\x{3000}-\x{3029}\x{3030}-\x{303f}"
    r"\x{3041}-\x{3096}\x{309b}-\x{30ff}\x{3400}-\x{4dbf}\x{4e00}-\x{9fff}\x{ac00}-\x{d7a3}"
    r"\x{ff01}-\x{ffbe}\x{ffc2}-\x{ffc7}\x{ffca}-\x{ffcf}\x{ffd2}-\x{ffd7}\x{ffda}-\x{ffdc}"
    r"\x{ffe0}-\x{ffe6}\x{ffe8}-\x{ffee}"
)
_NFC_UNSURE = "[^\\x{00}-\\x{7f}" + _NFC_STABLE + "]"


# a cheap guard before _as_read, over each row's options as DuckDB's compact JSON text (``o_txt``: an options
# list of strings, non-ASCII characters unescaped). Options without an invisible character, a run of
# spaces, a tab or newline or other control character (escaped in JSON), a space at an option's start or
# end (next to a quote), and already in NFC (the text is NFC exactly when each option is: a quote blocks
# composition), read as lower(v) alone, so a collision under lower() on the list's text (the JSON of the
# lowered options: escapes keep their meaning) is the only look-alike left, and only where lower() changes
# the text (otherwise the lowered options are the options, already distinct). No lambda: a lambda per
# option costs more than string functions over the list's text.
_MAY_LOOK_ALIKE = (
    f"regexp_matches(o_txt, '{_INVISIBLE}|  |\\\\[^\\\\\"/]|\" | \"') "
    f"OR (strlen(o_txt) <> length(o_txt) AND regexp_matches(o_txt, '{_NFC_UNSURE}') AND nfc_normalize(o_txt) <> o_txt) "
    "OR (o_low IS NOT NULL AND {low_dup})"
)
# (o_low: the lowered list, where lower() changes the list's text)
# the list joined by a unit separator, for the empty-option guard
_JOINED = "array_to_string(opts, chr(31))"


def checks(default_arm: str | None, orientation: bool = True) -> list[Check]:
    """Every problem visible within one row, in the order they are listed for a line (without
    ``orientation``: all but the orientation label's check, which reads the labels staged)."""
    out = [
        Check("line", "pre_error IS NOT NULL", "pre_error"),
        Check("line", "pre_error IS NULL AND jt IS NULL", "'not valid JSON'"),
        Check("line", "jt <> 'OBJECT'", f"'not a JSON object (got ' || {_word('jt')} || ')'"),
    ]
    for spec in SPECS:
        n, t = spec.name, f"t_{spec.name}"
        out.append(Check(n, f"list_contains(bad_utf8, {_lit(n)})", "'not valid UTF-8 text (a binary value)'"))
        types = spec.types
        if n == "arm" and default_arm is not None:
            types = (*types, "NULL")  # --arm: an arm of null is the default arm
        if spec.required and not (n == "arm" and default_arm is not None):
            reason = "missing required field" + (" (or pass --arm)" if n == "arm" else "")
            out.append(Check(n, f"{_OK} AND {n} IS NULL", _lit(reason)))
        allowed = ", ".join(_lit(x) for x in types)
        out.append(
            Check(
                n,
                f"{_OK} AND {n} IS NOT NULL AND {t} NOT IN ({allowed})",
                f"{_lit(spec.type_message + ', got ')} || {_word(t)}",
            )
        )
    out += [*_name_checks(), *_option_checks(), *_value_checks(orientation), *_usage_checks()]
    if default_arm is not None:
        out.append(
            Check(
                "arm",
                f"{_OK} AND t_arm = 'VARCHAR' AND s_arm <> getvariable('default_arm')",
                "'arm ' || s_arm || ' contradicts --arm ' || getvariable('default_arm')",
            )
        )
    return out


def _name_checks() -> list[Check]:
    """item_id and arm: not empty, and an arm that would look like another arm's name."""
    return [
        Check("item_id", f"{_OK} AND t_item_id = 'VARCHAR' AND trim(s_item_id) = ''", "'must not be empty'"),
        Check("arm", f"{_OK} AND t_arm = 'VARCHAR' AND trim(s_arm) = ''", "'must not be empty'"),
        # an arm name is compared by its characters but read by its look: `base` and `base\u200b` would be
        # two arms that nobody can tell apart
        Check(
            "arm",
            f"{_OK} AND t_arm = 'VARCHAR' AND strlen(s_arm) <> length(s_arm) AND regexp_matches(s_arm, '{_INVISIBLE}')",
            f"'has an invisible character (' || printf('U+%04X', unicode(regexp_extract(s_arm, '{_INVISIBLE}'))) "
            "|| '): it would look like another arm''s name'",
        ),
        Check(
            "arm",
            f"{_OK} AND t_arm = 'VARCHAR' AND trim(s_arm) <> '' AND "
            "regexp_matches(left(s_arm, 1) || right(s_arm, 1), '\\s')",
            "'has spaces at its start or end: it would look like another arm''s name'",
        ),
        Check(
            "arm",
            f"{_OK} AND t_arm = 'VARCHAR' AND strlen(s_arm) <> length(s_arm) AND nfc_normalize(s_arm) <> s_arm",
            "'is not in Unicode NFC form (' || to_json(nfc_normalize(s_arm))::VARCHAR || ' composed): it would look "
            "like another arm''s name'",
        ),
    ]


def _option_checks() -> list[Check]:
    """The options: a list of 2 to 26 distinct, non-empty texts that a reader can tell apart."""
    return [
        # an options object {"A": text, "B": text, ...} (keys the displayed letters in order) is its values
        Check(
            "options",
            f"{_OK} AND t_options = 'OBJECT'",
            "'an options object needs the displayed letters A, B, ... in order as its keys, got ' || "
            "coalesce(nullif(array_to_string(json_keys(o_raw), ', '), ''), 'none')",
        ),
        Check(
            "options",
            f"{_ARR} AND json_array_length(options) > 0 AND opts IS NULL",
            "'every option must be a string'",
        ),
        Check("options", f"{_ARR_N} AND n_opt < 2", "'needs at least 2 options, got ' || n_opt"),
        Check("options", f"{_ARR_N} AND n_opt > {_MAX}", f"'at most {_MAX} options, got ' || n_opt"),
        Check(
            "options",
            f"{_ARR_N} AND o_dup",
            "'duplicate option texts: ' || array_to_string(list_filter(list_distinct(opts), "
            "lambda v: len(list_filter(opts, lambda w: w = v)) > 1), ', ')",
        ),
        Check(
            "options",
            f"{_ARR_N} AND o_alike",
            f"(SELECT 'options ' || chr((64 + list_position(r, r[j]))::INTEGER) || ' and ' || chr((64 + j)::INTEGER) || ' look the "
            "same to a reader (' || to_json(opts[list_position(r, r[j])])::VARCHAR || ' and ' || "
            "to_json(opts[j])::VARCHAR || '): they differ only in case, spaces, invisible characters or "
            "Unicode form' FROM (SELECT r, list_filter(range(1, len(r) + 1), lambda i: list_position(r, r[i]) < i)[1] AS j "
            f"FROM (SELECT list_transform(opts, lambda v: {_as_read('v')}) AS r)))",
        ),
        Check(
            "options",
            # (a non-UTF-8 option of a Parquet list<binary> is staged empty: its own reason says why)
            f"{_ARR_N} AND o_empty AND NOT coalesce(list_contains(bad_utf8, 'options'), false)",
            "'an option text is empty'",
        ),
    ]


def _usage_checks() -> list[Check]:
    """usage (docs/design.md §3): an object with prompt_tokens and completion_tokens, non-negative integers
    (or null); other keys are kept as given."""
    keys = ", ".join(_lit(k) for k in USAGE_KEYS)
    out = [
        Check(
            "usage",
            f"{_OK} AND t_usage = 'OBJECT' AND NOT list_has_any(json_keys(usage), [{keys}])",
            "'has neither prompt_tokens nor completion_tokens (its keys: ' || "
            "coalesce(nullif(array_to_string(json_keys(usage), ', '), ''), 'none') || ')'",
        )
    ]
    for k in USAGE_KEYS:
        v = f"json_extract(usage, {_lit('$.' + k)})"
        out.append(
            Check(
                "usage",
                f"{_OK} AND t_usage = 'OBJECT' AND (json_type({v}) NOT IN ('BIGINT', 'UBIGINT', 'NULL') "
                f"OR (json_type({v}) = 'BIGINT' AND TRY_CAST({v} AS BIGINT) < 0))",
                f"'{k} must be a non-negative integer, got ' || {v}::VARCHAR",
            )
        )
    return out


def _value_checks(orientation: bool = True) -> list[Check]:
    """gold, sample, parsed_letter, option_logprobs and orientation against the row's options."""
    out = [
        Check(
            "gold",
            f"{_N_OK} AND t_gold IN ('BIGINT', 'UBIGINT') AND NOT (TRY_CAST(gold AS BIGINT) BETWEEN 0 AND n_opt - 1)",
            "'index ' || gold::VARCHAR || ' is out of range for ' || n_opt || ' options (0..' || (n_opt - 1) || ')'",
        ),
        Check(
            "gold",
            f"{_N_OK} AND t_gold = 'VARCHAR' AND NOT {_in_range('upper(trim(s_gold))')}",
            "'''' || s_gold || ''' is not a letter in A..' || chr(64 + n_opt)",
        ),
        Check(
            "sample",
            f"{_OK} AND t_sample = 'BIGINT' AND TRY_CAST(sample AS BIGINT) < 0",
            "'must be a non-negative integer, got ' || sample::VARCHAR",
        ),
        Check(
            "sample",
            f"{_OK} AND t_sample IN ('BIGINT', 'UBIGINT') AND TRY_CAST(sample AS INTEGER) IS NULL",
            "'is too large'",
        ),
        Check(
            "parsed_letter",
            f"{_N_OK} AND t_parsed_letter = 'VARCHAR' AND NOT {_in_range('upper(trim(s_parsed_letter))')}",
            "'''' || s_parsed_letter || ''' is not a letter in A..' || chr(64 + n_opt)",
        ),
        Check(
            "option_logprobs",
            f"{_N_OK} AND t_option_logprobs = 'OBJECT' AND NOT "
            f"list_bool_and(list_transform(json_keys(option_logprobs), lambda k: {_in_range('k')}))",
            "'keys must be option letters in A..' || chr(64 + n_opt)",
        ),
        Check(
            "option_logprobs",
            f"{_N_OK} AND t_option_logprobs = 'OBJECT' AND "
            "list_bool_and(list_transform(json_keys(option_logprobs), lambda k: length(k) = 1 AND ascii(k) BETWEEN 65 AND 90)) "
            "AND NOT list_bool_and(list_transform(json_keys(option_logprobs), "
            "lambda k: json_type(json_extract(option_logprobs, '$.' || k)) IN ('BIGINT', 'UBIGINT', 'DOUBLE')))",
            "'values must be numbers (log-probabilities)'",
        ),
        Check(
            "option_logprobs",
            f"{_N_OK} AND t_option_logprobs = 'OBJECT' AND "
            "list_bool_or(list_transform(json_keys(option_logprobs), lambda k: "
            "NOT isfinite(TRY_CAST(json_extract(option_logprobs, '$.' || k) AS DOUBLE))))",
            "'values must be finite numbers: NaN and Infinity are not JSON numbers (for a probability of 0, "
            "leave the letter out)'",
        ),
    ]
    if orientation:
        out.append(
            Check(
                "orientation",
                f"{_N_OK} AND t_orientation = 'VARCHAR' AND {_BAD_LABEL.format(label='s_orientation')}",
                "'''' || s_orientation || ''' is not an orientation label for ' || n_opt || "
                f"' options (a permutation of ' || left('{LETTERS}', n_opt) || ')'",
            )
        )
    return out


# an orientation label (a string) that is not one of ``_labels`` of the row's option count
_BAD_LABEL = "(length({label}) <> n_opt OR {label} NOT IN (SELECT label FROM _labels))"


def _jtype(c: str) -> str:
    """json_type of a staged value, read off its first character where that tells (the staged values are
    DuckDB's own compact JSON, so a string starts with a quote): no parse of a long generation."""
    return (
        f"CASE WHEN {c} IS NULL THEN NULL ELSE CASE left({c}::VARCHAR, 1) WHEN '\"' THEN 'VARCHAR' "
        f"WHEN '[' THEN 'ARRAY' WHEN '{{' THEN 'OBJECT' WHEN 'n' THEN 'NULL' WHEN 't' THEN 'BOOLEAN' "
        f"WHEN 'f' THEN 'BOOLEAN' ELSE json_type({c}) END END"
    )


# an options array whose elements are all strings, as DuckDB's compact JSON writes it (a match says so at
# once; a text it does not match is asked json_type() of each element)
_STRINGS_ARRAY = r'\[(?:"(?:[^"\\]|\\.)*"(?:,"(?:[^"\\]|\\.)*")*)?\]'


def _has_duplicate(max_pairs: int = 8, items: str = "opts") -> str:
    """SQL over ``items`` (a list of ``n_opt`` texts) and ``n_opt``: whether two of the texts are the same,
    as list_distinct() finds (NULL without a list): up to ``max_pairs`` texts by comparing each pair, past
    that by list_distinct() (a list_distinct() per row costs several times the comparisons)."""
    whens = []
    for n in range(2, max_pairs + 1):
        pairs = " OR ".join(f"{items}[{i}] = {items}[{j}]" for i in range(1, n) for j in range(i + 1, n + 1))
        whens.append(f"WHEN {n} THEN {pairs}")
    return f"CASE n_opt {' '.join(whens)} ELSE len(list_distinct({items})) < n_opt END"


_HAS_DUPLICATE = _has_duplicate()


def _validation_cte(source: str = "stg") -> str:
    """``x``: ``stg`` with each field's type (t_*), string value (s_*), the options as a list (``opts``, NULL
    unless every option is a string) and their count (``n_opt``); an options object whose keys are A, B, ...
    in order is read as the list of its values (``o_raw`` keeps it as given)."""
    raw = ", ".join(f"{_jtype(n)} AS t_{n}" for n in FIELDS if n != "options")
    strings = ", ".join(
        f"CASE WHEN t_{n} = 'VARCHAR' THEN {n}->>'$' END AS s_{n}"
        for n in FIELDS
        if n not in _JSON_FIELDS
    )
    as_list = (
        "CASE WHEN {t} = 'OBJECT' AND (json_keys({v}) = [] OR list_bool_and(list_transform(json_keys({v}), "
        "lambda k, i: k = chr((64 + i)::INTEGER)))) THEN to_json(json_extract({v}, '$.*')) ELSE {v} END"
    )
    return f"""
    WITH x0 AS (
        SELECT * REPLACE ({as_list.format(t=_jtype("options"), v="options")} AS options), options AS o_raw, {raw}
        FROM {source}
    ), x1 AS (
        SELECT *, {_jtype("options")} AS t_options, {strings} FROM x0
    ), x2 AS (
        SELECT *,
            CASE WHEN jt = 'OBJECT' AND t_options = 'ARRAY'
                  AND (regexp_full_match(options::VARCHAR, '{_STRINGS_ARRAY}') OR json_array_length(options) = 0
                       OR list_distinct(json_type(options, '$[*]')) = ['VARCHAR'])
                 THEN from_json(options, '["VARCHAR"]') END AS opts,
            len(opts)::INTEGER AS n_opt
        FROM x1
    ), x3 AS (
        SELECT *, {_HAS_DUPLICATE} AS o_dup, options::VARCHAR AS o_txt,
            CASE WHEN lower(options::VARCHAR) <> options::VARCHAR
                 THEN from_json(lower(options::VARCHAR), '["VARCHAR"]') END AS o_low
        FROM x2
    ), x AS (
        -- what the checks need of the options, per row (no join: a study has about as many distinct lists
        -- as rows / arms, and a join on them spills at 10 M rows)
        SELECT * EXCLUDE (o_txt, o_low),
            -- (CASE, not AND: a projection's AND evaluates the lambda on every row)
            CASE WHEN NOT o_dup AND ({_MAY_LOOK_ALIKE.replace("{low_dup}", _has_duplicate(items="o_low"))})
                 THEN len(list_distinct(list_transform(opts, lambda v: {_as_read('v')}))) < n_opt
                 ELSE false END AS o_alike,
            CASE WHEN n_opt > 0 AND regexp_matches({_JOINED}, '(?:^|\\x{{1f}}) *(?:\\x{{1f}}|$)')
                 THEN list_bool_or(list_transform(opts, lambda v: trim(v) = '')) ELSE false END AS o_empty
        FROM x3
    )
    """


def _any_problem(cs: Sequence[Check]) -> str:
    return " OR ".join(f"coalesce({c.predicate}, false)" for c in cs)


def _flag(cs: Sequence[Check]) -> str:
    """SQL: whether any check's predicate is true (NULL counts as false), as :func:`_any_problem`, for a
    projection: a CASE condition evaluates each AND only on the rows still undecided, where a projected
    OR of the predicates evaluates every one of them on every row."""
    return "CASE WHEN " + " OR ".join(f"({c.predicate})" for c in cs) + " THEN true ELSE false END"


def _orientation_labels(con: duckdb.DuckDBPyConnection, fast: bool = False) -> None:
    """``_labels``: the distinct orientation labels staged (``fast``: typed in ``parsed``) that are a
    permutation of the first letters (as many as the label is long), for the orientation check: a few labels
    checked once, not every row."""
    labels = (
        "SELECT DISTINCT given_orientation AS label FROM parsed WHERE given_orientation IS NOT NULL"
        if fast
        else "SELECT o->>'$' AS label FROM (SELECT DISTINCT orientation AS o FROM stg WHERE jt = 'OBJECT') "
        "WHERE left(o::VARCHAR, 1) = '\"'"
    )
    # two statements: in one, DuckDB pushes the filter below the DISTINCT, onto every row (0.3 s at 1 M rows,
    # where the distinct labels then filtered take 10 ms)
    con.execute(f"CREATE OR REPLACE TEMP TABLE _labels AS {labels}")
    con.execute(
        "DELETE FROM _labels WHERE "
        f"(array_to_string(list_sort(string_split(label, '')), '') = left('{LETTERS}', length(label))) IS NOT TRUE"
    )


def flagged(con: duckdb.DuckDBPyConnection, default_arm: str | None) -> int:
    """One pass over every staged row, a flag ``bad`` for any problem visible within the row
    (:data:`checks`); returns how many rows are flagged. The same pass resolves the rows as if none were
    flagged (``canon``, then ``final``: see :func:`_resolve`), so that a file without problems is not
    written once more as ``parsed`` first; when some row is flagged, ``parsed`` holds the typed values of
    every row with its flag instead (and ``final`` is dropped). After the fast path (no ``stg``: it staged
    ``parsed`` itself, every check but the orientation's flagged), only that check is left to do."""
    con.execute("SET VARIABLE default_arm = ?", [default_arm])
    if not _temp_table(con, "stg"):
        return _flagged_fast(con)
    con.execute("DROP TABLE IF EXISTS parsed")
    _orientation_labels(con)
    # the item canons of the rows as typed (every row's: right when none is flagged)
    con.execute(f"CREATE OR REPLACE TEMP VIEW _typed AS {_validation_cte()} {_typed_select('false')}")
    with _then(con, "DROP VIEW _typed"):
        _canon(con, "_typed")
    con.execute("SET preserve_insertion_order = false")  # (a row keeps its line in a column)
    with _then(con, "SET preserve_insertion_order = true"):
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE final AS
            {_final_sql(f"({_validation_cte()} {_typed_select(_flag(checks(default_arm)))})", fused=True)}
            """
        )
    bad = _count(con, "SELECT count(*) FROM final WHERE bad")
    if bad:
        con.execute(f"CREATE OR REPLACE TEMP TABLE parsed AS SELECT {_PARSED_COLUMNS} FROM final")
        con.execute("DROP TABLE final")
        con.execute("DROP TABLE canon")
    return bad


def _flagged_fast(con: duckdb.DuckDBPyConnection) -> int:
    """:func:`flagged` after the fast path: the orientation check over ``parsed``, which then holds every
    row's flag; returns how many rows are flagged. Without any, ``parsed`` is resolved by :func:`_resolve`."""
    con.execute("ALTER TABLE parsed DROP COLUMN present")  # (read by key_mentions, before)
    _orientation_labels(con, fast=True)
    wrong_label = (
        f"n_opt BETWEEN 2 AND {_MAX} AND given_orientation IS NOT NULL AND "
        + _BAD_LABEL.format(label="given_orientation")
    )
    con.execute(f"UPDATE parsed SET bad = true WHERE NOT bad AND {wrong_label}")
    return _count(con, "SELECT count(*) FROM parsed WHERE bad")


def diagnose(con: duckdb.DuckDBPyConnection, default_arm: str | None) -> None:
    """The reasons (``errs``: line, field, reason) of every row with a problem visible within the row."""
    con.execute("SET VARIABLE default_arm = ?", [default_arm])
    _orientation_labels(con)
    cs = checks(default_arm)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _flagged AS
        {_validation_cte()} SELECT * FROM x WHERE {_any_problem(cs)}
        """
    )
    union = "\nUNION ALL\n".join(
        f"SELECT line, {_lit(c.field)} AS field, {c.reason} AS reason FROM _flagged WHERE coalesce({c.predicate}, false)"
        for c in cs
    )
    con.execute(f"INSERT INTO errs SELECT line, field, reason FROM ({union})")
    con.execute("DROP TABLE _flagged")


# the columns of ``parsed`` (and the first columns of ``final``)
_PARSED_COLUMNS = (
    "line, bad, item_id, arm, question, options, n_opt, gold_letter, generation, given_orientation, prompt, "
    "sample, user_letter, option_logprobs, model, metadata, reasoning, finish_reason, usage"
)


def _typed_select(bad: str, extra: str = "") -> str:
    """The SELECT over the validation CTE's ``x`` of the typed values of every staged row (the
    :data:`_PARSED_COLUMNS`, then ``extra``), ``bad`` the flag's SQL. No expression here can raise on a bad
    value."""
    return f"""
        SELECT line, {bad} AS bad,
            s_item_id AS item_id,
            coalesce(s_arm, getvariable('default_arm')) AS arm,
            s_question AS question,
            opts AS options,
            n_opt,
            CASE WHEN t_gold = 'VARCHAR' THEN upper(trim(s_gold))
                 WHEN TRY_CAST(gold AS INTEGER) BETWEEN 0 AND {_MAX - 1} THEN chr(65 + TRY_CAST(gold AS INTEGER))
            END AS gold_letter,
            s_generation AS generation,
            s_orientation AS given_orientation,
            s_prompt AS prompt,
            coalesce(TRY_CAST(sample AS INTEGER), 0) AS sample,
            upper(trim(s_parsed_letter)) AS user_letter,
            CASE WHEN t_option_logprobs = 'OBJECT' THEN option_logprobs END AS option_logprobs,
            s_model AS model,
            CASE WHEN t_metadata = 'OBJECT' THEN metadata END AS metadata,
            s_reasoning AS reasoning,
            {finish_reason_sql("s_finish_reason")} AS finish_reason,
            CASE WHEN t_usage = 'OBJECT' THEN usage END AS usage{extra}
        FROM x
    """


def typed_rows(con: duckdb.DuckDBPyConnection, bad: str | None = None) -> None:
    """``parsed``: the typed values of the staged rows (the same columns the checks read, so the fast path
    and the line-level path store the same values): with ``bad`` (a predicate), of every row with that
    flag; without, of the rows without a reason in ``errs``. No expression here can raise on a bad value."""
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE parsed AS
        {_validation_cte()}
        {_typed_select(bad or "false")}
        {"" if bad else "WHERE line NOT IN (SELECT line FROM errs)"}
        """
    )


# ---------------------------------------------------------------------------------------------------------
# resolve items and write


def create_errors(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE errs (line BIGINT, field VARCHAR, reason VARCHAR)")


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
    raw: Callable[[Sequence[int]], dict[int, str]] | None = None,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> LoadResult:
    """Resolve and write the validated rows (``parsed``, with the problems found so far in ``errs``);
    returns what happened. When errors exist and ``skip_bad`` is false, nothing is written (the caller rolls
    back). ``raw`` gives the raw text of some rows (default: :func:`raw_rows`)."""
    res = LoadResult()
    con.execute("SET preserve_insertion_order = false")
    res.duplicates_in_file = _resolve(con, replace)
    res.error_count = _count(con, "SELECT count(*) FROM errs")
    if res.error_count:
        shown = con.execute(
            "SELECT line, field, reason FROM errs ORDER BY line, field LIMIT ?", [error_cap]
        ).fetchall()
        get_raw = raw or (lambda lines: raw_rows(con, lines))
        texts = get_raw(sorted({int(r[0]) for r in shown})) if skip_bad else {}
        res.errors = [(int(r[0]), r[1], r[2], texts.get(int(r[0]))) for r in shown]
        if not skip_bad:
            return res
        bad = [int(r[0]) for r in con.execute("SELECT DISTINCT line FROM errs ORDER BY 1").fetchall()]
        texts = get_raw(bad)
        import pyarrow as pa

        con.register(
            "_raw",
            pa.table({"line": pa.array(list(texts), pa.int64()), "text": pa.array(list(texts.values()))}),
        )
        try:
            con.execute(
                "INSERT INTO rejected_rows SELECT ?, ?, e.line, e.field, e.reason, r.text "
                "FROM errs e LEFT JOIN _raw r USING (line)",
                [ingest_id, source],
            )
        finally:
            con.unregister("_raw")
        res.rejected = len(bad)
        con.execute("DELETE FROM final WHERE line IN (SELECT line FROM errs)")
    if progress:
        progress("writing", 0, None)
    _write(con, res, ingest_id, strict, strict_max_extra, naive_pattern, framework_patterns, progress)
    return res


def _canonical_from_label(options: str, label: str) -> str:
    """SQL: the canonical order a row's orientation label gives its displayed options (canonical letter k is
    the option shown where the label has that letter)."""
    return (
        f"list_transform(range(1, len({options}) + 1), "
        f"lambda k: {options}[instr({label}, chr((64 + k)::INTEGER))])"
    )


def _canon(con: duckdb.DuckDBPyConnection, rows: str) -> None:
    """``canon``: each item's canonical order, from the study's items, else from ``rows`` (a table or view
    with the columns of ``parsed``, a name of this module's)."""
    # canonical orders (docs/design.md §3): the study's items, else a row's own orientation label (the first
    # labelled row of the item: a row labelled BCDA showing [x, y, z, w] says the canonical order is
    # [w, x, y, z]), else the item's first row. So rows written in arrival order need no items file.
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE canon AS
        SELECT * FROM (
            SELECT item_id, options AS canon, gold_index, origin, NULL::BIGINT AS first_line,
                NULL::VARCHAR AS ref_label, false AS is_new
            FROM items
            UNION ALL
            SELECT f.item_id,
                CASE WHEN p.given_orientation IS NULL THEN p.options
                     ELSE {_canonical_from_label("p.options", "p.given_orientation")} END,
                NULL, CASE WHEN p.given_orientation IS NULL THEN 'first-row' ELSE 'row-label' END,
                f.first_line, p.given_orientation, true
            FROM (SELECT item_id,
                         coalesce(min(line) FILTER (WHERE given_orientation IS NOT NULL), min(line)) AS first_line
                  FROM {rows} WHERE item_id NOT IN (SELECT item_id FROM items) GROUP BY item_id) f
            JOIN {rows} p ON p.line = f.first_line
        )
        """
    )


def _final_sql(rows: str, fused: bool) -> str:
    """The SELECT of ``final``: the rows of ``rows`` (the columns of ``parsed``) with their item's canonical
    order, orientation, row id and gold option. ``fused``: ``rows`` holds flagged rows too (they keep the
    flag, and take no canon)."""
    join = "LEFT JOIN canon c ON c.item_id = p.item_id AND NOT p.bad" if fused else "JOIN canon c USING (item_id)"
    # each displayed option's place in the canonical order, looked up once (``pos``): the options are distinct
    # texts (a row with two alike is refused), so they are the canonical set exactly when there are as many
    # and every one is found there (no list_sort of every row's options)
    return f"""
        SELECT * EXCLUDE (pos),
            'r' || left(md5(arm || chr(31) || item_id || chr(31) || coalesce(derived, '') || chr(31) || sample::VARCHAR), 20) AS row_id
        FROM (
            SELECT * EXCLUDE (derived, gold_option, known_gold, n_canon) REPLACE (n_canon = n_opt AND list_count(pos) = n_opt AS same_set),
                CASE WHEN n_canon = n_opt AND list_count(pos) = n_opt
                     THEN array_to_string(list_transform(pos, lambda k: chr((64 + k)::INTEGER)), '') END AS derived,
                gold_option, known_gold
            FROM (
                SELECT p.* {"" if fused else "EXCLUDE (bad)"}, c.origin, c.first_line, c.ref_label,
                    NULL::BOOLEAN AS same_set, NULL::VARCHAR AS derived,
                    p.options[ascii(p.gold_letter) - 64] AS gold_option,
                    CASE WHEN c.gold_index IS NOT NULL THEN c.canon[c.gold_index + 1] END AS known_gold,
                    len(c.canon) AS n_canon,
                    list_transform(p.options, lambda o: list_position(c.canon, o)) AS pos
                FROM {rows} p {join}
            )
        )
        """


def _resolve(con: duckdb.DuckDBPyConnection, replace: bool) -> int:
    """``final``: the rows of ``parsed`` with their item's canonical order, orientation, row id and gold
    option; the problems between rows go to ``errs``. Returns the count of identical duplicates."""
    if _temp_table(con, "parsed"):
        _canon(con, "parsed")
        con.execute(f"CREATE OR REPLACE TEMP TABLE final AS {_final_sql('parsed', fused=False)}")
        con.execute("DROP TABLE parsed")
    # (else flagged() resolved the rows already: none was flagged)
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
        SELECT f.line, 'options',
            'the option set differs from item ' || f.item_id || '''s ' ||
            CASE WHEN f.origin IN ('first-row', 'row-label') AND f.first_line IS NOT NULL THEN '(first seen at line ' || f.first_line || ')'
                 ELSE '(' || CASE f.origin WHEN 'items' THEN 'items file' ELSE 'already in the study' END || ')' END ||
            ': ' || to_json(c.canon)::VARCHAR
        FROM final f JOIN canon c USING (item_id) WHERE NOT f.same_set
        UNION ALL
        SELECT line, 'orientation',
            CASE WHEN origin = 'row-label' AND first_line IS NOT NULL
                 THEN '''' || given_orientation || ''' contradicts the orientation ''' || ref_label ||
                      ''' of line ' || first_line || ' (same item): by that label this option order is ''' ||
                      derived || ''''
                 ELSE '''' || given_orientation || ''' contradicts the option order, which is ''' || derived ||
                      ''' by item ' || item_id || '''s canonical order (' ||
                      CASE origin WHEN 'items' THEN 'from the items file' ELSE 'already in the study' END || ')'
            END
        FROM final WHERE same_set AND given_orientation IS NOT NULL AND given_orientation <> derived
        UNION ALL
        SELECT g.line, 'gold',
            'gold option ' || to_json(g.gold_option)::VARCHAR || ' differs from item ' || g.item_id ||
            '''s gold option ' || to_json(r.gold_ref_option)::VARCHAR
        FROM final g JOIN gold_ref r USING (item_id)
        WHERE g.same_set AND g.gold_option <> r.gold_ref_option
        """
    )
    con.execute("DROP TABLE gold_ref")
    if _count(con, "SELECT count(*) FROM errs"):
        con.execute("DELETE FROM final WHERE line IN (SELECT line FROM errs)")
    return _duplicates(con, replace)



def _duplicates(con: duckdb.DuckDBPyConnection, replace: bool) -> int:
    """Duplicates within the file (``dup_first``: the first line of each row id seen more than once):
    identical ones are dropped later, conflicting ones are errors, and so is a row the study has with
    another generation (unless ``replace``). Returns the count of identical duplicates."""
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE dup_first AS
        SELECT d.row_id, d.line, f.generation, d.n
        FROM (SELECT row_id, min(line) AS line, count(*) AS n FROM final GROUP BY row_id HAVING count(*) > 1) d
        JOIN final f ON f.line = d.line
        """
    )
    con.execute(
        """
        INSERT INTO errs
        SELECT k.line, 'generation',
            'duplicate of line ' || f.line || ' (same arm, item, orientation, sample) with a different generation'
        FROM final k JOIN dup_first f USING (row_id)
        WHERE k.line <> f.line AND k.generation <> f.generation
        """
    )
    duplicates = 0
    if _count(con, "SELECT count(*) FROM dup_first"):
        duplicates = _count(
            con,
            "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM final "
            "WHERE row_id IN (SELECT row_id FROM dup_first) AND line NOT IN (SELECT line FROM errs) GROUP BY row_id)",
        )
    if not replace and _count(con, "SELECT count(*) FROM gen_rows"):
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
    return duplicates


def _write(
    con: duckdb.DuckDBPyConnection,
    res: LoadResult,
    ingest_id: int,
    strict: Callable[[str, Sequence[str]], str | None],
    strict_max_extra: int,
    naive_pattern: Callable[[int], str],
    framework_patterns: dict[str, tuple[str, ...]],
    progress: Callable[[str, int, int | None], None] | None = None,
) -> None:
    # what the steps below depend on, in one statement: duplicates within the file, rows already stored
    ((dups, stored),) = con.execute(
        "SELECT (SELECT count(*) FROM dup_first), EXISTS (SELECT 1 FROM gen_rows)"
    ).fetchall()
    # identical duplicates within the file: keep the first line of each
    if dups:
        con.execute(
            "DELETE FROM final WHERE line IN (SELECT k.line FROM final k JOIN dup_first d USING (row_id) "
            "WHERE k.line <> d.line)"
        )
    con.execute("DROP TABLE dup_first")
    if stored:
        _known_rows(con, res, ingest_id)

    # new items keep the canonical order resolved above (a row label, else the first row; an items file's
    # items were inserted earlier)
    res.new_items = _count(
        con,
        """
        INSERT INTO items
        SELECT c.item_id, f.question, c.canon, list_position(c.canon, f.gold_option) - 1, NULL, c.origin
        FROM canon c
        JOIN (SELECT item_id, min(line) AS line FROM final GROUP BY item_id) m USING (item_id)
        JOIN final f ON f.line = m.line
        WHERE c.is_new
        """,
    )
    con.execute("DROP TABLE canon")
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

    _split_answers(con)
    _strict_letters(con, strict, strict_max_extra)
    # one pass over the rows for what the inserts need and what the result says
    ((counts_of_n, with_reasoning, truncated),) = con.execute(
        "SELECT list(DISTINCT n_opt ORDER BY n_opt), "
        "count(*) FILTER (WHERE reasoning IS NOT NULL OR split_reasoning IS NOT NULL), "
        f"count(*) FILTER (WHERE coalesce(finish_reason = '{FINISH_LENGTH}', false) OR NOT closed) FROM final"
    ).fetchall()
    res.with_reasoning, res.truncated = int(with_reasoning), int(truncated)
    ns = [int(n) for n in counts_of_n or [] if n is not None]
    naive_letter, naive_params = naive_letter_sql(ns, naive_pattern)
    with _then(con, "DROP TABLE _strict"):
        # gen_rows has no key (schema migration 8): the insert runs in parallel, in row_id order so that
        # one-row lookups skip by zone maps. The parsers read the answer (docs/design.md §3); answer is
        # NULL where it is the generation itself.
        res.loaded = _count(
            con,
            f"""
            INSERT INTO gen_rows ({GEN_ROWS_COLUMNS})
            SELECT f.row_id, arm, item_id, derived, sample, question, options, gold_letter, f.raw_generation,
                is_blank(generation), prompt, model, metadata, option_logprobs, user_letter,
                {naive_letter}, s.letter, ?::INTEGER, line,
                answer, coalesce(reasoning, split_reasoning), finish_reason, usage,
                coalesce(finish_reason = '{FINISH_LENGTH}', false) OR NOT closed
            FROM (SELECT * REPLACE (coalesce(answer, generation) AS generation), generation AS raw_generation
                  FROM final) f
            LEFT JOIN _strict s ON s.row_id = f.row_id
            ORDER BY f.row_id
            """,
            [*naive_params, ingest_id],
        )
    if framework_patterns:
        if progress:
            progress("framework parsers", 0, None)
        # read back from the rows just written, which are in row_id order: each parser's letters come out
        # in that order (no sort of rows x parsers; parser_letters has no key, schema migration 7), so a
        # one-row lookup skips by zone maps (one run per parser, each ordered)
        con.execute(
            "CREATE OR REPLACE TEMP VIEW _written AS SELECT row_id, len(options)::INTEGER AS n_opt, "
            f"coalesce(answer, generation) AS generation FROM gen_rows WHERE ingest_id = {int(ingest_id)}"
        )
        # every parser's letter in one pass over the rows (one read of the generations, not one per
        # parser), then each parser's run appended from that narrow table
        fw_sql, names, fw_params = framework_letters_by_row_sql(framework_patterns, "_written")
        con.execute("SET preserve_insertion_order = true")
        with _then(
            con, "SET preserve_insertion_order = false", "DROP VIEW _written", "DROP TABLE IF EXISTS _fw"
        ):
            con.execute(f"CREATE OR REPLACE TEMP TABLE _fw AS {fw_sql}", fw_params)
            runs = " UNION ALL ".join(f"SELECT row_id, ? AS parser, l{i} AS letter FROM _fw" for i in range(len(names)))
            if runs:
                con.execute(f"INSERT INTO parser_letters {runs}", list(names))
    con.execute("DROP VIEW _answers")
    con.execute("DROP TABLE final")


def _known_rows(con: duckdb.DuckDBPyConnection, res: LoadResult, ingest_id: int) -> None:
    """Rows the study already has: the same generation is left as it is (``unchanged``), another replaces it
    (``replaced``)."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _known AS SELECT f.row_id, f.generation = r.generation AS same "
        "FROM final f JOIN gen_rows r USING (row_id)"
    )
    ((unchanged, replaced),) = con.execute(
        "SELECT count(*) FILTER (WHERE same), count(*) FILTER (WHERE same IS NOT TRUE) FROM _known"
    ).fetchall()
    res.unchanged, res.replaced = int(unchanged), int(replaced)
    if res.unchanged:
        con.execute("DELETE FROM final WHERE row_id IN (SELECT row_id FROM _known WHERE same)")
        con.execute("DELETE FROM _known WHERE same")
    if res.replaced:
        # a replaced generation invalidates its judge verdicts and parser letters; its reviews are
        # retracted by a new review record (reviews stay append-only)
        con.execute("DELETE FROM judge_verdicts WHERE row_id IN (SELECT row_id FROM _known)")
        refresh_current_judge(con, "row_id IN (SELECT row_id FROM _known)")
        con.execute("DELETE FROM parser_letters WHERE row_id IN (SELECT row_id FROM _known)")
        retract_for_replaced_rows(con, "_known", ingest_id)
        con.execute("DELETE FROM gen_rows WHERE row_id IN (SELECT row_id FROM _known)")
    con.execute("DROP TABLE _known")


# gen_rows' columns in the order ingest writes them (schema migration 9 added the last five)
GEN_ROWS_COLUMNS = (
    "row_id, arm, item_id, orientation, sample, question, options, gold_letter, generation, is_blank, prompt, "
    "model, metadata, option_logprobs, user_letter, naive_letter, strict_letter, ingest_id, source_line, "
    "answer, reasoning, finish_reason, usage, truncated"
)
_SPLIT_BATCH = 50_000


def _split_answers(con: duckdb.DuckDBPyConnection) -> None:
    """``final`` gains ``answer`` (NULL where it is the generation itself), ``split_reasoning`` and ``closed``:
    a row without a reasoning field whose generation opens with a reasoning block has it split off
    (:func:`mcqaudit.reasoning.split_reasoning`; only those rows reach Python). ``_answers`` is the view
    the parsers read: (row_id, n_opt, options, generation = the answer)."""
    con.execute("ALTER TABLE final ADD COLUMN answer VARCHAR")
    con.execute("ALTER TABLE final ADD COLUMN split_reasoning VARCHAR")
    con.execute("ALTER TABLE final ADD COLUMN closed BOOLEAN DEFAULT true")
    cur = con.execute(
        "SELECT row_id, generation FROM final WHERE reasoning IS NULL AND "
        f"regexp_matches(generation, {_lit(REASONING_START)})"
    )
    ids: list[str] = []
    answers: list[str] = []
    thoughts: list[str | None] = []
    closed: list[bool] = []
    while batch := cur.fetchmany(_SPLIT_BATCH):
        for row_id, gen in batch:
            split = split_reasoning(gen)
            ids.append(row_id)
            answers.append(split.answer)
            thoughts.append(split.reasoning)
            closed.append(split.closed)
    if ids:
        import pyarrow as pa  # (only here: most files have no reasoning block to split off)

        con.register(
            "_split",
            pa.table(
                {
                    "row_id": pa.array(ids, pa.string()),
                    "answer": pa.array(answers, pa.string()),
                    "reasoning": pa.array(thoughts, pa.string()),
                    "closed": pa.array(closed, pa.bool_()),
                }
            ),
        )
        try:
            con.execute(
                "UPDATE final SET answer = s.answer, split_reasoning = s.reasoning, closed = s.closed "
                "FROM _split s WHERE final.row_id = s.row_id"
            )
        finally:
            con.unregister("_split")
    con.execute(
        "CREATE OR REPLACE TEMP VIEW _answers AS "
        "SELECT row_id, n_opt, options, coalesce(answer, generation) AS generation FROM final"
    )


# the rows short enough to be a bare answer (strict's own length bound, measured as str.strip() measures):
# bytes bound characters from above (most rows are decided on strlen), and a longer text is short enough
# only after trimming, so it starts or ends with whitespace (two anchored regexes: left()/right() of a long
# text cost more)
_STRICT_CANDIDATES = """
    SELECT row_id, generation, options FROM (
        SELECT row_id, generation, options, list_max(list_transform(options, lambda o: length(o))) + {extra} AS most
        FROM _answers
    )
    WHERE CASE WHEN strlen(generation) <= most OR length(generation) <= most THEN true
               WHEN NOT (regexp_matches(generation, '^{ws}') OR regexp_matches(generation, '{ws}\\z')) THEN false
               ELSE length(trim(generation, {ws_chars})) <= most END
"""


def _strict_letters(
    con: duckdb.DuckDBPyConnection, strict: Callable[[str, Sequence[str]], str | None], strict_max_extra: int
) -> None:
    """``_strict`` (row_id, letter): the rows strict resolves, among the generations short enough to be a bare
    answer. With ``parsers.strict`` its SQL twin (``store/strict_sql.py``) decides every row whose texts it
    folds exactly, in DuckDB, and Python only the rest; another ``strict`` runs in Python on every such row."""
    from mcqaudit import parsers
    from mcqaudit.store.strict_sql import WS_CLASS, sql_text, strict_letters_sql

    # what Python's str.strip() removes, as strict measures (DuckDB's one-argument trim() removes spaces)
    cand = _STRICT_CANDIDATES.format(extra=int(strict_max_extra), ws=WS_CLASS, ws_chars=sql_text(WHITESPACE))
    con.execute("CREATE OR REPLACE TEMP TABLE _strict (row_id VARCHAR, letter VARCHAR)")
    if strict is parsers.strict:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _strict_sql AS "
            + strict_letters_sql(con, f"({cand})", strict_max_extra)
        )
        with _then(con, "DROP TABLE _strict_sql"):
            con.execute("INSERT INTO _strict SELECT row_id, letter FROM _strict_sql WHERE NOT fallback")
            rows = con.execute(
                "SELECT row_id, generation, options FROM _strict_sql WHERE fallback"
            ).fetchall()
    else:
        rows = con.execute(cand).fetchall()
    ids: list[str] = []
    letters: list[str] = []
    seen: dict[tuple[str, tuple[str, ...]], str | None] = {}  # the same answer to the same options
    for row_id, gen, opts in rows:
        key = (gen, tuple(opts))
        letter = seen[key] if key in seen else seen.setdefault(key, strict(gen, opts))
        if letter is not None:
            ids.append(row_id)
            letters.append(letter)
    if ids:
        import pyarrow as pa  # (only here: most files' answers are all decided in DuckDB)

        con.register(
            "_python_strict",
            pa.table({"row_id": pa.array(ids, pa.string()), "letter": pa.array(letters, pa.string())}),
        )
        with _then(con, lambda: con.unregister("_python_strict")):
            con.execute("INSERT INTO _strict SELECT row_id, letter FROM _python_strict")


# The SQL side of the parsers that ingest runs in DuckDB (RE2), over a table with columns (row_id, generation,
# n_opt); tests/test_parsers.py calls these same two builders to check them against mcqaudit.parsers.


def naive_letter_sql(ns: Sequence[int], naive_pattern: Callable[[int], str]) -> tuple[str, list[object]]:
    """(SQL expression over ``generation`` and ``n_opt``, its parameters): the naive parser's letter, for rows
    with any of the option counts ``ns``; NULL when it finds none."""
    if not ns:
        return "NULL::VARCHAR", []
    case = "CASE n_opt " + " ".join("WHEN ? THEN regexp_extract(generation, ?, 0)" for _ in ns) + " END"
    params: list[object] = []
    for n in ns:
        params += [n, naive_pattern(n)]
    return f"upper(nullif({case}, ''))", params


def _literal_guard(pattern: str) -> tuple[bool, str]:
    """(whether every match of ``pattern`` contains a non-ASCII character, the longest run of literal
    characters every match contains): a cheap test before the regex, sound by construction (a text without
    them cannot match). Read off Python's parse of the pattern; anything it does not recognise gives no
    guard."""
    import re._parser as sre

    from mcqaudit.parsers import python_pattern

    def walk(items: Iterable[tuple[Any, Any]]) -> tuple[bool, list[str]]:  # the parse tree is untyped
        needs_non_ascii = False
        runs: list[str] = []
        run = ""
        for op, av in items:
            name = str(op)
            if name == "LITERAL":
                run += chr(av)
                needs_non_ascii |= av > 127
                continue
            if run:
                runs.append(run)
                run = ""
            if name == "IN":
                lits = [a for o, a in av if str(o) == "LITERAL"]
                if lits and len(lits) == len(av) and all(c > 127 for c in lits):
                    needs_non_ascii = True
            elif name == "SUBPATTERN":
                sub_non_ascii, sub_runs = walk(av[-1])
                needs_non_ascii |= sub_non_ascii
                runs += sub_runs
            elif name in ("MAX_REPEAT", "MIN_REPEAT") and av[0] >= 1:
                sub_non_ascii, sub_runs = walk(av[2])
                needs_non_ascii |= sub_non_ascii
                runs += sub_runs
        if run:
            runs.append(run)
        return needs_non_ascii, runs

    try:
        non_ascii, runs = walk(sre.parse(python_pattern(pattern)))
    except Exception:  # an unfamiliar parse: no guard, the regex alone decides
        return False, ""
    return non_ascii, max(runs, key=len, default="")


def _last_match_rests() -> frozenset[str]:
    r"""The patterns ``(?s).*REST`` (the last match of REST) whose REST cannot match starting inside one of
    its own matches, so that the last of its non-overlapping matches (``regexp_extract_all``) is the last
    match: RE2 extracts a ``(?s).*`` group with its slow engine over the whole text. Vetted one by one:
    ``\(([A-Z])\)`` (inside a match are a letter and ``)``, never ``(``), ``:WS*([A-D])`` (inside are
    whitespace and a letter, never ``:``), ``\b([A-J])\b`` (one letter, the next cannot be a boundary)."""
    from mcqaudit.parsers import WS

    return frozenset({r"\(([A-Z])\)", rf":{WS}*([A-D])", r"\b([A-J])\b"})


def _one_line_first_class(pattern: str) -> str | None:
    r"""The option class ``[...]`` of OpenCompass's "1." line pattern (``parsers._opencompass_patterns``:
    ``1(?:[^\n]WS?[^\n]*?)?([...])[^\n]*\n?\z``), when ``pattern`` is exactly that one; else None."""
    import re

    from mcqaudit.parsers import opencompass_line_pattern

    m = re.fullmatch(r"1\(\?:.*\)\?\((\[[A-Z]+\])\).*", pattern, re.DOTALL)
    return m[1] if m is not None and pattern == opencompass_line_pattern(m[1]) else None


def _one_line_first_sql(cls: str, params: list[object]) -> str:
    r"""SQL: that pattern's group 1 on a text with no newline but perhaps a final one (so ``[^\n]`` is any
    character there), where it matches, without RE2 extracting the group (its slow engine over the whole
    matched line: most of a varied ingest). There, the leftmost match starts at the first ``1`` (a ``1`` before
    the last option letter: any later one would have it too), and Perl's choices give the first option letter
    from two characters after it (the optional group taken: one character, whitespace or not, then the
    fewest characters), else the letter just after it (the group left out). tests/test_parsers.py holds it
    equal to Python's ``re`` on random text."""
    at = "strpos(generation, '1')"
    params += [cls, cls]
    return (
        f"coalesce(nullif(regexp_extract(substr(generation, {at} + 2), ?), ''), "
        f"CASE WHEN regexp_full_match(substr(generation, {at} + 1, 1), ?) THEN substr(generation, {at} + 1, 1) END)"
    )


def _standalone_end(previous: str | None, pattern: str) -> str | None:
    r"""OpenCompass's second standalone-letter pattern read at the end of the text alone, where the first was
    tried just before it (``parsers.opencompass_standalone_patterns``): that one matches wherever this one's
    letter has whitespace after it, so on the rows it left undecided this one can match only with the letter
    at the very end, ``(?:WS|^)(L)\z``, which RE2 reads backwards from the end (else one pass over the whole
    text of each row: ~1.2 s of a 1 M-row varied ingest). None for any other pattern."""
    import re

    from mcqaudit.parsers import WS, opencompass_standalone_patterns

    m = re.fullmatch(r"\(\?:.*\|\^\)\((\[[A-Z]+\])\).*", pattern, re.DOTALL)
    if m is None or previous is None or (previous, pattern) != opencompass_standalone_patterns(m[1]):
        return None
    return rf"(?:{WS}|^)({m[1]})\z"


def _pattern_case(pattern: str, previous: str | None, params: list[object]) -> tuple[str, bool]:
    """(SQL: one pattern's non-empty group 1, else NULL; whether it is a plain pattern behind a literal that
    is ASCII, which :func:`_first_match_sql` may test in one run with its neighbours). The last-match and
    "1." line patterns and the second standalone-letter pattern have forms of their own (their extraction,
    or RE2's pass over the whole text, is the slow part)."""
    _, literal = _literal_guard(pattern)
    guard = "contains(generation, ?) AND " if literal else ""
    if literal:
        params.append(literal)
    rest = pattern.removeprefix("(?s).*")
    if rest != pattern and rest in _last_match_rests():
        params += [rest, rest]
        return (
            f"CASE WHEN {guard}regexp_matches(generation, ?) "
            "THEN nullif(regexp_extract_all(generation, ?, 1)[-1], '') END"
        ), False
    cls = _one_line_first_class(pattern)
    if cls is not None:
        # RE2's match test (quick: the pattern ends at the end of the text, which RE2 reads backwards from
        # there), then the group of a text of one line (perhaps ending in a newline) without RE2's extraction
        params.append(pattern)
        one_line = _one_line_first_sql(cls, params)
        params.append(pattern)
        return (
            f"CASE WHEN {guard}regexp_matches(generation, ?) THEN nullif(CASE WHEN strpos(generation, chr(10)) "
            f"IN (0, length(generation)) THEN {one_line} ELSE regexp_extract(generation, ?, 1) END, '') END"
        ), False
    # no regexp_matches first: RE2 reads a text without a match as fast either way, and on one with a match
    # the extraction is the work itself (a cushion pattern matches nine rows in ten: the test was twice it)
    at_end = _standalone_end(previous, pattern)
    params.append(at_end or pattern)
    extract = "nullif(regexp_extract(generation, ?, 1), '')"
    plain = at_end is None and bool(literal) and literal.isascii()
    return (f"CASE WHEN contains(generation, ?) THEN {extract} END" if literal else extract), plain


_RUN_TESTED_TOGETHER = 3


def _first_match_sql(patterns: Sequence[str], ascii_only: bool, params: list[object]) -> str:
    """A COALESCE over the patterns in order: the first one whose group 1 is non-empty gives it. COALESCE
    evaluates each pattern only for the rows still undecided (NULL so far); a pattern's group is extracted
    once (an empty group reads as NULL, so the next pattern is tried), only where a literal its matches need
    occurs (:func:`_pattern_case`). Three or more consecutive plain patterns behind ASCII literals
    (OpenCompass's five "the answer is", "the correct answer is option", ...: a text that has the words
    often has none of the patterns) are first tested together, one RE2 pass for the lot: a row none of them
    matches skips their extractions."""
    kept = [p for p in patterns if not (ascii_only and _literal_guard(p)[0])]  # (those need non-ASCII text)
    cases: list[str] = []
    run: list[tuple[str, str, list[object]]] = []  # plain patterns in a row: (pattern, case, its parameters)

    def close_run() -> None:
        # (three or more: on two the test is a third pass where a text with the words often matches one)
        if len(run) >= _RUN_TESTED_TOGETHER:
            params.append("|".join(f"(?:{p})" for p, _, _ in run))
            for _, _, ps in run:
                params.extend(ps)
            cases.append(f"CASE WHEN regexp_matches(generation, ?) THEN coalesce({', '.join(c for _, c, _ in run)}) END")
        else:
            for _, c, ps in run:
                params.extend(ps)
                cases.append(c)
        run.clear()

    for i, p in enumerate(kept):
        own: list[object] = []
        case, plain = _pattern_case(p, kept[i - 1] if i else None, own)
        if plain:
            run.append((p, case, own))
            continue
        close_run()
        params.extend(own)
        cases.append(case)
    close_run()
    return "coalesce(" + ", ".join(cases) + ")" if cases else "NULL::VARCHAR"


def _framework_first(patterns: Sequence[str], params: list[object]) -> str:
    """SQL over ``generation``: the upper-cased group 1 of the first of a parser's patterns that matches."""
    ascii_branch = _first_match_sql(patterns, True, params)
    full_branch = _first_match_sql(patterns, False, params)
    return f"upper(CASE WHEN strlen(generation) = length(generation) THEN {ascii_branch} ELSE {full_branch} END)"


def _in_range_or_null(letter: str) -> str:
    """SQL: ``letter`` when it is one letter within the row's option count, else NULL."""
    return f"CASE WHEN length({letter}) = 1 AND ascii({letter}) BETWEEN 65 AND 64 + n_opt THEN {letter} END"


def framework_letters_by_row_sql(
    framework_patterns: dict[str, tuple[str, ...]], table: str
) -> tuple[str, list[str], list[object]]:
    """(a SELECT of (row_id, l0, l1, ...) over ``table`` in its order, the parser of each letter column, its
    parameters): every framework parser's letter of a row in one pass over the rows (the letters of
    :func:`framework_letters_sql`, one column per parser)."""
    names = [name for name, patterns in framework_patterns.items() if patterns]
    params: list[object] = []
    firsts = ", ".join(
        f"{_framework_first(framework_patterns[name], params)} AS l{i}" for i, name in enumerate(names)
    )
    letters = ", ".join(f"{_in_range_or_null(f'l{i}')} AS l{i}" for i in range(len(names)))
    return f"SELECT row_id, {letters} FROM (SELECT row_id, n_opt, {firsts} FROM {table})", names, params


def framework_letters_sql(
    framework_patterns: dict[str, tuple[str, ...]], table: str
) -> tuple[str, list[object]]:
    """(a SELECT of (row_id, parser, letter) over ``table``, its parameters): each framework parser's letter
    per row. The first pattern that matches (non-empty group 1) wins; an out-of-range letter reads as no
    letter (it does not fall through to the next pattern). ``table`` is a name of this module's, never input.

    Patterns that need a non-ASCII character are skipped for ASCII-only generations (``strlen`` =
    ``length``), and each pattern is tried only where a literal it needs occurs."""
    selects = []
    params: list[object] = []
    for name, patterns in framework_patterns.items():
        if not patterns:
            continue
        params.append(name)
        selects.append(
            f"SELECT row_id, ? AS parser, {_in_range_or_null('l')} AS letter "
            f"FROM (SELECT row_id, n_opt, {_framework_first(patterns, params)} AS l FROM {table})"
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
    import pyarrow as pa

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
