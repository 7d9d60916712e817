"""The report use case: study → frames → metrics → report dict (docs/design.md §7).

It opens the study (:mod:`mcqaudit.store`), loads its frames, runs :func:`mcqaudit.metrics.compute` and hands
the results to :mod:`mcqaudit.report`, which writes the findings and renders. ``mcqaudit report`` and the
dashboard call :func:`build_report` (or :func:`report_from_frames` on frames they already hold).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mcqaudit import __version__
from mcqaudit.metrics import CI_LEVEL, StudyFrames, compute, sort_flags
from mcqaudit.metrics.results import FingerprintUse, Flag, Report
from mcqaudit.metrics.rules import ci_method
from mcqaudit.native import fast_arrays
from mcqaudit.report import SCHEMA_VERSION, findings

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
    views: dict[str, VerdictView] = {"final": "final", "judge": "judge"}
    if value not in views:
        raise ValueError(f"verdicts must be final or judge, not {value!r}")
    return views[value]


def load_frames(study: str | Path | Study, verdicts: VerdictView = "final") -> StudyFrames:
    """The study's frames in the ``final`` or ``judge`` verdict view (:mod:`mcqaudit.store.frames`)."""
    from mcqaudit.store.frames import load_frames as _load

    return _load(open_study(study), verdicts)


def build_report(
    study: str | Path | Study,
    control: str | None = None,
    verdicts: VerdictView = "final",
    n_boot: int = 2000,
    seed: int = 0,
    ci: str = "auto",
) -> Report:
    """The report dict of a study file (path or open :class:`~mcqaudit.store.db.Study`). ``ci``: how the CIs
    are computed (``auto``: the item bootstrap, from ``rules.NORMAL_MIN_ITEMS`` items its normal approximation)."""
    with fast_arrays():
        frames = load_frames(study, verdicts)
        return report_from_frames(frames, control=control, n_boot=n_boot, seed=seed, ci=ci)


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
    report["findings"] = findings(report)
    return report


def flags_for(study: str | Path | Study, n_boot: int = 500, seed: int = 0) -> list[Flag]:
    """The report's flags, most important first, from a bootstrap of ``n_boot`` resamples."""
    return build_report(study, n_boot=n_boot, seed=seed)["flags"]
