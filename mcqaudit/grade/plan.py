"""Planning a grade run: the rows that need the judge, rendered into requests (one per distinct prompt).

Rows that render to the same prompt share one request. ``dry_run`` is the plan shown, with nothing sent or
written.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcqaudit.grade.config import GradeOptions, check_arms
from mcqaudit.judge.client import JudgeRequest
from mcqaudit.judge.prompts import SYSTEM_PROMPT, JudgeConfig, prompt_hash, render
from mcqaudit.store import judging
from mcqaudit.store.db import Study
from mcqaudit.store.judging import TargetRow


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
        )
        h = prompt_hash(SYSTEM_PROMPT, user)
        if h not in groups:
            groups[h] = []
            requests.append(JudgeRequest(h, user, len(row.options)))
        groups[h].append(row)
    return Plan(groups, requests)


@dataclass(frozen=True)
class DryRun:
    """What `grade --dry-run` shows: one rendered prompt and the fingerprint; nothing is sent or written."""

    fingerprint: str
    fingerprint_payload: dict
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


def dry_plan(study: Study, options: GradeOptions) -> tuple[DryRun, Plan, set[str]]:
    """The dry run, with the plan it shows and the prompts the cache answers (for batch mode's dry run)."""
    options.validate()
    check_arms(study, options.arms)
    config = options.config
    targets, already_ok = judging.select_rows(study, config.fingerprint, options.arms, options.limit)
    p = plan_requests(config, targets)
    cached = judging.cached_replies(study, config.fingerprint, p.groups)
    counts = judging.resolution_counts(study, options.arms)
    shown = DryRun(
        fingerprint=config.fingerprint,
        fingerprint_payload=config.fingerprint_payload(),
        row_id=targets[0].row_id if targets else None,
        system=SYSTEM_PROMPT,
        # the first row's prompt is the first request's: requests are made in row order
        user=p.requests[0].user if p.requests else None,
        in_scope=counts.get("needs_judge", 0),
        already_ok=already_ok,
        targeted=len(targets),
        cached=sum(len(p.groups[h]) for h in cached),
        would_send=sum(1 for r in p.requests if r.prompt_hash not in cached),
    )
    return shown, p, set(cached)
