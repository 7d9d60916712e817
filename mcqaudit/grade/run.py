"""A grade run: strict pre-filter → judge → store, resumable and cached (docs/design.md §5).

Rows the pre-filter resolved, and blank generations (OTHER by rule), are never sent: their verdicts come
from ``gen_rows`` through the ``graded_rows`` view. Every other row gets one judge verdict per fingerprint.
Rows that render to the same prompt share one request (:mod:`.plan`); a (fingerprint, prompt) that already
got a legal reply is never sent again. Each outcome is journalled as it arrives and written with its batch
(:mod:`.writer`), each batch one short transaction, so a killed run loses at most the requests in flight.

The prelude (open and lock the study, replay its journal, check the options, look up the key, select and
plan the rows) is the grade use case's (:mod:`mcqaudit.app.grade`); this module is the run that follows:
the journal's reserve (:func:`reserved_journal`) and the sending and writing (:func:`send`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from mcqaudit.endpoint import HTTP_ERROR
from mcqaudit.files import os_reason
from mcqaudit.grade.config import GradeOptions
from mcqaudit.grade.plan import Work
from mcqaudit.grade.records import outcome_records
from mcqaudit.grade.summary import STANDIN_NOTE, GradeSummary, Reporter
from mcqaudit.grade.writer import VerdictWriter
from mcqaudit.judge.client import JudgeClient, JudgeFatalError, JudgeOutcome, JudgeRequest
from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.store import judging
from mcqaudit.store.db import Study, StudyError
from mcqaudit.store.journal import JUDGED, RESERVE_BYTES, Journal, pending
from mcqaudit.store.judging import InTransaction, TargetRow

# Rows rendered at a time when the plan is rendered as the run sends: one chunk fills the first requests'
# slots at the default concurrency, and takes ~1-2 ms of the event loop.
RENDER_CHUNK = 64


class RefusalStreak:
    """Outcomes refused in a row with the same 4xx status and server message, none succeeding in between.

    ``limit`` of them trips it for good (:attr:`tripped` holds the refusal): an endpoint that refuses the
    request itself (a parameter it does not support, a prompt it rejects) refuses every other one too.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.count = 0
        self.last: str | None = None
        self.tripped: str | None = None

    def see(self, outcome: JudgeOutcome) -> None:
        if outcome.ok or outcome.error_kind != HTTP_ERROR:
            self.count, self.last = 0, None
            return
        self.count = self.count + 1 if outcome.error == self.last else 1
        self.last = outcome.error
        if self.count >= self.limit and self.tripped is None:
            self.tripped = outcome.error


def _stopped(study: Study, why: str, journal: Journal) -> str:
    """The summary's one line for a run that stopped at a failed write."""
    kept = pending(study.path).records.get(JUDGED, 0)
    lost = f"; {journal.failed}, so replies after that were not kept" if journal.failed else ""
    return (
        f"{why}; the run stopped sending at that first failed write. {kept} replies that arrived and are not "
        f"yet in the study are kept in its journal and go in at its next open{lost}. Free some space (or "
        "stop what holds the file) and re-run `mcqaudit grade`: it sends only the rows still missing"
    )


@contextlib.asynccontextmanager
async def reserved_journal(study: Study, options: GradeOptions) -> AsyncIterator[Journal]:
    """The run's journal, with room set aside (before anything is sent) for the replies in flight when the
    disk fills; closed at the end (what was not committed, after a failed write, stays for the next open)."""
    journal = Journal(study.path, fsync_interval_s=options.journal_fsync_s)
    try:
        await asyncio.to_thread(journal.reserve, RESERVE_BYTES)
    except OSError as exc:
        raise StudyError(
            f"{journal.dir}: no room for the journal ({os_reason(exc)}): a grade run first sets "
            f"{RESERVE_BYTES // 1024} KiB aside beside the study, so that no reply that arrives is lost "
            "when the disk fills. Nothing was sent; free some space and re-run"
        ) from None
    try:
        yield journal
    finally:
        journal.close()


@dataclass
class _Online:
    """One online run's state while it sends: what each outcome adds to the summary and the writer."""

    config: JudgeConfig
    base_url: str | None
    work: Work
    writer: VerdictWriter
    summary: GradeSummary
    rep: Reporter
    refusals: RefusalStreak
    resolved: int = 0  # targeted rows that got an outcome (a verdict or an error)
    standin_noted: bool = False
    # While the plan is still rendered (``work.planner``): the outcomes that arrived, for the rows rendered
    # after them that share their prompt.
    arrived: dict[str, JudgeOutcome] = field(default_factory=dict)

    def start(self) -> None:
        """The progress display; the rows an earlier legal reply answers, written without a request."""
        self.rep.start(total=self.summary.targeted, done=0)
        if self.summary.standin:
            self.rep.note(STANDIN_NOTE)
        self.standin_noted = self.summary.standin
        from_cache = self.work.cache_verdicts(self.config, self.base_url, datetime.now(UTC))
        if from_cache:
            self.writer.add([], from_cache, journal=False)
            self.summary.graded += len(from_cache)
            self.summary.from_cache += len(from_cache)
            self.resolved += len(from_cache)
            self.rep.advance(len(from_cache), 0, 0)

    def on_outcome(self, outcome: JudgeOutcome) -> None:
        """One request's outcome: journalled and queued for the writer, counted, shown."""
        summary = self.summary
        h = outcome.request.prompt_hash
        rows = self.work.plan.groups[h]
        planner = self.work.planner
        if planner is not None and not planner.done:
            self.arrived[h] = outcome
        replies, verdicts = outcome_records(outcome, rows, self.config, self.base_url)
        self.writer.add(replies, verdicts, standin=outcome.standin)
        self.refusals.see(outcome)
        tin, tout = outcome.tokens
        summary.tokens_in += tin
        summary.tokens_out += tout
        self.resolved += len(rows)
        if outcome.ok:
            summary.graded += len(rows)
            summary.shared += len(rows) - 1
        else:
            summary.errors += len(rows)
            summary.errors_by_kind[outcome.error_kind or "unknown"] += len(rows)
        if outcome.standin and not self.standin_noted:
            self.standin_noted = summary.standin = True
            self.rep.note(STANDIN_NOTE)
        self.rep.advance(len(rows), 0 if outcome.ok else len(rows), tin + tout)

    # --- the plan rendered as the run sends (``work.planner``) ---------------------------------------------

    def _render(self, n: int) -> None:
        """The next ``n`` rows rendered; a row that shares the prompt of an outcome that already arrived
        gets its verdict from it now (as it would have with that outcome, had it been rendered before)."""
        planner = self.work.planner
        assert planner is not None
        late: dict[str, list[TargetRow]] = {}
        for h, row in planner.render(n):
            if h in self.arrived:
                late.setdefault(h, []).append(row)
        for h, rows in late.items():
            outcome = self.arrived[h]
            _, verdicts = outcome_records(outcome, rows, self.config, self.base_url)
            self.writer.add([], verdicts, standin=outcome.standin)
            self.resolved += len(rows)
            if outcome.ok:
                self.summary.graded += len(rows)
                self.summary.shared += len(rows)
            else:
                self.summary.errors += len(rows)
                self.summary.errors_by_kind[outcome.error_kind or "unknown"] += len(rows)
            self.rep.advance(len(rows), 0 if outcome.ok else len(rows), 0)
        if planner.done:
            self.arrived.clear()
            self.summary.prompts_sent = len(planner.plan.requests)

    def streamed(self) -> Iterator[JudgeRequest]:
        """The requests in row order, rendering the next chunk of rows whenever the rendered ones run out."""
        planner = self.work.planner
        assert planner is not None
        requests, i = planner.plan.requests, 0
        while True:
            if i < len(requests):
                yield requests[i]
                i += 1
            elif planner.done:
                return
            else:
                self._render(RENDER_CHUNK)

    async def render_rest(self) -> None:
        """The rows not rendered yet, a chunk at a time between the event loop's other work (the first
        requests are in flight meanwhile)."""
        planner = self.work.planner
        assert planner is not None
        while not planner.done:
            self._render(RENDER_CHUNK)
            await asyncio.sleep(0)

    def stop_reason(self, journal: Journal) -> str | None:
        """Why no further request may go out: a failed write (study or journal), or a refusing endpoint.
        Asked before each request, so what is in flight then still arrives and is journalled."""
        return self.writer.failed or journal.stopped or self.refusals.tripped


async def send(
    study: Study,
    options: GradeOptions,
    client: JudgeClient,
    journal: Journal,
    summary: GradeSummary,
    rep: Reporter,
    work: Work,
    *,
    then: Callable[[Study], None] | None = None,
) -> bool:
    """Send the planned requests that the cache does not answer, N in flight, writing each outcome as it
    arrives; then say in ``summary`` what the run did and why it stopped, if it did. ``then`` runs in the
    connection of the run's last write, once it has committed (:meth:`VerdictWriter.close`); returns whether
    it ran (no last write, or a failed one: it did not)."""
    config = options.config
    summary.begin(work)
    writer = VerdictWriter(
        study, config.fingerprint, options.flush_every, options.flush_interval_s, journal=journal
    )
    writer_task = asyncio.create_task(writer.run())
    run = _Online(
        config, client.base_url, work, writer, summary, rep, RefusalStreak(options.refusals_to_stop)
    )
    run.start()
    source: Iterable[JudgeRequest]
    if work.planner is None:
        source = work.to_send()
        summary.prompts_sent = len(source)
        rendering = None
    else:  # the first requests go out while the later rows are rendered
        source = run.streamed()
        rendering = asyncio.create_task(run.render_rest())
    sending = itertools.takewhile(lambda _: run.stop_reason(journal) is None, source)
    run_task = asyncio.create_task(client.run(sending, run.on_outcome))
    finished = False
    try:
        try:
            await _until_sent(run_task, writer_task)
            finished = True
        except JudgeFatalError as exc:
            summary.aborted = (
                f"{exc}; the endpoint refuses requests, so the run stopped. Check --judge-model, "
                "--judge-base-url and the API key variable"
            )
        if rendering is not None:  # every row rendered (a run that stopped early counts them all as well)
            await rendering
        finished = finished and run.stop_reason(journal) is None
    finally:
        if rendering is not None and not rendering.done():
            rendering.cancel()
        # A run that sent everything clears the unaudited mark in its last write's transaction (so only if
        # that commits; a run with nothing left to write clears it below, as one that stopped never does).
        await _wind_down(
            run_task, writer_task, writer, rep, last=judging.mark_audited if finished else None, then=then
        )
    summary.journal_failed = journal.failed
    summary.not_attempted = summary.targeted - run.resolved
    summary.requests = client.requests_sent
    summary.retries_by_kind = Counter(client.retries)
    if summary.aborted is None:
        summary.aborted = _why_stopped(study, writer, journal, run.refusals)
    if summary.aborted is None and not writer.last_written:
        await asyncio.to_thread(judging.set_unaudited, study, False)
        return False  # written after the last write: what ``then`` found is not the study as left
    return writer.then_ran


async def _until_sent(run_task: asyncio.Task[None], writer_task: asyncio.Task[None]) -> None:
    """Wait for the requests; the writer only ends early through a bug (a failed write halts it instead):
    then stop sending and raise its error."""
    await asyncio.wait({run_task, writer_task}, return_when=asyncio.FIRST_COMPLETED)
    if writer_task.done() and not run_task.done():
        run_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run_task
        writer_task.result()  # raises the writer's error
    await run_task


async def _wind_down(
    run_task: asyncio.Task[None],
    writer_task: asyncio.Task[None],
    writer: VerdictWriter,
    rep: Reporter,
    last: InTransaction | None = None,
    then: Callable[[Study], None] | None = None,
) -> None:
    """Stop sending, stop the display, and let the writer write what is left (with ``last`` in its final
    transaction, ``then`` after it in its connection)."""
    if not run_task.done():
        run_task.cancel()
        with contextlib.suppress(BaseException):
            await run_task
    rep.stop()
    writer.close(last, then)
    try:
        await asyncio.shield(writer_task)
    except asyncio.CancelledError:
        # Cancelled (Ctrl-C / SIGTERM) while the last batch was being written: save what is left.
        writer.flush_now()
        raise


def _why_stopped(
    study: Study, writer: VerdictWriter, journal: Journal, refusals: RefusalStreak
) -> str | None:
    """The summary's line for a run that stopped sending early (a failed write, a refusing endpoint)."""
    if writer.failed or journal.stopped:
        return _stopped(study, writer.failed or journal.stopped or "", journal)
    if refusals.tripped:
        return (
            f"the judge endpoint refused {refusals.limit} requests in a row with the same answer, "
            f"{refusals.tripped}; the run stopped sending, since it would refuse the rest too. Check the "
            "judge settings (model, --seed, --max-tokens, what the endpoint accepts), then re-run: the rows "
            "not sent stay pending"
        )
    return None
