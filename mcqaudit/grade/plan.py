"""Planning a grade run: the rows that need the judge, rendered into requests (one per distinct prompt).

Rows that render to the same prompt share one request. :func:`select_work` is what every run (online,
batch, dry) sets out to do: the rows in scope, the plan, the prompts an earlier legal reply answers.
``dry_run`` is the plan shown, with nothing sent or written, and what sending it would cost
(:func:`estimate_cost`: the rendered messages of every request a run would send, counted at characters / 4).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from mcqaudit.bulk import paused_gc
from mcqaudit.grade.config import GradeOptions, GradeUsageError, check_arms
from mcqaudit.grade.records import cached_verdicts
from mcqaudit.judge.client import JudgeRequest
from mcqaudit.judge.prompts import SYSTEM_PROMPT, JudgeConfig, Renderer, prompt_hasher
from mcqaudit.store import judging
from mcqaudit.store.db import Study
from mcqaudit.store.judging import CachedReply, TargetRow, VerdictRecord


@dataclass(frozen=True)
class Plan:
    """``groups``: prompt hash → the rows that render to it; ``requests``: one a prompt, in row order."""

    groups: dict[str, list[TargetRow]]
    requests: list[JudgeRequest]


class Planner:
    """Renders rows into a :class:`Plan` a chunk at a time, in row order: the plan grows as it goes (the same
    plan, request for request, as rendering every row at once), so that a run can send its first requests
    before the last rows are rendered (:mod:`mcqaudit.grade.run`)."""

    def __init__(self, config: JudgeConfig, targets: list[TargetRow]):
        self.config = config
        self.plan = Plan({}, [])
        self._targets = targets
        self._next = 0  # the first row not rendered yet
        self._renderer = Renderer(config.shape, config.exemplars, config.rationale)
        self._digest = prompt_hasher(SYSTEM_PROMPT)  # (a run renders 64 rows at a time)

    @property
    def done(self) -> bool:
        return self._next >= len(self._targets)

    @property
    def rendered(self) -> int:
        """Rows rendered so far."""
        return self._next

    def render(self, n: int | None = None) -> list[tuple[str, TargetRow]]:
        """Render the next ``n`` rows (None: all that are left) into the plan; returns those that joined a
        prompt an earlier row already has (a request made before), with that prompt's hash."""
        config, groups, requests = self.config, self.plan.groups, self.plan.requests
        stop = len(self._targets) if n is None else min(len(self._targets), self._next + n)
        joined: list[tuple[str, TargetRow]] = []
        render, digest, gold, sees = self._renderer, self._digest, config.shape == "gold", config.sees_reasoning
        with paused_gc():
            for row in self._targets[self._next : stop]:
                user = render(
                    row.question,
                    row.options,
                    row.generation,
                    gold_letter=row.gold_letter if gold else None,
                    reasoning=row.reasoning if sees else None,
                )
                h = digest(user)
                group = groups.get(h)
                if group is None:
                    groups[h] = [row]
                    requests.append(JudgeRequest(h, user, len(row.options)))
                else:
                    group.append(row)
                    joined.append((h, row))
        self._next = stop
        return joined


# (stage, done, total): what a planning step has done, for a progress display (`grade --dry-run`)
PlanProgress = Callable[[str, int, int | None], None]
READING_ROWS: Final = "reading the rows that need the judge"
RENDERING: Final = "rendering prompts"
PROGRESS_CHUNK: Final = 20_000  # rows rendered between two progress reports


def plan_requests(config: JudgeConfig, targets: list[TargetRow], progress: PlanProgress | None = None) -> Plan:
    planner = Planner(config, targets)
    if progress is None:
        planner.render()
        return planner.plan
    progress(RENDERING, 0, len(targets))
    while not planner.done:
        planner.render(PROGRESS_CHUNK)
        progress(RENDERING, planner.rendered, len(targets))
    return planner.plan


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
    # Set when the plan is rendered as the run sends (:func:`streamed_work`): until ``planner.done``, ``plan``
    # holds the rows rendered so far.
    planner: Planner | None = None

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


@dataclass(frozen=True)
class Picked:
    """The rows a run targets, read from the study (:func:`pick_rows`): what :func:`plan_work` renders."""

    targets: list[TargetRow]
    already_ok: int
    in_scope: int
    standin: bool
    any_cached: bool  # the fingerprint has at least one legal reply stored (else no prompt can be cached)


def pick_rows(
    study: Study, config: JudgeConfig, arms: Sequence[str] = (), limit: int | None = None, *, panel: bool = False
) -> Picked:
    """The study's part of :func:`select_work`, its queries on one connection (nested in the caller's, when
    it holds one: the grade prelude opens the file once)."""
    fp = config.fingerprint
    with study.connect():
        targets, already_ok = judging.select_rows(study, fp, arms, limit, panel=panel)
        if panel:
            in_scope = judging.primary_graded_count(study, arms)
        elif limit is None:  # the rows that need the judge: those without an ok verdict and those with one
            in_scope = len(targets) + already_ok
        else:
            in_scope = judging.resolution_counts(study, arms).get("needs_judge", 0)
        standin = judging.is_standin(study, fp)
        any_cached = bool(targets) and judging.has_legal_replies(study, fp)
    return Picked(targets, already_ok, in_scope, standin, any_cached)


def plan_work(study: Study, config: JudgeConfig, picked: Picked, progress: PlanProgress | None = None) -> Work:
    """The picked rows rendered into requests, and the reply cache looked up (not at all when the
    fingerprint has no legal reply stored: then no prompt can be in it)."""
    planned = plan_requests(config, picked.targets, progress)
    cached = (
        judging.cached_replies(study, config.fingerprint, list(planned.groups)) if picked.any_cached else {}
    )
    return Work(picked.targets, picked.already_ok, picked.in_scope, picked.standin, planned, cached)


def streamed_work(config: JudgeConfig, picked: Picked) -> Work:
    """The picked rows with their plan still to render (:class:`Planner`), for an online run under a
    fingerprint with no legal reply stored: no prompt can be cached, so none need be rendered before the
    first request goes out."""
    planner = Planner(config, picked.targets)
    return Work(picked.targets, picked.already_ok, picked.in_scope, picked.standin, planner.plan, {}, planner)


def select_work(
    study: Study,
    config: JudgeConfig,
    arms: Sequence[str] = (),
    limit: int | None = None,
    *,
    panel: bool = False,
    progress: PlanProgress | None = None,
) -> Work:
    """The rows a run under ``config`` targets, planned into requests, with the reply cache looked up; a
    panel judge's (``panel``) are the rows the primary judge graded."""
    if progress is not None:
        progress(READING_ROWS, 0, None)
    return plan_work(study, config, pick_rows(study, config, arms, limit, panel=panel), progress)


# --- what a run would cost (docs/design.md §5 "Cost before and after") ----------------------------------------

# A token is about 4 characters of English text (OpenAI's rule of thumb). Measured on this project's judge
# prompts (the 800 sample-run rows, both shapes, with and without --rationale, short and long answers), the
# estimate is 1.05-1.18 times the count of OpenAI's own tokenizers (o200k_base, cl100k_base): about 10 %
# high. Text in Chinese, code or long digit strings is undercounted (up to 2-3 times for that text).
CHARS_PER_TOKEN: Final = 4
MESSAGE_TOKENS: Final = (
    3  # each chat message's wrapping (role, delimiters), as OpenAI's chat format counts it
)
REPLY_TOKENS: Final = 3  # the reply's priming (assistant role)
BATCH_DISCOUNT: Final = 0.5  # the Batch API's price: half the online price
TOKEN_COUNTING: Final = (
    "prompt tokens are the system and user message of every request a run would send, as rendered, at "
    f"characters / {CHARS_PER_TOKEN}, plus {MESSAGE_TOKENS} a message and {REPLY_TOKENS} a reply for the chat "
    "format; on English prompts this runs about 10 % above OpenAI's tokenizers (o200k_base, cl100k_base), and "
    "below them for code, long numbers and non-Latin scripts"
)
COMPLETION_ASSUMPTION: Final = (
    "completion tokens are an upper bound: --max-tokens for every request (a bare-letter reply is 1-3 tokens); "
    "a reasoning judge's hidden tokens count within that cap; a re-asked illegal reply comes on top"
)


def text_tokens(text: str) -> int:
    """The estimated tokens of one message text: characters / :data:`CHARS_PER_TOKEN`, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def request_tokens(system: str, user: str) -> int:
    """The estimated prompt tokens of one chat request: its two messages and the chat format's wrapping."""
    return text_tokens(system) + text_tokens(user) + 2 * MESSAGE_TOKENS + REPLY_TOKENS


@dataclass(frozen=True)
class Prices:
    """USD per million tokens: prompt (input) and completion (output)."""

    price_in: float
    price_out: float


def _price(flag: str, value: str) -> float:
    try:
        x = float(value.strip())
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and x > 0):
        raise GradeUsageError(
            f"{flag} {value!r}: not a price; give USD per million tokens as a positive number, e.g. 2.5"
        )
    return x


def parse_prices(price_in: str | None, price_out: str | None) -> Prices | None:
    """`--price-in` / `--price-out` as given: both or neither, each a positive finite number; a bad one is a
    :class:`GradeUsageError` (one line, exit 2)."""
    if price_in is None and price_out is None:
        return None
    if price_in is None or price_out is None:
        given, missing = ("--price-in", "--price-out") if price_out is None else ("--price-out", "--price-in")
        raise GradeUsageError(
            f"{given} needs {missing} too: the estimate prices prompt and completion tokens "
            "(USD per million tokens each)"
        )
    return Prices(_price("--price-in", price_in), _price("--price-out", price_out))


@dataclass(frozen=True)
class CostEstimate:
    """What the requests a run would send cost: estimated tokens, and with :class:`Prices` the cost in USD
    (with ``batch``, at the Batch API's :data:`BATCH_DISCOUNT`)."""

    requests: int
    prompt_tokens: int
    completion_tokens: int  # an upper bound: max_tokens a request
    max_tokens: int
    batch: bool = False
    prices: Prices | None = None

    @property
    def cost(self) -> float | None:
        if self.prices is None:
            return None
        full = (
            self.prompt_tokens * self.prices.price_in + self.completion_tokens * self.prices.price_out
        ) / 1e6
        return full * (BATCH_DISCOUNT if self.batch else 1.0)

    def to_json(self) -> dict[str, Any]:
        """The estimate's JSON keys (docs/design.md §5), then what it assumed."""
        p = self.prices
        cost = self.cost
        return {
            "requests": self.requests,
            "prompt_tokens_estimate": self.prompt_tokens,
            "completion_tokens_estimate": self.completion_tokens,
            "cost_estimate": None if cost is None else round(cost, 6),
            "price_in_per_million": None if p is None else p.price_in,
            "price_out_per_million": None if p is None else p.price_out,
            "batch": self.batch,
            "batch_discount": BATCH_DISCOUNT if self.batch else None,
            "token_counting": TOKEN_COUNTING,
            "completion_assumption": COMPLETION_ASSUMPTION,
        }


def estimate_cost(
    config: JudgeConfig,
    requests: Sequence[JudgeRequest],
    *,
    batch: bool = False,
    prices: Prices | None = None,
) -> CostEstimate:
    """The estimate for exactly ``requests`` (those a run would send: not the cached ones)."""
    max_tokens = config.max_tokens or 0
    return CostEstimate(
        requests=len(requests),
        prompt_tokens=sum(request_tokens(SYSTEM_PROMPT, r.user) for r in requests),
        completion_tokens=max_tokens * len(requests),
        max_tokens=max_tokens,
        batch=batch,
        prices=prices,
    )


@dataclass(frozen=True)
class DryRun:
    """What `grade --dry-run` shows: one rendered prompt and the fingerprint, and what the requests a run
    would send cost (``estimate``, online); nothing is sent or written."""

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
    estimate: CostEstimate

    def to_json(self) -> dict[str, Any]:
        """`grade --dry-run --json`: the estimate's keys first, then what the dry run shows."""
        return {
            **self.estimate.to_json(),
            "fingerprint": self.fingerprint,
            "rows_needing_judge": self.in_scope,
            "already_graded": self.already_ok,
            "targeted_rows": self.targeted,
            "cached_rows": self.cached,
            "row_id": self.row_id,
            "system": self.system,
            "user": self.user,
        }


def dry_run(
    study: Study, options: GradeOptions, prices: Prices | None = None, progress: PlanProgress | None = None
) -> DryRun:
    return dry_plan(study, options, prices, progress)[0]


def dry_plan(
    study: Study, options: GradeOptions, prices: Prices | None = None, progress: PlanProgress | None = None
) -> tuple[DryRun, Work]:
    """The dry run, with the work it shows (for batch mode's dry run); ``progress`` hears how far reading and
    rendering the rows has come (at 1 M rows it takes seconds)."""
    options.validate()
    check_arms(study, options.arms)
    config = options.config
    work = select_work(study, config, options.arms, options.limit, panel=options.panel, progress=progress)
    p, cached = work.plan, work.cached
    to_send = work.to_send()
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
        would_send=len(to_send),
        estimate=estimate_cost(config, to_send, prices=prices),
    )
    return shown, work
