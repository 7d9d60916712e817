"""What a reviewer's decision is recorded as: review legality and the one confirm-or-override rule
(docs/design.md §8).

The dashboard's *Save override* (blind or not), the dashboard's and the CLI's use case
(:func:`mcqaudit.app.reviews.add_review`) and a label file's records (``reviews import``) all call
:func:`decision_action`, so the same decision is the same kind of review whichever way it arrived; what a
verdict may pick is :func:`check_verdict`. Pure: no I/O, no study.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from mcqaudit.vocab import CORRECT, INCORRECT, LETTERS, VERDICTS, verdict_of

CONFIRM: Final = "confirm"
OVERRIDE: Final = "override"
RETRACT: Final = "retract"
ACTIONS: Final = (CONFIRM, OVERRIDE, RETRACT)


class ReviewError(ValueError):
    """A review that cannot be recorded (unknown row, illegal verdict or letter, nothing to confirm)."""


@dataclass(frozen=True)
class RowState:
    """What a review needs of the row it is about: its legal letters and its current verdict."""

    row_id: str
    gold_letter: str
    n_options: int
    final_verdict: str | None
    verdict_source: str | None
    picked_letter: str | None
    fingerprint: str | None


@dataclass(frozen=True)
class NewReview:
    """One review record to append (``reviews`` table): a confirm, an override or a retraction."""

    row_id: str
    action: str
    verdict: str | None
    picked_letter: str | None
    note: str | None
    reviewer: str
    created_at: datetime
    prior_verdict: str | None
    prior_source: str | None
    fingerprint: str | None
    retracts: int | None
    queue_id: int | None
    origin: str | None


@dataclass(frozen=True)
class Decision:
    """What a decision is recorded as: its action, and the verdict and picked letter it stores."""

    action: str
    verdict: str
    picked_letter: str | None


def decision_action(
    verdict: str | None, letter: str | None, current_verdict: str | None, current_letter: str | None
) -> str:
    """``confirm`` when the decision keeps the row's current final verdict *and* its picked letter, else
    ``override``.

    The letter counts: INCORRECT with letter C on a row that is INCORRECT with letter B changes what the
    row picks, so it is an override. A decision that names no letter keeps the row's letter (a confirm keeps
    it), and a CORRECT one always picks the gold letter, so for those the verdict alone decides. A row with
    no verdict yet (judge pending or failed) can only be overridden.
    """
    if current_verdict is None or verdict != current_verdict:
        return OVERRIDE
    if verdict == CORRECT or letter is None or letter == current_letter:
        return CONFIRM
    return OVERRIDE


def normal_letter(picked: str | None) -> str | None:
    """A picked letter as given (trimmed, upper case), None for none."""
    return (picked or "").strip().upper() or None


def check_verdict(
    verdict: str | None, picked: str | None, gold: str, n_options: int
) -> tuple[str, str | None]:
    """The (verdict, picked letter) a review stores; raises ReviewError when they contradict each other.

    A CORRECT review picks the gold letter (filled in when not given); INCORRECT may name the wrong letter
    it picked; OTHER picks none.
    """
    if verdict not in VERDICTS:
        raise ReviewError(f"verdict must be one of {', '.join(VERDICTS)}, not {verdict!r}")
    letter = normal_letter(picked)
    if letter is not None and (len(letter) != 1 or letter not in LETTERS[:n_options]):
        raise ReviewError(f"picked letter {picked!r} is not one of this row's letters {LETTERS[:n_options]}")
    if letter is not None and verdict_of(letter, gold) != verdict:  # the letter implies another verdict
        if verdict == CORRECT:
            raise ReviewError(f"a CORRECT verdict picks the gold letter {gold}, not {letter}")
        if verdict == INCORRECT:
            raise ReviewError(f"{letter} is the gold letter: the verdict would be CORRECT")
        raise ReviewError("an OTHER verdict picks no letter")
    if verdict == CORRECT:
        letter = gold
    return verdict, letter


def reviewer_name(name: str | None) -> str:
    """The reviewer a review records (trimmed); a review needs one."""
    n = (name or "").strip()
    if not n:
        raise ReviewError("a review needs a reviewer name")
    return n


def decide(action: str, verdict: str | None, picked_letter: str | None, row: RowState) -> Decision:
    """What a save (``action`` confirm or override) of ``row`` as it is now records.

    ``confirm`` keeps the current final verdict (and its picked letter); ``override`` sets ``verdict`` with
    an optional picked letter, and is recorded as the confirm it is when it keeps the row's verdict and
    letter (:func:`decision_action`). Raises :class:`ReviewError` for an illegal decision.
    """
    if action not in (CONFIRM, OVERRIDE):
        raise ReviewError(f"action must be confirm or override, not {action!r}")
    if action == OVERRIDE:
        verdict, _ = check_verdict(verdict, picked_letter, row.gold_letter, row.n_options)
        picked_letter = normal_letter(picked_letter)
        action = decision_action(verdict, picked_letter, row.final_verdict, row.picked_letter)
    if action == CONFIRM:
        if row.final_verdict is None:
            raise ReviewError("this row has no verdict yet (judge pending or failed): override it instead")
        if verdict not in (None, row.final_verdict):
            raise ReviewError(f"confirm keeps the verdict {row.final_verdict}; use override for {verdict}")
        verdict = row.final_verdict
        if picked_letter is None:
            picked_letter = row.picked_letter
    checked, letter = check_verdict(verdict, picked_letter, row.gold_letter, row.n_options)
    return Decision(action, checked, letter)


def label_decision(verdict: str, letter: str | None, given_letter: str | None, row: RowState) -> Decision:
    """What a label (a checked ``verdict`` and ``letter``; ``given_letter`` as the file named it) of ``row``
    as it is now records: a confirm when it keeps the row's verdict and letter (:func:`decision_action`),
    keeping the row's letter when it named none; else an override."""
    action = decision_action(verdict, given_letter, row.final_verdict, row.picked_letter)
    if action == CONFIRM and given_letter is None and verdict != CORRECT:
        letter = row.picked_letter
    return Decision(action, verdict, letter)
