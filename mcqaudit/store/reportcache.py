"""The reports' cache beside a study (``<study>.report.json``): the report dicts last built from the file, each
under the options it was built with, valid only while the file is exactly as it was then. No duckdb, no
numpy: a hit is read without opening the study.

The validity rule is ``info``'s (:mod:`~mcqaudit.store.infocache`): the study file's and its write-ahead
log's *stamp*, taken after the study was opened and before it was read and checked again when the report is
kept, and the code that built it (:func:`~mcqaudit.store.infocache.code_key`). A report is a pure function
of the file and its options (the bootstrap is seeded), so a hit is the report a computation would give, to
the byte. The file holds at most :data:`KEEP` reports, all of one stamp: a report of a changed file replaces
them. A folder that cannot be written keeps none; anything unreadable is a miss.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcqaudit.store.infocache import Stamp, code_key, stamp, write_whole
from mcqaudit.store.sidecars import report_cache_path

FORMAT = 1
KEEP = 4  # reports kept per stamp (report and check with their usual options, the dashboard's, a --by)


def _read(study_path: str | Path) -> dict[str, Any] | None:
    try:
        data = json.loads(report_cache_path(study_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("code") != code_key():
        return None
    entries = data.get("reports")
    return data if isinstance(entries, list) else None


def load(study_path: str | Path, key: str) -> dict[str, Any] | None:
    """The report kept under ``key`` (the options it was built with), when this code kept it for the study
    file as it is now."""
    data = _read(study_path)
    if data is None or data.get("stamp") != stamp(study_path):
        return None
    for entry in data["reports"]:
        if isinstance(entry, list) and len(entry) == 2 and entry[0] == key and isinstance(entry[1], dict):
            return entry[1]
    return None


def save(study_path: str | Path, taken: Stamp, key: str, report: dict[str, Any]) -> bool:
    """Keep ``report``, built with options ``key`` from the study as it was at stamp ``taken``, unless the
    file has changed since (then nothing is kept); the other reports of that stamp stay, the most recent
    :data:`KEEP` in all."""
    if stamp(study_path) != taken:
        return False
    data = _read(study_path)
    kept: list[Any] = data["reports"] if data is not None and data.get("stamp") == taken else []
    kept = [[key, report]] + [e for e in kept if isinstance(e, list) and e and e[0] != key]
    return write_whole(
        report_cache_path(study_path),
        {"format": FORMAT, "code": code_key(), "stamp": taken, "reports": kept[:KEEP]},
    )
