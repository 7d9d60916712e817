"""The flags that need no bootstrap, from plain counts: what ``mcqaudit info`` says without importing numpy. Pure.

:func:`mcqaudit.metrics.compute` with no resamples raises exactly these flags (the fact flags, and
``parser_disagreement`` and ``logprob_mismatch``, whose intervals are analytic); the CI flags
(:data:`~mcqaudit.metrics.rules.CI_FLAGS`) cannot fire there. Here they are built from a handful of counts that
:mod:`mcqaudit.store.facts` aggregates in DuckDB (:class:`FactCounts`), through the same flag builders
(:mod:`~mcqaudit.metrics.diagnostics`) and the same rate (:func:`~mcqaudit.metrics.rates.clustered_rate`), so
the two agree to the byte (tests/test_info_fast.py compares them). The design's reason and the gold shares
are computed here for both (:func:`gold_shares`, :func:`design_reasons`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcqaudit.metrics.diagnostics import (
    audit_flag,
    design_flag,
    judge_config_flag,
    logprob_flag,
    parser_disagreement_flags,
    sort_flags,
    ungraded_flag,
)
from mcqaudit.metrics.rates import clustered_rate, round6
from mcqaudit.metrics.results import Flag, LogprobCrosscheck, Metric
from mcqaudit.metrics.rules import BALANCE_TOLERANCE, CI_FLAGS, IMBALANCE_RATIO, MIN_AUDIT_ROWS
from mcqaudit.vocab import LETTERS

Sums6 = list[float]  # k, Σn, Σd, Σd², Σd·n, Σn² over item clusters (what clustered_rate reads)


def gold_shares(counts: Mapping[int, Sequence[float]]) -> tuple[bool, dict[str, dict[str, float]]]:
    """Whether gold positions are uniform within each option count, and their shares: ``counts[n][p]`` rows
    with ``n`` displayed options whose gold is at position ``p`` (clipped to the largest option count)."""
    shares: dict[str, dict[str, float]] = {}
    balanced = True
    for n in sorted(counts):
        if n < 2:
            continue
        tot = float(sum(counts[n]))
        if tot == 0:
            continue
        sh = {LETTERS[p]: float(counts[n][p]) / tot for p in range(n)}
        shares[str(n)] = {k: round(x, 6) for k, x in sh.items()}
        if max(abs(x - 1 / n) for x in sh.values()) > BALANCE_TOLERANCE:
            balanced = False
    return balanced, shares


@dataclass(frozen=True)
class DesignReasons:
    """Why the design cannot separate position from content (docs/design.md §7 ``design_imbalance``)."""

    one_orientation: bool
    gold_unbalanced: bool
    unreadable: list[str]
    reason: str | None


def design_reasons(orients: Sequence[str], gold_share: Mapping[str, Mapping[str, float]]) -> DesignReasons:
    """Gold letters *unbalanced* (some displayed position holds under half or over one and a half times its
    fair share 1/n of them), and *one orientation only* per option count (see ``metrics.bias.design_of``)."""
    by_n: dict[int, set[str]] = {}
    for lab in orients:
        by_n.setdefault(len(lab), set()).add(lab)
    one = bool(by_n) and all(len(v) == 1 for v in by_n.values())
    skewed: list[str] = []
    for n, sh in gold_share.items():
        k = int(n)
        if any(x < (1 - IMBALANCE_RATIO) / k or x > (1 + IMBALANCE_RATIO) / k for x in sh.values()):
            skewed.append(f"{k} options: " + ", ".join(f"{x} {v * 100:.0f} %" for x, v in sh.items()))
    reasons, unreadable = [], []
    if skewed:
        reasons.append("gold letters are unbalanced across displayed positions (" + "; ".join(skewed) + ")")
        unreadable += ["position_pick_rate", "first_position_rate", "rstd"]
    if one:
        reasons.append(
            "every item is shown in one orientation only (" + ", ".join(sorted(orients, key=len)) + ")"
        )
        unreadable.append("orientation_instability")
    return DesignReasons(one, bool(skewed), unreadable, "; ".join(reasons) or None)


@dataclass
class Sample:
    """A parser's cluster sums over some rows (``(k, 6)``, one row per rate), on all of them and on those of
    the uniform spot check (None: no such row); :class:`mcqaudit.metrics.diagnostics.RateSample`."""

    pooled: list[Sums6]
    spot: list[Sums6] | None


@dataclass
class Letters:
    rates: Sample  # misread, wrong_letter, fabricated, missed


@dataclass
class ParserCounts:
    """One parser that read at least one graded row (:class:`mcqaudit.metrics.diagnostics.Tally`)."""

    name: str
    disagreement: Sample  # its verdicts against the chosen verdicts (one rate)
    letters: Letters | None  # None: no compared row has a known reference letter


@dataclass
class LogprobCounts:
    """An arm's graded rows with option_logprobs: rows, argmax letter gold, text CORRECT, the items they cover,
    and the cluster sums of the row-level mismatch between the argmax and the text's letter."""

    rows: int
    lp_correct: int
    text_correct: int
    items: int
    mismatch: Sums6


@dataclass
class FactCounts:
    """Everything :func:`quick_flags` reads, filled by :func:`mcqaudit.store.facts.fact_counts`."""

    arms: list[str]  # metrics.rules.arm_order
    orientations: list[str]
    n_items: int
    rows_by_arm: dict[str, int]
    graded_by_arm: dict[str, int]
    items_by_arm: dict[str, int]
    arm_fingerprints: dict[str, dict[str, int]]
    judge_configs: dict[str, dict[str, Any]]
    unaudited: bool
    n_reviews: int
    uniform_reviewed_rows: int
    gold_counts: dict[int, list[int]]  # n_opt -> rows by gold position (gold_shares)
    parsers: list[ParserCounts] = field(default_factory=list)
    logprob: dict[str, LogprobCounts] = field(default_factory=dict)


def _logprob(c: LogprobCounts) -> LogprobCrosscheck:
    """``metrics.agreement.logprob_crosscheck`` without resamples."""
    lp, tx = c.lp_correct / c.rows, c.text_correct / c.rows

    def point(x: float) -> Metric:
        return {"value": round6(x), "ci_low": None, "ci_high": None, "n": c.rows}

    return {
        "mismatch_rate": clustered_rate(c.mismatch),
        "accuracy_logprob": point(lp),
        "accuracy_text": point(tx),
        "difference": point(lp - tx),
        "items": c.items,
    }


def quick_flags(c: FactCounts) -> tuple[list[Flag], tuple[str, ...]]:
    """The flags ``compute(frames, n_boot=0)`` raises, most important first, and the names of those that could
    not be checked without resamples (:data:`CI_FLAGS`, when there are arms to compare)."""
    n_rows = sum(c.rows_by_arm.values())
    flags: list[Flag] = []
    if f := judge_config_flag(c.arms, c.arm_fingerprints, c.judge_configs, c.n_items, n_rows):
        flags.append(f)
    flags += parser_disagreement_flags(c.parsers)
    for arm in c.arms:
        lp = c.logprob.get(arm)
        if lp is not None and lp.rows and (f := logprob_flag(arm, _logprob(lp))):
            flags.append(f)
    for arm in c.arms:
        if f := ungraded_flag(arm, c.rows_by_arm[arm], c.graded_by_arm[arm], c.items_by_arm[arm]):
            flags.append(f)
    _, shares = gold_shares(c.gold_counts)
    d = design_reasons(c.orientations, shares)
    if f := design_flag(d.reason, d.unreadable, c.n_items, n_rows):
        flags.append(f)
    required = min(MIN_AUDIT_ROWS, n_rows)
    if f := audit_flag(c.unaudited, c.n_reviews, c.uniform_reviewed_rows, required, c.n_items, n_rows):
        flags.append(f)
    return sort_flags(flags), (CI_FLAGS if len(c.arms) >= 2 else ())


__all__ = [
    "DesignReasons",
    "FactCounts",
    "Letters",
    "LogprobCounts",
    "ParserCounts",
    "Sample",
    "design_reasons",
    "gold_shares",
    "quick_flags",
]
