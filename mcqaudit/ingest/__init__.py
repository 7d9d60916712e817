"""Reading generation rows from files (docs/design.md §3): JSONL, CSV, Parquet, Inspect AI logs and lm-eval
samples files, and items files.

This package only reads files: which format a file is (`detect_format`), whether it can be read at all
(`check_input`), which files a folder or a glob names (`expand`), a framework log's records as JSON lines
(`read_records`, through `inspect_log` and `lmeval`), JSONL lines in batches (`jsonl`), the fields and
`--map` (`fields`), items files (`items`). It hands typed things (`fields.LineBatch`, file paths) to the
loader in `store/loader.py`, which stages and checks them in SQL; the use case `app/ingest.py` runs the two
together in one transaction. Nothing here sees a database connection.
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

from mcqaudit.ingest.errors import InputError, Problem, UsageError
from mcqaudit.ingest.fields import LineBatch

FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
# framework logs: read by an importer into rows, then staged and validated like any JSONL line
IMPORTED = ("inspect", "lm-eval")
KINDS = ("jsonl", "csv", "parquet", *IMPORTED)


class Note(NamedTuple):
    """What a framework log's record adds to the problems reported for it: the importer's own field and
    reason (when the record gave no row), and where the record is in the log."""

    field: str
    reason: str
    label: str


class Records(NamedTuple):
    """A framework log read for the loader: its unit (`sample`, ...), its records as JSON lines, and the
    note of each record by its number."""

    unit: str
    batch: LineBatch
    notes: dict[int, Note]
    # an Inspect log's mcq_scorer scores (their metadata), by record number (fields.Record.scored)
    scored: dict[int, tuple[dict[str, Any], ...]] = {}


def detect_format(path: Path, fmt: str | None = None) -> str:
    if fmt:
        if fmt not in KINDS:
            raise InputError(
                [Problem(str(path), None, "format", f"unknown format {fmt!r}: use {', '.join(KINDS)}")]
            )
        return fmt
    if path.suffix.lower() == ".eval":
        return "inspect"
    got = FORMATS.get(path.suffix.lower())
    if got is None:
        raise InputError(
            [
                Problem(
                    str(path),
                    None,
                    "format",
                    f"cannot tell the format from {path.suffix or 'no extension'!r}: "
                    "use .jsonl, .csv, .parquet or .eval, or pass --format",
                )
            ]
        )
    if got == "jsonl":
        from mcqaudit.ingest import inspect_log, lmeval

        if inspect_log.looks_like_json_log(path):
            return "inspect"
        if lmeval.looks_like_samples(path):
            return "lm-eval"
    return got


def read_records(p: Path, kind: str, arm: str | None, lm_eval_filter: str | None) -> Records:
    """A framework log's rows as JSON lines (``kind`` inspect or lm-eval); a record without a row stages
    its importer's problem as the error found before parsing (rejected_rows keeps it under `line`)."""
    from mcqaudit.ingest import inspect_log, lmeval

    if kind == "inspect":
        unit, records = inspect_log.read_log(p, arm=arm)
    else:
        unit, records = lmeval.read_samples(p, arm=arm, filter_name=lm_eval_filter)
    batch = LineBatch(
        [r.number for r in records],
        [None if r.row is None else json.dumps(r.row, ensure_ascii=False) for r in records],
        [None if r.row is not None else f"{r.field}: {r.reason}".removeprefix("line: ") for r in records],
    )
    notes = {r.number: Note(r.field if r.row is None else "", r.reason, r.label) for r in records}
    return Records(unit, batch, notes, {r.number: r.scored for r in records if r.scored})


def check_file(p: Path, fmt: str | None, lm_eval_filter: str | None, has_maps: bool) -> str:
    """The format of one input file, after the checks that need no reading: a readable regular file, not
    empty, ``--lm-eval-filter`` only for lm-eval files, ``--map`` not for framework logs (a UsageError)."""
    check_input(p)
    kind = detect_format(p, fmt)
    if p.stat().st_size == 0:
        raise InputError([Problem(str(p), None, "file", "the file is empty")])
    if lm_eval_filter is not None and kind != "lm-eval":
        raise InputError([Problem(str(p), None, "--lm-eval-filter", "applies only to lm-eval samples files")])
    if has_maps and kind in IMPORTED:
        raise UsageError(
            f"--map: {p} is {'an Inspect AI log' if kind == 'inspect' else 'an lm-eval samples file'}, "
            "whose fields are read by its importer; --map applies to JSONL, CSV and Parquet"
        )
    return kind


def check_input(p: Path) -> None:
    """Raise InputError unless ``p`` is a regular file (after symlinks) that ingest can read more than once: a
    folder, a pipe (FIFO, ``<(cmd)``), a device (``/dev/zero``), a socket, a symlink loop or a missing file
    each get their own reason, before any study is created."""
    import errno
    import stat

    def bad(reason: str) -> InputError:
        return InputError([Problem(str(p), None, "file", reason)])

    try:
        st = p.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise bad("a symbolic link loop (too many levels of symbolic links): it names no file") from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise bad("no such file") from None
        raise bad(f"cannot be read: {exc.strerror or exc}") from None
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise bad(
            "is a folder, not a file: name its files (or a glob such as DIR/*.jsonl); on the command "
            "line a folder gives its Inspect AI and lm-eval logs"
        )
    if stat.S_ISFIFO(mode):
        raise bad(
            "is a pipe (a FIFO, or a shell's <(command)), not a regular file: ingest reads its input more "
            "than once, so save it to a file and give that"
        )
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise bad("is a device, not a regular file: give a regular file")
    if not stat.S_ISREG(mode):
        raise bad("is not a regular file (a socket?): give a regular file")
    if not os.access(p, os.R_OK):
        raise bad("cannot be read: permission denied")


class _RecordProblem(Problem):
    """A problem in a framework log's record, `FILE:sample 3: field: reason` (Problem says `row` for any
    unit but `line`)."""

    def __str__(self) -> str:
        return f"{self.source}:{self.unit} {self.line}: {self.field}: {self.reason}"


def problem(source: str, line: int, fld: str, reason: str, unit: str, notes: dict[int, Note]) -> Problem:
    """A problem the loader found in row ``line``, in the file's unit; a framework log's record names its
    place in the log and, for a record that gave no row, the importer's own field and reason."""
    if line not in notes:
        return Problem(source, line, fld, reason, unit)
    # a framework log's record: the importer's own field and reason, and where the record is in the log
    field, own_reason, label = notes[line]
    if fld == "line" and field:
        fld, reason = field, own_reason
    return _RecordProblem(source, line, fld, f"{reason} ({label})", unit)


def expand(arg: str | Path) -> list[Path] | None:
    """A folder or a glob pattern -> the files it names (None for a plain file argument). A folder gives
    the framework logs under it (Inspect `.eval`/`.json` logs, lm-eval `samples_*.jsonl`); a pattern gives
    the files it matches that have a known extension (lm-eval's `results_*.json` aside), a folder among
    them as a folder."""
    from mcqaudit.ingest import inspect_log, lmeval

    p = Path(arg)
    if p.is_dir():
        out = []
        for f in sorted(p.rglob("*")):
            if not f.is_file():
                continue
            suffix = f.suffix.lower()
            inspect = suffix == ".eval" or (suffix == ".json" and inspect_log.looks_like_json_log(f))
            if inspect or (suffix == ".jsonl" and lmeval.looks_like_samples(f)):
                out.append(f)
        return out
    if p.exists() or not glob.has_magic(str(arg)):
        return None
    found: list[Path] = []
    for m in sorted(glob.glob(str(arg), recursive=True)):
        mp = Path(m)
        if mp.is_dir():
            found += expand(mp) or []
        elif (
            mp.is_file()
            and (mp.suffix.lower() in FORMATS or mp.suffix.lower() == ".eval")
            and not (mp.name.startswith("results_") and mp.suffix == ".json")
        ):
            found.append(mp)
    return list(dict.fromkeys(found))
