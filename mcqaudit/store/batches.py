"""All SQL for batch mode (`grade --batch`, docs/design.md §5): the submissions to the provider's Batch API
and the prompts each carries.

A submission is recorded as soon as its input file is uploaded and before the batch is created, so that a
re-run after a crash finds it: it polls the batch (or creates it from the uploaded file) instead of sending
the prompts again. A submission is *open* until its results are written (``collected_at``); the prompts of
open submissions are not sent again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection as Connection

    from mcqaudit.store.db import Study


def _now() -> datetime:
    # store.db (and duckdb) is imported where a batch is written: `mcqaudit info` reads this module's
    # dataclasses from its cache without either
    from mcqaudit.store.db import utcnow

    return utcnow()


@dataclass(frozen=True)
class Submission:
    """One input file sent to the Batch API; ``batch_id`` is None until the batch was created."""

    input_file_id: str
    batch_id: str | None
    fingerprint: str
    base_url: str | None
    lines: int
    status: str
    submitted_at: datetime


@dataclass(frozen=True)
class BatchLine:
    custom_id: str
    prompt_hash: str
    n_options: int


# the Arrow schema of judge_batch_lines' rows (pyarrow is imported when a batch is recorded: `mcqaudit info`
# reads this module and need not load it)
_LINES = (
    ("input_file_id", "string"),
    ("custom_id", "string"),
    ("prompt_hash", "string"),
    ("n_options", "int32"),
)


def record_upload(
    study: Study,
    *,
    input_file_id: str,
    fingerprint: str,
    base_url: str | None,
    lines: Sequence[BatchLine],
    size: int,
) -> None:
    """Record an uploaded input file and its lines (one transaction), before its batch is created."""
    import pyarrow as pa

    schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in _LINES])
    table = pa.Table.from_pylist(
        [{"input_file_id": input_file_id, **line.__dict__} for line in lines], schema=schema
    )
    with study.write() as con:
        con.execute(
            """INSERT INTO judge_batches (input_file_id, batch_id, fingerprint, base_url, lines, bytes, status,
                   submitted_at)
               VALUES (?, NULL, ?, ?, ?, ?, 'uploaded', ?)""",
            [input_file_id, fingerprint, base_url, len(lines), size, _now()],
        )
        con.register("mcq_batch_lines", table)
        con.execute(
            "INSERT INTO judge_batch_lines SELECT input_file_id, custom_id, prompt_hash, n_options "
            "FROM mcq_batch_lines"
        )
        con.unregister("mcq_batch_lines")


def record_created(study: Study, input_file_id: str, batch_id: str, status: str) -> None:
    with study.write() as con:
        con.execute(
            "UPDATE judge_batches SET batch_id = ?, status = ? WHERE input_file_id = ?",
            [batch_id, status, input_file_id],
        )


def record_status(study: Study, input_file_id: str, status: str) -> None:
    with study.write() as con:
        con.execute(
            "UPDATE judge_batches SET status = ? WHERE input_file_id = ? AND status IS DISTINCT FROM ?",
            [status, input_file_id, status],
        )


def collected(input_file_id: str, status: str, error: str | None = None) -> Callable[[Connection], None]:
    """The statement that closes a submission, for :func:`~mcqaudit.store.judging.write_judged`'s ``also``:
    its results and its closing are one transaction, so a crash cannot write them twice."""

    def run(con: Connection) -> None:
        con.execute(
            "UPDATE judge_batches SET status = ?, error = ?, collected_at = ? WHERE input_file_id = ?",
            [status, error, _now(), input_file_id],
        )

    return run


ANSWERED = "answered"  # the status of a submission closed because every row it could grade has a verdict


def close_answered(study: Study, input_file_ids: Sequence[str]) -> None:
    """Close open submissions whose prompts no row waits for any more (graded otherwise, e.g. online):
    nothing of theirs is collected, and they are no longer open."""
    with study.write() as con:
        con.execute(
            """UPDATE judge_batches SET status = ?, error = ?, collected_at = ?
               WHERE input_file_id IN (SELECT unnest(?::VARCHAR[])) AND collected_at IS NULL""",
            [ANSWERED, "every row it carries has a verdict under this fingerprint", _now(),
             list(input_file_ids)],
        )


def open_submissions(study: Study, fingerprint: str) -> list[Submission]:
    """Submissions under ``fingerprint`` whose results are not in the study yet, oldest first."""
    rows = study.query(
        """SELECT input_file_id, batch_id, fingerprint, base_url, lines, status, submitted_at
           FROM judge_batches WHERE fingerprint = ? AND collected_at IS NULL
           ORDER BY submitted_at, input_file_id""",
        [fingerprint],
    )
    return [Submission(*r) for r in rows]


def lines_of(study: Study, input_file_id: str) -> list[BatchLine]:
    rows = study.query(
        "SELECT custom_id, prompt_hash, n_options FROM judge_batch_lines WHERE input_file_id = ? "
        "ORDER BY custom_id",
        [input_file_id],
    )
    return [BatchLine(r[0], r[1], int(r[2])) for r in rows]


def open_prompt_hashes(study: Study, fingerprint: str) -> set[str]:
    """The prompts that open submissions under ``fingerprint`` carry (not to be sent again meanwhile)."""
    rows = study.query(
        """SELECT DISTINCT l.prompt_hash FROM judge_batch_lines l
           JOIN judge_batches b USING (input_file_id)
           WHERE b.fingerprint = ? AND b.collected_at IS NULL""",
        [fingerprint],
    )
    return {r[0] for r in rows}


def created_count(study: Study) -> int:
    """How many batches this study has created (for tests and `info`)."""
    rows = study.query("SELECT count(*) FROM judge_batches WHERE batch_id IS NOT NULL")
    return int(rows[0][0]) if rows else 0


@dataclass(frozen=True)
class BatchOverview:
    """What `info` shows of batch mode: the open submissions (with their judge model) and how many closed."""

    open: list[tuple[Submission, str | None]]  # (submission, the fingerprint's model), oldest first
    collected: int


def overview(study: Study) -> BatchOverview:
    """One query over ``judge_batches`` (a row per submitted file: small next to the study's rows)."""
    rows = study.query(
        """SELECT b.input_file_id, b.batch_id, b.fingerprint, b.base_url, b.lines, b.status, b.submitted_at,
                  c.model, b.collected_at IS NOT NULL AS closed
           FROM judge_batches b LEFT JOIN judge_configs c USING (fingerprint)
           ORDER BY b.submitted_at, b.input_file_id"""
    )
    return BatchOverview(
        open=[(Submission(*r[:7]), r[7]) for r in rows if not r[8]],
        collected=sum(1 for r in rows if r[8]),
    )
