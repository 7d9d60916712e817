"""A row-level rate with its item-clustered Wilson interval, and the report's rounding: plain Python floats,
no numpy (``mcqaudit info`` reads these without importing it). Pure.

:mod:`~mcqaudit.metrics.bootstrap` re-exports both; the metrics and the count-only flags
(:mod:`~mcqaudit.metrics.facts`) compute every such figure here, so the two agree to the last digit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from mcqaudit.metrics.results import Metric


def round6(x: float | None) -> float | None:
    """Six significant digits (the report's precision; keeps tiny chance levels readable)."""
    if x is None or not math.isfinite(x):
        return None
    return float(f"{float(x):.6g}") + 0.0  # + 0.0 turns -0.0 into 0.0


Z = 1.959963984540054  # the normal quantile of a two-sided 95 % interval (rules.CI_LEVEL)


def _wilson(d: float, n: float, var: float) -> tuple[float, float]:
    """Wilson interval on an effective sample size that carries the item clustering (design effect)."""
    if n <= 0:
        return (math.nan, math.nan)
    r = d / n
    srs = r * (1 - r) / n
    n_eff = n if srs <= 0 or var <= 0 else max(1.0, min(n, n * srs / var))
    z = Z
    den = 1 + z * z / n_eff
    centre = (r + z * z / (2 * n_eff)) / den
    half = z * math.sqrt(r * (1 - r) / n_eff + z * z / (4 * n_eff * n_eff)) / den
    lo, hi = centre - half, centre + half
    return (0.0 if lo < 1e-12 else lo), (1.0 if hi > 1 - 1e-12 else hi)


def wilson_interval(d: float, n: float) -> tuple[float, float]:
    """The Wilson score 95 % interval of ``d`` successes in ``n`` independent trials."""
    return _wilson(d, n, 0.0)


def no_difference_bound(n: int) -> float:
    """The half-width of a Δ that is 0 in every replicate, on ``n`` items (every one answered alike in both
    arms): the Wilson upper bound of 0 of ``n`` items answered differently."""
    return wilson_interval(0.0, float(n))[1]


def clustered_rate(sums: Iterable[float]) -> Metric | None:
    """A rate Σd/Σn over item clusters, from ``(k, Σn, Σd, Σd², Σd·n, Σn²)``, with a Wilson 95 % CI whose
    effective sample size carries the clustered (ratio-estimator) variance."""
    k, sn, sd, sdd, sdn, snn = (float(x) for x in sums)
    if sn <= 0:
        return None
    r = sd / sn
    ss = sdd - 2 * r * sdn + r * r * snn  # Σ (d_i − r n_i)²
    var = (k / (k - 1)) * max(ss, 0.0) / (sn * sn) if k > 1 else 0.0
    lo, hi = _wilson(sd, sn, var)
    return {"value": round6(r), "ci_low": round6(lo), "ci_high": round6(hi), "n": int(round(sn))}
