"""The study as data for a notebook or a script (README "Python API"): open a study file read-only and read
its rows into pandas.

Reads only. :func:`read_study` never writes to the file (no migration, no journal replay: replies that a
killed ``grade`` run left in the journal beside it count once a command that writes has opened it, as
``mcqaudit info`` says), so it works on a study shared read-only and beside a dashboard. The report dict is
:func:`mcqaudit.app.report.build_report`, the CI gate :func:`mcqaudit.app.check.check`, the export
:func:`mcqaudit.app.rows.export_rows`; each takes the :class:`~mcqaudit.store.db.Study` returned here.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from mcqaudit.store import export
from mcqaudit.store.db import Study

__all__ = ["Study", "graded_rows", "read_study"]


def read_study(path: str | Path) -> Study:
    """The study file at ``path``, opened read-only: every read works on it (``graded_rows``,
    ``build_report``, ``load_frames``), a write raises :class:`~mcqaudit.store.db.StudyReadOnly`.

    Raises :class:`~mcqaudit.store.db.StudyError` (one line) for a missing file, a file that is not a study,
    or a study written by an older mcqaudit (it must be opened once where it can be written, to upgrade it).
    """
    return Study(path, read_only=True)


def graded_rows(study: str | Path | Study, *, history: bool = False) -> pd.DataFrame:
    """Every row of the study's ``graded_rows`` view (README "The study file"), one row per generation,
    ordered by arm, item, orientation and sample: the final verdict and its source, the judge's verdict,
    reply and fingerprint, the review in force, the letters of the strict, naive and user parsers, the
    picked letter, option and position, the answer and reasoning, ``truncated``.

    ``study``: a path (opened with :func:`read_study`) or an open study. With ``history=True`` two columns
    follow, as ``mcqaudit export --format parquet`` writes them: ``reviews`` (every review of the row,
    oldest first, retractions included: dicts with ``review_id, action, verdict, letter, note, reviewer,
    time, retracts``) and ``panel_verdicts`` (one dict per panel judge of ``grade --panel``:
    ``fingerprint, model, status, verdict, letter``); a row without any has empty lists.

    >>> rows = graded_rows("study.duckdb")  # doctest: +SKIP
    >>> rows.groupby("arm")["final_verdict"].value_counts(normalize=True)  # doctest: +SKIP
    """
    opened = study if isinstance(study, Study) else read_study(study)
    if history:
        return export.rows_df(opened)
    return opened.query_df("SELECT * FROM graded_rows ORDER BY arm, item_id, orientation, sample")
