"""Opening a study for a use case (docs/design.md §5, §9), and the one place the journal is replayed.

Every use case that writes opens its study through :func:`open_study`: what a stopped or killed run left in
the reply journal beside the study (``store/journal.py``) is written in before anything else reads the study
or decides what to send. The store itself knows no journal (``Study(...)`` only migrates and tidies), so a
``Study`` opened directly, by a benchmark or a test builder, is not replayed into.

What an open replayed is kept here, beside the study, until a face says it, once (:func:`take_replayed`):
the CLI on stderr (``cli._open_study``), `info` in its journal section, an online `grade` in its summary.
A read-only study is never replayed into; :func:`journal_pending` counts what its journal holds.
"""

from __future__ import annotations

import weakref
from pathlib import Path

from mcqaudit.store.db import Study, StudyError, StudyReadOnly
from mcqaudit.store.journal import JUDGED, Pending, journal_dir, pending, replay

__all__ = [
    "JUDGED",
    "Pending",
    "Study",
    "StudyError",
    "StudyReadOnly",
    "journal_pending",
    "open_study",
    "replay_journal",
    "take_replayed",
]

# What each open replayed, until a face takes it (told once); a study that is gone takes its entry along.
_untold: weakref.WeakKeyDictionary[Study, Pending] = weakref.WeakKeyDictionary()


def open_study(study: str | Path | Study, *, create: bool = False) -> Study:
    """An open :class:`~mcqaudit.store.db.Study` for a path (or the one given, as it is). A writable open
    replays the journal beside the study first (:func:`take_replayed` says what it wrote in)."""
    if isinstance(study, Study):
        return study
    opened = Study(study, create=create)
    if not opened.read_only and journal_dir(opened.path).is_dir():
        # What a killed writer left (replies that arrived but were not yet written): written now, before
        # anyone reads the study or decides what to send (docs/design.md §5).
        _untold[opened] = replay(opened)
    return opened


def replay_journal(study: Study) -> Pending:
    """Replay the journal into a study opened earlier (``grade`` at its start: another run may have been
    killed since). What it writes in is returned, not kept for :func:`take_replayed`."""
    return replay(study)


def take_replayed(study: Study) -> Pending | None:
    """What opening ``study`` replayed from its journal (None: nothing to replay, or said already); told
    once: it is forgotten here."""
    return _untold.pop(study, None)


def journal_pending(study: Study) -> Pending:
    """Records in the journal beside the study that it may not hold yet, read without replaying or taking
    locks (a live writer's segments count too): `info` says them, on a read-only study too."""
    return pending(study.path)
