"""The row lists use case (docs/design.md §8): what the dashboard's Review, Parsers and Overview pages list and
show — a filtered, paged list of rows (:class:`~mcqaudit.review.filters.RowFilter`), where a row sits in
it, one row's panel, a queue's next unreviewed row — and the rows export. Reads only; the SQL is
:mod:`mcqaudit.store.rows`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from mcqaudit.app.study import open_study
from mcqaudit.review.filters import RowFilter
from mcqaudit.store import rows as sql
from mcqaudit.store.db import Study
from mcqaudit.store.rows import ListPosition, ReviewPanel

__all__ = [
    "ListPosition",
    "ReviewPanel",
    "count_rows",
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
]

StudyLike = str | Path | Study


def study_choices(study: StudyLike) -> dict[str, list[str]]:
    """The values the filters offer: arms (ingest order), orientations, judge statuses, parsers."""
    return sql.study_choices(open_study(study))


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


def export_rows(study: StudyLike, path: str, fmt: str) -> None:
    """Write every row (final verdicts) to ``path`` as csv or parquet."""
    sql.export_rows(open_study(study), path, fmt)
