"""The files a study keeps beside it, by name (no duckdb: read before the study is opened): its journal
folder (:mod:`~mcqaudit.store.journal`), its locks (:mod:`~mcqaudit.store.db`: mcqaudit's writer lock, a grade
run's lock), ``info``'s cache (:mod:`~mcqaudit.store.infocache`) and the reports' cache
(:mod:`~mcqaudit.store.reportcache`); DuckDB's write-ahead log besides."""

from __future__ import annotations

from pathlib import Path

JOURNAL_SUFFIX = ".journal"
LOCK_SUFFIX = ".lock"
GRADING_LOCK_SUFFIX = ".grading.lock"
WAL_SUFFIX = ".wal"
INFO_CACHE_SUFFIX = ".info.json"
REPORT_CACHE_SUFFIX = ".report.json"


def _beside(study_path: str | Path, suffix: str) -> Path:
    p = Path(study_path)
    return p.with_name(p.name + suffix)


def journal_dir(study_path: str | Path) -> Path:
    return _beside(study_path, JOURNAL_SUFFIX)


def wal_path(study_path: str | Path) -> Path:
    return _beside(study_path, WAL_SUFFIX)


def info_cache_path(study_path: str | Path) -> Path:
    return _beside(study_path, INFO_CACHE_SUFFIX)


def report_cache_path(study_path: str | Path) -> Path:
    return _beside(study_path, REPORT_CACHE_SUFFIX)


def lock_path(study_path: str | Path) -> Path:
    return _beside(study_path, LOCK_SUFFIX)


def grading_lock_path(study_path: str | Path) -> Path:
    return _beside(study_path, GRADING_LOCK_SUFFIX)


def sidecar_files(study_path: str | Path) -> list[Path]:
    """Every file a study keeps beside it (not its journal folder, which holds data not yet in the study)."""
    suffixes = (WAL_SUFFIX, LOCK_SUFFIX, GRADING_LOCK_SUFFIX, INFO_CACHE_SUFFIX, REPORT_CACHE_SUFFIX)
    return [_beside(study_path, s) for s in suffixes]


def discard_study(study_path: str | Path) -> None:
    """Remove a study file that is thrown away (a failed first ingest, a demo's building file) and every file
    it keeps beside it: nothing of it is left."""
    for f in (Path(study_path), *sidecar_files(study_path)):
        f.unlink(missing_ok=True)
