"""The info use case: what ``mcqaudit info`` says about a study without a bootstrap: its summary (arms,
items, orientations, rows per arm × orientation, parser coverage, verdicts by source, rejected rows) and the
flags that need no CIs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mcqaudit.app.report import load_frames
from mcqaudit.metrics import CI_FLAGS, compute, sort_flags
from mcqaudit.metrics.results import Flag
from mcqaudit.native import fast_arrays

if TYPE_CHECKING:
    from mcqaudit.store.db import Study
    from mcqaudit.store.summary import StudySummary


def summary(study: Study) -> StudySummary:
    """The study's facts as ``mcqaudit info`` prints them first (:class:`~mcqaudit.store.summary.StudySummary`,
    its tables as data frames)."""
    from mcqaudit.store.summary import summarise

    return summarise(study)


def study_flags(study: str | Path | Study) -> tuple[list[Flag], tuple[str, ...]]:
    """The flags that need no bootstrap (for ``mcqaudit info``), most important first, and the names of
    the flags that could not be checked here: those read off CIs (:data:`~mcqaudit.metrics.CI_FLAGS`),
    which need two or more arms to compare and a bootstrap (``mcqaudit report``)."""
    with fast_arrays():
        res = compute(load_frames(study), n_boot=0)
    unchecked = CI_FLAGS if res["delta_accuracy"] else ()
    return sort_flags(res["flags"]), unchecked
