"""Reviews back to Inspect (`mcqaudit reviews export --inspect LOG --out NEW_LOG`): a copy of an Inspect log
in which every review of a row imported from it is a score edit, so that Inspect View shows audited scores.

Inspect's viewer cannot edit scores; its Python API keeps human edits as `ScoreEdit` records with
provenance in `Score.history`, the current value derived from the last. This module writes through that
API (`inspect_ai.log.edit_score`, `write_eval_log`; the optional extra ``mcqaudit[inspect]``) and never
writes to the original file.

Matching: a row came from a log when the log, read by mcqaudit's own importer
(:mod:`mcqaudit.ingest.inspect_log`: ``item_id`` = sample id, ``sample`` = epoch − 1), has that sample with
the same question, the same options in the same displayed order and the same generation. The arm is the one
whose rows all match (``--arm`` when several do); a log that matches no arm is refused.

What an edit says, for the `choice()` scorer's C/I values (or the log's only scorer):

- value: ``"C"`` for CORRECT, ``"I"`` for INCORRECT and for OTHER (Inspect has no third value there);
- answer: the picked option's letter over the sample's ``choices`` (the order Inspect's scorer uses), the
  gold letter for a CORRECT without one, and None for OTHER;
- explanation: the verdict and the reviewer's note (``"OTHER: <note>"``; OTHER with no note says the
  answer picks no single option);
- provenance: the reviewer as author, the review's time, its note (or what it did) as the reason, and as
  metadata the mcqaudit row id, review id, action, verdict, displayed picked letter, prior verdict and the
  judge fingerprint the review was made against.

Each review record is one edit, in the order they were made; a retraction is an edit back to the verdict
in force after it (the latest review not retracted, else the automated verdict; for a row that has none,
being ungraded, back to the score Inspect gave). So the last edit is the row's final verdict, and the
history is the review log. Inspect keeps the original score as the first entry of ``Score.history``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from mcqaudit.store.db import Study
from mcqaudit.vocab import CORRECT, LETTERS, OTHER

INSTALL_HINT = "pip install 'mcqaudit[inspect]'"
OTHER_EXPLANATION = (
    "the answer picks no single option (refusal, several options, none of them, broken output)"
)


class InspectExportError(Exception):
    """The log cannot take the study's reviews (not installed, not the log the rows came from, ...)."""


@dataclass
class InspectExport:
    log: str
    out: str
    arm: str
    score_name: str
    rows_matched: int = 0
    samples_edited: int = 0
    edits: int = 0
    values: dict[str, int] = field(default_factory=dict)  # final value -> samples
    reviews_elsewhere: int = 0  # reviewed rows of the study that are not from this log (left out)


@dataclass(frozen=True)
class _State:
    verdict: str
    picked_option: str | None


def _null(v: Any) -> Any:
    return None if v is None or (not isinstance(v, list | tuple) and pd.isna(v)) else v


def _edit(
    state: _State | None,
    rec: dict,
    sample: Any,
    original: Any,
    gold_option: str | None,
    fingerprint: str | None,
    classes: Any,
) -> Any:
    ScoreEdit, ProvenanceData = classes
    note = _null(rec.get("note"))
    if state is None:  # no verdict left in mcqaudit: back to the score Inspect gave
        value, answer, explanation = original.value, original.answer, original.explanation
    else:
        choices = list(sample.choices or [])
        verdict = state.verdict
        picked = state.picked_option
        if picked is None and verdict == CORRECT:
            picked = gold_option
        value = "C" if verdict == CORRECT else "I"
        answer = LETTERS[choices.index(picked)] if verdict != OTHER and picked in choices else None
        if verdict == OTHER:
            explanation = f"OTHER: {note or OTHER_EXPLANATION}"
        else:
            explanation = f"{verdict}: {note}" if note else verdict
    action = rec["action"]
    reason = note or (
        f"mcqaudit review: retracts review {_null(rec.get('retracts'))}" if action == "retract"
        else f"mcqaudit review: {action} {rec['verdict']}"
    )  # fmt: skip
    created = rec["created_at"]
    ts = created.to_pydatetime() if isinstance(created, pd.Timestamp) else created
    if isinstance(ts, datetime) and ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    meta = {
        "source": "mcqaudit",
        "row_id": rec["row_id"],
        "review_id": int(rec["review_id"]),
        "action": action,
        "verdict": _null(rec.get("verdict")),
        "picked_letter": _null(rec.get("picked_letter")),  # displayed letter, in the order the model saw
        "prior_verdict": _null(rec.get("prior_verdict")),
        "prior_source": _null(rec.get("prior_source")),
        "judge_fingerprint": _null(rec.get("fingerprint")) or fingerprint,
        "queue_id": None if _null(rec.get("queue_id")) is None else int(rec["queue_id"]),
        "origin": _null(rec.get("origin")),
    }
    return ScoreEdit(
        value=value,
        answer=answer,
        explanation=explanation,
        provenance=ProvenanceData(timestamp=ts, author=str(rec["reviewer"]), reason=reason, metadata=meta),
    )


def _states(records: Sequence[dict], row: dict) -> list[_State | None]:
    """The verdict in force after each review record (the replay of ``effective_reviews``)."""
    options = list(row["options"])

    def option(letter: Any) -> str | None:
        letter = _null(letter)
        return (
            options[LETTERS.index(letter)]
            if isinstance(letter, str) and letter in LETTERS[: len(options)]
            else None
        )

    auto: _State | None = None  # the automated verdict (judge, pre-filter, rule); None while ungraded
    if row["verdict_source"] != "review":
        if _null(row["final_verdict"]) is not None:
            auto = _State(row["final_verdict"], _null(row["picked_option"]))
    elif records and _null(records[0].get("prior_verdict")) is not None:
        auto = _State(records[0]["prior_verdict"], None)  # what the first review replaced
    active: list[dict] = []
    out: list[_State | None] = []
    for rec in records:
        if rec["action"] == "retract":
            gone = _null(rec.get("retracts"))
            active = [a for a in active if gone is None or int(a["review_id"]) != int(gone)]
        else:
            active.append(rec)
        top = active[-1] if active else None
        out.append(_State(top["verdict"], option(top.get("picked_letter"))) if top else auto)
    return out


def _score_name(samples: Sequence[Any]) -> str:
    names: set[str] = set()
    for s in samples:
        names.update((s.scores or {}).keys())
    for n in sorted(names):
        if n == "choice" or n.endswith("/choice"):
            return n
    if len(names) == 1:
        return next(iter(names))
    raise InspectExportError(
        "the log has no `choice` score to edit"
        + (f" (its scores: {', '.join(sorted(names))})" if names else " (its samples have no scores)")
    )


def export_to_inspect(
    study: Study, log_path: Path, out_path: Path, *, arm: str | None = None
) -> InspectExport:
    """Write a copy of ``log_path`` to ``out_path`` with every review of its rows as a score edit."""
    from mcqaudit.ingest.errors import InputError
    from mcqaudit.ingest.inspect_log import read_log
    from mcqaudit.store.corrections import rows_for_samples
    from mcqaudit.store.reviews import review_log

    if out_path.suffix.lower() not in (".eval", ".json"):
        raise InspectExportError(f"{out_path}: the new log must end in .eval or .json (Inspect's formats)")
    if out_path.exists() and out_path.resolve() == log_path.resolve():
        raise InspectExportError(
            "--out names the original log; mcqaudit never writes to it: choose a new file"
        )
    try:
        from inspect_ai.log import (
            ProvenanceData,
            edit_score,
            read_eval_log,
            recompute_metrics,
            write_eval_log,
        )
        from inspect_ai.scorer import ScoreEdit
    except ImportError:
        raise InspectExportError(
            f"writing Inspect logs needs the inspect-ai package: {INSTALL_HINT}"
        ) from None

    try:
        _, records = read_log(log_path)
    except InputError as exc:
        raise InspectExportError(f"{log_path}: {exc}") from None
    from_log = {(r.row["item_id"], int(r.row["sample"])): r.row for r in records if r.row is not None}
    rows = rows_for_samples(study, list(from_log))
    # an arm came from this log when every one of its rows at the log's samples is what the log holds
    matches: dict[str, list[dict]] = {}
    mismatch: dict[str, str] = {}
    for r in rows.to_dict("records"):
        src = from_log[(r["item_id"], int(r["sample"]))]
        same = (
            r["generation"] == src["generation"]
            and r["question"] == src["question"]
            and list(r["options"]) == list(src["options"])
        )
        if same:
            matches.setdefault(r["arm"], []).append(r)
        else:
            mismatch.setdefault(r["arm"], f"sample {r['item_id']!r} epoch {int(r['sample']) + 1}")
    candidates = sorted(a for a in matches if a not in mismatch)
    if arm is not None:
        if arm not in candidates:
            why = f" (its row for {mismatch[arm]} differs from the log)" if arm in mismatch else ""
            raise InspectExportError(f"{log_path} is not the log the rows of arm {arm!r} came from{why}")
        chosen = arm
    elif len(candidates) == 1:
        chosen = candidates[0]
    elif not candidates:
        example = f"; e.g. {next(iter(mismatch.values()))} differs" if mismatch else ""
        raise InspectExportError(
            f"{log_path} is not the log these rows came from: no arm of the study holds its samples with the "
            f"same question, options and generation{example}. Export against the log that was ingested"
        )
    else:
        raise InspectExportError(
            f"several arms came from {log_path} ({', '.join(candidates)}): name one with --arm"
        )
    by_row = {r["row_id"]: r for r in matches[chosen]}
    log_df = review_log(study)
    reviewed = log_df[log_df["row_id"].isin(list(by_row))]
    result = InspectExport(
        log=str(log_path), out=str(out_path), arm=chosen, score_name="", rows_matched=len(by_row)
    )
    result.reviews_elsewhere = int(log_df.loc[~log_df["row_id"].isin(list(by_row)), "row_id"].nunique())

    try:
        log = read_eval_log(str(log_path))
    except Exception as exc:  # a log our reader took but Inspect's refuses: say so, no traceback
        raise InspectExportError(
            f"{log_path}: inspect_ai cannot read it ({type(exc).__name__}: {exc})"
        ) from None
    samples = {(str(s.id), int(s.epoch)): s for s in log.samples or []}
    result.score_name = name = _score_name(list(samples.values()))
    for row_id, recs in reviewed.groupby("row_id", sort=True):
        row = by_row[str(row_id)]
        sample = samples.get((row["item_id"], int(row["sample"]) + 1))
        if sample is None:  # read_log found it, so Inspect's reader should too
            raise InspectExportError(
                f"{log_path}: sample {row['item_id']!r} epoch {int(row['sample']) + 1} not found"
            )
        rec_list = recs.to_dict("records")
        states = _states(rec_list, row)
        original = sample.scores[name].model_copy() if sample.scores and name in sample.scores else None
        if original is None:
            raise InspectExportError(f"{log_path}: sample {row['item_id']!r} has no {name!r} score to edit")
        for rec, state in zip(rec_list, states, strict=True):
            edit = _edit(state, rec, sample, original, _null(row["gold_option"]), _null(row["judge_fingerprint"]),
                         (ScoreEdit, ProvenanceData))  # fmt: skip
            edit_score(log, sample.id, name, edit, recompute_metrics=False, epoch=sample.epoch)
            result.edits += 1
        result.samples_edited += 1
        final = str(sample.scores[name].value) if sample.scores else "?"
        result.values[final] = result.values.get(final, 0) + 1
    if result.edits:
        recompute_metrics(log)
    # written beside the target, then renamed: a failed write leaves no half log behind
    tmp = out_path.with_name(f".{out_path.stem}.partial{out_path.suffix}")
    try:
        write_eval_log(log, str(tmp))
        tmp.replace(out_path)
    finally:
        tmp.unlink(missing_ok=True)
    return result
