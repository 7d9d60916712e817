"""Spot-check queues without SQL: the strategies, the checks on a draw, and its allocation maths —
:func:`split_total` (a total over arms) and :func:`allocate` (an arm's share over strata) (docs/design.md
§6). The seeded draw itself (``md5(seed:row_id)`` order) and which rows each strategy draws from are SQL in
:mod:`mcqaudit.store.reviews`. Pure.

The strategies:

- ``uniform``: every row equally likely (the sample unbiased judge-agreement figures need);
- ``stratified``: a third each from parser disagreements, OTHER or ungraded rows, and the rest;
- ``judges_disagree``: every row on which the primary judge's and some panel judge's verdicts differ (both
  ``ok``) equally likely (``grade --panel``, docs/design.md §5);
- ``second_review``: every row that one person alone has reviewed equally likely (only ``of_reviewer``'s,
  only those of queue ``of_queue``, when given), for a second reviewer, blind to the first review. In such a
  queue a row counts as reviewed once two or more people have reviewed it (:data:`DONE_BY`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from mcqaudit.review.rules import ReviewError

UNIFORM: Final = "uniform"
STRATIFIED: Final = "stratified"
JUDGES_DISAGREE: Final = "judges_disagree"
SECOND_REVIEW: Final = "second_review"
STRATEGIES: Final = (UNIFORM, STRATIFIED, JUDGES_DISAGREE, SECOND_REVIEW)
# the strategies that draw every candidate row with the same chance (one stratum, ``all``)
EQUAL_CHANCE: Final = (UNIFORM, JUDGES_DISAGREE, SECOND_REVIEW)
# in a second_review queue a row is reviewed once this many people have reviewed it (latest reviews, none
# retracted); in every other queue, once it has an effective review
DONE_BY: Final = 2
# the strata of a stratified draw: a parser disagrees with the final verdict; the verdict is OTHER or there is
# none yet; the rest (the SQL that puts a row in one is store/reviews.py's _STRATUM). A uniform draw has one: all
STRATA: Final = ("disagreement", "other", "rest")
ALL: Final = "all"


@dataclass(frozen=True)
class SpotCheck:
    """A drawn queue. ``size`` is per arm when ``per_arm``, else the queue's total; ``strata`` is the number of
    rows drawn per arm and stratum (stratum ``all`` for a uniform draw), so each arm's share stays visible."""

    queue_id: int
    name: str
    strategy: str
    seed: int
    size: int
    arms: list[str]
    rows: int
    strata: dict[str, dict[str, int]] = field(default_factory=dict)
    per_arm: bool = True
    of_reviewer: str | None = None  # a second review's first reviewer, when the draw named one
    of_queue: int | None = None  # ... and the queue it drew from

    @property
    def by_arm(self) -> dict[str, int]:
        """Rows drawn per arm, in the order of ``arms``."""
        return {a: sum(self.strata.get(a, {}).values()) for a in self.arms}


def check_draw(
    strategy: str, size: int, per_arm: bool, of_reviewer: str | None = None, of_queue: int | None = None
) -> None:
    """Raise :class:`ReviewError` for a draw that cannot be made (unknown strategy, no rows asked for, a
    second review's options with another strategy)."""
    if strategy not in STRATEGIES:
        raise ReviewError(
            f"strategy must be {', '.join(STRATEGIES[:-1])} or {STRATEGIES[-1]}, not {strategy!r}"
        )
    if size < 1:
        raise ReviewError("a spot check needs at least one row" + (" per arm" if per_arm else ""))
    if strategy != SECOND_REVIEW and (of_reviewer is not None or of_queue is not None):
        what = "of_reviewer" if of_reviewer is not None else "of_queue"
        raise ReviewError(f"{what} goes with the {SECOND_REVIEW} strategy, not {strategy}")


def no_panel_judge() -> str:
    """Why a judges_disagree draw on a study without a panel judge draws nothing."""
    return (
        f"{JUDGES_DISAGREE}: the study has no panel judge, so no judges to disagree: grade it with another "
        "judge configuration and `mcqaudit grade --panel` first"
    )


def no_judge_disagreement(both_graded: int, arms: Sequence[str]) -> str:
    """Why a judges_disagree draw found no row (``both_graded``: rows of ``arms`` the primary and a panel
    judge both graded)."""
    where = f"arm{'s' if len(arms) != 1 else ''} {', '.join(arms)}"
    if both_graded == 0:
        return (
            f"{JUDGES_DISAGREE}: no row of {where} has verdicts from both the primary judge and a panel judge "
            "yet (run `mcqaudit grade --panel` to the end)"
        )
    return (
        f"{JUDGES_DISAGREE}: the primary and panel judges give the same verdict on every row of {where} they "
        f"both graded ({both_graded} rows): nothing to draw"
    )


def no_first_review(
    reviewers: Mapping[str, int], arms: Sequence[str], of_reviewer: str | None, of_queue: int | None
) -> str:
    """Why a second_review draw found no row: nobody (or not ``of_reviewer``) reviewed a row of ``arms`` (of
    queue ``of_queue``) alone. ``reviewers``: each reviewer's rows that they alone reviewed, study-wide."""
    who = f"by {of_reviewer!r} alone" if of_reviewer else "by one person alone"
    where = f"arm{'s' if len(arms) != 1 else ''} {', '.join(arms)}" + (
        f" in queue #{of_queue}" if of_queue is not None else ""
    )
    known = ", ".join(f"{name} ({n} rows)" for name, n in reviewers.items()) or "none yet"
    return f"{SECOND_REVIEW}: no row of {where} was reviewed {who}; reviewers with rows of their own: {known}"


def choose_arms(arms: Iterable[str] | None, known: Sequence[str]) -> list[str]:
    """The arms a draw covers: those named (first mention, in order), else every arm of the study."""
    chosen = list(dict.fromkeys(arms)) if arms else list(known)
    unknown = [a for a in chosen if a not in known]
    if unknown:
        raise ReviewError(f"unknown arm(s): {', '.join(unknown)}")
    if not chosen:
        raise ReviewError("the study has no rows to sample")
    return chosen


def queue_label(
    strategy: str,
    size: int,
    per_arm: bool,
    seed: int,
    of_reviewer: str | None = None,
    of_queue: int | None = None,
) -> str:
    """The default name of a queue, e.g. ``uniform 20 total seed 0``, ``second review of ann 10/arm seed 0``
    (a second review's name says whose rows it draws: the queue stores no more of its definition)."""
    kind = strategy
    if strategy == SECOND_REVIEW:
        of = " ".join(x for x in (of_reviewer, f"#{of_queue}" if of_queue is not None else None) if x)
        kind = "second review" + (f" of {of}" if of else "")
    return f"{kind} {size}/arm seed {seed}" if per_arm else f"{kind} {size} total seed {seed}"


def allocate(size: int, available: Mapping[str, int]) -> dict[str, int]:
    """Split ``size`` rows over the strata in equal shares, giving what a small stratum cannot use to the
    others (in the order of :data:`STRATA`)."""
    quota = dict.fromkeys(STRATA, 0)
    left = min(size, sum(available.get(s, 0) for s in STRATA))
    while left > 0:
        open_ = [s for s in STRATA if available.get(s, 0) > quota[s]]
        share, extra = divmod(left, len(open_))
        for k, s in enumerate(open_):
            take = min(share + (1 if k < extra else 0), available[s] - quota[s])
            quota[s] += take
            left -= take
    return quota


def split_total(size: int, available: Mapping[str, int], order: Sequence[str]) -> dict[str, int]:
    """Split a queue's total ``size`` over arms in proportion to their rows (largest remainder; ties go to the
    arm earlier in ``order``), never more than an arm has."""
    total = sum(available.get(a, 0) for a in order)
    size = min(size, total)
    if total == 0:
        return dict.fromkeys(order, 0)
    exact = {a: size * available.get(a, 0) / total for a in order}
    share = {a: int(exact[a]) for a in order}
    left = size - sum(share.values())
    by_remainder = sorted(order, key=lambda a: (-(exact[a] - share[a]), order.index(a)))
    for a in by_remainder[:left]:
        share[a] += 1
    return share


def arm_sizes(
    strategy: str,
    size: int,
    per_arm: bool,
    chosen: Sequence[str],
    available: Mapping[str, Mapping[str, int]],
    uniform_first: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Rows each arm gives a draw: ``size`` each (``per_arm``); of a total where every candidate has the same
    chance (:data:`EQUAL_CHANCE`), each arm's rows among the first ``size`` of the whole seeded draw
    (``uniform_first``, counted by the SQL that orders it: taking each arm's first k rows gives the same
    set); of a stratified total, :func:`split_total` by row counts."""
    if per_arm:
        return dict.fromkeys(chosen, size)
    if strategy in EQUAL_CHANCE:
        out = dict.fromkeys(chosen, 0)
        out.update(uniform_first or {})
        return out
    return split_total(size, {a: sum(available.get(a, {}).values()) for a in chosen}, chosen)


def quotas(
    strategy: str, sizes: Mapping[str, int], chosen: Sequence[str], available: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    """Rows to draw per arm and stratum: an arm's size over the strata (:func:`allocate`) for a stratified
    draw, else all from stratum ``all`` (never more than the arm has)."""
    out: dict[str, dict[str, int]] = {}
    for arm in chosen:
        a = available.get(arm, {})
        k = sizes[arm]
        out[arm] = allocate(k, a) if strategy == STRATIFIED else {ALL: min(k, a.get(ALL, 0))}
    return out
