"""The review log without a study: its columns, its CSV cells, and reading one into typed records
(docs/design.md §6).

A review log (CSV or JSONL, columns :data:`LOG_COLUMNS`) carries reviews between copies of a study, and
after them its spot-check queues (lines with action ``queue``, columns :data:`QUEUE_COLUMNS`). A *label
file* (:data:`LABEL_COLUMNS`) carries verdicts from elsewhere, records with no ``action``. The CSV
neutralises cells a spreadsheet would run as formulas (:func:`neutralise_cell`); reading restores them
(:func:`restore_cell`).

Reading is in steps, each a function here: the text into :class:`RawRecord` lines (:func:`parse_log_text`),
the header's problems (:func:`header_problems`), the rows the records name (:func:`named_rows`, which the
store looks up), then every line checked against those rows into :class:`LogQueue` and :class:`LogReview`
records (:func:`check_log`). A log with any problem is refused whole (:class:`ReviewImportError`, each
problem "FILE:LINE: field: reason"). Pure: the caller reads the file and writes the study
(:mod:`mcqaudit.app.reviews`).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Final

from mcqaudit.review.queues import STRATEGIES
from mcqaudit.review.rules import ACTIONS, RETRACT, ReviewError, RowState, check_verdict, normal_letter
from mcqaudit.vocab import VERDICTS

LOG_COLUMNS: Final = [
    "review_id",
    "row_id",
    "arm",
    "item_id",
    "orientation",
    "sample",
    "action",
    "verdict",
    "picked_letter",
    "note",
    "reviewer",
    "created_at",
    "prior_verdict",
    "prior_source",
    "fingerprint",
    "retracts",
    "queue_id",
    "origin",
]
QUEUE: Final = "queue"  # the action of a review log's queue-membership lines (not a review)
QUEUE_COLUMNS: Final = [
    "queue_name",
    "queue_strategy",
    "queue_seed",
    "queue_size",
    "queue_per_arm",
    "queue_arms",
    "queue_position",
]
EXPORT_COLUMNS: Final = LOG_COLUMNS + QUEUE_COLUMNS  # what `reviews export` writes
ROW_KEY: Final = ("arm", "item_id", "orientation", "sample")
LABEL_COLUMNS: Final = ["row_id", *ROW_KEY, "verdict", "picked_letter", "reviewer", "note", "reviewed_at"]

RowKey = tuple[str, str, str, int]  # (arm, item_id, orientation, sample)
# how an import knows a review: ("log", row_id, action, reviewer, time), ("label", row_id, reviewer, time) or
# ("untimed", row_id, reviewer, verdict, note, picked letter)
ReviewKey = tuple[str | datetime | None, ...]

# A cell that a spreadsheet would run as a formula (OWASP "CSV injection"): one that starts with = + - @, a
# tab or a carriage return. The CSV export prefixes such a cell with a single quote, which spreadsheets show
# as text; so that the import can undo exactly that, a cell that starts with quotes followed by one of those
# characters gets one more quote too (the import removes one quote from every cell of that shape).
FORMULA_CELL: Final = (
    r"^'*[=+\-@\t\r]"  # Python's re and DuckDB's RE2 read it alike (store/rows.py export_rows)
)
_FORMULA = re.compile(FORMULA_CELL)


def neutralise_cell(text: str) -> str:
    """A CSV cell that no spreadsheet runs as a formula; :func:`restore_cell` undoes it."""
    return "'" + text if _FORMULA.match(text) else text


def restore_cell(text: str) -> str:
    """The cell :func:`neutralise_cell` was given."""
    return text[1:] if text.startswith("'") and _FORMULA.match(text) else text


def log_csv(lines: Iterable[Sequence[str]]) -> str:
    """A review log as CSV text: the :data:`EXPORT_COLUMNS` header, then each line (cells as text, "" for no
    value; a short line is padded), every cell neutralised (:func:`neutralise_cell`)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(EXPORT_COLUMNS)
    for cells in lines:
        padded = [*cells, *[""] * (len(EXPORT_COLUMNS) - len(cells))]
        w.writerow([neutralise_cell(v) for v in padded])
    return buf.getvalue()


class ReviewImportError(ValueError):
    """A review log with problems; nothing of it was written. ``problems`` are "FILE:LINE: field: reason"."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        shown = self.problems[:50]
        more = len(self.problems) - len(shown)
        super().__init__("\n".join(shown) + (f"\n... and {more} more" if more else ""))


@dataclass(frozen=True)
class RawRecord:
    """One record of a log as read: its first line number and every value as text ("" for none)."""

    line: int
    cells: Mapping[str, str]

    def get(self, column: str) -> str:
        """The value of ``column`` ("" when the record has none)."""
        return self.cells.get(column, "")

    def stripped(self, column: str) -> str:
        return self.get(column).strip()

    @property
    def action(self) -> str:
        return self.stripped("action").lower()


@dataclass(frozen=True)
class RawLog:
    """A log's records, the columns the file has, and whether it is CSV (which has a header line)."""

    records: tuple[RawRecord, ...]
    columns: frozenset[str]
    is_csv: bool


def is_jsonl(suffix: str, text: str) -> bool:
    """Whether a log is JSONL (by its file name's suffix, else by its first character)."""
    return suffix.lower() in (".jsonl", ".ndjson", ".json") or text.lstrip().startswith("{")


def _text(v: object) -> str:
    """A JSONL value as the text a CSV cell would hold ("" for none; arrays and objects as JSON)."""
    if v is None:
        return ""
    if isinstance(v, list | dict):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def parse_log_text(text: str, source: str, *, jsonl: bool) -> RawLog:
    """The records of a log's text (``source`` names it in problems). CSV cells are restored
    (:func:`restore_cell`); JSONL values become the text a CSV cell would hold."""
    out: list[RawRecord] = []
    if jsonl:
        cols: set[str] = set()
        for k, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ReviewImportError([f"{source}:{k}: not a JSON object ({exc.msg})"]) from None
            if not isinstance(obj, dict):
                raise ReviewImportError([f"{source}:{k}: not a JSON object"])
            cols.update(str(key) for key in obj)
            out.append(RawRecord(k, {str(key): _text(v) for key, v in obj.items()}))
        return RawLog(tuple(out), frozenset(cols), False)
    reader = csv.DictReader(io.StringIO(text))
    try:
        header = set(reader.fieldnames or [])
        last = 1
        for rec in reader:
            start = last + 1  # a quoted field may span lines: the record starts after the previous one ended
            last = reader.line_num
            # undo the export's formula neutralisation (log_csv), cell by cell
            out.append(RawRecord(start, {k: restore_cell(v or "") for k, v in rec.items() if k is not None}))
    except csv.Error as exc:
        raise ReviewImportError([f"{source}:{reader.line_num}: not readable as CSV ({exc})"]) from None
    return RawLog(tuple(out), frozenset(header), True)


def header_problems(log: RawLog, source: str, default_reviewer: str) -> list[str]:
    """What makes a whole file unreadable as reviews: no way to name rows, no verdicts, no reviewer."""
    cols = log.columns
    head: list[str] = []
    if log.is_csv and "row_id" not in cols and not set(ROW_KEY) <= cols:
        head.append(
            f"{source}:1: header: no row_id column (nor all of {', '.join(ROW_KEY)}) to name the rows"
        )
    if log.is_csv and "action" not in cols and "verdict" not in cols:
        head.append(f"{source}:1: header: no verdict column")
    if log.records and "reviewer" not in cols and not default_reviewer:
        head.append(
            f"{source}:1: reviewer: the file has no reviewer column; name the reviewer with --reviewer NAME"
        )
    return head


def parse_time(s: str) -> datetime:
    """An ISO-8601 time in UTC (a time without a zone is UTC); ValueError when it is none."""
    t = datetime.fromisoformat(s.strip().replace("Z", "+00:00"))
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).astimezone(UTC)


def row_key(r: RawRecord) -> RowKey | None:
    """(arm, item_id, orientation, sample) of a record that names its row so; None when incomplete or the
    sample is not an integer."""
    arm, item, orient, sample = (r.stripped(k) for k in ROW_KEY)
    if not (arm and item and orient) or not sample.lstrip("-").isdigit():
        return None
    return arm, item, orient, int(sample)


def named_rows(log: RawLog) -> tuple[list[str], list[RowKey]]:
    """The row_ids the records name (sorted), and the row keys of those that name none."""
    ids = sorted({r.stripped("row_id") for r in log.records} - {""})
    keys = [k for r in log.records if not r.stripped("row_id") and (k := row_key(r)) is not None]
    return ids, keys


@dataclass(frozen=True)
class LogRow(RowState):
    """A row of the study an import matched: its identity, legal letters and current verdict, and when its
    effective review was made."""

    key: RowKey
    reviewed_at: datetime | None

    def reviewed(self, verdict: str | None, letter: str | None, at: datetime) -> LogRow:
        """The row once a review at ``at`` is recorded: the effective review is the latest by time, then
        review_id (schema migration 2), so a new one wins ties."""
        if self.reviewed_at is None or at >= self.reviewed_at:
            return replace(self, final_verdict=verdict, verdict_source="review", picked_letter=letter,
                           reviewed_at=at)  # fmt: skip
        return self


@dataclass(frozen=True)
class LogQueue:
    """A spot-check queue as a review log carries it: its definition and its rows in queue order."""

    name: str
    strategy: str
    seed: int
    size: int
    per_arm: bool
    arms: tuple[str, ...]
    created_by: str | None
    created_at: datetime
    line: int
    rows: tuple[str, ...]  # row_ids by position


@dataclass(frozen=True)
class LogReview:
    """A review-log record or a label, checked against its row. ``action`` is "" for a label (recorded as a
    confirm or an override by :func:`mcqaudit.review.rules.label_decision`)."""

    line: int
    key: ReviewKey
    row_id: str
    action: str
    verdict: str | None
    picked_letter: str | None
    given_letter: str | None  # as the file named it
    note: str | None
    reviewer: str
    created_at: datetime | None  # None: an untimed label (recorded at the import's time)
    prior_verdict: str | None
    prior_source: str | None
    fingerprint: str | None
    retracts_src: str | None  # the review_id it withdraws, in the exporting study
    queue_src: str | None  # its queue's id in the exporting study


@dataclass(frozen=True)
class CheckedLog:
    """Every line of a log, checked: its queues by their id in the exporting study, its reviews, and the
    review_ids of the exporting study the reviews had (to match retractions)."""

    queues: Mapping[str, LogQueue]
    reviews: tuple[LogReview, ...]
    by_source_id: Mapping[str, ReviewKey]
    lines: int


@dataclass(frozen=True)
class _Known:
    """The study's rows a log names, by row_id and by (arm, item_id, orientation, sample)."""

    by_id: Mapping[str, LogRow]
    by_key: Mapping[RowKey, LogRow]


def _named_row(where: str, r: RawRecord, known: _Known) -> tuple[LogRow | None, list[str]]:
    """The study's row a record names (by row_id, or by arm, item_id, orientation, sample), or the problems."""
    errs: list[str] = []
    row: LogRow | None = None
    rid = r.stripped("row_id")
    if rid:
        row = known.by_id.get(rid)
        if row is None:
            errs.append(f"{where}: row_id: {rid!r} is not a row of this study")
        else:
            for col, have in zip(ROW_KEY, row.key, strict=True):
                given = r.stripped(col)
                if given and given != str(have):
                    errs.append(f"{where}: {col}: {given!r}, but row {rid!r} has {col} {have!r}")
    elif all(r.stripped(k) for k in ROW_KEY):
        key = row_key(r)
        if key is None:
            errs.append(f"{where}: sample: not an integer: {r.stripped('sample')!r}")
        else:
            row = known.by_key.get(key)
            if row is None:
                errs.append(
                    f"{where}: {', '.join(ROW_KEY)}: no row of this study is arm {key[0]!r}, "
                    f"item_id {key[1]!r}, orientation {key[2]!r}, sample {key[3]}"
                )
    else:
        lacking = [k for k in ROW_KEY if not r.stripped(k)]
        errs.append(
            f"{where}: row_id: missing, and so is {', '.join(lacking)}: name the row by row_id or by "
            f"{', '.join(ROW_KEY)}"
        )
    return row, errs


def _check_letters(
    where: str, verdict: str | None, letter: str | None, row: LogRow
) -> tuple[tuple[str, str | None] | None, str | None]:
    """check_verdict, with its complaint filed under the field it is about."""
    try:
        return check_verdict(verdict, letter, row.gold_letter, row.n_options), None
    except ReviewError as exc:
        field_ = "verdict" if verdict not in VERDICTS else "picked_letter"
        return None, f"{where}: {field_}: {exc}"


@dataclass
class _QueueDraft:
    queue: LogQueue
    rows: dict[int, str] = field(default_factory=dict)  # position -> row_id

    def definition(self) -> tuple[object, ...]:
        q = self.queue
        return (q.name, q.strategy, q.seed, q.size, q.per_arm, q.arms)


def _queue_fields(where: str, r: RawRecord, errs: list[str]) -> tuple[dict[str, int], bool, list[str] | None]:
    """A queue line's integers (seed, size, position), per_arm and arms; each problem appended to ``errs``."""
    ints: dict[str, int] = {}
    for col in ("queue_seed", "queue_size", "queue_position"):
        raw = r.stripped(col)
        if not raw.lstrip("-").isdigit():
            errs.append(f"{where}: {col}: not an integer: {raw!r}")
        else:
            ints[col] = int(raw)
    per_arm = r.stripped("queue_per_arm").lower()
    if per_arm not in ("true", "false"):
        errs.append(f"{where}: queue_per_arm: must be true or false, not {per_arm!r}")
    try:
        arms = json.loads(r.get("queue_arms") or "null")
    except ValueError:
        arms = None
    if not (isinstance(arms, list) and all(isinstance(a, str) for a in arms)):
        errs.append(f"{where}: queue_arms: not a JSON array of arm names")
        arms = None
    return ints, per_arm == "true", arms


def _check_queue_lines(
    source: str, lines: Sequence[RawRecord], known: _Known, problems: list[str]
) -> dict[str, LogQueue]:
    """The queues of a review log's ``queue`` lines, by their id in the study that exported them; each
    problem is appended to ``problems``."""
    drafts: dict[str, _QueueDraft] = {}
    for r in lines:
        where = f"{source}:{r.line}"
        row, errs = _named_row(where, r, known)
        src = r.stripped("queue_id")
        if not src:
            errs.append(f"{where}: queue_id: a queue line names its queue")
        name = r.stripped("queue_name")
        if not name:
            errs.append(f"{where}: queue_name: missing")
        strategy = r.stripped("queue_strategy")
        if strategy not in STRATEGIES:
            errs.append(f"{where}: queue_strategy: must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
        ints, per_arm, arms = _queue_fields(where, r, errs)
        created: datetime | None = None
        try:
            created = parse_time(r.get("created_at"))
        except ValueError:
            errs.append(f"{where}: created_at: not an ISO-8601 time: {r.get('created_at')!r}")
        if errs:
            problems += errs
            continue
        assert row is not None and arms is not None and created is not None
        q = LogQueue(name, strategy, ints["queue_seed"], ints["queue_size"], per_arm, tuple(arms),
                     r.stripped("reviewer") or None, created, r.line, ())  # fmt: skip
        have = drafts.setdefault(src, _QueueDraft(q))
        if have.definition() != _QueueDraft(q).definition():
            problems.append(f"{where}: queue_id: queue {src} is defined otherwise on line {have.queue.line}")
        elif ints["queue_position"] in have.rows:
            problems.append(
                f"{where}: queue_position: queue {src} has position {ints['queue_position']} twice"
            )
        else:
            have.rows[ints["queue_position"]] = row.row_id
    return {src: replace(d.queue, rows=tuple(d.rows[k] for k in sorted(d.rows))) for src, d in drafts.items()}


def _check_review(
    source: str, r: RawRecord, known: _Known, default_reviewer: str
) -> tuple[LogReview | None, list[str]]:
    """One review-log record or label, checked against its row: the typed record, or its problems."""
    where = f"{source}:{r.line}"
    row, errs = _named_row(where, r, known)
    action = r.action
    if action and action not in ACTIONS:
        errs.append(f"{where}: action: must be one of {', '.join(ACTIONS)}, not {action!r}")
    who = r.stripped("reviewer") or default_reviewer
    if not who:
        errs.append(f"{where}: reviewer: missing (or name one for the whole file with --reviewer)")
    time_field = "created_at" if r.stripped("created_at") or action else "reviewed_at"
    raw_time = r.stripped(time_field) or r.stripped("reviewed_at")
    created: datetime | None = None
    if raw_time or action:
        try:
            created = parse_time(raw_time)
        except ValueError:
            errs.append(f"{where}: {time_field}: not an ISO-8601 time: {raw_time!r}")
    verdict = r.stripped("verdict").upper() or None
    letter = normal_letter(r.get("picked_letter"))
    retracts = r.stripped("retracts")
    if not action and verdict is None:
        errs.append(f"{where}: verdict: missing (one of {', '.join(VERDICTS)})")
    elif action != RETRACT and row is not None:
        checked, problem = _check_letters(where, verdict, letter, row)
        if problem:
            errs.append(problem)
        elif checked:
            verdict, letter = checked
    if action == RETRACT and not retracts:
        errs.append(f"{where}: retracts: a retraction names the review_id it withdraws")
    if errs:
        return None, errs
    assert row is not None
    note = r.stripped("note") or None
    key: ReviewKey
    if action:
        key = ("log", row.row_id, action, who, created)
    elif created is not None:
        key = ("label", row.row_id, who, created)
    else:
        key = ("untimed", row.row_id, who, verdict, note, letter)
    return LogReview(
        line=r.line,
        key=key,
        row_id=row.row_id,
        action=action,
        verdict=verdict if action != RETRACT else None,
        picked_letter=letter if action != RETRACT else None,
        given_letter=normal_letter(r.get("picked_letter")),
        note=note,
        reviewer=who,
        created_at=created,
        prior_verdict=r.get("prior_verdict") or None,
        prior_source=r.get("prior_source") or None,
        fingerprint=r.get("fingerprint") or None,
        retracts_src=retracts or None,
        queue_src=r.stripped("queue_id") or None,
    ), []


def check_log(log: RawLog, source: str, known: Mapping[str, LogRow], default_reviewer: str) -> CheckedLog:
    """Every line of ``log`` checked against the study's rows it names (``known``, by row_id): its queues,
    then its reviews, then that each retraction names a review of the log. Raises
    :class:`ReviewImportError` with every problem, in that order, when there is any."""
    problems: list[str] = []
    rows = _Known(known, {row.key: row for row in known.values()})
    queue_lines = [r for r in log.records if r.action == QUEUE]
    queues = _check_queue_lines(source, queue_lines, rows, problems)
    reviews: list[LogReview] = []
    by_source_id: dict[str, ReviewKey] = {}
    for r in log.records:
        if r.action == QUEUE:
            continue
        rec, errs = _check_review(source, r, rows, default_reviewer)
        if rec is None:
            problems += errs
            continue
        if src := r.stripped("review_id"):
            by_source_id[src] = rec.key
        reviews.append(rec)
    for rec in reviews:
        if rec.retracts_src is not None and rec.retracts_src not in by_source_id:
            problems.append(f"{source}:{rec.line}: retracts: review {rec.retracts_src} is not in this log")
    if problems:
        raise ReviewImportError(problems)
    return CheckedLog(queues, tuple(reviews), by_source_id, len(log.records))


@dataclass(frozen=True)
class StoredReview:
    """A review the study has for a row a log names (what an import matches records against)."""

    review_id: int
    row_id: str
    action: str
    reviewer: str
    created_at: datetime
    verdict: str | None
    picked_letter: str | None
    note: str | None
    from_import: bool  # its origin is an earlier import


UntimedKey = tuple[str, str, str | None, str | None]  # (row_id, reviewer, verdict, note)


@dataclass
class Matches:
    """The reviews an import already knows: by key (the study's, then those it records), and the untimed
    labels' candidates (review_id and picked letter of earlier imports' confirms and overrides)."""

    seen: dict[ReviewKey, int]
    untimed: dict[UntimedKey, list[tuple[str | None, int]]]

    @classmethod
    def of(cls, stored: Iterable[StoredReview]) -> Matches:
        seen: dict[ReviewKey, int] = {}
        untimed: dict[UntimedKey, list[tuple[str | None, int]]] = {}
        for s in stored:
            at = s.created_at.astimezone(UTC)
            seen[("log", s.row_id, s.action, s.reviewer, at)] = s.review_id
            if s.action != RETRACT:
                seen.setdefault(("label", s.row_id, s.reviewer, at), s.review_id)
                if s.from_import:
                    untimed.setdefault((s.row_id, s.reviewer, s.verdict, s.note), []).append(
                        (s.picked_letter, s.review_id)
                    )
        return cls(seen, untimed)

    def present(self, rec: LogReview) -> bool:
        """Whether the study has ``rec`` already. An untimed label is known by (row_id, reviewer, verdict,
        note) and its letter when it names one, among earlier imports' confirms and overrides, retracted
        ones included (so re-importing never brings back a withdrawn review)."""
        if rec.key[0] == "untimed":
            match = [
                i
                for lt, i in self.untimed.get((rec.row_id, rec.reviewer, rec.verdict, rec.note), [])
                if rec.picked_letter in (None, lt)
            ]
            if match:
                self.seen.setdefault(rec.key, match[0])
        return rec.key in self.seen

    def recorded(self, rec: LogReview, review_id: int, letter: str | None) -> None:
        """Note a review the import recorded for ``rec``."""
        self.seen[rec.key] = review_id
        if rec.key[0] == "untimed":
            self.untimed.setdefault((rec.row_id, rec.reviewer, rec.verdict, rec.note), []).append(
                (letter, review_id)
            )
