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

import atexit
import contextlib
import dataclasses
import threading
import time
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
    "keep_pending",
    "refresh",
    "refresh_here",
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
    from concurrent.futures import ThreadPoolExecutor, wait

    from mcqaudit.metrics.facts import quick_flags
    from mcqaudit.store.facts import counts_of, raw_counts
    from mcqaudit.store.frames import study_facts

    def beside(cursor: Any) -> tuple[StudySummary, list[FingerprintSummary], dict[str, JudgeUsage], BatchOverview]:
        with study.on_cursor(cursor):
            return summary(study), fingerprints(study), judge_usage(study), batch_overview(study)

    # the summary, fingerprints, usage and batches on a second cursor, beside the flags' counts on this one
    # (each is a few small queries: DuckDB runs them on both cores at once)
    with study.connect() as con, ThreadPoolExecutor(1) as pool:
        side = pool.submit(beside, con.cursor())
        try:
            raw = raw_counts(con, study_facts(con))
        finally:
            wait([side])  # the second cursor is done before the connection closes
        s, fps, usage, batches = side.result()
    flags, unchecked = quick_flags(counts_of(raw))
    facts = InfoFacts(
        path=study.path,
        summary=s,
        flags=flags,
        unchecked=unchecked,
        fingerprints=[{**f, "first_used": f["first_used"].isoformat() if f["first_used"] else None} for f in fps],
        usage=usage,
        batches=batches,
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
    if _chains:
        keep_pending(path)  # reviews this process wrote: kept first
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
    from it at once. A study that is read-only, or a folder that cannot be written, keeps none; so does one
    that cannot be opened again now (locked for too long: a :class:`StudyError`, which the write before it
    does not fail for), and ``info`` computes it then."""
    from mcqaudit.store.db import StudyError

    if study.read_only or study.connected:  # nested: what the caller writes after would not be in it
        return
    with contextlib.suppress(StudyError), study.connect():
        refresh_here(study)


def refresh_here(study: Study) -> None:
    """:func:`refresh` in the connection this thread has open, for a caller that writes nothing more in it
    (a grade run's last write, once committed: one open of the file instead of two). Computed now, kept once
    that connection has closed (the file lock still held), under the stamp the file then has."""
    if study.read_only:
        return
    facts, state = _compute(study)
    payload = _payload(facts)
    study.after_close(lambda: _keep(study, payload, state))


def _keep(
    study: Study, payload: dict[str, Any], state: dict[str, Any], taken: list[Any] | None = None
) -> None:
    from mcqaudit.store import infocache

    infocache.save(study.path, infocache.stamp(study.path) if taken is None else taken, payload, state)


# --- a review keeps the cache: deferred ---------------------------------------------------------------------
#
# A review (confirm, override, retraction) changes the effective review of its rows and nothing else `info`
# reads. Its write only notes, in its own transaction, the effective reviews its rows had (one small read), and
# once it has committed and its connection closed, the file's stamp: a *chain* of such writes on one study,
# each found the file as the one before left it (no other write in between). A while after the last of them
# (:data:`KEEP_AFTER_S`: the review flow is not slowed by it), at this process's exit, or at an ``info`` in this
# process, the chain is *kept*: the counts of the items of its rows as they were (the noted reviews in place of
# theirs) and as they are now are read in one connection, and the cache's counts less the first plus the
# second are kept — only when the file is still as the chain's last write left it. Anything else leaves the
# cache stale by its stamp, and ``info`` computes.

KEEP_AFTER_S = 1.0  # kept once this process has left the study alone this long (a reviewer reading a row) ...
KEEP_WITHIN_S = 10.0  # ... or this long after the chain's first review at the latest


@dataclass
class _Chain:
    study: Study
    payload: dict[str, Any]
    state: dict[str, Any]
    last: list[Any] | None  # the file's stamp once the chain's last write closed (None: still in its write)
    since: float = dataclasses.field(default_factory=time.monotonic)  # when the chain began
    old: dict[str, tuple[Any, Any] | None] = dataclasses.field(default_factory=dict)  # row -> review before
    timer: threading.Timer | None = None


_chains: dict[str, _Chain] = {}
_chains_lock = threading.Lock()
_timers: set[threading.Thread] = set()  # started, perhaps keeping a chain now


def _key(path: Path) -> str:
    return str(Path(path).resolve())


@contextlib.contextmanager
def reviews_changing(study: Study, con: Any, row_ids: Sequence[str]) -> Iterator[None]:
    """Around the statement that re-derives the effective review of ``row_ids`` inside a review's write
    (:meth:`Study.write`): notes what the cache needs to follow it (see above)."""
    key = _key(study.path)
    opened = study.opened_stamp
    # the stamps that say the file is as this write found it: its own, and the one before this study's open
    # tidied the file (no data changed)
    found = [opened] + (
        [study.tidied[0]] if opened is not None and study.tidied and study.tidied[1] == opened else []
    )
    with _chains_lock:
        chain = _chains.get(key)
    if chain is not None and (opened is None or chain.last not in found):
        _drop(key, chain)  # another write came between: the chain cannot be kept
        chain = None
    if chain is None and opened is not None and row_ids:
        from mcqaudit.store import infocache

        kept = next(
            (k for k in (infocache.load_state(study.path, at) for at in found) if k is not None), None
        )
        if kept is not None:
            _load_for_keeping()
            chain = _Chain(study, kept[0], kept[1], opened)
            with _chains_lock:
                _chains[key] = chain
    if chain is None:
        yield
        return
    new = sorted(set(row_ids) - set(chain.old))
    if new:
        got = {
            r[0]: (r[1], r[2])
            for r in con.execute(
                "SELECT row_id, verdict, picked_letter FROM effective_reviews WHERE row_id IN "
                "(SELECT unnest(?::VARCHAR[]))",
                [new],
            ).fetchall()
        }
        for r in new:
            chain.old[r] = got.get(r)
    last, chain.last = chain.last, None  # until this write has committed and closed
    try:
        yield
    except BaseException:
        chain.last = last  # not written: the file is as the chain left it
        raise
    committed: list[Any] = []
    study.after_commit(lambda: committed.append(infocache_stamp(study.path)))
    study.after_close(lambda: _closed(key, chain, study, committed))


def infocache_stamp(path: Path) -> list[Any]:
    from mcqaudit.store.infocache import stamp

    return stamp(path)


def _closed(key: str, chain: _Chain, study: Study, committed: list[Any]) -> None:
    """The chain's write has closed: the chain goes on from the file as it is now, when nothing was committed in
    its connection after it (the stamp just before the close is the one its commit left)."""
    if not committed or study.closing_stamp != committed[0]:
        _drop(key, chain)
        return
    chain.study = study
    chain.last = infocache_stamp(study.path)
    _schedule(key, chain, KEEP_AFTER_S)


def _schedule(key: str, chain: _Chain, delay: float) -> None:
    with _chains_lock:
        if _chains.get(key) is not chain:
            return
        if chain.timer is not None:
            chain.timer.cancel()
        chain.timer = threading.Timer(delay, _when_idle, args=(key, chain))
        chain.timer.daemon = True
        _timers.add(chain.timer)
        chain.timer.start()


def _when_idle(key: str, chain: _Chain) -> None:
    """The timer: keep the chain once the process has left the study alone for :data:`KEEP_AFTER_S` (or the
    chain is :data:`KEEP_WITHIN_S` old), else look again then."""
    from mcqaudit.store.db import idle_s

    try:
        idle = idle_s(chain.study.path)
        late = time.monotonic() - chain.since >= KEEP_WITHIN_S
        if idle < KEEP_AFTER_S and not late:
            _schedule(
                key, chain, min(KEEP_AFTER_S - idle, KEEP_WITHIN_S - (time.monotonic() - chain.since)) + 0.01
            )
            return
        with _chains_lock:
            current = _chains.get(key) is chain
        if current:
            _keep_chain(key, chain)
    finally:
        _timers.discard(threading.current_thread())


def _drop(key: str, chain: _Chain) -> None:
    with _chains_lock:
        if _chains.get(key) is chain:
            del _chains[key]
        if chain.timer is not None:
            chain.timer.cancel()


def keep_pending(path: str | Path | None = None) -> None:
    """Keep the cache of the study at ``path`` (every study: None) after the reviews this process wrote since it
    was last kept (see above); nothing when the study has changed otherwise since."""
    with _chains_lock:
        keys = [_key(Path(path))] if path is not None else list(_chains)
    for key in keys:
        with _chains_lock:
            chain = _chains.get(key)
        if chain is not None:
            _keep_chain(key, chain)


def _keep_chain(key: str, chain: _Chain) -> None:
    study = chain.study
    if not study.path.exists():  # removed since: opening it would make a new, empty file
        _drop(key, chain)
        return
    try:
        with study.connect() as con:  # the study's gate and file lock: no review can extend the chain now
            with _chains_lock:
                if _chains.get(key) is not chain:
                    return
                del _chains[key]
                if chain.timer is not None:
                    chain.timer.cancel()
            if chain.last is None or study.opened_stamp != chain.last:
                return  # changed since the chain's last write (or that write never closed)
            payload, state = _kept_after_reviews(con, chain)
            last = chain.last
            study.after_close(lambda: _keep(study, payload, state, last))
    except Exception:  # noqa: BLE001 - in the background (a StudyError too): not kept, the cache stays stale by its stamp
        return


def _load_for_keeping() -> None:
    """Import now what keeping a chain reads, so that a chain kept at this process's exit finds it loaded:
    a module first imported then may not register its own exit work (``concurrent.futures`` cannot, once the
    interpreter is shutting down), and the chain would go unkept — as it did in a script that imported nothing
    else heavy (the review API alone) when pandas had stopped loading everything at its import."""
    import mcqaudit.metrics.facts
    import mcqaudit.store.facts
    import mcqaudit.store.frames
    import mcqaudit.store.summary  # noqa: F401


def _kept_after_reviews(con: Any, chain: _Chain) -> tuple[dict[str, Any], dict[str, Any]]:
    from mcqaudit.metrics.facts import quick_flags
    from mcqaudit.store.facts import (
        apply_review,
        counts_of,
        raw_counts,
        scoped_copies,
        state_facts,
        verdict_rows,
    )
    from mcqaudit.store.summary import merge_verdicts

    raw = chain.state["facts"]
    f = state_facts(raw)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE mcq_reviews_before (row_id VARCHAR, verdict VARCHAR, picked_letter VARCHAR)"
    )
    try:
        was = [(r, *v) for r, v in chain.old.items() if v is not None]
        if was:
            con.executemany("INSERT INTO mcq_reviews_before VALUES (?, ?, ?)", was)
        from mcqaudit.store.frames import sql_list

        before_reviews = (
            "(SELECT row_id, verdict, picked_letter FROM effective_reviews "
            f"WHERE row_id NOT IN {sql_list(sorted(chain.old))} "
            "UNION ALL SELECT row_id, verdict, picked_letter FROM mcq_reviews_before)"
        )
        with scoped_copies(con, list(chain.old)) as now:
            was_scope = dataclasses.replace(now, reviews=before_reviews)
            before = raw_counts(con, f, was_scope, raw["names"]), verdict_rows(con, was_scope)
            after = raw_counts(con, f, now, raw["names"]), verdict_rows(con, now)
    finally:
        con.execute("DROP TABLE IF EXISTS mcq_reviews_before")
    new_raw = apply_review(raw, before[0], after[0])
    verdicts = merge_verdicts(chain.state["verdicts"], after[1], before[1], chain.payload["summary"]["arms"])
    flags, unchecked = quick_flags(counts_of(new_raw))
    payload = chain.payload
    payload["summary"]["verdicts"]["rows"] = verdicts
    payload["flags"], payload["unchecked"] = flags, list(unchecked)
    return payload, {"facts": new_raw, "verdicts": verdicts}


def _at_exit() -> None:
    """At exit: no keeping is cut off inside DuckDB (a daemon thread stopped there aborts the process); the
    chains not kept yet are kept now."""
    for t in list(_timers):
        if isinstance(t, threading.Timer):
            t.cancel()
        if t.is_alive() and t is not threading.current_thread():
            t.join(timeout=60)
    keep_pending()


atexit.register(_at_exit)


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
