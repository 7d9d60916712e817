"""`mcqaudit generate`: prompt rows (from `orient`) → any OpenAI-compatible model → a generations file that
`ingest` reads, resumable.

Owns: reading and checking the prompt rows, the resume state of the output file (the rows already there,
a torn last line dropped), one request per (prompt row, sample) through the shared endpoint plumbing
(:class:`mcqaudit.endpoint.ChatEndpoint`: timeouts, retries with backoff honouring ``retry-after``, the API
key only from its environment variable and never written anywhere), and the output rows, appended and
flushed one line at a time and fsync'ed every few rows, so that a killed run (SIGKILL included) leaves a
valid JSONL file with at most a torn last line, which the next run drops before it appends.

A row is known by (arm, item_id, orientation, sample) — the key `ingest` derives its row id from — so a
re-run sends only the (prompt row, sample) pairs the file lacks. A request that still fails after its
retries writes nothing; the run exits 3 and a re-run retries it.

Option log-probabilities: each request asks for ``logprobs=True, top_logprobs=20``; the top log-probs of
the *first* generated token are mapped to the option letters in range (a token that is one capital letter
in range once whitespace is stripped; variants of one letter, ``"B"`` and ``" B"``, are combined by
log-sum-exp) and written as ``option_logprobs`` for the report's log-prob cross-check. A row whose first
token has no letter among its top log-probs, or an endpoint that returns none, has no ``option_logprobs``
field. An endpoint that refuses the parameters (HTTP 400) is asked again without them, for the rest of the
run. They mean something only when the prompt asks for the letter first (orient's default template does).

Reasoning models: the message's ``reasoning_content`` (vLLM, DeepSeek) or ``reasoning`` (OpenRouter, newer
vLLM) is written as the row's ``reasoning``, the content staying the ``generation`` verbatim; a server that
inlines ``<think>…</think>`` in the content sends no such field, and the row has none: `ingest` splits the
block off. The choice's ``finish_reason`` is written as given (``length``: cut by the token limit) and the
reply's ``usage`` as ``{"prompt_tokens", "completion_tokens"}`` when both are counts; a reply without them
(or with a malformed usage) gives a row without those fields. The summary counts the replies cut by the
token limit.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from mcqaudit.endpoint import (
    HTTP_ERROR,
    ChatEndpoint,
    EndpointFatalError,
    Sent,
    api_key_for,
    key_in_env,
    looks_like_env_name,
    run_until_sigterm,
    scrub,
    valid_env_name,
)
from mcqaudit.grade.config import run_exit_code
from mcqaudit.grade.summary import NullReporter, Reporter
from mcqaudit.ingest.errors import InputError, Problem
from mcqaudit.reasoning import FINISH_LENGTH, normalise_finish_reason
from mcqaudit.vocab import LETTERS

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
TOP_LOGPROBS = 20
REQUIRED = ("item_id", "question", "options", "gold", "prompt")
MAX_PROBLEMS = 200

Key = tuple[str, str, str, int]  # (arm, item_id, orientation, sample)


class GenerateUsageError(Exception):
    """Bad flags, a missing API key, an output file that belongs to another run: exit status 2."""


@dataclass(frozen=True)
class GenerateOptions:
    """Everything a generate run needs besides the files. The API key is not here: only its variable's name."""

    model: str
    base_url: str | None = None
    arm: str | None = None
    api_key_env: str = DEFAULT_API_KEY_ENV
    concurrency: int = 16
    temperature: float = 0.0
    samples: int = 1
    max_tokens: int = 1024
    seed: int | None = None
    timeout_s: float = 120.0
    max_retries: int = 5
    logprobs: bool = True
    # tuning (tests use small values)
    backoff_base_s: float = 0.5
    sync_every: int = 16
    sync_interval_s: float = 1.0

    def validate(self) -> None:
        if not self.model.strip():
            raise GenerateUsageError("--model must name the model")
        if self.concurrency < 1:
            raise GenerateUsageError("--concurrency must be at least 1")
        if self.samples < 1:
            raise GenerateUsageError("--samples must be at least 1")
        if self.max_tokens < 1:
            raise GenerateUsageError("--max-tokens must be at least 1")
        if not 0.0 <= self.temperature <= 2.0:
            raise GenerateUsageError("--temperature must be between 0 and 2")
        if self.max_retries < 0:
            raise GenerateUsageError("--max-retries must be 0 or more")
        if self.timeout_s <= 0:
            raise GenerateUsageError("--timeout must be positive")
        if self.arm is not None and not self.arm.strip():
            raise GenerateUsageError("--arm must not be empty")
        if not valid_env_name(self.api_key_env):
            # Never echo the value: a user may have pasted the key itself here.
            raise GenerateUsageError("--api-key-env takes the *name* of an environment variable, not a key")


@dataclass
class GenerateSummary:
    """What a generate run did; ``exit_code`` is the CLI's exit status (the same as `grade`'s)."""

    model: str
    base_url: str | None
    out: str
    prompt_rows: int = 0
    samples: int = 1
    already_done: int = 0  # (row, sample) pairs already in the output file
    targeted: int = 0  # pairs this run set out to generate
    written: int = 0
    with_logprobs: int = 0  # ... of which carry option_logprobs
    with_reasoning: int = 0  # ... of which carry the reply's reasoning field
    cut_by_length: int = 0  # ... of which the reply's finish_reason is length (cut by the token limit)
    without_usage: int = 0  # ... of which the reply had no usable usage (no usage field written)
    finish_reasons: Counter[str] = field(default_factory=Counter)  # of the rows written, as given ("none")
    errors: int = 0  # pairs whose request failed after its retries (nothing written)
    not_attempted: int = 0  # pairs left (run stopped early)
    errors_by_kind: Counter[str] = field(default_factory=Counter)
    retries_by_kind: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    elapsed_s: float = 0.0
    torn_line_dropped: bool = False
    logprobs: str = "requested"  # requested | unsupported | off
    max_tokens: int = 1024
    aborted: str | None = None

    @property
    def exit_code(self) -> int:
        return run_exit_code(aborted=self.aborted, errors=self.errors, not_attempted=self.not_attempted)

    @property
    def rows_per_s(self) -> float:
        return self.written / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def lines(self) -> list[str]:
        out = [
            f"model {self.model}" + (f" at {self.base_url}" if self.base_url else ""),
            f"prompt rows: {self.prompt_rows} x {self.samples} sample(s); already in {self.out}: "
            f"{self.already_done}; this run: {self.targeted}",
        ]
        if self.torn_line_dropped:
            out.append(f"dropped a torn last line of {self.out} (an earlier run was killed mid-write)")
        lp = {
            "requested": f"with option log-probs: {self.with_logprobs}",
            "unsupported": "option log-probs: the endpoint refused them (HTTP 400); asked without",
            "off": "option log-probs: not requested",
        }[self.logprobs]
        out.append(f"written: {self.written} ({lp})")
        out.extend(self._reasoning_lines())
        retries = ", ".join(f"{k} ×{n}" for k, n in sorted(self.retries_by_kind.items()))
        out.append(f"requests: {self.requests}" + (f" (retries: {retries})" if retries else ""))
        if self.errors:
            kinds = ", ".join(f"{k} ×{n}" for k, n in self.errors_by_kind.most_common())
            out.append(
                f"errors: {self.errors} generations failed ({kinds}); nothing was written for them; re-run "
                "`mcqaudit generate` with the same arguments to retry them"
            )
        else:
            out.append("errors: 0")
        if self.not_attempted:
            out.append(f"not attempted: {self.not_attempted} (the run stopped early); re-run to continue")
        out.append(f"tokens: {self.tokens_in} in, {self.tokens_out} out")
        out.append(f"elapsed: {self.elapsed_s:.1f} s ({self.rows_per_s:.1f} rows/s)")
        if self.aborted:
            out.append(f"stopped: {self.aborted}")
        elif not self.errors and not self.not_attempted:
            out.append(
                f"next: mcqaudit ingest {self.out} --db STUDY --items ITEMS (rows are in the order they arrived: "
                "the items file fixes each item's canonical option order)"
            )
        return out

    def _reasoning_lines(self) -> list[str]:
        """The token limit's share, always said (with its n), then reasoning and usage where there is news."""
        n = self.written
        reasons = ", ".join(f"{k} ×{v}" for k, v in sorted(self.finish_reasons.items()))
        cut = f"cut by the token limit (finish_reason length): {self.cut_by_length} of {n} written"
        if self.cut_by_length:
            cut += f" ({self.cut_by_length / n:.0%})"
        out = [cut + (f"; finish reasons: {reasons}" if reasons else "")]
        if self.cut_by_length:
            out.append(
                f"  raise --max-tokens (this run: {self.max_tokens}) if the model was still thinking: on ingest, "
                "a reply cut off before it answered is OTHER by rule and never judged"
            )
        if self.with_reasoning:
            out.append(
                f"with reasoning (the reply's reasoning field, kept apart): {self.with_reasoning} of {n}"
            )
        if self.without_usage:
            out.append(
                f"without usage (the reply had none, or not two token counts): {self.without_usage} of {n}"
            )
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "base_url": self.base_url,
            "out": self.out,
            "prompt_rows": self.prompt_rows,
            "samples": self.samples,
            "already_done": self.already_done,
            "targeted": self.targeted,
            "written": self.written,
            "with_logprobs": self.with_logprobs,
            "with_reasoning": self.with_reasoning,
            "cut_by_length": self.cut_by_length,
            "without_usage": self.without_usage,
            "finish_reasons": dict(self.finish_reasons),
            "max_tokens": self.max_tokens,
            "logprobs": self.logprobs,
            "errors": self.errors,
            "errors_by_kind": dict(self.errors_by_kind),
            "not_attempted": self.not_attempted,
            "requests": self.requests,
            "retries_by_kind": dict(self.retries_by_kind),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "torn_line_dropped": self.torn_line_dropped,
            "elapsed_s": round(self.elapsed_s, 3),
            "aborted": self.aborted,
            "exit_code": self.exit_code,
        }


# --- option log-probs (pure) ------------------------------------------------------------------------------


def option_logprobs(top: Sequence[tuple[str, float]], n_options: int) -> dict[str, float] | None:
    """Letter → log-probability from the first token's top log-probs, letters in range only; None if none.

    A token counts for a letter when, whitespace stripped, it is that capital letter; several tokens for one
    letter (``"B"``, ``" B"``) are combined by log-sum-exp: the probability that the answer starts with it.
    """
    letters = LETTERS[:n_options]
    by: dict[str, list[float]] = {}
    for token, lp in top:
        t = token.strip()
        if len(t) == 1 and t in letters and isinstance(lp, int | float) and math.isfinite(lp):
            by.setdefault(t, []).append(float(lp))
    if not by:
        return None
    out = {}
    for letter in sorted(by):
        vals = by[letter]
        m = max(vals)
        out[letter] = round(m + math.log(sum(math.exp(v - m) for v in vals)), 6)
    return out


def _first_token_top(resp: Any) -> list[tuple[str, float]]:
    lp = getattr(resp.choices[0], "logprobs", None)
    content = getattr(lp, "content", None) if lp is not None else None
    if not content:
        return []
    top = getattr(content[0], "top_logprobs", None) or []
    return [
        (t.token, t.logprob)
        for t in top
        if isinstance(getattr(t, "token", None), str) and isinstance(getattr(t, "logprob", None), int | float)
    ]


# --- what a reasoning model's reply carries besides its content (pure) -------------------------------------

REASONING_FIELDS = ("reasoning_content", "reasoning")  # vLLM / DeepSeek; OpenRouter and newer vLLM
USAGE_FIELDS = ("prompt_tokens", "completion_tokens")


def reply_reasoning(message: Any) -> str | None:
    """The message's thinking, sent beside its content: the first of ``reasoning_content``, ``reasoning``
    that is non-blank text; None when neither is (a server that inlines ``<think>`` in the content)."""
    for name in REASONING_FIELDS:
        value = getattr(message, name, None)
        if isinstance(value, str) and value.strip():
            return value
    return None


def reply_finish_reason(choice: Any) -> str | None:
    """The choice's ``finish_reason`` as the server gave it (an unknown word kept); None unless text."""
    value = getattr(choice, "finish_reason", None)
    return value if isinstance(value, str) and value.strip() else None


def reply_usage(resp: Any) -> dict[str, int] | None:
    """``{"prompt_tokens", "completion_tokens"}`` when the reply's usage has both as non-negative integers,
    else None (missing, not an object, a count of the wrong type): a row never carries a usage that ingest
    would refuse."""
    usage = getattr(resp, "usage", None)
    counts = {name: getattr(usage, name, None) for name in USAGE_FIELDS}
    if all(type(v) is int and v >= 0 for v in counts.values()):
        return {k: v for k, v in counts.items() if isinstance(v, int)}
    return None


def cut_by_length(finish_reason: str | None) -> bool:
    """The reply was cut off by the token limit (``length``, or a provider's word for it, as ingest reads it)."""
    return normalise_finish_reason(finish_reason) == FINISH_LENGTH


# --- the prompt rows ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    row: dict[str, Any]
    sample: int
    key: Key


def _orientation_key(row: dict[str, Any]) -> str:
    o = row.get("orientation")
    # without a label, the displayed order itself tells two rows of one item apart (ingest derives the label)
    return o if isinstance(o, str) and o else json.dumps(row["options"], ensure_ascii=False)


def read_prompts(path: Path, options: GenerateOptions) -> list[tuple[dict[str, Any], str]]:
    """(row, arm) for every prompt row; raises InputError naming each problem as FILE:LINE: field: reason."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError([Problem(str(path), None, "file", f"cannot be read ({exc.strerror})")]) from None
    problems: list[Problem] = []
    rows: list[tuple[dict[str, Any], str]] = []
    seen: dict[tuple[str, str, str], int] = {}
    total = 0

    def problem(line: int, fld: str, reason: str) -> None:
        nonlocal total
        total += 1
        if len(problems) < MAX_PROBLEMS:
            problems.append(Problem(str(path), line, fld, reason))

    for no, bline in enumerate(raw.splitlines(), 1):
        try:
            line = bline.decode("utf-8")
        except UnicodeDecodeError:
            problem(no, "line", "not UTF-8")
            continue
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            problem(no, "line", "not valid JSON")
            continue
        if not isinstance(obj, dict):
            problem(no, "line", "not a JSON object")
            continue
        missing = [f for f in REQUIRED if f not in obj or obj[f] is None]
        if missing:
            problem(
                no,
                missing[0],
                f"missing field(s) {', '.join(missing)} (prompt rows come from `mcqaudit orient`)",
            )
            continue
        if not isinstance(obj["prompt"], str) or not obj["prompt"].strip():
            problem(no, "prompt", "must be a non-empty string")
            continue
        if not isinstance(obj["item_id"], str) or not obj["item_id"].strip():
            problem(no, "item_id", "must be a non-empty string")
            continue
        if not isinstance(obj["options"], list | dict) or len(obj["options"]) < 2:
            problem(no, "options", "must be a list (or letter → text object) of at least 2 options")
            continue
        row_arm = obj.get("arm")
        arm = options.arm or (row_arm if isinstance(row_arm, str) and row_arm.strip() else options.model)
        k = (arm, obj["item_id"], _orientation_key(obj))
        if k in seen:
            problem(no, "orientation", f"the same item and orientation as line {seen[k]} (arm {arm})")
            continue
        seen[k] = no
        rows.append((obj, arm))
    if problems:
        raise InputError(problems, total)
    if not rows:
        raise InputError([Problem(str(path), None, "file", "no prompt rows")])
    return rows


# --- the output file ---------------------------------------------------------------------------------------


@dataclass
class Resume:
    done: set[Key] = field(default_factory=set)
    models: dict[str, str] = field(default_factory=dict)  # arm → model of the rows already there
    good_bytes: int = 0
    torn: bool = False


def read_output(path: Path) -> Resume:
    """The rows an earlier run wrote. A last line without its newline is torn (a run killed mid-write): it
    is reported, to be cut off and written again; a broken *whole* line means the file is not ours."""
    res = Resume()
    if not path.exists():
        return res
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise GenerateUsageError(f"{path}: cannot read the output file ({exc.strerror})") from None
    lines = data.split(b"\n")
    # after the last newline: b"" for a file that ends cleanly, else the torn tail of an interrupted write
    res.torn = lines[-1] != b""
    for no, bline in enumerate(lines[:-1], 1):
        if bline.strip():
            try:
                obj = json.loads(bline.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                obj = None
            if not _is_output_row(obj):
                raise GenerateUsageError(
                    f"{path}:{no}: not a row written by `mcqaudit generate`; refusing to append to this file "
                    "(choose another --out)"
                )
            assert isinstance(obj, dict)
            res.done.add((obj["arm"], obj["item_id"], _orientation_key(obj), obj["sample"]))
            if isinstance(obj.get("model"), str):
                res.models.setdefault(obj["arm"], obj["model"])
        res.good_bytes += len(bline) + 1
    return res


def _is_output_row(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("arm"), str)
        and isinstance(obj.get("item_id"), str)
        and isinstance(obj.get("sample"), int)
        and isinstance(obj.get("generation"), str)
        and isinstance(obj.get("options"), list | dict)
    )


class LineWriter:
    """Appends one JSON line per row, flushed at once; fsync every ``sync_every`` rows or ``sync_interval_s``."""

    def __init__(self, path: Path, sync_every: int, sync_interval_s: float):
        self.path = path
        self.sync_every = sync_every
        self.sync_interval_s = sync_interval_s
        self._fh: IO[str] = path.open("a", encoding="utf-8")
        self._unsynced = 0
        self._last_sync = time.monotonic()

    def write(self, row: dict[str, Any]) -> None:
        # one write call per line: a kill between calls leaves whole lines; a kill inside one leaves a
        # torn last line, which the next run cuts off
        self._fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        self._fh.flush()
        self._unsynced += 1
        if self._unsynced >= self.sync_every or time.monotonic() - self._last_sync >= self.sync_interval_s:
            self.sync()

    def sync(self) -> None:
        if self._unsynced:
            os.fsync(self._fh.fileno())
            self._unsynced = 0
        self._last_sync = time.monotonic()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            self.sync()
            self._fh.close()


def _truncate(path: Path, size: int) -> None:
    with path.open("r+b") as fh:
        fh.truncate(size)
        fh.flush()
        os.fsync(fh.fileno())


# --- the run ---------------------------------------------------------------------------------------------------


@dataclass
class Generated:
    job: Job
    sent: Sent
    text: str | None = None
    logprobs: dict[str, float] | None = None
    reasoning: str | None = None
    finish_reason: str | None = None
    usage: dict[str, int] | None = None


class ModelClient(ChatEndpoint):
    """The model under evaluation behind an OpenAI-compatible endpoint: one prompt → one generation."""

    role = "model"

    def __init__(self, options: GenerateOptions, *, api_key: str):
        super().__init__(
            api_key=api_key,
            base_url=options.base_url,
            concurrency=options.concurrency,
            timeout_s=options.timeout_s,
            max_retries=options.max_retries,
            backoff_base_s=options.backoff_base_s,
        )
        self.options = options
        self.logprobs = "requested" if options.logprobs else "off"

    def _request(self, job: Job) -> dict[str, Any]:
        o = self.options
        kwargs: dict[str, Any] = {
            "model": o.model,
            "messages": [{"role": "user", "content": job.row["prompt"]}],
            "temperature": o.temperature,
            "max_tokens": o.max_tokens,
        }
        if o.seed is not None:
            kwargs["seed"] = o.seed + job.sample  # samples differ, and a re-run asks for the same ones
        if self.logprobs == "requested":
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = TOP_LOGPROBS
        return kwargs

    async def generate(self, job: Job) -> Generated:
        asked_logprobs = self.logprobs == "requested"
        sent = await self.send(self._request(job))
        if sent.response is None and sent.error_kind == HTTP_ERROR and asked_logprobs:
            # an endpoint that does not support log-probs refuses the parameters: ask without them, from now on
            self.logprobs = "unsupported"
            again = await self.send(self._request(job))
            again.attempts += sent.attempts
            sent = again
        out = Generated(job, sent)
        if sent.response is not None:
            choice = sent.response.choices[0]
            message = choice.message
            text = message.content if message.content is not None else getattr(message, "refusal", None)
            out.text = self.scrub(text or "")
            reasoning = reply_reasoning(message)
            out.reasoning = self.scrub(reasoning) if reasoning is not None else None
            out.finish_reason = reply_finish_reason(choice)
            out.usage = reply_usage(sent.response)
            n = len(job.row["options"])
            out.logprobs = option_logprobs(_first_token_top(sent.response), n)
        return out


def _output_row(g: Generated, arm: str, model: str) -> dict[str, Any]:
    r = g.job.row
    row: dict[str, Any] = {"item_id": r["item_id"], "arm": arm, "sample": g.job.sample}
    for k in ("orientation", "question", "options", "gold", "prompt"):
        if k in r:
            row[k] = r[k]
    row["generation"] = g.text
    # absent, not null, when the reply had none: a row with a reasoning field is not split again on ingest
    for k, v in (("reasoning", g.reasoning), ("finish_reason", g.finish_reason), ("usage", g.usage)):
        if v is not None:
            row[k] = v
    row["model"] = model
    if g.logprobs is not None:
        row["option_logprobs"] = g.logprobs
    if r.get("metadata") is not None:
        row["metadata"] = r["metadata"]
    return row


async def generate_async(
    prompts: Path, out: Path, options: GenerateOptions, *, reporter: Reporter | None = None
) -> GenerateSummary:
    options.validate()
    rows = read_prompts(prompts, options)
    api_key = api_key_for(options.api_key_env, options.base_url)
    if api_key is None:
        # a valid name that reads like a key (no "-" in it) may be the key itself: never repeat it
        named = options.api_key_env if looks_like_env_name(options.api_key_env) else "given by --api-key-env"
        raise GenerateUsageError(
            f"the API key is read from the environment variable {named}, which is not set "
            "(name another one with --api-key-env; a server on 127.0.0.1 needs none)"
        )
    resume = read_output(out)
    for arm in sorted({a for _, a in rows}):
        had = resume.models.get(arm)
        if had is not None and had != options.model:
            raise GenerateUsageError(
                f"{out} already holds rows of arm {arm!r} generated by model {had!r}, not {options.model!r}; "
                "write to another --out, or give this model its own --arm"
            )
    rep: Reporter = reporter or NullReporter()
    started = time.monotonic()
    client = ModelClient(options, api_key=api_key)
    del api_key
    summary = GenerateSummary(
        model=options.model,
        base_url=client.base_url,
        out=str(out),
        prompt_rows=len(rows),
        samples=options.samples,
        logprobs=client.logprobs,
        max_tokens=options.max_tokens,
    )
    jobs: list[Job] = []
    arms: dict[Key, str] = {}
    for row, arm in rows:
        for s in range(options.samples):
            key = (arm, row["item_id"], _orientation_key(row), s)
            if key in resume.done:
                summary.already_done += 1
                continue
            jobs.append(Job(row, s, key))
            arms[key] = arm
    summary.targeted = len(jobs)
    if resume.torn:
        _truncate(out, resume.good_bytes)
        summary.torn_line_dropped = True
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = LineWriter(out, options.sync_every, options.sync_interval_s)
    finished = 0

    def on_result(g: Generated) -> None:
        nonlocal finished
        finished += 1
        usage = getattr(g.sent.response, "usage", None)
        tin, tout = (getattr(usage, k, None) for k in ("prompt_tokens", "completion_tokens"))
        tin = tin if isinstance(tin, int) else 0  # the body is read as plain JSON: counts only if counts
        tout = tout if isinstance(tout, int) else 0
        summary.tokens_in += tin
        summary.tokens_out += tout
        if g.text is None:
            summary.errors += 1
            summary.errors_by_kind[g.sent.error_kind or "unknown"] += 1
            rep.advance(1, 1, 0)
            return
        writer.write(_output_row(g, arms[g.job.key], options.model))
        summary.written += 1
        summary.with_logprobs += g.logprobs is not None
        summary.with_reasoning += g.reasoning is not None
        summary.cut_by_length += cut_by_length(g.finish_reason)
        summary.without_usage += g.usage is None
        summary.finish_reasons[g.finish_reason or "none"] += 1
        rep.advance(1, 0, tin + tout)

    rep.start(total=summary.targeted, done=0)
    try:
        async with client:
            try:
                await client.run_all(jobs, client.generate, on_result)
            except EndpointFatalError as exc:
                summary.aborted = (
                    f"{exc}; the endpoint refuses requests, so the run stopped. Check --model, --base-url "
                    "and the API key variable"
                )
    finally:
        rep.stop()
        writer.close()
        summary.not_attempted = summary.targeted - finished
        summary.requests = client.requests_sent
        summary.retries_by_kind = Counter(client.retries)
        summary.logprobs = client.logprobs
        summary.elapsed_s = time.monotonic() - started
    return summary


def generate(
    prompts: Path, out: Path, options: GenerateOptions, *, reporter: Reporter | None = None
) -> GenerateSummary:
    """Synchronous entry point; SIGTERM stops it cleanly (every row received is on disk) and raises
    :class:`mcqaudit.endpoint.Interrupted`."""
    return run_until_sigterm(lambda: generate_async(prompts, out, options, reporter=reporter))


def secret_for(options: GenerateOptions) -> str:
    """The key now in the environment, for scrubbing messages (empty when none)."""
    return key_in_env(options.api_key_env)


__all__ = [
    "GenerateOptions",
    "GenerateSummary",
    "GenerateUsageError",
    "generate",
    "generate_async",
    "option_logprobs",
    "read_output",
    "read_prompts",
    "cut_by_length",
    "reply_finish_reason",
    "reply_reasoning",
    "reply_usage",
    "scrub",
    "secret_for",
]
