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
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from mcqaudit.endpoint import run_until_sigterm
from mcqaudit.grade.config import GradeOptions, check_arms, resolve_api_key
from mcqaudit.grade.plan import plan_requests
from mcqaudit.grade.records import cached_verdicts, outcome_records
from mcqaudit.grade.summary import STANDIN_NOTE, GradeSummary, NullReporter, Reporter
from mcqaudit.grade.writer import VerdictWriter
from mcqaudit.judge.client import JudgeClient, JudgeFatalError, JudgeOutcome
from mcqaudit.store import judging
from mcqaudit.store.db import Study
from mcqaudit.store.journal import JUDGED, Journal, replay


def grade_without_judge(study: Study, arms: Sequence[str] = ()) -> dict[str, int]:
    """`--no-judge`: the strict pre-filter alone. Marks the study unaudited; returns row counts."""
    check_arms(study, arms)
    judging.set_unaudited(study, True)
    return judging.resolution_counts(study, arms)


async def grade_async(
    study: Study, options: GradeOptions, *, reporter: Reporter | None = None
) -> GradeSummary:
    """Grade every row in scope that needs the judge and has no ok verdict under this fingerprint."""
    options.validate()
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
    async with client:
        if not study.read_only:
            # A study opened before another run was killed has not seen that run's journal: replay it now, so
            # that the selection and the reply cache below see every reply that arrived.
            late = await asyncio.to_thread(replay, study)
            summary.recovered += late.records.get(JUDGED, 0)
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

        planned = plan_requests(config, targets)
        groups = planned.groups
        cached = await asyncio.to_thread(judging.cached_replies, study, config.fingerprint, list(groups))

        journal = Journal(study.path, fsync_interval_s=options.journal_fsync_s)
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

        def on_outcome(outcome: JudgeOutcome) -> None:
            nonlocal standin_noted, resolved
            rows = groups[outcome.request.prompt_hash]
            replies, verdicts = outcome_records(outcome, rows, config, client.base_url)
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

        run_task = asyncio.create_task(client.run(to_send, on_outcome))
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
            finally:
                journal.close()  # what was not committed (a failed write) stays for the next open
        summary.journal_failed = journal.failed
        summary.not_attempted = summary.targeted - resolved
        summary.requests = client.requests_sent
        summary.retries_by_kind = Counter(client.retries)
        if summary.aborted is None:
            await asyncio.to_thread(judging.set_unaudited, study, False)
    summary.elapsed_s = time.monotonic() - started
    return summary


def grade(study: Study, options: GradeOptions, *, reporter: Reporter | None = None) -> GradeSummary:
    """Synchronous entry point: runs :func:`grade_async`; SIGTERM cancels it cleanly (batches are kept) and
    raises :class:`~mcqaudit.grade.GradeInterrupted`."""
    return run_until_sigterm(lambda: grade_async(study, options, reporter=reporter))
