"""The report use case: study → frames → metrics → report dict (docs/design.md §7).

It opens the study (:mod:`mcqaudit.store`), loads its frames, runs :func:`mcqaudit.metrics.compute` and hands
the results to :mod:`mcqaudit.report`, which writes the findings and renders. ``mcqaudit report`` and the
dashboard call :func:`build_report` (or :func:`report_from_frames` on frames they already hold).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

from mcqaudit import __version__
from mcqaudit.metrics import CI_LEVEL, StudyFrames, compute, sort_flags
from mcqaudit.metrics.accuracy import fingerprint_conflicts
from mcqaudit.metrics.groups import by_group
from mcqaudit.metrics.results import FingerprintUse, Flag, GroupArm, GroupFacts, Notes, Report
from mcqaudit.metrics.rules import MAX_GROUPS, ci_method
from mcqaudit.native import fast_arrays
from mcqaudit.report import SCHEMA_VERSION, findings
from mcqaudit.vocab import VERDICT_VIEWS

if TYPE_CHECKING:
    from mcqaudit.store.db import Study
    from mcqaudit.vocab import VerdictView


def open_study(study: str | Path | Study) -> Study:
    """An open :class:`~mcqaudit.store.db.Study` for a path (or the one given), through
    :func:`mcqaudit.app.study.open_study` (a writable open replays the journal first, as every open did)."""
    from mcqaudit.app.study import open_study as _open

    return _open(study)


def verdict_view(value: str) -> VerdictView:
    """``final`` or ``judge`` (the verdicts a report reads, docs/design.md §7); ``ValueError`` otherwise."""
    for view in VERDICT_VIEWS:
        if value == view:
            return view
    raise ValueError(f"verdicts must be final or judge, not {value!r}")


GROUP_PREFIX = "metadata."


class GroupByError(ValueError):
    """``--by`` names no metadata key the study's rows have, or is not ``metadata.KEY`` (a usage error)."""


def group_keys(by: Sequence[str]) -> list[str]:
    """The metadata keys of ``--by metadata.KEY`` options, each once; :class:`GroupByError` for another form."""
    keys: list[str] = []
    for spec in by:
        key = spec[len(GROUP_PREFIX) :] if spec.startswith(GROUP_PREFIX) else ""
        if not key:
            raise GroupByError(f"--by must be metadata.KEY (e.g. metadata.topic), not {spec!r}")
        if key not in keys:
            keys.append(key)
    return keys


def metadata_keys(study: str | Path | Study) -> list[str]:
    """The top-level keys of the study's row (and item) metadata: what ``--by metadata.KEY`` can name."""
    from mcqaudit.store.frames import metadata_keys as _keys

    return _keys(open_study(study))


def load_frames(
    study: str | Path | Study, verdicts: VerdictView = "final", by: Sequence[str] = (), *, defer: bool = False
) -> StudyFrames:
    """The study's frames in the ``final`` or ``judge`` verdict view (:mod:`mcqaudit.store.frames`); with
    ``by`` (metadata keys, bare), each row's value of each key too. A key no row has is a
    :class:`GroupByError` that names the keys the study's metadata does have. ``defer``: see
    :func:`mcqaudit.store.frames.load_frames` (inside ``study.connect()`` only)."""
    from mcqaudit.store.frames import load_frames as _load

    opened = open_study(study)
    frames = _load(opened, verdicts, by, defer=defer)
    try:
        _check_groups(opened, frames, by)
    except BaseException:
        with contextlib.suppress(Exception):
            frames.ready()  # a deferred read is done before the caller's connection closes
        raise
    return frames


def _check_groups(opened: Study, frames: StudyFrames, by: Sequence[str]) -> None:
    unknown = [k for k in by if not frames.groups[k].labels]
    if unknown:
        have = metadata_keys(opened)
        raise GroupByError(
            f"--by metadata.{unknown[0]}: no row's metadata has the key {unknown[0]!r}; "
            + (
                f"the study's metadata has: {', '.join(have)}"
                if have
                else "the study's rows carry no metadata"
            )
        )
    for k in by:
        if (n := len(frames.groups[k].labels)) > MAX_GROUPS:
            raise GroupByError(
                f"--by metadata.{k}: {n:,} distinct values; results by group take at most {MAX_GROUPS} (a "
                "subject, a task or a difficulty, not an id)"
            )


def build_report(
    study: str | Path | Study,
    control: str | None = None,
    verdicts: VerdictView = "final",
    n_boot: int = 2000,
    seed: int = 0,
    ci: str = "auto",
    by: Sequence[str] = (),
) -> Report:
    """The report dict of a study file (path or open :class:`~mcqaudit.store.db.Study`). ``ci``: how the CIs
    are computed (``auto``: the item bootstrap, from ``rules.NORMAL_MIN_ITEMS`` items its normal approximation).
    ``by``: ``metadata.KEY`` specs (``report --by``): the report gains ``by_group`` and ``group_by``.

    A report these options gave on the study file as it is now is read from the reports' cache beside it
    (:mod:`mcqaudit.app.report_cache`); else it is computed and kept there (:func:`computed_report`)."""
    from mcqaudit.app.report_cache import cached_report

    hit = cached_report(study, control, verdicts, n_boot, seed, ci, by)
    return hit if hit is not None else computed_report(study, control, verdicts, n_boot, seed, ci, by)


def computed_report(
    study: str | Path | Study,
    control: str | None = None,
    verdicts: VerdictView = "final",
    n_boot: int = 2000,
    seed: int = 0,
    ci: str = "auto",
    by: Sequence[str] = (),
) -> Report:
    """:func:`build_report` computed (the cache not looked at: the caller just did), and kept in the cache."""
    return computed_report_and_frames(study, control, verdicts, n_boot, seed, ci, by)[0]


def computed_report_and_frames(
    study: str | Path | Study,
    control: str | None = None,
    verdicts: VerdictView = "final",
    n_boot: int = 2000,
    seed: int = 0,
    ci: str = "auto",
    by: Sequence[str] = (),
) -> tuple[Report, StudyFrames]:
    """:func:`report_and_frames`, the report kept in the cache beside the study (the dashboard counts verdicts
    off the frames)."""
    from mcqaudit.app import report_cache

    opened = open_study(study)
    taken = report_cache.stamp_before_reading(opened)
    report, frames = report_and_frames(opened, control, verdicts, n_boot, seed, ci, by)
    report_cache.keep_report(opened, taken, report, control, verdicts, n_boot, seed, ci, by)
    return report, frames


def report_and_frames(
    study: str | Path | Study,
    control: str | None = None,
    verdicts: VerdictView = "final",
    n_boot: int = 2000,
    seed: int = 0,
    ci: str = "auto",
    by: Sequence[str] = (),
) -> tuple[Report, StudyFrames]:
    """:func:`build_report`, and the frames it was computed from (the dashboard counts verdicts off them).

    The metrics start on the rows while the frames beside them (framework letters, log-probs, panel,
    reviewers) are still being read on the connection's second cursor; the connection closes as soon as
    those are read, not when the report is done, so that a writer waits no longer than the reads."""
    keys = group_keys(by)
    opened = open_study(study)
    with fast_arrays(), ThreadPoolExecutor(1) as pool:
        with opened.connect():
            frames = load_frames(opened, verdicts, keys, defer=True)
            report = pool.submit(report_from_frames, frames, control=control, n_boot=n_boot, seed=seed, ci=ci)
            frames.ready()
        told = _frames_read.get()
        if told is not None:
            told()
        return report.result(), frames


_frames_read: ContextVar[Callable[[], None] | None] = ContextVar("mcqaudit_frames_read", default=None)


@contextlib.contextmanager
def on_frames_read(tell: Callable[[], None]) -> Iterator[None]:
    """Within the block, :func:`report_and_frames` calls ``tell`` (in its own thread) once it has read the
    frames and closed its connection, before the metrics are done: the dashboard's page reads then go to the
    file, instead of racing the report's own read for it."""
    token = _frames_read.set(tell)
    try:
        yield
    finally:
        _frames_read.reset(token)


def report_from_frames(
    frames: StudyFrames, control: str | None = None, n_boot: int = 2000, seed: int = 0, ci: str = "auto"
) -> Report:
    """The report dict from already loaded frames (pure: metrics, then the study's facts and the findings)."""
    info = frames.info
    method = ci_method(info.n_items, n_boot, ci)
    with fast_arrays():
        res = compute(frames, control=control, n_boot=n_boot, seed=seed, ci=method)
    used = {fp for fps in info.arm_fingerprints.values() for fp in fps}
    fingerprints: dict[str, FingerprintUse] = {}
    for fp in sorted(used):
        cfg = info.judge_configs.get(fp, {})
        fingerprints[fp] = {
            "model": cfg.get("model"),
            "shape": cfg.get("shape"),
            "temperature": cfg.get("temperature"),
            "standin": bool(cfg.get("standin", False)),
            "arms": [a for a in info.arms if fp in info.arm_fingerprints.get(a, {})],
            "rows": sum(info.arm_fingerprints.get(a, {}).get(fp, 0) for a in info.arms),
        }
    report: Report = {
        "schema_version": SCHEMA_VERSION,
        "mcqaudit_version": __version__,
        "study": {
            "path": info.path,
            "created": info.created,
            "unaudited": info.unaudited,
            "standin_judge": any(v["standin"] for v in fingerprints.values()),
            "verdicts": frames.verdicts,
            "items": info.n_items,
            "orientations": info.orientations,
            "parsers": info.parsers,
            "reviews": info.n_reviews,
        },
        "arms": info.arms,
        "control_arm": res["control_arm"],
        "control_source": res["control_source"],
        "rows": sum(info.rows_by_arm.values()),
        "rows_by_arm": info.rows_by_arm,
        "pending_by_arm": info.pending_by_arm,
        "judge_fingerprints": fingerprints,
        "bootstrap": {
            "resamples": int(n_boot),
            "seed": int(seed),
            "unit": "item",
            "ci_level": CI_LEVEL,
            "method": method,
        },
        "findings": [],
        "flags": sort_flags(res["flags"]),
        "metrics": res["metrics"],
        "delta_accuracy": res["delta_accuracy"],
        "delta_accuracy_by_parser": res["delta_accuracy_by_parser"],
        "pairwise_delta": res["pairwise_delta"],
        "judge_agreement": res["judge_agreement"],
        "judge_panel": res.get("judge_panel"),
        "reviewer_agreement": res.get("reviewer_agreement"),
        "design": res["design"],
        "audit": res["audit"],
        "notes": dict(sorted(res["notes"].items())),
    }
    if frames.groups:
        notes: Notes = {}
        report["by_group"], report["group_by"] = groups_of(
            frames, res["control_arm"], notes, n_boot, seed, ci
        )
        report["notes"] = dict(sorted({**report["notes"], **notes}.items()))
    report["findings"] = findings(report)
    return report


def groups_of(
    frames: StudyFrames,
    control: str | None,
    notes: Notes,
    n_boot: int = 2000,
    seed: int = 0,
    ci: str = "auto",
) -> tuple[dict[str, dict[str, dict[str, GroupArm]]], dict[str, GroupFacts]]:
    """``by_group`` and ``group_by`` for every key the frames carry (:func:`mcqaudit.metrics.groups.by_group`),
    against ``control`` (the report's control arm); the dashboard's Group by select calls this alone."""
    conflicts = fingerprint_conflicts(frames.info, control)
    out: dict[str, dict[str, dict[str, GroupArm]]] = {}
    facts: dict[str, GroupFacts] = {}
    with fast_arrays():
        for key, grouping in frames.groups.items():
            out[key], facts[key] = by_group(frames, grouping, control, conflicts, notes, n_boot, seed, ci)
    return out, facts


def flags_for(study: str | Path | Study, n_boot: int = 500, seed: int = 0) -> list[Flag]:
    """The report's flags, most important first, from a bootstrap of ``n_boot`` resamples."""
    return build_report(study, n_boot=n_boot, seed=seed)["flags"]
