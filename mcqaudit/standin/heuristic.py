"""The stand-in judge's heuristic: which option a free-text answer picks. Pure; a heuristic, NOT an LLM.

The stand-in judge (:mod:`mcqaudit.standin.server`) reads the same rendered prompt a real judge gets and
answers with :func:`judge_reply`. It exists so that demos, tests and dry runs have an endpoint; it is not a
judge you should grade a study with. Its measured agreement with human labels is in ``docs/standin.md``.

How a generation is read (``docs/standin.md`` has the same rules with examples):

1. **Normalise.** Unicode NFKC (full-width ``Ｂ`` → ``B``), invisible characters dropped (the renderer's
   ``INVISIBLE``), curly apostrophes → ``'``; markdown emphasis, backticks and line-leading ``#``/``>`` are
   removed. Empty text → OTHER.
   Text addressed to the judge is then cut out (:func:`_own_text`; nothing left → OTHER): a fake fence
   marker (look-alike brackets included) after the model's own text ends it; a response that opens with
   markers is read on from them (a fake fenced block is cut whole and the answer after it decides, else
   what it holds; a fake close runs to the next fake open), ``QUESTION:`` starts a pretend prompt unless it
   restates the row's own question (and options), ``OPTIONS:`` blocks, ``GOLD:`` lines and the reply
   instruction, lines in another voice
   (``Reply:``, ``Judge:``, ``Assistant:``…), chat-template turns, sentences that speak to the grader, and
   a JSON object in the judge's reply shape unless it is the whole response.
2. **Loops.** A run of one to six words repeated back to back at least four times that covers half the
   words (and at least eight) → OTHER (broken output).
3. **Letters.** A letter counts only as a whole token within the item's range (``A``–``D`` for four
   options), never inside a Latin word (``At``, ``As``, ``D-Day``; a CJK character after it is fine:
   ``选B吧``). ``A``/``a`` and ``I`` are also English words: they count only when wrapped (``(A)``,
   ``[a]``), followed by punctuation, a non-Latin word or the end, or (uppercase) followed by a connective
   (``A because``, ``A is``). An in-range letter in an answer slot that is
   followed by a negative (``A is wrong``, ``A does not``) or by ``?`` is not a commitment.
4. **Commitments**, each with a strength tier; the decision is the *last* commitment of the *highest* tier
   present, so a final answer beats earlier mentions and a later change of mind beats an earlier answer:

   - tier 3: ``final answer …``; ``\\boxed{…}``; a JSON key ``"answer"``/``"choice"``/``"option"`` (a list
     of two letters is several picks); a change of mind (``actually``, ``wait``, ``on second thought``,
     ``scratch that``, ``make that``) followed by an answer.
   - tier 2: answer phrases (``the answer is``, ``Answer:``, ``correct option is``, ``my choice is``,
     ``I'd go with``, ``I choose/pick/select``, ``I'd say``, ``lean towards``), ``so``/``therefore`` + an
     answer ended by punctuation, ``B is correct``/``B is the best``, a line that is only a letter, a
     heading ``Answer`` followed by the answer line, an option-by-option listing where exactly one line
     is marked right (``yes``/``correct``/✅), and answer phrases in Spanish, French, German, Portuguese,
     Italian, Russian, Chinese, Japanese and Korean.
   - tier 1: ``it's``, ``I think``, ``probably``, ``which is``, a trailing ``: B``; a sentence that is
     only an option text and/or its letter (``Canberra.``, ``Merge sort, B.``); a response that begins
     with an option text (``Mitochondria — …``); a single letter-labelled line (``C. Mitochondrion``);
     ``either A or B``/``between A and B``/``could be A or B`` (several picks).

   An answer slot may hold a letter (``B``, ``(B)``, ``option B``), a list of letters (``A and C``,
   ``A, C``, ``A/C``, ``both A and C``, ``A or C``: several picks), an option's text (case-insensitive, on
   word boundaries; a plural or an inflected word of 8+ letters matches, number words match digits:
   ``6`` ~ ``Six``), an ordinal (``the last option``), ``all of the above``/``both`` (several picks, unless that is an option's text),
   ``none of the above``/``neither`` (no pick, unless an option's text), or an out-of-range letter
   (no pick). Slots after ``if …``, ``many believe …``, ``at first …``, ``might say …`` in the same
   clause do not count.
5. **Letter/text contradiction.** When a committed letter is directly followed (``B) Sydney``,
   ``C, Canberra``) or preceded (``Jane Austen (option A)``, ``1945, which is option D``) by a *different*
   option's text, that commitment picks nothing.
6. **No commitment.** Refusal (``I can't``, ``I'm not able to``, ``as an AI``, ``I'm sorry``), hedging
   (``not sure``, ``I don't know``, ``doesn't say``) or injection (``ignore … instructions``) cues → OTHER.
   Otherwise letters mentioned as ``option B``, ``(B)``, ``[B]`` decide if exactly one is mentioned and
   not negated; if no letter is mentioned, option texts found anywhere (``not Sydney`` is negated; a text
   inside a longer option's text does not count) decide if exactly one option is found; failing that, an
   option's distinctive last word of 5+ letters (``Shakespeare`` for ``William Shakespeare``). Anything
   else → OTHER.

7. **Options that refuse or abstain.** An option whose whole text refuses (``Refused``), does not know
   (``I do not know``, ``Can't be determined``) or says none fits (``None of the above``) is what a
   response that commits to nothing for that reason picks: a refusal cue the refusing option, a hedge the
   don't-know option (each standing in for the other), ``none of the above`` only a none-fits option; two
   such options, or none, → OTHER.

Several picks, no pick, a contradiction or an out-of-range letter all give OTHER. In the ``gold`` shape the
pick becomes CORRECT/INCORRECT against the prompt's GOLD letter; OTHER stays OTHER. Instructions inside the
generation are never followed: they are only text to read.

When the prompt asks for a rationale (``grade --rationale``), the reply is the JSON object it asks for, and
the rationale is one sentence naming the rule above that decided (:func:`explain`): the commitment and its
tier, the refusal/hedge/injection cue, the single mentioned letter, or the option text found.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from mcqaudit.judge.prompts import INVISIBLE, LEFT_ANGLES, RIGHT_ANGLES, ParsedPrompt
from mcqaudit.vocab import LETTERS, OTHER, verdict_of


class _Rx:
    """A compiled pattern run only when one of its keywords occurs in the lowercased text.

    Python's ``re`` tries an alternation at every position; a plain ``in`` check first keeps a long
    generation cheap (the server answers hundreds of requests a second on one core).
    """

    __slots__ = ("rx", "keys")

    def __init__(self, pattern: str, flags: int, keys: tuple[str, ...]) -> None:
        self.rx = re.compile(pattern, flags)
        self.keys = keys

    def _wanted(self, tl: str) -> bool:
        return any(map(tl.__contains__, self.keys))  # map: cheaper than a generator expression

    def finditer(self, t: str, tl: str) -> Iterator[re.Match[str]]:
        return self.rx.finditer(t) if self._wanted(tl) else iter(())

    def search(self, t: str, tl: str) -> re.Match[str] | None:
        return self.rx.search(t) if self._wanted(tl) else None


# ---- result of reading one answer slot -------------------------------------------------------------

PICK, MULTI, NONE, INVALID, CONFLICT = "pick", "multi", "none", "invalid", "conflict"


@dataclass(frozen=True)
class _Slot:
    kind: str  # PICK, MULTI, NONE, INVALID, CONFLICT
    idx: int | None  # option index for PICK
    end: int  # where the slot ends in the text


@dataclass(frozen=True)
class _Commit:
    pos: int
    tier: int
    slot: _Slot


# ---- options: text matchers, cached per option list ------------------------------------------------

_WORD = re.compile(r"[^\W_]+")
_SEP_TOK = r"[\W_]+"
_TERMINAL = re.compile(r"[ \t]*(?:[.,;:!?)\]\n(—–\-\"'”’]|$)")


@dataclass(frozen=True)
class _Options:
    n: int
    rx: tuple[re.Pattern[str] | None, ...]  # search: the option's text anywhere, on word boundaries
    at_end: tuple[re.Pattern[str] | None, ...]  # the option's text ending a string
    head: tuple[re.Pattern[str] | None, ...]  # the option's last word when no other option has it
    abstains: tuple[frozenset[str], ...]  # how each option's own text refuses or abstains (rule 7)


_NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
)  # fmt: skip


def _token_pattern(tok: str, last: bool) -> str:
    esc = re.escape(tok)
    low = tok.lower()
    if low in _NUMBER_WORDS:
        return f"(?:{esc}|{_NUMBER_WORDS.index(low)})"  # "Six" ~ 6
    if tok.isdigit() and int(tok) < len(_NUMBER_WORDS) and tok == str(int(tok)):
        return f"(?:{esc}|{_NUMBER_WORDS[int(tok)]})"
    if tok.isalpha() and len(tok) >= 8:
        return re.escape(tok[:-2]) + r"[^\W\d_]{0,4}"  # mitochondrion ~ mitochondria, nitrogen ~ nitrogênio
    if last and tok.isalpha() and len(tok) >= 3:
        return esc + r"(?:e?s)?"  # whale ~ whales
    return esc


@lru_cache(maxsize=2048)
def _options(options: tuple[str, ...]) -> _Options:
    rx: list[re.Pattern[str] | None] = []
    at_end: list[re.Pattern[str] | None] = []
    head: list[re.Pattern[str] | None] = []
    toks_of = [_WORD.findall(unicodedata.normalize("NFKC", text)) for text in options]
    for k, toks in enumerate(toks_of):
        if not toks or (len(toks) == 1 and len(toks[0]) == 1):
            rx.append(None)  # a one-character option text cannot be told from a letter
            at_end.append(None)
            head.append(None)
            continue
        body = _SEP_TOK.join(_token_pattern(t, i == len(toks) - 1) for i, t in enumerate(toks))
        rx.append(re.compile(r"(?<![^\W_])" + body + r"(?![^\W_])", re.I))
        at_end.append(re.compile(r"(?<![^\W_])" + body + r"\W*$", re.I))
        last = toks[-1].lower()
        shared = any(last in (w.lower() for w in other) for j, other in enumerate(toks_of) if j != k)
        if len(toks) > 1 and len(last) >= 5 and last.isalpha() and not shared:
            head.append(re.compile(r"(?<![^\W_])" + _token_pattern(toks[-1], True) + r"(?![^\W_])", re.I))
        else:
            head.append(None)
    return _Options(len(options), tuple(rx), tuple(at_end), tuple(head), tuple(map(_abstains, options)))


# ---- options that refuse or abstain (rule 7) ---------------------------------------------------------
# "Refused", "I don't know", "None of the above": an option like any other, and what a response that
# refuses, does not know or finds no option right picks. Read from the whole option text (a trailing
# "(VOL)" or "(do not read)" aside; "Don't know / Refused" is both), never from a word inside it.

REFUSES, DOES_NOT_KNOW, NONE_FITS = "refuses", "does not know", "none fits"
_ABSTAIN_TEXT = {
    REFUSES: re.compile(
        r"(?:i\s+)?(?:refuse[sd]?|refusal|decline[sd]?)(?:\s+to\s+(?:answer|say|respond|reply))?|"
        r"(?:i\s+)?(?:would\s+|'d\s+)?(?:prefer|rather)\s+not\s+(?:to\s+)?(?:say|answer|respond|reply|disclose|tell)|"
        r"(?:i\s+)?(?:do\s+not|don't)\s+(?:want|wish)\s+to\s+(?:answer|say)|no\s+(?:answer|response)|not\s+answered|"
        r"skip(?:ped)?|pass|abstain(?:ed)?"
    ),
    DOES_NOT_KNOW: re.compile(
        r"(?:i\s+)?(?:do\s+not|don't|dont)\s+know(?:\s+the\s+answer)?|(?:i\s+am\s+|i'm\s+)?(?:not\s+sure|unsure|"
        r"uncertain|undecided)|(?:i\s+)?(?:cannot|can't|can\s+not)\s+(?:say|tell|answer|decide|choose|determine)|"
        r"can(?:not|'t)\s+be\s+(?:determined|known|answered|told)|(?:i\s+have\s+)?no\s+(?:idea|opinion)|unknown|"
        r"not\s+known|undetermined|(?:not\s+enough|insufficient)\s+(?:information|info)|not\s+answerable|"
        r"unanswerable|hard\s+to\s+say|dk"
    ),
    NONE_FITS: re.compile(
        r"none(?:\s+of\s+(?:the\s+)?(?:above|these|them|those|options|answers))?|"
        r"neither(?:\s+of\s+(?:these|them|the\s+above))?|none\s+apply|no\s+correct\s+answer"
    ),
}
_ASIDE = re.compile(r"\s*\([^()]*\)\s*$")
_ALTERNATIVES = re.compile(r"\s*/\s*|\s+or\s+|\s*;\s*")


def _abstains(text: str) -> frozenset[str]:
    """How an option's own text refuses or abstains (REFUSES, DOES_NOT_KNOW, NONE_FITS), empty if not."""
    t = _ASIDE.sub("", unicodedata.normalize("NFKC", text).translate(_APOSTROPHES).casefold())
    kinds: set[str] = set()
    for part in _ALTERNATIVES.split(" ".join(t.split())):
        part = part.strip(" .!,;:-–—\"'")
        kind = next((k for k, rx in _ABSTAIN_TEXT.items() if rx.fullmatch(part)), None)
        if kind is None:
            return frozenset()
        kinds.add(kind)
    return frozenset(kinds)


def _abstaining_option(opts: _Options, kinds: tuple[str, ...]) -> int | None:
    """The one option whose text refuses or abstains as ``kinds`` say (the first kind any option has)."""
    for kind in kinds:
        found = [k for k, kinds in enumerate(opts.abstains) if kind in kinds]
        if found:
            return found[0] if len(found) == 1 else None
    return None


# ---- text preparation ------------------------------------------------------------------------------

_MARKDOWN = re.compile(r"\*+|^[ \t]*(?:#+|>+)[ \t]*", re.M)
_INVISIBLE = re.compile(f"[{INVISIBLE}]+")  # the renderer's table: what a reader does not see
_APOSTROPHES = str.maketrans({"’": "'", "ʼ": "'", "`": None})


def _clean(generation: str) -> str:
    t = unicodedata.normalize("NFKC", generation)
    t = _INVISIBLE.sub("", t).translate(_APOSTROPHES)
    return _MARKDOWN.sub("", t) if ("*" in t or "#" in t or ">" in t) else t


def _is_loop(t: str) -> bool:
    """A run of 1-6 words repeated back to back >= 4 times, covering half the words (and >= 8)."""
    words = t.lower().split()
    n = len(words)
    if n < 8:
        return False
    need = max(8, n // 2)
    for k in range(1, 7):
        threshold = max(need, 4 * k) - k
        run = 0  # consecutive positions i with words[i] == words[i + k]
        for a, b in zip(words, words[k:], strict=False):
            if a == b:
                run += 1
                if run >= threshold:
                    return True
            else:
                run = 0
    return False


# ---- text that addresses the judge (rule 0) --------------------------------------------------------
# The generation sits inside the prompt's fence and cannot close it (the renderer breaks up fence-like
# runs), but it can *pretend* to: a fake fence close followed by a pretend prompt tail, a reply line, a
# JSON object in the judge's own reply shape, a chat-template turn, a note to the grader. None of that is
# the model's answer to the question; it is cut out before the answer is read. Look-alike letters are
# folded for finding it (Cyrillic/Greek capitals, full-width forms via NFKC), never for reading the answer.

_CONFUSABLES = str.maketrans(
    "АВЕЅІЈКМНОРСТХУаеіјоѕрсхуΑΒΕΖΗΙΚΜΝΟΡΤΥΧοιν",
    "ABESIJKMHOPCTXYaeijospcxyABEZHIKMNOPTYXoiv",
)
# the renderer's bracket look-alikes (after NFKC); two of them, or one double (≫, »), read as a marker's run.
# Some are letters (ᐳ), so a close needs no word boundary after "response".
_LEFT, _RIGHT = "".join(LEFT_ANGLES), "".join(RIGHT_ANGLES)
_LEFT_RUN = rf"(?:(?:[{_LEFT}][ \t]*){{2,}}|[{''.join(c for c, w in LEFT_ANGLES.items() if w > 1)}][ \t]*)"
_RIGHT_RUN = rf"(?:(?:[{_RIGHT}][ \t]*){{2,}}|[{''.join(c for c, w in RIGHT_ANGLES.items() if w > 1)}][ \t]*)"
# a fence marker the generation wrote: open (a new pretend response starts) or close (a pretend prompt
# follows); found on the folded, lowercased text, so positions match the cleaned text
_FAKE_FENCE = re.compile(
    rf"(?P<open>{_LEFT_RUN}response\b|<[ \t]*response[ \t]*>)"
    rf"|(?P<close>{_LEFT_RUN}end\b[^\n]*|\bresponse[\w-]{{0,24}}?[ \t]*{_RIGHT_RUN}"
    r"|</[ \t]*response[ \t]*>|\[[ \t]*/?[ \t]*end[ \t]+(?:of[ \t]+)?(?:the[ \t]+)?response[ \t]*\]"
    r"|^[ \t]*end[ \t]+of[ \t]+(?:the[ \t]+)?response\b[^\n]*)",
    re.M,
)
_FENCE_KEYS = ("response", "end")
# the judge prompt's own headers and lines, as the renderer writes them (case-sensitive): QUESTION starts a
# pretend prompt (everything after it is part of it) unless it restates the row's own question; OPTIONS and
# GOLD blocks and the reply instruction are cut on their own
_FAKE_QUESTION = re.compile(r"^QUESTION:[ \t]*$", re.M)
_FAKE_BLOCK = re.compile(
    r"^(?:OPTIONS:[ \t]*\n(?:[ \t]*[(\[]?[A-Za-z][).:\]][^\n]*(?:\n|$))*|GOLD:[^\n]*$|"
    r"RESPONSE \(data, not instructions\):[^\n]*$|Reply with exactly one (?:of|JSON object)\b[^\n]*$)",
    re.M,
)
# a line labelled as another voice: a chat turn, the judge's reply, a verdict
_VOICE_LINE = re.compile(
    r"^[ \t]*(?:[\[(<][ \t]*)?(?:system|user|assistant|human|judge|grader|evaluator|reviewer|"
    r"(?:the[ \t]+)?judge'?s?[ \t]+(?:reply|verdict|answer|output)|reply|verdict|output|"
    r"expected[ \t]+(?:output|reply|verdict)|correct[ \t]+reply|instructions?)[ \t]*[:：][^\n]*",
    re.M,
)
_CHAT_TURN = re.compile(
    r"<\|im_start\|>.*?(?:<\|im_end\|>|$)|\[inst\].*?(?:\[/inst\]|$)|<<sys>>.*?(?:<</sys>>|$)|<!--.*?(?:-->|$)"
    r"|<\|[a-z_]+\|>",
    re.S,
)
# a sentence that speaks to the grader rather than answering the question
_ADDRESS = re.compile(
    r"\b(?:grader|grading\s+model|evaluator|(?:as|dear|to)\s+the\s+judge|dear\s+judge|the\s+judge\s+"
    r"(?:should|must|will|needs?\s+to|has\s+to)|you\s+(?:must|should|need\s+to|have\s+to)\s+"
    r"(?:reply|answer|output|respond|mark|record|grade|choose|pick|say)|"
    r"(?:ignore|disregard)\s+(?:all\s+|the\s+|any\s+|your\s+)*(?:previous|above|prior|earlier|preceding|"
    r"other)\b|(?:reply|respond|output)\s+(?:with\s+)?(?:the\s+(?:letter|verdict|word)\s+)?[a-z]\b|"
    r"(?:mark|record|grade)\s+(?:it|this|the\s+response)\b)",
    re.I,
)
_ADDRESS_KEYS = (
    "grader", "grading", "evaluator", "judge", "you must", "you should", "you need", "you have", "ignore",
    "disregard", "reply", "respond", "output", "mark", "record", "grade",
)  # fmt: skip
_ADDRESS_SENTENCE = re.compile(r"[^\n.!?]*[.!?]*")
# a JSON object in the shape of the judge's own reply: the model's answer only when it is all there is
_REPLY_JSON = re.compile(
    r"\{[ \t\n]*[\"'](?:choice|verdict)[\"'][ \t]*:[ \t]*[\"'][^\"'\n]{0,40}[\"'][ \t\n]*"
    r"(?:,[ \t\n]*[\"']rationale[\"'][ \t]*:[ \t]*[\"'][^\"\n]{0,400}[\"'][ \t\n]*)?\}"
)
_CODE_FENCE_LINE = re.compile(r"^[ \t]*(?:```)?(?:json)?[ \t]*$", re.M)  # _clean drops backticks


def _own_text(t: str, options: Sequence[str] = (), question: str | None = None) -> tuple[str, bool]:
    """The generation with the text that addresses the judge cut out (rule 0), and whether any was cut.

    ``t`` is the cleaned text (:func:`_clean`); ``options`` and ``question`` are the row's, to tell a
    restatement of them from a pretend prompt (:func:`_restated`).
    """
    low = t.translate(_CONFUSABLES).lower()
    cuts: list[tuple[int, int]] = []
    if "OPTIONS:" in t or "GOLD:" in t or "RESPONSE (" in t or "Reply with" in t:
        cuts += [m.span() for m in _FAKE_BLOCK.finditer(t)]
    if ":" in t or "：" in t:
        cuts += [m.span() for m in _VOICE_LINE.finditer(low)]
    if "<" in t or "[" in t:
        cuts += [m.span() for m in _CHAT_TURN.finditer(low)]
    if any(map(low.__contains__, _ADDRESS_KEYS)):
        for m in _ADDRESS.finditer(low):
            s = low.rfind("\n", 0, m.start()) + 1
            for p in (".", "!", "?"):
                k = low.rfind(p, s, m.start())
                if k >= 0:
                    s = max(s, k + 1)
            em = _ADDRESS_SENTENCE.match(low, m.start())
            cuts.append((s, em.end() if em else m.end()))
    marks: list[tuple[int, int, str]] = []
    if any(map(low.__contains__, _FENCE_KEYS)):
        marks += [
            (m.start(), m.end(), _OPEN if m.group("open") else _CLOSE) for m in _FAKE_FENCE.finditer(low)
        ]
    if "QUESTION:" in t:
        for m in _FAKE_QUESTION.finditer(t):
            end = _restated(t, m.end(), options, question)
            if end is None:
                marks.append((m.start(), len(t), _QUESTION))  # a pretend prompt starts here
            else:
                cuts.append((m.start(), end))  # the row's own question said again: not an answer
    if marks:
        cuts += _fence_cuts(t, sorted(marks), cuts)
    if not cuts and "{" not in t:
        return t, False
    kept = _cut(t, cuts)
    jsons = [m.span() for m in _REPLY_JSON.finditer(kept)] if "{" in kept else []
    if jsons:
        rest = _CODE_FENCE_LINE.sub("", _cut(kept, jsons))
        if rest.strip():  # the reply-shaped JSON is beside an answer of the model's own: not its answer
            kept = rest
    return kept, kept != t


_OPEN, _CLOSE, _QUESTION = "open", "close", "question"


def _fence_cuts(
    t: str, marks: list[tuple[int, int, str]], cuts: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """What the fake fence markers ``marks`` (start, end, kind; in order) cut, read from the start.

    The model's own text and then a marker: the rest is a pretence (a close or ``QUESTION:`` starts a
    pretend prompt, an open a pretend response). A marker with nothing of the model's own before it: a fake
    open closed later is a pretend fenced response, cut whole, and what follows is read on; an open never
    closed starts the model's text; a close (or ``QUESTION:``) starts a pretend prompt that runs to the
    next open, or to the end. When all that leaves nothing of the model's own, the response is what the
    last of its leading fenced blocks holds.
    """
    out: list[tuple[int, int]] = []
    pos, k = 0, 0
    inside: tuple[int, int] | None = None  # the last leading fenced block's text
    while k < len(marks):
        start, end, kind = marks[k]
        if start < pos:
            k += 1
            continue
        if _has_text(t, pos, start, cuts):
            out.append((start, len(t)))
            return out
        nxt = next((j for j in range(k + 1, len(marks)) if marks[j][0] >= end), None)
        if kind == _OPEN and nxt is not None and marks[nxt][2] == _CLOSE:
            out.append((pos, marks[nxt][1]))
            inside, pos, k = (end, marks[nxt][0]), marks[nxt][1], nxt + 1
        elif kind == _OPEN:
            out.append((pos, end))
            pos, k = end, k + 1
        else:
            reopen = next((j for j in range(k + 1, len(marks)) if marks[j][2] == _OPEN), None)
            if reopen is None:
                out.append((pos, len(t)))
                return out
            out.append((pos, marks[reopen][1]))
            pos, k = marks[reopen][1], reopen + 1
    if inside is not None and not _has_text(t, pos, len(t), cuts):
        return [(0, inside[0]), (inside[1], len(t))]
    return out


def _has_text(t: str, a: int, b: int, cuts: list[tuple[int, int]]) -> bool:
    """Whether ``t[a:b]`` holds anything but white space outside ``cuts``."""
    inner = [(max(s, a) - a, min(e, b) - a) for s, e in cuts if s < b and e > a]
    return bool(_cut(t[a:b], inner).strip())


def _norm(text: str) -> str:
    return " ".join(_clean(text).split()).casefold()


_OPTION_LABEL = re.compile(r"[ \t]*[(\[]?([A-Za-z])[).:\]][ \t]*(.*)")


def _restated(t: str, i: int, options: Sequence[str], question: str | None) -> int | None:
    """Where a ``QUESTION:`` block whose header line ends at ``i`` ends, when it restates the row's own
    question (its lines, then optionally an ``OPTIONS:`` block of the row's options in order) or, with no
    question to compare, the row's options; None when it says anything else (a pretend prompt)."""
    lines = t[i + 1 :].split("\n") if t.startswith("\n", i) else []
    k = 0
    if question is not None:
        want = [_norm(q) for q in question.split("\n")]
        if [_norm(line) for line in lines[: len(want)]] != want:
            return None
        k = len(want)
    else:
        k = next((j for j, line in enumerate(lines) if line.strip() == "OPTIONS:"), len(lines))
    if k < len(lines) and lines[k].strip() == "OPTIONS:":
        block = lines[k + 1 : k + 1 + len(options)]
        labelled = [_OPTION_LABEL.fullmatch(line) for line in block]
        if len(block) < len(options) or not all(
            m is not None and m.group(1).upper() == LETTERS[j] and _norm(m.group(2)) == _norm(options[j])
            for j, m in enumerate(labelled)
        ):
            return None
        k += 1 + len(options)
    elif question is None:
        return None
    return i + 1 + sum(len(line) + 1 for line in lines[:k])


def _cut(t: str, spans: list[tuple[int, int]]) -> str:
    """``t`` without ``spans`` (overlapping allowed); each cut becomes a line break, so words never join."""
    out: list[str] = []
    pos = 0
    for s, e in sorted(spans):
        if e <= pos:
            continue
        if s > pos:
            out.append(t[pos:s])
            out.append("\n")
        pos = max(pos, e)
    out.append(t[pos:])
    return "".join(out)


# ---- letters ---------------------------------------------------------------------------------------

_CONNECTIVES = frozenset({
    "because", "since", "as", "and", "or", "is", "was", "would", "seems", "appears", "looks", "which", "with",
    "for", "but", "so", "then", "though", "although", "given", "due", "here", "there", "makes", "corresponds",
})  # fmt: skip
_CLOSER = re.compile(r"[ \t]*[)\]}]")
_CJK_START = 0x2E80
_WORD_AFTER = re.compile(r"[ \t]+([A-Za-z]+)")  # a Latin word: "A です" is still the letter A
_NEG_AFTER = re.compile(
    r"[ \t]*[).]?[ \t]*(?:(?:is|are|was|were|seems|looks|would\s+be|does|do|can|could|should)[ \t]+)?"
    r"(?:(?:also|definitely|clearly|obviously)[ \t]+)?"
    r"(?:n't|not\b|never\b|wrong\b|incorrect\b|false\b|out\b|unlikely\b|ruled\s+out|eliminated|fails?\b|"
    r"cannot\b|can't\b|doesn't\b|isn't\b|aren't\b)",
    re.I,
)
_QUESTION_AFTER = re.compile(r"[ \t]*[).]?[ \t]*\?")


def _letter_at(t: str, i: int, n: int) -> tuple[int, int, bool] | None:
    """A letter token at ``i``: (option index or -1 if out of range, end, wrapped). None if no letter."""
    wrapped = False
    j = i
    if j < len(t) and t[j] in "([{":
        wrapped = True
        j += 1
        while j < len(t) and t[j] in " \t":
            j += 1
    if j >= len(t):
        return None
    ch = t[j]
    if not ("A" <= ch <= "Z" or "a" <= ch <= "z"):
        return None
    k = j + 1
    if k < len(t) and ((t[k].isalnum() and ord(t[k]) < _CJK_START) or t[k] in "_'’"):
        return None  # part of a word (a CJK character right after it is not: "选B吧")
    if k + 1 < len(t) and t[k] in "-." and t[k + 1].isalnum():
        return None  # D-Day, e.g.
    end = k
    closed = False
    m = _CLOSER.match(t, k)
    if m:
        closed = True
        end = m.end()
    up = ch.upper()
    idx = ord(up) - 65
    if not wrapped and not closed:
        word = _WORD_AFTER.match(t, end)
        if word and up in "AI" and (ch.islower() or word.group(1).lower() not in _CONNECTIVES):
            return None  # the article "a"/"A" or the pronoun "I"
    if idx >= n:
        # out of range: only an unambiguous capital counts (never the pronoun I)
        if up == "I" or not (ch.isupper() or wrapped):
            return None
        return (-1, end, wrapped or closed)
    return (idx, end, wrapped or closed)


# ---- answer slots ----------------------------------------------------------------------------------

_FILLER = re.compile(
    r"(?:[ \t\n]|[:=\"'“”‘’«»「」『』]|[-–—→](?=\s)|->)*"
    r"(?:(?:(?:the|my|our)\s+(?:(?:final|correct|right|best|true)\s+)?(?:answer|option|choice)\s+"
    r"(?:is|would\s+be|must\s+be|will\s+be)|option|choice|letter|alternative|opci[oó]n|op[çc][ãa]o|opzione|"
    r"选项|選択肢|it'?s|it\s+is|that'?s|that\s+is|probably|likely|most\s+likely|definitely|clearly|obviously|"
    r"actually|surely|certainly|simply|just|la|le|el|die|der|l'|a(?=\s+(?-i:[A-Z])(?![^\W_]))|with)"
    r"(?![^\W_])(?:[ \t\n]|[:=\"'“”‘’«»「」『』]|[-–—](?=\s))*)*",
    re.I,
)
_GROUP_WORD = re.compile(r"(?:both|either|between)\s+", re.I)
_LIST_SEP = re.compile(
    r"[ \t]*(?:,|;|&|/|\+|\band/or\b|\band\b|\bor\b|\bund\b|\bet\b|\by\b|\bou\b|\bo\b|和|或|及|、)[ \t]*"
    r"(?:(?:option|choice)\s+)?",
    re.I,
)
# "B, C is wrong": a singular verb after the next letter starts a new clause; "A and C are" is a list
_CLAUSE_AFTER = re.compile(r"[ \t]*[)\]]?[ \t]+(?:is|was|would|seems)\b", re.I)
_MULTI = re.compile(
    r"(?:all\s+of\s+(?:the\s+)?(?:above|them|these|those|the\s+options|options)|all\s+(?:three|four|five|"
    r"the\s+options|options)|both)(?![^\W_])",
    re.I,
)
_NONE = re.compile(
    r"(?:none\s+of\s+(?:the\s+)?(?:above|them|these|those|options|answers|the\s+options)|neither)(?![^\W_])",
    re.I,
)
_ORDINAL = re.compile(
    r"the\s+(first|second|third|fourth|fifth|sixth|last)\s+(?:option|one|choice|answer|alternative)\b", re.I
)
_ORDINALS = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4, "sixth": 5}
_THE = re.compile(r"(?:the\s+)?", re.I)
_STRICT_END = re.compile(
    r"[ \t]*(?:[.,;:!)\n。]|$|(?:is|would\s+be)\s+(?:the\s+)?(?:correct|right|answer|best)\b)", re.I
)
_POST_SEP = re.compile(r"[ \t]*(?:[).:,=\-–—][ \t]*)*\(?[ \t]*")
# what may sit between an option text and a letter naming it: "Jane Austen (option A)", "1945, which is D"
_PRE_STRIP_CHARS = " \t\n,([:-–—="
_PRE_STRIP_WORDS = (
    "which is", "which was", "which makes", "which would be", "which corresponds to", "that is", "that was",
    "this is", "i.e.", "option", "choice", "letter",
)  # fmt: skip
_NEGATED_BEFORE = re.compile(
    r"(?:\bnot|n't|\brather\s+than|\binstead\s+of|\bunlike|\bexcept|\bnor|\bneither)\s+(?:the\s+)?$", re.I
)


class _Reader:
    """Reads one generation against one option list."""

    def __init__(self, t: str, opts: _Options) -> None:
        self.t = t
        self.tl = t.lower()  # only for keyword checks (_Rx); positions always refer to ``t``
        self.opts = opts
        self.n = opts.n

    # -- option text at a position ------------------------------------------------------------------
    def text_at(self, i: int, terminal: bool = False) -> tuple[int, int] | None:
        """(option index, end) for the longest option text starting at ``i``."""
        best: tuple[int, int] | None = None
        for idx, rx in enumerate(self.opts.rx):
            if rx is None:
                continue
            m = rx.match(self.t, i)
            if not m:
                continue
            if terminal and not _TERMINAL.match(self.t, m.end()):
                continue
            if best is None or m.end() > best[1]:
                best = (idx, m.end())
        return best

    def _consistency(self, idx: int, start: int, end: int) -> str:
        """PICK, or CONFLICT when another option's text is glued to the letter at [start, end)."""
        m = _POST_SEP.match(self.t, end)
        after = self.text_at(m.end() if m else end, terminal=True)
        if after is not None:
            return PICK if after[0] == idx else CONFLICT
        pre = self.t[max(0, start - 100) : start]
        stripped = False
        while True:
            cut = pre.rstrip(_PRE_STRIP_CHARS)
            low = cut.lower()
            for w in _PRE_STRIP_WORDS:
                if low.endswith(w) and (len(low) == len(w) or not low[-len(w) - 1].isalnum()):
                    cut = cut[: -len(w)]
                    break
            if cut == pre:
                break
            pre, stripped = cut, True
        if stripped:
            for j, rx in enumerate(self.opts.at_end):
                if rx is None:
                    continue
                em = rx.search(pre)
                if em and not _NEGATED_BEFORE.search(pre[: em.start()]):
                    return PICK if j == idx else CONFLICT
        return PICK

    def letters(self, i: int, strict: bool) -> _Slot | None:
        lt = _letter_at(self.t, i, self.n)
        if lt is None:
            return None
        idx, end, _ = lt
        if _NEG_AFTER.match(self.t, end) or _QUESTION_AFTER.match(self.t, end):
            return None
        picked = [idx]
        while True:
            if len(picked) == 1 and _CLAUSE_AFTER.match(self.t, end):
                break
            sm = _LIST_SEP.match(self.t, end)
            if not sm or sm.end() == end:
                break
            nxt = _letter_at(self.t, sm.end(), self.n)
            if nxt is None or _CLAUSE_AFTER.match(self.t, nxt[1]) or _NEG_AFTER.match(self.t, nxt[1]):
                break
            picked.append(nxt[0])
            end = nxt[1]
        if strict and not _STRICT_END.match(self.t, end):
            return None
        if len(set(picked)) > 1:
            return _Slot(MULTI, None, end)
        if idx < 0:
            return _Slot(INVALID, None, end)
        return _Slot(self._consistency(idx, i, lt[1]), idx, end)

    def slot(self, i: int, strict: bool = False, multi_only: bool = False) -> _Slot | None:
        """Read an answer slot starting at ``i`` (after a lead phrase)."""
        t = self.t
        fm = _FILLER.match(t, i)
        j = fm.end() if fm else i
        gm = _GROUP_WORD.match(t, j)
        if gm:
            s = self.letters(gm.end(), strict=False)
            if s is not None:
                return s
        if multi_only:
            s = self.letters(j, strict=False)
            return s if s is not None and s.kind == MULTI else None
        the = _THE.match(t, j)
        for start in {j, the.end() if the else j}:
            txt = self.text_at(start, terminal=strict)
            if txt is not None and not _NEG_AFTER.match(t, txt[1]) and not _QUESTION_AFTER.match(t, txt[1]):
                return _Slot(PICK, txt[0], txt[1])
        for rx, kind in ((_MULTI, MULTI), (_NONE, NONE)):
            mm = rx.match(t, j)
            if mm:
                return _Slot(kind, None, mm.end())
        om = _ORDINAL.match(t, j)
        if om:
            word = om.group(1).lower()
            idx = self.n - 1 if word == "last" else _ORDINALS[word]
            return _Slot(PICK, idx, om.end()) if idx < self.n else _Slot(INVALID, None, om.end())
        return self.letters(j, strict=strict)


# ---- lead phrases ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lead:
    """A phrase after which an answer slot is read (rule 4): ``the answer is`` → read ``B`` after it.

    ``keys``: one of these must occur in the lowercased text before the pattern is tried (speed only).
    ``strict``: the slot counts only when it ends there (``so B.``, not ``so B might be…``).
    ``multi_only``: only a list of several letters counts (``either A or B``: several picks).
    """

    name: str
    tier: int
    pattern: str
    keys: tuple[str, ...]
    strict: bool = False
    multi_only: bool = False


_ANSWER_VERB = r"(?:is|was|would\s+be|will\s+be|should\s+be|must\s+be|has\s+to\s+be|=|:|-|–|—|→|->)"

# tier 3: the response says this is its final word
FINAL_LEADS: tuple[Lead, ...] = (
    Lead(
        "final answer",
        3,
        r"\bfinal\s+(?:answer|choice|pick|selection|verdict)s?\s*" + _ANSWER_VERB + r"?",
        ("final",),
    ),
    Lead(
        "change of mind",
        3,
        r"\b(?:actually|on\s+second\s+thoughts?|on\s+reflection|wait|scratch\s+that|make\s+that|correction|"
        r"no\s+wait)\b[\s,:;.!—–\-]*(?:no\b[,.!]?\s*)?(?:(?:I'?ll|I\s+will|I'?d|let'?s)\s+(?:go\s+with|say|"
        r"pick|choose)\s*|the\s+(?:correct\s+|right\s+)?answer\s+is\s*)?",
        ("actually", "second thought", "reflection", "wait", "scratch", "make that", "correction"),
        strict=True,
    ),
)

# tier 2: English answer phrases
ANSWER_LEADS: tuple[Lead, ...] = (
    Lead(
        "the answer is",
        2,
        r"\b(?:(?:the|my|our|correct|right|best|true|most\s+likely)\s+)*answers?\s*" + _ANSWER_VERB,
        ("answer",),
    ),
    Lead(
        "Answer heading",
        2,
        r"^[ \t]*(?:the\s+)?(?:correct\s+|right\s+|best\s+)?answer[ \t]*\n",
        ("answer",),
    ),
    Lead(
        "the correct option is",
        2,
        r"\b(?:correct|right|best|appropriate|most\s+(?:likely|appropriate|accurate|reasonable|plausible))\s+"
        r"(?:option|choice|response|pick|letter|one)\s*" + _ANSWER_VERB,
        ("option", "choice", "response", "pick", "letter", "one"),
    ),
    Lead(
        "my choice is",
        2,
        r"\bmy\s+(?:choice|pick|vote|selection|guess|response|answer)\s*" + _ANSWER_VERB,
        ("my ",),
    ),
    Lead(
        "I choose",
        2,
        r"\b(?:I|we)(?:'d|'ll|\s+would|\s+will|\s+am\s+going\s+to|'m\s+going\s+to|\s+have\s+to|\s+must)?"
        r"\s+(?:go\s+with|choose|pick|select|opt\s+for|say|vote\s+for|lean\s+(?:towards?|to)|settle\s+on|"
        r"guess)\b",
        ("go with", "choose", "pick", "select", "opt for", "say", "vote", "lean", "settle", "guess"),
    ),
    Lead(
        "going with",
        2,
        r"\b(?:I'?m|I\s+am)\s+(?:going|gonna)\s+with\b|\bgoing\s+with\b|\blet'?s\s+(?:go\s+with|say)\b",
        ("with", "let"),
    ),
    Lead(
        "so / therefore",
        2,
        r"\b(?:so|thus|therefore|hence|consequently|ergo)\b[\s,:]*",
        ("so", "thus", "therefore", "hence", "consequently", "ergo"),
        strict=True,
    ),
)

# tier 2: answer phrases in other languages, one a language
LANGUAGE_LEADS: tuple[Lead, ...] = (
    Lead("Spanish", 2, r"\brespuesta(?:\s+correcta)?\s*(?:es|:|=)", ("respuesta",)),
    Lead("French", 2, r"\br[ée]ponse(?:\s+correcte)?\s*(?:est|:|=)", ("ponse",)),
    Lead("German", 2, r"\bantwort\s*(?:ist|lautet|:|=)", ("antwort",)),
    Lead("Portuguese", 2, r"\bresposta(?:\s+correta|\s+certa)?\s*(?:é|:|=)", ("resposta",)),
    Lead("Italian", 2, r"\brisposta(?:\s+corretta|\s+giusta)?\s*(?:è|:|=)", ("risposta",)),
    Lead("Russian", 2, r"(?:правильный\s+)?ответ\s*(?:[:—–\-=]|это)?", ("ответ",)),
    Lead(
        "Chinese, Japanese, Korean",
        2,
        r"答案\s*(?:是|为|為|:)?|正解\s*(?:は|:)?|答え\s*(?:は|:)?|所以选|我选|选择|選択|정답(?:은|:)?",
        ("答案", "正解", "答え", "选", "選択", "정답"),
    ),
)

# tier 1: weaker phrasings
WEAK_LEADS: tuple[Lead, ...] = (
    Lead("it's", 1, r"\b(?:it'?s|it\s+is|that'?s|that\s+is)\b", ("it", "that")),
    Lead(
        "I think",
        1,
        r"\bI\s+(?:think|believe|guess|reckon|suspect|thought)\b(?:\s+that)?",
        ("think", "believe", "guess", "reckon", "suspect", "thought"),
    ),
    Lead(
        "probably",
        1,
        r"\b(?:probably|likely|most\s+likely|definitely)\b",
        ("probably", "likely", "definitely"),
    ),
    Lead("which is", 1, r"\b(?:which|that)\s+(?:is|makes|would\s+be|corresponds\s+to)\b", ("which", "that")),
    Lead("trailing ': B'", 1, r":[ \t]*(?=[(\[]?[A-Za-z][)\]]?[ \t]*\.?[ \t]*(?:\n|$))", (":",)),
    Lead(
        "either A or B",
        1,
        r"\b(?:either|between|(?:could|might|may)\s+be)\b",
        ("either", "between", " be"),
        multi_only=True,
    ),
)

LEADS: tuple[Lead, ...] = (*FINAL_LEADS, *ANSWER_LEADS, *LANGUAGE_LEADS, *WEAK_LEADS)
# the compiled leads of each tier, in table order
_LEADS_BY_TIER: dict[int, tuple[tuple[_Rx, Lead], ...]] = {
    tier: tuple((_Rx(lead.pattern, re.I | re.M, lead.keys), lead) for lead in LEADS if lead.tier == tier)
    for tier in (1, 2, 3)
}

# a slot does not count when its clause (back to the last , ; . or newline) says it is someone else's view
_DISCOUNT = re.compile(
    r"\b(?:if|whether|might|may|could|tempting|tempted|at\s+first|initially|first\s+thought|some(?:one)?|many|"
    r"people|others|misconception|assume|assumes|believe\s+that)\b",
    re.I,
)
# "if I had to choose, …" introduces the response's own pick: not a discount
_FORCED_CHOICE = re.compile(r"\bif\s+(?:I|we)\s+(?:had|have|must|were|was|need)\s+to\b|\bif\s+forced\b", re.I)
_CLAUSE_START = re.compile(r"[,;.!?\n][^,;.!?\n]*$")

_BOXED = _Rx(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}", 0, ("boxed",))
_TEXT_CMD = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")
_JSON_KEY = _Rx(
    r"[\"'](?:final[_ ]?answer|answer|choice|option|selected(?:_option)?|selection|pick|letter|prediction)"
    r"[\"']\s*:\s*",
    re.I,
    ('"', "'"),
)
_JSON_STR = re.compile(r"\"([^\"\n]{0,200})\"|'([^'\n]{0,200})'")
_JSON_LIST = re.compile(r"\[([^\]\n]{0,200})\]")

_POST = _Rx(
    r"(?:\b(?:option|choice)s?\s+)?(?P<l>[(\[]?(?-i:[A-Z])[)\]]?)"
    r"(?:[ \t]*(?:,|and|&|or|/)[ \t]*(?:(?:option|choice)\s+)?[(\[]?(?-i:[A-Z])[)\]]?)*"
    r"(?:[ \t]*\([^()\n]{1,80}\))?"
    r"[ \t]+(?:is|are|seems|appears|looks|would\s+be|must\s+be)\s+(?:both\s+|all\s+)?(?:to\s+be\s+)?"
    r"(?:the\s+)?(?:most\s+|only\s+|single\s+)?(?:correct|right|best|true|accurate|answer)\b",
    re.I,
    ("correct", "right", "best", "true", "accurate", "answer"),
)
_MULTI_POST = _Rx(
    r"\b(?:both|all)\s+(?:of\s+them\s+|options\s+)?(?:are|seem)\s+(?:correct|right|true|valid)\b|"
    r"\b(?:they|these)\s+are\s+(?:both|all)\s+(?:correct|right|true)\b",
    re.I,
    ("both", "all"),
)

_LINE_LABEL = re.compile(
    r"^[ \t]*(?:[-+•][ \t]*|\d+[.)][ \t]*)?(?P<l>[(\[]?[A-Za-z](?:[).:\]]|[ \t]+[-–—](?=\s)))[ \t]*(?P<rest>.*)$",
    re.M,
)
_LINE_LETTER_ONLY = re.compile(r"^[ \t]*(?:[-+•][ \t]*)?[(\[]?(?P<l>[A-Za-z])[)\].:]?[ \t]*$", re.M)
_POSITIVE = re.compile(r"✅|✓|✔|☑|\b(?:yes|correct|right|true)\b", re.I)
_NEGATIVE = re.compile(r"❌|✗|✘|✖|\b(?:no|not|incorrect|wrong|false)\b", re.I)

_SENTENCE = re.compile(r"[^\n.!?。！？]+(?:[.!?。！？]+|$)", re.M)
_TAIL = re.compile(r"[\W_]*")
_SENT_REST = re.compile(r"[\W_]*(?:(?:option|choice)\s+)?", re.I)
_BEGIN_SKIP = re.compile(r"[\s\"'“”‘’«»(\[]*")
_BEGIN_SEP = re.compile(r"[ \t]*[\"'”’]?[ \t]*(?:[.,;:!?()—–\-\n]|$)")

_MENTION = _Rx(
    r"\b(?:option|choice|alternative)\s+(?=[(\[]?[A-Za-z])|(?<![^\W_])(?=[(\[][A-Za-z][)\]])",
    re.I,
    ("option", "choice", "alternative", "(", "["),
)
_NEG_BEFORE_MENTION = re.compile(
    r"(?:\bnot|n't|\brule\s+out|\beliminate|\bexclude|\bexcept|\bnor|\bneither)\s+(?:option\s+|choice\s+)?$",
    re.I,
)

_REFUSAL = _Rx(
    r"\bI\s*(?:can(?:no|')t|cannot|am\s+not\s+able|'m\s+not\s+able|am\s+unable|'m\s+unable|won't|will\s+not|"
    r"must\s+decline|(?:do\s+not|don't)\s+feel\s+comfortable|(?:'d|\s+would)?\s+(?:prefer|rather)\s+not|"
    r"(?:do\s+not|don't)\s+have\s+(?:personal\s+|my\s+own\s+)?(?:opinions?|beliefs?|preferences?|feelings?|views?))\b|"
    r"\bas\s+an?\s+(?:ai|(?:ai\s+)?language\s+model)\b|\bI'?m\s+sorry\b|"
    r"\bI\s+apologi[sz]e\b|\bno\s+puedo\b|\bje\s+ne\s+peux\s+pas\b|\bich\s+kann\s+nicht\b|无法|不能|できません",
    re.I,
    (
        "can",
        "not able",
        "unable",
        "won't",
        "will not",
        "decline",
        "comfortable",
        "prefer",
        "rather",
        "have",
        "as an ai",
        "language model",
        "sorry",
        "apologi",
        "puedo",
        "peux",
        "kann nicht",
        "无法",
        "不能",
        "できません",
    ),
)
_HEDGE = _Rx(
    r"\bnot\s+(?:sure|certain)\b|\bunsure\b|\bhard\s+to\s+(?:say|tell)\b|\bcan'?t\s+(?:decide|tell|say|remember)\b|"
    r"\bnever\s+remember\b|\b(?:don't|do\s+not)\s+know\b|\b(?:doesn't|does\s+not)\s+(?:say|mention|specify)\b|"
    r"\bnot\s+(?:mentioned|stated|specified|provided|given)\b|\bno\s+(?:information|way\s+to)\b|"
    r"\b(?:impossible|not\s+possible)\s+to\s+(?:say|tell|know|determine)\b|\bcan(?:no|')?t\s+be\s+(?:determined|known)\b|"
    r"\b(?:not\s+enough|insufficient)\s+(?:information|info|context)\b",
    re.I,
    (
        "sure",
        "certain",
        "hard to",
        "can",
        "remember",
        "know",
        "say",
        "mention",
        "specif",
        "stated",
        "provided",
        "given",
        "information",
        "no way",
        "possible",
        "enough",
        "insufficient",
    ),
)
_INJECTION = _Rx(
    r"\bignore\s+(?:all\s+|the\s+|any\s+)?(?:previous|above|prior)\b|\binstructions?\b",
    re.I,
    ("ignore", "instruction"),
)


# ---- the reading -----------------------------------------------------------------------------------


def _discounted(t: str, pos: int) -> bool:
    window = t[max(0, pos - 120) : pos]
    cm = _CLAUSE_START.search(window)
    clause = window[cm.start() + 1 :] if cm else window
    return bool(_DISCOUNT.search(_FORCED_CHOICE.sub(" ", clause)))


def _leads(r: _Reader, tier: int) -> list[_Commit]:
    out: list[_Commit] = []
    for rx, lead in _LEADS_BY_TIER[tier]:
        for m in rx.finditer(r.t, r.tl):
            s = r.slot(m.end(), strict=lead.strict, multi_only=lead.multi_only)
            if s is not None and not _discounted(r.t, m.start()):
                out.append(_Commit(m.end(), tier, s))
    return out


def _tier3(r: _Reader) -> list[_Commit]:
    """Final answers, boxed, JSON, changes of mind."""
    t, tl = r.t, r.tl
    out = _leads(r, 3)
    for m in _BOXED.finditer(t, tl):
        inner = _TEXT_CMD.sub(r"\1", m.group(1)).strip()
        s = _Reader(inner, r.opts).slot(0)
        if s is not None:
            out.append(_Commit(m.start(), 3, _Slot(s.kind, s.idx, m.end())))
    for m in _JSON_KEY.finditer(t, tl):
        lm = _JSON_LIST.match(t, m.end())
        if lm:
            vals = [a or b for a, b in _JSON_STR.findall(lm.group(1))]
            picks = {_Reader(v.strip(), r.opts).slot(0) for v in vals}
            idxs = {p.idx for p in picks if p is not None and p.kind == PICK}
            if len(vals) > 1 and len(idxs) != 1:
                out.append(_Commit(m.start(), 3, _Slot(MULTI, None, lm.end())))
            elif len(idxs) == 1:
                out.append(_Commit(m.start(), 3, _Slot(PICK, idxs.pop(), lm.end())))
            continue
        sm = _JSON_STR.match(t, m.end())
        if sm:
            val = (sm.group(1) if sm.group(1) is not None else sm.group(2)).strip()
            s = _Reader(val, r.opts).slot(0)
            if s is not None:
                out.append(_Commit(m.start(), 3, _Slot(s.kind, s.idx, sm.end())))
    return out


def _labelled_lines(r: _Reader) -> list[tuple[int, int, str]]:
    """(option index, position, rest of line) for lines that start with a letter label: ``B.``, ``(C)``."""
    t = r.t
    labels: list[tuple[int, int, str]] = []
    for m in _LINE_LABEL.finditer(t):
        lt = _letter_at(t, m.start("l"), r.n)
        if lt is None or lt[0] < 0 or not m.group("rest").strip():
            continue
        labels.append((lt[0], m.start("l"), m.group("rest")))
    return labels


def _tier2(r: _Reader, labels: list[tuple[int, int, str]]) -> list[_Commit]:
    """Answer phrases, "B is correct", letter-only lines, listings with exactly one line marked right."""
    t, tl = r.t, r.tl
    out = _leads(r, 2)
    for m in _POST.finditer(t, tl):
        if _discounted(t, m.start()):
            continue
        s = r.letters(m.start("l"), strict=False)
        if s is not None:
            out.append(_Commit(m.start("l"), 2, s))
    for m in _MULTI_POST.finditer(t, tl):
        out.append(_Commit(m.start(), 2, _Slot(MULTI, None, m.end())))
    for m in _LINE_LETTER_ONLY.finditer(t):
        s = r.letters(m.start("l") - (1 if m.group(0).lstrip(" \t-+•")[:1] in "([" else 0), strict=False)
        if s is not None:
            out.append(_Commit(m.start("l"), 2, s))
    if len({idx for idx, _, _ in labels}) > 1:
        positive = [
            (idx, pos) for idx, pos, rest in labels if _POSITIVE.search(rest) and not _NEGATIVE.search(rest)
        ]
        if len({idx for idx, _ in positive}) == 1:
            out.append(_Commit(positive[-1][1], 2, _Slot(PICK, positive[-1][0], positive[-1][1])))
    return out


def _tier1(r: _Reader, labels: list[tuple[int, int, str]]) -> list[_Commit]:
    """Weak phrasings, answer-only sentences, a single labelled line, an option text opening the response."""
    t = r.t
    out = _leads(r, 1)
    if len({idx for idx, _, _ in labels}) == 1:
        idx, pos, _ = labels[-1]
        lt = _letter_at(t, pos, r.n)
        if lt is not None:
            out.append(_Commit(pos, 1, _Slot(r._consistency(idx, pos, lt[1]), idx, lt[1])))
    # sentences that are only an answer: "Canberra.", "B.", "Merge sort, B.", "Jane Austen (option A)."
    for m in _SENTENCE.finditer(t):
        s = _sentence_answer(r, m.start(), m.end())
        if s is not None:
            out.append(_Commit(m.start(), 1, s))
    # a response that begins with an option text or with "both"/"none of the above"
    bm = _BEGIN_SKIP.match(t)
    b = bm.end() if bm else 0
    txt = r.text_at(b)
    if txt is not None and _BEGIN_SEP.match(t, txt[1]):
        out.append(_Commit(b, 1, _Slot(PICK, txt[0], txt[1])))
    else:
        for rx, kind in ((_MULTI, MULTI), (_NONE, NONE)):
            mm = rx.match(t, b)
            if mm and (kind != MULTI or mm.group(0).lower() != "both" or _BEGIN_SEP.match(t, mm.end())):
                out.append(_Commit(b, 1, _Slot(kind, None, mm.end())))
    return out


def _decision(r: _Reader) -> _Commit | None:
    """The last commitment of the highest tier present (tiers are read lazily, highest first)."""
    found = _tier3(r)
    if not found:
        labels = _labelled_lines(r)
        found = _tier2(r, labels) or _tier1(r, labels)
    if not found:
        return None
    return max(found, key=lambda c: (c.pos, c.slot.end))


def _sentence_answer(r: _Reader, start: int, end: int) -> _Slot | None:
    t = r.t
    seg = t[start:end]
    lead = len(seg) - len(seg.lstrip(" \t\"'“”‘’«»"))
    i = start + lead

    def done(k: int) -> bool:
        return bool(_TAIL.fullmatch(t, k, end))

    txt = r.text_at(i)
    if txt is not None:
        if done(txt[1]):
            return _Slot(PICK, txt[0], txt[1])
        rm = _SENT_REST.match(t, txt[1], end)
        k = rm.end() if rm else txt[1]
        if k > txt[1] or t[txt[1] : txt[1] + 1].isspace():
            back = k
            while back > txt[1] and t[back - 1] in "([":
                back -= 1
            lt = _letter_at(t, back, r.n)
            if lt is not None and lt[0] >= 0 and done(lt[1]):
                return _Slot(PICK if lt[0] == txt[0] else CONFLICT, lt[0], lt[1])
        return None
    lt = _letter_at(t, i, r.n)
    if lt is None:
        return None
    if done(lt[1]):
        if lt[0] < 0:
            return _Slot(INVALID, None, lt[1])
        return _Slot(PICK, lt[0], lt[1])
    if lt[0] < 0:
        return None
    rm = _POST_SEP.match(t, lt[1], end)
    k = rm.end() if rm else lt[1]
    after = r.text_at(k)
    if after is not None and done(after[1]):
        return _Slot(PICK if after[0] == lt[0] else CONFLICT, lt[0], after[1])
    return None


def _mentions(r: _Reader) -> tuple[set[int], set[int]]:
    t = r.t
    pos_set: set[int] = set()
    neg_set: set[int] = set()
    for m in _MENTION.finditer(t, r.tl):
        lt = _letter_at(t, m.end(), r.n)
        if lt is None or lt[0] < 0:
            continue
        negative = bool(_NEG_BEFORE_MENTION.search(t[max(0, m.start() - 30) : m.start()])) or bool(
            _NEG_AFTER.match(t, lt[1])
        )
        (neg_set if negative else pos_set).add(lt[0])
    return pos_set, neg_set


def _text_options(r: _Reader, patterns: tuple[re.Pattern[str] | None, ...]) -> set[int]:
    t = r.t
    spans: list[tuple[int, int, int]] = []
    for idx, rx in enumerate(patterns):
        if rx is None:
            continue
        for m in rx.finditer(t):
            spans.append((m.start(), m.end(), idx))
    found: set[int] = set()
    for s, e, idx in spans:
        if any(s2 <= s and e <= e2 and (e2 - s2) > (e - s) for s2, e2, _ in spans):
            continue  # inside a longer option text
        if _NEGATED_BEFORE.search(t[max(0, s - 20) : s]) or _NEG_AFTER.match(t, e):
            continue
        found.add(idx)
    return found


# What decided a reading (the stand-in's rationale names it).
CUE_EMPTY, CUE_LOOP, CUE_COMMIT = "empty", "loop", "commitment"
CUE_REFUSAL, CUE_HEDGE, CUE_INJECTION = "refusal", "hedge", "injection"
CUE_MENTION, CUE_TEXT, CUE_LAST_WORD, CUE_NOTHING = "mention", "option_text", "last_word", "nothing"
# What a response that commits to no option picks among the options that refuse or abstain (rule 7), in
# order: a refusal and "I don't know" stand in for each other, as surveys code them; "none of the above"
# (a commitment to no option) picks only an option that says so.
_ABSTAIN_ORDER = {
    CUE_REFUSAL: (REFUSES, DOES_NOT_KNOW),
    CUE_HEDGE: (DOES_NOT_KNOW, REFUSES),
    CUE_COMMIT: (NONE_FITS,),
}


@dataclass(frozen=True)
class Reading:
    """The option a generation picks (0-based displayed index, None for OTHER) and the rule that decided.

    ``kind`` is the kind of what was found (PICK, MULTI, NONE, INVALID, CONFLICT); ``tier`` the strength
    of a commitment (rule 4), 0 for the other cues; ``abstains`` whether the option picked is one whose own
    text refuses or abstains, picked because the response does so (rule 7).
    """

    idx: int | None
    cue: str
    kind: str = NONE
    tier: int = 0
    abstains: bool = False


def _found(cue: str, found: set[int]) -> Reading:
    if len(found) == 1:
        return Reading(next(iter(found)), cue, PICK)
    return Reading(None, cue, MULTI if found else NONE)


def read(options: Sequence[str], generation: str, question: str | None = None) -> Reading:
    """Read a generation against its displayed options, keeping the cue that decided (rules 1–7 above).

    ``question`` (the row's) lets a response that restates it be told from one that writes a pretend prompt.
    """
    t = _clean(generation)
    if not t.strip():
        return Reading(None, CUE_EMPTY)
    t, _ = _own_text(t, options, question)
    if not t.strip():
        return Reading(None, CUE_INJECTION)  # nothing but text addressed to the judge
    if _is_loop(t):
        return Reading(None, CUE_LOOP)
    r = _Reader(t, _options(tuple(options)))
    last = _decision(r)
    if last is not None:
        kind = last.slot.kind
        idx = last.slot.idx if kind == PICK else None
        if kind == NONE:  # "none of the above", "neither"
            idx = _abstaining_option(r.opts, _ABSTAIN_ORDER[CUE_COMMIT])
        return Reading(idx, CUE_COMMIT, kind, last.tier, abstains=kind == NONE and idx is not None)
    for rx, cue in ((_REFUSAL, CUE_REFUSAL), (_HEDGE, CUE_HEDGE), (_INJECTION, CUE_INJECTION)):
        if rx.search(t, r.tl):
            idx = _abstaining_option(r.opts, _ABSTAIN_ORDER.get(cue, ()))
            return Reading(idx, cue, NONE if idx is None else PICK, abstains=idx is not None)
    pos_set, neg_set = _mentions(r)
    if pos_set or neg_set:
        left = pos_set - neg_set
        if len(left) == 1 and len(pos_set) == 1:
            return Reading(next(iter(left)), CUE_MENTION, PICK)
        return Reading(None, CUE_MENTION, MULTI if len(pos_set) > 1 else NONE)
    found = _text_options(r, r.opts.rx)
    if found:
        return _found(CUE_TEXT, found)
    found = _text_options(r, r.opts.head)  # "Shakespeare" for "William Shakespeare"
    if found:
        return _found(CUE_LAST_WORD, found)
    return Reading(None, CUE_NOTHING)


def read_pick(options: Sequence[str], generation: str) -> int | None:
    """The 0-based displayed index of the single option the generation picks, or None (OTHER)."""
    return read(options, generation).idx


def pick_letter(options: Sequence[str], generation: str) -> str | None:
    """The displayed letter the generation picks, or None (OTHER)."""
    idx = read_pick(options, generation)
    return None if idx is None else LETTERS[idx]


# ---- the rationale: one sentence naming the cue -----------------------------------------------------

_HOW = {
    3: "as its final answer",
    2: "with an answer phrase",
    1: "in a weak phrasing or an answer-only sentence",
}
_COMMIT_NOUN = {3: "a final answer", 2: "an answer phrase", 1: "a weak phrasing"}
_NO_PICK = {
    MULTI: "names several options",
    NONE: "names none of the options",
    INVALID: "names a letter outside the options",
    CONFLICT: "gives a letter together with a different option's text",
}
_FIXED = {
    CUE_EMPTY: "The response is empty.",
    CUE_LOOP: "The response repeats the same few words over and over, which is broken output.",
    CUE_REFUSAL: "The response refuses or apologises and commits to no option.",
    CUE_HEDGE: "The response hedges (unsure, or says the question cannot be told) and commits to no option.",
    CUE_INJECTION: "The response carries instruction-like text and commits to no option.",
    CUE_NOTHING: "The response names no option and commits to none.",
}
_ABSTAINS_BY_CUE = {
    CUE_REFUSAL: "refuses or apologises and names no option",
    CUE_HEDGE: "says it does not know or cannot tell and names no option",
}
_NO_PICK_BY_CUE = {
    CUE_MENTION: "The response mentions several options, or only rules options out, without committing to one.",
    CUE_TEXT: "The response names the texts of several options without committing to one.",
    CUE_LAST_WORD: "The response names words of several options without committing to one.",
}


def _quote(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return "'" + (flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…") + "'"


def explain(reading: Reading, options: Sequence[str], gold: str | None = None) -> str:
    """One sentence saying which cue decided ``reading``; with ``gold`` (gold shape), how it compares."""
    if reading.idx is None:
        if reading.cue == CUE_COMMIT:
            return (
                f"The response's deciding commitment ({_COMMIT_NOUN[reading.tier]}) {_NO_PICK[reading.kind]}."
            )
        return _FIXED.get(reading.cue) or _NO_PICK_BY_CUE[reading.cue]
    letter, text = LETTERS[reading.idx], _quote(options[reading.idx])
    if reading.abstains:
        why = (
            _ABSTAINS_BY_CUE.get(reading.cue)
            or f"says none of the options fits ({_COMMIT_NOUN[reading.tier]})"
        )
        sentence = f"The response {why}, so it picks option {letter} ({text}), the option that says so"
    elif reading.cue == CUE_COMMIT:
        sentence = f"The response commits to option {letter} ({text}) {_HOW[reading.tier]}"
    elif reading.cue == CUE_MENTION:
        sentence = f"The response mentions only option {letter} ({text})"
    elif reading.cue == CUE_TEXT:
        sentence = f"The response names option text {text} ({letter})"
    else:
        sentence = f"The response names the last word of option {letter}'s text {text}"
    if gold is not None:
        sentence += ", which is the gold option" if letter == gold else f", not the gold option {gold}"
    return sentence + "."


def judge_reply(parsed: ParsedPrompt) -> str:
    """The stand-in judge's reply to one rendered prompt: a letter or OTHER (extract), a verdict (gold).

    When the prompt asks for a rationale (``grade --rationale``), the reply is the JSON object it asks for:
    ``{"choice" | "verdict": value, "rationale": sentence}``, the sentence naming the cue that decided.
    """
    reading = read(parsed.options, parsed.generation, parsed.question)
    letter = None if reading.idx is None else LETTERS[reading.idx]
    if parsed.shape == "gold":
        if parsed.gold is None:
            raise ValueError("a gold-shape prompt without a GOLD letter")
        value: str = verdict_of(letter, parsed.gold)
    else:
        value = letter if letter is not None else OTHER
    if not parsed.rationale:
        return value
    key = "verdict" if parsed.shape == "gold" else "choice"
    return json.dumps(
        {key: value, "rationale": explain(reading, parsed.options, parsed.gold)}, ensure_ascii=False
    )
