"""The files a study keeps beside it, by name (no duckdb: read before the study is opened): its journal
folder (:mod:`~mcqaudit.store.journal`), ``info``'s cache (:mod:`~mcqaudit.store.infocache`) and the reports'
cache (:mod:`~mcqaudit.store.reportcache`)."""

from __future__ import annotations

from pathlib import Path

JOURNAL_SUFFIX = ".journal"
INFO_CACHE_SUFFIX = ".info.json"
REPORT_CACHE_SUFFIX = ".report.json"


def journal_dir(study_path: str | Path) -> Path:
    p = Path(study_path)
    return p.with_name(p.name + JOURNAL_SUFFIX)


def info_cache_path(study_path: str | Path) -> Path:
    p = Path(study_path)
    return p.with_name(p.name + INFO_CACHE_SUFFIX)


def report_cache_path(study_path: str | Path) -> Path:
    p = Path(study_path)
    return p.with_name(p.name + REPORT_CACHE_SUFFIX)
