"""Parsers: everything that reads an option letter out of a generation (docs/design.md §4). Pure: no I/O.

- :func:`strict`, mcqaudit's pre-filter: resolves a row only when the whole generation is the answer and
  nothing else, and defers (``None``) otherwise. It never returns a wrong letter and never yields OTHER.
- :func:`naive`, the ``[A-D]``-style first match, kept only to show how such a regex fabricates results.
- :data:`FRAMEWORK_PARSERS`, known frameworks' published patterns, so a user can see what their
  framework's number would have been.

``naive`` and the framework parsers are also run in SQL by ingest (DuckDB ``regexp_extract``, i.e. RE2), so
their patterns avoid what RE2 lacks (lookaround, backreferences) and what the two engines read
differently:

- no ``(?i)``: RE2 folds U+212A KELVIN SIGN into ``k`` and U+017F LONG S into ``s``, Python also folds
  U+0130/U+0131 into ``i``; case-insensitivity is spelled out as ``[Aa]`` instead;
- no ``\\s``: RE2's is ASCII only; :data:`WS` spells out the set Python's ``\\s`` matches;
- no ``$``: Python's also matches before a final newline, RE2's does not; patterns use RE2's ``\\z``
  (end of text), which :func:`python_pattern` turns into Python's ``\\Z``;
- ``\\b`` is ASCII in RE2, so the Python side compiles with ``re.ASCII``.

The SQL is built in one place, ``mcqaudit.store.loading`` (``naive_letter_sql``, ``framework_letters_sql``),
and ``tests/test_parsers.py`` runs those builders against these functions. Its semantics: for each pattern
in order take ``regexp_extract(generation, pattern, 1)``; the first non-empty one, upper-cased, is the
letter; it counts only when it is one of the first ``n_options`` letters, else the parser returns None
(it does not fall through to the next pattern).

``strict`` runs in SQL at ingest as well (``mcqaudit.store.strict_sql``, its patterns spelled for RE2 in
:data:`STRICT_RE2`), exactly where its case fold can be reproduced there; Python's ``strict`` decides the other
rows and stays the reference (``tests/test_strict_sql.py``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from mcqaudit.vocab import LETTERS, MAX_OPTIONS, WHITESPACE

__all__ = [
    "FRAMEWORK_PARSERS",
    "STRICT_MAX_EXTRA",
    "STRICT_RE2",
    "WS",
    "FrameworkParser",
    "Span",
    "StrictRE2",
    "letter_spans",
    "naive",
    "naive_pattern",
    "naive_span",
    "python_pattern",
    "strict",
]

# ---------------------------------------------------------------------------------------------------------
# shared regex pieces (RE2 and Python alike)

# Exactly the characters Python's Unicode ``\s`` matches (vocab.WHITESPACE); those below U+0100 as ``\xHH``
# escapes both engines read, the others as literal characters (RE2 has no ``\u``, Python has no ``\x{...}``).
_WS_BODY = "".join(f"\\x{ord(c):02x}" if ord(c) < 0x100 else c for c in WHITESPACE)
WS = f"[{_WS_BODY}]"
_NOT_WS = f"[^{_WS_BODY}]"
_END = r"\z"  # end of text; see python_pattern
_PY_END = r"\n?\z"  # what Python's ``$`` (without MULTILINE) means: end, or before a final newline


def python_pattern(pattern: str) -> str:
    """The Python ``re`` spelling of one of this module's RE2 patterns (``\\z`` becomes ``\\Z``)."""
    return pattern.replace(r"\z", r"\Z")


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(python_pattern(pattern), re.ASCII)


def _legal(letter: str, n_options: int) -> str | None:
    letter = letter.upper()
    return letter if len(letter) == 1 and letter in LETTERS[:n_options] else None


def _in_range(n_options: object) -> bool:
    return isinstance(n_options, int) and 1 <= n_options <= MAX_OPTIONS


# ---------------------------------------------------------------------------------------------------------
# naive


def naive_pattern(n_options: int) -> str:
    """The regex :func:`naive` uses: any one of the first ``n_options`` letters, either case.

    One capture group around the whole match, so group 0 and group 1 are the same letter. Spelled
    ``[A-Da-d]`` rather than ``(?i)[A-D]`` so that RE2 and Python agree (see the module docstring).
    """
    if not _in_range(n_options):
        raise ValueError(f"an item has between 1 and {MAX_OPTIONS} options, not {n_options!r}")
    last = LETTERS[n_options - 1]
    return f"([A-{last}a-{last.lower()}])"


def naive(generation: str, n_options: int) -> str | None:
    """First letter in the option range anywhere in the text, case-insensitive ("At the garden…" → A)."""
    found = naive_span(generation, n_options)
    return generation[found[0] : found[1]].upper() if found else None


Span = tuple[int, int]  # [start, end) of the characters a parser took its letter from


def naive_span(generation: str, n_options: int) -> Span | None:
    """Where in the text :func:`naive` took its letter (None when it found none)."""
    if not _in_range(n_options):
        return None
    m = _compiled(naive_pattern(n_options)).search(generation)
    return m.span(1) if m else None


# ---------------------------------------------------------------------------------------------------------
# framework parsers


@dataclass(frozen=True)
class FrameworkParser:
    """A framework's published answer-extraction regex chain, re-expressed for RE2 and Python.

    ``patterns`` are tried in order; the first one that matches (with a non-empty group 1) wins, and its
    group 1, upper-cased, is the letter, or None when that letter is outside the option range.
    """

    name: str
    source: str
    patterns: tuple[str, ...]

    def parse(self, generation: str, n_options: int) -> str | None:
        found = self.match(generation, n_options)
        return None if found is None else found[0]

    def span(self, generation: str, n_options: int) -> Span | None:
        """Where in the text the winning pattern took its letter (None when it gave no legal letter)."""
        found = self.match(generation, n_options)
        return None if found is None or found[0] is None else found[1]

    def match(self, generation: str, n_options: int) -> tuple[str | None, Span] | None:
        """(letter or None when out of range, the span of group 1) of the first pattern that matches."""
        if not _in_range(n_options):
            return None
        for pattern in self.patterns:
            m = _compiled(pattern).search(generation)
            # a group that did not take part reads as '' in DuckDB, which moves on to the next pattern
            if m and m.group(1):
                return _legal(m.group(1), n_options), m.span(1)
        return None


def letter_spans(generation: str, n_options: int) -> dict[str, tuple[str, Span]]:
    """parser name → (letter, span) for every parser whose letter can be located in the text: ``naive``
    and the framework parsers (``strict`` takes the whole text; the user's own parser gives no span)."""
    out: dict[str, tuple[str, Span]] = {}
    found = naive_span(generation, n_options)
    if found:
        out["naive"] = (generation[found[0] : found[1]].upper(), found)
    for name, parser in FRAMEWORK_PARSERS.items():
        hit = parser.match(generation, n_options)
        if hit is not None and hit[0] is not None:
            out[name] = (hit[0], hit[1])
    return out


def _ci(word: str) -> str:
    """Case-insensitive literal without ``(?i)``: ``Answer`` → ``[Aa][Nn][Ss][Ww][Ee][Rr]``."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)


# OpenAI simple-evals: ANSWER_PATTERN_MULTICHOICE = r"(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?", applied with
# re.search (first match) in gpqa_eval.py. Documented failures: the first "Answer:" wins over a later
# correction; (?i) makes "Answer: a bit…" an A; "**Answer:** B" and "The answer is B" find nothing.
_SIMPLE_EVALS = FrameworkParser(
    name="simple_evals",
    source=(
        "https://github.com/openai/simple-evals/blob/main/common.py "
        "(ANSWER_PATTERN_MULTICHOICE, used with re.search in gpqa_eval.py)"
    ),
    patterns=(_ci("answer") + r"[ \t]*:[ \t]*\$?([A-Da-d])\$?",),
)

# lm-evaluation-harness, flexible-extract of the GPQA/MMLU CoT zero-shot tasks: MultiChoiceRegexFilter with
# regex_pattern "(\([A-Z]\))", group_select -1 (the LAST match), then its fallbacks. The option-text fallback
# needs the item's option texts and cannot be a fixed pattern, so it is left out (this parser returns None
# where lm-eval would match an option's text); the ":\s*(A|B|C|D)" fallback also takes the last match
# (group_select applies to it too) and is fixed to four choices, as in GPQA. Greedy "(?s).*" before the
# group gives the last match. Documented failure: the last parenthesised letter wins, even one the model
# mentions after its answer ("The answer is (B); (C) would be wrong" → C).
_LM_EVAL_FLEXIBLE = FrameworkParser(
    name="lm_eval_flexible",
    source=(
        "https://github.com/EleutherAI/lm-evaluation-harness/blob/main/lm_eval/filters/extraction.py "
        "(MultiChoiceRegexFilter) with lm_eval/tasks/gpqa/cot_zeroshot/_gpqa_cot_zeroshot_yaml "
        '(flexible-extract: regex_pattern "(\\([A-Z]\\))", group_select -1)'
    ),
    patterns=(
        r"(?s).*\(([A-Z])\)",
        rf"(?s).*:{WS}*([A-D])",
    ),
)


def opencompass_line_pattern(option_class: str) -> str:
    """OpenCompass's "1." line pattern (an option letter of ``option_class`` on the last line after a ``1``):
    one of :func:`_opencompass_patterns`, and the one ingest reads a one-line text's group of without RE2's
    extraction (store/loading.py `_one_line_first_sql`)."""
    return rf"1(?:[^\n]{WS}?[^\n]*?)?({option_class})[^\n]*{_PY_END}"


def opencompass_standalone_patterns(option_class: str) -> tuple[str, str]:
    """OpenCompass's two standalone-letter patterns, in their order (one of :func:`_opencompass_patterns`): an
    option letter after whitespace or at the start, then whitespace or punctuation; then whitespace or the end.
    Where the first finds nothing, the second can match only at the very end (its whitespace case is the
    first's): ingest reads it there alone (store/loading.py `_first_match_sql`)."""
    return (
        rf"(?:{WS}|^)({option_class})[{_WS_BODY}。，,：:\.$]",
        rf"(?:{WS}|^)({option_class})(?:{WS}|{_END})",
    )


def _opencompass_patterns(options: str) -> tuple[str, ...]:
    """OpenCompass ``first_option_postprocess(text, options)`` in capture-group form.

    Same patterns, same order. Differences, all where one match holds no or several option letters:
    OpenCompass returns the alphabetically first option letter contained in the whole match (group 0),
    and moves on when the first match holds none; here group 1 is the letter the pattern is about.
    """
    o = f"[{options}]"
    s, ns = WS, _NOT_WS
    end = _PY_END
    ws_or = _WS_BODY  # for classes that add punctuation to \s
    return (
        rf"答案是?{s}?({o})",
        rf"答案是?{s}?：({o})",
        rf"答案是?{s}?:({o})",
        rf"答案应该?是{s}?({o})",
        rf"答案应该?选{s}?({o})",
        rf"答案为{s}?({o})",
        rf"答案选{s}?({o})",
        rf"选择?{s}?({o})",
        rf"只有选?项?{s}?({o}){s}?是?对",
        rf"只有选?项?{s}?({o}){s}?是?错",
        rf"只有选?项?{s}?({o}){s}?不?正确",
        rf"只有选?项?{s}?({o}){s}?错误",
        rf"说法不?对选?项?的?是{s}?({o})",
        rf"说法不?正确选?项?的?是{s}?({o})",
        rf"说法错误选?项?的?是{s}?({o})",
        rf"({o}){s}?是正确的",
        rf"({o}){s}?是正确答案",
        rf"选项{s}?({o}){s}?正确",
        rf"所以答{s}?({o})",
        rf"1.{s}?({o})[.。$]?{end}",
        rf"所以{s}?({o})[.。$]?{end}",
        rf"所有{s}?({o})[.。$]?{end}",
        rf"[{ws_or}，：:,]({o})[。，,\.]?{end}",
        rf"[{ws_or}，,：:][故即]({o})[。\.]?{end}",
        rf"[{ws_or}，,：:]因此({o})[。\.]?{end}",
        rf"[是为。]{s}?({o})[。\.]?{end}",
        rf"因此{s}?({o})[。\.]?{end}",
        rf"显然{s}?({o})[。\.]?{end}",
        rf"答案是{s}?{ns}*?({o}){ns}*?(?:。|{end})",
        rf"答案应该是{s}?{ns}*?({o}){ns}*?(?:。|{end})",
        rf"答案为{s}?{ns}*?({o}){ns}*?(?:。|{end})",
        rf"[Tt]he answer is ({o})",
        rf"[Tt]he answer is option ({o})",
        rf"[Tt]he correct answer is ({o})",
        rf"[Tt]he correct answer is option ({o})",
        rf"[Tt]he answer to the question is ({o})",
        rf"^选项{s}?({o})",
        rf"^({o}){s}?选?项",
        *opencompass_standalone_patterns(o),
        opencompass_line_pattern(o),
        # "cushion" patterns, on by default: any option letter followed by a colon, then any option letter
        rf"({o}):",
        rf"({o})",
    )


# OpenCompass first_option_postprocess, with options="ABCD" as in its MMLU configs. Case-sensitive.
# Documented failure: the cushion fallback takes the first capital option letter anywhere ("At first…" → A),
# and the standalone-letter patterns take the first one mentioned, not the one picked.
_OPENCOMPASS = FrameworkParser(
    name="opencompass_first_option",
    source=(
        "https://github.com/open-compass/opencompass/blob/main/opencompass/utils/text_postprocessors.py "
        "(first_option_postprocess, options='ABCD', cushion=True)"
    ),
    patterns=_opencompass_patterns("ABCD"),
)

# MMLU-Pro evaluate_from_api.py / compute_accuracy.py: extract_answer r"answer is \(?([A-J])\)?", then
# extract_again r".*[aA]nswer:\s*([A-J])", then extract_final r"\b[A-J]\b(?!.*\b[A-J]\b)" (DOTALL), the last
# standalone letter; the lookahead is re-expressed as a greedy "(?s).*" before the group. \b is ASCII here
# (Python's is Unicode: MMLU-Pro finds no letter in "答案是B", this finds B). Documented failures: "answer is"
# inside reasoning ("the answer is not (A)…" → A), the first "Answer:" line wins, and the fallback reads
# the pronoun "I" (or any capital A–J word) as a pick.
_MMLU_PRO = FrameworkParser(
    name="mmlu_pro_chain",
    source=(
        "https://github.com/TIGER-AI-Lab/MMLU-Pro/blob/main/evaluate_from_api.py "
        "(extract_answer → extract_again → extract_final)"
    ),
    # Rooted where a match can start (the same matches and groups: a greedy ``.*`` absorbs any prefix on
    # its line, and ``(?s).*`` any prefix at all), so Python's backtracking search is not quadratic on a
    # long generation (39,000 characters of "The answer is" took 31 s in letter_spans before).
    patterns=(
        r"answer is \(?([A-J])\)?",
        rf"(?m)^.*[aA]nswer:{WS}*([A-J])",
        r"(?s)\A.*\b([A-J])\b",
    ),
)

FRAMEWORK_PARSERS: dict[str, FrameworkParser] = {
    p.name: p for p in (_SIMPLE_EVALS, _LM_EVAL_FLEXIBLE, _OPENCOMPASS, _MMLU_PRO)
}


# ---------------------------------------------------------------------------------------------------------
# strict

# Longest lead-in + wrappers + separators the grammar below accepts, beyond the option text, with slack.
# strict refuses anything longer up front, so the bound is true by construction (ingest pre-selects on it).
STRICT_MAX_EXTRA: int = 48

# Short affirmative lead-ins, case-insensitive; markdown emphasis and a colon allowed around them.
_LEAD_IN = re.compile(
    r"""^[*\#\s]*
    (?:
        (?:the\s+)?(?:(?:correct|final|right|best)\s+)?answer\b(?:[*\s]*\bis\b)?
      | my\s+(?:final\s+)?answer\s+is\b
      | i\s+choose\b
    )
    [*\s]*:?[*\s]*""",
    re.IGNORECASE | re.ASCII | re.VERBOSE,
)
# Optional "option"/"choice" word, wrappers, then the letter.
_HEAD = re.compile(
    r"^[\s*(\[]*(?:(?:option|choice)\b[\s*(\[:]*)?(?P<letter>[A-Za-z])(?P<rest>.*)\Z",
    re.IGNORECASE | re.ASCII | re.DOTALL,
)
# What may follow the letter when nothing else does: closers and a trailing . ) :
_TRAIL_ONLY = re.compile(r"^[\s*)\].:]*\Z")
# What may follow the letter before its own option text: closers, one . : ) or dash, emphasis, and always
# whitespace, so that a separator never eats the text's own sign or point ("B) -5", "B. .5").
_SEP = re.compile(r"^(?P<sep>[*)\]]*[ \t]*(?P<punct>[.:)\-\u2013\u2014])?[*]*\s+)(?P<text>\S.*)\Z", re.DOTALL)

_EDGE_BOTH = "*_`\"'\u201c\u201d\u2018\u2019\u00ab\u00bb()[] "
_EDGE_TRAIL = ".,;:!?\u3002"


@dataclass(frozen=True)
class StrictRE2:
    """strict's rules spelled for RE2, for its SQL twin (``mcqaudit.store.strict_sql``, which ingest runs;
    ``tests/test_strict_sql.py`` holds the two to the same letters). Each pattern means what its Python
    original above means: ``re.ASCII``'s ``\\s`` spelled out (RE2's lacks ``\\v``), Python's Unicode ``\\s`` as
    :data:`WS`, ``re.IGNORECASE`` (ASCII) as ``[Aa]`` classes, ``\\Z`` as ``\\z``."""

    lead_in: str  # _LEAD_IN, anchored at the start; its match is the lead-in
    head: str  # _HEAD: group 1 the letter, group 2 the rest
    trail_only: str  # _TRAIL_ONLY, for a full match
    sep: str  # _SEP: group 1 sep, group 2 punct ('' where Python's is None), group 3 text
    edge_both: str  # the characters _norm strips from both ends
    edge_trail: str  # and those it strips from the end only


_AWS = r"[\t\n\x0b\x0c\r ]"  # what ``\s`` matches under re.ASCII
_AWS_IN = r"\t\n\x0b\x0c\r "  # the same, inside a class
STRICT_RE2 = StrictRE2(
    lead_in=(
        rf"^[*#{_AWS_IN}]*(?:"
        rf"(?:{_ci('the')}{_AWS}+)?(?:(?:{_ci('correct')}|{_ci('final')}|{_ci('right')}|{_ci('best')}){_AWS}+)?"
        rf"{_ci('answer')}\b(?:[*{_AWS_IN}]*\b{_ci('is')}\b)?"
        rf"|{_ci('my')}{_AWS}+(?:{_ci('final')}{_AWS}+)?{_ci('answer')}{_AWS}+{_ci('is')}\b"
        rf"|{_ci('i')}{_AWS}+{_ci('choose')}\b"
        rf")[*{_AWS_IN}]*:?[*{_AWS_IN}]*"
    ),
    head=(
        rf"(?s)^[{_AWS_IN}*(\[]*(?:(?:{_ci('option')}|{_ci('choice')})\b[{_AWS_IN}*(\[:]*)?([A-Za-z])(.*)\z"
    ),
    trail_only=rf"[{_WS_BODY}*)\].:]*",
    sep=rf"(?s)^([*)\]]*[ \t]*([.:)\-\x{{2013}}\x{{2014}}])?[*]*{WS}+)({_NOT_WS}.*)\z",
    edge_both=_EDGE_BOTH,
    edge_trail=_EDGE_TRAIL,
)


def _norm(text: str) -> str:
    """Option-text comparison key: NFKC, case-folded, whitespace collapsed, edge quotes/emphasis/brackets and
    trailing sentence punctuation dropped. Inner punctuation and signs stay ("-5" is not "5")."""
    t = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    prev = None
    while prev != t:
        prev = t
        t = t.strip(_EDGE_BOTH).rstrip(_EDGE_TRAIL)
    return t


def _single_letter(text: str) -> bool:
    return len(text) == 1 and text.isascii() and text.isalpha()


def strict(generation: str, options: Sequence[str]) -> str | None:
    """The displayed letter when the whole generation is nothing but the answer, else None (defer).

    Accepts the letter alone or followed by exactly its own option text (``B``, ``(B)``, ``**B**``,
    ``B. three``, ``(B) three``, ``B: three``), after an optional short lead-in (``Answer:``, ``The answer
    is``, ``The correct answer is``, ``I choose``) and an optional ``Option``. Defers on anything else:
    other prose, another option's text, a letter that is also another option's text, a lower-case letter
    that could be an article (``The answer is a``, ``a cat``). A lower-case letter otherwise counts like its
    capital (``answer: b``, ``The answer is c``).
    """
    n = len(options)
    if not 1 <= n <= MAX_OPTIONS:
        return None
    s = generation.strip()
    if not s or len(s) > max(len(o) for o in options) + STRICT_MAX_EXTRA:
        return None

    lead = _LEAD_IN.match(s)
    body = s[lead.end() :] if lead else s
    head = _HEAD.match(body)
    if head is None:
        return None
    raw_letter, rest = head.group("letter"), head.group("rest")
    idx = LETTERS.find(raw_letter.upper())
    if not 0 <= idx < n:
        return None
    lower = raw_letter.islower()
    norms = [_norm(o) for o in options]
    others = {norms[j] for j in range(n) if j != idx}
    # the whole answer is also another option's text ("A. Lincoln" when option B reads "A. Lincoln"):
    # letter and text, or a copied option text?
    if others & {_norm(s), _norm(body)}:
        return None

    if _TRAIL_ONLY.match(rest):
        # "The answer is a" may be a truncated "The answer is a bit…" (or "i" a truncated "i think…"): after a
        # lead-in without a colon, these two need a closer; any other lower-case letter counts like its capital
        if raw_letter in "ai" and lead and ":" not in lead.group() and not rest.strip():
            return None
        # the letter is also another option's text ("B" when option A reads "B"): which one is meant?
        if raw_letter.casefold() in others:
            return None
        return LETTERS[idx]

    sep = _SEP.match(rest)
    if sep is None:
        return None  # the letter runs into a word ("Because…", "B.three") or another separator ("B, C")
    # a bare space cannot tell "a cat" (article) or "A C" (two picks) from a letter and its text
    bare_space = sep.group("punct") is None and not any(c in sep.group("sep") for c in "*)]")
    if bare_space and (lower or _single_letter(_norm(sep.group("text")))):
        return None
    text = _norm(sep.group("text"))
    if text != norms[idx] or text in others:
        return None  # another option's text, or two options that read the same
    return LETTERS[idx]
