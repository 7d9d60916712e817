"""Reading a judge's reply (docs/design.md §5): exactly one legal value, or an error with the reason. Pure.

A legal reply is one legal value (case-insensitive), optionally wrapped in whitespace, quotes, ``*``,
brackets and a trailing period, or a JSON object ``{"choice": …}`` / ``{"verdict": …}`` (optionally with a
``"rationale"`` string beside it). Anything else — two values, prose, empty, a letter out of range, a
letter in the gold shape, a verdict word in the extract shape — is an error: the raw reply is kept and no
verdict is made from it. Nothing is coerced.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Final

from mcqaudit.judge.prompts import legal_values
from mcqaudit.vocab import CORRECT, INCORRECT, LETTERS, OTHER, verdict_of

# Error kinds (also used in the run summary's "errors by kind").
EMPTY: Final = "empty"
OUT_OF_RANGE: Final = "out_of_range"
WRONG_SHAPE: Final = "wrong_shape"
SEVERAL: Final = "several_values"
PROSE: Final = "prose"
BAD_JSON: Final = "bad_json"
ILLEGAL_KINDS: Final = (EMPTY, OUT_OF_RANGE, WRONG_SHAPE, SEVERAL, PROSE, BAD_JSON)
# An illegal reply that the endpoint says it cut off at max tokens (finish_reason "length"). The text alone
# cannot tell, so the client sets it (see :func:`cut_off`); like the kinds above, a reply text exists.
TRUNCATED: Final = "truncated"
REPLY_ERROR_KINDS: Final = (*ILLEGAL_KINDS, TRUNCATED)

# Wrappers a bare value may carry: quotes (straight, typographic, backtick), emphasis, brackets.
_WRAP = "\"'`*“”‘’()[]{}<>"
_BARE = re.compile(
    r"^[\s"
    + re.escape(_WRAP)
    + r"]*(?P<core>[A-Za-z]+)[\s"
    + re.escape(_WRAP)
    + r"]*\.?[\s"
    + re.escape(_WRAP)
    + r"]*$"
)
_WORDS = re.compile(r"[A-Za-z]+")
_JSON_KEYS: Final = ("choice", "verdict")


@dataclass(frozen=True)
class ParsedReply:
    """The outcome of reading one reply: ``value`` is the legal value, or None with ``error``/``kind``."""

    value: str | None
    kind: str | None = None
    error: str | None = None
    rationale: str | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


def _fail(kind: str, error: str) -> ParsedReply:
    return ParsedReply(value=None, kind=kind, error=error)


def _classify_word(word: str, shape: str, n_options: int) -> ParsedReply:
    """One bare word: legal value, or the precise reason it is not one."""
    up = word.upper()
    legal = legal_values(shape, n_options)
    if up in legal:
        return ParsedReply(value=up)
    if len(up) == 1:
        if shape == "gold":
            return _fail(
                WRONG_SHAPE, f"a letter ({up}) in the gold shape, which takes CORRECT/INCORRECT/OTHER"
            )
        return _fail(OUT_OF_RANGE, f"letter {up} is out of range {LETTERS[0]}–{LETTERS[n_options - 1]}")
    if shape == "extract" and up in (CORRECT, INCORRECT):
        return _fail(
            WRONG_SHAPE, f"a verdict word ({up}) in the extract shape, which takes a letter or OTHER"
        )
    return _fail(PROSE, f"{word!r} is not one of {', '.join(legal)}")


def _parse_bare(text: str, shape: str, n_options: int) -> ParsedReply:
    if not text.strip():
        return _fail(EMPTY, "empty reply")
    m = _BARE.match(text)
    if m:
        return _classify_word(m.group("core"), shape, n_options)
    # Not a single wrapped word. Say "several values" when more than one legal value is named, since
    # that is the case a lenient parser would silently resolve to the first one.
    legal = set(legal_values(shape, n_options))
    named = [w.upper() for w in _WORDS.findall(text) if w.upper() in legal and (len(w) > 1 or w.isupper())]
    if len(set(named)) > 1:
        return _fail(SEVERAL, f"several values named ({', '.join(dict.fromkeys(named))})")
    return _fail(PROSE, "not a single legal value")


def _parse_json(text: str, shape: str, n_options: int) -> ParsedReply:
    try:
        obj = json.loads(text)
    except ValueError:
        return _fail(BAD_JSON, "looks like JSON but does not parse")
    except RecursionError:  # nested deeper than the decoder's stack: no reply we asked for looks like that
        return _fail(BAD_JSON, "JSON nested too deeply")
    if not isinstance(obj, dict):
        return _fail(BAD_JSON, "JSON reply is not an object")
    keys = [k for k in _JSON_KEYS if k in obj]
    extra = sorted(set(obj) - {*_JSON_KEYS, "rationale"})
    if len(keys) != 1:
        return _fail(BAD_JSON, 'a JSON reply needs exactly one of "choice" or "verdict"')
    if extra:
        return _fail(BAD_JSON, f"unexpected JSON keys: {', '.join(extra)}")
    value = obj[keys[0]]
    if not isinstance(value, str):
        return _fail(BAD_JSON, f'"{keys[0]}" is not a string')
    rationale = obj.get("rationale")
    if rationale is not None and not isinstance(rationale, str):
        return _fail(BAD_JSON, '"rationale" is not a string')
    parsed = _parse_bare(value, shape, n_options)
    if not parsed.ok:
        return parsed
    return ParsedReply(value=parsed.value, rationale=rationale or None)


def parse_reply(reply: str | None, shape: str, n_options: int) -> ParsedReply:
    """Read one judge reply for a row with ``n_options`` options under the given prompt shape."""
    if reply is None:
        return _fail(EMPTY, "no reply text")
    text = reply.strip()
    if text.startswith("{") and text.endswith("}"):
        return _parse_json(text, shape, n_options)
    return _parse_bare(text, shape, n_options)


def cut_off(parsed: ParsedReply, max_tokens: int) -> ParsedReply:
    """An illegal reply that stopped at the token limit: say so, since raising max tokens is the cure.

    A legal reply stays legal even when the limit was reached: its text is complete (a JSON object is
    closed, a bare value is whole) and that text is all a verdict is read from.
    """
    if parsed.ok:
        return parsed
    return _fail(TRUNCATED, f"cut off at max tokens ({max_tokens}) and then illegal: {parsed.error}")


def judged(shape: str, value: str, gold_letter: str) -> tuple[str | None, str]:
    """(judge letter, verdict) for a legal value. Extract: the letter is compared with gold here, in code."""
    if shape == "gold":
        return None, value
    if value == OTHER:
        return None, OTHER
    return value, verdict_of(value, gold_letter)
