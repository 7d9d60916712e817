"""Scripted OpenAI-compatible servers on 127.0.0.1 for the judge tests and the `generate` tests.

A real aiohttp server in a background thread, speaking enough of POST /v1/chat/completions for the real
`openai` client. Each request is handed to a *responder* that returns an action: a reply text (with the
first token's top log-probs, when the request asks for them and the reply has some), an HTTP status (with
headers such as retry-after), a hang, or a garbage body. Every request is recorded, so a test can count
what was sent, with which headers, for which prompt.

:func:`answering_model` is the "model under evaluation" for `generate`: a scripted stand-in, not an LLM.
It reads the options out of a prompt rendered by `mcqaudit orient` and answers with a scripted option
text, in a scripted style, so that every letter it gives follows the order it was shown.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from mcqaudit.judge.prompts import ParsedPrompt, parse_rendered, prompt_hash
from mcqaudit.vocab import LETTERS


@dataclass(frozen=True)
class Call:
    index: int  # 0-based order of arrival at the server
    body: dict[str, Any]
    system: str
    user: str
    parsed: ParsedPrompt | None
    authorization: str | None
    seen_before: int  # how many earlier requests carried the same prompt

    @property
    def prompt_hash(self) -> str:
        return prompt_hash(self.system, self.user)


@dataclass(frozen=True)
class Reply:
    text: str | None
    delay_s: float = 0.0
    model: str | None = None
    system_fingerprint: str | None = None
    finish_reason: str = "stop"  # "length": the endpoint says it cut the reply off at max_tokens
    # the first token's top log-probs (token, logprob), sent when the request has logprobs=True
    top_logprobs: tuple[tuple[str, float], ...] | None = None
    # held (after delay_s) until the test sets this event, for at most HOLD_MAX_S: a reply that waits for
    # something the test sees happen, not for a time that a loaded machine may outlast
    until: threading.Event | None = None


HOLD_MAX_S = 120.0


@dataclass(frozen=True)
class Status:
    code: int
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass(frozen=True)
class Hang:
    seconds: float


@dataclass(frozen=True)
class Garbage:
    body: str = "<html>bad gateway</html>"
    content_type: str = "text/html"


Action = Reply | Status | Hang | Garbage
Responder = Callable[[Call], Action]
# What a reply's ``usage`` says, from the request's body and the reply text: the counts, or None (no usage)
UsageRule = Callable[[dict[str, Any], str | None], dict[str, int] | None]
FIXED_USAGE = {"prompt_tokens": 100, "completion_tokens": 1, "total_tokens": 101}


def option_match(parsed: ParsedPrompt) -> str:
    """A tiny heuristic: the single option whose text occurs in the generation, else OTHER."""
    gen = parsed.generation.lower()
    hits = [LETTERS[i] for i, o in enumerate(parsed.options) if o.lower() in gen]
    letter = hits[0] if len(hits) == 1 else None
    if parsed.shape == "gold":
        if letter is None:
            return "OTHER"
        return "CORRECT" if letter == parsed.gold else "INCORRECT"
    return letter or "OTHER"


def heuristic(call: Call) -> Action:
    if call.parsed is None:
        return Reply("OTHER")
    return Reply(option_match(call.parsed))


# --- the answering model (for `generate`) --------------------------------------------------------------

_OPTION_LINE = re.compile(r"^([A-Z])\. (.*)$", re.M)


def displayed_options(prompt: str) -> list[str]:
    """The options of a prompt rendered by orient's default template (`A. text` lines), in displayed order."""
    return [m.group(2) for m in _OPTION_LINE.finditer(prompt)]


@dataclass(frozen=True)
class Answer:
    """What the answering model says to one question: the option text it picks (None: it refuses), and how."""

    pick: str | None
    style: str = "letter"  # letter: "B" | sentence: "I think it is <text>." | refuse


def answering_model(answers: dict[str, Answer]) -> Responder:
    """A scripted "model" for `generate` (not an LLM): the question whose text occurs in the prompt gets its
    scripted :class:`Answer`, given as the displayed letter of the picked text (style letter), or a sentence
    naming the text, or a refusal. A letter reply carries top log-probs with that letter first."""

    def respond(call: Call) -> Action:
        options = displayed_options(call.user)
        question = next((q for q in answers if q in call.user), None)
        if question is None or not options:
            return Status(400, "the answering model got a prompt it has no script for")
        a = answers[question]
        if a.pick is None or a.style == "refuse":
            return Reply("I would rather not answer that.", top_logprobs=(("I", -0.05), ("Sorry", -3.2)))
        letter = LETTERS[options.index(a.pick)]
        if a.style == "sentence":
            return Reply(f"I think it is {a.pick}.", top_logprobs=(("I", -0.1), (letter, -2.5)))
        others = [c for c in LETTERS[: len(options)] if c != letter]
        top = [(letter, -0.1), (f" {letter}", -2.3)] + [(c, -4.0 - i) for i, c in enumerate(others)]
        return Reply(letter, top_logprobs=(*top, ("The", -6.0)))

    return respond


class ScriptedJudge:
    """``with ScriptedJudge(responder) as srv:`` … ``srv.base_url``, ``srv.calls``, ``srv.count``."""

    def __init__(
        self,
        responder: Responder = heuristic,
        *,
        model: str = "scripted-judge",
        latency_s: float = 0.0,
        usage: UsageRule | None = None,
    ):
        """``usage``: what each reply's ``usage`` reports (default: a fixed 100 prompt + 1 completion)."""
        self.responder = responder
        self.model = model
        self.latency_s = latency_s
        self.usage = usage
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.in_flight = 0
        self.max_in_flight = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.calls)

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self._seen.clear()
            self.max_in_flight = 0

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return web.json_response({"error": {"message": "bad json"}}, status=400)
        messages = body.get("messages") or []
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
        try:
            parsed: ParsedPrompt | None = parse_rendered(user)
        except ValueError:
            parsed = None
        h = prompt_hash(system, user)
        with self._lock:
            call = Call(
                len(self.calls),
                body,
                system,
                user,
                parsed,
                request.headers.get("Authorization"),
                self._seen[h],
            )
            self._seen[h] += 1
            self.calls.append(call)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            action = self.responder(call)
            return await self._perform(action, body)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _stats(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"requests": self.count, "max_in_flight": self.max_in_flight})

    async def _perform(self, action: Action, body: dict[str, Any]) -> web.StreamResponse:
        if isinstance(action, Hang):
            await asyncio.sleep(action.seconds)
            return web.json_response(self._completion("OTHER", body, None, None, "stop"))
        if isinstance(action, Garbage):
            return web.Response(text=action.body, content_type=action.content_type)
        if isinstance(action, Status):
            if action.delay_s:
                await asyncio.sleep(action.delay_s)
            return web.json_response(
                {"error": {"message": action.message, "type": "scripted"}},
                status=action.code,
                headers=action.headers,
            )
        if action.delay_s:
            await asyncio.sleep(action.delay_s)
        if action.until is not None:
            deadline = time.monotonic() + HOLD_MAX_S
            while not action.until.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        completion = self._completion(
            action.text, body, action.model, action.system_fingerprint, action.finish_reason
        )
        if body.get("logprobs") and action.top_logprobs:
            k = int(body.get("top_logprobs") or 0)
            top = [{"token": t, "logprob": lp, "bytes": None} for t, lp in action.top_logprobs[:k]]
            first = top[0] if top else {"token": action.text or "", "logprob": 0.0, "bytes": None}
            completion["choices"][0]["logprobs"] = {"content": [{**first, "top_logprobs": top}]}
        return web.json_response(completion)

    def _completion(
        self, text: str | None, body: dict[str, Any], model: str | None, fp: str | None, finish_reason: str
    ) -> dict[str, Any]:
        usage = FIXED_USAGE if self.usage is None else self.usage(body, text)
        out = {
            "id": f"chatcmpl-{time.monotonic_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model or self.model,
            "system_fingerprint": fp,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish_reason,
                }
            ],
        }
        if usage is not None:
            out["usage"] = dict(usage)
        return out

    def __enter__(self) -> ScriptedJudge:
        started = threading.Event()
        errors: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                app = web.Application()
                app.router.add_post("/v1/chat/completions", self._handle)
                app.router.add_get("/stats", self._stats)
                runner = web.AppRunner(app, shutdown_timeout=0.2, handler_cancellation=True)
                loop.run_until_complete(runner.setup())
                site = web.TCPSite(runner, "127.0.0.1", 0)
                loop.run_until_complete(site.start())
                server = site._server
                assert isinstance(server, asyncio.Server)
                self.port = server.sockets[0].getsockname()[1]
                self._runner = runner
            except BaseException as exc:  # pragma: no cover - surfaced to the test
                errors.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="scripted-judge", daemon=True)
        self._thread.start()
        started.wait(10)
        if errors:
            raise errors[0]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)


# --- fixture rows -------------------------------------------------------------------------------------


def add_rows(study: Any, rows: list[dict[str, Any]]) -> list[str]:
    """Insert generation rows straight into ``gen_rows`` (no ingest): keys as in the table; defaults fill
    the rest. ``strict_letter`` is taken as given (None = the pre-filter did not resolve the row)."""
    ids = []
    with study.write() as con:
        for k, r in enumerate(rows):
            row_id = r.get("row_id", f"r{k:05d}")
            ids.append(row_id)
            gen = r["generation"]
            con.execute(
                """INSERT INTO gen_rows (row_id, arm, item_id, orientation, sample, question, options, gold_letter,
                       generation, is_blank, prompt, strict_letter, ingest_id)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)""",
                [
                    row_id,
                    r.get("arm", "base"),
                    r.get("item_id", f"item{k}"),
                    r.get("orientation", LETTERS[: len(r["options"])]),
                    r.get("sample", 0),
                    r.get("question", "Which one?"),
                    list(r["options"]),
                    r.get("gold_letter", "A"),
                    gen,
                    not gen.strip(),
                    r.get("prompt"),
                    r.get("strict_letter"),
                ],
            )
    return ids


def main() -> None:
    """``python -m tests.judge_servers --port P --latency-ms MS``: serve the heuristic until killed."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--latency-ms", type=float, default=0.0)
    args = ap.parse_args()
    with ScriptedJudge(heuristic, latency_s=args.latency_ms / 1000) as srv:
        print(srv.base_url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
