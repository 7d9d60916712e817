"""Planning a grade run: the rows that need the judge, rendered into requests (one per distinct prompt).

Rows that render to the same prompt share one request. :func:`select_work` is what every run (online,
batch, dry) sets out to do: the rows in scope, the plan, the prompts an earlier legal reply answers.
``dry_run`` is the plan shown, with nothing sent or written.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mcqaudit.grade.config import GradeOptions, check_arms
from mcqaudit.grade.records import cached_verdicts
from mcqaudit.judge.client import JudgeRequest
from mcqaudit.judge.prompts import SYSTEM_PROMPT, JudgeConfig, prompt_hash, render
from mcqaudit.store import judging
from mcqaudit.store.db import Study
from mcqaudit.store.judging import CachedReply, TargetRow, VerdictRecord


@dataclass(frozen=True)
class Plan:
    """``groups``: prompt hash → the rows that render to it; ``requests``: one a prompt, in row order."""

    groups: dict[str, list[TargetRow]]
    requests: list[JudgeRequest]


def plan_requests(config: JudgeConfig, targets: list[TargetRow]) -> Plan:
    groups: dict[str, list[TargetRow]] = {}
    requests: list[JudgeRequest] = []
    for row in targets:
        user = render(
            config.shape,
            row.question,
            row.options,
            row.generation,
            gold_letter=row.gold_letter if config.shape == "gold" else None,
            exemplars=config.exemplars,
            rationale=config.rationale,
            reasoning=row.reasoning if config.sees_reasoning else None,
        )
        h = prompt_hash(SYSTEM_PROMPT, user)
        if h not in groups:
            groups[h] = []
            requests.append(JudgeRequest(h, user, len(row.options)))
        groups[h].append(row)
    return Plan(groups, requests)


@dataclass(frozen=True)
class Work:
    """What a run sets out to do under one fingerprint: the rows in scope without an ok verdict (``targets``,
    at most ``--limit``), how many are already ok and how many need a judge at all, whether the fingerprint
    is the stand-in's, the plan of requests, and the prompts an earlier legal reply answers (``cached``)."""

    targets: list[TargetRow]
    already_ok: int
    in_scope: int
    standin: bool
    plan: Plan
    cached: dict[str, CachedReply]

    def cache_verdicts(self, config: JudgeConfig, base_url: str | None, now: datetime) -> list[VerdictRecord]:
        """The verdicts of the rows whose prompt already got a legal reply: no request for them."""
        return [
            v
            for h, hit in self.cached.items()
            for v in cached_verdicts(hit, h, self.plan.groups[h], config, base_url, now)
        ]

    def to_send(self, skip: Collection[str] = ()) -> list[JudgeRequest]:
        """The requests still to send: neither cached nor (``skip``) in a batch still open."""
        return [
            r for r in self.plan.requests if r.prompt_hash not in self.cached and r.prompt_hash not in skip
        ]


def select_work(
    study: Study, config: JudgeConfig, arms: Sequence[str] = (), limit: int | None = None, *, panel: bool = False
) -> Work:
    """The rows a run under ``config`` targets, planned into requests, with the reply cache looked up; a
    panel judge's (``panel``) are the rows the primary judge graded."""
    fp = config.fingerprint
    targets, already_ok = judging.select_rows(study, fp, arms, limit, panel=panel)
    if panel:
        in_scope = judging.primary_graded_count(study, arms)
    else:
        in_scope = judging.resolution_counts(study, arms).get("needs_judge", 0)
    standin = judging.is_standin(study, fp)
    planned = plan_requests(config, targets)
    cached = judging.cached_replies(study, fp, list(planned.groups))
    return Work(targets, already_ok, in_scope, standin, planned, cached)


@dataclass(frozen=True)
class DryRun:
    """What `grade --dry-run` shows: one rendered prompt and the fingerprint; nothing is sent or written."""

    fingerprint: str
    fingerprint_payload: dict[str, Any]
    row_id: str | None
    system: str
    user: str | None
    in_scope: int
    already_ok: int
    targeted: int
    cached: int
    would_send: int


def dry_run(study: Study, options: GradeOptions) -> DryRun:
    return dry_plan(study, options)[0]


def dry_plan(study: Study, options: GradeOptions) -> tuple[DryRun, Work]:
    """The dry run, with the work it shows (for batch mode's dry run)."""
    options.validate()
    check_arms(study, options.arms)
    config = options.config
    work = select_work(study, config, options.arms, options.limit, panel=options.panel)
    p, cached = work.plan, work.cached
    shown = DryRun(
        fingerprint=config.fingerprint,
        fingerprint_payload=config.fingerprint_payload(),
        row_id=work.targets[0].row_id if work.targets else None,
        system=SYSTEM_PROMPT,
        # the first row's prompt is the first request's: requests are made in row order
        user=p.requests[0].user if p.requests else None,
        in_scope=work.in_scope,
        already_ok=work.already_ok,
        targeted=len(work.targets),
        cached=sum(len(p.groups[h]) for h in cached),
        would_send=sum(1 for r in p.requests if r.prompt_hash not in cached),
    )
    return shown, work
