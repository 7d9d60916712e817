"""The use cases (docs/design.md §9): one module per thing a person does with a study — and the Python API
(README "Python API").

Each takes a study (a path or an open :class:`~mcqaudit.store.db.Study`) and typed options, owns its
transaction, and returns a frozen dataclass or a TypedDict. The faces (``cli.py``, ``ui/``, the Inspect
extension) call only these modules and the pure core; the use cases call ``store/`` (SQL), ``grade/`` and
``ingest/`` (readers), and the pure core. Nothing below imports this package.

- :mod:`~mcqaudit.app.analysis` — a study read-only, and its ``graded_rows`` as a pandas DataFrame;
- :mod:`~mcqaudit.app.report` — study → frames → metrics → report dict;
- :mod:`~mcqaudit.app.info` — the study's summary and the flags that need no bootstrap, for ``mcqaudit info``;
- :mod:`~mcqaudit.app.check` — the CI gate: the report's flags named to fail on, and the exit code.
- :mod:`~mcqaudit.app.rows` — the row lists of the dashboard, and the rows export (csv, parquet, jsonl);
- :mod:`~mcqaudit.app.study` — ``open_study``, the one way a use case opens a study (its journal replayed);
- :mod:`~mcqaudit.app.grade` — the grade prelude and runs (online, batch), dry runs, ``--no-judge``;
- :mod:`~mcqaudit.app.generate`, :mod:`~mcqaudit.app.standin` — a model run to a file; the stand-in judge.

What a researcher calls is named here too, imported on first use (so ``import mcqaudit.app.check`` stays
as light as it was)::

    import mcqaudit.app as mcq

    study = mcq.read_study("study.duckdb")          # read-only
    rows = mcq.graded_rows(study)                   # pandas DataFrame, one row per generation
    report = mcq.build_report(study)                # the report dict (docs/report-schema.md)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcqaudit.app.analysis import Study, graded_rows, read_study
    from mcqaudit.app.report import build_report, load_frames
    from mcqaudit.app.rows import export_rows
    from mcqaudit.app.study import open_study

# the Python API (README "Python API"): name -> the module that defines it
_API = {
    "Study": "mcqaudit.app.analysis",
    "read_study": "mcqaudit.app.analysis",
    "graded_rows": "mcqaudit.app.analysis",
    "build_report": "mcqaudit.app.report",
    "load_frames": "mcqaudit.app.report",
    "export_rows": "mcqaudit.app.rows",
    "open_study": "mcqaudit.app.study",
}

__all__ = ["Study", "build_report", "export_rows", "graded_rows", "load_frames", "open_study", "read_study"]


def __getattr__(name: str) -> Any:
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
