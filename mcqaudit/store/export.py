"""``graded_rows`` with each row's history, for export (``mcqaudit export --format parquet|jsonl``) and for
analysis (:func:`mcqaudit.app.analysis.graded_rows` with ``history=True``).

Beside every column of the public view, in its order, each row carries two nested columns:

- ``reviews``: the row's review history, oldest first (``created_at``, then ``review_id``), retractions
  included: a list of ``{review_id, action, verdict, letter, note, reviewer, time, retracts}`` (``action``
  ``confirm``, ``override`` or ``retract``; a retraction has no verdict and names the review it withdraws
  in ``retracts``). The review in force is the row's ``review_verdict`` / ``reviewer`` / ``reviewed_at``.
- ``panel_verdicts``: what each panel judge (``grade --panel``, the ``panel_judges`` table) said about the
  row, in the order the panel judges were added: a list of ``{fingerprint, model, status, verdict,
  letter}`` (``status`` ``ok`` or ``error``; no verdict on an error). Panel verdicts never become final.

A row without reviews or panel verdicts has empty lists, never NULL. Rows come in the order of the CSV
export (arm, item_id, orientation, sample). The rows are streamed in Arrow record batches of a bounded size,
so an export of a million rows holds one batch in Python at a time and says its progress after each.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mcqaudit.store.db import _OS_PHRASES, Study

NESTED_COLUMNS = ("reviews", "panel_verdicts")
REVIEW_FIELDS = ("review_id", "action", "verdict", "letter", "note", "reviewer", "time", "retracts")
PANEL_FIELDS = ("fingerprint", "model", "status", "verdict", "letter")
BATCH_ROWS = 50_000
# DuckDB's memory for the export's sort; beyond it the sort spills to disk (1,000,000 rows: about 1.1 GiB RSS)
MEMORY_LIMIT = "1GB"

# (rows written, rows in all) after each batch
ExportProgress = Callable[[int, int], None]

_ORDER = "ORDER BY arm, item_id, orientation, sample"
_REVIEW_TYPE = (
    "STRUCT(review_id BIGINT, action VARCHAR, verdict VARCHAR, letter VARCHAR, note VARCHAR, "
    'reviewer VARCHAR, "time" {time}, retracts BIGINT)'
)
_PANEL_TYPE = "STRUCT(fingerprint VARCHAR, model VARCHAR, status VARCHAR, verdict VARCHAR, letter VARCHAR)"


def _iso(expr: str) -> str:
    """A TIMESTAMPTZ as ISO-8601 text in UTC (the review log's times; the connection's zone is UTC)."""
    return f"strftime({expr}, '%Y-%m-%dT%H:%M:%S.%f') || '+00:00'"


def rows_sql(*, iso_times: bool = False, reviews: bool = True, panel: bool = True) -> str:
    """The query (unordered: callers add :data:`_ORDER`): graded_rows' columns, then ``reviews`` and
    ``panel_verdicts``. ``iso_times``: every time as ISO-8601 text (for JSON), else TIMESTAMPTZ (Parquet's
    timestamp with time zone UTC). ``reviews=False`` / ``panel=False``: the study has none, so that column
    is empty lists without a join (a study without panel judges is read at graded_rows' own speed)."""
    time = _iso("r.created_at") if iso_times else "r.created_at"
    reviewed_at = f" REPLACE ({_iso('g.reviewed_at')} AS reviewed_at)" if iso_times else ""
    review_type = _REVIEW_TYPE.format(time="VARCHAR" if iso_times else "TIMESTAMPTZ")
    ctes, joins = [], []
    if reviews:
        ctes.append(f"""hist AS (
            SELECT r.row_id,
                   list(struct_pack(review_id := r.review_id, action := r.action, verdict := r.verdict,
                                    letter := r.picked_letter, note := r.note, reviewer := r.reviewer,
                                    "time" := {time}, retracts := r.retracts)
                        ORDER BY r.created_at, r.review_id) AS reviews
            FROM reviews r GROUP BY r.row_id
        )""")
        joins.append("LEFT JOIN hist h ON h.row_id = g.row_id")
    if panel:
        ctes.append("""panel_order AS (
            SELECT fingerprint, row_number() OVER (ORDER BY added_at, fingerprint) AS k FROM panel_judges
        ), panel AS (
            -- sorted by the judges' order after aggregating (list_sort on the leading k): a fraction of the
            -- cost of list(... ORDER BY ...) over a million rows
            SELECT v.row_id,
                   list_transform(
                       list_sort(list(struct_pack(k := o.k, fingerprint := v.fingerprint, model := c.model,
                                                  status := v.status, verdict := v.verdict, letter := v.letter))),
                       lambda x: struct_pack(fingerprint := x.fingerprint, model := x.model, status := x.status,
                                             verdict := x.verdict, letter := x.letter)
                   ) AS panel_verdicts
            FROM judge_verdicts v
            JOIN panel_order o USING (fingerprint)
            LEFT JOIN judge_configs c USING (fingerprint)
            GROUP BY v.row_id
        )""")
        joins.append("LEFT JOIN panel p ON p.row_id = g.row_id")
    none_reviewed, none_judged = f"[]::{review_type}[]", f"[]::{_PANEL_TYPE}[]"
    return f"""
        {"WITH " + ", ".join(ctes) if ctes else ""}
        SELECT g.*{reviewed_at},
               {f"coalesce(h.reviews, {none_reviewed})" if reviews else none_reviewed} AS reviews,
               {f"coalesce(p.panel_verdicts, {none_judged})" if panel else none_judged} AS panel_verdicts
        FROM graded_rows g
        {" ".join(joins)}"""


@contextlib.contextmanager
def _reading(study: Study) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection for one export: its sort spills to a private folder beyond :data:`MEMORY_LIMIT` (never
    beside the study: a read-only one stays untouched), so a study of any size exports in bounded memory;
    the settings are reset and the folder removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="mcqaudit-export-") as spill, study.connect() as con:
        con.execute("SET memory_limit = ?", [MEMORY_LIMIT])
        con.execute("SET temp_directory = ?", [spill])
        try:
            yield con
        finally:
            with contextlib.suppress(duckdb.Error):  # a connection nested in the caller's: as it was
                con.execute("RESET memory_limit")
                con.execute("RESET temp_directory")


def _rows_query(con: duckdb.DuckDBPyConnection, *, iso_times: bool) -> tuple[int, str]:
    """The study's row count, and :func:`rows_sql` with the joins this study needs (unordered)."""
    total, reviewed, judged = con.execute(
        """SELECT (SELECT count(*) FROM gen_rows), EXISTS (SELECT 1 FROM reviews),
                  EXISTS (SELECT 1 FROM judge_verdicts WHERE fingerprint IN (SELECT fingerprint FROM panel_judges))"""
    ).fetchall()[0]
    return int(total), rows_sql(iso_times=iso_times, reviews=bool(reviewed), panel=bool(judged))


@contextlib.contextmanager
def row_batches(study: Study, *, iso_times: bool = False) -> Iterator[tuple[int, pa.RecordBatchReader]]:
    """The study's row count and a reader of :func:`rows_sql`'s rows, in order, in record batches of
    :data:`BATCH_ROWS`, through one connection held open while the caller reads."""
    with _reading(study) as con:
        total, rows = _rows_query(con, iso_times=iso_times)
        yield total, con.sql(f"SELECT * FROM ({rows}) x {_ORDER}").to_arrow_reader(BATCH_ROWS)


def rows_df(study: Study) -> pd.DataFrame:
    """Every row of graded_rows with ``reviews`` and ``panel_verdicts`` (each a list of dicts), in export
    order."""
    with row_batches(study) as (_, reader):
        table = reader.read_all()
    df = table.to_pandas()
    for c in NESTED_COLUMNS:
        df[c] = [list(v) for v in df[c]]
    return df


def os_error(exc: BaseException) -> OSError | None:
    """The OS error behind a DuckDB or Arrow write error (a full disk, a quota, a read-only file system),
    so that the caller can say it in one line; None when it is none of those."""
    if isinstance(exc, OSError) and exc.errno:
        return exc
    for phrase, code in _OS_PHRASES.items():
        if phrase in str(exc):
            return OSError(code, os.strerror(code))
    return None


def reraise_os(exc: BaseException) -> None:
    """Raise the OS error behind ``exc`` (:func:`os_error`) when there is one; else return."""
    cause = os_error(exc)
    if cause is not None and cause is not exc:
        raise cause from exc


def write_parquet(study: Study, path: Path, progress: ExportProgress | None = None) -> int:
    """Write :func:`rows_sql`'s rows to ``path`` as Parquet (nested ``reviews`` and ``panel_verdicts``:
    lists of structs; one row group per batch); the number of rows written."""
    done = 0
    try:
        with row_batches(study) as (total, reader), open(path, "wb") as fh:
            writer = pq.ParquetWriter(fh, reader.schema, compression="snappy")  # what every reader reads
            try:
                for batch in reader:
                    writer.write_batch(batch)
                    done += batch.num_rows
                    if progress is not None:
                        progress(done, total)
            finally:
                writer.close()
            fh.flush()
    except (duckdb.Error, pa.ArrowException, OSError) as exc:
        reraise_os(exc)
        raise
    return done


# characters that JSON allows raw inside a string but that some line readers take for a line end (Python's
# str.splitlines, JavaScript before ES2019): written as escapes, so that one line is one row for every reader
_LINE_BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _line_safe(text: str) -> str:
    """JSON text with the raw line-break characters of :data:`_LINE_BREAKS` escaped (they can only stand
    inside strings: JSON's own syntax is ASCII)."""
    for raw, escaped in _LINE_BREAKS.items():
        if raw in text:
            text = text.replace(raw, escaped)
    return text


def write_jsonl(study: Study, path: Path, progress: ExportProgress | None = None) -> int:
    """Write :func:`rows_sql`'s rows to ``path`` as JSON Lines, one object a row (``reviews`` and
    ``panel_verdicts`` arrays of objects; times as ISO-8601 text in UTC); the number of rows written."""
    done = 0
    try:
        with _reading(study) as con, open(path, "w", encoding="utf-8", newline="\n") as fh:
            total, rows = _rows_query(con, iso_times=True)
            query = f"SELECT to_json(x)::VARCHAR AS line FROM ({rows}) x {_ORDER}"
            for batch in con.sql(query).to_arrow_reader(BATCH_ROWS):
                lines = batch.column(0).to_pylist()
                if lines:
                    fh.write(_line_safe("\n".join(lines)) + "\n")
                done += batch.num_rows
                if progress is not None:
                    progress(done, total)
    except (duckdb.Error, pa.ArrowException, OSError) as exc:
        reraise_os(exc)
        raise
    return done
