"""The async judge client: the `openai` client against any OpenAI-compatible endpoint, N requests in flight.

Owns: sending one rendered prompt and reading its reply (retries with backoff on 429/5xx/timeouts/
connection errors, honouring ``retry-after``; one re-ask of an illegal reply), and running many such
requests at a fixed concurrency. It knows nothing about the study file; the caller stores outcomes.

The API key is handed in by the caller (read from the environment at call time), kept only inside the
`openai` client, and scrubbed from every text this module produces: error messages are our own, built
from status codes, never from the client's exception text or headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, overload
from urllib.parse import urlsplit, urlunsplit

from mcqaudit.judge.prompts import SYSTEM_PROMPT, JudgeConfig
from mcqaudit.judge.replies import ParsedReply, cut_off, parse_reply
from mcqaudit.vocab import STANDIN_MODEL

if TYPE_CHECKING:
    import httpx2

# `openai` is imported where it is used: it takes about a second to import, and commands that stop early
# (no judge configured, --dry-run, bad flags) should not pay for it.

# Error kinds for failures that are not about the reply's text (those come from replies.py).
RATE_LIMITED = "rate_limited"
SERVER_ERROR = "server_error"
TIMEOUT = "timeout"
CONNECTION = "connection"
BAD_RESPONSE = "bad_response"
HTTP_ERROR = "http_error"
RETRYABLE_KINDS = (RATE_LIMITED, SERVER_ERROR, TIMEOUT, CONNECTION, BAD_RESPONSE)
# Statuses that fail every request the same way (wrong key, no access, unknown model or path): the run stops.
FATAL_STATUSES = {
    401: "authentication failed",
    403: "permission denied",
    404: "not found (model or base URL)",
}


class JudgeFatalError(Exception):
    """The endpoint refuses every request (auth, permission, unknown model or path); the run stops."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class JudgeRequest:
    """One rendered prompt to send. ``prompt_hash`` identifies it for the cache and for dedupe."""

    prompt_hash: str
    user: str
    n_options: int


@dataclass(frozen=True)
class ReceivedReply:
    """One reply text that came back (legal or not), with what the endpoint said about itself."""

    text: str | None
    parsed: ParsedReply
    tokens_in: int | None
    tokens_out: int | None
    model: str | None
    received_at: datetime


@dataclass
class JudgeOutcome:
    """What one request ended in: a legal value, or an error kind and message (the raw reply kept)."""

    request: JudgeRequest
    value: str | None = None
    rationale: str | None = None
    reply: str | None = None
    error_kind: str | None = None
    error: str | None = None
    attempts: int = 0
    replies: list[ReceivedReply] = field(default_factory=list)
    standin: bool = False
    finished_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def ok(self) -> bool:
        return self.value is not None

    @property
    def tokens(self) -> tuple[int, int]:
        return (sum(r.tokens_in or 0 for r in self.replies), sum(r.tokens_out or 0 for r in self.replies))


def redact_url(url: str | None) -> str | None:
    """A base URL fit to store: no user:password, no query string or fragment (either may hold a key)."""
    if url is None:
        return None
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@overload
def scrub(text: str, key: str) -> str: ...
@overload
def scrub(text: str | None, key: str) -> str | None: ...
def scrub(text: str | None, key: str) -> str | None:
    """``text`` with the API key replaced by ``[redacted]`` (a server, or an exception, may echo it back).

    A key shorter than 4 characters is left alone: replacing it would mangle ordinary text.
    """
    if text is None or not key or len(key) < 4:
        return text
    return text.replace(key, "[redacted]")


def is_local_url(url: str | None) -> bool:
    host = urlsplit(url).hostname if url else None
    return host in {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


def _is_standin(model: str | None, system_fingerprint: str | None) -> bool:
    return any(isinstance(s, str) and s.startswith(STANDIN_MODEL) for s in (model, system_fingerprint))


class JudgeClient:
    """Sends judge requests through one `openai.AsyncOpenAI` client with ``concurrency`` in flight.

    The client's own retries are off (``max_retries=0``) so that this loop can count retries by kind and
    build error messages that never include the client's exception text.
    """

    def __init__(
        self,
        config: JudgeConfig,
        *,
        api_key: str,
        base_url: str | None = None,
        concurrency: int = 16,
        timeout_s: float = 60.0,
        max_retries: int = 5,
        reask: int = 1,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 8.0,
        retry_after_max_s: float = 120.0,
        http_client: httpx2.AsyncClient | None = None,
    ):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if max_retries < 0:
            raise ValueError("max retries must be 0 or more")
        if timeout_s <= 0:
            raise ValueError("timeout must be positive")
        import httpx2
        import openai

        self.config = config
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.reask = reask
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.retry_after_max_s = retry_after_max_s
        self._secret = api_key
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=httpx2.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            http_client=http_client,
        )
        self.base_url = (redact_url(str(self._client.base_url)) or "").rstrip("/") or None
        self.requests_sent = 0
        self.retries: Counter[str] = Counter()
        self.standin_seen = False

    def __repr__(self) -> str:
        return f"JudgeClient(model={self.config.model!r}, base_url={self.base_url!r})"

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> JudgeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- one request --------------------------------------------------------------------------------

    def scrub(self, text: str | None) -> str | None:
        """Remove the API key from any text we keep or show."""
        return scrub(text, self._secret)

    def _delay(self, retry_number: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_max_s)
        base = min(self.backoff_base_s * 2**retry_number, self.backoff_max_s)
        return base * (0.75 + 0.5 * random.random())

    @staticmethod
    def _retry_after(exc: Any) -> float | None:
        headers = exc.response.headers
        for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
            raw = headers.get(name)
            if raw is None:
                continue
            try:
                value = float(raw) / scale
            except ValueError:
                continue  # an HTTP date: fall back to our own backoff
            if math.isfinite(value):
                return max(value, 0.0)
        return None

    def _classify(self, exc: BaseException) -> tuple[str, str, float | None]:
        """(kind, message, retry-after) for a failed call; messages are ours, never the client's text."""
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return TIMEOUT, f"no reply within {self.timeout_s:g} s", None
        if isinstance(exc, openai.APIConnectionError):
            return CONNECTION, "could not connect to the judge endpoint", None
        if isinstance(exc, openai.APIStatusError):
            code = exc.status_code
            if code == 429:
                return RATE_LIMITED, "HTTP 429 (rate limited)", self._retry_after(exc)
            if code >= 500:
                return SERVER_ERROR, f"HTTP {code} (server error)", self._retry_after(exc)
            if code in (408, 409):
                return SERVER_ERROR, f"HTTP {code}", self._retry_after(exc)
            if code in FATAL_STATUSES:
                return f"http_{code}", f"HTTP {code}: {FATAL_STATUSES[code]}", None
            return HTTP_ERROR, f"HTTP {code} (request refused)", None
        if isinstance(exc, ValueError | AttributeError | TypeError | openai.APIResponseValidationError):
            return BAD_RESPONSE, "the endpoint sent a body that is not a chat completion", None
        return BAD_RESPONSE, f"unexpected failure ({type(exc).__name__})", None

    async def _call(self, user: str) -> Any:
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        }
        if self.config.seed is not None:
            kwargs["seed"] = self.config.seed
        self.requests_sent += 1
        resp = await self._client.chat.completions.create(**kwargs)
        choices = getattr(resp, "choices", None)
        if not isinstance(choices, list) or not choices or getattr(choices[0], "message", None) is None:
            raise ValueError("no choices")
        return resp

    async def ask(self, request: JudgeRequest) -> JudgeOutcome:
        """Send one prompt until it gets a legal reply, exhausts its retries, or uses its one re-ask."""
        out = JudgeOutcome(request=request)
        failures = 0
        reasks_left = self.reask
        while True:
            out.attempts += 1
            try:
                resp = await self._call(request.user)
            except Exception as exc:
                kind, message, retry_after = self._classify(exc)
                if kind.startswith("http_") and kind != HTTP_ERROR:
                    raise JudgeFatalError(kind, message) from None
                if kind in RETRYABLE_KINDS and failures < self.max_retries:
                    self.retries[kind] += 1
                    await asyncio.sleep(self._delay(failures, retry_after))
                    failures += 1
                    continue
                out.error_kind, out.error = kind, message
                if failures:
                    out.error += f" after {failures} retr{'y' if failures == 1 else 'ies'}"
                break
            message = resp.choices[0].message
            text = message.content if message.content is not None else getattr(message, "refusal", None)
            text = self.scrub(text)
            parsed = parse_reply(text, self.config.shape, request.n_options)
            if getattr(resp.choices[0], "finish_reason", None) == "length":
                parsed = cut_off(parsed, self.config.max_tokens or 0)
            if parsed.rationale is not None:
                # The rationale is decoded JSON: a key the server wrote with \u escapes only shows up now.
                parsed = dataclasses.replace(parsed, rationale=self.scrub(parsed.rationale))
            usage = getattr(resp, "usage", None)
            standin = _is_standin(getattr(resp, "model", None), getattr(resp, "system_fingerprint", None))
            out.standin = out.standin or standin
            self.standin_seen = self.standin_seen or standin
            out.replies.append(
                ReceivedReply(
                    text=text,
                    parsed=parsed,
                    tokens_in=getattr(usage, "prompt_tokens", None),
                    tokens_out=getattr(usage, "completion_tokens", None),
                    model=getattr(resp, "model", None),
                    received_at=datetime.now(UTC),
                )
            )
            out.reply = text
            if parsed.ok:
                out.value, out.rationale = parsed.value, parsed.rationale
                out.error_kind = out.error = None
                break
            out.error_kind, out.error = parsed.kind, self.scrub(parsed.error)
            if reasks_left > 0:
                reasks_left -= 1
                self.retries["reask"] += 1
                continue
            break
        out.finished_at = datetime.now(UTC)
        return out

    # --- many requests ------------------------------------------------------------------------------

    async def run(self, requests: Iterable[JudgeRequest], on_outcome: Callable[[JudgeOutcome], None]) -> None:
        """Send every request with ``concurrency`` in flight, calling ``on_outcome`` as each finishes.

        A fatal endpoint error (wrong key, unknown model) stops new requests; those already in flight
        finish and are reported; then the error is raised.
        """
        it = iter(requests)
        fatal: list[JudgeFatalError] = []

        async def worker() -> None:
            while not fatal:
                req = next(it, None)
                if req is None:
                    return
                try:
                    outcome = await self.ask(req)
                except JudgeFatalError as exc:
                    fatal.append(exc)
                    return
                on_outcome(outcome)

        tasks = [asyncio.create_task(worker()) for _ in range(self.concurrency)]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*tasks, return_exceptions=True)
        if fatal:
            raise fatal[0]
