"""The study file: connections with bounded retry on DuckDB's file lock, and migrations.

DuckDB lets one read-write process hold a file, and while it does no other process can open it at all.
So every connection here is short-lived: opened for one batch or one query and closed, with a bounded
backoff when another process holds the lock. That is what lets a dashboard and a `grade` run share a file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import json
import os
import random
import re
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from mcqaudit.files import os_reason
from mcqaudit.store.infocache import stamp as file_stamp
from mcqaudit.store.schema import MIGRATIONS
from mcqaudit.store.sidecars import grading_lock_path, lock_path, wal_path

if TYPE_CHECKING:
    import pandas as pd

LOCK_MARKERS = ("Could not set lock", "Conflicting lock", "database is locked")
DEFAULT_LOCK_TIMEOUT_S = 60.0


class StudyError(Exception):
    """A study file that cannot be used (missing, not a study, locked for too long)."""


class StudyLocked(StudyError):
    pass


class StudyReadOnly(StudyError):
    """A write to a study that was opened read-only."""


def _is_lock_error(exc: BaseException) -> bool:
    return isinstance(exc, duckdb.Error) and any(m in str(exc) for m in LOCK_MARKERS)


# what DuckDB's message says when the OS refused its write (it carries the OS's own words)
_OS_PHRASES = {
    "No space left on device": errno.ENOSPC,
    "Disk quota exceeded": errno.EDQUOT,
    "Read-only file system": errno.EROFS,
    "Input/output error": errno.EIO,
}


def disk_failure(path: Path, exc: BaseException) -> str | None:
    """:func:`write_failure`'s line when ``exc`` is the OS refusing a write (a full disk, a quota, a
    read-only file system, an I/O error), however DuckDB wrapped it; ``None`` for any other error."""
    if isinstance(exc, OSError) and exc.errno in _OS_PHRASES.values():
        return write_failure(path, exc)
    if any(phrase in str(exc) for phrase in _OS_PHRASES):
        return write_failure(path, exc)
    return None


def write_failure(path: Path, exc: BaseException) -> str:
    """One line saying why a write to the study at ``path`` failed: the OS's reason when DuckDB's message
    carries one (``no space left on the device``), else the first line of the message."""
    if isinstance(exc, StudyError):
        return str(exc)
    if isinstance(exc, OSError):
        reason = os_reason(exc)
    else:
        text = str(exc)
        code = next((c for phrase, c in _OS_PHRASES.items() if phrase in text), None)
        first = (text.strip().splitlines() or [type(exc).__name__])[0]
        reason = os_reason(OSError(code, first)) if code is not None else first[:300]
    return f"{path}: cannot write the study file ({reason})"


# --- saying what a lock wait waits for --------------------------------------------------------------------

LOCK_WAIT_FIRST_S = 1.0  # a wait this long is worth a line on stderr
LOCK_WAIT_EVERY_S = 5.0  # then one line this often while it lasts
_FLOCK = "hhqqi4x"  # struct flock on Linux (64-bit off_t): type, whence, start, len, pid, padding
_DUCKDB_PID = re.compile(r"\(PID (\d+)\)")


def _lockf_holder(fd: int, byte: int) -> int | None:
    """The pid holding a conflicting POSIX lock on ``byte`` of ``fd``'s file, if the kernel says."""
    try:
        got = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, byte, 1, 0))
        kind, _, _, _, pid = struct.unpack(_FLOCK, got)
    except (OSError, struct.error):
        return None
    return pid if kind != fcntl.F_UNLCK and pid > 0 else None


def _study_file_holder(path: Path) -> int | None:
    """The pid that has the study file itself open (DuckDB keeps a POSIX lock on the whole file while it
    does), if any. Called only while this process waits for the file, so it holds no lock on it that the
    close could drop."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return _lockf_holder(fd, 0)
    finally:
        os.close(fd)


def describe_process(pid: int | None) -> str:
    """A short name for a process that holds a study: ``the dashboard``, ``mcqaudit grade``, or its program;
    only the program and the subcommand are shown (arguments may hold anything)."""
    if pid is None:
        return "another process"
    try:
        args = [
            a.decode("utf-8", "replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a
        ]
    except OSError:
        args = []
    if not args:
        return f"another process (pid {pid})"
    if any("streamlit" in a for a in args):
        return f"the dashboard, `mcqaudit dashboard` (pid {pid})"
    for i, a in enumerate(args):
        if os.path.basename(a) == "mcqaudit":
            sub = args[i + 1] if i + 1 < len(args) and re.fullmatch(r"[a-z][a-z-]*", args[i + 1]) else ""
            return f"`mcqaudit{' ' + sub if sub else ''}` (pid {pid})"
    return f"{os.path.basename(args[0])} (pid {pid})"


class _LockWait:
    """A wait on another process's lock: silent for the first second, then one stderr line every few
    seconds naming the study, who holds it (when the kernel or DuckDB says) and how long we have waited."""

    def __init__(self, path: Path, timeout_s: float):
        self.path = path
        self.timeout_s = timeout_s
        self.started = time.monotonic()
        self._next = self.started + LOCK_WAIT_FIRST_S

    def tick(self, holder: Callable[[], str]) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + LOCK_WAIT_EVERY_S
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(
                f"waiting for the study file {self.path}: {holder()} has it open (DuckDB allows one process "
                f"at a time); waited {now - self.started:.0f} s so far, giving up after {self.timeout_s:.0f} s\n"
            )
            sys.stderr.flush()


def utcnow() -> datetime:
    return datetime.now(UTC)


# --- one grader per study ---------------------------------------------------------------------------------


class GraderLock:
    """The exclusive lock a grade run holds on ``<study>.grading.lock`` for its whole length, so that two
    runs on one study never send (and pay for) the same prompts (docs/design.md §5).

    An ``flock``: the kernel drops it when its holder dies, so a killed run never leaves it held. The holder
    writes its pid, its program and subcommand (never its arguments: they may hold anything) and when it
    started into the file, for a waiter to name it. Not re-entrant: one per run.
    """

    def __init__(self, study_path: str | Path):
        self.path = grading_lock_path(study_path)
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the lock if no other run holds it (a folder where it cannot be made: no lock, True)."""
        if self._fd is not None:
            return True
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return True  # a read-only folder: the study is read-only too, and the run's first write says so
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        me = {"pid": os.getpid(), "command": describe_process(os.getpid()), "since": utcnow().isoformat()}
        with contextlib.suppress(OSError):  # a full disk: the lock holds all the same, unnamed
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
        return True

    def holder(self) -> str:
        """Who holds the lock now, as :func:`describe_process` names it, and since when (as far as known)."""
        try:
            info = json.loads(self.path.read_text(encoding="utf-8"))
            pid, since = int(info["pid"]), datetime.fromisoformat(info["since"])
        except (OSError, ValueError, KeyError, TypeError):
            return "another grade run"
        name = describe_process(pid) if Path(f"/proc/{pid}").exists() else str(info.get("command") or "")
        return f"{name or f'another grade run (pid {pid})'}, grading since {since:%H:%M:%S} UTC"

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # drops the flock


class Study:
    """One DuckDB study file. The only owner of connections; everything else asks it for one."""

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = False,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
        read_only: bool | None = None,
    ):
        self.path = Path(path)
        self.lock_timeout_s = lock_timeout_s
        # One process-wide gate per file: DuckDB shares one database instance per file in a process, and
        # opening/closing it from several threads at once is where wrong results came from.
        self._gate = _gate_for(self.path)
        self._held = threading.local()  # the connection this thread has open, for nested connect()
        # (stamp before, stamp after) of the file when opening it here tidied it (no data changed)
        self.tidied: tuple[list[list[int] | None], list[list[int] | None]] | None = None
        if not self.path.exists():
            if not create or read_only:
                raise StudyError(f"{self.path}: no such study file (create one with `mcqaudit ingest`)")
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # A study shared read-only (the file, its folder, or the disk) is opened read-only, so that every
        # command that only reads still works on it (docs/design.md §6); DuckDB would refuse a read-write open.
        self.read_only = (
            read_only
            if read_only is not None
            else not (
                (not self.path.exists() or os.access(self.path, os.W_OK))
                and os.access(self.path.parent, os.W_OK)
            )
        )
        if self.read_only:
            with self.connect() as con:
                _check_schema(con, self.path)
        else:
            with self.write() as con:
                _migrate(con, self.path)
            with self.connect() as con:
                was = self.opened_stamp
                tidy_after_a_kill(con, self.path)
                con.close()  # closed here, the file lock still held: the stamp the tidy left
                now = file_stamp(self.path)
                if was is not None and now != was:
                    # the tidy wrote no data (a checkpoint, a truncation past the study's blocks): what was
                    # true of the file at stamp `was` is true of it at `now` (:attr:`tidied`)
                    self.tidied = (was, now)
        # What a killed writer left in the journal is replayed by the use cases' open
        # (``mcqaudit.app.study.open_study``, docs/design.md §5), not here: the store knows no journal.

    def _open(self) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.02
        wait = _LockWait(self.path, self.lock_timeout_s)
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=self.read_only)
                con.execute("SET TimeZone = 'UTC'")
                # DuckDB draws its own bar on stdout for a query over 2 s: mcqaudit says its progress itself,
                # and a command's output (a report on stdout, --json) must not depend on the machine's speed.
                # In a notebook DuckDB refuses the setting (it would need ipywidgets to change it): kept there.
                with contextlib.suppress(duckdb.Error):
                    con.execute("SET enable_progress_bar = false")
                return con
            except duckdb.Error as exc:
                if not _is_lock_error(exc):
                    raise StudyError(f"{self.path}: cannot open the study file: {exc}") from None
                if time.monotonic() >= deadline:
                    raise StudyLocked(
                        f"{self.path}: another process has held the study file for over "
                        f"{self.lock_timeout_s:.0f} s (DuckDB allows one writer process); try again when it is done"
                    ) from None
                # DuckDB names the holder: "Conflicting lock is held in /usr/bin/python3 (PID 123) ..."
                m = _DUCKDB_PID.search(str(exc))
                pid = int(m.group(1)) if m else None
                wait.tick(functools.partial(describe_process, pid))
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.5)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        """An exclusive advisory lock (a byte-range lock on ``<study>.lock``) for the whole open -> close of a
        connection.

        DuckDB's own lock alone was not enough under load: two mcqaudit processes opening and closing the
        same file in quick succession lost a committed row or failed with a short read (seen in a stress
        test). Serialising every open->close across mcqaudit processes removed that; DuckDB's
        lock (retried in `_open`) still guards against other programs.
        """
        key = str(self.path.resolve())
        if _held.get(key):  # nested in this thread (the gate is re-entrant): the lock is already ours
            yield
            return
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:  # a read-only directory: fall back to DuckDB's own lock
            yield
            return
        deadline = time.monotonic() + self.lock_timeout_s
        wait = _LockWait(self.path, self.lock_timeout_s)

        def take(byte: int) -> None:
            # short polls: a holder's critical section is one batch or one query
            while True:
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, byte)
                    return
                except OSError:
                    if time.monotonic() >= deadline:
                        raise StudyLocked(
                            f"{self.path}: another mcqaudit process has held the study file for over "
                            f"{self.lock_timeout_s:.0f} s; try again when it is done"
                        ) from None
                    # The holder is whoever has the study file open; failing that, whoever holds the file
                    # lock (byte 1), then the turnstile (byte 0). Asking the bytes first would name a process
                    # that holds byte 1 only to wait in `_open` for another program's DuckDB lock.
                    wait.tick(
                        lambda: describe_process(
                            _study_file_holder(self.path) or _lockf_holder(fd, 1) or _lockf_holder(fd, byte)
                        )
                    )
                    time.sleep(0.001 + 0.002 * random.random())

        try:
            # A turnstile (byte 0) in front of the file lock (byte 1): a waiter holds the turnstile while it
            # waits, so a process that reads in a tight loop cannot take the file back at once and starve a
            # writer; the two alternate instead.
            take(0)
            try:
                take(1)
            finally:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
            _held[key] = True
            try:
                yield
            finally:
                _held[key] = False
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, 1)
        finally:
            os.close(fd)

    @property
    def lock_path(self) -> Path:
        return lock_path(self.path)

    @contextlib.contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A short-lived connection without a transaction (reads, or statements that manage their own).

        Nested in an open one on the same thread, it is that same connection: a caller that makes several
        queries (a dashboard panel) opens the file once instead of once per query."""
        held = getattr(self._held, "con", None)
        if held is not None:
            # a caller that committed a write in this connection since it opened changed the file: the stamp
            # taken at the open no longer says what this nested use finds (:attr:`opened_stamp`)
            if self._held.opened is not None and file_stamp(self.path) != self._held.opened:
                self._held.opened = None
            yield held
            return
        kept: contextlib.ExitStack | None = getattr(self._held, "one_open", None)
        if kept is not None:  # the first connect in :meth:`one_open`: open until that block ends
            self._held.one_open = None
            yield kept.enter_context(self._connection())
            return
        with self._connection() as con:
            yield con

    @contextlib.contextmanager
    def one_open(self) -> Iterator[None]:
        """Within the block, this thread's first :meth:`connect` opens the study and the connection stays
        open, for every later one to share, until the block ends: reads written each as its own ``connect``
        (the dashboard's cached loaders) in one open of the file (~10 ms of CPU each), or none at all when
        none of them reads. Nested in an open connection, or in another ``one_open``, it adds nothing."""
        if self.connected or getattr(self._held, "one_open", None) is not None:
            yield
            return
        with contextlib.ExitStack() as stack:
            self._held.one_open = stack
            try:
                yield
            finally:
                self._held.one_open = None

    @contextlib.contextmanager
    def _connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """:meth:`connect`'s own open -> close of the file."""
        with self._gate, self._file_lock():
            # the study file as this connection found it: the same before and after the open (no mcqaudit
            # process can change it while the file lock is held, nor any process while DuckDB's lock is)
            before = file_stamp(self.path)
            after: list[Callable[[], None]] = []
            con = self._open()
            opened = file_stamp(self.path)
            self._held.opened = opened if opened == before else None
            self._held.con, self._held.after = con, after
            closing = None
            try:
                yield con
                closing = file_stamp(self.path)
            finally:
                self._held.con = self._held.after = self._held.opened = None
                con.close()
            self._held.closing = closing
            _last_used[str(self.path)] = time.monotonic()
            try:
                for fn in after:  # what the connection's work asked for once it is closed, the lock still held
                    fn()
            finally:
                self._held.closing = None

    @contextlib.contextmanager
    def on_cursor(self, cursor: duckdb.DuckDBPyConnection) -> Iterator[None]:
        """In a helper thread of one that holds a connection to this study open: :meth:`connect` (and so every
        read written against the study) yields ``cursor``, a ``cursor()`` of that connection, which its holder
        keeps open until the helper is done; closed on leaving. Reads only: no transaction, no
        :meth:`after_close` here."""
        if self.connected:
            raise RuntimeError("on_cursor: this thread has a connection of its own open")
        self._held.con, self._held.opened, self._held.after = cursor, None, None
        try:
            yield
        finally:
            self._held.con = None
            cursor.close()

    @property
    def opened_stamp(self) -> list[list[int] | None] | None:
        """:func:`~mcqaudit.store.infocache.stamp` of the study file as this thread's open connection found it
        (taken under the file lock, the same before and after the open; None: no connection open, or one in
        which a write has committed since)."""
        return getattr(self._held, "opened", None)

    @property
    def closing_stamp(self) -> list[list[int] | None] | None:
        """In an :meth:`after_close` callback: the study file's stamp just before the connection closed (the
        close checkpoints, which changes the file again, but no data)."""
        return getattr(self._held, "closing", None)

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` right after this thread's :meth:`write` transaction has committed (its connection still
        open: the file as that commit left it)."""
        on_commit = getattr(self._held, "on_commit", None)
        if on_commit is None:
            raise RuntimeError("after_commit needs a write transaction")
        on_commit.append(fn)

    @property
    def connected(self) -> bool:
        """Whether this thread has a connection to the study open (a :meth:`connect` not yet left)."""
        return getattr(self._held, "con", None) is not None

    def after_close(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once this thread's open connection has closed without an error (a write committed),
        while the file lock is still held: no other mcqaudit process has written the study in between."""
        after = getattr(self._held, "after", None)
        if after is None:
            raise RuntimeError("after_close needs an open connection")
        after.append(fn)

    def require_writable(self) -> None:
        """Raise :class:`StudyReadOnly` (one line) when the study was opened read-only."""
        if self.read_only:
            raise StudyReadOnly(
                f"{self.path}: the study file is read-only (file, folder or disk): nothing can be written to it"
            )

    @contextlib.contextmanager
    def write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A short-lived connection inside one transaction: all of it is written, or none of it."""
        self.require_writable()
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            on_commit: list[Callable[[], None]] = []
            self._held.on_commit = on_commit
            try:
                yield con
            except BaseException:
                self._held.on_commit = None
                con.execute("ROLLBACK")
                raise
            self._held.on_commit = None
            con.execute("COMMIT")
            for fn in on_commit:
                fn()

    read = connect

    def query_df(self, sql: str, params: Sequence[object] | None = None) -> pd.DataFrame:
        with self.connect() as con:
            return con.execute(sql, params or []).df()

    def query(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]:
        with self.connect() as con:
            return con.execute(sql, params or []).fetchall()

    def query_records(self, sql: str, params: Sequence[object] | None = None) -> list[dict[str, Any]]:
        """The rows as dicts keyed by column name (no pandas: for what lists or builds from a few rows)."""
        with self.connect() as con:
            cur = con.execute(sql, params or [])
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    # --- study-level settings -------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self.query("SELECT value FROM study_meta WHERE key = ?", [key])
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str | None) -> None:
        with self.write() as con:
            set_meta(con, key, value)


# DuckDB's file layout: three 4 KiB headers, then the blocks (its storage format since 0.9)
_DUCKDB_HEADERS = 3 * 4096
_SPILL_FILE = re.compile(r"duckdb_temp_(\d+)_")


def tidy_after_a_kill(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """What a killed writer leaves beside and inside the study, removed on the next read-write open (the
    caller holds the only connection, so DuckDB's lock says no other process has the study open):

    - its spill files in ``STUDY.duckdb.tmp/`` (``duckdb_temp_<pid>_…``), which DuckDB removes only on a clean
      close; those of a process still alive are kept;
    - the blocks its uncommitted transaction wrote past the end of the study's own blocks, which no later
      checkpoint reclaims: after a CHECKPOINT (so every committed block is the study's own and no WAL refers
      past them) the file is cut back to header + blocks.
    """
    with contextlib.suppress(duckdb.Error, OSError):
        row = con.execute("SELECT current_setting('temp_directory')").fetchone()
        spill = Path(row[0]) if row and row[0] else path.with_name(path.name + ".tmp")
        if spill.is_dir():
            for f in spill.iterdir():
                m = _SPILL_FILE.match(f.name)
                if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
                    f.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                spill.rmdir()  # only when empty
    with contextlib.suppress(duckdb.Error, OSError):
        if path.stat().st_size <= _study_extent(con):
            return
        con.execute("CHECKPOINT")
        end = _study_extent(con)
        if not wal_path(path).exists() and path.stat().st_size > end:
            os.truncate(path, end)


def _study_extent(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("SELECT block_size, total_blocks FROM pragma_database_size()").fetchone()
    if not row or row[0] is None or row[1] is None:
        return sys.maxsize
    return _DUCKDB_HEADERS + int(row[0]) * int(row[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process
    return True


def set_meta(con: duckdb.DuckDBPyConnection, key: str, value: str | None) -> None:
    con.execute("DELETE FROM study_meta WHERE key = ?", [key])
    if value is not None:
        con.execute("INSERT INTO study_meta VALUES (?, ?)", [key, value])


# when this process last closed a connection to each study (by path): :func:`idle_s`
_last_used: dict[str, float] = {}


def idle_s(path: str | Path) -> float:
    """Seconds since this process last closed a connection to the study at ``path`` (inf: never)."""
    at = _last_used.get(str(Path(path)))
    return float("inf") if at is None else time.monotonic() - at


_gates: dict[str, threading.RLock] = {}
# whether this process holds a study's file lock (read and written only under that study's gate): record
# locks belong to the process, and closing a second descriptor would drop the first one's lock
_held: dict[str, bool] = {}
_gates_lock = threading.Lock()


def _gate_for(path: Path) -> threading.RLock:
    key = str(path.resolve())
    with _gates_lock:
        return _gates.setdefault(key, threading.RLock())


def _not_newer(done: set[int], path: Path) -> None:
    if done and max(done) > len(MIGRATIONS):
        raise StudyError(
            f"{path}: the study was written by a newer mcqaudit (schema {max(done)}, this one knows "
            f"{len(MIGRATIONS)}); upgrade mcqaudit"
        )


def _check_schema(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """A read-only study cannot be migrated: it must already have this version's schema."""
    try:
        done = {r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()}
    except duckdb.CatalogException:
        raise StudyError(f"{path}: not a study file (no schema_migrations table)") from None
    _not_newer(done, path)
    if len(done) < len(MIGRATIONS):
        raise StudyError(
            f"{path}: the study file is read-only and was written by an older mcqaudit (schema "
            f"{max(done, default=0)}, this one needs {len(MIGRATIONS)}); open it once where it can be written "
            "to upgrade it"
        )


def _migrate(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ)"
    )
    done = {r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()}
    _not_newer(done, path)
    for version, sql in enumerate(MIGRATIONS, start=1):
        if version in done:
            continue
        con.execute(sql)
        con.execute("INSERT INTO schema_migrations VALUES (?, ?)", [version, utcnow()])
        if version == 1:
            set_meta(con, "created", utcnow().isoformat())
