"""Hypothesis fuzzing of every letter reader and of the judge reply parser (issue 13): hostile text (any
Unicode, NUL and control characters, BOM, CRLF, ligatures and look-alikes, very long runs, deep JSON) never
raises, and the result is always legal: a letter within the options or None; a legal value (a letter
within the options or OTHER, CORRECT/INCORRECT/OTHER) or an error with a kind. Bounded: the whole file
runs in well under 30 s.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcqaudit import parsers
from mcqaudit.judge.prompts import legal_values
from mcqaudit.judge.replies import REPLY_ERROR_KINDS, cut_off, parse_reply
from mcqaudit.vocab import LETTERS, MAX_OPTIONS

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# pieces that have broken text readers before: look-alikes, ligatures whose upper case is two letters,
# combining marks, zero-width and bidi controls, NUL, BOM, CRLF, answer-ish words
_PIECES = [
    "A", "b", "(C)", "[D]", "**B**", "Answer:", "answer is", "The answer is", "Final Answer: ", "\\boxed{",
    "}", "ﬆ", "ﬁ", "ǅ", "ß", "İ", "Ａ", "Ｂ", "А", "В", "Ε", "\u0301", "\u200b", "\u202e", "\ufeff", "\x00",
    "\r\n", "\n", "\t", " ", "(", ")", ":", ".", "选B", "答案是C", "option ", "$$", "<b>", "{\"choice\": ",
    "\"", "'", "\\", "𝐀", "🅰", "①",
]  # fmt: skip
_chars = st.characters(codec="utf-8")  # lone surrogates cannot be stored, so no generation holds one
hostile_text = st.one_of(
    st.text(_chars, max_size=60),
    st.lists(st.sampled_from(_PIECES), max_size=20).map("".join),
    st.lists(st.one_of(st.sampled_from(_PIECES), _chars), max_size=20).map("".join),
    st.tuples(st.sampled_from(_PIECES), st.integers(100, 10_000)).map(lambda t: t[0] * t[1]),
)
hostile_options = st.lists(st.one_of(st.text(_chars, max_size=10), st.sampled_from(_PIECES)), max_size=30)
any_n = st.integers(-2, MAX_OPTIONS + 3)


def legal_letter(letter: str | None, n: int) -> bool:
    return letter is None or (
        isinstance(letter, str) and len(letter) == 1 and 1 <= n <= MAX_OPTIONS and letter in LETTERS[:n]
    )


@FUZZ
@given(hostile_text, hostile_options)
@example("ﬆ", ["x"] * 26)
@example("Answer: ﬆ", ["one", "two"])
@example("\x00B\x00", ["x", "y"])
def test_strict(text: str, options: list[str]) -> None:
    assert legal_letter(parsers.strict(text, options), len(options))


@FUZZ
@given(hostile_text, any_n)
@example("ﬆ", 26)
def test_naive_and_framework_parsers(text: str, n: int) -> None:
    assert legal_letter(parsers.naive(text, n), n)
    for parser in parsers.FRAMEWORK_PARSERS.values():
        assert legal_letter(parser.parse(text, n), n), parser.name


@FUZZ
@given(hostile_text, any_n)
@example("ﬆ is the answer", 26)
def test_letter_spans_point_at_their_letter(text: str, n: int) -> None:
    spans = parsers.letter_spans(text, n)
    assert set(spans) <= {"naive", *parsers.FRAMEWORK_PARSERS}
    for name, (letter, (start, end)) in spans.items():
        assert legal_letter(letter, n), name
        assert 0 <= start < end <= len(text), name
        assert text[start:end].upper() == letter, name  # the marked characters are the letter itself


def _user_readers() -> list:
    from mcqaudit.ingest.inspect_log import _single_letter
    from mcqaudit.ingest.lmeval import _letter

    return [("lm-eval", lambda v, opts: _letter(v, opts)), ("inspect", lambda v, opts: _single_letter(v))]


@FUZZ
@given(st.one_of(hostile_text, st.lists(hostile_text, max_size=2), st.integers(), st.none()), hostile_options)
@example("B", ["x", "y"])
def test_user_letter_readers(value: object, options: list[str]) -> None:
    """The `user` parser's letter, as the Inspect and lm-eval readers take it from a log. (Inspect's reader
    does not know the option count: only "a letter" is checked there.)"""
    for name, read in _user_readers():
        got = read(value, options)
        assert got is None or (isinstance(got, str) and len(got) == 1 and got in LETTERS), (name, got)


@pytest.mark.parametrize("value", ["ﬆ", "ﬅ"])
def test_user_letter_readers_on_ligatures(value: str) -> None:
    for name, read in _user_readers():
        got = read(value, ["x"] * 26)
        assert got is None or len(got) == 1, (name, got)


# ---- the judge reply parser ------------------------------------------------------------------------------

_json_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(_chars, max_size=8)
    ),
    lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=8), kids, max_size=3)
    ),
    max_leaves=8,
)
hostile_reply = st.one_of(
    hostile_text,
    st.dictionaries(
        st.sampled_from(["choice", "verdict", "rationale", "answer", ""]), _json_values, max_size=3
    ).map(json.dumps),
    st.tuples(
        st.sampled_from(["choice", "verdict"]), st.sampled_from([*LETTERS[:6], "OTHER", "CORRECT", "x"])
    ).map(lambda kv: json.dumps({kv[0]: kv[1], "rationale": "because"})),
    st.integers(1, 50_000).map(lambda d: '{"choice": ' + "[" * d + "]" * d + "}"),
    st.integers(1, 50_000).map(lambda d: '{"choice": ' + '{"a": ' * d + "1" + "}" * d + "}"),
    st.none(),
)


@FUZZ
@given(hostile_reply, st.sampled_from(["extract", "gold"]), st.integers(2, MAX_OPTIONS), st.integers(1, 512))
@example('{"choice": ' + "[" * 100_000 + "]" * 100_000 + "}", "extract", 4, 16)
@example('{"verdict": 1' + "0" * 5000 + "}", "gold", 4, 16)
@example('{"choice": "B", "choice": "C"}', "extract", 4, 16)
@example("\ufeffB", "extract", 4, 16)
@example("B\x00", "extract", 4, 16)
def test_reply_parser(reply: str | None, shape: str, n: int, max_tokens: int) -> None:
    for parsed in (parse_reply(reply, shape, n), cut_off(parse_reply(reply, shape, n), max_tokens)):
        if parsed.ok:
            assert parsed.value in legal_values(shape, n) and parsed.kind is None and parsed.error is None
            assert parsed.rationale is None or isinstance(parsed.rationale, str)
        else:
            assert parsed.value is None and parsed.kind in REPLY_ERROR_KINDS and parsed.error
