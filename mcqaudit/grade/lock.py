"""One grader per study at a time (docs/design.md §5): a grade run, online or batch, holds the study's
:class:`~mcqaudit.store.db.GraderLock` from before it selects rows until its last write.

Two runs on one study would select the same rows and pay for every prompt twice. So a second run waits,
saying on stderr who holds the study, and starts when the first ends: it then finds the first run's verdicts
and sends only what is still missing. ``grade --batch --no-wait`` promises not to wait, so it refuses instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator

from mcqaudit.store.db import GraderLock, Study, StudyError

POLL_S = 0.2
SAY_EVERY_S = 30.0


class StudyBeingGraded(StudyError):
    """Another run holds the study's grader lock and this one was asked not to wait."""


@contextlib.asynccontextmanager
async def one_grader(study: Study, *, wait: bool = True) -> AsyncIterator[None]:
    """Hold the study's grader lock for the body; wait for it (or, with ``wait=False``, refuse)."""
    if study.read_only:  # nothing can be written, so nothing can be sent twice; the run's first write says so
        yield
        return
    lock = GraderLock(study.path)
    started = time.monotonic()
    next_say = started
    while not lock.try_acquire():
        if not wait:
            raise StudyBeingGraded(
                f"{study.path}: {lock.holder()} is grading this study; one grade run at a time (a second "
                "would send the same prompts again), and --no-wait does not wait: re-run when it is done"
            )
        now = time.monotonic()
        if now >= next_say:
            next_say = now + SAY_EVERY_S
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(
                    f"waiting for {study.path}: {lock.holder()}; one grade run per study at a time, so that "
                    f"no prompt is paid for twice. This run starts when that one ends and sends only what is "
                    f"still missing (waited {now - started:.0f} s; Ctrl-C to give up)\n"
                )
                sys.stderr.flush()
        await asyncio.sleep(POLL_S)
    try:
        yield
    finally:
        lock.release()
