"""The numbers and fixed lists the metrics and flags obey (docs/design.md §7), and the control-arm rule. Pure.

Every threshold a reader might ask about ("why did this flag not fire?") lives here, named, once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

CIMethod = Literal["bootstrap", "normal", "none"]  # how a report's replicates were drawn (bootstrap.method)

CI_LEVEL = 0.95
MDE_FACTOR = 2.8  # ≈ (z_0.975 + z_0.80): the effect a two-sided 5 % test detects with 80 % power
PARSER_DISAGREEMENT_MAX = 0.05
PARSER_DISAGREEMENT_MIN_ROWS = 100
LOGPROB_MISMATCH_MAX = 0.05
BALANCE_TOLERANCE = 0.02  # a gold-position share within 2 pp of 1/n counts as balanced
ARTIFACT_PARSERS_EXCLUDED = ("strict",)  # strict defers rather than answers: its Δ is coverage, not letters
MIN_ITEMS = 20  # a Δ between two arms, and any statistical flag, needs this many items of evidence
MIN_AUDIT_ROWS = 100  # reviewed rows of a uniform spot check that audit the judge; fewer: preliminary
MIN_CI_ROWS = 10  # judge vs human: a figure on fewer reviewed rows keeps its value and n but gets no CI
IMBALANCE_RATIO = 0.5  # a displayed position holding under (1 - r) / n or over (1 + r) / n of gold letters
MAX_ORIENTATIONS_WITH_CI = 48  # beyond this, the rarest orientations get point estimates only
# Item families (the items sharing one orientation set) that get per-family figures: a study's only family,
# else those of at least MIN_ITEMS items, at most this many (the largest). Orientations are compared, and
# RStd computed, only within a family.
MAX_FAMILIES = 12
# `report --by metadata.KEY`: a key with more distinct values than this is not a subject (an id, a free text):
# grouping by it is a usage error, not thousands of one-item groups.
MAX_GROUPS = 200
# From this many items the replicates are drawn from the normal approximation of the item sums (their exact
# covariance under the item bootstrap) instead of resampling items: there the two give the same CIs to a
# small fraction of their width (tests/test_ci_method.py), and resampling costs seconds.
NORMAL_MIN_ITEMS = 10_000

# the three ways a parser misreads a letter, in words (flag evidence, findings; metrics.parsers)
MISREAD_WORDS = {
    "wrong_letter": "another letter",
    "fabricated": "a letter where the answer picks none",
    "missed": "no letter where it picks one",
}

# The flags, most important first (the order of every flag list).
FLAG_ORDER = (
    "suspected_parser_artifact",
    "judge_sensitive",
    "orientation_instability",
    "other_rate_rise",
    "truncation_rise",
    "design_imbalance",
    "judge_config_mixed",
    "parser_disagreement",
    "logprob_mismatch",
    "ungraded_rows",
    "judge_unaudited",
)
# Flags that state a fact about the study rather than an estimate: they fire at any size (with their n).
FACT_FLAGS = ("judge_config_mixed", "ungraded_rows", "judge_unaudited", "design_imbalance")
# Flags read off bootstrap CIs: without resamples (``n_boot=0``) they cannot fire.
CI_FLAGS = (
    "suspected_parser_artifact",
    "orientation_instability",
    "other_rate_rise",
    "truncation_rise",
    "judge_sensitive",
)
# The dashboard page that shows each flag's evidence (docs/design.md §8). It is the report JSON's ``page`` key
# (docs/report-schema.md), so it is part of the contract, not only of the dashboard.
FLAG_PAGES = {
    "suspected_parser_artifact": "Parsers vs judge",
    "judge_sensitive": "Overview",
    "orientation_instability": "Orientations",
    "other_rate_rise": "OTHER by arm",
    "truncation_rise": "OTHER by arm",
    "design_imbalance": "Bias",
    "judge_config_mixed": "Overview",
    "parser_disagreement": "Parsers vs judge",
    "logprob_mismatch": "Bias",
    "ungraded_rows": "Overview",
    "judge_unaudited": "Review",
}

CONTROL_SOURCES = ("--control", "stored", "named control/base", "first ingested")
CONTROL_NAMES = ("control", "base")


def arm_order(arms: Iterable[str], ordinals: Mapping[str, int]) -> list[str]:
    """The order arms are listed in, everywhere (the report's ``arms``, every table, plot and selector that
    lists them, and the index ``ai`` of the metrics' frames): ingest order (``ordinals``: the ``arms`` table's
    ``ordinal``), then any arm without one, by name. Each arm once. The store's SQL that orders rows by arm
    spells the same rule ``ORDER BY ordinal NULLS LAST, arm`` (tests/test_rules.py compares the two)."""
    return sorted(set(arms), key=lambda a: (a not in ordinals, ordinals.get(a, 0), a))


def compared_arms(arms: Sequence[str], control: str | None) -> tuple[list[str], list[tuple[str, str]]]:
    """Which arms are compared, in :func:`arm_order` (``arms`` is already in it): every arm but the control
    against the control (none without one), and with three or more arms every pair, each once, the earlier
    arm first (the order of ``delta_accuracy`` and ``pairwise_delta``)."""
    treated = [a for a in arms if a != control] if control is not None else []
    pairs = [(a, b) for k, a in enumerate(arms) for b in arms[k + 1 :]] if len(arms) >= 3 else []
    return treated, pairs


def resolve_control(arms: list[str], requested: str | None, stored: str | None) -> tuple[str | None, str]:
    """The control arm and where the choice came from (docs/design.md §7 order; one of :data:`CONTROL_SOURCES`)."""
    if requested is not None:
        if requested not in arms:
            raise ValueError(f"--control {requested!r} is not an arm of this study (arms: {', '.join(arms)})")
        return requested, "--control"
    if stored is not None and stored in arms:
        return stored, "stored"
    for name in CONTROL_NAMES:
        if name in arms:
            return name, "named control/base"
    if arms:
        return arms[0], "first ingested"
    return None, "none"


def ci_method(n_items: int, n_boot: int, requested: str = "auto") -> CIMethod:
    """How the replicates behind the CIs are drawn: none without resamples (``n_boot=0``), else
    ``requested``, where ``auto`` is ``normal`` from :data:`NORMAL_MIN_ITEMS` items and the item bootstrap
    below."""
    if n_boot <= 0:
        return "none"
    if requested == "auto":
        return "normal" if n_items >= NORMAL_MIN_ITEMS else "bootstrap"
    if requested not in ("bootstrap", "normal"):
        raise ValueError(f"CI method must be auto, bootstrap or normal, not {requested!r}")
    return requested  # type: ignore[return-value]
