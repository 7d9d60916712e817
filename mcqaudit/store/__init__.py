"""The study file (DuckDB): the only package that imports duckdb and holds SQL.

The names below load :mod:`mcqaudit.store.db` (and duckdb) on first use (PEP 562), so that a module here that
needs neither (:mod:`~mcqaudit.store.sidecars`, :mod:`~mcqaudit.store.infocache`) is imported without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcqaudit.store.db import Study, StudyError, StudyLocked, StudyReadOnly

__all__ = ["Study", "StudyError", "StudyLocked", "StudyReadOnly"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from mcqaudit.store import db

    value = getattr(db, name)
    globals()[name] = value
    return value
