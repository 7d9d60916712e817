"""What a reviewer's decision is recorded as: the one confirm-or-override rule (docs/design.md §8).

The dashboard's *Save override* (blind or not), the dashboard's and the CLI's API (``store.reviews.add_review``)
and a label file's records (``reviews import``) all call :func:`decision_action`, so the same decision is the
same kind of review whichever way it arrived. Pure: no I/O, no study.
"""

from __future__ import annotations

from typing import Final

from mcqaudit.vocab import CORRECT

CONFIRM: Final = "confirm"
OVERRIDE: Final = "override"


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
