"""What a judge outcome becomes in the study: reply records (every reply received, or the failure) and
verdict records (one per row). The one place a :class:`VerdictRecord` is built.

The reply was parsed once, by the client (:class:`JudgeOutcome` and each :class:`ReceivedReply` carry the
result); here it is only compared with each row's gold letter.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from mcqaudit.judge.client import JudgeOutcome
from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.judge.replies import REPLY_ERROR_KINDS, judged
from mcqaudit.store.judging import CachedReply, ReplyRecord, TargetRow, VerdictRecord
from mcqaudit.vocab import ERROR, OK


def verdict_records(
    rows: Sequence[TargetRow],
    config: JudgeConfig,
    *,
    value: str | None,
    reply: str | None,
    rationale: str | None,
    error: str | None,
    prompt_hash: str,
    base_url: str | None,
    attempts: int,
    judged_at: datetime,
) -> list[VerdictRecord]:
    """One verdict a row for rows sharing a prompt: ``ok`` with a legal ``value``, else ``error``."""
    out = []
    for row in rows:
        letter, verdict = judged(config.shape, value, row.gold_letter) if value else (None, None)
        out.append(
            VerdictRecord(
                row_id=row.row_id,
                fingerprint=config.fingerprint,
                status=OK if value else ERROR,
                letter=letter,
                verdict=verdict,
                reply=reply,
                rationale=rationale,
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
    prompt_hash: str,
    rows: Sequence[TargetRow],
    config: JudgeConfig,
    base_url: str | None,
    judged_at: datetime,
) -> list[VerdictRecord]:
    """Verdicts from an earlier legal reply to the same prompt: no request, no attempt."""
    return verdict_records(
        rows,
        config,
        value=hit.value,
        reply=hit.reply,
        rationale=hit.rationale,
        error=None,
        prompt_hash=prompt_hash,
        base_url=base_url,
        attempts=0,
        judged_at=judged_at,
    )


def outcome_records(
    outcome: JudgeOutcome, rows: Sequence[TargetRow], config: JudgeConfig, base_url: str | None
) -> tuple[list[ReplyRecord], list[VerdictRecord]]:
    fp, h = config.fingerprint, outcome.request.prompt_hash
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
    verdicts = verdict_records(
        rows,
        config,
        value=outcome.value,
        reply=outcome.reply,
        rationale=outcome.rationale,
        error=error,
        prompt_hash=h,
        base_url=base_url,
        attempts=outcome.attempts,
        judged_at=outcome.finished_at,
    )
    return replies, verdicts
