"""The use cases (docs/design.md §9): one module per thing a person does with a study.

Each takes a study (a path or an open :class:`~mcqaudit.store.db.Study`) and typed options, owns its
transaction, and returns a frozen dataclass or a TypedDict. The faces (``cli.py``, ``ui/``, the Inspect
extension) call only these modules and the pure core; the use cases call ``store/`` (SQL), ``grade/`` and
``ingest/`` (readers), and the pure core. Nothing below imports this package.

- :mod:`~mcqaudit.app.report` — study → frames → metrics → report dict;
- :mod:`~mcqaudit.app.info` — the study's summary and the flags that need no bootstrap, for ``mcqaudit info``;
- :mod:`~mcqaudit.app.check` — the CI gate: the report's flags named to fail on, and the exit code.
- :mod:`~mcqaudit.app.study` — ``open_study``, the one way a use case opens a study (its journal replayed);
- :mod:`~mcqaudit.app.grade` — the grade prelude and runs (online, batch), dry runs, ``--no-judge``;
- :mod:`~mcqaudit.app.generate`, :mod:`~mcqaudit.app.standin` — a model run to a file; the stand-in judge.
"""
