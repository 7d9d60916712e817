"""A grade run: strict pre-filter → judge → store, resumable and cached (docs/design.md §5).

Rows the pre-filter resolved, and blank generations (OTHER by rule), are never sent: their verdicts come
from ``gen_rows`` through the ``graded_rows`` view. Every other row gets one judge verdict per fingerprint.
Rows that render to the same prompt share one request (:mod:`.plan`); a (fingerprint, prompt) that already
got a legal reply is never sent again. Each outcome is journalled as it arrives and written with its batch
(:mod:`.writer`), each batch one short transaction, so a killed run loses at most the requests in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from mcqaudit.endpoint import HTTP_ERROR, run_until_sigterm
from mcqaudit.files import os_reason
from mcqaudit.grade.config import GradeOptions, check_arms, resolve_api_key
from mcqaudit.grade.lock import one_grader
from mcqaudit.grade.plan import plan_requests
from mcqaudit.grade.records import cached_verdicts, outcome_records
from mcqaudit.grade.summary import STANDIN_NOTE, GradeSummary, NullReporter, Reporter
from mcqaudit.grade.writer import VerdictWriter
from mcqaudit.judge.client import JudgeClient, JudgeFatalError, JudgeOutcome
from mcqaudit.store import judging
from mcqaudit.store.db import Study, StudyError, write_failure
from mcqaudit.store.journal import JUDGED, RESERVE_BYTES, Journal, pending, replay


def grade_without_judge(study: Study, arms: Sequence[str] = ()) -> dict[str, int]:
    """`--no-judge`: the strict pre-filter alone. Marks the study unaudited; returns row counts."""
    study.require_writable()
    check_arms(study, arms)
    judging.set_unaudited(study, True)
    return judging.resolution_counts(study, arms)


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


async def grade_async(
    study: Study, options: GradeOptions, *, reporter: Reporter | None = None
) -> GradeSummary:
    """Grade every row in scope that needs the judge and has no ok verdict under this fingerprint."""
    options.validate()
    study.require_writable()
    check_arms(study, options.arms)
    config = options.config
    api_key = resolve_api_key(options.api_key_env, options.base_url)
    rep: Reporter = reporter or NullReporter()
    started = time.monotonic()

    client = JudgeClient(
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
        base_url=client.base_url,
        rationale=config.rationale,
    )
    if study.replayed is not None:  # what opening the study replayed, told once (by the first run on it)
        summary.recovered, study.replayed = study.replayed.records.get(JUDGED, 0), None
    async with one_grader(study), client:
        journal = Journal(study.path, fsync_interval_s=options.journal_fsync_s)
        try:
            # Room for the replies in flight when the disk fills, set aside before anything is sent.
            await asyncio.to_thread(journal.reserve, RESERVE_BYTES)
        except OSError as exc:
            raise StudyError(
                f"{journal.dir}: no room for the journal ({os_reason(exc)}): a grade run first sets "
                f"{RESERVE_BYTES // 1024} KiB aside beside the study, so that no reply that arrives is lost "
                "when the disk fills. Nothing was sent; free some space and re-run"
            ) from None
        try:
            await _run(study, options, client, journal, summary, rep)
        finally:
            journal.close()  # what was not committed (a failed write) stays for the next open
    summary.elapsed_s = time.monotonic() - started
    return summary


async def _run(
    study: Study,
    options: GradeOptions,
    client: JudgeClient,
    journal: Journal,
    summary: GradeSummary,
    rep: Reporter,
) -> None:
    config = options.config
    # A study opened before another run was killed has not seen that run's journal: replay it now, so that
    # the selection and the reply cache below see every reply that arrived.
    late = await asyncio.to_thread(replay, study)
    summary.recovered += late.records.get(JUDGED, 0)
    try:
        await asyncio.to_thread(judging.register_config, study, config)
    except StudyError:
        raise
    except Exception as exc:  # DuckDB's or the OS's refusal of the run's first write (a full disk): one line
        raise StudyError(write_failure(study.path, exc)) from None
    targets, summary.already_ok = await asyncio.to_thread(
        judging.select_rows, study, config.fingerprint, options.arms, options.limit
    )
    summary.in_scope = (await asyncio.to_thread(judging.resolution_counts, study, options.arms)).get(
        "needs_judge", 0
    )
    summary.targeted = len(targets)
    if await asyncio.to_thread(judging.is_standin, study, config.fingerprint):
        summary.standin = True

    planned = plan_requests(config, targets)
    groups = planned.groups
    cached = await asyncio.to_thread(judging.cached_replies, study, config.fingerprint, list(groups))

    writer = VerdictWriter(
        study, config.fingerprint, options.flush_every, options.flush_interval_s, journal=journal
    )
    writer_task = asyncio.create_task(writer.run())
    rep.start(total=summary.targeted, done=0)
    if summary.standin:
        rep.note(STANDIN_NOTE)
    standin_noted = summary.standin
    resolved = 0

    # Rows whose prompt already got a legal reply: a verdict without a request.
    now = datetime.now(UTC)
    from_cache = [
        v
        for h, hit in cached.items()
        for v in cached_verdicts(hit, h, groups[h], config, client.base_url, now)
    ]
    if from_cache:
        writer.add([], from_cache, journal=False)
        summary.graded += len(from_cache)
        summary.from_cache += len(from_cache)
        resolved += len(from_cache)
        rep.advance(len(from_cache), 0, 0)
    to_send = [r for r in planned.requests if r.prompt_hash not in cached]
    summary.prompts_sent = len(to_send)
    refusals = RefusalStreak(options.refusals_to_stop)

    def on_outcome(outcome: JudgeOutcome) -> None:
        nonlocal standin_noted, resolved
        rows = groups[outcome.request.prompt_hash]
        replies, verdicts = outcome_records(outcome, rows, config, client.base_url)
        writer.add(replies, verdicts, standin=outcome.standin)
        refusals.see(outcome)
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

    def stop_reason() -> str | None:
        """Why no further request may go out: a failed write (study or journal), or a refusing endpoint.
        Asked before each request, so what is in flight then still arrives and is journalled."""
        return writer.failed or journal.stopped or refusals.tripped

    sending = itertools.takewhile(lambda _: stop_reason() is None, to_send)
    run_task = asyncio.create_task(client.run(sending, on_outcome))
    try:
        # The writer only ends early through a bug (a failed write halts it instead): then stop sending.
        await asyncio.wait({run_task, writer_task}, return_when=asyncio.FIRST_COMPLETED)
        if writer_task.done() and not run_task.done():
            run_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run_task
            writer_task.result()  # raises the writer's error
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
    summary.journal_failed = journal.failed
    summary.not_attempted = summary.targeted - resolved
    summary.requests = client.requests_sent
    summary.retries_by_kind = Counter(client.retries)
    if summary.aborted is None:
        if writer.failed or journal.stopped:
            summary.aborted = _stopped(study, writer.failed or journal.stopped or "", journal)
        elif refusals.tripped:
            summary.aborted = (
                f"the judge endpoint refused {refusals.limit} requests in a row with the same answer, "
                f"{refusals.tripped}; the run stopped sending, since it would refuse the rest too. Check the "
                "judge settings (model, --seed, --max-tokens, what the endpoint accepts), then re-run: the rows "
                "not sent stay pending"
            )
    if summary.aborted is None:
        await asyncio.to_thread(judging.set_unaudited, study, False)


def grade(study: Study, options: GradeOptions, *, reporter: Reporter | None = None) -> GradeSummary:
    """Synchronous entry point: runs :func:`grade_async`; SIGTERM cancels it cleanly (batches are kept) and
    raises :class:`~mcqaudit.grade.GradeInterrupted`."""
    return run_until_sigterm(lambda: grade_async(study, options, reporter=reporter))
