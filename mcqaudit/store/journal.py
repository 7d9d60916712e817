"""The journal: what arrived from an endpoint, on disk the moment it arrives, until the study holds it.

A grade run writes judge outcomes to the study in batches (one short DuckDB transaction per batch, so a
dashboard can read in between). Between arrival and commit a reply lives in memory, and a killed process
(SIGKILL included) would lose it. So each outcome is first appended, as one JSON line, to a journal segment
beside the study; the segment is deleted only after the transaction that holds its records commits. The
next open of the study for writing (``mcqaudit.app.study.open_study``: any command, the next `grade` among
them) replays what a dead process left behind (docs/design.md §5).

Layout: ``<study>.journal/`` holds segment files ``<kind>-<pid>-<n>-<random>.jsonl``. A writer holds an
exclusive ``flock`` on each segment it has open (created under a dot-name, locked, then renamed, so no
replayer ever sees it unlocked), so a replayer takes only segments whose writer is gone: the kernel drops a
dead process's locks. Each line is ``{"kind": …, "v": 1, …}``, written with one ``write`` call of the whole
line: a kill leaves whole lines and at most a torn last line, which replay skips. Replay is idempotent: a
record already in the study is not written twice (a kill between commit and delete replays it again).

Durability: every record is in the kernel's page cache when :meth:`Journal.append` returns, which survives
the death of the process (SIGKILL, OOM kill, a crash). Segments are ``fdatasync``'ed at most every
``fsync_interval_s`` (default 1 s): a power cut or kernel crash can lose the records of that last interval.

A full disk: :meth:`Journal.reserve` sets room aside up front, a preallocated file ``.reserve-<pid>-…``
(locked like a segment, so a replayer removes it only once its writer is dead). The first write that fails
sets :attr:`Journal.stopped` (the producer must stop asking for more) and frees the reserve, and the line is
finished in the room that frees: what was already on its way still lands. Only a write that fails again
sets :attr:`Journal.failed` (records from then on are not journalled).

Use (the online grade writer, and any other producer of judge outcomes such as a batch collector)::

    journal = Journal(study.path)             # nothing is created until the first append
    journal.reserve(RESERVE_BYTES)            # optional: room for what is in flight when the disk fills
    journal.append_judged(replies, verdicts, standin_fingerprint=fp)   # or append({"kind": …, …})
    segment = journal.rotate()                # the records so far; new appends go to a fresh segment
    judging.write_judged(study, ...)          # commit those records to the study
    segment.discard()                         # only now: delete it (segment.release() on failure)
    journal.close()                           # at the end: an empty segment is removed

Replaying a kind needs a handler (:func:`register_replayer`); ``judged`` is built in.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from mcqaudit.files import os_reason
from mcqaudit.store import judging
from mcqaudit.store.db import Study, StudyError
from mcqaudit.store.judging import ReplyRecord, VerdictRecord
from mcqaudit.store.sidecars import JOURNAL_SUFFIX as JOURNAL_SUFFIX
from mcqaudit.store.sidecars import journal_dir as journal_dir

SEGMENT_SUFFIX = ".jsonl"
RESERVE_PREFIX = ".reserve-"
VERSION = 1
JUDGED = "judged"
# Room a grade run sets aside for the replies in flight when the disk fills: a record is well under 2 KB
# (one reply, the verdicts of the rows that share its prompt), so this holds a few hundred.
RESERVE_BYTES = 512 * 1024


# --- writing ----------------------------------------------------------------------------------------------


class Segment:
    """One segment file, locked by this process while it is open."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self.fd = fd
        self.records = 0

    def discard(self) -> None:
        """Its records are in the study: delete the file, then drop the lock."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self.release()

    def release(self) -> None:
        """Drop the lock and keep the file (its records are not in the study: the next open replays them)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Journal:
    """The append side: one writer (one thread, e.g. the event loop) per instance; see the module docstring.

    ``append`` never raises for a disk problem. The first failed write is kept in :attr:`stopped` (a
    one-line message: the producer stops sending); the line is then finished in the room the reserve frees.
    Only when that fails too is :attr:`failed` set, and later records are not journalled.
    """

    def __init__(self, study_path: str | Path, kind: str = JUDGED, *, fsync_interval_s: float | None = 1.0):
        self.dir = journal_dir(study_path)
        self.kind = kind
        self.fsync_interval_s = fsync_interval_s
        self.stopped: str | None = None
        self.failed: str | None = None
        self._current: Segment | None = None
        self._reserve: Segment | None = None
        self._n = 0
        self._last_sync = time.monotonic()
        self._unsynced = False

    def reserve(self, nbytes: int) -> None:
        """Set ``nbytes`` aside on the journal's disk (a preallocated, locked file), for the records that
        arrive after the disk fills. Raises :class:`OSError` when there is not that much room."""
        if self._reserve is not None:
            return
        seg = self._locked_file(f"{RESERVE_PREFIX}{os.getpid()}-{secrets.token_hex(3)}")
        try:
            try:
                os.posix_fallocate(seg.fd, 0, nbytes)
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
                for start in range(0, nbytes, 1 << 16):  # a file system without fallocate: write the room
                    os.pwrite(seg.fd, bytes(min(1 << 16, nbytes - start)), start)
        except BaseException:
            seg.discard()
            _remove_if_empty(self.dir)
            raise
        self._reserve = seg

    def _free_reserve(self) -> bool:
        """Give the reserve's room back to the disk; False when there was none to give."""
        seg, self._reserve = self._reserve, None
        if seg is None:
            return False
        seg.discard()
        return True

    def _new_segment(self) -> Segment:
        name = f"{self.kind}-{os.getpid()}-{self._n:06d}-{secrets.token_hex(3)}{SEGMENT_SUFFIX}"
        self._n += 1
        return self._locked_file(name)

    def _locked_file(self, name: str) -> Segment:
        for _ in range(3):  # a replayer may remove the folder when it empties it: make it again
            self.dir.mkdir(exist_ok=True)
            tmp = self.dir / f".{name}.tmp"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                os.rename(tmp, self.dir / name)
            except BaseException:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            return Segment(self.dir / name, fd)
        raise FileNotFoundError(f"{self.dir}: the journal folder keeps disappearing")

    def append(self, record: dict[str, Any]) -> None:
        """Write one record (a JSON-able dict; ``kind`` and ``v`` are added) and hand it to the kernel."""
        if self.failed is not None:
            return
        line = json.dumps({"kind": self.kind, "v": VERSION, **record}, ensure_ascii=False, default=_default)
        view = memoryview((line + "\n").encode("utf-8"))
        while True:
            try:
                if self._current is None:
                    self._current = self._new_segment()
                while view:  # one call for the whole line; a short write continues the same line
                    view = view[os.write(self._current.fd, view) :]
                break
            except OSError as exc:
                self._stop(exc)
                # The disk is full (or failing): free the reserve and finish this line in its room, so that
                # the segment holds whole lines and the records already on their way still land.
                if not self._free_reserve():
                    self.failed = self.stopped
                    return
        self._current.records += 1
        self._unsynced = True
        if self.fsync_interval_s is not None and time.monotonic() - self._last_sync >= self.fsync_interval_s:
            try:
                self.sync()
            except OSError as exc:
                self._stop(exc)

    def _stop(self, exc: OSError) -> None:
        if self.stopped is None:
            self.stopped = f"cannot write the journal {self.dir} ({os_reason(exc)})"

    def append_judged(
        self,
        replies: Sequence[ReplyRecord],
        verdicts: Sequence[VerdictRecord],
        *,
        standin_fingerprint: str | None = None,
    ) -> None:
        """One outcome, exactly the arguments of :func:`mcqaudit.store.judging.write_judged`."""
        self.append(
            {
                "replies": [r.__dict__ for r in replies],
                "verdicts": [v.__dict__ for v in verdicts],
                "standin": standin_fingerprint,
            }
        )

    def sync(self) -> None:
        if self._current is not None and self._unsynced:
            os.fdatasync(self._current.fd)
        self._unsynced = False
        self._last_sync = time.monotonic()

    def rotate(self) -> Segment | None:
        """The segment holding every record appended so far (None when there is none); later appends go
        to a new one. Delete it with :meth:`Segment.discard` once its records are committed."""
        seg, self._current, self._unsynced = self._current, None, False
        return seg

    def close(self) -> None:
        """End of the run: an empty current segment is removed, a non-empty one kept for replay; the reserve
        is given back."""
        seg, self._current = self._current, None
        if seg is not None:
            if seg.records:
                seg.release()
            else:
                seg.discard()
        self._free_reserve()
        _remove_if_empty(self.dir)


def _default(o: object) -> str:
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _remove_if_empty(d: Path) -> None:
    with contextlib.suppress(OSError):
        d.rmdir()  # fails while it holds anything: that is the point


# --- reading and replay -----------------------------------------------------------------------------------


@dataclass
class Pending:
    """What a journal folder holds that the study may not: records by kind, and what could not be read."""

    segments: int = 0
    records: dict[str, int] = field(default_factory=dict)
    torn: int = 0  # torn last lines (a process killed mid-write): skipped
    unreadable: int = 0  # whole lines that are not a journal record: skipped

    @property
    def total(self) -> int:
        return sum(self.records.values())


def read_segment(data: bytes, pending: Pending) -> list[dict[str, Any]]:
    lines = data.split(b"\n")
    if lines[-1]:
        pending.torn += 1  # no newline after it: cut off mid-write
    out = []
    for raw in lines[:-1]:
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            rec = None
        if not isinstance(rec, dict) or not isinstance(rec.get("kind"), str):
            pending.unreadable += 1
            continue
        out.append(rec)
    return out


def _segments(d: Path) -> list[Path]:
    try:
        names = sorted(os.listdir(d))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [d / n for n in names if n.endswith(SEGMENT_SUFFIX) and not n.startswith(".")]


def pending(study_path: str | Path) -> Pending:
    """Records in the journal (without taking locks: a live writer's segments count too), for ``info``."""
    out = Pending()
    for p in _segments(journal_dir(study_path)):
        try:
            data = p.read_bytes()
        except OSError:
            continue
        out.segments += 1
        for rec in read_segment(data, out):
            out.records[rec["kind"]] = out.records.get(rec["kind"], 0) + 1
    return out


Replayer = Callable[[Study, list[dict[str, Any]]], int]
_REPLAYERS: dict[str, Replayer] = {}


def register_replayer(kind: str, fn: Replayer) -> None:
    """``fn(study, records)`` writes the records of one kind into the study in one transaction, skipping
    any already there, and returns how many it wrote."""
    _REPLAYERS[kind] = fn


def replay(study: Study) -> Pending:
    """Write what dead writers left in the journal into ``study`` (opened for writing), then delete it.

    Segments whose writer is alive (locked) are left alone. Records of a kind this version has no handler
    for stay in the journal. Returns what was replayed (``records``) and skipped.
    """
    d = journal_dir(study.path)
    if not d.is_dir():
        return Pending()
    done = Pending()
    taken: list[tuple[Path, int]] = []
    by_kind: dict[str, list[dict[str, Any]]] = {}
    try:
        for name in sorted(os.listdir(d)):
            p = d / name
            fd = _take(p)
            if fd is None:
                continue
            if name.startswith("."):  # a segment killed before its rename (empty), or a dead writer's reserve
                taken.append((p, fd))
                continue
            if not name.endswith(SEGMENT_SUFFIX):
                os.close(fd)
                continue
            with os.fdopen(os.dup(fd), "rb") as fh:
                records = read_segment(fh.read(), done)
            if any(r["kind"] not in _REPLAYERS for r in records):
                os.close(fd)  # written by a newer mcqaudit: leave it for that one
                continue
            done.segments += 1
            taken.append((p, fd))
            for r in records:
                by_kind.setdefault(r["kind"], []).append(r)
        for kind, records in by_kind.items():
            try:
                done.records[kind] = _REPLAYERS[kind](study, records)
            except duckdb.Error as exc:
                # the journal stays as it is (the segments are not deleted) for a later open to try again
                raise StudyError(f"{d}: cannot write the journal's records into the study ({exc})") from None
            done.unreadable += len(records) - done.records[kind]
        for p, _ in taken:  # committed: now the segments may go
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
    finally:
        for _, fd in taken:
            os.close(fd)
    _remove_if_empty(d)
    return done


def _take(p: Path) -> int | None:
    """An exclusive lock on ``p`` if no live process holds it and the file is still ``p``; else None."""
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        st = os.fstat(fd)
        now = os.stat(p)
        if (st.st_ino, st.st_dev) != (now.st_ino, now.st_dev):
            raise FileNotFoundError(p)  # deleted (and maybe recreated) while we opened it
    except OSError:
        os.close(fd)
        return None
    return fd


# --- the `judged` kind ------------------------------------------------------------------------------------


def _decode(cls: type, d: Any, text: tuple[str, ...], time_field: str) -> Any:
    """A record dataclass from its journal dict; None when a field it cannot do without is missing."""
    if not isinstance(d, dict):
        return None
    kw = {f.name: d.get(f.name) for f in fields(cls)}
    if not all(isinstance(kw[t], str) for t in (*text, time_field)):
        return None
    try:
        kw[time_field] = datetime.fromisoformat(str(kw[time_field]))
    except ValueError:
        return None
    return cls(**kw)


def _replay_judged(study: Study, records: list[dict[str, Any]]) -> int:
    replies: list[judging.ReplyRecord] = []
    verdicts: list[judging.VerdictRecord] = []
    standin: set[str] = set()
    good = 0
    for r in records:
        rs = [_decode(judging.ReplyRecord, x, ("fingerprint", "prompt_hash", "status"), "received_at")
              for x in r.get("replies") or []]  # fmt: skip
        vs = [_decode(judging.VerdictRecord, x, ("row_id", "fingerprint", "status"), "judged_at")
              for x in r.get("verdicts") or []]  # fmt: skip
        if None in rs or None in vs:
            continue  # not a record this version wrote: skipped (counted as unreadable by the caller)
        good += 1
        replies.extend(rs)
        verdicts.extend(vs)
        if isinstance(r.get("standin"), str):
            standin.add(r["standin"])
    # A reply is known by (fingerprint, prompt, received_at to the microsecond): one the study has (a kill
    # between commit and delete) is not appended again. Verdicts need no check: an ok verdict is never
    # replaced, and an error one only by what the same outcome said.
    present = _present_replies(study, replies)
    replies = [r for r in replies if (r.fingerprint, r.prompt_hash, r.received_at) not in present]
    fps: list[str | None] = [*sorted(standin)] or [None]
    judging.write_judged(study, replies, verdicts, standin_fingerprint=fps[0])
    for fp in fps[1:]:
        judging.write_judged(study, [], [], standin_fingerprint=fp)
    return good


def _present_replies(study: Study, replies: Sequence[ReplyRecord]) -> set[tuple[str, str, datetime]]:
    if not replies:
        return set()
    hashes = sorted({r.prompt_hash for r in replies})
    with study.connect() as con:
        rows = con.execute(
            "SELECT fingerprint, prompt_hash, received_at FROM judge_replies "
            "WHERE prompt_hash IN (SELECT unnest(?::VARCHAR[]))",
            [hashes],
        ).fetchall()
    return {(f, h, t) for f, h, t in rows}


register_replayer(JUDGED, _replay_judged)
