"""A fake reasoning model on 127.0.0.1 for the `generate` tests: OpenAI-compatible chat completions, a
scripted stand-in (not an LLM) that thinks before it answers.

Built on :class:`tests.judge_servers.ScriptedJudge` (the same aiohttp server in a thread, the same recorded
:class:`~tests.judge_servers.Call` s), with one more action, :class:`Thought`: a reply that carries its
thinking in one of the forms servers use —

- ``reasoning_content`` (vLLM with a reasoning parser, DeepSeek) or ``reasoning`` (OpenRouter, newer vLLM):
  the thinking in that field of the message, the answer alone as the content;
- ``inline``: ``<think>…</think>`` then the answer, all in the content (vLLM without a reasoning parser,
  many open models served as they are).

:func:`reasoning_model` reads the options out of a prompt rendered by `mcqaudit orient` (as
:func:`tests.judge_servers.answering_model` does) and thinks aloud about a *wrong* option's letter before it
answers with the scripted option's displayed letter, so a parser that reads the thinking reads the wrong
letter. A configurable share of replies is cut by the token limit: the thinking never closes, there is no
answer, ``finish_reason`` is ``length`` and ``completion_tokens`` is the request's ``max_tokens``. Which
replies are cut is decided by a seeded hash of (prompt, request seed), not by arrival order, so a run at
any concurrency, and a re-run, cuts the same ones. Every reply carries ``usage`` unless a test replaces it
(:data:`NO_USAGE` leaves the key out; any other value, null included, is sent as it is, malformed ones too).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web

from mcqaudit.vocab import LETTERS
from tests.judge_servers import Action, Answer, Call, ScriptedJudge, Status, displayed_options

FORMS = ("reasoning_content", "reasoning", "inline")
COUNTED = object()  # Thought.usage: counted from the text (the default)
NO_USAGE = object()  # Thought.usage: send no usage key at all


@dataclass(frozen=True)
class Thought:
    """One reasoning model's reply. ``answer`` None: cut off inside the thinking (nothing after it)."""

    thinking: str
    answer: str | None
    form: str = "reasoning_content"  # one of FORMS
    finish_reason: str = "stop"
    usage: Any = (
        COUNTED  # COUNTED: from the text; NO_USAGE: left out; anything else (None too): sent as it is
    )
    delay_s: float = 0.0

    def content(self) -> str | None:
        if self.form != "inline":
            return self.answer  # vLLM sends null content when the thinking ran into the limit
        if self.answer is None:
            return f"<think>\n{self.thinking}"  # never closes
        return f"<think>\n{self.thinking}\n</think>\n\n{self.answer}"

    def message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": self.content()}
        if self.form != "inline":
            msg[self.form] = self.thinking
        return msg


Reasoner = Callable[[Call], "Action | Thought"]


def tokens(text: str) -> int:
    """A rough token count (four characters a token), what the fake server says it used."""
    return max(1, len(text) // 4)


def cut_share(key: str, seed: int) -> float:
    """A number in [0, 1) fixed by (seed, key): the same prompt and request seed always draw the same."""
    digest = hashlib.sha256(f"{seed}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def reasoning_model(
    answers: dict[str, Answer], *, form: str = "reasoning_content", truncate: float = 0.0, seed: int = 0
) -> Reasoner:
    """A scripted reasoning "model": the question (a key of ``answers``) found in the prompt is answered as
    its :class:`~tests.judge_servers.Answer` says (the displayed letter of the picked option text, or a
    sentence naming the text), after thinking that names another option's letter first. A share
    ``truncate`` of the replies (seeded, see :func:`cut_share`) is cut off inside the thinking, with
    ``finish_reason = "length"`` and no answer."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}")

    def respond(call: Call) -> Action | Thought:
        options = displayed_options(call.user)
        question = next((q for q in answers if q in call.user), None)
        if question is None or not options:
            return Status(400, "the reasoning model got a prompt it has no script for")
        a = answers[question]
        assert a.pick is not None and a.style in ("letter", "sentence"), a
        letter = LETTERS[options.index(a.pick)]
        decoy = next(c for c in LETTERS[: len(options)] if c != letter)
        if cut_share(f"{call.user}\x00{call.body.get('seed')}", seed) < truncate:
            # ran into the token limit while still thinking: the thought stops mid-sentence
            return Thought(f"Option {decoy} looks plausible at first, and", None, form, "length")
        thinking = (
            f"Option {decoy} looks plausible at first, and I was tempted by it. "
            f"But {a.pick} fits the question better, so the answer is not {decoy}."
        )
        answer = letter if a.style == "letter" else f"I think it is {a.pick}."
        return Thought(thinking, answer, form)

    return respond


class ReasoningServer(ScriptedJudge):
    """``with ReasoningServer(reasoning_model(...)) as srv:`` … as :class:`ScriptedJudge` (``base_url``,
    ``calls``, ``count``, ``reset``); a responder may return a :class:`Thought` or any ScriptedJudge action."""

    def __init__(self, responder: Reasoner, *, model: str = "reasoner"):
        super().__init__(responder, model=model)  # type: ignore[arg-type]

    async def _perform(self, action: Any, body: dict[str, Any]) -> web.StreamResponse:
        if not isinstance(action, Thought):
            return await super()._perform(action, body)
        if action.delay_s:
            await asyncio.sleep(action.delay_s)
        completion = self._completion(None, body, None, None, action.finish_reason)
        completion["choices"][0]["message"] = action.message()
        if action.usage is NO_USAGE:
            del completion["usage"]
        elif action.usage is not COUNTED:
            completion["usage"] = action.usage
        else:
            user = next(
                (m["content"] for m in reversed(body.get("messages") or []) if m.get("role") == "user"), ""
            )
            spent = (
                int(body.get("max_tokens") or 0)
                if action.finish_reason == "length"
                else tokens(action.thinking) + tokens(action.answer or "")
            )
            prompt = tokens(user)
            completion["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": spent,
                "total_tokens": prompt + spent,
            }
        return web.json_response(completion)


def with_reply(
    responder: Callable[[Call], Action | Thought],
    when: Callable[[Call], bool] = lambda c: True,
    **changes: Any,
) -> Callable[[Call], Action | Thought]:
    """The same responder, its :class:`Thought` replies to the calls ``when`` picks changed (``usage=…``,
    ``finish_reason=…``)."""

    def respond(call: Call) -> Action | Thought:
        got = responder(call)
        return replace(got, **changes) if isinstance(got, Thought) and when(call) else got

    return respond
