"""`mcqaudit ingest`: generation rows from JSONL, CSV, Parquet, Inspect AI logs or lm-eval samples files
into a study file (docs/design.md §3).

Validation happens at the edge: bytes and lines here (UTF-8, blank lines), fields and cross-row rules in
SQL (`store/loading.py`), so every problem is reported with its file, line and field, and one transaction
means a bad file writes nothing.
"""

from __future__ import annotations

import difflib
import glob
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, TypeVar

import duckdb

from mcqaudit import parsers
from mcqaudit.files import line_chunks
from mcqaudit.ingest.errors import InputError, Problem, UsageError
from mcqaudit.ingest.items import read_items
from mcqaudit.store import Study
from mcqaudit.store import loading as sql
from mcqaudit.store.db import set_meta

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
BATCH_LINES = 100_000
_BOM = "\ufeff"
# a whitespace-only line after a newline (the pattern starts with a literal, so the search is fast)
_BLANK_AFTER_NEWLINE = re.compile(r"\n[ \t\r\f\v]*(?:\n|\Z)")


def _has_blank_line(text: str) -> bool:
    """Whether a chunk of whole lines has an empty or whitespace-only line (those chunks take the careful
    per-line path); the newline that ends the last line does not make a blank line after it."""
    body = text[:-1] if text.endswith("\n") else text
    first = body.split("\n", 1)[0]
    return not first.strip() or _BLANK_AFTER_NEWLINE.search(body) is not None


CHUNK_BYTES = 32 << 20
# the longest line (one row) ingest reads; a longer one is that line's error (`--skip-bad` rejects just it)
MAX_LINE_BYTES = 256 << 20
T = TypeVar("T")

Progress = Callable[[str, int, int | None], None]  # (stage, done, total)


@dataclass
class IngestResult:
    source: str
    format: str
    ingest_id: int | None
    loaded: int = 0
    unchanged: int = 0
    replaced: int = 0
    rejected: int = 0
    duplicates_in_file: int = 0
    blank_lines: int = 0
    new_items: int = 0
    new_arms: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    problem_count: int = 0


class Record(NamedTuple):
    """One record of a framework log (`inspect_log`, `lmeval`): its row, or the field and reason it lacks."""

    number: int  # staged as the row's line; counted in the importer's unit
    label: str  # where it is in the log, appended to every problem reported for it
    row: dict | None
    field: str = ""
    reason: str = ""


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


# close names for a required field, best first (docs/design.md §3: the suggested `--map` of a missing field)
GUESSES: dict[str, tuple[str, ...]] = {
    "generation": (
        "llm_output",
        "output",
        "response",
        "completion",
        "model_output",
        "prediction",
        "answer_text",
    ),
    "arm": ("model", "model_name", "arm_name", "system"),
    "gold": ("answer", "label", "target", "correct", "correct_answer", "answer_key", "gold_letter"),
    "options": ("choices", "answers", "option_texts"),
    "item_id": ("id", "question_id", "qid", "doc_id", "idx", "uid"),
    "question": ("stem", "question_text", "query", "prompt", "input"),
}


def parse_maps(specs: Sequence[str]) -> dict[str, str]:
    """`--map FIELD=COLUMN` specs -> {field: column}; raises UsageError for an unknown field, a malformed
    spec or two maps onto one field."""
    out: dict[str, str] = {}
    for spec in specs:
        fld, eq, column = spec.partition("=")
        fld, column = fld.strip(), column.strip()
        if not eq or not fld or not column:
            raise UsageError(f"--map {spec!r}: write FIELD=COLUMN, e.g. --map generation=llm_output")
        if fld not in sql.FIELDS:
            raise UsageError(f"--map {spec!r}: unknown field {fld!r} (fields: {', '.join(sql.FIELDS)})")
        if '"' in column:
            raise UsageError(f"--map {spec!r}: a column name with a double quote cannot be mapped")
        if fld in out:
            raise UsageError(f"--map: two maps onto {fld} ({fld}={out[fld]}, {fld}={column})")
        out[fld] = column
    return out


def _guess(fld: str, free: list[str]) -> str | None:
    lower = {c.lower(): c for c in free}
    for name in GUESSES.get(fld, ()):
        if name in lower:
            return lower[name]
    close = difflib.get_close_matches(fld, free, n=1, cutoff=0.75)
    return close[0] if close else None


def _check_columns(
    con, source: str, kind: str, header: list[str] | None, maps: Mapping[str, str], arm: str | None
) -> None:
    """The source's header (CSV/Parquet) or first record (JSONL) against the fields: a mapped column it
    lacks is a UsageError; required fields it lacks are ONE InputError with the columns and a suggested
    `--map`, instead of one error per row."""
    if kind == "jsonl":
        header = sql.first_record_keys(con)
    if header is None:  # the first line is not a JSON object: its own line error says so
        return
    have = set(header)

    def absent(column: str) -> bool:
        # JSONL has no header: a key missing from the first record may still be in the others
        return column not in have and (kind != "jsonl" or not sql.any_record_has(con, column))

    for fld, column in maps.items():
        if absent(column):
            raise UsageError(
                f"--map {fld}={column}: {source} has no column {column!r} "
                f"(its columns: {', '.join(header) or 'none'})"
            )
    col = {f: maps.get(f, f) for f in sql.REQUIRED}
    missing = [f for f in sql.REQUIRED if not (f == "arm" and arm is not None) and absent(col[f])]
    if not missing:
        return
    used = {col[f] for f in sql.REQUIRED if col[f] in have}
    free = [c for c in header if c not in used]
    hints = []
    for f in missing:
        g = _guess(f, free)
        if g is not None:
            free.remove(g)
        if g is None and f == "arm":
            hints.append("--arm NAME")
        else:
            hints.append(f"--map {f}={g if g is not None else 'COLUMN'}")
    names = ", ".join(f + (" (or pass --arm)" if f == "arm" else "") for f in missing)
    raise InputError(
        [
            Problem(
                source,
                None,
                "fields",
                f"missing required field{'s' if len(missing) > 1 else ''} {names}; "
                f"the file's columns: {', '.join(header) or 'none'}; try {' '.join(hints)}",
            )
        ]
    )


def _stage_records(con, p: Path, kind: str, arm: str | None, lm_eval_filter: str | None) -> tuple[str, dict]:
    """Stage a framework log's rows as JSON lines; returns (unit, {number: (field, reason, label)}) so that
    problems can name the log's record and the importer's field."""
    from mcqaudit.ingest import inspect_log, lmeval

    if kind == "inspect":
        unit, records = inspect_log.read_log(p, arm=arm)
    else:
        unit, records = lmeval.read_samples(p, arm=arm, filter_name=lm_eval_filter)
    sql.create_staging(con)
    sql.stage_batch(
        con,
        [r.number for r in records],
        [None if r.row is None else json.dumps(r.row, ensure_ascii=False) for r in records],
        # the pre-parse error slot carries an importer's own problem (rejected_rows keeps it under `line`)
        [None if r.row is not None else f"{r.field}: {r.reason}".removeprefix("line: ") for r in records],
    )
    return unit, {r.number: (r.field if r.row is None else "", r.reason, r.label) for r in records}


def _stage_jsonl(con, path: Path, progress: Progress | None) -> int:
    """Stream the file into the staging table with exact line numbers; returns the count of blank lines."""
    sql.create_staging(con)
    size = path.stat().st_size
    blank = 0
    line_no = 0
    done = 0
    lines: list[int] = []
    texts: list[str | None] = []
    pre: list[str | None] = []

    def flush() -> None:
        if lines:
            sql.stage_batch(con, lines, texts, pre)
            lines.clear()
            texts.clear()
            pre.clear()

    with path.open("rb") as fh:
        for data in line_chunks(fh, CHUNK_BYTES):
            done += len(data)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None and len(data) <= MAX_LINE_BYTES and not _has_blank_line(text):
                # the common case, without a Python step per line: a whole chunk of clean lines
                if "\r" in text:
                    text = text.replace("\r\n", "\n")
                parts_s = text.split("\n")
                if parts_s and parts_s[-1] == "":
                    parts_s.pop()
                if line_no == 0 and parts_s and parts_s[0].startswith(_BOM):
                    parts_s[0] = parts_s[0][1:]
                flush()
                sql.stage_batch(
                    con, range(line_no + 1, line_no + 1 + len(parts_s)), parts_s, [None] * len(parts_s)
                )
                line_no += len(parts_s)
            else:
                parts = data.split(b"\n")
                if parts and parts[-1] == b"":
                    parts.pop()
                for part in parts:
                    line_no += 1
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
                            blank += 1
                            continue
                        if line_no == 1 and s.startswith(_BOM):
                            s = s[1:]
                    lines.append(line_no)
                    texts.append(s)
                    pre.append(err)
                    if len(lines) >= BATCH_LINES:
                        flush()
            if progress:
                progress("reading", done, size)
    flush()
    return blank


_SLICE = 8 << 20


def _scan_lines(path: Path) -> tuple[int, int]:
    """(the file's lines as DuckDB's JSON reader counts records: newlines, plus an unterminated last line;
    a bound on its longest line, 0 when every line is under 16 MB). A line of k slices or more holds k - 1
    whole aligned slices without a newline, so the longest line is under (run + 2) slices."""
    n = 0
    last = b"\n"
    run = longest_run = 0
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK_BYTES):  # CHUNK_BYTES is a multiple of _SLICE: the slices stay aligned
            n += chunk.count(b"\n")
            last = chunk[-1:]
            for i in range(0, len(chunk) - _SLICE + 1, _SLICE):
                run = run + 1 if chunk.find(b"\n", i, i + _SLICE) < 0 else 0
                longest_run = max(longest_run, run)
    return n + (last != b"\n"), (longest_run + 2) * _SLICE if longest_run else 0


def _key_mentions(path: Path, keys: Sequence[str], out: dict[str, int]) -> None:
    """How often each key's quoted name occurs in the file, as a key or inside a text (into ``out``)."""
    quoted = {k: json.dumps(k, ensure_ascii=False).encode() for k in keys}
    out.update(dict.fromkeys(keys, 0))
    with path.open("rb") as fh:
        for chunk in line_chunks(fh, CHUNK_BYTES):  # whole lines: no name straddles two chunks
            for k, q in quoted.items():
                out[k] += chunk.count(q)


def _null_mentions(path: Path, keys: Sequence[str]) -> dict[str, int]:
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


def _stage_jsonl_fast(con, path: Path, maps: Mapping[str, str]) -> bool:
    """DuckDB's typed read (store/loading.py `stage_jsonl_fast`), its buffer sized for the longest line; False
    when the file needs the line-by-line path (a line over MAX_LINE_BYTES, which read_json would refuse by
    aborting the transaction, is that path's error on its line)."""
    import threading

    count, longest = _scan_lines(path)
    if longest > MAX_LINE_BYTES:
        return False
    # the key names are counted in a thread while DuckDB reads the file (it releases the GIL)
    mentions: dict[str, int] = {}
    counter = threading.Thread(target=_key_mentions, args=(path, sql.field_keys(maps), mentions), daemon=True)
    counter.start()
    try:
        ok = _stage_table(lambda: sql.stage_jsonl_fast(con, str(path), lambda: count, maps, longest), path)
    finally:
        counter.join()
    if ok:
        # read_json keeps the first of a duplicate key silently: where a key's name occurs more often than
        # the rows that have it, some line may say it twice, and the line-by-line path checks each line
        have = sql.key_mentions(con, maps)  # a key whose value is null counts as absent there
        suspects = [k for k, n in mentions.items() if n > have[k]]
        nulls = _null_mentions(path, suspects) if suspects else {}
        if any(mentions[k] - nulls[k] > have[k] for k in suspects):
            con.execute("DROP TABLE stg")
            return False
    if ok and maps and not sql.all_columns_seen(con, maps):
        # a mapped key that no record has: the line-by-line path says which (a usage error)
        con.execute("DROP TABLE stg")
        return False
    return ok


def _raw_lines(path: Path, lines: Sequence[int]) -> dict[int, str]:
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
                out[no] = text.removeprefix(_BOM) if no == 1 else text
            if no >= last:
                break
    return out


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


def ingest_file(study: Study, path: str | Path, **kw) -> IngestResult:
    """Load one file of generation rows. Raises InputError (nothing written) when rows are bad and
    ``skip_bad`` is false; with ``skip_bad`` the bad rows go to ``rejected_rows`` and the result lists them.
    Keywords as for `ingest_files`."""
    return ingest_files(study, [path], **kw)[0]


def ingest_files(
    study: Study,
    paths: Sequence[str | Path],
    *,
    arm: str | None = None,
    items_path: str | Path | None = None,
    skip_bad: bool = False,
    replace: bool = False,
    control: str | None = None,
    fmt: str | None = None,
    progress: Progress | None = None,
    error_cap: int = 200,
    framework_parsers: bool = True,
    lm_eval_filter: str | None = None,
    maps: Mapping[str, str] | None = None,
) -> list[IngestResult]:
    """Load files of generation rows in ONE transaction (all or nothing: a folder of logs is one load).
    ``maps`` ({field: column}, `--map`) reads a field from a column of another name. Raises InputError with
    every file's problems (each names its file) when rows are bad and ``skip_bad`` is false, UsageError when
    a mapped column is not in a file."""
    maps = dict(maps or {})
    items = read_items(items_path) if items_path is not None else []
    try:
        return _ingest_files(
            study,
            paths,
            items,
            items_path,
            maps=maps,
            arm=arm,
            skip_bad=skip_bad,
            replace=replace,
            control=control,
            fmt=fmt,
            progress=progress,
            error_cap=error_cap,
            framework_parsers=framework_parsers,
            lm_eval_filter=lm_eval_filter,
        )
    except (
        duckdb.IOException,
        duckdb.FatalException,
        duckdb.OutOfMemoryException,
        duckdb.TransactionException,
        OSError,
    ) as exc:
        # a full disk, a read-only folder, memory: the transaction did not commit, so nothing was written
        # (a full disk met at COMMIT, writing the WAL, is a TransactionException "Failed to commit: ...")
        if isinstance(exc, duckdb.TransactionException) and "Failed to commit" not in str(exc):
            raise
        raise InputError([Problem(str(study.path), None, "study", _write_failure(exc, study.path))]) from None


def _write_failure(exc: BaseException, path: Path) -> str:
    """Why a load failed in DuckDB or the OS, as the reason of a `study` problem. DuckDB reports a full disk
    met while spilling (`STUDY.duckdb.tmp/`) as "Out of Memory Error: failed to offload data block": that is
    the disk, and says so."""
    import shutil

    reason = str(exc).split("\n")[0].removeprefix("TransactionContext Error: ")
    if isinstance(exc, OSError) and exc.strerror:
        reason = f"{exc.strerror} ({exc.filename or path})"
    elif isinstance(exc, duckdb.OutOfMemoryException):
        spill = path.with_name(path.name + ".tmp")
        try:
            free = shutil.disk_usage(path.parent).free
        except OSError:
            free = None
        if "offload" in reason or (free is not None and free < 64 << 20):
            free_text = "" if free is None else f", {free / (1 << 20):.1f} MB free"
            reason = (
                f"no space left on the device for DuckDB's spill files ({spill}{free_text}): free some "
                "space, or give ingest more memory (MCQAUDIT_INGEST_MEMORY_LIMIT) so it spills less"
            )
        else:
            reason = (
                f"out of memory ({reason.removeprefix('Out of Memory Error: ')}): raise "
                "MCQAUDIT_INGEST_MEMORY_LIMIT (default 800MB) or free memory"
            )
    return f"cannot be written: {reason}; nothing was written"


def _ingest_files(
    study: Study,
    paths: Sequence[str | Path],
    items: list,
    items_path: str | Path | None,
    *,
    maps: dict[str, str],
    arm: str | None,
    skip_bad: bool,
    replace: bool,
    control: str | None,
    fmt: str | None,
    progress: Progress | None,
    error_cap: int,
    framework_parsers: bool,
    lm_eval_filter: str | None,
) -> list[IngestResult]:
    results: list[IngestResult] = []
    problems: list[Problem] = []
    total = 0
    with study.write() as con:
        if items:
            _, conflicts = sql.upsert_items(
                con,
                [
                    (
                        it.item_id,
                        it.question,
                        list(it.options),
                        it.gold_index,
                        None if it.metadata is None else json.dumps(it.metadata),
                    )
                    for it in items
                ],
            )
            if conflicts:
                raise InputError([Problem(str(items_path), None, "options", c) for c in conflicts])
        for path in paths:
            try:
                res = _ingest_one(
                    con,
                    Path(path),
                    arm=arm,
                    skip_bad=skip_bad,
                    replace=replace,
                    fmt=fmt,
                    progress=progress,
                    error_cap=error_cap,
                    framework_parsers=framework_parsers,
                    lm_eval_filter=lm_eval_filter,
                    maps=maps,
                )
            except InputError as exc:
                if len(paths) == 1:
                    raise
                # the other files are still read, so that one run reports every file's problems
                problems += exc.problems
                total += exc.total
                continue
            if res.problem_count and not skip_bad:
                problems += res.problems
                total += res.problem_count
                continue
            results.append(res)
        if total:
            raise InputError(
                problems,
                total,
                note="\nnothing was written; fix these rows, or pass --skip-bad to load the good rows and keep "
                "the bad ones in rejected_rows",
            )
        if control is not None:
            known = {r[0] for r in con.execute("SELECT arm FROM arms").fetchall()}
            if control not in known:
                raise InputError(
                    [
                        Problem(
                            ", ".join(str(p) for p in paths),
                            None,
                            "--control",
                            f"no arm named {control!r} in the study (arms: {', '.join(sorted(known))})",
                        )
                    ]
                )
            set_meta(con, "control_arm", control)
    return results


def _ingest_one(
    con,
    p: Path,
    *,
    arm: str | None,
    skip_bad: bool,
    replace: bool,
    fmt: str | None,
    progress: Progress | None,
    error_cap: int,
    framework_parsers: bool,
    lm_eval_filter: str | None,
    maps: dict[str, str],
) -> IngestResult:
    """One file, inside the caller's transaction. A result with problems (and not ``skip_bad``) has
    written nothing of that file's rows, but the caller must roll back: staging and ids were used."""
    check_input(p)
    kind = detect_format(p, fmt)
    if p.stat().st_size == 0:
        raise InputError([Problem(str(p), None, "file", "the file is empty")])
    if lm_eval_filter is not None and kind != "lm-eval":
        raise InputError([Problem(str(p), None, "--lm-eval-filter", "applies only to lm-eval samples files")])
    if maps and kind in IMPORTED:
        raise UsageError(
            f"--map: {p} is {'an Inspect AI log' if kind == 'inspect' else 'an lm-eval samples file'}, "
            "whose fields are read by its importer; --map applies to JSONL, CSV and Parquet"
        )
    unit = "line" if kind == "jsonl" else "row"
    source = str(p)
    notes: dict = {}
    blank = 0
    header: list[str] | None = None
    sql.bounded_memory(con, os.environ.get("MCQAUDIT_INGEST_MEMORY_LIMIT") or "800MB")
    sql.create_errors(con)
    con.execute("DROP TABLE IF EXISTS staged")
    # stage: the typed fast path where it applies, else line by line (see store/loading.py)
    mode = "text"
    if kind in IMPORTED:
        unit, notes = _stage_records(con, p, kind, arm, lm_eval_filter)
        sql.stage_from_text(con)
    elif kind == "jsonl":
        if progress:
            progress("reading", 0, None)
        if _stage_jsonl_fast(con, p, maps):
            mode = "fast"
        else:
            blank = _stage_jsonl(con, p, progress)
            sql.stage_from_text(con, maps)
    else:
        mode = "table"
        if progress:
            progress("reading", 0, None)
        stage = sql.stage_csv if kind == "csv" else sql.stage_parquet
        header = _stage_table(lambda: stage(con, source, maps), p)
    if sql.staged_count(con) == 0:
        raise InputError([Problem(source, None, "file", "the file has no rows")])
    # validate: one pass for a flag per row; the reasons only when a row is flagged
    if progress:
        progress("validating", 0, None)
    bad = sql.flagged(con, arm)
    if bad and mode == "fast":
        # the line-level diagnosis: every reason with its real line and raw text
        blank = _stage_jsonl(con, p, progress)
        sql.stage_from_text(con, maps)
        mode = "text"
        bad = sql.flagged(con, arm)
    if kind not in IMPORTED and mode != "fast":
        _check_columns(con, source, kind, header, maps, arm)
    if bad:
        sql.diagnose(con, arm)
        sql.typed_rows(con)  # the rows without a reason
    if mode != "table":
        con.execute("DROP TABLE stg")
    if progress:
        progress("resolving items", 0, None)
    ingest_id = sql.next_ingest_id(con)
    res = sql.load(
        con,
        ingest_id=ingest_id,
        source=source,
        default_arm=arm,
        replace=replace,
        skip_bad=skip_bad,
        strict=parsers.strict,
        strict_max_extra=parsers.STRICT_MAX_EXTRA,
        naive_pattern=parsers.naive_pattern,
        framework_patterns=(
            {name: fp.patterns for name, fp in parsers.FRAMEWORK_PARSERS.items()} if framework_parsers else {}
        ),
        error_cap=error_cap,
        raw=(
            (lambda lines: _raw_lines(p, lines))
            if mode == "fast"
            else (lambda lines: sql.raw_rows(con, lines, "stg" if mode == "table" else "staged"))
        ),
        progress=progress,
    )
    problems = [_problem(source, line, fld, reason, unit, notes) for line, fld, reason, _ in res.errors]
    if not (res.error_count and not skip_bad):
        sql.record_ingest(con, ingest_id, source, kind, res)
    if progress:
        progress("done", res.loaded, res.loaded)
    return IngestResult(
        source=source,
        format=kind,
        ingest_id=ingest_id,
        loaded=res.loaded,
        unchanged=res.unchanged,
        replaced=res.replaced,
        rejected=res.rejected,
        duplicates_in_file=res.duplicates_in_file,
        blank_lines=blank,
        new_items=res.new_items,
        new_arms=res.new_arms,
        problems=problems,
        problem_count=res.error_count,
    )


class _RecordProblem(Problem):
    """A problem in a framework log's record, `FILE:sample 3: field: reason` (Problem says `row` for any
    unit but `line`)."""

    def __str__(self) -> str:
        return f"{self.source}:{self.unit} {self.line}: {self.field}: {self.reason}"


def _problem(source: str, line: int, fld: str, reason: str, unit: str, notes: dict) -> Problem:
    if line not in notes:
        return Problem(source, line, fld, reason, unit)
    # a framework log's record: the importer's own field and reason, and where the record is in the log
    field, own_reason, label = notes[line]
    if fld == "line" and field:
        fld, reason = field, own_reason
    return _RecordProblem(source, line, fld, f"{reason} ({label})", unit)


def _stage_table(stage: Callable[[], T], p: Path) -> T:
    try:
        return stage()
    except sql.StageError as exc:
        if exc.line is not None:  # DuckDB names the broken line (a CSV's physical line, not its data row)
            raise InputError([Problem(str(p), exc.line, "line", str(exc))]) from None
        raise InputError([Problem(str(p), None, "file", f"cannot be read: {exc}")]) from None


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


def discard_new_study(path: str | Path) -> None:
    """Remove a study file that a failed ingest created, with its lock and write-ahead log (docs/design.md §3)."""
    p = Path(path)
    for f in (p, p.with_name(p.name + ".lock"), p.with_name(p.name + ".wal")):
        f.unlink(missing_ok=True)
