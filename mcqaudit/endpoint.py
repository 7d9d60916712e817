"""One OpenAI-compatible chat-completions endpoint, reached through the real `openai` client: the plumbing
that the judge (`grade`) and the model runner (`generate`) share.

Owns: building the client (per-request timeout, the client's own retries off), one call with retries and
backoff on 429/5xx/timeouts/connection errors (honouring ``retry-after``), classifying failures into kinds
with messages of our own, stopping on statuses that fail every request (401/403/404), running many
requests at a fixed concurrency, and the API key's hygiene: the key is read from a named environment
variable at call time, lives only inside the `openai` client, and is scrubbed from every text we keep or
show. Error messages are built from status codes, never from the client's exception text or headers; a
refused request (another 4xx) adds the server's own error message, scrubbed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import random
import re
import signal
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeVar, overload
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    import httpx2

# `openai` is imported where it is used: it takes about a second to import, and commands that stop early
# (no endpoint configured, --dry-run, bad flags) should not pay for it.

# Error kinds for failures that are not about the reply's text.
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

T = TypeVar("T")
R = TypeVar("R")
# what `chat.completions.create` passes as request options besides ours: the key goes as a bearer token
_POST_OPTIONS: Any = {"security": {"bearer_auth": True}}


class EndpointFatalError(Exception):
    """The endpoint refuses every request (auth, permission, unknown model or path); the run stops."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class Interrupted(Exception):
    """A run was stopped by SIGTERM; what had arrived is saved, and a re-run continues."""


# --- the API key ----------------------------------------------------------------------------------------

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def valid_env_name(name: str) -> bool:
    return bool(_ENV_NAME.match(name))


_KEY_PREFIXES = ("sk", "pk_", "rk_", "hf_", "ghp_", "gho_", "gsk_", "xox", "AKIA", "AIza", "key")
# One word of a name as people write them: letters (one case, or Capitalised, or a few humps: OpenAI),
# then at most a short number (KEY2, V1); or a short number alone (..._KEY_2).
_NAME_WORD = re.compile(r"[A-Za-z]+[0-9]{0,4}|[0-9]{1,4}")
_HEX_RUN = re.compile(r"[0-9A-Fa-f]{8,}")
_CONSONANTS = re.compile(r"[b-df-hj-np-tv-xzB-DF-HJ-NP-TV-XZ]{6,}")


def looks_like_env_name(name: str) -> bool:
    """Whether ``name`` may be shown in a message: a variable name as people write them (``OPENAI_API_KEY``,
    ``MY_KEY``, ``AZURE_OPENAI_API_KEY_2``), not a pasted key that happens to be a valid name. A key reads
    as random: digits among its letters (``a1b2c3d4e5f6a7b8``, ``sk1234…``), a long hex run (``deadbeefcafe…``),
    many case changes (``AbCdEfGh…``), a run of consonants no word has, or a known key prefix; a name reads
    as words. When in doubt, the value is not repeated (the message says which flag named it)."""
    if not valid_env_name(name) or len(name) > 64:
        return False
    if any(name.startswith(p) for p in _KEY_PREFIXES) and len(name) >= 16:
        return False
    words = [w for w in name.split("_") if w]
    if not words or ("_" not in name and len(name) >= 20):
        return False
    for word in words:
        if not _NAME_WORD.fullmatch(word) or _HEX_RUN.search(word) or _CONSONANTS.search(word):
            return False
        letters = word.rstrip("0123456789")
        humps = sum(a.islower() != b.islower() for a, b in zip(letters, letters[1:], strict=False))
        if humps > 2:
            return False
    return True


def key_in_env(env_name: str) -> str:
    """The value of the named variable now; empty when it is unset or ``env_name`` is not a variable name."""
    return os.environ.get(env_name, "") if valid_env_name(env_name) else ""


LOCAL_NO_KEY = "no-key"  # the openai client insists on a key; local OpenAI-compatible servers ignore it


def api_key_for(env_name: str, base_url: str | None) -> str | None:
    """The key from the named environment variable, read now; a local server may go without one
    (:data:`LOCAL_NO_KEY`); None when a remote endpoint has no key (the caller says which flag names it)."""
    key = key_in_env(env_name)
    if key:
        return key
    return LOCAL_NO_KEY if is_local_url(base_url) else None


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


# --- one endpoint -----------------------------------------------------------------------------------------


@dataclass
class Sent:
    """What one call with its retries ended in: the response, or an error kind and message."""

    response: Any = None
    error_kind: str | None = None
    error: str | None = None
    attempts: int = 0  # HTTP requests made for this call, retries included


class ChatEndpoint:
    """One `openai.AsyncOpenAI` client with ``concurrency`` requests in flight.

    The client's own retries are off (``max_retries=0``) so that this class can count retries by kind and
    build error messages that never include the client's exception text. ``role`` names the endpoint in
    messages ("judge", "model").
    """

    role = "chat"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        concurrency: int = 16,
        timeout_s: float = 60.0,
        max_retries: int = 5,
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

        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
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

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> ChatEndpoint:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def scrub(self, text: str | None) -> str | None:
        """Remove the API key from any text we keep or show."""
        return scrub(text, self._secret)

    def _delay(self, retry_number: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_max_s)
        base = min(self.backoff_base_s * float(2**retry_number), self.backoff_max_s)
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

    def _server_message(self, exc: Any) -> str | None:
        """What the server said a refused request was wrong with (its error body's ``message``: "Unsupported
        parameter: 'seed'"), the key scrubbed, on one line, cut at 200 characters. The body is the server's
        own text, not the client's exception text, which also carries headers."""
        body = getattr(exc, "body", None)
        text = body.get("message") if isinstance(body, dict) else body
        if not isinstance(text, str) or text.lstrip().startswith("<"):  # none, or an HTML error page
            return None
        text = " ".join((self.scrub(text) or "").split())
        return text[:200] + ("…" if len(text) > 200 else "") or None

    def _classify(self, exc: BaseException) -> tuple[str, str, float | None]:
        """(kind, message, retry-after) for a failed call; messages are ours, never the client's text."""
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return TIMEOUT, f"no reply within {self.timeout_s:g} s", None
        if isinstance(exc, openai.APIConnectionError):
            return CONNECTION, f"could not connect to the {self.role} endpoint", None
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
            why = self._server_message(exc)
            return HTTP_ERROR, f"HTTP {code} (request refused)" + (f": {why}" if why else ""), None
        if isinstance(exc, ValueError | AttributeError | TypeError | openai.APIResponseValidationError):
            return BAD_RESPONSE, "the endpoint sent a body that is not a chat completion", None
        return BAD_RESPONSE, f"unexpected failure ({type(exc).__name__})", None

    async def create(self, kwargs: dict[str, Any]) -> Any:
        """One chat-completions request; a body without a first choice's message is a bad response.

        Sent with the `openai` client's own ``post`` (the same request, headers, auth, timeout and status
        errors as ``chat.completions.create``), and read back as plain JSON into attribute objects
        (:class:`types.SimpleNamespace`: ``resp.choices[0].message.content``, ``resp.usage``, as on a
        ``ChatCompletion``). A profile at 64 in flight put about a fifth of the client's CPU per request in
        ``create``'s transform of its typed parameters (the identity on our body: strings, numbers, two
        messages) and a tenth in building the pydantic response model, of which we read five fields.
        """
        import httpx2

        self.requests_sent += 1
        raw = await self._client.post(
            "/chat/completions", body=kwargs, cast_to=httpx2.Response, options=_POST_OPTIONS
        )
        resp = json.loads(raw.content, object_hook=lambda d: SimpleNamespace(**d))
        choices = getattr(resp, "choices", None)
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], SimpleNamespace):
            raise ValueError("no choices")
        message = getattr(choices[0], "message", None)
        if not isinstance(message, SimpleNamespace):
            raise ValueError("no message")
        for name in ("content", "refusal"):
            value = getattr(message, name, None)
            if not isinstance(value, str | None):
                raise ValueError(f"{name} is not text")
            setattr(message, name, value)
        # What callers read besides the message, as the types a ChatCompletion would give (else None).
        usage = getattr(resp, "usage", None)
        resp.usage = usage if isinstance(usage, SimpleNamespace) else None
        if resp.usage is not None:
            for name in ("prompt_tokens", "completion_tokens"):
                v = getattr(resp.usage, name, None)
                setattr(resp.usage, name, v if type(v) is int and 0 <= v < 2**31 else None)
        for name in ("model", "system_fingerprint"):
            v = getattr(resp, name, None)
            setattr(resp, name, v if isinstance(v, str) else None)
        return resp

    async def send(self, kwargs: dict[str, Any]) -> Sent:
        """One request until it gets a chat completion or exhausts its retries; raises
        :class:`EndpointFatalError` on a status that fails every request."""
        out = Sent()
        failures = 0
        while True:
            out.attempts += 1
            try:
                out.response = await self.create(kwargs)
                return out
            except Exception as exc:
                kind, message, retry_after = self._classify(exc)
                if kind.startswith("http_") and kind != HTTP_ERROR:
                    raise EndpointFatalError(kind, message) from None
                if kind in RETRYABLE_KINDS and failures < self.max_retries:
                    self.retries[kind] += 1
                    await asyncio.sleep(self._delay(failures, retry_after))
                    failures += 1
                    continue
                out.error_kind, out.error = kind, message
                if failures:
                    out.error += f" after {failures} retr{'y' if failures == 1 else 'ies'}"
                return out

    async def run_all(
        self, items: Iterable[T], work: Callable[[T], Awaitable[R]], on_result: Callable[[R], None]
    ) -> None:
        """``work`` on every item with ``concurrency`` in flight, calling ``on_result`` as each finishes.

        A fatal endpoint error (wrong key, unknown model) stops new requests; those already in flight
        finish and are reported; then the error is raised.
        """
        it = iter(items)
        fatal: list[EndpointFatalError] = []

        async def worker() -> None:
            while not fatal:
                item = next(it, None)
                if item is None:
                    return
                try:
                    result = await work(item)
                except EndpointFatalError as exc:
                    fatal.append(exc)
                    return
                on_result(result)

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


def run_until_sigterm(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``asyncio.run(main())`` with SIGTERM cancelling it cleanly (the coroutine's ``finally`` blocks save
    what has arrived); raises :class:`Interrupted` after a SIGTERM."""
    terminated = threading.Event()

    async def wrapped() -> T:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        installed = False

        def on_sigterm() -> None:
            terminated.set()
            if task is not None:
                task.cancel()

        if threading.current_thread() is threading.main_thread():
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signal.SIGTERM, on_sigterm)
                installed = True
        try:
            return await main()
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGTERM)

    try:
        return asyncio.run(wrapped())
    except asyncio.CancelledError:
        if terminated.is_set():
            raise Interrupted("terminated (SIGTERM)") from None
        raise
