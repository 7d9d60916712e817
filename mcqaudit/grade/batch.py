"""Batch mode (`grade --batch`, docs/design.md §5): the same judge requests through the provider's Batch API.

The rows, the rendered prompts, the fingerprint, the (fingerprint, prompt) cache, the reply parsing and the
records written are the online run's (:mod:`.plan`, :meth:`JudgeClient.read`, :mod:`.records`,
:func:`~mcqaudit.store.judging.write_judged`); only the transport differs:

1. The prompts to send (not cached, not in a batch still open under this fingerprint) become JSONL lines
   ``{custom_id: prompt hash, method, url, body}``, split at the provider's limits (:data:`MAX_LINES` lines,
   :data:`MAX_BYTES` bytes, or ``--batch-max-lines``).
2. Each file is uploaded (``files.create(purpose="batch")``) and recorded in the study *before* its batch is
   created; the batch id is recorded as soon as ``batches.create`` answers. A re-run after a crash finds the
   record: it polls the batch, or (crashed between upload and create) finds it by its input file in
   ``batches.list``, or creates it from the uploaded file. Nothing is submitted twice.
3. Open batches are polled (``batches.retrieve``) with backoff; a finished one is collected: its output and
   error files are read, matched to the prompts by ``custom_id`` (output order is not input order), and
   written with the submission's closing in one transaction. A line that failed (in the error file, a non-200
   status, a batch that expired, was cancelled, failed validation or was lost) is an ``error`` row with the
   reason, which a re-run resubmits. An illegal reply is not re-asked within the run (a re-run asks again).
4. ``--no-wait`` submits, collects what has already finished, and returns; a later run collects the rest.

The prelude (the study checked and locked, the fingerprint registered, the rows planned) is the grade use
case's (:func:`mcqaudit.app.grade.grade_batch`); :func:`run_batches` is the run that follows, one named step
of :class:`_BatchRun` each: from the cache, close the answered, start the unstarted, submit, poll, collect.

:func:`batch_dry_run` is ``grade --dry-run --batch``: the same selection, cache, open submissions, encoding and
split, with nothing sent or written; its cost estimate counts the prompts it would submit, at the Batch
API's discount (:data:`~mcqaudit.grade.plan.BATCH_DISCOUNT`).

A collected reply gives a verdict to every row still without an ok verdict whose prompt it answers, in any
arm (as the cache would on the next run).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol, TypeVar

from mcqaudit.endpoint import BAD_RESPONSE, HTTP_ERROR, RATE_LIMITED, SERVER_ERROR, EndpointFatalError
from mcqaudit.grade.config import GradeOptions, GradeUsageError
from mcqaudit.grade.plan import (
    CostEstimate,
    DryRun,
    PlanProgress,
    Prices,
    Work,
    dry_plan,
    estimate_cost,
    plan_requests,
)
from mcqaudit.grade.records import outcome_records
from mcqaudit.grade.summary import STANDIN_NOTE, GradeSummary, summary_json
from mcqaudit.judge.client import JudgeClient, JudgeOutcome, JudgeRequest, request_body
from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.store import batches as store
from mcqaudit.store import judging
from mcqaudit.store.batches import BatchLine, Submission
from mcqaudit.store.db import Study
from mcqaudit.store.judging import ReplyRecord, TargetRow, VerdictRecord

# The provider's limits per batch (OpenAI: 50,000 requests; the input file's size, kept under 100 MB here).
MAX_LINES = 50_000
MAX_BYTES = 100_000_000
ENDPOINT: Final = "/v1/chat/completions"
COMPLETION_WINDOW: Final = "24h"
TERMINAL = ("completed", "failed", "expired", "cancelled")
# Why a line has no result, by how its batch ended (the error kind of its rows).
_NO_RESULT = {
    "expired": ("batch_expired", "the batch expired (24 h window) before this request ran"),
    "cancelled": ("batch_cancelled", "the batch was cancelled before this request ran"),
    "failed": ("batch_failed", "the batch failed validation"),
    "lost": ("batch_lost", "the endpoint no longer knows this batch"),
    "refused": ("batch_refused", "the endpoint refused to create the batch"),
}

T = TypeVar("T")


@dataclass(frozen=True)
class BatchOptions:
    """How a batch run submits and waits (the rest is :class:`~mcqaudit.grade.GradeOptions`)."""

    wait: bool = True
    max_lines: int = MAX_LINES
    max_bytes: int = MAX_BYTES
    poll_interval_s: float = 10.0
    poll_max_s: float = 300.0  # the backoff's ceiling while nothing changes
    transfer_timeout_s: float = 600.0  # uploading or downloading one file

    def validate(self) -> None:
        if not 1 <= self.max_lines <= MAX_LINES:
            raise GradeUsageError(
                f"--batch-max-lines must be between 1 and {MAX_LINES:,} (the provider's limit)"
            )
        if self.max_bytes < 1:
            raise GradeUsageError("the batch size limit must be positive")
        if self.poll_interval_s <= 0:
            raise GradeUsageError("--poll-interval must be positive")


class BatchReporter(Protocol):
    """Progress sink for a batch run: rows as they get verdicts, and the provider's progress while waiting."""

    def start(self, total: int, done: int) -> None: ...
    def advance(self, rows: int, errors: int, tokens: int) -> None: ...
    def note(self, text: str) -> None: ...
    def waiting(self, done_lines: int, total_lines: int, status: str) -> None: ...
    def stop(self) -> None: ...


class NullBatchReporter:
    def start(self, total: int, done: int) -> None: ...
    def advance(self, rows: int, errors: int, tokens: int) -> None: ...
    def note(self, text: str) -> None: ...
    def waiting(self, done_lines: int, total_lines: int, status: str) -> None: ...
    def stop(self) -> None: ...


@dataclass
class BatchSummary(GradeSummary):
    """A grade run's summary with what it did through the Batch API."""

    submitted: list[str] = field(default_factory=list)  # batch ids this run created
    closed_answered: list[str] = field(default_factory=list)  # open submissions closed: every row had a verdict
    collected: list[str] = field(default_factory=list)  # batch ids whose results this run wrote
    still_open: list[str] = field(default_factory=list)  # batch ids still running when the run ended
    waiting: int = 0  # targeted rows whose prompt is in a batch still open
    statuses: Counter[str] = field(default_factory=Counter)  # how the collected batches ended

    def lines(self) -> list[str]:
        out = [
            line.replace("re-run `mcqaudit grade`", "re-run `mcqaudit grade --batch`")
            for line in super().lines()
        ]
        ended = ", ".join(f"{k} ×{n}" for k, n in sorted(self.statuses.items()))
        out.insert(
            4,
            f"batches: {len(self.submitted)} submitted"
            + (f" ({', '.join(self.submitted)})" if self.submitted else "")
            + f"; {len(self.collected)} collected"
            + (f" ({ended})" if ended else ""),
        )
        if self.closed_answered:
            out.insert(
                5,
                f"closed without collecting: {len(self.closed_answered)} open submissions "
                f"({', '.join(self.closed_answered)}) whose rows all have a verdict under this judge already",
            )
        if self.still_open:
            out.insert(
                5,
                f"still running: {len(self.still_open)} batches ({', '.join(self.still_open)}) with "
                f"{self.waiting} rows; re-run `mcqaudit grade --batch` to collect them (results within 24 h)",
            )
        return out


def batch_summary_json(summary: BatchSummary) -> dict[str, Any]:
    return {
        **summary_json(summary),
        "batch": {
            "submitted": summary.submitted,
            "collected": summary.collected,
            "open": summary.still_open,
            "waiting": summary.waiting,
            "statuses": dict(summary.statuses),
            "closed_answered": summary.closed_answered,
        },
    }


class BatchError(Exception):
    """A Batch API call failed after its retries (the message is ours; never the client's text)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


class BatchJudge(JudgeClient):
    """The judge client with the Batch API calls (files, batches), retried and classified as online calls."""

    async def _call(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        failures = 0
        while True:
            self.requests_sent += 1
            try:
                return await call()
            except Exception as exc:
                kind, message, retry_after = self._classify(exc)
                if kind.startswith("http_") and kind != HTTP_ERROR:
                    raise EndpointFatalError(kind, f"{what}: {message}") from None
                if (
                    kind in (RATE_LIMITED, SERVER_ERROR, "timeout", "connection")
                    and failures < self.max_retries
                ):
                    self.retries[kind] += 1
                    await asyncio.sleep(self._delay(failures, retry_after))
                    failures += 1
                    continue
                raise BatchError(f"{what}: {message}", kind) from None

    async def upload(self, data: bytes, timeout_s: float) -> str:
        obj = await self._call(
            lambda: self._client.files.create(
                file=("mcqaudit-batch.jsonl", data, "application/jsonl"), purpose="batch", timeout=timeout_s
            ),
            "uploading a batch file",
        )
        return str(obj.id)

    async def create(self, input_file_id: str, fingerprint: str) -> Any:  # type: ignore[override]
        return await self._call(
            lambda: self._client.batches.create(
                input_file_id=input_file_id,
                endpoint=ENDPOINT,
                completion_window=COMPLETION_WINDOW,
                metadata={"made_by": "mcqaudit grade --batch", "judge_fingerprint": fingerprint},
            ),
            "creating a batch",
        )

    async def retrieve(self, batch_id: str) -> Any | None:
        """The batch object, or None when the endpoint does not know the batch (HTTP 404)."""
        import openai

        async def get() -> Any | None:
            try:
                return await self._client.batches.retrieve(batch_id)
            except openai.NotFoundError:
                return None

        return await self._call(get, f"polling batch {batch_id}")

    async def find(self, input_file_id: str, scan: int = 1000) -> Any | None:
        """A batch already made from ``input_file_id`` (a crash between create and its record), if any.

        An endpoint without ``GET /v1/batches`` (HTTP 404 or 405) cannot say: None, as for one it never made.
        """
        import openai

        async def look() -> Any | None:
            seen = 0
            try:
                async for b in self._client.batches.list(limit=100):
                    if b.input_file_id == input_file_id:
                        return b
                    seen += 1
                    if seen >= scan:
                        break
            except openai.APIStatusError as exc:
                if exc.status_code in (404, 405):  # listing is not supported here: nothing to find
                    return None
                raise
            return None

        return await self._call(look, "listing batches")

    async def content(self, file_id: str, timeout_s: float) -> bytes:
        resp = await self._call(
            lambda: self._client.files.content(file_id, timeout=timeout_s), f"downloading file {file_id}"
        )
        return bytes(resp.content)

    # --- one result line ------------------------------------------------------------------------------

    def outcome(
        self, line: BatchLine, result: dict[str, Any] | None, batch_status: str, batch_error: str | None
    ) -> JudgeOutcome:
        """What one line of a finished batch ended in, read as an online reply is."""
        out = JudgeOutcome(request=JudgeRequest(line.prompt_hash, "", line.n_options), attempts=1)
        if result is None:
            kind, message = _NO_RESULT.get(
                batch_status, ("missing_result", "no result line for this request")
            )
            out.error_kind, out.error = kind, message + (f" ({batch_error})" if batch_error else "")
            return out
        response = result.get("response")
        if isinstance(response, dict) and response.get("status_code") == 200:
            body = response.get("body")
            try:
                from openai.types.chat import ChatCompletion

                if not isinstance(body, dict):
                    raise ValueError("not an object")
                resp = ChatCompletion.construct(**body)
                choices = getattr(resp, "choices", None)
                if (
                    not isinstance(choices, list)
                    or not choices
                    or getattr(choices[0], "message", None) is None
                ):
                    raise ValueError("no choices")
                received, standin = self.read(resp, line.n_options)
            except (ValueError, TypeError, AttributeError, KeyError):
                out.error_kind, out.error = BAD_RESPONSE, "the batch line's body is not a chat completion"
                return out
            out.standin = standin
            out.replies.append(received)
            out.reply = received.text
            out.finished_at = received.received_at
            if received.parsed.ok:
                out.value, out.rationale = received.parsed.value, received.parsed.rationale
            else:
                out.error_kind, out.error = received.parsed.kind, self.scrub(received.parsed.error)
            return out
        if isinstance(response, dict) and isinstance(response.get("status_code"), int):
            status: int = response["status_code"]
            if status == 429:
                out.error_kind, out.error = RATE_LIMITED, "HTTP 429 (rate limited) in the batch"
            elif status >= 500:
                out.error_kind, out.error = SERVER_ERROR, f"HTTP {status} (server error) in the batch"
            else:
                out.error_kind, out.error = HTTP_ERROR, f"HTTP {status} (request refused) in the batch"
            return out
        error = result.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        msg = error.get("message") if isinstance(error, dict) else None
        kind = code if isinstance(code, str) and code else "batch_error"
        out.error_kind = kind if kind.startswith("batch_") else f"batch_{kind}"
        text = self.scrub(msg) if isinstance(msg, str) else None
        out.error = text[:300] if text else "the batch reports an error for this request"
        return out


def _encode(config: JudgeConfig, requests: Iterable[JudgeRequest]) -> Iterator[tuple[BatchLine, bytes]]:
    """Each request as its JSONL input line ``{custom_id: prompt hash, method, url, body}``, one at a time (with
    :func:`_split`, a run holds one file's lines at once, not all of them: 770 MB at 1 M rows)."""
    for r in requests:
        line = {
            "custom_id": r.prompt_hash,
            "method": "POST",
            "url": ENDPOINT,
            "body": request_body(config, r.user),
        }
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode()
        yield BatchLine(r.prompt_hash, r.prompt_hash, r.n_options), data


def _split(
    lines: Iterable[tuple[BatchLine, bytes]], max_lines: int, max_bytes: int
) -> Iterator[list[tuple[BatchLine, bytes]]]:
    """Consecutive chunks of at most ``max_lines`` lines and ``max_bytes`` bytes (a longer line goes alone),
    each made once the one before has been used."""
    cur: list[tuple[BatchLine, bytes]] = []
    size = 0
    for item in lines:
        n = len(item[1])
        if cur and (len(cur) >= max_lines or size + n > max_bytes):
            yield cur
            cur, size = [], 0
        cur.append(item)
        size += n
    if cur:
        yield cur


def _read_jsonl(data: bytes) -> list[dict[str, Any]]:
    out = []
    for raw in data.decode("utf-8", errors="replace").splitlines():
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue  # a broken line: its request ends as "missing_result"
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _answered(result: dict[str, Any]) -> bool:
    """A result line whose request was answered (HTTP 200)."""
    response = result.get("response")
    return isinstance(response, dict) and response.get("status_code") == 200


def _prefer(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Of two result lines for one custom_id, keep a 200 over anything else."""
    if old is None:
        return True
    return _answered(new) and not _answered(old)


async def run_batches(
    study: Study,
    options: GradeOptions,
    batch: BatchOptions,
    judge: BatchJudge,
    summary: BatchSummary,
    rep: BatchReporter,
    work: Work,
) -> None:
    """The batch run after the prelude (:mod:`mcqaudit.app.grade`: study checked and locked, fingerprint
    registered, rows planned): answer from the cache, close what is answered, submit, poll, collect."""
    summary.begin(work)
    run = _BatchRun(study, options.config, batch, judge, summary, rep, work, work.plan.groups)
    run.start()
    to_send = work.to_send(skip=store.open_prompt_hashes(study, run.fp))
    summary.prompts_sent = len(to_send)
    if options.arms or options.limit is not None:  # the rows outside this run's scope too (after the cache)
        run.everyone = plan_requests(options.config, judging.select_rows(study, run.fp)[0]).groups
    try:
        run.close_answered()
        await run.start_unstarted()
        await run.submit(to_send)
        await run.poll()
    except EndpointFatalError as exc:
        summary.aborted = (
            f"{exc}; the endpoint refuses requests, so the run stopped. Check --judge-model, "
            "--judge-base-url and the API key variable, and that the endpoint serves the Batch API "
            "(/v1/files, /v1/batches)"
        )
    except BatchError as exc:
        summary.aborted = f"{exc}; submitted batches are recorded in the study: re-run to continue"
    finally:
        rep.stop()
    run.finish()


@dataclass
class _BatchRun:
    """One batch run's state: the study, the judge and its transport, and the summary each step adds to.

    ``everyone``: every row without an ok verdict, by prompt (a collected reply answers all rows that share
    its prompt, in any arm); ``targeted``: the rows this run set out to grade (what the summary counts).
    """

    study: Study
    config: JudgeConfig
    batch: BatchOptions
    judge: BatchJudge
    summary: BatchSummary
    rep: BatchReporter
    work: Work
    everyone: dict[str, list[TargetRow]]
    standin_noted: bool = False
    targeted: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.targeted = {t.row_id for t in self.work.targets}

    @property
    def fp(self) -> str:
        return self.config.fingerprint

    def start(self) -> None:
        """The progress display; the rows an earlier legal reply answers, written without a request."""
        self.rep.start(total=self.summary.targeted, done=0)
        self.standin_noted = self.summary.standin
        if self.standin_noted:
            self.rep.note(STANDIN_NOTE)
        from_cache = self.work.cache_verdicts(self.config, self.judge.base_url, datetime.now(UTC))
        if from_cache:
            judging.write_judged(self.study, [], from_cache)
            self.summary.graded += len(from_cache)
            self.summary.from_cache += len(from_cache)
            self.rep.advance(len(from_cache), 0, 0)

    def close_answered(self) -> None:
        """Close the open submissions none of whose prompts any row still waits for (their rows were graded
        otherwise, e.g. online): they bring nothing, and are neither created, polled nor listed again."""
        cached = self.work.cached
        answered = [
            sub
            for sub in store.open_submissions(self.study, self.fp)
            if not any(
                line.prompt_hash in self.everyone and line.prompt_hash not in cached
                for line in store.lines_of(self.study, sub.input_file_id)
            )
        ]
        if answered:
            store.close_answered(self.study, [sub.input_file_id for sub in answered])
            self.summary.closed_answered = [s.batch_id or s.input_file_id for s in answered]

    async def start_unstarted(self) -> None:
        """A submission recorded but never created (a crash between upload and create): find it, or create it."""
        for sub in store.open_submissions(self.study, self.fp):
            if sub.batch_id is None:
                await self._create(sub, look_first=True)

    async def submit(self, to_send: Sequence[JudgeRequest]) -> None:
        """New submissions: upload, record, create, record the id; all before any polling."""
        judge, batch = self.judge, self.batch
        for chunk in _split(_encode(self.config, to_send), batch.max_lines, batch.max_bytes):
            payload = b"".join(d for _, d in chunk)
            fid = await judge.upload(payload, batch.transfer_timeout_s)
            store.record_upload(
                self.study,
                input_file_id=fid,
                fingerprint=self.fp,
                base_url=judge.base_url,
                lines=[line for line, _ in chunk],
                size=len(payload),
            )
            await self._create(
                Submission(fid, None, self.fp, judge.base_url, len(chunk), "uploaded", datetime.now(UTC)),
                look_first=False,
            )
            self.summary.requests += len(chunk)

    async def _create(self, sub: Submission, look_first: bool) -> None:
        """Create the batch of an uploaded, recorded file (after a crash, first look for one made from it).
        A refusal (HTTP 4xx, e.g. a file over the provider's limits) closes the submission with its rows in
        error, so that the next run sends them again instead of retrying the refused file forever."""
        try:
            b = (await self.judge.find(sub.input_file_id) if look_first else None) or await self.judge.create(
                sub.input_file_id, self.fp
            )
        except BatchError as exc:
            if exc.kind != HTTP_ERROR:
                raise
            await self._collect(sub, None, refused=str(exc))
            return
        store.record_created(self.study, sub.input_file_id, b.id, b.status)
        self.summary.submitted.append(b.id)

    async def poll(self) -> None:
        """Poll until every open batch under this fingerprint is collected (or once, with --no-wait)."""
        open_subs = store.open_submissions(self.study, self.fp)
        interval = self.batch.poll_interval_s
        last: tuple[object, ...] | None = None
        progress: dict[str, tuple[int, int, str]] = {}  # batch id -> (lines done, lines, status)
        while open_subs:
            for sub in list(open_subs):
                if await self._poll_one(sub, progress):
                    open_subs.remove(sub)
            if not open_subs or not self.batch.wait:
                break
            lines_done = sum(p[0] for p in progress.values())
            lines_total = sum(p[1] for p in progress.values())
            by_status = Counter(p[2] for p in progress.values() if p[2] != "collected")
            status = f"{len(open_subs)} batches open: " + ", ".join(
                f"{k} ×{n}" for k, n in sorted(by_status.items())
            )
            if len(progress) > len(open_subs):
                status += f"; {len(progress) - len(open_subs)} collected"
            now_state = (lines_done, tuple(sorted(by_status.items())), len(open_subs))
            ceiling = self.batch.poll_max_s
            interval = self.batch.poll_interval_s if now_state != last else min(interval * 1.5, ceiling)
            last = now_state
            self.rep.waiting(lines_done, lines_total, f"{status}; next poll in {interval:.3g} s")
            await asyncio.sleep(interval)
        self.summary.still_open = [s.batch_id or s.input_file_id for s in open_subs]

    async def _poll_one(self, sub: Submission, progress: dict[str, tuple[int, int, str]]) -> bool:
        """Poll one open batch: collect it when it has ended (True), else record its status and progress."""
        assert sub.batch_id is not None
        b = await self.judge.retrieve(sub.batch_id)
        if b is None or b.status in TERMINAL:
            await self._collect(sub, b)
            progress[sub.batch_id] = (sub.lines, sub.lines, "collected")
            return True
        store.record_status(self.study, sub.input_file_id, str(b.status))
        counts = getattr(b, "request_counts", None)
        done = (getattr(counts, "completed", 0) or 0) + (getattr(counts, "failed", 0) or 0)
        progress[sub.batch_id] = (done, getattr(counts, "total", 0) or sub.lines, str(b.status))
        return False

    async def _collect(self, sub: Submission, b: Any | None, refused: str | None = None) -> None:
        """A finished (or lost, or refused) batch: its result lines matched to its prompts and written."""
        lines = store.lines_of(self.study, sub.input_file_id)
        status = "refused" if refused else "lost" if b is None else str(b.status)
        error: str | None = refused
        results: dict[str, dict[str, Any]] = {}
        if b is not None:
            if status == "failed":
                data = getattr(getattr(b, "errors", None), "data", None) or []
                msgs = [self.judge.scrub(getattr(e, "message", None)) for e in data]
                error = "; ".join(m for m in msgs if m)[:300] or None
            results = await self._results(b, {line.custom_id for line in lines})
        outcomes = [self.judge.outcome(line, results.get(line.custom_id), status, error) for line in lines]
        await asyncio.to_thread(self._write, outcomes, sub, status, error)
        self.summary.collected.append(sub.batch_id or sub.input_file_id)
        self.summary.statuses[status] += 1

    async def _results(self, b: Any, wanted: set[str]) -> dict[str, dict[str, Any]]:
        """The result line of each wanted ``custom_id``, from the batch's output and error files."""
        results: dict[str, dict[str, Any]] = {}
        for fid in (b.output_file_id, b.error_file_id):
            if not fid:
                continue
            for obj in _read_jsonl(await self.judge.content(fid, self.batch.transfer_timeout_s)):
                cid = obj.get("custom_id")
                if isinstance(cid, str) and cid in wanted and _prefer(results.get(cid), obj):
                    results[cid] = obj
        return results

    def _write(
        self, outcomes: Sequence[JudgeOutcome], sub: Submission, status: str, error: str | None
    ) -> None:
        """The outcomes' records and the submission's closing, in one transaction; counted and shown."""
        summary = self.summary
        replies: list[ReplyRecord] = []
        verdicts: list[VerdictRecord] = []
        standin = False
        rows_ok = rows_err = tokens = 0
        for outcome in outcomes:
            rows: list[TargetRow] = self.everyone.get(outcome.request.prompt_hash, [])
            r, v = outcome_records(outcome, rows, self.config, self.judge.base_url)
            replies += r
            verdicts += v
            standin = standin or outcome.standin
            tin, tout = outcome.tokens
            summary.tokens_in += tin
            summary.tokens_out += tout
            tokens += tin + tout
            mine = sum(1 for row in rows if row.row_id in self.targeted)
            if outcome.ok:
                rows_ok += mine
                summary.shared += max(mine - 1, 0)
            else:
                rows_err += mine
                summary.errors_by_kind[outcome.error_kind or "unknown"] += mine
        judging.write_judged(
            self.study,
            replies,
            verdicts,
            standin_fingerprint=self.fp if standin else None,
            also=store.collected(sub.input_file_id, status, error),
        )
        summary.graded += rows_ok
        summary.errors += rows_err
        self.rep.advance(rows_ok + rows_err, rows_err, tokens)
        if standin and not self.standin_noted:
            self.standin_noted = summary.standin = True
            self.rep.note(STANDIN_NOTE)

    def finish(self) -> None:
        """What the run leaves waiting on open batches, what it never sent; the study audited if it ran through."""
        summary, groups, cached = self.summary, self.work.plan.groups, self.work.cached
        open_now = store.open_prompt_hashes(self.study, self.fp)
        summary.waiting = sum(len(groups[h]) for h in groups if h in open_now and h not in cached)
        summary.not_attempted = max(summary.targeted - summary.graded - summary.errors - summary.waiting, 0)
        summary.retries_by_kind = Counter(self.judge.retries)
        if summary.aborted is None:
            judging.set_unaudited(self.study, False)


@dataclass(frozen=True)
class BatchDryRun:
    """What `grade --dry-run --batch` shows: the online dry run (one prompt, the fingerprint, the rows), and
    what a batch run would do with them, with the cost of the prompts it would submit (``estimate``, at the
    Batch API's discount). Nothing is sent or written."""

    plan: DryRun
    waiting: int  # targeted rows whose prompt is in a submission still open (not sent again)
    prompts: int  # prompts a run would submit: not cached, not in an open submission
    batches: list[tuple[int, int]]  # (lines, bytes) of each batch it would create, in order
    max_lines: int
    max_bytes: int
    open: list[Submission]  # what a run polls first (those without a batch id it finds or creates first)
    estimate: CostEstimate

    def to_json(self) -> dict[str, Any]:
        """`grade --dry-run --batch --json`: the batch estimate's keys, the dry run, the batches."""
        return {
            **self.plan.to_json(),
            **self.estimate.to_json(),
            "waiting_rows": self.waiting,
            "batches": [{"lines": n, "bytes": size} for n, size in self.batches],
            "open_batches": [
                {
                    "batch_id": sub.batch_id,
                    "input_file_id": sub.input_file_id,
                    "lines": sub.lines,
                    "status": sub.status,
                }
                for sub in self.open
            ],
        }


def batch_dry_run(
    study: Study,
    options: GradeOptions,
    batch: BatchOptions,
    prices: Prices | None = None,
    progress: PlanProgress | None = None,
) -> BatchDryRun:
    """The same selection, cache, open-submission exclusion, line encoding and split as a real run."""
    batch.validate()
    shown, work = dry_plan(study, options, prices, progress)
    fp = options.config.fingerprint
    pending = store.open_prompt_hashes(study, fp)
    to_send = work.to_send(skip=pending)
    chunks = _split(_encode(options.config, to_send), batch.max_lines, batch.max_bytes)
    waiting = [rows for h, rows in work.plan.groups.items() if h in pending and h not in work.cached]
    return BatchDryRun(
        plan=shown,
        waiting=sum(len(rows) for rows in waiting),
        prompts=len(to_send),
        batches=[(len(c), sum(len(d) for _, d in c)) for c in chunks],
        max_lines=batch.max_lines,
        max_bytes=batch.max_bytes,
        open=store.open_submissions(study, fp),
        estimate=estimate_cost(options.config, to_send, batch=True, prices=prices),
    )
