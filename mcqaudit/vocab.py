"""The project's fixed vocabulary (docs/design.md §1): verdicts (and :class:`VerdictCode`, a verdict as the
metrics' frames carry it), judge statuses, verdict sources, parser names, the
stand-in judge's model name; and the Python twins of the rules the study file holds as SQL macros
(:mod:`mcqaudit.store.schema`, ``RULE_MACROS``): :func:`verdict_of` (``verdict_of(letter, gold)``) and
:func:`is_blank` (``is_blank(text)``). ``tests/test_rules.py`` checks each twin against the production SQL."""

from __future__ import annotations

from enum import IntEnum
from typing import Final, Literal

CORRECT: Final = "CORRECT"
INCORRECT: Final = "INCORRECT"
OTHER: Final = "OTHER"
VERDICTS: Final[tuple[str, str, str]] = (CORRECT, INCORRECT, OTHER)
Verdict = Literal["CORRECT", "INCORRECT", "OTHER"]
# which verdicts a report reads (docs/design.md §7): the final ones (reviews applied) or the judge's alone
VerdictView = Literal["final", "judge"]
VERDICT_VIEWS: tuple[VerdictView, ...] = ("final", "judge")


class VerdictCode(IntEnum):
    """A verdict as the metrics' frames carry it (:mod:`mcqaudit.store.frames` renders its SQL from this):
    the three verdicts in :data:`VERDICTS` order, and ``NONE`` for a row without one (ungraded, or pending;
    for a review column: not reviewed)."""

    NONE = -1
    CORRECT = 0
    INCORRECT = 1
    OTHER = 2

    @classmethod
    def of(cls, verdict: str | None) -> VerdictCode:
        """The code of a verdict name (``None``: :attr:`NONE`)."""
        return cls.NONE if verdict is None else cls[verdict]


# the codes of the three verdicts, in VERDICTS order (index k of a per-verdict axis is VERDICTS[k])
VERDICT_CODES: Final = (VerdictCode.CORRECT, VerdictCode.INCORRECT, VerdictCode.OTHER)

# judge_status values
SKIPPED: Final = "skipped"
PENDING: Final = "pending"
OK: Final = "ok"
ERROR: Final = "error"
JUDGE_STATUSES: Final = (SKIPPED, PENDING, OK, ERROR)

# verdict_source values
SOURCE_PREFILTER: Final = "prefilter"
SOURCE_RULE: Final = "rule"
SOURCE_JUDGE: Final = "judge"
SOURCE_REVIEW: Final = "review"

# parser names
PARSER_STRICT: Final = "strict"
PARSER_NAIVE: Final = "naive"
PARSER_USER: Final = "user"

# the stand-in judge's model name (docs/design.md §5): it serves only this model, and a reply naming it marks the
# fingerprint as a heuristic's, not an LLM's
STANDIN_MODEL: Final = "standin-heuristic"

MAX_OPTIONS: Final = 26
LETTERS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def letters(n: int) -> str:
    """The first ``n`` option letters."""
    if not 1 <= n <= MAX_OPTIONS:
        raise ValueError(f"an item has between 2 and {MAX_OPTIONS} options, not {n}")
    return LETTERS[:n]


# Exactly what Python's str.strip() removes (every character whose str.isspace() is true). Spelled out, not
# computed, because SQL needs it too (the ``is_blank`` macro, the parsers' RE2 patterns); a test checks it
# against every code point.
WHITESPACE: Final = (
    "\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def verdict_of(letter: str | None, gold: str) -> Verdict:
    """The verdict a picked letter implies: the gold letter → CORRECT, another → INCORRECT, none → OTHER.

    Twin of the SQL macro ``verdict_of(letter, gold)``."""
    if letter is None:
        return OTHER
    return CORRECT if letter == gold else INCORRECT


def is_blank(text: str) -> bool:
    """A blank generation (empty or whitespace only) is OTHER by rule and is never sent to a judge (docs/design.md §1).

    Blank means exactly what ``str.strip()`` removes. Twin of the SQL macro ``is_blank(text)``."""
    return not text.strip()
