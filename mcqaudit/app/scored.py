"""Judge verdicts that come with an Inspect log scored by `mcqaudit.inspect`'s ``mcq_scorer`` (docs/design.md
§10): `mcqaudit ingest` stores them as judge verdicts under their fingerprint, in the load's own
transaction, so the study needs no second grading (`grade` then only fills what is missing).

Only the scorer's *judge* outcomes are taken: a sample its pre-filter resolved, or its rule (a blank
answer), is resolved again the same way by ingest itself and stays a pre-filter or rule row. A judge outcome
is taken only when it can be checked against the row the study now holds:

- the score layout is the one this mcqaudit writes (``SCORE_VERSION``);
- its judge configuration, rebuilt here, has the fingerprint the scorer recorded (same template version:
  the fingerprint hashes the prompt template itself);
- the row needs the judge in the study too (neither pre-filter nor rule resolved it);
- the judge prompt rendered here from the row's question, options, answer (and gold, in the gold shape)
  has the prompt hash the scorer recorded: the judge was sent exactly this row;
- every reply reads, with `judge/replies.py`, as the scorer read it, and the last one against the row's
  gold gives the scorer's verdict.

A reply that was not a verdict (the score is Inspect's unscored one) is stored as an ``error`` verdict with
its raw replies, which `grade` retries like any other. A judge outcome that fails a check is left out and
counted, with the first reason: those rows stay pending until `grade` judges them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mcqaudit.judge.prompts import SYSTEM_PROMPT, TEMPLATE_VERSION, JudgeConfig, prompt_hash, render
from mcqaudit.judge.replies import judged, parse_reply
from mcqaudit.store.judging import LoadedRow, ReplyRecord, VerdictRecord
from mcqaudit.store.loader import Loader
from mcqaudit.vocab import ERROR, OK, SOURCE_JUDGE

__all__ = ["SCORE_VERSION", "Taken", "describe", "take_scored"]

SCORE_VERSION = 1  # mcqaudit/inspect.py SCORE_VERSION: the layout of an mcq_scorer score's metadata
SCORE_KEY = "mcqaudit_score"  # mcqaudit/inspect.py SCORE_KEY


@dataclass(frozen=True)
class Taken:
    """What a load took from the scorer: judge verdicts stored (``errors`` of them not verdicts), under
    which fingerprints, and the judge outcomes left out (``left``, the first ``why``)."""

    verdicts: int = 0
    errors: int = 0
    fingerprints: tuple[str, ...] = ()
    left: int = 0
    why: str | None = None


class _NotTaken(Exception):
    """A judge outcome that cannot be checked against the row (the reason)."""


def take_scored(loader: Loader, ingest_id: int, scored: Mapping[int, Sequence[dict[str, Any]]]) -> Taken:
    """Store the judge outcomes of mcq_scorer scores (``scored``: their metadata by record number) for the
    rows load ``ingest_id`` wrote, in the loader's transaction."""
    rows = loader.loaded_rows(ingest_id)
    configs: dict[str, JudgeConfig] = {}
    replies: list[ReplyRecord] = []
    verdicts: list[VerdictRecord] = []
    left, why = 0, None
    for line in sorted(scored):
        row = rows.get(line)
        if row is None:  # rejected, or unchanged since an earlier load (which took its verdict then)
            continue
        for meta in scored[line]:
            if meta.get("source") != SOURCE_JUDGE:
                continue
            try:
                config, got, verdict = _records(meta, row)
            except _NotTaken as exc:
                left += 1
                why = why or f"sample {line}: {exc}"
                continue
            configs[config.fingerprint] = config
            replies += got
            verdicts.append(verdict)
    if verdicts:
        loader.write_verdicts(list(configs.values()), replies, verdicts)
    return Taken(
        verdicts=len(verdicts),
        errors=sum(v.status == ERROR for v in verdicts),
        fingerprints=tuple(sorted(configs)),
        left=left,
        why=why,
    )


def describe(taken: Taken) -> str | None:
    """One line for the person who ran ingest, or None when the log had no judge outcome of mcq_scorer."""
    if not (taken.verdicts or taken.left):
        return None
    parts = []
    if taken.verdicts:
        parts.append(
            f"{taken.verdicts} judge verdict(s) taken from mcq_scorer under {', '.join(taken.fingerprints)}"
            + (
                f" ({taken.errors} of them replies that are not verdicts: `grade` retries them)"
                if taken.errors
                else ""
            )
        )
    if taken.left:
        parts.append(f"{taken.left} judge outcome(s) left for `grade` ({taken.why})")
    return "; ".join(parts)


def _records(meta: Mapping[str, Any], row: LoadedRow) -> tuple[JudgeConfig, list[ReplyRecord], VerdictRecord]:
    if meta.get(SCORE_KEY) != SCORE_VERSION:
        raise _NotTaken(f"score layout {meta.get(SCORE_KEY)!r} is not this mcqaudit's ({SCORE_VERSION})")
    judge = _obj(meta.get("judge"))
    config = _config(_obj(judge.get("config")), judge.get("fingerprint"))
    if not row.needs_judge:
        raise _NotTaken("the study's pre-filter or rule resolved the row itself")
    user = render(
        config.shape,
        row.question,
        row.options,
        row.answer,
        gold_letter=row.gold_letter if config.shape == "gold" else None,
        rationale=config.rationale,
    )
    h = prompt_hash(SYSTEM_PROMPT, user)
    if h != judge.get("prompt_hash"):
        raise _NotTaken("the judge was sent another text than this row's question, options and answer")
    received = judge.get("replies")
    if not isinstance(received, list) or not received:
        raise _NotTaken("the score holds no judge reply")
    fp = config.fingerprint
    records = [_reply(_obj(r), config, len(row.options), fp, h) for r in received]
    last = records[-1]
    letter, verdict = judged(config.shape, last.value, row.gold_letter) if last.value else (None, None)
    if verdict != meta.get("verdict"):
        raise _NotTaken(
            f"its reply gives {verdict} against the row's gold, the score says {meta.get('verdict')}"
        )
    return (
        config,
        records,
        VerdictRecord(
            row_id=row.row_id,
            fingerprint=fp,
            status=OK if last.value else ERROR,
            letter=letter,
            verdict=verdict,
            reply=last.reply,
            rationale=last.rationale,
            error=last.error,
            prompt_hash=h,
            base_url=None,
            attempts=len(records),
            judged_at=last.received_at,
        ),
    )


def _config(fields: Mapping[str, Any], fingerprint: Any) -> JudgeConfig:
    version = fields.get("template_version")
    if version != TEMPLATE_VERSION:
        raise _NotTaken(f"judged with prompt template {version!r}; this mcqaudit's is {TEMPLATE_VERSION!r}")
    try:
        config = JudgeConfig(
            model=str(fields["model"]),
            shape=str(fields["shape"]),
            temperature=float(fields["temperature"]),
            max_tokens=int(fields["max_tokens"]),
            seed=None if fields.get("seed") is None else int(fields["seed"]),
            rationale=bool(fields.get("rationale", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _NotTaken(f"the judge configuration cannot be read ({exc})") from None
    if config.fingerprint != fingerprint:
        raise _NotTaken(
            f"its judge configuration has fingerprint {config.fingerprint}, the score says {fingerprint}"
        )
    return config


def _reply(r: Mapping[str, Any], config: JudgeConfig, n_options: int, fp: str, h: str) -> ReplyRecord:
    text = r.get("reply")
    if text is not None and not isinstance(text, str):
        raise _NotTaken("a judge reply is not text")
    parsed = parse_reply(text, config.shape, n_options)
    value = r.get("value")
    # a legal reply reads the same; an illegal one stays illegal (cut off at max tokens: the scorer said so)
    if (value is not None and value != parsed.value) or (value is None and parsed.ok and not r.get("error")):
        raise _NotTaken(f"the reply {text!r} reads as {parsed.value}, the score says {value}")
    error = None if value is not None else str(r.get("error") or f"{parsed.kind}: {parsed.error}")
    return ReplyRecord(
        fingerprint=fp,
        prompt_hash=h,
        status=OK if value is not None else ERROR,
        reply=text,
        value=value,
        rationale=parsed.rationale if value is not None else None,
        error=error,
        base_url=None,
        tokens_in=_count(r.get("tokens_in")),
        tokens_out=_count(r.get("tokens_out")),
        received_at=_when(r.get("received_at")),
    )


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _when(v: Any) -> datetime:
    try:
        at = datetime.fromisoformat(str(v))
    except ValueError:
        raise _NotTaken(f"a reply's time {v!r} is not an ISO time") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}
