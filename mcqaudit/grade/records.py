"""What a judge outcome becomes in the study: reply records (every reply received, or the failure) and
verdict records (one per row). The one place a :class:`VerdictRecord` is built.

The reply was parsed once, by the client (:class:`JudgeOutcome` and each :class:`ReceivedReply` carry the
result); here it is only compared with each row's gold letter.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from mcqaudit.judge.client import JudgeOutcome
from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.judge.replies import REPLY_ERROR_KINDS, judged
from mcqaudit.store.judging import CachedReply, ReplyRecord, TargetRow, VerdictRecord
from mcqaudit.vocab import ERROR, OK


@functools.lru_cache(maxsize=16)
def fingerprint_of(config: JudgeConfig) -> str:
    """``config.fingerprint``, computed once per configuration: it hashes the whole prompt template, which
    done for every verdict was a visible share of a run's CPU in a profile."""
    return config.fingerprint


class Answer(Protocol):
    """What a verdict is made from: a judge outcome, or an earlier legal reply to the same prompt."""

    @property
    def value(self) -> str | None: ...  # the legal value; None when the request ended in error
    @property
    def reply(self) -> str | None: ...
    @property
    def rationale(self) -> str | None: ...


def verdict_records(
    rows: Sequence[TargetRow],
    config: JudgeConfig,
    answer: Answer,
    *,
    prompt_hash: str,
    base_url: str | None,
    error: str | None,
    attempts: int,
    judged_at: datetime,
) -> list[VerdictRecord]:
    """One verdict a row for rows sharing a prompt: ``ok`` with a legal value, else ``error``."""
    value = answer.value
    fp = fingerprint_of(config)
    out = []
    for row in rows:
        letter, verdict = judged(config.shape, value, row.gold_letter) if value else (None, None)
        out.append(
            VerdictRecord(
                row_id=row.row_id,
                fingerprint=fp,
                status=OK if value else ERROR,
                letter=letter,
                verdict=verdict,
                reply=answer.reply,
                rationale=answer.rationale,
                error=error,
                prompt_hash=prompt_hash,
                base_url=base_url,
                attempts=attempts,
                judged_at=judged_at,
            )
        )
    return out


def cached_verdicts(
    hit: CachedReply,
    h: str,
    rows: Sequence[TargetRow],
    config: JudgeConfig,
    base_url: str | None,
    at: datetime,
) -> list[VerdictRecord]:
    """Verdicts from an earlier legal reply to the same prompt (hash ``h``): no request, no attempt."""
    return verdict_records(
        rows, config, hit, prompt_hash=h, base_url=base_url, error=None, attempts=0, judged_at=at
    )


def outcome_records(
    outcome: JudgeOutcome, rows: Sequence[TargetRow], config: JudgeConfig, base_url: str | None
) -> tuple[list[ReplyRecord], list[VerdictRecord]]:
    fp, h = fingerprint_of(config), outcome.request.prompt_hash
    replies = [
        ReplyRecord(
            fingerprint=fp,
            prompt_hash=h,
            status=OK if r.parsed.ok else ERROR,
            reply=r.text,
            value=r.parsed.value,
            rationale=r.parsed.rationale,
            error=None if r.parsed.ok else f"{r.parsed.kind}: {r.parsed.error}",
            base_url=base_url,
            tokens_in=r.tokens_in,
            tokens_out=r.tokens_out,
            received_at=r.received_at,
        )
        for r in outcome.replies
    ]
    error = None if outcome.ok else f"{outcome.error_kind}: {outcome.error}"
    if not outcome.ok and outcome.error_kind not in REPLY_ERROR_KINDS:
        # The request failed without a reply text (HTTP error, timeout, bad body): keep that too.
        replies.append(
            ReplyRecord(
                fingerprint=fp,
                prompt_hash=h,
                status=ERROR,
                reply=None,
                value=None,
                rationale=None,
                error=error,
                base_url=base_url,
                tokens_in=None,
                tokens_out=None,
                received_at=outcome.finished_at,
            )
        )
    at, attempts = outcome.finished_at, outcome.attempts
    verdicts = verdict_records(
        rows, config, outcome, prompt_hash=h, base_url=base_url, error=error, attempts=attempts, judged_at=at
    )
    return replies, verdicts
