"""What the use cases raise, sorted by what a face does with it (docs/design.md §9): the one table the CLI's
exit codes are read from (``cli._exits``).

- :data:`USAGE`: the command was asked something it cannot do as asked (a bad option, a bad combination):
  one ``error:`` line, exit 2.
- :data:`REFUSED`: the command was understood but the study, a file or a review refuses it (read-only, locked,
  missing, illegal review, unwritable output): one ``error:`` line, exit 1, nothing written.
- :data:`STOPPED`: a SIGTERM stopped a run (exit 143); Ctrl-C is ``KeyboardInterrupt`` (exit 130). What was
  received is kept; the face says how to go on.

Anything else is a failure the command names (``error: grading failed: Type: reason``), exit 1, never a
traceback. Errors whose output is a list of problems (``InputError``, ``ReviewImportError``) are printed by
the command that knows their shape, and are not in this table.
"""

from __future__ import annotations

from typing import Final

from mcqaudit.app.check import UnknownFlag
from mcqaudit.app.ingest import IngestRefused
from mcqaudit.demo import DemoError
from mcqaudit.endpoint import Interrupted, scrub
from mcqaudit.files import WriteFailed
from mcqaudit.generate import GenerateUsageError
from mcqaudit.grade.config import GradeUsageError
from mcqaudit.ingest.errors import UsageError as IngestUsageError
from mcqaudit.inspect_edits import InspectExportError
from mcqaudit.orient import OrientationError
from mcqaudit.review.rules import ReviewError
from mcqaudit.store.db import StudyError

__all__ = ["REFUSED", "STOPPED", "USAGE", "exit_code", "scrub"]

USAGE: Final[tuple[type[Exception], ...]] = (
    GradeUsageError,
    GenerateUsageError,
    IngestUsageError,
    OrientationError,
    UnknownFlag,
)
REFUSED: Final[tuple[type[Exception], ...]] = (
    StudyError,
    IngestRefused,
    ReviewError,
    InspectExportError,
    DemoError,
    WriteFailed,
)
STOPPED: Final[tuple[type[Exception], ...]] = (Interrupted,)


def exit_code(exc: BaseException) -> int | None:
    """The exit code the table gives ``exc`` (None: not in the table)."""
    if isinstance(exc, KeyboardInterrupt):
        return 130
    if isinstance(exc, STOPPED):
        return 143
    if isinstance(exc, USAGE):
        return 2
    if isinstance(exc, REFUSED):
        return 1
    return None
