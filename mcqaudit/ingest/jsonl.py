"""Reading a JSONL file of generation rows for the loader (docs/design.md §3): its lines in batches with
exact line numbers, and what the typed fast path needs to know about the file first.

Bytes and lines are checked here (UTF-8, blank lines, a byte-order mark, the longest line); fields and
cross-row rules are checked in SQL by the loader (`store/loader.py`).
"""

from __future__ import annotations

import json
import mmap
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from mcqaudit.files import line_chunks
from mcqaudit.ingest.fields import LineBatch

Progress = Callable[[str, int, int | None], None]  # (stage, done, total)

BATCH_LINES = 100_000
CHUNK_BYTES = 32 << 20
# key_mentions' chunk: its numpy arrays (a flag per byte, the quotes' offsets) are a few times its size
KEY_CHUNK_BYTES = 8 << 20
# the longest line (one row) ingest reads; a longer one is that line's error (`--skip-bad` rejects just it)
MAX_LINE_BYTES = 256 << 20
BOM = "\ufeff"
# a whitespace-only line after a newline (the pattern starts with a literal, so the search is fast)
_BLANK_AFTER_NEWLINE = re.compile(r"\n[ \t\r\f\v]*(?:\n|\Z)")
_SLICE = 8 << 20


def _has_blank_line(text: str) -> bool:
    """Whether a chunk of whole lines has an empty or whitespace-only line (those chunks take the careful
    per-line path); the newline that ends the last line does not make a blank line after it."""
    body = text[:-1] if text.endswith("\n") else text
    first = body.split("\n", 1)[0]
    return not first.strip() or _BLANK_AFTER_NEWLINE.search(body) is not None


class _Pending:
    """Lines of the careful path not yet handed on."""

    def __init__(self) -> None:
        self.lines: list[int] = []
        self.texts: list[str | None] = []
        self.pre_errors: list[str | None] = []

    def add(self, line: int, text: str | None, pre_error: str | None) -> None:
        self.lines.append(line)
        self.texts.append(text)
        self.pre_errors.append(pre_error)

    def take(self) -> LineBatch:
        out = LineBatch(self.lines, self.texts, self.pre_errors)
        self.lines, self.texts, self.pre_errors = [], [], []
        return out


class JsonlLines:
    """The lines of a JSONL file as batches for the loader, with exact line numbers; iterate once, then
    ``blank_lines`` is the count of blank lines skipped. ``progress`` is told ("reading", bytes read, file
    size) after each chunk."""

    def __init__(self, path: Path, progress: Progress | None = None) -> None:
        self.path = path
        self.progress = progress
        self.blank_lines = 0

    def __iter__(self) -> Iterator[LineBatch]:
        size = self.path.stat().st_size
        line_no = 0
        done = 0
        pending = _Pending()
        with self.path.open("rb") as fh:
            for data in line_chunks(fh, CHUNK_BYTES):
                done += len(data)
                try:
                    text: str | None = data.decode("utf-8")
                except UnicodeDecodeError:
                    text = None
                if text is not None and len(data) <= MAX_LINE_BYTES and not _has_blank_line(text):
                    # the common case, without a Python step per line: a whole chunk of clean lines
                    if pending.lines:
                        yield pending.take()
                    whole = _clean_chunk(text, line_no)
                    line_no += len(whole.lines)
                    yield whole
                else:
                    for part in _lines_of(data):
                        line_no += 1
                        self._careful(part, line_no, pending)
                        if len(pending.lines) >= BATCH_LINES:
                            yield pending.take()
                if self.progress:
                    self.progress("reading", done, size)
        if pending.lines:
            yield pending.take()

    def _careful(self, part: bytes, line_no: int, pending: _Pending) -> None:
        """One line of a chunk with a blank line, bad UTF-8 or an overlong line, into ``pending`` (a blank
        line is counted, not staged)."""
        try:
            if len(part) > MAX_LINE_BYTES:
                raise ValueError(
                    f"the line is {len(part) / (1 << 20):.0f} MB, over the {MAX_LINE_BYTES >> 20} MB "
                    "one row may have"
                )
            s: str | None = part.decode("utf-8")
            err = None
        except UnicodeDecodeError as exc:
            s = None
            err = f"not valid UTF-8 (byte {part[exc.start]:#04x} at column {exc.start + 1})"
        except ValueError as exc:
            s, err = None, str(exc)
        if s is not None:
            if s.endswith("\r"):
                s = s[:-1]
            if not s.strip():
                self.blank_lines += 1
                return
            if line_no == 1 and s.startswith(BOM):
                s = s[1:]
        pending.add(line_no, s, err)


def _lines_of(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    return parts


def _clean_chunk(text: str, line_no: int) -> LineBatch:
    """A chunk of whole clean lines (valid UTF-8, none blank or overlong) that follows ``line_no`` lines."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    parts: list[str | None] = list(text.split("\n"))
    if parts and parts[-1] == "":
        parts.pop()
    if line_no == 0 and parts and (first := parts[0]) is not None and first.startswith(BOM):
        parts[0] = first[1:]
    return LineBatch(range(line_no + 1, line_no + 1 + len(parts)), parts, [None] * len(parts))


def scan_lines(path: Path) -> tuple[int, int]:
    """(the file's lines as DuckDB's JSON reader counts records: newlines, plus an unterminated last line;
    a bound on its longest line, 0 when every line is under 16 MB). A line of k slices or more holds k - 1
    whole aligned slices without a newline, so the longest line is under (run + 2) slices. Read into one
    reused buffer and counted in place, a slice at a time."""
    n = 0
    last = 10  # "\n": an empty file has no unterminated line
    run = longest_run = 0
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        buf = bytearray(CHUNK_BYTES if size >= _SLICE else size + 1)  # (a small file: one read, one slice)
        while got := fh.readinto(buf):  # CHUNK_BYTES is a multiple of _SLICE: the slices stay aligned
            for i in range(0, got, _SLICE):
                newlines = buf.count(b"\n", i, min(i + _SLICE, got))
                n += newlines
                if i + _SLICE <= got:  # (a whole slice: a partial one ends the file)
                    run = run + 1 if newlines == 0 else 0
                    longest_run = max(longest_run, run)
            last = buf[got - 1]
    return n + (last != 10), (longest_run + 2) * _SLICE if longest_run else 0


def _signature(data: Any, starts: Any, lengths: Any) -> tuple[Any, Any]:
    """(first four, last four) bytes of each text (``data[start : start + length]``) as uint32, a byte
    repeated where the text is shorter."""
    import numpy as np

    first = np.zeros(len(starts), np.uint32)
    last = np.zeros(len(starts), np.uint32)
    for i in range(4):
        step = np.minimum(i, lengths - 1)
        first |= data[starts + step].astype(np.uint32) << (8 * i)
        last |= data[starts + lengths - 1 - step].astype(np.uint32) << (8 * i)
    return first, last


def key_mentions(path: Path, keys: Sequence[str], out: dict[str, int]) -> None:
    """At least how often each key's quoted name occurs in the file, as a key or inside a text (into
    ``out``, so that a thread can count while DuckDB reads the file; a count over is only a check more).

    Counted over the quotes of each chunk at once, with numpy (which releases the GIL): a name holds no
    quote of its own, so each of its occurrences opens at one quote and closes at the next; the texts
    between consecutive quotes are compared with each name by length and their first and last four bytes,
    which every occurrence has (a longer text that differs only inside also counts)."""
    import numpy as np

    names = {k: json.dumps(k, ensure_ascii=False).encode()[1:-1] for k in keys}
    out.update(dict.fromkeys(keys, 0))
    slow = {k: n for k, n in names.items() if not n or b'"' in n}  # (json.dumps escapes a quote)
    fast = {k: n for k, n in names.items() if k not in slow}
    want = np.array(sorted({len(n) for n in fast.values()}), np.int64)
    sigs: dict[str, tuple[int, int, int]] = {}
    for k, n in fast.items():
        head, tail = _signature(np.frombuffer(n, np.uint8), np.zeros(1, np.int64), np.array([len(n)]))
        sigs[k] = (len(n), int(head[0]), int(tail[0]))
    size = path.stat().st_size
    if size == 0:
        return
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        start = 0
        while start < size:  # chunks of whole lines (no name straddles two), read in place
            end = min(start + KEY_CHUNK_BYTES, size)
            if end < size:
                cut = mm.rfind(b"\n", start, end)
                end = cut + 1 if cut >= 0 else (mm.find(b"\n", end) + 1 or size)
            for k, n in slow.items():
                out[k] += mm[start:end].count(b'"' + n + b'"')
            if fast:
                data = np.frombuffer(mm, np.uint8, end - start, start)
                _count_names(data, want, sigs, out)
                del data  # (the map cannot close while an array views it)
            if hasattr(mmap, "MADV_DONTNEED"):  # out of this process's resident set (the page cache keeps it)
                first = start - start % mmap.PAGESIZE
                mm.madvise(mmap.MADV_DONTNEED, first, end - first)
            start = end


def _count_names(data: Any, want: Any, sigs: dict[str, tuple[int, int, int]], out: dict[str, int]) -> None:
    import numpy as np

    quotes = np.flatnonzero(data == 0x22)
    gaps = np.diff(quotes) - 1
    pick = np.isin(gaps, want)
    starts, lengths = quotes[:-1][pick] + 1, gaps[pick]
    first, last = _signature(data, starts, lengths)
    for k, (size, head, tail) in sigs.items():
        out[k] += int(np.count_nonzero((lengths == size) & (first == head) & (last == tail)))


def null_mentions(path: Path, keys: Sequence[str]) -> dict[str, int]:
    """How often each key occurs with a null value, as json.dumps and compact writers write it."""
    forms = {
        k: [json.dumps(k, ensure_ascii=False).encode() + sep for sep in (b":null", b": null")] for k in keys
    }
    out = dict.fromkeys(keys, 0)
    with path.open("rb") as fh:
        for chunk in line_chunks(fh, CHUNK_BYTES):
            for k, fs in forms.items():
                out[k] += sum(chunk.count(f) for f in fs)
    return out


def raw_lines(path: Path, lines: Sequence[int]) -> dict[int, str]:
    """The text of some lines of a JSONL file (the fast path keeps none), as the line-by-line path stages it."""
    want = set(lines)
    out: dict[int, str] = {}
    if not want:
        return out
    last = max(want)
    with path.open("rb") as fh:
        for no, raw in enumerate(fh, start=1):
            if no in want:
                text = raw.decode("utf-8", "replace").rstrip("\n").removesuffix("\r")
                out[no] = text.removeprefix(BOM) if no == 1 else text
            if no >= last:
                break
    return out
