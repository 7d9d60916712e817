"""Grading: strict pre-filter → judge → store, resumable and cached (DESIGN §5).

Rows the pre-filter resolved, and blank generations (OTHER by rule), are never sent: their verdicts come
from ``gen_rows`` through the ``graded_rows`` view. Every other row gets one judge verdict per fingerprint.
Rows that render to the same prompt share one request; a (fingerprint, prompt) that already got a legal
reply is never sent again. Outcomes are written in small batches as they arrive, each batch one short
transaction, so a killed run loses at most the replies in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from mcqaudit.judge.client import (
    STANDIN_MODEL,
    JudgeClient,
    JudgeFatalError,
    JudgeOutcome,
    JudgeRequest,
    is_local_url,
    redact_url,
)
from mcqaudit.judge.prompts import SYSTEM_PROMPT, Exemplar, JudgeConfig, legal_values, prompt_hash, render
from mcqaudit.judge.replies import REPLY_ERROR_KINDS, judged
from mcqaudit.store import judging
from mcqaudit.store.db import Study
from mcqaudit.store.judging import ReplyRecord, TargetRow, VerdictRecord
from mcqaudit.vocab import ERROR, OK

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_ROW_ERRORS = 3

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
ENV_MODEL = "MCQAUDIT_JUDGE_MODEL"
ENV_BASE_URL = "MCQAUDIT_JUDGE_BASE_URL"

NO_JUDGE_MESSAGE = (
    "no judge configured. The judge is part of the metric, so mcqaudit never picks one: choose it with "
    f"--judge-model and --judge-base-url (or {ENV_MODEL} / {ENV_BASE_URL}) and put the API key in the "
    "environment variable named by --judge-api-key-env (default OPENAI_API_KEY). A local OpenAI-compatible "
    "server works too (`mcqaudit standin-judge` serves a heuristic stand-in for demos). To grade with the "
    "strict pre-filter alone, pass --no-judge: the study is then marked unaudited."
)
STANDIN_NOTE = (
    f"note: the judge endpoint reports itself as {STANDIN_MODEL!r}, the stand-in judge: its verdicts come "
    "from a heuristic, not an LLM."
)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def valid_env_name(name: str) -> bool:
    return bool(_ENV_NAME.match(name))


class GradeUsageError(Exception):
    """Bad flags, no judge configured, bad exemplar file, unknown arm: exit status 2."""


class GradeInterrupted(Exception):
    """The run was stopped by a signal; what had arrived is saved, and a re-run continues."""


@dataclass(frozen=True)
class GradeOptions:
    """Everything a grade run needs besides the study. The API key is not here: only its variable's name."""

    config: JudgeConfig
    base_url: str | None = None
    api_key_env: str = DEFAULT_API_KEY_ENV
    concurrency: int = 16
    timeout_s: float = 60.0
    max_retries: int = 5
    arms: tuple[str, ...] = ()
    limit: int | None = None
    reask: int = 1
    # tuning (tests use small values)
    backoff_base_s: float = 0.5
    flush_every: int = 64
    flush_interval_s: float = 0.5

    def validate(self) -> None:
        if self.concurrency < 1:
            raise GradeUsageError("--concurrency must be at least 1")
        if self.max_retries < 0:
            raise GradeUsageError("--max-retries must be 0 or more")
        if self.timeout_s <= 0:
            raise GradeUsageError("--timeout must be positive")
        if self.limit is not None and self.limit < 1:
            raise GradeUsageError("--limit must be at least 1")
        if not valid_env_name(self.api_key_env):
            # Never echo the value: a user may have pasted the key itself here.
            raise GradeUsageError(
                "--judge-api-key-env takes the *name* of an environment variable, not a key"
            )


@dataclass
class GradeSummary:
    """What a grade run did; ``exit_code`` is the CLI's exit status (DESIGN §5)."""

    fingerprint: str
    model: str
    shape: str
    temperature: float
    base_url: str | None
    rationale: bool = False  # the judge was asked for a rationale (`--rationale`)
    in_scope: int = 0  # rows in scope that need a judge
    already_ok: int = 0  # of those, already ok under this fingerprint (skipped)
    targeted: int = 0  # rows this run set out to grade
    graded: int = 0  # targeted rows that got an ok verdict
    from_cache: int = 0  # ... answered by an earlier legal reply to the same prompt
    shared: int = 0  # ... answered by another row's request in this run (same prompt)
    errors: int = 0  # targeted rows that ended in error
    not_attempted: int = 0  # targeted rows left pending (run stopped early)
    errors_by_kind: Counter[str] = field(default_factory=Counter)
    retries_by_kind: Counter[str] = field(default_factory=Counter)
    requests: int = 0  # HTTP requests sent
    prompts_sent: int = 0  # distinct prompts sent
    tokens_in: int = 0
    tokens_out: int = 0
    elapsed_s: float = 0.0
    standin: bool = False
    aborted: str | None = None

    @property
    def exit_code(self) -> int:
        if self.aborted is not None:
            return EXIT_FAILURE
        return EXIT_ROW_ERRORS if self.errors or self.not_attempted else EXIT_OK

    @property
    def rows_per_s(self) -> float:
        return (self.graded + self.errors) / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def lines(self) -> list[str]:
        out = [
            f"judge {self.fingerprint}: {self.model}, {self.shape} shape, temperature {self.temperature:g}"
            + (", with rationale" if self.rationale else "")
            + (f", at {self.base_url}" if self.base_url else ""),
            f"rows needing the judge: {self.in_scope} (already graded under this fingerprint: {self.already_ok}); "
            f"this run: {self.targeted}",
            f"graded: {self.graded} (from earlier replies: {self.from_cache}; sharing a prompt with another row: "
            f"{self.shared})",
        ]
        retries = ", ".join(f"{k} ×{n}" for k, n in sorted(self.retries_by_kind.items()))
        out.append(
            f"requests: {self.requests} for {self.prompts_sent} prompts"
            + (f" (retries: {retries})" if retries else "")
        )
        if self.errors:
            kinds = ", ".join(f"{k} ×{n}" for k, n in self.errors_by_kind.most_common())
            out.append(
                f"errors: {self.errors} rows have no verdict ({kinds}); their raw replies are kept; "
                "re-run `mcqaudit grade` to retry them"
            )
        else:
            out.append("errors: 0")
        if self.not_attempted:
            out.append(
                f"not attempted: {self.not_attempted} rows (the run stopped early); re-run to grade them"
            )
        out.append(f"tokens: {self.tokens_in} in, {self.tokens_out} out")
        out.append(f"elapsed: {self.elapsed_s:.1f} s ({self.rows_per_s:.1f} rows/s)")
        if self.standin:
            out.append(STANDIN_NOTE)
        if self.aborted:
            out.append(f"stopped: {self.aborted}")
        return out


class Reporter(Protocol):
    """Progress sink for a grade run (the CLI's is a rich progress bar; tests pass none)."""

    def start(self, total: int, done: int) -> None: ...
    def advance(self, rows: int, errors: int, tokens: int) -> None: ...
    def note(self, text: str) -> None: ...
    def stop(self) -> None: ...


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.1f} rows/s" if speed else "– rows/s")


class RichReporter:
    """rows done/total, rows/s, ETA, errors and tokens, on stderr."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self._progress = Progress(
            TextColumn("judging"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("rows"),
            _RateColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("errors {task.fields[errors]}"),
            TextColumn("tokens {task.fields[tokens]}"),
            console=self.console,
        )
        self._task: TaskID | None = None

    def start(self, total: int, done: int) -> None:
        self._progress.start()
        self._task = self._progress.add_task("judge", total=total, completed=done, errors=0, tokens=0)

    def advance(self, rows: int, errors: int, tokens: int) -> None:
        if self._task is not None:
            task = self._progress.tasks[0]
            self._progress.update(
                self._task,
                advance=rows,
                errors=task.fields["errors"] + errors,
                tokens=task.fields["tokens"] + tokens,
            )

    def note(self, text: str) -> None:
        self._progress.console.print(text)

    def stop(self) -> None:
        self._progress.stop()


class _NullReporter:
    def start(self, total: int, done: int) -> None: ...
    def advance(self, rows: int, errors: int, tokens: int) -> None: ...
    def note(self, text: str) -> None: ...
    def stop(self) -> None: ...


# --- configuration ------------------------------------------------------------------------------------


def load_exemplars(path: str | Path, shape: str) -> tuple[Exemplar, ...]:
    """Few-shot exemplars from JSONL: ``{"question", "options", "generation", "answer", "gold"?}`` a line.

    ``answer`` is what the judge should reply: a letter or OTHER (extract), or a verdict (gold, which also
    needs the exemplar's ``gold`` letter). They go into the prompt and the fingerprint.
    """
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise GradeUsageError(f"{p}: cannot read the exemplar file ({exc.strerror})") from None
    out: list[Exemplar] = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{p}:{no}"
        try:
            obj = json.loads(line)
        except ValueError:
            raise GradeUsageError(f"{where}: not a JSON object") from None
        if not isinstance(obj, dict):
            raise GradeUsageError(f"{where}: not a JSON object")
        answer = obj.get("answer", obj.get("expected"))
        for name, value in (("question", obj.get("question")), ("generation", obj.get("generation"))):
            if not isinstance(value, str):
                raise GradeUsageError(f"{where}: field {name!r} must be a string")
        options = obj.get("options")
        if not (isinstance(options, list) and len(options) >= 2 and all(isinstance(o, str) for o in options)):
            raise GradeUsageError(f"{where}: field 'options' must be a list of at least 2 strings")
        legal = legal_values(shape, len(options))
        if not isinstance(answer, str) or answer.strip().upper() not in legal:
            raise GradeUsageError(
                f"{where}: field 'answer' must be one of {', '.join(legal)} for the {shape} shape"
            )
        gold = obj.get("gold")
        if shape == "gold":
            if not (
                isinstance(gold, str) and gold.strip().upper() in legal_values("extract", len(options))[:-1]
            ):
                raise GradeUsageError(
                    f"{where}: the gold shape needs field 'gold', a letter within the options"
                )
            gold = gold.strip().upper()
        else:
            gold = None
        out.append(
            Exemplar(
                question=obj["question"],
                options=tuple(options),
                generation=obj["generation"],
                answer=answer.strip().upper(),
                gold=gold,
            )
        )
    if not out:
        raise GradeUsageError(f"{p}: the exemplar file has no exemplars")
    return tuple(out)


def resolve_api_key(env_name: str, base_url: str | None) -> str:
    """The key from the named environment variable, read now. Local servers may go without one."""
    key = os.environ.get(env_name, "")
    if key:
        return key
    if is_local_url(base_url):
        return "no-key"  # the openai client insists on a key; local OpenAI-compatible servers ignore it
    raise GradeUsageError(
        f"the judge API key is read from the environment variable {env_name}, which is not set "
        "(name another one with --judge-api-key-env)"
    )


def check_arms(study: Study, arms: Sequence[str]) -> None:
    known = judging.known_arms(study)
    unknown = [a for a in arms if a not in known]
    if unknown:
        raise GradeUsageError(
            f"unknown arm(s): {', '.join(unknown)}; the study has: {', '.join(known) or '(no rows yet)'}"
        )


# --- planning -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Planned:
    row: TargetRow
    user: str
    prompt_hash: str


def _render_row(config: JudgeConfig, row: TargetRow) -> _Planned:
    user = render(
        config.shape,
        row.question,
        row.options,
        row.generation,
        gold_letter=row.gold_letter if config.shape == "gold" else None,
        exemplars=config.exemplars,
        rationale=config.rationale,
    )
    return _Planned(row, user, prompt_hash(SYSTEM_PROMPT, user))


@dataclass(frozen=True)
class DryRun:
    """What `grade --dry-run` shows: one rendered prompt and the fingerprint; nothing is sent or written."""

    fingerprint: str
    fingerprint_payload: dict
    row_id: str | None
    system: str
    user: str | None
    in_scope: int
    already_ok: int
    targeted: int
    cached: int
    would_send: int


def dry_run(study: Study, options: GradeOptions) -> DryRun:
    options.validate()
    check_arms(study, options.arms)
    config = options.config
    targets, already_ok = judging.select_rows(study, config.fingerprint, options.arms, options.limit)
    planned = [_render_row(config, r) for r in targets]
    hashes = {p.prompt_hash for p in planned}
    cached = judging.cached_replies(study, config.fingerprint, hashes)
    counts = judging.resolution_counts(study, options.arms)
    first = planned[0] if planned else None
    return DryRun(
        fingerprint=config.fingerprint,
        fingerprint_payload=config.fingerprint_payload(),
        row_id=first.row.row_id if first else None,
        system=SYSTEM_PROMPT,
        user=first.user if first else None,
        in_scope=counts.get("needs_judge", 0),
        already_ok=already_ok,
        targeted=len(targets),
        cached=sum(1 for p in planned if p.prompt_hash in cached),
        would_send=len(hashes - set(cached)),
    )


def grade_without_judge(study: Study, arms: Sequence[str] = ()) -> dict[str, int]:
    """`--no-judge`: the strict pre-filter alone. Marks the study unaudited; returns row counts."""
    check_arms(study, arms)
    judging.set_unaudited(study, True)
    return judging.resolution_counts(study, arms)


# --- the run ------------------------------------------------------------------------------------------


class _BatchWriter:
    """Collects records and writes them every ``every`` verdicts or ``interval_s``, whichever comes first.

    Each write opens the file, writes one transaction and closes it (so a dashboard can read in between);
    opening a DuckDB file costs ~20 ms of CPU whatever the batch size. So the writer also keeps its duty
    cycle under ``max_duty``: after a write that took t seconds it waits at least ``t * (1/max_duty - 1)``
    (and ``min_gap_s``) before the next. On an idle machine that is ~0.3 s and the count/interval rule
    decides; on a loaded one, batches grow instead of writes eating the CPU the requests need. Writes run
    in a worker thread (DuckDB releases the GIL), so the event loop keeps requests in flight meanwhile.
    """

    def __init__(
        self,
        study: Study,
        fingerprint: str,
        every: int,
        interval_s: float,
        min_gap_s: float = 0.25,
        max_duty: float = 0.1,
    ):
        self.study = study
        self.fingerprint = fingerprint
        self.every = every
        self.interval_s = interval_s
        self.min_gap_s = min(min_gap_s, interval_s)
        self.max_duty = max_duty
        self._earliest = 0.0  # monotonic time before which no write starts
        self._replies: list[ReplyRecord] = []
        self._verdicts: list[VerdictRecord] = []
        self._first_at: float | None = None
        self._standin_pending = False
        self._closed = False
        self._wake = asyncio.Event()

    def add(
        self, replies: Sequence[ReplyRecord], verdicts: Sequence[VerdictRecord], standin: bool = False
    ) -> None:
        self._replies.extend(replies)
        self._verdicts.extend(verdicts)
        self._standin_pending = self._standin_pending or standin
        if self._first_at is None:  # wake the writer to start the interval clock
            self._first_at = time.monotonic()
            self._wake.set()
        if len(self._verdicts) >= self.every:
            self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    def _pending(self) -> bool:
        return bool(self._replies or self._verdicts or self._standin_pending)

    async def _flush(self) -> None:
        replies, verdicts, standin = self._replies, self._verdicts, self._standin_pending
        self._replies, self._verdicts, self._standin_pending, self._first_at = [], [], False, None
        await asyncio.to_thread(
            judging.write_judged,
            self.study,
            replies,
            verdicts,
            standin_fingerprint=self.fingerprint if standin else None,
        )

    def flush_now(self) -> None:
        """Synchronous last-chance flush (used when the run is cancelled)."""
        if self._pending():
            replies, verdicts, standin = self._replies, self._verdicts, self._standin_pending
            self._replies, self._verdicts, self._standin_pending = [], [], False
            judging.write_judged(
                self.study, replies, verdicts, standin_fingerprint=self.fingerprint if standin else None
            )

    async def run(self) -> None:
        while True:
            if not self._pending():
                if self._closed:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            # Wait until `every` verdicts are pending or the oldest has waited `interval_s`, and in any case
            # until `_earliest` (the duty-cycle bound). Closing flushes at once.
            deadline = (self._first_at or time.monotonic()) + self.interval_s
            while not self._closed:
                now = time.monotonic()
                due = deadline if len(self._verdicts) < self.every else now
                start_at = max(due, self._earliest)
                if now >= start_at:
                    break
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), start_at - now)
            started = time.monotonic()
            await self._flush()
            ended = time.monotonic()
            gap = max(self.min_gap_s, (ended - started) * (1 / self.max_duty - 1))
            self._earliest = ended + min(gap, 5.0)


def _records(
    outcome: JudgeOutcome, rows: Sequence[TargetRow], config: JudgeConfig, base_url: str | None
) -> tuple[list[ReplyRecord], list[VerdictRecord]]:
    fp, h = config.fingerprint, outcome.request.prompt_hash
    replies = [
        ReplyRecord(
            fingerprint=fp,
            prompt_hash=h,
            status=OK if r.parsed.ok else ERROR,
            reply=r.text,
            value=r.parsed.value,
            rationale=r.parsed.rationale,
            error=None if r.parsed.ok else f"{r.parsed.kind}: {r.parsed.error}",
            base_url=base_url,
            tokens_in=r.tokens_in,
            tokens_out=r.tokens_out,
            received_at=r.received_at,
        )
        for r in outcome.replies
    ]
    error = None if outcome.ok else f"{outcome.error_kind}: {outcome.error}"
    if not outcome.ok and outcome.error_kind not in REPLY_ERROR_KINDS:
        # The request failed without a reply text (HTTP error, timeout, bad body): keep that too.
        replies.append(
            ReplyRecord(
                fingerprint=fp,
                prompt_hash=h,
                status=ERROR,
                reply=None,
                value=None,
                rationale=None,
                error=error,
                base_url=base_url,
                tokens_in=None,
                tokens_out=None,
                received_at=outcome.finished_at,
            )
        )
    verdicts = []
    for row in rows:
        letter, verdict = (
            judged(config.shape, outcome.value, row.gold_letter) if outcome.value else (None, None)
        )
        verdicts.append(
            VerdictRecord(
                row_id=row.row_id,
                fingerprint=fp,
                status=OK if outcome.value else ERROR,
                letter=letter,
                verdict=verdict,
                reply=outcome.reply,
                rationale=outcome.rationale,
                error=error,
                prompt_hash=h,
                base_url=base_url,
                attempts=outcome.attempts,
                judged_at=outcome.finished_at,
            )
        )
    return replies, verdicts


async def grade_async(
    study: Study, options: GradeOptions, *, reporter: Reporter | None = None
) -> GradeSummary:
    """Grade every row in scope that needs the judge and has no ok verdict under this fingerprint."""
    options.validate()
    check_arms(study, options.arms)
    config = options.config
    api_key = resolve_api_key(options.api_key_env, options.base_url)
    rep: Reporter = reporter or _NullReporter()
    started = time.monotonic()

    engine = JudgeClient(
        config,
        api_key=api_key,
        base_url=options.base_url,
        concurrency=options.concurrency,
        timeout_s=options.timeout_s,
        max_retries=options.max_retries,
        reask=options.reask,
        backoff_base_s=options.backoff_base_s,
    )
    del api_key
    summary = GradeSummary(
        fingerprint=config.fingerprint,
        model=config.model,
        shape=config.shape,
        temperature=config.temperature,
        base_url=engine.base_url,
        rationale=config.rationale,
    )
    async with engine:
        await asyncio.to_thread(judging.register_config, study, config)
        targets, summary.already_ok = await asyncio.to_thread(
            judging.select_rows, study, config.fingerprint, options.arms, options.limit
        )
        summary.in_scope = (await asyncio.to_thread(judging.resolution_counts, study, options.arms)).get(
            "needs_judge", 0
        )
        summary.targeted = len(targets)
        if await asyncio.to_thread(judging.is_standin, study, config.fingerprint):
            summary.standin = True

        groups: dict[str, list[TargetRow]] = {}
        requests: list[JudgeRequest] = []
        for row in targets:
            p = _render_row(config, row)
            if p.prompt_hash not in groups:
                groups[p.prompt_hash] = []
                requests.append(JudgeRequest(p.prompt_hash, p.user, len(row.options)))
            groups[p.prompt_hash].append(row)
        cached = await asyncio.to_thread(judging.cached_replies, study, config.fingerprint, list(groups))

        writer = _BatchWriter(study, config.fingerprint, options.flush_every, options.flush_interval_s)
        writer_task = asyncio.create_task(writer.run())
        rep.start(total=summary.targeted, done=0)
        if summary.standin:
            rep.note(STANDIN_NOTE)
        standin_noted = summary.standin
        resolved = 0

        # Rows whose prompt already got a legal reply: a verdict without a request.
        now = datetime.now(UTC)
        cached_verdicts = [
            VerdictRecord(
                row_id=row.row_id,
                fingerprint=config.fingerprint,
                status=OK,
                letter=letter,
                verdict=verdict,
                reply=hit.reply,
                rationale=hit.rationale,
                error=None,
                prompt_hash=h,
                base_url=engine.base_url,
                attempts=0,
                judged_at=now,
            )
            for h, hit in cached.items()
            for row in groups[h]
            for letter, verdict in [judged(config.shape, hit.value, row.gold_letter)]
        ]
        if cached_verdicts:
            writer.add([], cached_verdicts)
            summary.graded += len(cached_verdicts)
            summary.from_cache += len(cached_verdicts)
            resolved += len(cached_verdicts)
            rep.advance(len(cached_verdicts), 0, 0)
        to_send = [r for r in requests if r.prompt_hash not in cached]
        summary.prompts_sent = len(to_send)

        def on_outcome(outcome: JudgeOutcome) -> None:
            nonlocal standin_noted, resolved
            rows = groups[outcome.request.prompt_hash]
            replies, verdicts = _records(outcome, rows, config, engine.base_url)
            writer.add(replies, verdicts, standin=outcome.standin)
            tin, tout = outcome.tokens
            summary.tokens_in += tin
            summary.tokens_out += tout
            resolved += len(rows)
            if outcome.ok:
                summary.graded += len(rows)
                summary.shared += len(rows) - 1
            else:
                summary.errors += len(rows)
                summary.errors_by_kind[outcome.error_kind or "unknown"] += len(rows)
            if outcome.standin and not standin_noted:
                standin_noted = summary.standin = True
                rep.note(STANDIN_NOTE)
            rep.advance(len(rows), 0 if outcome.ok else len(rows), tin + tout)

        run_task = asyncio.create_task(engine.run(to_send, on_outcome))
        try:
            # The writer only ends early by failing (e.g. the file stayed locked): then stop sending.
            await asyncio.wait({run_task, writer_task}, return_when=asyncio.FIRST_COMPLETED)
            if writer_task.done() and not run_task.done():
                run_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await run_task
                writer_task.result()  # raises the write error
            await run_task
        except JudgeFatalError as exc:
            summary.aborted = (
                f"{exc}; the endpoint refuses requests, so the run stopped. Check --judge-model, "
                "--judge-base-url and the API key variable"
            )
        finally:
            if not run_task.done():
                run_task.cancel()
                with contextlib.suppress(BaseException):
                    await run_task
            rep.stop()
            writer.close()
            try:
                await asyncio.shield(writer_task)
            except asyncio.CancelledError:
                # Cancelled (Ctrl-C / SIGTERM) while the last batch was being written: save what is left.
                writer.flush_now()
                raise
        summary.not_attempted = summary.targeted - resolved
        summary.requests = engine.requests_sent
        summary.retries_by_kind = Counter(engine.retries)
        if summary.aborted is None:
            await asyncio.to_thread(judging.set_unaudited, study, False)
    summary.elapsed_s = time.monotonic() - started
    return summary


def grade(study: Study, options: GradeOptions, *, reporter: Reporter | None = None) -> GradeSummary:
    """Synchronous entry point: runs :func:`grade_async`; SIGTERM cancels it cleanly (batches are kept)."""

    terminated = threading.Event()

    async def main() -> GradeSummary:
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
            return await grade_async(study, options, reporter=reporter)
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGTERM)

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        if terminated.is_set():
            raise GradeInterrupted("terminated (SIGTERM)") from None
        raise


def summary_json(summary: GradeSummary) -> dict:
    """The summary as plain JSON-able data (for scripts)."""
    return {
        "fingerprint": summary.fingerprint,
        "model": summary.model,
        "shape": summary.shape,
        "temperature": summary.temperature,
        "rationale": summary.rationale,
        "base_url": redact_url(summary.base_url),
        "in_scope": summary.in_scope,
        "already_ok": summary.already_ok,
        "targeted": summary.targeted,
        "graded": summary.graded,
        "from_cache": summary.from_cache,
        "shared": summary.shared,
        "errors": summary.errors,
        "errors_by_kind": dict(summary.errors_by_kind),
        "not_attempted": summary.not_attempted,
        "requests": summary.requests,
        "prompts_sent": summary.prompts_sent,
        "retries_by_kind": dict(summary.retries_by_kind),
        "tokens_in": summary.tokens_in,
        "tokens_out": summary.tokens_out,
        "elapsed_s": round(summary.elapsed_s, 3),
        "standin": summary.standin,
        "aborted": summary.aborted,
        "exit_code": summary.exit_code,
    }
