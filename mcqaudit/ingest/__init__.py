"""`mcqaudit ingest`: generation rows from JSONL, CSV, Parquet, Inspect AI logs or lm-eval samples files
into a study file (DESIGN §3).

Validation happens at the edge: bytes and lines here (UTF-8, blank lines), fields and cross-row rules in
SQL (`store/loading.py`), so every problem is reported with its file, line and field, and one transaction
means a bad file writes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from mcqaudit import parsers
from mcqaudit.ingest.errors import InputError, Problem
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
    rest = b""
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
        while True:
            chunk = fh.read(CHUNK_BYTES)
            done += len(chunk)
            data = rest + chunk
            if chunk:
                cut = data.rfind(b"\n")
                if cut < 0:
                    rest = data
                    continue
                data, rest = data[: cut + 1], data[cut + 1 :]
            else:
                rest = b""
            if not data:
                break
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None and not _has_blank_line(text):
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
                        s: str | None = part.decode("utf-8")
                        err = None
                    except UnicodeDecodeError as exc:
                        s = None
                        err = f"not valid UTF-8 (byte {part[exc.start]:#04x} at column {exc.start + 1})"
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
            if not chunk:
                break
    flush()
    return blank


def ingest_file(
    study: Study,
    path: str | Path,
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
) -> IngestResult:
    """Load one file of generation rows. Raises InputError (nothing written) when rows are bad and
    ``skip_bad`` is false; with ``skip_bad`` the bad rows go to ``rejected_rows`` and the result lists them."""
    p = Path(path)
    if not p.exists():
        raise InputError([Problem(str(p), None, "file", "no such file")])
    kind = detect_format(p, fmt)
    if p.stat().st_size == 0:
        raise InputError([Problem(str(p), None, "file", "the file is empty")])
    if lm_eval_filter is not None and kind != "lm-eval":
        raise InputError([Problem(str(p), None, "--lm-eval-filter", "applies only to lm-eval samples files")])
    items = read_items(items_path) if items_path is not None else []
    unit = "line" if kind == "jsonl" else "row"
    source = str(p)
    notes: dict = {}

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
        blank = 0
        if kind in IMPORTED:
            unit, notes = _stage_records(con, p, kind, arm, lm_eval_filter)
        elif kind == "jsonl":
            blank = _stage_jsonl(con, p, progress)
        elif kind == "csv":
            _stage_table(lambda: sql.stage_csv(con, source), p)
        else:
            _stage_table(lambda: sql.stage_parquet(con, source), p)
        if sql.staged_count(con) == 0:
            raise InputError([Problem(source, None, "file", "the file has no rows")])
        if progress:
            progress("validating", 0, None)
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
                {name: fp.patterns for name, fp in parsers.FRAMEWORK_PARSERS.items()}
                if framework_parsers
                else {}
            ),
            error_cap=error_cap,
        )
        problems = [_problem(source, line, fld, reason, unit, notes) for line, fld, reason, _ in res.errors]
        if res.error_count and not skip_bad:
            raise InputError(
                problems,
                res.error_count,
                note="\nnothing was written; fix these rows, or pass --skip-bad to load the good rows and keep "
                "the bad ones in rejected_rows",
            )
        sql.record_ingest(con, ingest_id, source, kind, res)
        if control is not None:
            known = {r[0] for r in con.execute("SELECT arm FROM arms").fetchall()}
            if control not in known:
                raise InputError(
                    [
                        Problem(
                            source,
                            None,
                            "--control",
                            f"no arm named {control!r} in the study (arms: {', '.join(sorted(known))})",
                        )
                    ]
                )
            set_meta(con, "control_arm", control)
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


def _stage_table(stage: Callable[[], None], p: Path) -> None:
    try:
        stage()
    except sql.StageError as exc:
        raise InputError([Problem(str(p), None, "file", f"cannot be read: {exc}")]) from None
