"""A reasoning model's answer and its thinking, told apart (docs/design.md §3 "Answer and reasoning"). Pure.

Parsers and the judge read a row's *answer*: the generation without its reasoning. A row that carries a
``reasoning`` field has its generation as the answer, as it is. Otherwise a generation that opens with a
``<think>``, ``<thinking>`` or ``<reasoning>`` block (any case, after optional whitespace) has that block
split off as its reasoning (:func:`split_reasoning`). A row is *truncated* when its ``finish_reason`` is
``length`` (the token limit) or its opening block never closes (:func:`is_truncated`).

How a block ends:

- the block runs to its matching close tag, counting nested blocks of the same tag
  (``<think>a <think>b</think> c</think> B`` -> reasoning ``a <think>b</think> c``, answer ``B``);
- when the tags do not balance but a close tag exists, the block runs to the last one
  (``<think>a <think> b</think> B`` -> answer ``B``);
- blocks repeated at the start, one after another, are all reasoning, joined by a blank line;
- an opening block that never closes is reasoning to the end of the text: the answer is empty and the
  split says ``closed=False`` (the model was cut off while thinking, whatever ``finish_reason`` says).

Ingest (store/loading.py) runs the same split; ``REASONING_START`` is the RE2 pattern that picks the rows it
needs to look at, and :func:`finish_reason_sql` the SQL twin of :func:`normalise_finish_reason`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from mcqaudit.parsers import WS

TAGS = ("think", "thinking", "reasoning")
FINISH_LENGTH = "length"
FINISH_STOP = "stop"
# provider words for "the token limit": Inspect's stop_reason max_tokens (and model_length: the context
# window), read as length (docs/design.md §3)
_LENGTH_WORDS = frozenset({"length", "max_tokens", "model_length"})

# a generation that opens (after whitespace: what str.strip() removes) with one of the tags, in ASCII case:
# the rows the split must look at. The same pattern in Python (re) and DuckDB (RE2).
_TAG_ANY_CASE = "(?:" + "|".join("".join(f"[{c.upper()}{c}]" for c in t) for t in TAGS) + ")"
REASONING_START = f"^{WS}*<{_TAG_ANY_CASE}>"
_OPEN = re.compile(f"{WS}*<({'|'.join(TAGS)})>", re.IGNORECASE | re.ASCII)


class Split(NamedTuple):
    """A generation's answer and reasoning. ``reasoning`` is None when there is no block; ``closed`` is False
    when the opening block never closes (the answer is then empty)."""

    answer: str
    reasoning: str | None
    closed: bool


def _block_end(text: str, tag: str, start: int) -> tuple[int, int] | None:
    """(end of the reasoning, start of what follows the close tag) for a block of ``tag`` whose content starts
    at ``start``; None when no close tag follows."""
    depth = 1
    last: re.Match[str] | None = None
    for m in re.compile(f"<(/?){tag}>", re.IGNORECASE | re.ASCII).finditer(text, start):
        if not m.group(1):
            depth += 1
            continue
        depth -= 1
        last = m
        if depth == 0:
            return m.start(), m.end()
    if last is None:
        return None
    return last.start(), last.end()  # unbalanced: the last close tag ends the block


def split_reasoning(generation: str) -> Split:
    """The answer and reasoning of a generation without a ``reasoning`` field (see the module docstring)."""
    parts: list[str] = []
    pos = 0
    while (m := _OPEN.match(generation, pos)) is not None:
        tag = m.group(1).lower()
        end = _block_end(generation, tag, m.end())
        if end is None:
            parts.append(generation[m.end() :].strip())
            return Split("", "\n\n".join(parts), False)
        parts.append(generation[m.end() : end[0]].strip())
        pos = end[1]
    if not parts:
        return Split(generation, None, True)
    return Split(generation[pos:].strip(), "\n\n".join(parts), True)


def normalise_finish_reason(value: str | None) -> str | None:
    """A row's finish reason as stored: the token limit's words (``max_tokens``, ``model_length``, any case)
    read as ``length``; any other word kept as given, without outer whitespace; empty is none."""
    if value is None:
        return None
    word = value.strip()
    if not word:
        return None
    return FINISH_LENGTH if word.lower() in _LENGTH_WORDS else word


def finish_reason_sql(expr: str) -> str:
    """SQL twin of :func:`normalise_finish_reason` over a VARCHAR expression."""
    words = ", ".join(f"'{w}'" for w in sorted(_LENGTH_WORDS))
    stripped = f"regexp_replace({expr}, '^{WS}+|{WS}+$', '', 'g')"  # what str.strip() removes
    return f"CASE WHEN lower({stripped}) IN ({words}) THEN '{FINISH_LENGTH}' ELSE nullif({stripped}, '') END"


def is_truncated(finish_reason: str | None, closed: bool) -> bool:
    """Whether a row was cut off: the token limit stopped it, or its opening reasoning block never closes."""
    return normalise_finish_reason(finish_reason) == FINISH_LENGTH or not closed
