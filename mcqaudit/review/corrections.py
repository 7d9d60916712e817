"""What carrying reviews into a framework's own log needs, as typed records (``reviews export --inspect``):
the study's rows at the log's samples (:class:`SampleRow`) and the review log's records
(:class:`LoggedReview`). The store reads them (:mod:`mcqaudit.store.corrections`); the use case
(:mod:`mcqaudit.app.reviews`) hands them to :mod:`mcqaudit.inspect_edits`. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class SampleRow:
    """A row of the study (any arm) at one (item_id, sample), with what matching it to a log and writing its
    verdict back needs: content, the final verdict and its source, the picked option."""

    row_id: str
    arm: str
    item_id: str
    sample: int
    question: str
    options: tuple[str, ...]
    generation: str
    gold_option: str | None
    final_verdict: str | None
    verdict_source: str | None
    picked_option: str | None
    judge_fingerprint: str | None


@dataclass(frozen=True)
class LoggedReview:
    """One record of the review log (a confirm, override or retraction), oldest first."""

    review_id: int
    row_id: str
    action: str
    verdict: str | None
    picked_letter: str | None  # displayed letter, in the order the model saw
    note: str | None
    reviewer: str
    created_at: datetime  # UTC
    prior_verdict: str | None
    prior_source: str | None
    fingerprint: str | None
    retracts: int | None
    queue_id: int | None
    origin: str | None
