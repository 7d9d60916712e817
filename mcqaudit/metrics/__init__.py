"""Metrics, confidence intervals and diagnostics (docs/design.md §7): pure over arrays (numpy, no I/O).

The input is a :class:`StudyFrames`, one narrow row of integer codes per generation, which
:mod:`mcqaudit.store.frames` resolves in DuckDB; :func:`compute` returns the report's computed part as
typed, JSON-ready dicts (:mod:`~mcqaudit.metrics.results`). A metric value is ``{"value", "ci_low",
"ci_high", "n"}`` (percentile 95 % CI from an item-clustered bootstrap, see ``bootstrap.method``; ``n``
is the size of the point estimate's denominator: items for item-weighted metrics, rows for row-pooled
rates, paired items for differences). A metric that cannot be computed is ``None``, with the reason in ``notes`` under the
metric's dotted path.

Modules, by what they own:

- :mod:`~mcqaudit.metrics.rules` — thresholds, flag order and pages, the control-arm rule;
- :mod:`~mcqaudit.metrics.inputs` — :class:`StudyInfo`, :class:`StudyFrames`;
- :mod:`~mcqaudit.metrics.results` — the typed shape of the report JSON;
- :mod:`~mcqaudit.metrics.cells` — rows → cells → per-item sums;
- :mod:`~mcqaudit.metrics.bootstrap` — the item bootstrap (from ``rules.NORMAL_MIN_ITEMS`` items, normal
  draws of the item sums with the bootstrap's covariance) and the metric value;
- families: :mod:`~mcqaudit.metrics.accuracy` (accuracy, Δs), :mod:`~mcqaudit.metrics.bias` (position,
  RStd, consistency, design), :mod:`~mcqaudit.metrics.parsers` (parser vs verdicts),
  :mod:`~mcqaudit.metrics.agreement` (judge vs reviews, log-probs);
- :mod:`~mcqaudit.metrics.diagnostics` — the flags;
- :mod:`~mcqaudit.metrics.compute` — :func:`compute`, which runs them all over one bootstrap.

Every name below is importable from ``mcqaudit.metrics`` as before the package was split.
"""

from mcqaudit.formatting import fmt_metric
from mcqaudit.metrics.bootstrap import ItemBootstrap, Sums, clustered_rate, summarize
from mcqaudit.metrics.compute import compute
from mcqaudit.metrics.diagnostics import diagnose, orientation_instability, parser_artifact, sort_flags
from mcqaudit.metrics.inputs import StudyFrames, StudyInfo
from mcqaudit.metrics.results import (
    ArmDelta,
    ArmMetrics,
    Flag,
    Metric,
    Notes,
    Report,
    Results,
)
from mcqaudit.metrics.rules import (
    ARTIFACT_PARSERS_EXCLUDED,
    BALANCE_TOLERANCE,
    CI_FLAGS,
    CI_LEVEL,
    CONTROL_SOURCES,
    FACT_FLAGS,
    FLAG_ORDER,
    FLAG_PAGES,
    IMBALANCE_RATIO,
    LOGPROB_MISMATCH_MAX,
    MAX_ORIENTATIONS_WITH_CI,
    MDE_FACTOR,
    MIN_AUDIT_ROWS,
    MIN_CI_ROWS,
    MIN_ITEMS,
    PARSER_DISAGREEMENT_MAX,
    PARSER_DISAGREEMENT_MIN_ROWS,
    resolve_control,
)

__all__ = [
    "ARTIFACT_PARSERS_EXCLUDED",
    "BALANCE_TOLERANCE",
    "CI_FLAGS",
    "CI_LEVEL",
    "CONTROL_SOURCES",
    "FACT_FLAGS",
    "FLAG_ORDER",
    "FLAG_PAGES",
    "IMBALANCE_RATIO",
    "LOGPROB_MISMATCH_MAX",
    "MAX_ORIENTATIONS_WITH_CI",
    "MDE_FACTOR",
    "MIN_AUDIT_ROWS",
    "MIN_CI_ROWS",
    "MIN_ITEMS",
    "PARSER_DISAGREEMENT_MAX",
    "PARSER_DISAGREEMENT_MIN_ROWS",
    "ArmDelta",
    "ArmMetrics",
    "Flag",
    "ItemBootstrap",
    "Metric",
    "Notes",
    "Report",
    "Results",
    "StudyFrames",
    "StudyInfo",
    "Sums",
    "clustered_rate",
    "compute",
    "diagnose",
    "fmt_metric",
    "orientation_instability",
    "parser_artifact",
    "resolve_control",
    "sort_flags",
    "summarize",
]
