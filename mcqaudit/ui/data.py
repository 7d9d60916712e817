"""Cached access to the study file for the dashboard.

One :class:`~mcqaudit.store.db.Study` per path (``st.cache_resource``); it opens a short-lived connection
per query, so a ``grade`` run or another dashboard can take the file between queries (docs/design.md §6).

Loaders are ``st.cache_data`` functions keyed by (path, version, arguments). The version is the study
file's and its WAL's (mtime, size): every write — this session's, another session's, a ``grade`` process's —
changes it (DuckDB checkpoints on close), reads never do, so a page always shows the file as it is and a
cached page costs a ``stat``. After a write of its own, the dashboard also clears exactly the loaders that
write made stale (see :data:`STALE_AFTER`), so their memory goes at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from mcqaudit.app import reviews as rv
from mcqaudit.app import rows as rw
from mcqaudit.app.study import Study, StudyError
from mcqaudit.metrics.inputs import StudyFrames
from mcqaudit.metrics.results import Report
from mcqaudit.review.filters import RowFilter
from mcqaudit.vocab import VerdictCode

Version = tuple[tuple[int, int] | None, ...]

BOOTSTRAP_ENV = "MCQAUDIT_DASHBOARD_BOOTSTRAP"
DEFAULT_BOOTSTRAP = 2000  # as `mcqaudit report`, so the dashboard and the report show the same CIs
SEED = 0


def bootstrap() -> int:
    """Bootstrap resamples for the dashboard's CIs (``MCQAUDIT_DASHBOARD_BOOTSTRAP``, default 2000)."""
    try:
        return max(0, int(os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP)))
    except ValueError:
        return DEFAULT_BOOTSTRAP


@st.cache_resource(show_spinner=False)
def get_study(path: str) -> Study:
    from mcqaudit.app.study import open_study

    return open_study(path)


def read_only(path: str) -> bool:
    """The study file cannot be written (file, folder or disk): every page reads, nothing can be saved."""
    return bool(get_study(path).read_only)


def study_version(path: str) -> Version:
    """(mtime_ns, size) of the study file and of its WAL (None when absent)."""
    out: list[tuple[int, int] | None] = []
    for p in (path, path + ".wal"):
        try:
            s = os.stat(p)
            out.append((s.st_mtime_ns, s.st_size))
        except FileNotFoundError:
            out.append(None)
    return tuple(out)


# --- loaders ----------------------------------------------------------------------------------------------
@st.cache_data(show_spinner="Computing metrics and confidence intervals…", max_entries=8)
def analysis(
    path: str, version: Version, n_boot: int, control: str | None = None, verdicts: str = "final"
) -> tuple[Report, pd.DataFrame]:
    """The report and the verdict counts per arm and orientation, from one read of the study's frames:
    one cached entry per (study version, resamples, control, verdict view), shared by every page.

    The report these options gave on the study as it is now, when kept beside it (a ``mcqaudit report``
    with the same options, or this dashboard earlier: :mod:`mcqaudit.app.report_cache`), is read instead,
    the final verdicts' counts then from one GROUP BY; one computed here is kept there."""
    from mcqaudit.app.report import computed_report_and_frames, verdict_view
    from mcqaudit.app.report_cache import cached_report

    study = get_study(path)
    if verdicts == "final" and (hit := cached_report(study, control, verdicts, n_boot, SEED)) is not None:
        return hit, rw.verdict_counts(study)
    rep, frames = computed_report_and_frames(study, control, verdict_view(verdicts), n_boot, SEED)
    return rep, counts_of(frames)


def report(path: str, version: Version, n_boot: int, control: str | None = None) -> Report:
    return _analysis(path, version, n_boot, control)[0]


def _analysis(path: str, version: Version, n_boot: int, control: str | None) -> tuple[Report, pd.DataFrame]:
    """:func:`analysis` with every argument spelt out: ``st.cache_data`` keys an entry by the arguments as
    passed (a default left out is another key), so every caller reaches the same entry this way."""
    return analysis(path, version, n_boot, control, "final")


# How long the sidebar's and the page's first reads wait for the report's own read of the study (they wait for
# the file all the same while that read holds it); past this they go to the file and wait there.
FRAMES_WAIT_S = 60.0


def start_analysis(path: str) -> threading.Event:
    """Start :func:`analysis` (what every page but Review shows) for the study as it is now, in a thread, so
    that the sidebar's and the page's own reads run beside its metrics instead of before or after them; the
    page's call (:func:`report`) then waits for that computation (Streamlit's per-entry compute lock) and
    shows its spinner meanwhile, or finds the entry cached. Cached already: the thread only reads the entry
    back. Returns an event set once the report has read what it reads of the study (or is done): the reads
    that follow (:func:`first_reads`) start then, so the report's read, which everything else waits for, has
    the file first. While one session's analysis of the study as it is runs, another session's page gets that
    analysis's event (a second thread would wait on the entry's compute lock, and so its event on the whole
    computation, not on its read)."""
    key = (path, study_version(path), bootstrap())
    with _RUNNING_LOCK:
        read = _RUNNING.get(key)
        if read is not None:
            return read
        read = _RUNNING[key] = threading.Event()
    threading.Thread(target=_warm_analysis, args=(*key, read), name="mcqaudit-analysis", daemon=True).start()
    return read


# the analyses under way (:func:`start_analysis`), by (path, version, resamples): each one's "read" event
_RUNNING: dict[tuple[str, Version, int], threading.Event] = {}
_RUNNING_LOCK = threading.Lock()


def _warm_analysis(path: str, version: Version, n_boot: int, read: threading.Event) -> None:
    # as if nested in a cached function: no spinner drawn from this thread (it has no script context); the
    # page shows its own while it waits for this entry
    from streamlit.runtime.scriptrunner_utils.script_run_context import in_cached_function

    from mcqaudit.app.report import on_frames_read

    in_cached_function.set(True)
    try:
        # an error is the page's to show: its own call computes the entry again and raises it there
        with contextlib.suppress(Exception), on_frames_read(read.set):
            _analysis(path, version, n_boot, None)
    finally:
        read.set()
        with _RUNNING_LOCK:
            _RUNNING.pop((path, version, n_boot), None)


def first_reads(path: str, reads: Sequence[Callable[[str, Version], object]] = ()) -> None:
    """The sidebar's reads (the arms, the control arm) and ``reads``, a page's own first ones, in one open of
    the study file (:meth:`~mcqaudit.store.db.Study.one_open`: none when every one is cached). Each open costs
    ~10 ms of CPU, taken from the report's metrics that run beside these reads."""
    v = study_version(path)
    with get_study(path).one_open():
        choices(path, v)
        control(path, v)
        for read in reads:
            read(path, v)


def counts_of(frames: StudyFrames) -> pd.DataFrame:
    """Rows, CORRECT, INCORRECT, OTHER and ungraded rows per arm and orientation of the frames' verdict view,
    in arm then orientation order — what :func:`mcqaudit.store.rows.verdict_counts` reads off
    ``graded_rows`` (final verdicts), counted from the frames the report already loaded."""
    import numpy as np

    from mcqaudit.metrics.cells import code_col, code_counts
    from mcqaudit.metrics.inputs import column

    info = frames.info
    n_or = max(len(info.orientations), 1)
    key = column(frames.rows, "ai").astype(np.int64) * n_or + column(frames.rows, "oi")
    by = code_counts(key, column(frames.rows, "verdict"), len(info.arms) * n_or)
    rows = by.sum(axis=1)
    keep = np.flatnonzero(rows)
    return pd.DataFrame(
        {
            "arm": [info.arms[g // n_or] for g in keep],
            "orientation": [info.orientations[g % n_or] for g in keep],
            "rows": rows[keep],
            "correct": by[keep, code_col(VerdictCode.CORRECT)],
            "incorrect": by[keep, code_col(VerdictCode.INCORRECT)],
            "other": by[keep, code_col(VerdictCode.OTHER)],
            "ungraded": by[keep, code_col(VerdictCode.NONE)],
        }
    )


@st.cache_data(show_spinner=False, max_entries=8)
def meta(path: str, version: Version) -> dict[str, str | None]:
    return dict(get_study(path).query("SELECT key, value FROM study_meta"))


@st.cache_data(show_spinner=False, max_entries=8)
def control(path: str, version: Version) -> tuple[str | None, str]:
    """(the control arm, how it was chosen), as the report resolves it (docs/design.md §7)."""
    from mcqaudit.metrics import resolve_control

    return resolve_control(choices(path, version)["arms"], None, meta(path, version).get("control_arm"))


@st.cache_data(show_spinner=False, max_entries=8)
def choices(path: str, version: Version) -> dict[str, list[str]]:
    return rw.study_choices(get_study(path))


@st.cache_data(show_spinner=False, max_entries=64)
def row_count(path: str, version: Version, filter_json: str) -> int:
    return rw.count_rows(get_study(path), RowFilter.from_dict(json.loads(filter_json)))


@st.cache_data(show_spinner=False, max_entries=64)
def row_page(path: str, version: Version, filter_json: str, limit: int, offset: int) -> pd.DataFrame:
    return rw.list_rows(
        get_study(path), RowFilter.from_dict(json.loads(filter_json)), limit=limit, offset=offset
    )


@st.cache_data(show_spinner=False, max_entries=64)
def review_panel(path: str, version: Version, filter_json: str, row_id: str) -> rw.ReviewPanel:
    return rw.review_panel(get_study(path), RowFilter.from_dict(json.loads(filter_json)), row_id)


# session state: (version, filter_json, row_id, ReviewPanel) that a save read for the row shown next
PREFETCH = "review_panel_prefetch"


def panel(path: str, version: Version, filter_json: str, row_id: str) -> rw.ReviewPanel:
    """:func:`review_panel`, or the panel that this session's last save read for this row in the save's own
    connection (see :func:`add_review`), when the file is still at the version it left."""
    pre = st.session_state.pop(PREFETCH, None)
    if pre is not None and pre[:3] == (version, filter_json, row_id):
        return pre[3]  # type: ignore[no-any-return]
    return review_panel(path, version, filter_json, row_id)


@st.cache_data(show_spinner=False, max_entries=64)
def row_at(path: str, version: Version, filter_json: str, position: int) -> str | None:
    return rw.row_at(get_study(path), RowFilter.from_dict(json.loads(filter_json)), position)


@st.cache_data(show_spinner=False, max_entries=64)
def next_unreviewed(path: str, version: Version, queue_id: int, after: str | None) -> str | None:
    return rw.next_unreviewed(get_study(path), queue_id, after)


@st.cache_data(show_spinner=False, max_entries=8)
def queue_progress(path: str, version: Version) -> pd.DataFrame:
    return rv.spot_check_progress(get_study(path))


def verdict_counts(path: str, version: Version) -> pd.DataFrame:
    """Final-verdict counts per arm and orientation: the cached analysis's (no second scan of the study)."""
    return _analysis(path, version, bootstrap(), None)[1]


@st.cache_data(show_spinner=False, max_entries=8)
def queues(path: str, version: Version) -> pd.DataFrame:
    return rv.spot_checks(get_study(path))


@st.cache_data(show_spinner=False, max_entries=8)
def review_counts(path: str, version: Version) -> dict[str, int]:
    return rv.review_counts(get_study(path))


@st.cache_data(show_spinner=False, max_entries=8)
def first_reviewers(path: str, version: Version) -> dict[str, int]:
    return rv.first_reviewers(get_study(path))


def filter_json(f: RowFilter) -> str:
    return json.dumps(f.as_dict(), sort_keys=True)


def rows(path: str, f: RowFilter, limit: int, offset: int) -> tuple[pd.DataFrame, int]:
    v = study_version(path)
    key = filter_json(f)
    return row_page(path, v, key, limit, offset), row_count(path, v, key)


def page_of(path: str, f: RowFilter, limit: int, offset: int) -> pd.DataFrame:
    """One page of the list ``f`` without its length (a page that knows the length from the report's counts)."""
    return row_page(path, study_version(path), filter_json(f), limit, offset)


# --- exports (made on demand, never cached: they can be large) ------------------------------------------------
def export_rows(path: str, fmt: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / f"rows.{fmt}")
        rw.export_rows(get_study(path), out, fmt)
        return Path(out).read_bytes()


def review_log_csv(path: str) -> str:
    return rv.review_log_csv(get_study(path))


# --- writes ---------------------------------------------------------------------------------------------
# What each kind of write makes stale. A review changes verdicts (rows, details, the report, queue progress,
# counts); a spot check changes queues and the report (uniform spot-check rows feed judge agreement and the
# parser_disagreement flag); the control arm changes only the report and the study settings.
_AFTER_REVIEW: tuple[Callable[..., Any], ...] = (
    analysis,
    review_panel,
    row_count,
    row_page,
    row_at,
    next_unreviewed,
    queues,
    queue_progress,
    review_counts,
    first_reviewers,
)
STALE_AFTER: dict[str, tuple[Callable[..., Any], ...]] = {
    "review": _AFTER_REVIEW,
    "spot_check": (
        analysis,
        review_panel,
        queues,
        queue_progress,
        row_count,
        row_page,
        row_at,
        next_unreviewed,
    ),
    "control": (analysis, meta, control),
    "import": _AFTER_REVIEW,
}


def _stale(kind: str) -> None:
    for loader in STALE_AFTER[kind]:
        loader.clear()  # type: ignore[attr-defined]


def add_review(path: str, row_id: str, *, then: tuple[str, str] | None = None, **kw: Any) -> int:
    """Save a review. With ``then`` = (filter_json, row_id of the row to show next), that row's panel is read
    in the save's own connection, after its commit (one open of the file for the whole action), and kept
    for :func:`panel` with the version the file has once the connection is closed."""
    st.session_state.pop(PREFETCH, None)
    study = get_study(path)
    try:
        with study.connect():
            rid = rv.add_review(study, row_id, **kw)
            nxt = None
            if then is not None:
                try:
                    nxt = rw.review_panel(study, RowFilter.from_dict(json.loads(then[0])), then[1])
                except StudyError:  # the next row is read again by the panel's loader
                    nxt = None
        if nxt is not None:
            st.session_state[PREFETCH] = (study_version(path), then[0], then[1], nxt)  # type: ignore[index]
        return rid
    finally:
        _stale("review")


def retract_review(path: str, review_id: int, **kw: Any) -> int:
    try:
        return rv.retract_review(get_study(path), review_id, **kw)
    finally:
        _stale("review")


def create_spot_check(path: str, **kw: Any) -> rv.SpotCheck:
    try:
        return rv.create_spot_check(get_study(path), **kw)
    finally:
        _stale("spot_check")


def rename_spot_check(path: str, queue_id: int, name: str) -> None:
    try:
        rv.rename_spot_check(get_study(path), queue_id, name)
    finally:
        _stale("spot_check")


def delete_spot_check(path: str, queue_id: int, *, deleted_by: str | None) -> None:
    try:
        rv.delete_spot_check(get_study(path), queue_id, deleted_by=deleted_by)
    finally:
        _stale("spot_check")


def set_control(path: str, arm: str) -> None:
    try:
        get_study(path).set_meta("control_arm", arm)
    finally:
        _stale("control")


def import_review_log(path: str, log_path: str, origin: str, reviewer: str | None = None) -> rv.ImportResult:
    try:
        return rv.import_review_log(get_study(path), log_path, origin=origin, reviewer=reviewer)
    finally:
        _stale("import")
