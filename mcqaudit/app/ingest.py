"""The ingest use case: generation files into a study (docs/design.md §3).

A load reads its files with `ingest/` (which only reads files) and stages, checks and writes their rows
with the loader of `store/loader.py`, in ONE transaction per load: a bad file writes nothing, and a
folder or a glob of logs is one load. :func:`ingest_files` is one load into an open study;
:func:`ingest` is the command's whole run (`mcqaudit ingest`): the files and folders named, checked before
any study is created, one load per argument, and a study file it created removed again when nothing
was written. The faces reach the readers they need through here: `parse_maps` (`--map`) and
`read_items` (an items file, which `orient` reads too).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

from mcqaudit import parsers
from mcqaudit.app.info import refresh
from mcqaudit.app.scored import Taken, take_scored
from mcqaudit.app.study import open_study
from mcqaudit.ingest import IMPORTED, Note, check_file, check_input, expand, jsonl, problem, read_records
from mcqaudit.ingest.errors import InputError, Problem, UsageError
from mcqaudit.ingest.fields import check_columns, field_keys, parse_maps
from mcqaudit.ingest.items import read_items
from mcqaudit.orient import Item
from mcqaudit.store.db import Study, StudyError
from mcqaudit.store.loader import Loader, LoadFailed, StageError, load_transaction
from mcqaudit.store.loading import INGEST_MEMORY_LIMIT, memory_for_line
from mcqaudit.store.sidecars import discard_study

__all__ = [
    "Group",
    "IngestHooks",
    "IngestOptions",
    "IngestRefused",
    "IngestResult",
    "IngestRun",
    "InputError",
    "UsageError",
    "ingest",
    "ingest_file",
    "ingest_files",
    "parse_maps",
    "read_items",
]

T = TypeVar("T")
Progress = Callable[[str, int, int | None], None]  # (stage, done, total)


@dataclass(frozen=True)
class IngestOptions:
    """How to read and load the files (the flags of `mcqaudit ingest`). ``maps`` ({field: column},
    `--map`, see :func:`parse_maps`) reads a field from a column of another name."""

    arm: str | None = None
    items_path: Path | None = None
    skip_bad: bool = False
    replace: bool = False
    control: str | None = None
    fmt: str | None = None
    lm_eval_filter: str | None = None
    framework_parsers: bool = True
    maps: Mapping[str, str] = field(default_factory=dict)
    error_cap: int = 200


@dataclass(frozen=True)
class IngestResult:
    """What loading one file did (``problems``: the first of ``problem_count``, with ``--skip-bad`` the
    rejected rows')."""

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
    with_reasoning: int = 0
    truncated: int = 0
    problems: list[Problem] = field(default_factory=list)
    problem_count: int = 0
    scored: Taken = field(default_factory=Taken)  # judge verdicts from an Inspect log's mcq_scorer (§10)


class IngestRefused(Exception):
    """The study cannot be created, opened or written (a read-only folder or file, a lock held too long):
    one line, exit 1."""


class Group(NamedTuple):
    """One load: a command-line argument and the files it names (a folder or a glob: several)."""

    arg: Path
    paths: list[Path]


@dataclass(frozen=True)
class IngestRun:
    """A whole `mcqaudit ingest` run: what each load that succeeded loaded, and the loads that failed."""

    results: tuple[IngestResult, ...]
    failed: tuple[Group, ...]


class IngestHooks(Protocol):
    """What a face is told while :func:`ingest` runs."""

    def opened(self, study: Study) -> None:
        """The study is open (writable opens replay its journal: ``study.replayed``)."""

    def loading(self, group: Group) -> contextlib.AbstractContextManager[Progress | None]:
        """Around one load: its progress callback (the load's errors pass through it)."""

    def loaded(self, group: Group, results: Sequence[IngestResult]) -> None:
        """One load committed."""

    def failed(self, group: Group, error: InputError) -> None:
        """One load wrote nothing: its problems (the other loads still run)."""


# --------------------------------------------------------------------------------------------- the run
def plan(files: Sequence[Path]) -> list[Group]:
    """The loads of a command line: a folder or a glob is one load (one transaction), a plain file is its
    own. Raises UsageError for a folder or glob that names no files."""
    groups: list[Group] = []
    for f in files:
        found = expand(f)
        if found is not None and not found:
            raise UsageError(f"{f}: no files (a folder gives its Inspect AI and lm-eval logs)")
        groups.append(Group(f, [f] if found is None else found))
    return groups


def ingest(db: Path, files: Sequence[Path], options: IngestOptions, hooks: IngestHooks) -> IngestRun:
    """Load ``files`` into the study at ``db`` (created if missing), one transaction per argument.

    Raises UsageError (a bad flag, a folder without logs, a mapped column a file lacks), InputError (every
    input that is a pipe, a device, missing or unreadable, before any study is created) or IngestRefused
    (the study cannot be created, opened or written). A load whose rows are bad goes to ``hooks.failed`` and
    the next one runs. A study file this run created is removed again when no load was written.
    """
    groups = plan(files)
    # a pipe, a device or a missing file is refused before any study is created (a FIFO would hang)
    unreadable: list[Problem] = []
    for group in groups:
        for path in group.paths:
            try:
                check_input(path)
            except InputError as exc:
                unreadable += exc.problems
    if unreadable:
        raise InputError(unreadable)
    new_study = not db.exists()
    folder = next((p for p in db.absolute().parents if p.exists()), Path("/"))
    if new_study and not os.access(folder, os.W_OK):
        raise IngestRefused(f"{db}: cannot create the study: {folder} is read-only (folder or disk)")
    try:
        study = open_study(db, create=True)
    except StudyError as exc:
        raise IngestRefused(str(exc)) from None
    hooks.opened(study)
    if study.read_only:
        raise IngestRefused(f"{db}: the study file is read-only (file, folder or disk): nothing was written")
    results: list[IngestResult] = []
    failed: list[Group] = []
    wrote = False
    try:
        for group in groups:
            try:
                with hooks.loading(group) as progress:
                    loaded = ingest_files(study, group.paths, options, progress=progress)
            except StudyError as exc:  # read-only, locked for too long: one line, never a traceback
                raise IngestRefused(str(exc)) from None
            except InputError as exc:
                failed.append(group)
                hooks.failed(group, exc)
                continue
            wrote = True
            results += loaded
            hooks.loaded(group, loaded)
        if wrote:
            refresh(study)  # info's cache computed for the study as this ingest left it
    finally:
        if new_study and not wrote:
            _discard_new_study(db)
    return IngestRun(tuple(results), tuple(failed))


def _discard_new_study(path: Path) -> None:
    """Remove a study file that a failed ingest created, with its lock and write-ahead log (docs/design.md §3)."""
    discard_study(path)


# --------------------------------------------------------------------------------------------- one load
def ingest_file(
    study: Study | str | Path,
    path: str | Path,
    *,
    arm: str | None = None,
    items_path: str | Path | None = None,
    skip_bad: bool = False,
    replace: bool = False,
    control: str | None = None,
    fmt: str | None = None,
    lm_eval_filter: str | None = None,
    framework_parsers: bool = True,
    maps: Mapping[str, str] | None = None,
    error_cap: int = 200,
    progress: Progress | None = None,
) -> IngestResult:
    """Load one file (the options as keywords: :class:`IngestOptions`). Raises InputError (nothing
    written) when rows are bad and ``skip_bad`` is false; with ``skip_bad`` the bad rows go to
    ``rejected_rows`` and the result lists them."""
    options = IngestOptions(
        arm=arm,
        items_path=None if items_path is None else Path(items_path),
        skip_bad=skip_bad,
        replace=replace,
        control=control,
        fmt=fmt,
        lm_eval_filter=lm_eval_filter,
        framework_parsers=framework_parsers,
        maps=dict(maps or {}),
        error_cap=error_cap,
    )
    return ingest_files(study, [Path(path)], options, progress=progress)[0]


def ingest_files(
    study: Study | str | Path,
    paths: Sequence[str | Path],
    options: IngestOptions | None = None,
    *,
    progress: Progress | None = None,
) -> list[IngestResult]:
    """Load files of generation rows in ONE transaction (all or nothing: a folder of logs is one load).
    Raises InputError with every file's problems (each names its file) when rows are bad and ``skip_bad``
    is false, or when DuckDB or the disk cannot write the study; UsageError when a mapped column is not in
    a file."""
    o = options or IngestOptions()
    opened = open_study(study, create=True)
    items = read_items(o.items_path) if o.items_path is not None else []
    try:
        with load_transaction(opened) as loader:
            return _load(loader, [Path(p) for p in paths], items, o, progress)
    except LoadFailed as exc:
        raise InputError([Problem(str(opened.path), None, "study", exc.reason)]) from None


def _load(
    loader: Loader, paths: Sequence[Path], items: Sequence[Item], o: IngestOptions, progress: Progress | None
) -> list[IngestResult]:
    if items:
        _, conflicts = loader.upsert_items(items)
        if conflicts:
            raise InputError([Problem(str(o.items_path), None, "options", c) for c in conflicts])
    results: list[IngestResult] = []
    problems: list[Problem] = []
    total = 0
    for path in paths:
        try:
            res = _load_file(loader, path, o, progress)
        except InputError as exc:
            if len(paths) == 1:
                raise
            # the other files are still read, so that one run reports every file's problems
            problems += exc.problems
            total += exc.total
            continue
        if res.problem_count and not o.skip_bad:
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
    if o.control is not None:
        known = loader.arms()
        if o.control not in known:
            raise InputError(
                [
                    Problem(
                        ", ".join(str(p) for p in paths),
                        None,
                        "--control",
                        f"no arm named {o.control!r} in the study (arms: {', '.join(sorted(known))})",
                    )
                ]
            )
        loader.set_control(o.control)
    return results


# --------------------------------------------------------------------------------------------- one file
class _Staged(NamedTuple):
    """How a file was staged: ``fast`` (DuckDB's typed JSONL read), ``text`` (JSON lines from Python) or
    ``table`` (CSV, Parquet); the unit its rows are counted in; a framework log's notes; blank lines; a
    table's header."""

    mode: str
    unit: str
    notes: dict[int, Note]
    blank: int = 0
    header: list[str] | None = None
    scored: Mapping[int, Sequence[dict[str, Any]]] | None = None  # an Inspect log's mcq_scorer scores


def _load_file(loader: Loader, p: Path, o: IngestOptions, progress: Progress | None) -> IngestResult:
    """One file, inside the caller's transaction. A result with problems (and not ``skip_bad``) has
    written nothing of that file's rows, but the caller must roll back: staging and ids were used."""
    kind = check_file(p, o.fmt, o.lm_eval_filter, bool(o.maps))
    source = str(p)
    loader.begin_file(os.environ.get("MCQAUDIT_INGEST_MEMORY_LIMIT") or INGEST_MEMORY_LIMIT)
    staged = _stage(loader, p, kind, o, progress)
    if loader.staged_count() == 0:
        raise InputError([Problem(source, None, "file", "the file has no rows")])
    staged = _validate(loader, p, kind, staged, o, progress)
    if progress:
        progress("resolving items", 0, None)
    ingest_id = loader.next_ingest_id()
    res = loader.load(
        ingest_id=ingest_id,
        source=source,
        default_arm=o.arm,
        replace=o.replace,
        skip_bad=o.skip_bad,
        strict=parsers.strict,
        strict_max_extra=parsers.STRICT_MAX_EXTRA,
        naive_pattern=parsers.naive_pattern,
        framework_patterns=(
            {name: fp.patterns for name, fp in parsers.FRAMEWORK_PARSERS.items()}
            if o.framework_parsers
            else {}
        ),
        error_cap=o.error_cap,
        raw=(lambda lines: jsonl.raw_lines(p, lines)) if staged.mode == "fast" else None,
        progress=progress,
    )
    problems = [
        problem(source, line, fld, reason, staged.unit, staged.notes) for line, fld, reason, _ in res.errors
    ]
    taken = Taken()
    if not (res.error_count and not o.skip_bad):
        loader.record_ingest(ingest_id, source, kind, res)
        if staged.scored:
            taken = take_scored(loader, ingest_id, staged.scored)
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
        blank_lines=staged.blank,
        new_items=res.new_items,
        new_arms=res.new_arms,
        with_reasoning=res.with_reasoning,
        truncated=res.truncated,
        problems=problems,
        problem_count=res.error_count,
        scored=taken,
    )


def _stage(loader: Loader, p: Path, kind: str, o: IngestOptions, progress: Progress | None) -> _Staged:
    """Stage a file: the typed fast path where it applies, else line by line (docs/design.md §3)."""
    if kind in IMPORTED:
        records = read_records(p, kind, o.arm, o.lm_eval_filter)
        loader.stage_lines([records.batch])
        return _Staged("text", records.unit, records.notes, scored=records.scored)
    if progress:
        progress("reading", 0, None)
    if kind == "jsonl":
        if _stage_jsonl_fast(loader, p, o.maps, o.arm):
            return _Staged("fast", "line", {})
        return _Staged("text", "line", {}, _stage_lines(loader, p, o.maps, progress))
    stage = loader.stage_csv if kind == "csv" else loader.stage_parquet
    return _Staged("table", "row", {}, header=_stage_table(lambda: stage(p, o.maps), p))


def _validate(
    loader: Loader, p: Path, kind: str, staged: _Staged, o: IngestOptions, progress: Progress | None
) -> _Staged:
    """One pass for a flag per row; the reasons only when a row is flagged. A JSONL file the fast path
    staged is restaged line by line first, so that every reason names its real line and raw text."""
    if progress:
        progress("validating", 0, None)
    bad = loader.flag(o.arm)
    if bad and staged.mode == "fast":
        staged = staged._replace(mode="text", blank=_stage_lines(loader, p, o.maps, progress))
        bad = loader.flag(o.arm)
    if kind not in IMPORTED and staged.mode != "fast":
        if kind == "jsonl":  # no header: a key missing from the first record may still be in the others
            check_columns(str(p), loader.first_record_keys(), o.maps, o.arm, loader.any_record_has)
        else:
            check_columns(str(p), staged.header, o.maps, o.arm)
    if bad:
        loader.diagnose(o.arm)
    loader.end_staging()
    return staged


def _stage_lines(loader: Loader, p: Path, maps: Mapping[str, str], progress: Progress | None) -> int:
    """Stage a JSONL file line by line (exact line numbers); the count of blank lines."""
    lines = jsonl.JsonlLines(p, progress)
    loader.stage_lines(lines, maps)
    return lines.blank_lines


def _stage_jsonl_fast(loader: Loader, path: Path, maps: Mapping[str, str], arm: str | None = None) -> bool:
    """DuckDB's typed read, its buffer sized for the longest line; False when the file needs the
    line-by-line path (a line over MAX_LINE_BYTES, which read_json would refuse by aborting the
    transaction, is that path's error on its line)."""
    count, longest = jsonl.scan_lines(path)
    if longest > jsonl.MAX_LINE_BYTES:
        return False
    if longest and not os.environ.get("MCQAUDIT_INGEST_MEMORY_LIMIT"):
        # a line of tens of MB: DuckDB's JSON functions allocate buffers of several times its size
        loader.set_memory_limit(memory_for_line(longest))
    # the key names are counted in a thread while DuckDB reads the file (it releases the GIL)
    mentions: dict[str, int] = {}
    counter = threading.Thread(
        target=jsonl.key_mentions, args=(path, field_keys(maps), mentions), daemon=True
    )
    counter.start()
    try:
        ok = _stage_table(lambda: loader.stage_jsonl_fast(path, lambda: count, maps, longest, arm), path)
    finally:
        counter.join()
    if ok:
        # read_json keeps the first of a duplicate key silently: where a key's name occurs more often than
        # the rows that have it, some line may say it twice, and the line-by-line path checks each line
        have = loader.fast_key_counts(maps)  # a key whose value is null counts as absent there
        suspects = [k for k, n in mentions.items() if n > have[k]]
        nulls = jsonl.null_mentions(path, suspects) if suspects else {}
        if any(mentions[k] - nulls[k] > have[k] for k in suspects):
            loader.unstage()
            return False
    if ok and maps and not loader.all_columns_seen(maps):
        # a mapped key that no record has: the line-by-line path says which (a usage error)
        loader.unstage()
        return False
    return ok


def _stage_table(stage: Callable[[], T], p: Path) -> T:
    """A DuckDB read of the file, its StageError as the file's problem."""
    try:
        return stage()
    except StageError as exc:
        if exc.line is not None:  # DuckDB names the broken line (a CSV's physical line, not its data row)
            raise InputError([Problem(str(p), exc.line, "line", str(exc))]) from None
        raise InputError([Problem(str(p), None, "file", f"cannot be read: {exc}")]) from None
