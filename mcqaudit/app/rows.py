"""The row lists use case (docs/design.md §8): what the dashboard's Review, Parsers and Overview pages list and
show — a filtered, paged list of rows (:class:`~mcqaudit.review.filters.RowFilter`), where a row sits in
it, one row's panel, a queue's next unreviewed row — and the rows export. Reads only; the SQL is
:mod:`mcqaudit.store.rows`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from mcqaudit.app.study import open_study
from mcqaudit.files import write_atomic_path
from mcqaudit.review.filters import RowFilter
from mcqaudit.store import rows as sql
from mcqaudit.store.db import Study
from mcqaudit.store.export import ExportProgress
from mcqaudit.store.rows import ListPosition, ReviewPanel

__all__ = [
    "EXPORT_FORMATS",
    "Exported",
    "ListPosition",
    "ReviewPanel",
    "count_rows",
    "export_format",
    "export_rows",
    "item_rows",
    "list_position",
    "list_rows",
    "next_unreviewed",
    "review_panel",
    "row_at",
    "row_detail",
    "row_ids",
    "study_choices",
    "verdict_counts",
]

StudyLike = str | Path | Study


def study_choices(study: StudyLike) -> dict[str, list[str]]:
    """The values the filters offer: arms (ingest order), orientations, judge statuses, parsers."""
    return sql.study_choices(open_study(study))


def verdict_counts(study: StudyLike) -> pd.DataFrame:
    """Rows, CORRECT, INCORRECT, OTHER and ungraded per arm and orientation (final verdicts), arms in order."""
    return sql.verdict_counts(open_study(study))


def count_rows(study: StudyLike, f: RowFilter) -> int:
    """How many rows the list ``f`` has."""
    return sql.count_rows(open_study(study), f)


def list_rows(study: StudyLike, f: RowFilter, limit: int = 50, offset: int = 0) -> pd.DataFrame:
    """One page of the list ``f`` (:data:`mcqaudit.store.rows.LIST_COLUMNS`)."""
    return sql.list_rows(open_study(study), f, limit=limit, offset=offset)


def row_ids(study: StudyLike, f: RowFilter, limit: int | None = None) -> list[str]:
    """The ids of the rows of the list ``f``, in list order."""
    return sql.row_ids(open_study(study), f, limit)


def list_position(study: StudyLike, f: RowFilter, row_id: str) -> ListPosition | None:
    """Where ``row_id`` sits in the list ``f`` (None when it is not in it)."""
    return sql.list_position(open_study(study), f, row_id)


def row_at(study: StudyLike, f: RowFilter, position: int) -> str | None:
    """The id of the row at ``position`` (0-based) of the list ``f``; None past either end."""
    return sql.row_at(open_study(study), f, position)


def next_unreviewed(study: StudyLike, queue_id: int, after: str | None = None) -> str | None:
    """The queue's first row without an effective review after ``after`` (in queue order, wrapping round);
    None when no other row of the queue is unreviewed."""
    return sql.next_unreviewed(open_study(study), queue_id, after)


def review_panel(study: StudyLike, f: RowFilter, row_id: str) -> ReviewPanel:
    """Everything the Review page shows about one row of the list ``f``, read through one connection."""
    return sql.review_panel(open_study(study), f, row_id)


def row_detail(study: StudyLike, row_id: str) -> dict[str, Any] | None:
    """Everything about one row (None when the study lacks it)."""
    return sql.row_detail(open_study(study), row_id)


def item_rows(study: StudyLike, item_id: str) -> pd.DataFrame:
    """Every row of one item, for the side-by-side view."""
    return sql.item_rows(open_study(study), item_id)


EXPORT_FORMATS = sql.EXPORT_FORMATS
# what a file's suffix says its format is, when none is named
_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}


@dataclass(frozen=True)
class Exported:
    """What :func:`export_rows` wrote: the file, its format, its rows and its size in bytes."""

    path: Path
    format: str
    rows: int
    bytes: int


def export_format(path: str | Path, fmt: str | None = None) -> str:
    """The format to export to ``path`` in: ``fmt`` when given, else the one its suffix names (``.csv``,
    ``.parquet`` or ``.pq``, ``.jsonl`` or ``.ndjson``). ``ValueError`` (one line) for an unknown format, or
    none given and a suffix that names none."""
    if fmt is None:
        suffix = Path(path).suffix.lower()
        if suffix not in _SUFFIXES:
            raise ValueError(
                f"cannot tell the format from {Path(path).name!r}: name one of {', '.join(EXPORT_FORMATS)}"
            )
        return _SUFFIXES[suffix]
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"the format must be one of {', '.join(EXPORT_FORMATS)}, not {fmt!r}")
    return fmt


def export_rows(
    study: StudyLike, path: str | Path, fmt: str | None = None, progress: ExportProgress | None = None
) -> Exported:
    """Write every row of ``graded_rows`` (final verdicts) to ``path``, whole or not at all: written to a
    temporary file beside it, then renamed over it (:func:`mcqaudit.files.write_atomic_path`), so a failed
    export (a full disk, Ctrl-C) leaves no file and an earlier one of that name unchanged, and raises
    :class:`~mcqaudit.files.WriteFailed` (one line).

    ``fmt`` (default: from the suffix, :func:`export_format`): ``csv`` (the view's columns, options as a JSON
    array, formula-like cells behind a quote), ``parquet`` or ``jsonl`` (the view's columns and each row's
    ``reviews`` and ``panel_verdicts``, nested: :mod:`mcqaudit.store.export`). ``progress(done, total)`` is
    called after each batch of rows. Works on a read-only study."""
    fmt = export_format(path, fmt)
    opened = open_study(study)
    rows = write_atomic_path(path, lambda tmp: sql.export_rows(opened, str(tmp), fmt, progress))
    return Exported(Path(path), fmt, rows, Path(path).stat().st_size)
