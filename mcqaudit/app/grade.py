"""The grade use case (docs/design.md §5): judge settings in, a run's summary out.

This module is the one prelude every run goes through, online and batch alike, before anything is sent:

1. the study is opened (:func:`mcqaudit.app.study.open_study`: its journal replayed) and checked writable;
2. the options are checked (:meth:`GradeOptions.validate`, the arms the study has) and the API key looked up
   in its environment variable (never stored);
3. the study's grader lock is taken (:func:`mcqaudit.grade.lock.one_grader`: one run per study);
4. online: the journal's reserve is set aside and the journal replayed again (another run may have been
   killed since the study was opened);
5. the fingerprint is registered and the rows planned (:func:`mcqaudit.grade.plan.select_work`; online,
   :func:`_prepare`: on one open of the study, while the judge client is built in a thread).

The run itself is :mod:`mcqaudit.grade.run` (online) or :mod:`mcqaudit.grade.batch` (the Batch API); the
dry runs, ``--no-judge`` and what `info` shows about judges and batches are here too, so that the faces
(``cli.py``, the dashboard, the demo) import nothing below ``app/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from mcqaudit.app.info import refresh, refresh_here
from mcqaudit.app.study import JUDGED, replay_journal, take_replayed
from mcqaudit.endpoint import api_key_for, looks_like_env_name, run_until_sigterm
from mcqaudit.endpoint import scrub as scrub
from mcqaudit.grade import run
from mcqaudit.grade.batch import (
    BatchDryRun,
    BatchJudge,
    BatchOptions,
    BatchReporter,
    BatchSummary,
    NullBatchReporter,
    batch_summary_json,
    run_batches,
)
from mcqaudit.grade.batch import batch_dry_run as _batch_dry_run
from mcqaudit.grade.config import (
    DEFAULT_API_KEY_ENV,
    NO_JUDGE_MESSAGE,
    GradeInterrupted,
    GradeOptions,
    GradeUsageError,
    check_arms,
    key_in_env,
    load_exemplars,
    resolve_api_key,
)
from mcqaudit.grade.lock import one_grader
from mcqaudit.grade.plan import (
    BATCH_DISCOUNT,
    CostEstimate,
    DryRun,
    PlanProgress,
    Prices,
    Work,
    dry_plan,
    parse_prices,
    pick_rows,
    plan_work,
    select_work,
    streamed_work,
)
from mcqaudit.grade.summary import GradeSummary, NullReporter, Reporter, summary_json
from mcqaudit.judge.client import JudgeClient
from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.store import batches as store_batches
from mcqaudit.store import judging
from mcqaudit.store.batches import BatchOverview, Submission
from mcqaudit.store.db import Study, StudyError, disk_failure, write_failure
from mcqaudit.store.judging import FingerprintSummary

__all__ = [
    "BATCH_DISCOUNT",
    "NO_JUDGE_MESSAGE",
    "BatchDryRun",
    "BatchOptions",
    "BatchOverview",
    "BatchReporter",
    "BatchSummary",
    "CostEstimate",
    "DryRun",
    "FingerprintSummary",
    "GradeInterrupted",
    "Submission",
    "GradeOptions",
    "GradeSummary",
    "GradeUsageError",
    "JudgeConfig",
    "JudgeSettings",
    "Prices",
    "Reporter",
    "Resolved",
    "StudyError",
    "batch_dry_run",
    "batch_overview",
    "batch_summary_json",
    "disk_failure",
    "dry_run",
    "fingerprints",
    "grade",
    "grade_async",
    "grade_batch",
    "grade_batch_async",
    "grade_options",
    "grade_without_judge",
    "key_in_env",
    "key_variable_plausible",
    "prices",
    "scrub",
    "summary_json",
]


@dataclass(frozen=True)
class JudgeSettings:
    """A grade run's settings as a person gives them (the `grade` command's flags): the judge, where it is,
    the name of the key's variable, and the run's scope and pace. :func:`grade_options` checks them."""

    model: str
    base_url: str | None = None
    api_key_env: str = DEFAULT_API_KEY_ENV
    shape: str = "extract"
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int = 0
    exemplars: Path | None = None
    rationale: bool = False
    sees_reasoning: bool = False
    panel: bool = False
    concurrency: int = 16
    timeout_s: float = 60.0
    max_retries: int = 5
    arms: tuple[str, ...] = ()
    limit: int | None = None


def grade_options(settings: JudgeSettings) -> GradeOptions:
    """The checked options of a run (the exemplar file read, the judge's configuration frozen); a bad
    setting is a :class:`GradeUsageError` (one line, exit 2)."""
    s = settings
    try:
        ex = load_exemplars(s.exemplars, s.shape) if s.exemplars is not None else ()
        config = JudgeConfig(model=s.model, shape=s.shape, temperature=s.temperature, max_tokens=s.max_tokens,
                             seed=s.seed, exemplars=ex, base_url=s.base_url, rationale=s.rationale,
                             sees_reasoning=s.sees_reasoning)  # fmt: skip
        options = GradeOptions(config, base_url=s.base_url, api_key_env=s.api_key_env,
                               concurrency=s.concurrency, timeout_s=s.timeout_s, max_retries=s.max_retries,
                               arms=s.arms, limit=s.limit, panel=s.panel)  # fmt: skip
        options.validate()
    except ValueError as exc:  # the judge configuration's own checks (a temperature above 0.2, ...)
        raise GradeUsageError(str(exc)) from None
    return options


def key_variable_plausible(env_name: str, base_url: str | None) -> bool:
    """Whether a key-variable value (`--judge-api-key-env`, `--api-key-env`) is set or reads as a variable
    name; one that is neither is most likely the key itself, pasted where its variable's name belongs, and
    is refused without being repeated (issue 13)."""
    return looks_like_env_name(env_name) or api_key_for(env_name, base_url) is not None


# --- the prelude ------------------------------------------------------------------------------------------


def _ready_to_send(study: Study, options: GradeOptions) -> str:
    """Steps 1–2 of the prelude: the options and the study checked, the API key read from its variable."""
    options.validate()
    study.require_writable()
    check_arms(study, options.arms)
    return resolve_api_key(options.api_key_env, options.base_url)


def _check_panel(study: Study, options: GradeOptions) -> None:
    """`--panel` checked against the study (a usage error, exit 2): see :func:`judging.panel_problem`."""
    problem = judging.panel_problem(study, options.config, options.panel)
    if problem is not None:
        raise GradeUsageError(problem)


def _register(study: Study, config: JudgeConfig, panel: bool = False) -> None:
    """The fingerprint's configuration recorded (and, for a panel judge, registered as one before any of
    its verdicts): the online run's first write, so a refusal (a full disk) is one line."""
    try:
        judging.register_config(study, config)
        if panel:
            judging.register_panel(study, config)
    except StudyError:
        raise
    except Exception as exc:  # DuckDB's or the OS's refusal of the run's first write (a full disk): one line
        raise StudyError(write_failure(study.path, exc)) from None


def _summary(config: JudgeConfig, base_url: str | None) -> GradeSummary:
    return GradeSummary(fingerprint=config.fingerprint, model=config.model, shape=config.shape,
                        temperature=config.temperature, base_url=base_url, rationale=config.rationale)  # fmt: skip


# --- online -----------------------------------------------------------------------------------------------


def _build_client(options: GradeOptions, api_key: str) -> Future[JudgeClient]:
    """The judge client, built in a thread of its own: the `openai` client's TLS context (~25-50 ms of
    loading certificates, outside the GIL) is made while the prelude reads the study. The prelude waits for
    it before its first write, so a client that cannot be built (a malformed base URL) writes nothing."""
    built: Future[JudgeClient] = Future()
    make = functools.partial(
        JudgeClient, options.config, api_key=api_key, base_url=options.base_url, concurrency=options.concurrency,
        timeout_s=options.timeout_s, max_retries=options.max_retries, reask=options.reask,
        backoff_base_s=options.backoff_base_s,
    )  # fmt: skip

    def build() -> None:
        if built.set_running_or_notify_cancel():
            try:
                built.set_result(make())
            except BaseException as exc:
                built.set_exception(exc)

    threading.Thread(target=build, name="mcqaudit-judge-client", daemon=True).start()
    return built


def _prepare(study: Study, options: GradeOptions, client: Future[JudgeClient]) -> tuple[int, Work]:
    """Steps 4-5 of the prelude on one open of the study (each open of a DuckDB file costs ~15 ms): the
    journal replayed again, the panel checked, the rows picked; once the client is built, the fingerprint
    registered (the run's first write). Then, with the file closed again, the rows are rendered into requests
    and the reply cache looked up; under a fingerprint with no legal reply stored (nothing can be cached) the
    rows are rendered as the run sends instead (:func:`mcqaudit.grade.plan.streamed_work`). Returns the
    replies the replay wrote in, and the work."""
    config = options.config
    with study.connect():
        # A study opened before another run was killed has not seen that run's journal: replay it now, so
        # that the selection and the reply cache below see every reply that arrived.
        late = replay_journal(study)
        _check_panel(study, options)
        picked = pick_rows(study, config, options.arms, options.limit, panel=options.panel)
        client.result()  # raises what building it raised: then nothing was written
        # (the picked rows do not depend on the registration: it only adds the fingerprint's configuration)
        _register(study, config, options.panel)
    if picked.any_cached:  # the reply cache is looked up for every prompt before any is sent
        return late.records.get(JUDGED, 0), plan_work(study, config, picked)
    return late.records.get(JUDGED, 0), streamed_work(config, picked)  # rendered as the run sends


async def grade_async(
    study: Study, options: GradeOptions, *, reporter: Reporter | None = None
) -> GradeSummary:
    """Grade every row in scope that needs the judge and has no ok verdict under this fingerprint."""
    api_key = _ready_to_send(study, options)
    config = options.config
    started = time.monotonic()
    building = _build_client(options, api_key)
    del api_key
    told = take_replayed(study)  # what opening the study replayed, told once (by the first run on it)
    used = False
    try:
        async with one_grader(study), run.reserved_journal(study, options) as journal:
            late, work = await asyncio.to_thread(_prepare, study, options, building)
            client = building.result()
            used = True
            async with client:
                summary = _summary(config, client.base_url)
                summary.panel = options.panel
                summary.recovered = (told.records.get(JUDGED, 0) if told is not None else 0) + late
                # info's cache computed for the study as the run left it, in its last write's connection
                kept = await run.send(
                    study, options, client, journal, summary, reporter or NullReporter(), work, then=refresh_here
                )
    except BaseException:
        if not used:  # stopped before the run had its client (the lock waited on and given up, a usage
            # error): the client is closed once built
            with contextlib.suppress(BaseException):
                await (await asyncio.wrap_future(building)).close()
        raise
    if not kept:  # no last write kept it (nothing left to write, a write that failed)
        await asyncio.to_thread(refresh, study)
    summary.elapsed_s = time.monotonic() - started
    return summary


def grade(study: Study, options: GradeOptions, *, reporter: Reporter | None = None) -> GradeSummary:
    """Synchronous entry point: runs :func:`grade_async`; SIGTERM cancels it cleanly (batches are kept) and
    raises :class:`GradeInterrupted`."""
    return run_until_sigterm(lambda: grade_async(study, options, reporter=reporter))


# --- batch ------------------------------------------------------------------------------------------------


async def grade_batch_async(
    study: Study, options: GradeOptions, batch: BatchOptions, *, reporter: BatchReporter | None = None
) -> BatchSummary:
    """Grade every row in scope through the Batch API (:mod:`mcqaudit.grade.batch`)."""
    options.validate()
    batch.validate()
    api_key = _ready_to_send(study, options)
    config = options.config
    started = time.monotonic()
    judge = BatchJudge(config, api_key=api_key, base_url=options.base_url, timeout_s=options.timeout_s,
                       max_retries=options.max_retries, backoff_base_s=options.backoff_base_s)  # fmt: skip
    del api_key
    summary = BatchSummary(fingerprint=config.fingerprint, model=config.model, shape=config.shape,
                           temperature=config.temperature, base_url=judge.base_url, rationale=config.rationale,
                           panel=options.panel)  # fmt: skip
    # One grader per study (grade/lock.py); --no-wait refuses rather than wait for another run.
    async with one_grader(study, wait=batch.wait), judge:
        _check_panel(study, options)
        _register(study, config, options.panel)
        work = select_work(study, config, options.arms, options.limit, panel=options.panel)
        await run_batches(study, options, batch, judge, summary, reporter or NullBatchReporter(), work)
    await asyncio.to_thread(refresh, study)
    summary.elapsed_s = time.monotonic() - started
    return summary


def grade_batch(
    study: Study, options: GradeOptions, batch: BatchOptions, *, reporter: BatchReporter | None = None
) -> BatchSummary:
    """Synchronous entry point; SIGTERM cancels it cleanly (submitted batches stay recorded in the study)."""
    return run_until_sigterm(lambda: grade_batch_async(study, options, batch, reporter=reporter))


# --- without sending --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resolved:
    """`--no-judge`: rows in scope resolved by the strict pre-filter, OTHER by rule (blank), and left for a
    judge (pending)."""

    prefilter: int
    rule: int
    needs_judge: int


def grade_without_judge(study: Study, arms: Sequence[str] = ()) -> Resolved:
    """`--no-judge`: the strict pre-filter alone. Marks the study unaudited; returns row counts."""
    study.require_writable()
    check_arms(study, arms)
    judging.set_unaudited(study, True)
    counts = judging.resolution_counts(study, arms)
    refresh(study)
    return Resolved(counts.get("prefilter", 0), counts.get("rule", 0), counts.get("needs_judge", 0))


def prices(price_in: str | None, price_out: str | None) -> Prices | None:
    """`--price-in` / `--price-out` (USD per million tokens) checked: both or neither, positive and finite; a
    bad one is a :class:`GradeUsageError`."""
    return parse_prices(price_in, price_out)


def dry_run(
    study: Study, options: GradeOptions, prices: Prices | None = None, progress: PlanProgress | None = None
) -> DryRun:
    """`grade --dry-run`: one rendered prompt, the fingerprint, the rows a run would target, and the estimated
    tokens (and with ``prices`` the cost) of the requests it would send; nothing is sent or written.
    ``progress`` (stage, done, total) hears how far reading and rendering the rows has come."""
    _check_panel(study, options)
    return dry_plan(study, options, prices, progress)[0]


def batch_dry_run(
    study: Study,
    options: GradeOptions,
    batch: BatchOptions,
    prices: Prices | None = None,
    progress: PlanProgress | None = None,
) -> BatchDryRun:
    """`grade --dry-run --batch`: the dry run and what a batch run would submit and poll, its estimate at the
    Batch API's discount."""
    _check_panel(study, options)
    return _batch_dry_run(study, options, batch, prices, progress)


def fingerprints(study: Study) -> list[FingerprintSummary]:
    """Each judge fingerprint of the study, its settings and the rows it graded (for `info`)."""
    return judging.fingerprint_summary(study)


def batch_overview(study: Study) -> BatchOverview:
    """Open submissions (with their model) and a count of collected ones (for `info`)."""
    return store_batches.overview(study)
