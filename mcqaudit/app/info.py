"""The info use case: what ``mcqaudit info`` says about a study without a bootstrap: its summary (arms,
items, orientations, rows per arm × orientation, parser coverage, verdicts by source, rejected rows), the
flags that need no CIs, and what grading cost so far (:func:`judge_usage`, the ``usage`` each judge reply
reported); :func:`info_json` is ``info --json``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcqaudit.app.report import load_frames
from mcqaudit.metrics import CI_FLAGS, compute, sort_flags
from mcqaudit.metrics.results import Flag
from mcqaudit.native import fast_arrays
from mcqaudit.store.judging import JudgeUsage

if TYPE_CHECKING:
    from mcqaudit.store.db import Study
    from mcqaudit.store.summary import StudySummary

__all__ = ["JudgeUsage", "info_json", "judge_usage", "study_flags", "summary"]


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


def judge_usage(study: Study) -> dict[str, JudgeUsage]:
    """Per judge fingerprint (oldest first): the prompt and completion tokens its replies reported, over how
    many replies, how many reported no ``usage`` (unknown: not counted as 0), and how many requests failed
    without a reply (:func:`mcqaudit.store.judging.usage_by_fingerprint`)."""
    from mcqaudit.store.judging import usage_by_fingerprint

    return usage_by_fingerprint(study)


def info_json(study: Study) -> dict[str, Any]:
    """``mcqaudit info --json``: the study's facts, its judge fingerprints and their usage (``judge_usage``:
    ``{fingerprint: {"prompt_tokens", "completion_tokens", "requests", "requests_without_usage", ...}}``)."""
    from mcqaudit.store.judging import fingerprint_summary

    s = summary(study)
    return {
        "path": str(s.path),
        "created": s.created,
        "rows": s.rows,
        "items": s.items,
        "arms": s.arms,
        "control_arm": s.control_arm,
        "unaudited": s.unaudited,
        "orientations": s.orientations,
        "rejected_rows": s.rejected_total,
        "judge_fingerprints": [
            {**f, "first_used": f["first_used"].isoformat() if f["first_used"] else None}
            for f in fingerprint_summary(study)
        ],
        "judge_usage": judge_usage(study),
    }
