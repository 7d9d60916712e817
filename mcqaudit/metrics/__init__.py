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

Every name below is importable from ``mcqaudit.metrics`` as before the package was split. They are loaded on
first use (PEP 562): importing ``mcqaudit.metrics.rules`` or ``.facts`` alone loads no numpy, which is what
lets ``mcqaudit info`` start fast.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_RESULTS = ("ArmDelta", "ArmMetrics", "Flag", "Metric", "Notes", "Report", "Results")
_WHERE = {
    "fmt_metric": "mcqaudit.formatting",
    "ItemBootstrap": "mcqaudit.metrics.bootstrap",
    "Sums": "mcqaudit.metrics.bootstrap",
    "summarize": "mcqaudit.metrics.bootstrap",
    "clustered_rate": "mcqaudit.metrics.rates",
    "compute": "mcqaudit.metrics.compute",
    "diagnose": "mcqaudit.metrics.diagnostics",
    "orientation_instability": "mcqaudit.metrics.diagnostics",
    "parser_artifact": "mcqaudit.metrics.diagnostics",
    "sort_flags": "mcqaudit.metrics.diagnostics",
    "StudyFrames": "mcqaudit.metrics.inputs",
    "StudyInfo": "mcqaudit.metrics.inputs",
    **dict.fromkeys(_RESULTS, "mcqaudit.metrics.results"),
}


def __getattr__(name: str) -> Any:
    """A name of ``__all__``, imported from its module on first use (the rest: the rules)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE.get(name, "mcqaudit.metrics.rules")), name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """The package module: importing the submodule ``compute`` binds the package's ``compute`` to its
    function (what the eager ``from mcqaudit.metrics.compute import compute`` did), never to the module."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "compute" and isinstance(value, types.ModuleType):
            value = value.compute
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
