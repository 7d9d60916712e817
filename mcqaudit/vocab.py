"""The project's fixed vocabulary (DESIGN.md §1): verdicts, judge statuses, verdict sources, parser names, the
stand-in judge's model name."""

from __future__ import annotations

from typing import Final, Literal

CORRECT: Final = "CORRECT"
INCORRECT: Final = "INCORRECT"
OTHER: Final = "OTHER"
VERDICTS: Final[tuple[str, str, str]] = (CORRECT, INCORRECT, OTHER)
Verdict = Literal["CORRECT", "INCORRECT", "OTHER"]

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

# the stand-in judge's model name (DESIGN §5): it serves only this model, and a reply naming it marks the
# fingerprint as a heuristic's, not an LLM's
STANDIN_MODEL: Final = "standin-heuristic"

MAX_OPTIONS: Final = 26
LETTERS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def letters(n: int) -> str:
    """The first ``n`` option letters."""
    if not 1 <= n <= MAX_OPTIONS:
        raise ValueError(f"an item has between 2 and {MAX_OPTIONS} options, not {n}")
    return LETTERS[:n]


def verdict_for(picked: str | None, gold: str) -> str:
    """CORRECT/INCORRECT for a picked letter; OTHER when nothing single was picked."""
    if picked is None:
        return OTHER
    return CORRECT if picked == gold else INCORRECT
