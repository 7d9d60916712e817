"""The writer: replies and verdicts go to the study in small batches as they arrive (docs/design.md §5).

Each outcome is journalled the moment it arrives (:mod:`mcqaudit.store.journal`, one line handed to the
kernel), then written with its batch in one short transaction; the batch's journal segment is deleted only
after that commit. So a killed run (SIGKILL included) loses at most the requests in flight: whatever sat in
the buffer is replayed by the next open of the study.

A write that fails (a full disk, a file locked for too long) is not retried within the run: the writer keeps
the reason in :attr:`VerdictWriter.failed` and commits nothing more, and the run stops sending. What was not
committed stays in the journal for the next open; so does what arrives meanwhile. The same holds once the
journal itself has had a failed write (:attr:`Journal.stopped`): the room its reserve freed is kept for the
records in flight, not spent on a transaction. Only a journal that cannot hold records at all leaves the
writer committing, since its buffer is then the only copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

from mcqaudit.store import judging
from mcqaudit.store.db import Study, write_failure
from mcqaudit.store.journal import Journal, Segment
from mcqaudit.store.judging import InTransaction, ReplyRecord, VerdictRecord


class VerdictWriter:
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
        journal: Journal | None = None,
    ):
        self.study = study
        self.journal = journal
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
        self._last: InTransaction | None = None
        self._then: Callable[[Study], None] | None = None
        self.last_written = False  # the write of :meth:`close`'s ``last`` committed
        self.then_ran = False  # :meth:`close`'s ``then`` ran after the final write, in its connection
        self._wake = asyncio.Event()
        self.failed: str | None = None  # why a commit failed (one line); nothing more is committed

    @property
    def halted(self) -> bool:
        """Nothing more goes to the study in this run (see the module docstring)."""
        if self.failed is not None:
            return True
        j = self.journal
        return j is not None and j.stopped is not None and j.failed is None

    def add(
        self,
        replies: Sequence[ReplyRecord],
        verdicts: Sequence[VerdictRecord],
        standin: bool = False,
        *,
        journal: bool = True,
    ) -> None:
        """Buffer one outcome's records (journalled first, unless ``journal=False``: verdicts rebuilt from
        replies the study already holds need no journal)."""
        if journal and self.journal is not None:
            self.journal.append_judged(
                replies, verdicts, standin_fingerprint=self.fingerprint if standin else None
            )
        self._replies.extend(replies)
        self._verdicts.extend(verdicts)
        self._standin_pending = self._standin_pending or standin
        if self._first_at is None:  # wake the writer to start the interval clock
            self._first_at = time.monotonic()
            self._wake.set()
        if len(self._verdicts) >= self.every:
            self._wake.set()

    def close(self, last: InTransaction | None = None, then: Callable[[Study], None] | None = None) -> None:
        """No more records come: write what is pending now. ``last`` runs in the transaction of that final
        write (a run that finished clears the study's unaudited mark with its last verdicts, instead of
        opening the file once more); :attr:`last_written` says whether it committed (no final write: no).
        ``then`` runs once that write has committed, in its connection, before it closes (the run keeps
        ``info``'s summary there); :attr:`then_ran` says whether it did (no final write, or a failed one: no,
        and the caller does it itself)."""
        self._closed = True
        self._last = last
        self._then = then
        self._wake.set()

    def _pending(self) -> bool:
        return bool(self._replies or self._verdicts or self._standin_pending)

    def _take(self) -> tuple[list[ReplyRecord], list[VerdictRecord], bool, Segment | None]:
        """The buffer and the journal segment that holds it; later records start both afresh."""
        taken = self._replies, self._verdicts, self._standin_pending
        self._replies, self._verdicts, self._standin_pending, self._first_at = [], [], False, None
        return (*taken, self.journal.rotate() if self.journal is not None else None)

    def _write(
        self,
        replies: list[ReplyRecord],
        verdicts: list[VerdictRecord],
        standin: bool,
        segment: Segment | None,
        also: InTransaction | None = None,
        then: Callable[[Study], None] | None = None,
    ) -> None:
        after: list[BaseException] = []  # what ``then`` raised: its own error, not a failed write
        try:
            # with ``then``, the write's connection stays open for it (one open of the file, not two)
            with self.study.connect() if then is not None else contextlib.nullcontext():
                judging.write_judged(
                    self.study, replies, verdicts, standin_fingerprint=self.fingerprint if standin else None,
                    also=also,
                )  # fmt: skip
                if then is not None:
                    try:
                        then(self.study)
                        self.then_ran = True
                    except BaseException as exc:
                        after.append(exc)
        except BaseException as exc:
            if segment is not None:
                segment.release()  # not committed: the next open replays it
            if not isinstance(exc, Exception):
                raise
            self.failed = write_failure(self.study.path, exc)
            return
        if segment is not None:
            segment.discard()  # committed: its records are in the study
        self.last_written = self.last_written or also is not None
        if after:
            raise after[0]

    async def _flush(self) -> None:
        # After close, no record comes any more: this write takes the last of them, with ``last`` and ``then``.
        if self._closed:
            await asyncio.to_thread(self._write, *self._take(), self._last, self._then)
        else:
            await asyncio.to_thread(self._write, *self._take())

    def flush_now(self) -> None:
        """Synchronous last-chance flush (used when the run is cancelled)."""
        if self._pending() and not self.halted:
            self._write(*self._take())
        if self.journal is not None:
            self.journal.close()

    async def run(self) -> None:
        while True:
            if not self._pending() or self.halted:
                if self._closed:
                    if self.journal is not None:
                        self.journal.close()
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
            if self.halted:
                continue
            started = time.monotonic()
            await self._flush()
            ended = time.monotonic()
            gap = max(self.min_gap_s, (ended - started) * (1 / self.max_duty - 1))
            self._earliest = ended + min(gap, 5.0)
