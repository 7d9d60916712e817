"""Reports kept beside the study (:mod:`mcqaudit.store.reportcache`): a report asked again of an unchanged study
with the same options is read, not computed (``report`` in another format, ``check`` after ``report``, a
second ``report``). Light: no duckdb, numpy or metrics, so that a command answered from here imports none of
them. :func:`mcqaudit.app.report.build_report` looks here first and keeps what it computed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from mcqaudit.metrics.results import Report
    from mcqaudit.store.db import Study
    from mcqaudit.store.infocache import Stamp


def options_key(control: str | None, verdicts: str, n_boot: int, seed: int, ci: str, by: Sequence[str]) -> str:
    """What a report depends on besides the study file's content: its options. (And the path the study was
    named by, which the report says in ``study.path`` alone: set there on a hit, so that the command line
    and the dashboard, which may spell the path of one study differently, share its reports.)"""
    return json.dumps(
        {
            "control": control,
            "verdicts": verdicts,
            "n_boot": int(n_boot),
            "seed": int(seed),
            "ci": ci,
            "by": list(by),
        },
        sort_keys=True,
    )


def _path(study: str | Path | Study) -> Path | None:
    """The study's path when a report of it may be read from or kept in the cache: not for a study with an
    open connection in this process (what it wrote may not be in the file yet)."""
    if isinstance(study, str | Path):
        return Path(study)
    return None if study.connected else study.path


def cached_report(
    study: str | Path | Study,
    control: str | None = None,
    verdicts: str = "final",
    n_boot: int = 2000,
    seed: int = 0,
    ci: str = "auto",
    by: Sequence[str] = (),
) -> Report | None:
    """The report these options gave on the study file as it is now, when one was kept (None: compute it).
    Never while a journal waits beside the study (opening it for writing would change it first)."""
    from mcqaudit.store import reportcache
    from mcqaudit.store.sidecars import journal_dir

    path = _path(study)
    if path is None or journal_dir(path).is_dir():
        return None
    hit = reportcache.load(path, options_key(control, verdicts, n_boot, seed, ci, by))
    if hit is None:
        return None
    report = cast("Report", hit)
    report["study"]["path"] = str(path)
    return report


def stamp_before_reading(study: Study) -> Stamp | None:
    """The opened study's stamp, taken before its report is read from it (None: it may not be kept)."""
    from mcqaudit.store import infocache

    return None if _path(study) is None else infocache.stamp(study.path)


def keep_report(
    study: Study,
    taken: Stamp | None,
    report: Report,
    control: str | None,
    verdicts: str,
    n_boot: int,
    seed: int,
    ci: str,
    by: Sequence[str],
) -> None:
    """Keep ``report``, read from the study at stamp ``taken``, unless the file changed since."""
    from mcqaudit.store import reportcache

    if taken is None or _path(study) is None:
        return
    key = options_key(control, verdicts, n_boot, seed, ci, by)
    reportcache.save(study.path, taken, key, cast("dict[str, Any]", report))
