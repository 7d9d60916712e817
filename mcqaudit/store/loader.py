"""The loader: one load's transaction and its staging tables (docs/design.md §3).

`ingest/` reads files and hands the loader typed things (batches of JSON lines, a file path for DuckDB's
own readers, items); the loader stages them, checks them and writes the good rows, with the SQL of
`store/loading.py`, inside one transaction (:func:`load_transaction`). The temporary tables (``staged``,
the raw lines; ``stg``, one JSON value per field; ``parsed``, ``errs``, ``final``) and DuckDB's exceptions
stay here: a failure of DuckDB or of the disk is a :class:`LoadFailed` with a sentence for the person.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import duckdb

from mcqaudit.ingest.fields import LineBatch
from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.orient import Item
from mcqaudit.store import judging
from mcqaudit.store import loading as sql
from mcqaudit.store.db import Study, set_meta
from mcqaudit.store.loading import LoadResult, StageError

__all__ = ["LoadFailed", "LoadResult", "Loader", "StageError", "load_transaction"]

Progress = Callable[[str, int, int | None], None]  # (stage, done, total)
RawText = Callable[[Sequence[int]], dict[int, str]]


class LoadFailed(Exception):
    """A load that DuckDB or the OS could not write (a full disk, a read-only folder, memory): the
    transaction did not commit, so nothing was written. ``reason`` ends "nothing was written"."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@contextlib.contextmanager
def load_transaction(study: Study) -> Iterator[Loader]:
    """One transaction over the study (all or nothing: a folder of logs is one load), as a :class:`Loader`.
    A failure of DuckDB or of the OS anywhere inside it (a full disk met at COMMIT, writing the WAL, is a
    TransactionException "Failed to commit: ...") is a :class:`LoadFailed`; other errors pass through."""
    try:
        with study.write() as con:
            yield Loader(con)
    except (
        duckdb.IOException,
        duckdb.FatalException,
        duckdb.OutOfMemoryException,
        duckdb.TransactionException,
        OSError,
    ) as exc:
        if isinstance(exc, duckdb.TransactionException) and "Failed to commit" not in str(exc):
            raise
        raise LoadFailed(_write_failure(exc, study.path)) from None


def _write_failure(exc: BaseException, path: Path) -> str:
    """Why a load failed in DuckDB or the OS. DuckDB reports a full disk met while spilling
    (`STUDY.duckdb.tmp/`) as "Out of Memory Error: failed to offload data block": that is the disk, and
    says so."""
    reason = str(exc).split("\n")[0].removeprefix("TransactionContext Error: ")
    if isinstance(exc, OSError) and exc.strerror:
        reason = f"{exc.strerror} ({exc.filename or path})"
    elif isinstance(exc, duckdb.OutOfMemoryException):
        spill = path.with_name(path.name + ".tmp")
        try:
            free: int | None = shutil.disk_usage(path.parent).free
        except OSError:
            free = None
        if "offload" in reason or (free is not None and free < 64 << 20):
            free_text = "" if free is None else f", {free / (1 << 20):.1f} MB free"
            reason = (
                f"no space left on the device for DuckDB's spill files ({spill}{free_text}): free some "
                "space, or give ingest more memory (MCQAUDIT_INGEST_MEMORY_LIMIT) so it spills less"
            )
        else:
            reason = (
                f"out of memory ({reason.removeprefix('Out of Memory Error: ')}): raise "
                f"MCQAUDIT_INGEST_MEMORY_LIMIT (default {sql.INGEST_MEMORY_LIMIT}) or free memory"
            )
    return f"cannot be written: {reason}; nothing was written"


class Loader:
    """The steps of loading one file, over the connection of a :func:`load_transaction`: ``begin_file``;
    stage (``stage_lines``, ``stage_jsonl_fast``, ``stage_csv`` or ``stage_parquet``); ``flag`` (and
    ``diagnose`` when rows are flagged); ``end_staging``; ``load``; ``record_ingest``. A file with problems
    (and not ``skip_bad``) has written none of its rows, but the transaction must roll back: staging and
    ids were used."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con
        self._raw_table: str | None = None  # the table the raw text of a row comes from (None: the file)
        self._staged = "stg"  # the table the rows were staged in (the fast path's: parsed)

    # --- the study ------------------------------------------------------------------------------------
    def upsert_items(self, items: Sequence[Item]) -> tuple[int, list[str]]:
        """Insert an items file's items (store/loading.py `upsert_items`): (new items, conflicts)."""
        return sql.upsert_items(
            self._con,
            [
                (
                    it.item_id,
                    it.question,
                    list(it.options),
                    it.gold_index,
                    None if it.metadata is None else json.dumps(it.metadata),
                )
                for it in items
            ],
        )

    def arms(self) -> set[str]:
        return {str(r[0]) for r in self._con.execute("SELECT arm FROM arms").fetchall()}

    def set_control(self, arm: str) -> None:
        set_meta(self._con, "control_arm", arm)

    # --- stage ----------------------------------------------------------------------------------------
    def begin_file(self, memory_limit: str) -> None:
        """A new file: DuckDB's memory bounded (it spills beyond), the problem table empty."""
        sql.bounded_memory(self._con, memory_limit)
        sql.create_errors(self._con)
        self._con.execute("DROP TABLE IF EXISTS staged")
        self._raw_table = None
        self._staged = "stg"

    def set_memory_limit(self, memory_limit: str) -> None:
        sql.bounded_memory(self._con, memory_limit)

    def stage_lines(self, batches: Iterable[LineBatch], columns: Mapping[str, str] | None = None) -> None:
        """Stage raw JSON lines (each field read from its key, ``columns`` as for `--map`); replaces what
        was staged before."""
        sql.create_staging(self._con)
        self._staged = "stg"
        for b in batches:
            sql.stage_batch(self._con, b.lines, b.texts, b.pre_errors)
        sql.stage_from_text(self._con, columns)
        self._raw_table = "staged"

    def stage_jsonl_fast(
        self,
        path: Path,
        lines: Callable[[], int],
        columns: Mapping[str, str] | None,
        longest_line: int,
        default_arm: str | None = None,
    ) -> bool:
        """DuckDB's typed read of a JSONL file, checked as it is read (store/loading.py `stage_jsonl_fast`):
        False, nothing staged, when its records and the file's lines are not one to one. Raises StageError."""
        self._raw_table = None
        ok = sql.stage_jsonl_fast(self._con, str(path), lines, columns, longest_line, default_arm)
        self._staged = "parsed" if ok else "stg"
        return ok

    def fast_key_counts(self, columns: Mapping[str, str] | None) -> dict[str, int]:
        """{key: rows the fast path staged with a value for it}."""
        return sql.key_mentions(self._con, columns)

    def all_columns_seen(self, columns: Mapping[str, str]) -> bool:
        return sql.all_columns_seen(self._con, columns)

    def unstage(self) -> None:
        """Drop what the fast path staged (the file goes the line-by-line way instead)."""
        self._con.execute("DROP TABLE parsed")
        self._staged = "stg"

    def stage_csv(self, path: Path, columns: Mapping[str, str] | None) -> list[str]:
        """Stage a CSV file; its header. Raises StageError."""
        header = sql.stage_csv(self._con, str(path), columns)
        self._raw_table = "stg"
        return header

    def stage_parquet(self, path: Path, columns: Mapping[str, str] | None) -> list[str]:
        """Stage a Parquet file; its column names. Raises StageError."""
        header = sql.stage_parquet(self._con, str(path), columns)
        self._raw_table = "stg"
        return header

    def staged_count(self) -> int:
        return sql.staged_count(self._con, self._staged)

    def first_record_keys(self) -> list[str] | None:
        """The keys of the first staged line (the line-by-line path), when it is a JSON object."""
        return sql.first_record_keys(self._con)

    def any_record_has(self, column: str) -> bool:
        return sql.any_record_has(self._con, column)

    # --- validate -------------------------------------------------------------------------------------
    def flag(self, default_arm: str | None) -> int:
        """One pass over the staged rows; how many have a problem visible within the row."""
        return sql.flagged(self._con, default_arm)

    def diagnose(self, default_arm: str | None) -> None:
        """The reasons of the flagged rows, and the typed values of the others."""
        sql.diagnose(self._con, default_arm)
        sql.typed_rows(self._con)

    def end_staging(self) -> None:
        """Drop the staged fields, unless they are where a row's raw text comes from (CSV, Parquet)."""
        self._con.execute("DROP TABLE IF EXISTS _labels")
        if self._raw_table != "stg":
            self._con.execute("DROP TABLE IF EXISTS stg")  # (the fast path staged none)

    # --- resolve and write ----------------------------------------------------------------------------
    def next_ingest_id(self) -> int:
        return sql.next_ingest_id(self._con)

    def load(
        self,
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
        error_cap: int,
        raw: RawText | None,
        progress: Progress | None,
    ) -> LoadResult:
        """Resolve and write the checked rows (store/loading.py `load`). ``raw`` gives the raw text of some
        rows when it is in the file (the fast path), else it comes from the staged table."""
        table = self._raw_table

        def staged_raw(lines: Sequence[int]) -> dict[int, str]:
            return sql.raw_rows(self._con, lines, table or "staged")

        return sql.load(
            self._con,
            ingest_id=ingest_id,
            source=source,
            default_arm=default_arm,
            replace=replace,
            skip_bad=skip_bad,
            strict=strict,
            strict_max_extra=strict_max_extra,
            naive_pattern=naive_pattern,
            framework_patterns=framework_patterns,
            error_cap=error_cap,
            raw=raw or staged_raw,
            progress=progress,
        )

    def record_ingest(self, ingest_id: int, source: str, fmt: str, res: LoadResult) -> None:
        sql.record_ingest(self._con, ingest_id, source, fmt, res)

    # --- judge verdicts that came with the file (mcqaudit.inspect's scorer) ---------------------------
    def loaded_rows(self, ingest_id: int) -> dict[int, judging.LoadedRow]:
        """The rows this load wrote, by line (store/judging.py `loaded_rows`)."""
        return judging.loaded_rows(self._con, ingest_id)

    def write_verdicts(
        self,
        configs: Sequence[JudgeConfig],
        replies: Sequence[judging.ReplyRecord],
        verdicts: Sequence[judging.VerdictRecord],
    ) -> None:
        """Store judge verdicts in this load's transaction (store/judging.py `write_imported`)."""
        judging.write_imported(self._con, configs, replies, verdicts)
