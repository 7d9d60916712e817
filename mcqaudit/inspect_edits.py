"""Reviews back to Inspect (`mcqaudit reviews export --inspect LOG --out NEW_LOG`): a copy of an Inspect log
in which every review of a row imported from it is a score edit, so that Inspect View shows audited scores.

Inspect's viewer cannot edit scores; its Python API keeps human edits as `ScoreEdit` records with
provenance in `Score.history`, the current value derived from the last. This module writes through that
API (`inspect_ai.log.edit_score`, `write_eval_log`; the optional extra ``mcqaudit[inspect]``) and never
writes to the original file.

Matching: a row came from a log when the log, read by mcqaudit's own importer
(:mod:`mcqaudit.ingest.inspect_log`: ``item_id`` = sample id, ``sample`` = epoch − 1), has that sample with
the same question, the same options in the same displayed order and the same generation (a dataset expanded
by `mcqaudit.inspect.orientations` has one sample per orientation of an item, its ``item_id`` in metadata:
the options' order tells them apart). The arm is the one whose rows all match (``--arm`` when several do); a
log that matches no arm is refused.

What an edit says, for the score of `mcqaudit.inspect`'s ``mcq_scorer`` (three-way), else the `choice()`
scorer's C/I values (or the log's only scorer):

- value: ``"C"`` for CORRECT, ``"I"`` for INCORRECT; for OTHER ``"N"`` on mcq_scorer's score, ``"I"`` on
  the others (which have no third value);
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcqaudit.review.corrections import LoggedReview, SampleRow
from mcqaudit.review.rules import RETRACT
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
class LogSample:
    """What mcqaudit's importer read of one sample of the log: the content a study row must match, and where
    the sample is in the log (its id and epoch)."""

    question: str
    options: tuple[str, ...]
    generation: str
    sample_id: str | int | None = None
    epoch: int = 1

    def holds(self, row: SampleRow) -> bool:
        return (
            row.generation == self.generation
            and row.question == self.question
            and list(row.options) == list(self.options)
        )


@dataclass(frozen=True)
class InspectSamples:
    """The log to edit, the new log to write, and the log's samples by (item_id, sample = epoch - 1): one,
    or one per orientation of a dataset expanded by `mcqaudit.inspect.orientations` (told apart by their
    options' order)."""

    log_path: Path
    out_path: Path
    samples: Mapping[tuple[str, int], tuple[LogSample, ...]]


@dataclass(frozen=True)
class _State:
    verdict: str
    picked_option: str | None


def _edit(
    state: _State | None,
    rec: LoggedReview,
    sample: Any,
    original: Any,
    gold_option: str | None,
    fingerprint: str | None,
    classes: Any,
    three_way: bool = False,
) -> Any:
    ScoreEdit, ProvenanceData = classes
    note = rec.note
    if state is None:  # no verdict left in mcqaudit: back to the score Inspect gave
        value, answer, explanation = original.value, original.answer, original.explanation
    else:
        choices = list(sample.choices or [])
        verdict = state.verdict
        picked = state.picked_option
        if picked is None and verdict == CORRECT:
            picked = gold_option
        # mcq_scorer's scores are three-way; the choice() scorer's have no value for OTHER
        value = "C" if verdict == CORRECT else ("N" if verdict == OTHER and three_way else "I")
        answer = LETTERS[choices.index(picked)] if verdict != OTHER and picked in choices else None
        if verdict == OTHER:
            explanation = f"OTHER: {note or OTHER_EXPLANATION}"
        else:
            explanation = f"{verdict}: {note}" if note else verdict
    action = rec.action
    reason = note or (
        f"mcqaudit review: retracts review {rec.retracts}" if action == RETRACT
        else f"mcqaudit review: {action} {rec.verdict}"
    )  # fmt: skip
    meta = {
        "source": "mcqaudit",
        "row_id": rec.row_id,
        "review_id": rec.review_id,
        "action": action,
        "verdict": rec.verdict,
        "picked_letter": rec.picked_letter,  # displayed letter, in the order the model saw
        "prior_verdict": rec.prior_verdict,
        "prior_source": rec.prior_source,
        "judge_fingerprint": rec.fingerprint or fingerprint,
        "queue_id": rec.queue_id,
        "origin": rec.origin,
    }
    return ScoreEdit(
        value=value,
        answer=answer,
        explanation=explanation,
        provenance=ProvenanceData(
            timestamp=rec.created_at, author=rec.reviewer, reason=reason, metadata=meta
        ),
    )


def _states(records: Sequence[LoggedReview], row: SampleRow) -> list[_State | None]:
    """The verdict in force after each review record (the replay of ``effective_reviews``)."""
    options = list(row.options)

    def option(letter: str | None) -> str | None:
        return (
            options[LETTERS.index(letter)]
            if letter is not None and letter in LETTERS[: len(options)]
            else None
        )

    auto: _State | None = None  # the automated verdict (judge, pre-filter, rule); None while ungraded
    if row.verdict_source != "review":
        if row.final_verdict is not None:
            auto = _State(row.final_verdict, row.picked_option)
    elif records and records[0].prior_verdict is not None:
        auto = _State(records[0].prior_verdict, None)  # what the first review replaced
    active: list[LoggedReview] = []
    out: list[_State | None] = []
    for rec in records:
        if rec.action == RETRACT:
            gone = rec.retracts
            active = [a for a in active if gone is None or a.review_id != gone]
        else:
            active.append(rec)
        top = active[-1] if active else None
        out.append(_State(str(top.verdict), option(top.picked_letter)) if top else auto)
    return out


# how mcqaudit.inspect's mcq_scorer marks its scores (mcqaudit/inspect.py SCORE_KEY)
_MCQ_SCORER_KEY = "mcqaudit_score"


def _is_mcq_scorer(score: Any) -> bool:
    return isinstance(score.metadata, dict) and score.metadata.get(_MCQ_SCORER_KEY) is not None


def _score_name(samples: Sequence[Any]) -> str:
    """The score to edit: mcq_scorer's (three-way), else the `choice()` scorer's, else the only one."""
    names: set[str] = set()
    for s in samples:
        names.update((s.scores or {}).keys())
        for n, score in (s.scores or {}).items():
            if _is_mcq_scorer(score):
                return str(n)
    for n in sorted(names):
        if n == "choice" or n.endswith("/choice"):
            return n
    if len(names) == 1:
        return next(iter(names))
    raise InspectExportError(
        "the log has no `choice` score to edit"
        + (f" (its scores: {', '.join(sorted(names))})" if names else " (its samples have no scores)")
    )


def _inspect_api() -> Any:
    """inspect_ai's log API (edit_score, ...), or the hint to install it."""
    try:
        from inspect_ai import log as api
        from inspect_ai.scorer import ScoreEdit
    except ImportError:
        raise InspectExportError(
            f"writing Inspect logs needs the inspect-ai package: {INSTALL_HINT}"
        ) from None
    return api, ScoreEdit


def read_samples(log_path: Path, out_path: Path) -> InspectSamples:
    """The samples of the log to edit, read by mcqaudit's own importer (after checking the new log's name, and
    that inspect-ai is installed)."""
    from mcqaudit.ingest.errors import InputError
    from mcqaudit.ingest.inspect_log import read_log

    if out_path.suffix.lower() not in (".eval", ".json"):
        raise InspectExportError(f"{out_path}: the new log must end in .eval or .json (Inspect's formats)")
    if out_path.exists() and out_path.resolve() == log_path.resolve():
        raise InspectExportError(
            "--out names the original log; mcqaudit never writes to it: choose a new file"
        )
    _inspect_api()
    try:
        _, records = read_log(log_path)
    except InputError as exc:
        raise InspectExportError(f"{log_path}: {exc}") from None
    samples: dict[tuple[str, int], tuple[LogSample, ...]] = {}
    for r in records:
        if r.row is not None:
            key = (str(r.row["item_id"]), int(r.row["sample"]))
            got = LogSample(
                r.row["question"], tuple(r.row["options"]), r.row["generation"], r.sample_id, key[1] + 1
            )
            samples[key] = (*samples.get(key, ()), got)
    return InspectSamples(log_path, out_path, samples)


def _source(log: InspectSamples, row: SampleRow) -> LogSample | None:
    """The log's sample a study row came from (same question, options in the same order, generation)."""
    return next((s for s in log.samples.get((row.item_id, row.sample), ()) if s.holds(row)), None)


def _matching_arm(
    log: InspectSamples, rows: Sequence[SampleRow], arm: str | None
) -> tuple[str, list[SampleRow]]:
    """The arm whose rows at the log's samples are all what the log holds (``arm`` when several are), and
    those rows."""
    log_path = log.log_path
    matches: dict[str, list[SampleRow]] = {}
    mismatch: dict[str, str] = {}
    for r in rows:
        if _source(log, r) is not None:
            matches.setdefault(r.arm, []).append(r)
        else:
            mismatch.setdefault(r.arm, f"sample {r.item_id!r} epoch {r.sample + 1}")
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
    return chosen, matches[chosen]


def write_corrections(
    log: InspectSamples, rows: Sequence[SampleRow], reviews: Sequence[LoggedReview], *, arm: str | None = None
) -> InspectExport:
    """Write a copy of the log to ``log.out_path`` with every review of its rows as a score edit. ``rows``:
    the study's rows at the log's samples (every arm); ``reviews``: the study's review log, oldest first."""
    api, ScoreEdit = _inspect_api()
    log_path, out_path = log.log_path, log.out_path
    chosen, mine = _matching_arm(log, rows, arm)
    by_row = {r.row_id: r for r in mine}
    reviewed: dict[str, list[LoggedReview]] = {}
    for rec in reviews:
        if rec.row_id in by_row:
            reviewed.setdefault(rec.row_id, []).append(rec)
    result = InspectExport(
        log=str(log_path), out=str(out_path), arm=chosen, score_name="", rows_matched=len(by_row)
    )
    result.reviews_elsewhere = len({r.row_id for r in reviews if r.row_id not in by_row})
    try:
        elog = api.read_eval_log(str(log_path))
    except Exception as exc:  # a log our reader took but Inspect's refuses: say so, no traceback
        raise InspectExportError(
            f"{log_path}: inspect_ai cannot read it ({type(exc).__name__}: {exc})"
        ) from None
    samples = {(str(s.id), int(s.epoch)): s for s in elog.samples or []}
    result.score_name = name = _score_name(list(samples.values()))
    for row_id in sorted(reviewed):
        row = by_row[row_id]
        src = _source(log, row)
        sid = row.item_id if src is None or src.sample_id is None else str(src.sample_id)
        sample = samples.get((sid, row.sample + 1))
        if sample is None:  # read_log found it, so Inspect's reader should too
            raise InspectExportError(f"{log_path}: sample {sid!r} epoch {row.sample + 1} not found")
        recs = reviewed[row_id]
        original = sample.scores[name].model_copy() if sample.scores and name in sample.scores else None
        if original is None:
            raise InspectExportError(f"{log_path}: sample {sid!r} has no {name!r} score to edit")
        for rec, state in zip(recs, _states(recs, row), strict=True):
            edit = _edit(state, rec, sample, original, row.gold_option, row.judge_fingerprint,
                         (ScoreEdit, api.ProvenanceData), _is_mcq_scorer(original))  # fmt: skip
            api.edit_score(elog, sample.id, name, edit, recompute_metrics=False, epoch=sample.epoch)
            result.edits += 1
        result.samples_edited += 1
        final = str(sample.scores[name].value) if sample.scores else "?"
        result.values[final] = result.values.get(final, 0) + 1
    if result.edits:
        api.recompute_metrics(elog)
    # written beside the target, then renamed: a failed write leaves no half log behind
    tmp = out_path.with_name(f".{out_path.stem}.partial{out_path.suffix}")
    try:
        api.write_eval_log(elog, str(tmp))
        tmp.replace(out_path)
    finally:
        tmp.unlink(missing_ok=True)
    return result
