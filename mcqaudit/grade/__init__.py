"""Grading (docs/design.md §5): plan → requests → writer → store, resumable and cached.

- :mod:`.config`: options and their checks, the API key's lookup, the exemplar file, exit codes.
- :mod:`.plan`: the rows that need the judge, rendered into one request per distinct prompt; the dry run.
- :mod:`.records`: a judge outcome (or an earlier legal reply) as reply and verdict records.
- :mod:`.writer`: those records written to the study in small batches as they arrive.
- :mod:`.run`: the online run (N requests in flight) after the prelude.
- :mod:`.batch`: the run through the provider's Batch API after the prelude.
- :mod:`.summary`: what a run did, and the progress sink it reports to.
- :mod:`.lock`: one grader per study at a time (online and batch), so no prompt is paid for twice.

The prelude every run starts with (open and lock the study, replay its journal, check the options, look up
the key, plan) and the entry points (``grade``, ``grade_batch``, the dry runs, ``--no-judge``) are the grade
use case's, :mod:`mcqaudit.app.grade`. Dependencies go one way: ``app/`` uses this package, this package uses
:mod:`mcqaudit.judge` and :mod:`mcqaudit.store`; neither of those imports it.
"""

from mcqaudit.grade.config import (
    DEFAULT_API_KEY_ENV,
    ENV_BASE_URL,
    ENV_MODEL,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_ROW_ERRORS,
    EXIT_USAGE,
    NO_JUDGE_MESSAGE,
    GradeInterrupted,
    GradeOptions,
    GradeUsageError,
    check_arms,
    key_in_env,
    load_exemplars,
    resolve_api_key,
)
from mcqaudit.grade.plan import DryRun
from mcqaudit.grade.summary import STANDIN_NOTE, GradeSummary, NullReporter, Reporter, summary_json

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "ENV_BASE_URL",
    "ENV_MODEL",
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_ROW_ERRORS",
    "EXIT_USAGE",
    "NO_JUDGE_MESSAGE",
    "STANDIN_NOTE",
    "DryRun",
    "GradeInterrupted",
    "GradeOptions",
    "GradeSummary",
    "GradeUsageError",
    "NullReporter",
    "Reporter",
    "check_arms",
    "key_in_env",
    "load_exemplars",
    "resolve_api_key",
    "summary_json",
]
