"""Writing an output file whole or not at all (report --out, reviews export, orient, export), and reading an input
file in chunks that end at line ends (ingest).

:func:`write_atomic` writes to a temporary file in the target's own folder (so the final rename never
crosses a file system), flushes and fsyncs it, then renames it over the target. On any error (a full disk,
a read-only folder, a missing folder, Ctrl-C) the temporary file is removed and the target is left as it
was: no partial file, no ``*.tmp`` behind. :class:`WriteFailed` carries a one-line reason fit to print.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, BinaryIO, TypeVar

T = TypeVar("T")

_REASONS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOENT: "its folder does not exist",
    errno.ENOTDIR: "a part of its path is not a folder",
    errno.EISDIR: "it is a folder",
    errno.EFBIG: "the file is too large for the file system",
}


def os_reason(cause: OSError) -> str:
    """Why a write failed, in a few words fit for a one-line message (``no space left on the device``)."""
    return _REASONS.get(cause.errno or 0) or cause.strerror or type(cause).__name__


class WriteFailed(OSError):
    """An output file could not be written; the target is unchanged and nothing was left behind."""

    def __init__(self, path: Path, cause: OSError):
        self.path = path
        self.cause = cause
        reason = os_reason(cause)
        super().__init__(cause.errno, f"cannot write {path}: {reason}; nothing was written")

    def __str__(self) -> str:
        return str(self.strerror)


def write_atomic(path: Path | str, content: str | bytes | Iterable[str] | Callable[[IO[str]], None]) -> None:
    """Write ``content`` (text, bytes, lines of text, or a function writing to a text file) to ``path``.

    All or nothing: raises :class:`WriteFailed` on an OS error, with the target untouched (the temporary
    file, its fsync and the rename are :func:`write_atomic_path`'s).
    """

    def write(tmp: Path) -> None:
        if isinstance(content, bytes):
            tmp.write_bytes(content)
            return
        with tmp.open("w", encoding="utf-8") as fh:
            if isinstance(content, str):
                fh.write(content)
            elif callable(content):
                content(fh)
            else:
                fh.writelines(content)

    write_atomic_path(path, write)


def write_atomic_path(path: Path | str, write: Callable[[Path], T]) -> T:
    """Call ``write`` with the name of a temporary file in ``path``'s own folder, for writers that open the
    file themselves by name (DuckDB's ``COPY``, a Parquet writer), then fsync that file and rename it over
    ``path``; return what ``write`` returned.

    All or nothing, as :func:`write_atomic`: an ``OSError`` from ``write`` or from the rename is raised as
    :class:`WriteFailed` with the target untouched, and on any error (Ctrl-C too) the temporary file is gone.
    """
    path = Path(path)
    if path.is_dir():
        raise WriteFailed(path, IsADirectoryError(errno.EISDIR, "is a directory"))
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        result = write(Path(tmp))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):  # the mode a plain open() would have given it
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
        tmp = None
        _fsync_dir(path.parent)
        return result
    except OSError as exc:
        raise WriteFailed(path, exc) from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable (best effort: not every platform or file system allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def line_chunks(fh: BinaryIO, size: int) -> Iterator[bytes]:
    """The bytes of ``fh`` in chunks of at least ``size`` bytes (or what is left) that each end with a
    newline, except a last one whose line is unterminated; never an empty chunk."""
    rest = b""
    while chunk := fh.read(size):
        data = rest + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            rest = data
            continue
        yield data[: cut + 1]
        rest = data[cut + 1 :]
    if rest:
        yield rest
