"""The async judge client: the `openai` client against any OpenAI-compatible endpoint, N requests in flight.

Owns: sending one rendered judge prompt and reading its reply (one re-ask of an illegal reply), and running
many such requests at a fixed concurrency. The transport — retries with backoff on 429/5xx/timeouts/
connection errors honouring ``retry-after``, fatal statuses, the API key's hygiene — is
:class:`mcqaudit.endpoint.ChatEndpoint`, shared with `generate`. It knows nothing about the study file; the
caller stores outcomes.

The API key is handed in by the caller (read from the environment at call time), kept only inside the
`openai` client, and scrubbed from every text this module produces.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from mcqaudit.endpoint import (
    BAD_RESPONSE,
    CONNECTION,
    FATAL_STATUSES,
    HTTP_ERROR,
    RATE_LIMITED,
    RETRYABLE_KINDS,
    SERVER_ERROR,
    TIMEOUT,
    ChatEndpoint,
    EndpointFatalError,
    is_local_url,
    redact_url,
    scrub,
)
from mcqaudit.judge.prompts import SYSTEM_PROMPT, JudgeConfig
from mcqaudit.judge.replies import ParsedReply, cut_off, parse_reply
from mcqaudit.vocab import STANDIN_MODEL

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "BAD_RESPONSE",
    "CONNECTION",
    "FATAL_STATUSES",
    "HTTP_ERROR",
    "RATE_LIMITED",
    "RETRYABLE_KINDS",
    "SERVER_ERROR",
    "TIMEOUT",
    "JudgeClient",
    "JudgeFatalError",
    "JudgeOutcome",
    "JudgeRequest",
    "ReceivedReply",
    "is_local_url",
    "redact_url",
    "scrub",
]

# The endpoint refuses every request (auth, permission, unknown model or path); the run stops.
JudgeFatalError = EndpointFatalError


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


def _is_standin(model: str | None, system_fingerprint: str | None) -> bool:
    return any(isinstance(s, str) and s.startswith(STANDIN_MODEL) for s in (model, system_fingerprint))


def request_body(config: JudgeConfig, user: str) -> dict[str, Any]:
    """The chat completion request for one prompt (online, or a Batch API line's ``body``)."""
    kwargs: dict[str, Any] = {
        "model": config.model,
        "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
    }
    if config.seed is not None:
        kwargs["seed"] = config.seed
    return kwargs


class JudgeClient(ChatEndpoint):
    """Sends judge requests through one :class:`~mcqaudit.endpoint.ChatEndpoint` with ``concurrency`` in flight."""

    role = "judge"

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
        super().__init__(
            api_key=api_key,
            base_url=base_url,
            concurrency=concurrency,
            timeout_s=timeout_s,
            max_retries=max_retries,
            backoff_base_s=backoff_base_s,
            backoff_max_s=backoff_max_s,
            retry_after_max_s=retry_after_max_s,
            http_client=http_client,
        )
        self.config = config
        self.reask = reask
        self.standin_seen = False

    def __repr__(self) -> str:
        return f"JudgeClient(model={self.config.model!r}, base_url={self.base_url!r})"

    async def __aenter__(self) -> JudgeClient:
        return self

    # --- one request --------------------------------------------------------------------------------

    def _request(self, user: str) -> dict[str, Any]:
        return request_body(self.config, user)

    def read(self, resp: Any, n_options: int) -> tuple[ReceivedReply, bool]:
        """One chat completion as received (online, or a Batch API output line): the reply text with the key
        scrubbed, parsed for a row with ``n_options`` options, its tokens; and whether the endpoint says it is
        the stand-in judge."""
        message = resp.choices[0].message
        text = message.content if message.content is not None else getattr(message, "refusal", None)
        text = self.scrub(text)
        parsed = parse_reply(text, self.config.shape, n_options)
        if getattr(resp.choices[0], "finish_reason", None) == "length":
            parsed = cut_off(parsed, self.config.max_tokens or 0)
        if parsed.rationale is not None:
            # The rationale is decoded JSON: a key the server wrote with \u escapes only shows up now.
            parsed = dataclasses.replace(parsed, rationale=self.scrub(parsed.rationale))
        usage = getattr(resp, "usage", None)
        standin = _is_standin(getattr(resp, "model", None), getattr(resp, "system_fingerprint", None))
        self.standin_seen = self.standin_seen or standin
        received = ReceivedReply(
            text=text,
            parsed=parsed,
            tokens_in=getattr(usage, "prompt_tokens", None),
            tokens_out=getattr(usage, "completion_tokens", None),
            model=getattr(resp, "model", None),
            received_at=datetime.now(UTC),
        )
        return received, standin

    async def ask(self, request: JudgeRequest) -> JudgeOutcome:
        """Send one prompt until it gets a legal reply, exhausts its retries, or uses its one re-ask."""
        out = JudgeOutcome(request=request)
        reasks_left = self.reask
        while True:
            sent = await self.send(self._request(request.user))
            out.attempts += sent.attempts
            if sent.response is None:
                out.error_kind, out.error = sent.error_kind, sent.error
                break
            received, standin = self.read(sent.response, request.n_options)
            out.standin = out.standin or standin
            out.replies.append(received)
            text, parsed = received.text, received.parsed
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
        await self.run_all(requests, self.ask, on_outcome)
