"""The study file (DuckDB): the only package that imports duckdb and holds SQL."""

from mcqaudit.store.db import Study, StudyError, StudyLocked, StudyReadOnly

__all__ = ["Study", "StudyError", "StudyLocked", "StudyReadOnly"]
