"""The generate use case: prompt rows → a model → a generations file that `ingest` reads, resumable.

No study is involved: the output file is its own journal (:mod:`mcqaudit.generate`, docs/design.md §5).
This module is what the faces call, so that they import nothing below ``app/``: the options and their
checks, the run, the key to scrub from messages, and the errors a face turns into exit codes.
"""

from __future__ import annotations

from mcqaudit.endpoint import Interrupted, scrub
from mcqaudit.generate import GenerateOptions, GenerateSummary, GenerateUsageError, generate, secret_for
from mcqaudit.ingest.errors import InputError

__all__ = [
    "GenerateOptions",
    "GenerateSummary",
    "GenerateUsageError",
    "InputError",
    "Interrupted",
    "generate",
    "scrub",
    "secret_for",
]
