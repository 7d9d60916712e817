"""The stand-in judge: an OpenAI-compatible HTTP server on 127.0.0.1 that answers mcqaudit judge prompts
with a documented heuristic (:mod:`mcqaudit.standin.heuristic`). It is NOT an LLM.

It exists for demos, tests, benchmarks and dry runs (docs/design.md §5): an endpoint like any other, used only
when configured (``--judge-model standin-heuristic --judge-base-url http://127.0.0.1:PORT/v1``), and every
verdict it gives is a heuristic's. ``docs/standin.md`` describes the heuristic and its measured agreement.

Endpoints (``Authorization: Bearer <anything>`` required on ``/v1/*``, else 401, as a real API does):

- ``POST /v1/chat/completions``: reads the last user message, which must be a prompt made by
  :func:`mcqaudit.judge.prompts.render` (else 400); model must be ``standin-heuristic`` (else 404
  ``model_not_found``); answers a ``chat.completion`` whose content is one legal value (a letter or OTHER
  in the extract shape, CORRECT/INCORRECT/OTHER in the gold shape) — or, when the prompt's reply
  instruction asks for a rationale (``grade --rationale``), the JSON object it asks for with a one-sentence
  rationale naming the heuristic's cue — with ``usage`` estimated as characters / 4 and
  ``system_fingerprint: "standin-heuristic"``. Streaming is refused (400).
- ``GET /v1/models``, ``GET /v1/models/{id}``.
- The Batch API (``grade --batch``): ``POST /v1/files``, ``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``,
  ``POST /v1/batches``, ``GET /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, and
  ``GET /stats/batches``; see "the Batch API" below.
- ``GET /stats``: ``{"requests", "in_flight", "by_outcome", "by_model", "tokens"}``; outcomes are ``ok``,
  ``fail_500``, ``rate_limited_429``, ``garbage``, ``hang`` (fault injection) and ``bad_request_400``,
  ``unauthorized_401``, ``model_not_found_404`` (rejected requests). ``POST /stats/reset`` zeroes the
  counters *and* restarts the fault-injection random stream from ``seed``.

Fault injection (:class:`StandinOptions`): every request that passes validation draws one number from a
``random.Random(seed)`` stream, in arrival order, and is failed (500), rate limited (429 with
``retry-after-ms`` and an integer ``retry-after``), answered with an illegal reply (``garbage``), or left
hanging (``hang``: an hour, ended early only by shutdown) with the given probabilities; the rest are
answered. ``latency_ms`` is slept before every answer and fault except a hang. The same seed and the same
number of requests give the same counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import random
import secrets
import signal
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiohttp import web

from mcqaudit.judge.prompts import ParsedPrompt, parse_rendered
from mcqaudit.standin.heuristic import judge_reply
from mcqaudit.vocab import STANDIN_MODEL

MODEL_NAME = STANDIN_MODEL
SYSTEM_FINGERPRINT = STANDIN_MODEL  # what a client checks to say "not an LLM" (judge/client.py)
BANNER = "stand-in judge (heuristic, not an LLM) on http://{host}:{port}/v1"
HANG_SECONDS = 3600.0

FAULT_OUTCOMES = ("fail_500", "rate_limited_429", "garbage", "hang")
OUTCOMES = ("ok", *FAULT_OUTCOMES, "bad_request_400", "unauthorized_401", "model_not_found_404")

# Replies that no judge reply parser may accept, in either shape: prose, two values, empty.
GARBAGE_REPLIES = (
    "Hmm, maybe B or C",
    "I think the response is probably correct.",
    "A and B",
    "",
    "CORRECT or INCORRECT",
    "The response picks option",
)


@dataclass
class StandinOptions:
    """Latency and fault injection. Rates are probabilities per request; their sum must be at most 1."""

    latency_ms: float = 0
    fail_rate: float = 0
    rate_limit_rate: float = 0
    garbage_rate: float = 0
    hang_rate: float = 0
    seed: int = 0
    retry_after_s: float = 0.05

    def __post_init__(self) -> None:
        rates = {
            "fail_rate": self.fail_rate,
            "rate_limit_rate": self.rate_limit_rate,
            "garbage_rate": self.garbage_rate,
            "hang_rate": self.hang_rate,
        }
        for name, value in rates.items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, not {value}")
        if sum(rates.values()) > 1.0 + 1e-9:
            raise ValueError(f"the fault rates add up to {sum(rates.values()):.3g}; at most 1 is possible")
        if self.latency_ms < 0:
            raise ValueError(f"latency_ms must be >= 0, not {self.latency_ms}")
        if self.retry_after_s < 0:
            raise ValueError(f"retry_after_s must be >= 0, not {self.retry_after_s}")


class _State:
    """Counters and the seeded fault stream; shared with the thread that owns a :class:`StandinServer`."""

    def __init__(self, opts: StandinOptions) -> None:
        self.opts = opts
        self._lock = threading.Lock()
        self.shutdown = asyncio.Event()
        cum = 0.0
        self._thresholds: list[tuple[float, str]] = []
        for outcome, rate in zip(
            FAULT_OUTCOMES,
            (opts.fail_rate, opts.rate_limit_rate, opts.garbage_rate, opts.hang_rate),
            strict=True,
        ):
            cum += rate
            self._thresholds.append((cum, outcome))
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._rng = random.Random(self.opts.seed)
            self._garbage_rng = random.Random(self.opts.seed + 1)
            self._requests = 0
            self._in_flight = 0
            self._by_outcome: Counter[str] = Counter({o: 0 for o in OUTCOMES})
            self._by_model: Counter[str] = Counter()
            self._tokens: Counter[str] = Counter({"prompt": 0, "completion": 0})

    def arrive(self) -> None:
        with self._lock:
            self._requests += 1
            self._in_flight += 1

    def leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def count(
        self, outcome: str, model: str | None = None, prompt_tokens: int = 0, completion_tokens: int = 0
    ) -> None:
        with self._lock:
            self._by_outcome[outcome] += 1
            if model is not None:
                self._by_model[model] += 1
            self._tokens["prompt"] += prompt_tokens
            self._tokens["completion"] += completion_tokens

    def draw(self) -> tuple[str, str]:
        """This request's outcome, and the garbage text should it need one."""
        with self._lock:
            u = self._rng.random()
            outcome = next((o for cum, o in self._thresholds if u < cum), "ok")
            garbage = self._garbage_rng.choice(GARBAGE_REPLIES) if outcome == "garbage" else ""
        return outcome, garbage

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "model": MODEL_NAME,
                "requests": self._requests,
                "in_flight": self._in_flight,
                "by_outcome": dict(self._by_outcome),
                "by_model": dict(self._by_model),
                "tokens": dict(self._tokens),
            }


_STATE = web.AppKey("standin_state", _State)
_IDS = itertools.count(1)


def _error(
    status: int, message: str, type_: str, code: str | None, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.json_response(_error_body(message, type_, code), status=status, headers=headers)


@dataclass(frozen=True)
class _Refusal:
    """Why a chat-completions body is refused: HTTP status, the counter it is counted under (with the
    model, once known), message and error code."""

    status: int
    counter: str
    message: str
    code: str | None = None
    model: str | None = None


_PROMPT_HINT = " (QUESTION / OPTIONS / [GOLD] / fenced RESPONSE)"


def _read_request(
    body: Any, *, streaming: str, prompt_hint: str = ""
) -> tuple[str, ParsedPrompt, int] | _Refusal:
    """A chat-completions body read as both the online route and a batch line read it: (model, the parsed
    judge prompt, characters of all messages), or why it is refused. ``streaming`` ends the message that
    refuses ``stream: true``; ``prompt_hint`` is added to the one that refuses a prompt not made by
    mcqaudit."""
    if not isinstance(body, dict):
        return _Refusal(400, "bad_request_400", "The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return _Refusal(400, "bad_request_400", "You must provide a model parameter.")
    if model != MODEL_NAME:
        return _Refusal(
            404,
            "model_not_found_404",
            f"The model `{model}` does not exist or you do not have access to it. "
            f"This stand-in judge serves only `{MODEL_NAME}` (a heuristic, not an LLM).",
            "model_not_found",
            model,
        )
    if body.get("stream"):
        return _Refusal(400, "bad_request_400", f"Streaming is not supported {streaming}.", model=model)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return _Refusal(400, "bad_request_400", "messages must be a non-empty list.", model=model)
    user_texts = [
        _text_of(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"
    ]
    prompt = user_texts[-1] if user_texts else None
    if prompt is None:
        return _Refusal(400, "bad_request_400", "There is no user message to answer.", model=model)
    try:
        parsed = parse_rendered(prompt)
    except ValueError as exc:
        return _Refusal(
            400,
            "bad_request_400",
            f"{exc}: the stand-in judge only answers prompts made by mcqaudit.judge.prompts.render{prompt_hint}.",
            "not_a_judge_prompt",
            model,
        )
    prompt_chars = sum(len(_text_of(m.get("content")) or "") for m in messages if isinstance(m, dict))
    return model, parsed, prompt_chars


def _completion(reply: str, prompt_chars: int) -> dict[str, Any]:
    usage = {"prompt_tokens": _tokens(prompt_chars), "completion_tokens": _tokens(len(reply))}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {
        "id": f"chatcmpl-standin-{next(_IDS)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_NAME,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
    }


def _error_body(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def _text_of(content: Any) -> str | None:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(p for p in parts if isinstance(p, str))
    return None


def _authorised(request: web.Request) -> bool:
    auth = request.headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


_UNAUTHORISED = (
    "You didn't provide an API key. Send it in an Authorization header using Bearer auth "
    "(Authorization: Bearer YOUR_KEY). The stand-in judge accepts any key."
)


async def _chat_completions(request: web.Request) -> web.StreamResponse:
    state = request.app[_STATE]
    state.arrive()
    try:
        return await _answer(request, state)
    finally:
        state.leave()


async def _answer(request: web.Request, state: _State) -> web.StreamResponse:
    if not _authorised(request):
        state.count("unauthorized_401")
        return _error(401, _UNAUTHORISED, "invalid_request_error", "invalid_api_key")
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        state.count("bad_request_400")
        return _error(400, "The request body is not valid JSON.", "invalid_request_error", None)
    got = _read_request(body, streaming="by the stand-in judge", prompt_hint=_PROMPT_HINT)
    if isinstance(got, _Refusal):
        state.count(got.counter, got.model)
        return _error(got.status, got.message, "invalid_request_error", got.code)
    model, parsed, prompt_chars = got

    outcome, garbage = state.draw()
    if outcome == "hang":
        state.count("hang", model)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(state.shutdown.wait(), HANG_SECONDS)
        return _error(503, "The stand-in judge is shutting down.", "server_error", None)
    opts = state.opts
    if opts.latency_ms:
        await asyncio.sleep(opts.latency_ms / 1000)
    if outcome == "fail_500":
        state.count("fail_500", model)
        return _error(500, "The stand-in judge had an injected server error.", "server_error", None)
    if outcome == "rate_limited_429":
        state.count("rate_limited_429", model)
        headers = {
            "retry-after-ms": str(round(opts.retry_after_s * 1000)),
            "retry-after": str(math.ceil(opts.retry_after_s)),
        }
        return _error(
            429,
            f"Rate limit reached for {MODEL_NAME} (injected). Please try again in "
            f"{round(opts.retry_after_s * 1000)}ms.",
            "requests",
            "rate_limit_exceeded",
            headers,
        )

    reply = garbage if outcome == "garbage" else judge_reply(parsed)
    completion = _completion(reply, prompt_chars)
    usage = completion["usage"]
    state.count(outcome, model, usage["prompt_tokens"], usage["completion_tokens"])
    return web.json_response(completion)


_MODEL_OBJECT = {
    "id": MODEL_NAME,
    "object": "model",
    "created": 0,
    "owned_by": "mcqaudit (heuristic, not an LLM)",
}


async def _models(request: web.Request) -> web.Response:
    if not _authorised(request):
        return _error(401, _UNAUTHORISED, "invalid_request_error", "invalid_api_key")
    return web.json_response({"object": "list", "data": [_MODEL_OBJECT]})


async def _model(request: web.Request) -> web.Response:
    if not _authorised(request):
        return _error(401, _UNAUTHORISED, "invalid_request_error", "invalid_api_key")
    name = request.match_info["model"]
    if name != MODEL_NAME:
        return _error(404, f"The model `{name}` does not exist.", "invalid_request_error", "model_not_found")
    return web.json_response(_MODEL_OBJECT)


async def _stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[_STATE].snapshot())


async def _reset_stats(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    state.reset()
    return web.json_response(state.snapshot())


async def _on_shutdown(app: web.Application) -> None:
    app[_STATE].shutdown.set()  # hanging requests return, so shutdown does not wait an hour


def make_app(opts: StandinOptions, batch: BatchKnobs | None = None) -> web.Application:
    """The stand-in judge as an aiohttp application (see the module docstring for its endpoints)."""
    app = web.Application(client_max_size=256 * 1024 * 1024)  # a Batch API input file may be 200 MB
    app[_STATE] = _State(opts)
    app.router.add_post("/v1/chat/completions", _chat_completions)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/v1/models/{model}", _model)
    app.router.add_get("/stats", _stats)
    app.router.add_post("/stats/reset", _reset_stats)
    app.on_shutdown.append(_on_shutdown)
    add_batch_routes(app, batch or BatchKnobs())
    return app


async def _start(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    return runner, int(bound)


def serve(port: int, opts: StandinOptions, host: str = "127.0.0.1", batch: BatchKnobs | None = None) -> None:
    """Serve until SIGINT/SIGTERM (blocking). Prints one line naming the URL and that this is not an LLM."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            # not available off the main thread or on Windows: then only KeyboardInterrupt stops it
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        runner, bound = await _start(make_app(opts, batch), host, port)
        print(BANNER.format(host=host, port=bound), flush=True)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    asyncio.run(main())


class StandinServer:
    """The stand-in judge on 127.0.0.1, in a background thread with its own event loop.

    For tests, benchmarks and the demo builder::

        with StandinServer(StandinOptions(latency_ms=5)) as judge:
            client = openai.OpenAI(base_url=judge.base_url, api_key="x")
    """

    def __init__(
        self, opts: StandinOptions | None = None, port: int = 0, batch: BatchKnobs | None = None
    ) -> None:
        self.opts = opts or StandinOptions()
        self.batch_knobs = batch or BatchKnobs()  # read when a batch runs: a test may change them
        self.port = port
        self.base_url = ""
        self._app = make_app(self.opts, self.batch_knobs)
        self._state = self._app[_STATE]
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._failure: BaseException | None = None

    @property
    def root_url(self) -> str:
        """The server root (``/stats`` lives here; ``base_url`` is ``root_url + "/v1"``)."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> StandinServer:
        self._thread = threading.Thread(target=self._run, name="standin-judge", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=30):
            raise RuntimeError("the stand-in judge did not start within 30 s")
        if self._failure is not None:
            raise RuntimeError(f"the stand-in judge could not start: {self._failure}") from self._failure
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=15)
        self._loop = None

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced by __enter__
            self._failure = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        runner, self.port = await _start(self._app, "127.0.0.1", self.port)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def stats(self) -> dict[str, Any]:
        """The same counts as ``GET /stats``."""
        return self._state.snapshot()

    def batch_stats(self) -> dict[str, Any]:
        """The same counts as ``GET /stats/batches``: files and batches created, lines run and failed."""
        return self._app[_BATCHES].snapshot()

    def reset_stats(self) -> None:
        """Zero the counters and restart the fault-injection stream from the seed (as ``POST /stats/reset``)."""
        self._state.reset()


# --- the Batch API (docs/design.md §5 "Batch mode"; tests of `grade --batch`) --------------------------------
#
# Follows OpenAI's published Batch API: ``POST /v1/files`` (multipart, ``purpose=batch``) takes a JSONL input
# file of ``{custom_id, method, url, body}`` lines; ``POST /v1/batches`` runs it (status validating →
# in_progress → finalizing → completed, or failed / expired / cancelling → cancelled) and writes an output file
# of ``{id, custom_id, response: {status_code, request_id, body}, error}`` lines, in no particular order (this
# one shuffles them), and an error file for the lines that failed (a non-200 response, or ``response: null``
# with ``error: {code, message}`` for lines a batch never ran because it expired or was cancelled). Knobs in
# :class:`BatchKnobs` (``StandinServer.batch_knobs``, or the standin-judge flags) make a batch take time, fail
# some lines, or expire. Batch lines are answered by the same heuristic; they do not draw from the online
# fault stream, and ``GET /stats/batches`` counts them apart.

BATCH_ENDPOINT = "/v1/chat/completions"
FILE_PURPOSES = ("batch", "batch_output", "assistants", "fine-tune", "vision", "user_data")


@dataclass
class BatchKnobs:
    """How the stand-in runs batches. Read when a batch runs, so a test may change them between batches.

    ``seconds``: how long a batch spends in progress (spread over its lines); ``fail_rate``: share of lines
    answered HTTP 500 (in the error file); ``expire``: batches expire after half their lines (the rest go to
    the error file as ``batch_expired``); ``fail_validation``: batches fail validation (status ``failed``);
    ``refuse_create``: ``POST /v1/batches`` answers 400; ``list_batches=False``: ``GET /v1/batches`` answers
    404 (an endpoint that serves the Batch API without listing).
    """

    seconds: float = 0.0
    fail_rate: float = 0.0
    expire: bool = False
    fail_validation: bool = False
    refuse_create: bool = False  # batches.create answers 400 (as for an input file over the limits)
    list_batches: bool = True  # False: GET /v1/batches answers 404, as on endpoints without the route
    seed: int = 0

    def check(self) -> None:
        if self.seconds < 0:
            raise ValueError(f"batch seconds must be >= 0, not {self.seconds}")
        if not 0.0 <= self.fail_rate <= 1.0:
            raise ValueError(f"batch fail rate must be between 0 and 1, not {self.fail_rate}")


class _BatchStore:
    """Files and batches held in memory by one stand-in server; counters for the tests."""

    def __init__(self, knobs: BatchKnobs) -> None:
        self.knobs = knobs
        self.files: dict[str, dict[str, Any]] = {}
        self.content: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._server = secrets.token_hex(3)  # ids stay unique across servers, as a provider's are
        self._lock = threading.Lock()
        self._rng = random.Random(knobs.seed)
        self.counts: Counter[str] = Counter()

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-standin-{self._server}{next(self._ids):06d}"

    def add_file(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        fid = self.new_id("file")
        obj = {
            "id": fid,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }
        self.files[fid] = obj
        self.content[fid] = data
        self.count("files_created")
        return obj

    def count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.counts[key] += n

    def fails(self) -> bool:
        with self._lock:
            return self._rng.random() < self.knobs.fail_rate

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            by_status = Counter(b["status"] for b in list(self.batches.values()))
            return {
                "files_created": self.counts["files_created"],
                "batches_created": self.counts["batches_created"],
                "lines": self.counts["lines"],
                "lines_failed": self.counts["lines_failed"],
                "lines_expired": self.counts["lines_expired"],
                "by_status": dict(by_status),
            }


_BATCHES = web.AppKey("standin_batches", _BatchStore)


def _batch_line_answer(body: Any) -> tuple[int, dict[str, Any]]:
    """One batch line's chat-completions body answered as ``POST /v1/chat/completions`` would: (status, body)."""
    got = _read_request(body, streaming="in a batch")
    if isinstance(got, _Refusal):
        return got.status, _error_body(got.message, "invalid_request_error", got.code)
    _model, parsed, prompt_chars = got
    return 200, _completion(judge_reply(parsed), prompt_chars)


def _read_input(data: bytes, endpoint: str) -> tuple[list[tuple[str, Any]], list[dict[str, Any]]]:
    """The (custom_id, body) of each line of an input file, or the validation errors (OpenAI's shape)."""
    lines: list[tuple[str, Any]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()

    def bad(no: int, code: str, message: str) -> None:
        errors.append({"code": code, "message": message, "param": None, "line": no})

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return [], [
            {"code": "invalid_file", "message": "The input file is not UTF-8.", "param": None, "line": None}
        ]
    for no, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            bad(no, "invalid_json_line", "This line is not valid JSON.")
            continue
        if not isinstance(obj, dict):
            bad(no, "invalid_json_line", "This line is not a JSON object.")
            continue
        cid = obj.get("custom_id")
        if not isinstance(cid, str) or not cid:
            bad(no, "missing_required_parameter", "Missing custom_id.")
            continue
        if cid in seen:
            bad(no, "duplicate_custom_id", f"The custom_id {cid!r} is used by more than one line.")
            continue
        seen.add(cid)
        if obj.get("method") != "POST":
            bad(no, "invalid_method", "Only the POST method is supported.")
            continue
        if obj.get("url") != endpoint:
            bad(no, "mismatched_endpoint", f"The url must be the batch's endpoint, {endpoint}.")
            continue
        lines.append((cid, obj.get("body")))
    if not lines and not errors:
        errors.append(
            {"code": "empty_file", "message": "The input file has no requests.", "param": None, "line": None}
        )
    return lines, errors


async def _run_batch(store: _BatchStore, batch: dict[str, Any]) -> None:
    """validating → in_progress → finalizing → completed (or failed / expired / cancelled)."""
    knobs = store.knobs
    await asyncio.sleep(0.01)
    lines, errors = _read_input(store.content[batch["input_file_id"]], batch["endpoint"])
    if knobs.fail_validation and not errors:
        errors = [
            {
                "code": "invalid_request",
                "message": "Validation failed (injected).",
                "param": None,
                "line": None,
            }
        ]
    if errors:
        batch.update(status="failed", failed_at=int(time.time()), errors={"object": "list", "data": errors})
        return
    n = len(lines)
    batch.update(status="in_progress", in_progress_at=int(time.time()))
    batch["request_counts"] = {"total": n, "completed": 0, "failed": 0}
    store.count("lines", n)
    out: list[dict[str, Any]] = []
    err: list[dict[str, Any]] = []
    tokens = Counter[str]()
    stop_at = n // 2 if knobs.expire else n
    done = 0
    for cid, body in lines:
        if batch["status"] == "cancelling" or done >= stop_at:
            break
        status, resp = _batch_line_answer(body)
        if status == 200 and store.fails():
            status, resp = (
                500,
                _error_body("The stand-in judge had an injected server error.", "server_error", None),
            )
        line = {
            "id": store.new_id("batch_req"),
            "custom_id": cid,
            "response": {"status_code": status, "request_id": store.new_id("req"), "body": resp},
            "error": None,
        }
        if status == 200:
            out.append(line)
            batch["request_counts"]["completed"] += 1
            tokens["input"] += resp["usage"]["prompt_tokens"]
            tokens["output"] += resp["usage"]["completion_tokens"]
        else:
            err.append(line)
            batch["request_counts"]["failed"] += 1
            store.count("lines_failed")
        done += 1
        pause = knobs.seconds / n  # read per line: a test may speed a running batch up
        if pause:
            await asyncio.sleep(pause)
        elif done % 200 == 0:
            await asyncio.sleep(0)  # let polls in
    ending = "cancelled" if batch["status"] == "cancelling" else "expired" if done < n else None
    for cid, _ in lines[done:]:
        code = "batch_cancelled" if ending == "cancelled" else "batch_expired"
        message = (
            "This request was not executed because the batch was cancelled."
            if ending == "cancelled"
            else "This request could not be executed before the completion window expired."
        )
        err.append(
            {
                "id": store.new_id("batch_req"),
                "custom_id": cid,
                "response": None,
                "error": {"code": code, "message": message},
            }
        )
        store.count("lines_expired")
    if ending is None:
        batch.update(status="finalizing", finalizing_at=int(time.time()))
        await asyncio.sleep(0.01)
    random.Random(f"{knobs.seed}:{batch['id']}").shuffle(out)  # output order is not input order
    if out:
        data = "".join(json.dumps(line) + "\n" for line in out).encode()
        batch["output_file_id"] = store.add_file(data, f"{batch['id']}_output.jsonl", "batch_output")["id"]
    if err:
        data = "".join(json.dumps(line) + "\n" for line in err).encode()
        batch["error_file_id"] = store.add_file(data, f"{batch['id']}_error.jsonl", "batch_output")["id"]
    batch["usage"] = {
        "input_tokens": tokens["input"],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": tokens["output"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": tokens["input"] + tokens["output"],
    }
    now = int(time.time())
    if ending == "cancelled":
        batch.update(status="cancelled", cancelled_at=now)
    elif ending == "expired":
        batch.update(status="expired", expired_at=now)
    else:
        batch.update(status="completed", completed_at=now)


def _unauthorised() -> web.Response:
    return _error(401, _UNAUTHORISED, "invalid_request_error", "invalid_api_key")


async def _files_create(request: web.Request) -> web.Response:
    if not _authorised(request):
        return _unauthorised()
    store = request.app[_BATCHES]
    try:
        form = await request.post()
    except (ValueError, web.HTTPException):
        return _error(
            400,
            "The request must be multipart/form-data with 'file' and 'purpose'.",
            "invalid_request_error",
            None,
        )
    purpose, upload = form.get("purpose"), form.get("file")
    if not isinstance(purpose, str) or purpose not in FILE_PURPOSES:
        return _error(
            400, f"'purpose' must be one of {', '.join(FILE_PURPOSES)}.", "invalid_request_error", None
        )
    if not isinstance(upload, web.FileField):
        return _error(400, "Missing the 'file' part.", "invalid_request_error", None)
    data = upload.file.read()
    return web.json_response(store.add_file(data, upload.filename or "upload.jsonl", purpose))


def _file_or_404(request: web.Request) -> dict[str, Any] | web.Response:
    fid = request.match_info["file_id"]
    obj = request.app[_BATCHES].files.get(fid)
    if obj is None:
        return _error(404, f"No such File object: {fid}", "invalid_request_error", None)
    return obj


async def _files_get(request: web.Request) -> web.Response:
    if not _authorised(request):
        return _unauthorised()
    obj = _file_or_404(request)
    return obj if isinstance(obj, web.Response) else web.json_response(obj)


async def _files_content(request: web.Request) -> web.Response:
    if not _authorised(request):
        return _unauthorised()
    obj = _file_or_404(request)
    if isinstance(obj, web.Response):
        return obj
    data = request.app[_BATCHES].content[obj["id"]]
    return web.Response(body=data, content_type="application/octet-stream")


async def _batches_create(request: web.Request) -> web.Response:
    if not _authorised(request):
        return _unauthorised()
    store = request.app[_BATCHES]
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _error(400, "The request body is not valid JSON.", "invalid_request_error", None)
    if not isinstance(body, dict):
        return _error(400, "The request body must be a JSON object.", "invalid_request_error", None)
    fid, endpoint, window = body.get("input_file_id"), body.get("endpoint"), body.get("completion_window")
    if not isinstance(fid, str) or fid not in store.files:
        return _error(
            400,
            f"Invalid input_file_id: {fid!r} is not an uploaded file.",
            "invalid_request_error",
            "invalid_value",
        )
    if store.files[fid]["purpose"] != "batch":
        return _error(
            400,
            "The input file must be uploaded with purpose 'batch'.",
            "invalid_request_error",
            "invalid_value",
        )
    if endpoint != BATCH_ENDPOINT:
        return _error(
            400,
            f"The stand-in runs batches for {BATCH_ENDPOINT} only.",
            "invalid_request_error",
            "invalid_value",
        )
    if window != "24h":
        return _error(400, "completion_window must be '24h'.", "invalid_request_error", "invalid_value")
    if store.knobs.refuse_create:
        return _error(400, "The input file is over the size limit (injected).", "invalid_request_error", None)
    now = int(time.time())
    batch: dict[str, Any] = {
        "id": store.new_id("batch"),
        "object": "batch",
        "endpoint": endpoint,
        "model": MODEL_NAME,
        "errors": None,
        "input_file_id": fid,
        "completion_window": window,
        "status": "validating",
        "output_file_id": None,
        "error_file_id": None,
        "created_at": now,
        "in_progress_at": None,
        "expires_at": now + 24 * 3600,
        "finalizing_at": None,
        "completed_at": None,
        "failed_at": None,
        "expired_at": None,
        "cancelling_at": None,
        "cancelled_at": None,
        "request_counts": {"total": 0, "completed": 0, "failed": 0},
        "usage": None,
        "metadata": body.get("metadata"),
    }
    store.batches[batch["id"]] = batch
    store.count("batches_created")
    task = asyncio.create_task(_run_batch(store, batch))
    store.tasks.add(task)
    task.add_done_callback(store.tasks.discard)
    return web.json_response(batch)


async def _batches_get(request: web.Request) -> web.Response:
    if not _authorised(request):
        return _unauthorised()
    bid = request.match_info["batch_id"]
    batch = request.app[_BATCHES].batches.get(bid)
    if batch is None:
        return _error(404, f"No batch found with id '{bid}'.", "invalid_request_error", None)
    return web.json_response(batch)


async def _batches_list(request: web.Request) -> web.Response:
    if not _authorised(request):
        return _unauthorised()
    if not request.app[_BATCHES].knobs.list_batches:
        return _error(404, "Not found: GET /v1/batches is not served here.", "invalid_request_error", None)
    newest_first = list(reversed(request.app[_BATCHES].batches.values()))
    after = request.query.get("after")
    if after:
        ids = [b["id"] for b in newest_first]
        newest_first = newest_first[ids.index(after) + 1 :] if after in ids else []
    try:
        limit = max(1, min(100, int(request.query.get("limit", "20"))))
    except ValueError:
        return _error(400, "limit must be an integer.", "invalid_request_error", None)
    page = newest_first[:limit]
    return web.json_response(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(newest_first) > limit,
        }
    )


async def _batches_cancel(request: web.Request) -> web.Response:
    if not _authorised(request):
        return _unauthorised()
    bid = request.match_info["batch_id"]
    batch = request.app[_BATCHES].batches.get(bid)
    if batch is None:
        return _error(404, f"No batch found with id '{bid}'.", "invalid_request_error", None)
    if batch["status"] in ("validating", "in_progress"):
        batch.update(status="cancelling", cancelling_at=int(time.time()))
    return web.json_response(batch)


async def _batch_stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[_BATCHES].snapshot())


async def _stop_batches(app: web.Application) -> None:
    for task in list(app[_BATCHES].tasks):
        task.cancel()


def add_batch_routes(app: web.Application, knobs: BatchKnobs) -> None:
    """The Batch API endpoints (files and batches) on a stand-in application."""
    knobs.check()
    app[_BATCHES] = _BatchStore(knobs)
    app.router.add_post("/v1/files", _files_create)
    app.router.add_get("/v1/files/{file_id}", _files_get)
    app.router.add_get("/v1/files/{file_id}/content", _files_content)
    app.router.add_post("/v1/batches", _batches_create)
    app.router.add_get("/v1/batches", _batches_list)
    app.router.add_get("/v1/batches/{batch_id}", _batches_get)
    app.router.add_post("/v1/batches/{batch_id}/cancel", _batches_cancel)
    app.router.add_get("/stats/batches", _batch_stats)
    app.on_shutdown.append(_stop_batches)
