"""Opening a study for a use case (docs/design.md §5, §9).

Every use case that writes opens its study through :func:`open_study`, so that what a stopped or killed run
left in the reply journal is written in before anything else happens.
"""

from __future__ import annotations

from pathlib import Path

from mcqaudit.store.db import Study


def open_study(study: str | Path | Study, *, create: bool = False) -> Study:
    """An open :class:`~mcqaudit.store.db.Study` for a path (or the one given). A writable open replays the
    journal beside the study (what it replayed is in ``study.replayed``)."""
    if isinstance(study, Study):
        return study
    return Study(study, create=create)
