"""The fields of a generation row (docs/design.md §3): their names, the required ones, `--map`, and the one
error for a file that lacks required fields. Pure: no I/O.

The loader (`store/loading.py`) reads each field from its key or column; this module says which fields
there are, and what a file that lacks some should be told.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from mcqaudit.ingest.errors import InputError, Problem, UsageError

FIELDS = (
    "item_id",
    "arm",
    "question",
    "options",
    "gold",
    "generation",
    "orientation",
    "prompt",
    "sample",
    "parsed_letter",
    "option_logprobs",
    "model",
    "metadata",
    "reasoning",
    "finish_reason",
    "usage",
)
REQUIRED = ("item_id", "arm", "question", "options", "gold", "generation")


def columns(maps: Mapping[str, str] | None) -> dict[str, str]:
    """field -> the key (or column) it is read from (`--map`, else its own name)."""
    return {name: (maps or {}).get(name, name) for name in FIELDS}


def field_keys(maps: Mapping[str, str] | None) -> list[str]:
    """The keys (or columns) the fields are read from."""
    return list(dict.fromkeys(columns(maps).values()))


class LineBatch(NamedTuple):
    """Raw JSON lines for the loader to stage: each line's number, its text (None when it could not be
    read) and the error found before parsing (None when there is none)."""

    lines: Sequence[int]
    texts: Sequence[str | None]
    pre_errors: Sequence[str | None]


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
        if fld not in FIELDS:
            raise UsageError(f"--map {spec!r}: unknown field {fld!r} (fields: {', '.join(FIELDS)})")
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


def check_columns(
    source: str,
    header: list[str] | None,
    maps: Mapping[str, str],
    arm: str | None,
    elsewhere: Callable[[str], bool] | None = None,
) -> None:
    """The source's header (CSV/Parquet) or first record's keys (JSONL) against the fields: a mapped column
    it lacks is a UsageError; required fields it lacks are ONE InputError with the columns and a suggested
    `--map`, instead of one error per row. ``elsewhere(column)`` (JSONL, which has no header) says whether
    some other record has the key; None for a table. A None header (the first line is not a JSON object:
    its own line error says so) checks nothing."""
    if header is None:
        return
    have = set(header)

    def absent(column: str) -> bool:
        return column not in have and (elsewhere is None or not elsewhere(column))

    for fld, column in maps.items():
        if absent(column):
            raise UsageError(
                f"--map {fld}={column}: {source} has no column {column!r} "
                f"(its columns: {', '.join(header) or 'none'})"
            )
    col = {f: maps.get(f, f) for f in REQUIRED}
    missing = [f for f in REQUIRED if not (f == "arm" and arm is not None) and absent(col[f])]
    if not missing:
        return
    used = {col[f] for f in REQUIRED if col[f] in have}
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


class Record(NamedTuple):
    """One record of a framework log (`inspect_log`, `lmeval`): its row, or the field and reason it lacks."""

    number: int  # staged as the row's line; counted in the importer's unit
    label: str  # where it is in the log, appended to every problem reported for it
    row: dict[str, Any] | None
    field: str = ""
    reason: str = ""
    # an Inspect sample: its id in the log, and what mcqaudit's own scorer (mcqaudit.inspect) recorded, one
    # score's metadata per mcq_scorer score it has (app/scored.py takes them as judge verdicts)
    sample_id: str | int | None = None
    scored: tuple[dict[str, Any], ...] = ()
