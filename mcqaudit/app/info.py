"""The info use case: what ``mcqaudit info`` says about a study without a bootstrap: its summary (arms,
items, orientations, rows per arm × orientation, parser coverage, verdicts by source, rejected rows), the
flags that need no CIs, the judge fingerprints and what grading cost so far (:func:`judge_usage`, the
``usage`` each judge reply reported), and the batches; :func:`info_json` is ``info --json``.

Nothing here imports numpy, pandas or :func:`mcqaudit.metrics.compute`: the flags come from counts DuckDB
aggregates (:mod:`mcqaudit.store.facts`, :func:`mcqaudit.metrics.facts.quick_flags`), which equal what
``compute(frames, n_boot=0)`` raises (tests/test_info_fast.py). :func:`info_facts` keeps what it computed in
``info``'s cache beside the study (:mod:`mcqaudit.store.infocache`) and answers from it, without opening the
study, while the file is unchanged: ``info`` is instant at any size after its first run on a study's state.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcqaudit.metrics.results import Flag
    from mcqaudit.store.batches import BatchOverview
    from mcqaudit.store.db import Study
    from mcqaudit.store.judging import FingerprintSummary, JudgeUsage
    from mcqaudit.store.summary import StudySummary

__all__ = [
    "InfoFacts",
    "JudgeUsage",
    "batch_overview",
    "fingerprints",
    "info_facts",
    "info_json",
    "judge_usage",
    "refresh",
    "reviews_changing",
    "study_flags",
    "summary",
]


def __getattr__(name: str) -> Any:
    if name == "JudgeUsage":  # a TypedDict the dashboard imports from here (it loads duckdb)
        from mcqaudit.store.judging import JudgeUsage

        return JudgeUsage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def summary(study: Study) -> StudySummary:
    """The study's facts as ``mcqaudit info`` prints them first (:class:`~mcqaudit.store.summary.StudySummary`,
    its tables as plain rows)."""
    from mcqaudit.store.summary import summarise

    return summarise(study)


def study_flags(study: str | Path | Study) -> tuple[list[Flag], tuple[str, ...]]:
    """The flags that need no bootstrap (for ``mcqaudit info``), most important first, and the names of
    the flags that could not be checked here: those read off CIs (:data:`~mcqaudit.metrics.rules.CI_FLAGS`),
    which need two or more arms to compare and a bootstrap (``mcqaudit report``)."""
    from mcqaudit.app.study import open_study
    from mcqaudit.metrics.facts import quick_flags
    from mcqaudit.store.facts import fact_counts

    return quick_flags(fact_counts(open_study(study)))


def fingerprints(study: Study) -> list[FingerprintSummary]:
    """Each judge fingerprint of the study, its settings and the rows it graded, oldest first."""
    from mcqaudit.store.judging import fingerprint_summary

    return fingerprint_summary(study)


def batch_overview(study: Study) -> BatchOverview:
    """Open submissions (with their model) and a count of collected ones (`grade --batch`)."""
    from mcqaudit.store.batches import overview

    return overview(study)


def judge_usage(study: Study) -> dict[str, JudgeUsage]:
    """Per judge fingerprint (oldest first): the prompt and completion tokens its replies reported, over how
    many replies, how many reported no ``usage`` (unknown: not counted as 0), and how many requests failed
    without a reply (:func:`mcqaudit.store.judging.usage_by_fingerprint`)."""
    from mcqaudit.store.judging import usage_by_fingerprint

    return usage_by_fingerprint(study)


@dataclass
class InfoFacts:
    """Everything ``mcqaudit info`` prints that it reads from the study file, computed or from the cache.

    ``fingerprints`` are :func:`fingerprints`' entries with ``first_used`` as ISO text (``info --json``'s form).
    ``study`` is the open study when it was opened to compute them (None: read from the cache);
    :meth:`open` opens it on demand.
    """

    path: Path
    summary: StudySummary
    flags: list[Flag]
    unchecked: tuple[str, ...]
    fingerprints: list[dict[str, Any]]
    usage: dict[str, JudgeUsage]
    batches: BatchOverview
    study: Study | None = None

    def open(self) -> Study:
        if self.study is None:
            from mcqaudit.app.study import open_study

            self.study = open_study(self.path)
        return self.study


def _compute(study: Study) -> tuple[InfoFacts, dict[str, Any]]:
    """What ``info`` prints of the study, and the counts beneath it (:func:`_state`), in the connection open."""
    from mcqaudit.metrics.facts import quick_flags
    from mcqaudit.store.facts import counts_of, raw_counts
    from mcqaudit.store.frames import study_facts

    with study.connect() as con:
        raw = raw_counts(con, study_facts(con))
    flags, unchecked = quick_flags(counts_of(raw))
    s = summary(study)
    facts = InfoFacts(
        path=study.path,
        summary=s,
        flags=flags,
        unchecked=unchecked,
        fingerprints=[
            {**f, "first_used": f["first_used"].isoformat() if f["first_used"] else None}
            for f in fingerprints(study)
        ],
        usage=judge_usage(study),
        batches=batch_overview(study),
        study=study,
    )
    return facts, {"facts": raw, "verdicts": s.verdicts.rows}


def _payload(f: InfoFacts) -> dict[str, Any]:
    s = f.summary
    return {
        "summary": {
            **{k.name: getattr(s, k.name) for k in dataclasses.fields(s) if k.name != "path"},
            **{k: dataclasses.asdict(getattr(s, k)) for k in _TABLES},
        },
        "flags": f.flags,
        "unchecked": list(f.unchecked),
        "fingerprints": f.fingerprints,
        "usage": f.usage,
        "batches": {
            "open": [
                [{**dataclasses.asdict(sub), "submitted_at": sub.submitted_at.isoformat()}, model]
                for sub, model in f.batches.open
            ],
            "collected": f.batches.collected,
        },
    }


_TABLES = ("rows_by_arm_orientation", "parser_coverage", "verdicts", "rejected")


def _from_payload(path: Path, p: dict[str, Any]) -> InfoFacts:
    from mcqaudit.store.batches import BatchOverview, Submission
    from mcqaudit.store.summary import StudySummary, Table

    s = dict(p["summary"])
    for k in _TABLES:
        s[k] = Table(**s[k])
    b = p["batches"]
    return InfoFacts(
        path=path,
        summary=StudySummary(path=str(path), **s),
        flags=p["flags"],
        unchecked=tuple(p["unchecked"]),
        fingerprints=p["fingerprints"],
        usage=p["usage"],
        batches=BatchOverview(
            open=[
                (Submission(**{**sub, "submitted_at": datetime.fromisoformat(sub["submitted_at"])}), model)
                for sub, model in b["open"]
            ],
            collected=b["collected"],
        ),
    )


def info_facts(study: str | Path | Study) -> InfoFacts:
    """What ``info`` prints of the study: from ``info``'s cache when the study file has not changed since it
    was written (the study is not opened: :attr:`InfoFacts.study` is None), else computed in one connection
    to the opened study (its journal replayed first) and kept in the cache."""
    from mcqaudit.store import infocache
    from mcqaudit.store.sidecars import journal_dir

    path = Path(study.path if not isinstance(study, str | Path) else study)
    if isinstance(study, str | Path) and not journal_dir(path).is_dir():
        cached = infocache.load(path)
        if cached is not None:
            try:
                return _from_payload(path, cached)
            except (KeyError, TypeError, ValueError):
                pass  # a cache of another shape: computed again below
    from mcqaudit.app.study import open_study

    opened = open_study(study)
    taken = infocache.stamp(opened.path)
    with opened.connect():  # every query below in this one connection
        facts, state = _compute(opened)
    infocache.save(opened.path, taken, _payload(facts), state)
    facts.path = path
    return facts


def refresh(study: Study) -> None:
    """Bring ``info``'s cache up to date after a write that changed the study wholesale (an ingest, a grade
    run): computed in one connection, and kept with the stamp the file has when that connection has closed
    (the file lock still held: no other mcqaudit process wrote in between), so that the next ``info`` answers
    from it at once. A study that is read-only, or a folder that cannot be written, keeps none."""
    if study.read_only or study.connected:  # nested: what the caller writes after would not be in it
        return
    with study.connect():
        facts, state = _compute(study)
        payload = _payload(facts)
        study.after_close(lambda: _keep(study, payload, state))


def _keep(study: Study, payload: dict[str, Any], state: dict[str, Any]) -> None:
    from mcqaudit.store import infocache

    infocache.save(study.path, infocache.stamp(study.path), payload, state)


@contextlib.contextmanager
def reviews_changing(study: Study, con: Any, row_ids: Sequence[str]) -> Iterator[None]:
    """Around the statement that re-derives the effective review of ``row_ids`` inside a write
    (:meth:`Study.write`) that changes nothing else ``info`` reads: keeps ``info``'s cache up to date.

    When the cache holds the study as this write's connection found it, the counts of the items of those
    rows are read before and after the statement (every count beneath ``info`` is a sum over items, and a
    review changes only its row's final verdict, picked letter and review), and the cache's counts less the
    first plus the second, with the flags and the verdicts table made from them, are kept once the write has
    committed and its connection closed, with the file's stamp then. Anything else (no cache, another
    state, a write that fails) keeps nothing: the study's stamp no longer matches, and ``info`` computes."""
    from mcqaudit.store import infocache

    kept = infocache.load_state(study.path, study.opened_stamp)
    if kept is None or not row_ids:
        yield
        return
    from mcqaudit.metrics.facts import quick_flags
    from mcqaudit.store.facts import apply_review, counts_of, raw_counts, scope_of, state_facts
    from mcqaudit.store.summary import merge_verdicts, verdict_rows

    payload, state = kept
    raw = state["facts"]
    f = state_facts(raw)
    scope = scope_of(con, row_ids)
    before = raw_counts(con, f, scope, raw["names"]), verdict_rows(con, scope.items)
    yield
    after = raw_counts(con, f, scope, raw["names"]), verdict_rows(con, scope.items)
    new_raw = apply_review(raw, before[0], after[0])
    verdicts = merge_verdicts(state["verdicts"], after[1], before[1])
    flags, unchecked = quick_flags(counts_of(new_raw))
    payload["summary"]["verdicts"]["rows"] = verdicts
    payload["flags"], payload["unchecked"] = flags, list(unchecked)
    study.after_close(lambda: _keep(study, payload, {"facts": new_raw, "verdicts": verdicts}))


def info_json(study: str | Path | Study | InfoFacts) -> dict[str, Any]:
    """``mcqaudit info --json``: the study's facts, its judge fingerprints and their usage (``judge_usage``:
    ``{fingerprint: {"prompt_tokens", "completion_tokens", "requests", "requests_without_usage", ...}}``)."""
    f = study if isinstance(study, InfoFacts) else info_facts(study)
    s = f.summary
    return {
        "path": str(s.path),
        "created": s.created,
        "rows": s.rows,
        "items": s.items,
        "arms": s.arms,
        "control_arm": s.control_arm,
        "unaudited": s.unaudited,
        "orientations": s.orientations,
        "rejected_rows": s.rejected_total,
        "judge_fingerprints": f.fingerprints,
        "judge_usage": f.usage,
    }
