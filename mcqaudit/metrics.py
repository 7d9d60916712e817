"""Metrics, confidence intervals and diagnostics (DESIGN §7). Pure: numpy and pandas only, no I/O.

The input is a :class:`StudyFrames`: one narrow row of integer codes per generation, which
:mod:`mcqaudit.store.frames` resolves in DuckDB. Everything here is vectorised numpy (``bincount`` over
dense codes), never a Python loop over rows. Rows are pooled into (arm, item, orientation) cells and then
into per-item sums, and every metric is a function of per-item sums, so one item-clustered bootstrap
serves them all (:class:`ItemBootstrap`): each replicate draws the study's items with replacement — the
same draw for every arm, orientation and parser, so comparisons are paired — and every statistic is
recomputed from the weighted item sums. Rows are never resampled: an item shown in four orientations is
one unit, not four.

A metric value is ``{"value", "ci_low", "ci_high", "n"}`` (percentile 95 % CI; ``n`` is the size of the
point estimate's denominator: items for item-weighted metrics, rows for row-pooled rates, paired items
for differences). A metric that cannot be computed is ``None``, with the reason in ``notes`` under the
metric's dotted path.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mcqaudit.vocab import LETTERS, VERDICTS

Metric = dict[str, Any]
Notes = dict[str, str]

CI_LEVEL = 0.95
MDE_FACTOR = 2.8  # ≈ (z_0.975 + z_0.80): the effect a two-sided 5 % test detects with 80 % power
PARSER_DISAGREEMENT_MAX = 0.05
PARSER_DISAGREEMENT_MIN_ROWS = 100
LOGPROB_MISMATCH_MAX = 0.05
BALANCE_TOLERANCE = 0.02  # a gold-position share within 2 pp of 1/n counts as balanced
ARTIFACT_PARSERS_EXCLUDED = ("strict",)  # strict defers rather than answers: its Δ is coverage, not letters
MIN_ITEMS = 20  # a Δ between two arms, and any statistical flag, needs this many items of evidence
MIN_AUDIT_ROWS = 100  # reviewed rows of a uniform spot check that audit the judge; fewer: preliminary
IMBALANCE_RATIO = 0.5  # a displayed position holding under (1 - r) / n or over (1 + r) / n of gold letters
# flags that state a fact about the study rather than an estimate: they fire at any size (with their n)
FACT_FLAGS = ("judge_config_mixed", "ungraded_rows", "judge_unaudited", "design_imbalance")
CONTROL_SOURCES = ("--control", "stored", "named control/base", "first ingested")

# Dashboard page for each flag's evidence (DESIGN §8)
FLAG_PAGES = {
    "suspected_parser_artifact": "Parsers vs judge",
    "orientation_instability": "Orientations",
    "other_rate_rise": "OTHER by arm",
    "design_imbalance": "Bias",
    "judge_config_mixed": "Overview",
    "parser_disagreement": "Parsers vs judge",
    "logprob_mismatch": "Bias",
    "ungraded_rows": "Overview",
    "judge_unaudited": "Review",
}
FLAG_ORDER = tuple(FLAG_PAGES)


# --- inputs ----------------------------------------------------------------------------------------------
@dataclass
class StudyInfo:
    """Study-level facts the metrics need besides the frames."""

    path: str
    created: str | None
    unaudited: bool
    arms: list[str]  # in ingest order (arms.ordinal); index = the frames' ``ai``
    orientations: list[str]  # index = the frames' ``oi``
    stored_control: str | None
    n_items: int  # index = the frames' ``ii``
    rows_by_arm: dict[str, int]
    judge_configs: dict[str, dict[str, Any]]  # fingerprint -> model, shape, temperature, standin
    arm_fingerprints: dict[str, dict[str, int]]  # arm -> fingerprint -> rows with an ok judge verdict
    n_reviews: int
    uniform_spot_check_rows: int
    parsers: list[str]  # strict, naive, user (when any row has a user letter), then the frameworks
    frameworks: list[str] = field(default_factory=list)


@dataclass
class StudyFrames:
    """One narrow row of integer codes per generation (see :mod:`mcqaudit.store.frames`).

    ``rows`` columns: ``ai ii oi sample gold_pos n_opt verdict pick_pos auto_verdict human strict_pos
    naive_pos user_pos fp uniform``. Verdict codes: 0 CORRECT, 1 INCORRECT, 2 OTHER, -1 none (ungraded;
    for ``human``: not reviewed). Positions are 0-based displayed letters, -1 for none. ``verdict`` and
    ``pick_pos`` are those of the chosen view (``verdicts``); ``auto_verdict`` is the automated one.
    ``framework``: ``row`` (index into rows), ``parser`` (index into ``info.frameworks``), ``pos``.
    ``logprob``: ``row``, ``lp_pos`` (argmax of option_logprobs).
    """

    info: StudyInfo
    verdicts: str  # "final" or "judge"
    rows: pd.DataFrame
    framework: pd.DataFrame | None = None
    logprob: pd.DataFrame | None = None


# --- the bootstrap ----------------------------------------------------------------------------------------
class ItemBootstrap:
    """Weighted sums of per-item columns under an item bootstrap, all columns sharing the same draws.

    ``add(name, vector)`` registers a per-item vector (length ``n_items``); :meth:`run` returns, for each
    column, an array of ``n_boot + 1`` sums: index 0 with every item once (the point estimate), then one
    per replicate. A replicate draws ``n_items`` items with replacement; its weights are the draw counts.
    Replicate ``b`` depends only on ``(seed, b // CHUNK)``, so results do not depend on memory settings.
    """

    CHUNK = 64
    MAX_RESIDENT_BYTES = 256 * 2**20
    EXACT_ELEMENTS = 2_000_000  # item values × columns below which replicates are summed in float64

    def __init__(self, n_items: int, n_boot: int, seed: int) -> None:
        self.n_items = n_items
        self.n_boot = max(int(n_boot), 0)
        self.seed = seed
        self._names: dict[str, int] = {}
        self._cols: list[np.ndarray] = []
        self._points: list[float] = []  # exact (float64) point sums
        self._keys: dict[tuple[float, float], list[int]] = {}
        self._probe = np.random.default_rng(12345).random(n_items)

    def add(self, name: str, values: np.ndarray) -> str:
        v = np.asarray(values, dtype=np.float64)
        if v.shape != (self.n_items,):
            raise ValueError(f"column {name}: expected {self.n_items} item values, got shape {v.shape}")
        total = float(v.sum())
        if total == 0.0 and not v.any():
            self._names[name] = -1  # an all-zero column sums to zero in every replicate
            return name
        # identical columns (e.g. presence vectors of complete arms) are summed once
        key = (total, float(v @ self._probe))
        idx = next((j for j in self._keys.get(key, []) if np.array_equal(self._cols[j], v)), None)
        if idx is None:
            idx = len(self._cols)
            self._cols.append(v.copy() if v is values else v)
            self._points.append(total)
            self._keys.setdefault(key, []).append(idx)
        self._names[name] = idx
        return name

    @property
    def n_columns(self) -> int:
        return len(self._cols)

    def _dtype(self) -> type[np.floating]:
        # Small problems sum in float64 (reproducible to the last printed digit on any BLAS); large ones
        # in float32, twice as fast and exact enough for percentiles of sums of counts.
        return np.float64 if self.n_items * len(self._cols) <= self.EXACT_ELEMENTS else np.float32

    def _weights(self, chunk: int) -> np.ndarray:
        lo = chunk * self.CHUNK
        m = min(self.CHUNK, self.n_boot - lo)
        n = self.n_items
        rng = np.random.default_rng([self.seed, chunk])
        draws = rng.integers(0, n, size=(m, n), dtype=np.int32)
        w = np.empty((m, n), dtype=self._dtype())
        for k in range(m):
            w[k] = np.bincount(draws[k], minlength=n)
        return w

    def run(self) -> Sums:
        k = len(self._cols)
        out = np.zeros((self.n_boot + 1, k + 1), dtype=np.float64)  # the last column is the zero column
        out[0, :k] = self._points
        if self.n_boot and self.n_items and k:
            # Columns are summed in groups small enough to keep resident; with one group (the usual
            # case) each chunk of weights is drawn once.
            group = max(1, min(k, self.MAX_RESIDENT_BYTES // (self.n_items * 4)))
            n_chunks = math.ceil(self.n_boot / self.CHUNK)
            for start in range(0, k, group):
                stop = min(start + group, k)
                xt = np.stack(self._cols[start:stop], axis=0).astype(self._dtype(), copy=False)
                for c in range(n_chunks):
                    w = self._weights(c)
                    lo = 1 + c * self.CHUNK
                    # (k × n) @ (n × m): this orientation of the product is the fast one for BLAS
                    out[lo : lo + w.shape[0], start:stop] = (xt @ w.T).T
                del xt
        return Sums({n: (j if j >= 0 else k) for n, j in self._names.items()}, out)


class Sums:
    """Weighted sums by column name: ``sums["x"]`` is an array of ``n_boot + 1`` values."""

    def __init__(self, names: dict[str, int], table: np.ndarray) -> None:
        self._names = names
        self._table = table

    def __getitem__(self, name: str) -> np.ndarray:
        return self._table[:, self._names[name]]

    def __contains__(self, name: str) -> bool:
        return name in self._names


def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _r(x: float | None) -> float | None:
    """Six significant digits (the report's precision; keeps tiny chance levels readable)."""
    if x is None or not math.isfinite(x):
        return None
    return float(f"{float(x):.6g}") + 0.0  # + 0.0 turns -0.0 into 0.0


def summarize(reps: np.ndarray, n: int, *, se: bool = False) -> Metric | None:
    """A metric dict from ``[point, replicate...]``; None when the point estimate is undefined."""
    point = float(reps[0])
    if not math.isfinite(point):
        return None
    boot = reps[1:]
    boot = boot[np.isfinite(boot)]
    lo = hi = sd = None
    if boot.size >= 2:
        a = (1 - CI_LEVEL) / 2
        lo, hi = (float(v) for v in np.percentile(boot, [100 * a, 100 * (1 - a)]))
        sd = float(np.std(boot, ddof=1))
    m: Metric = {"value": _r(point), "ci_low": _r(lo), "ci_high": _r(hi), "n": int(n)}
    if se:
        m["se"] = _r(sd)
        m["mde"] = _r(MDE_FACTOR * sd) if sd is not None else None
    return m


# --- control arm ----------------------------------------------------------------------------------------
def resolve_control(arms: list[str], requested: str | None, stored: str | None) -> tuple[str | None, str]:
    """The control arm and where the choice came from (DESIGN §7 order; one of :data:`CONTROL_SOURCES`)."""
    if requested is not None:
        if requested not in arms:
            raise ValueError(f"--control {requested!r} is not an arm of this study (arms: {', '.join(arms)})")
        return requested, "--control"
    if stored is not None and stored in arms:
        return stored, "stored"
    for name in ("control", "base"):
        if name in arms:
            return name, "named control/base"
    if arms:
        return arms[0], "first ingested"
    return None, "none"


# --- aggregation -----------------------------------------------------------------------------------------
MAX_ORIENTATIONS_WITH_CI = 48  # beyond this, the rarest orientations get point estimates only


def _group(key: np.ndarray, space: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys, and each element's index among them (bincount when the key space is small)."""
    key = key.astype(np.int64, copy=False)
    if key.size == 0:
        return key, key
    if space <= max(8 * key.size, 1 << 20):
        present = np.bincount(key, minlength=space) > 0
        ids = np.cumsum(present) - 1
        return np.flatnonzero(present), ids[key]
    uniq, inv = np.unique(key, return_inverse=True)
    return uniq, inv.reshape(-1)


def _six(n: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Along the last axis (item clusters; n = 0 is no cluster): k, Σn, Σd, Σd², Σd·n, Σn²."""
    return np.stack(
        [(n > 0).sum(axis=-1), n.sum(axis=-1), d.sum(axis=-1), (d * d).sum(axis=-1), (d * n).sum(axis=-1),
         (n * n).sum(axis=-1)],
        axis=-1,
    ).astype(np.float64)  # fmt: skip


def _segment_sums(
    starts: np.ndarray, groups: np.ndarray, n: np.ndarray, d: np.ndarray, size: int
) -> np.ndarray:
    """:func:`_six` over contiguous segments (``starts``) that belong to ``groups``; shape (size, 6)."""
    out = np.zeros((size, 6))
    if starts.size == 0:
        return out
    for j, w in enumerate(((n > 0).astype(np.float64), n, d, d * d, d * n, n * n)):
        out[groups, j] = np.add.reduceat(w, starts)
    return out


@dataclass
class _ParserAgg:
    """One parser's verdicts against the chosen verdicts, on graded rows."""

    name: str
    confusion: np.ndarray  # (n_arms, n_or, 3, 3): rows = verdict, columns = the parser's verdict
    by_cell: np.ndarray  # (n_arms, n_or, 6) disagreement cluster sums (clusters: items)
    by_arm: np.ndarray  # (n_arms, 6)
    pooled: np.ndarray  # (6,) all arms
    spot: np.ndarray | None  # (6,) rows of the uniform spot check, all arms
    acc: np.ndarray  # (n_arms, n_items) item-weighted accuracy of the parser's verdicts; NaN = no row


@dataclass
class _Rows:
    ai: np.ndarray
    ii: np.ndarray
    oi: np.ndarray
    sample: np.ndarray
    gold: np.ndarray
    n_opt: np.ndarray
    verdict: np.ndarray
    pick: np.ndarray
    auto: np.ndarray
    human: np.ndarray
    uniform: np.ndarray
    n_arms: int
    n_or: int
    n_items: int


def _rows(frames: StudyFrames) -> _Rows:
    r = frames.rows
    info = frames.info

    def col(name: str) -> np.ndarray:
        return r[name].to_numpy().astype(np.int64)

    n_opt = col("n_opt")

    def legal(pos: np.ndarray) -> np.ndarray:  # a letter beyond the displayed options is no letter
        return np.where(pos < n_opt, pos, -1)

    return _Rows(
        ai=col("ai"),
        ii=col("ii"),
        oi=col("oi"),
        sample=col("sample"),
        gold=col("gold_pos"),
        n_opt=n_opt,
        verdict=col("verdict"),
        pick=legal(col("pick_pos")),
        auto=col("auto_verdict"),
        human=col("human"),
        uniform=r["uniform"].to_numpy().astype(bool),
        n_arms=len(info.arms),
        n_or=len(info.orientations),
        n_items=info.n_items,
    )


@dataclass
class _Cells:
    """(arm, item, orientation) cells, pooled over samples; ``of_row`` maps each row to its cell."""

    of_row: np.ndarray
    ai: np.ndarray
    oi: np.ndarray
    ii: np.ndarray
    groups: np.ndarray  # the (arm, orientation) groups present, as ai * n_or + oi, ascending
    group_starts: np.ndarray  # where each group's cells start (cells are sorted by group, then item)

    @property
    def n(self) -> int:
        return int(self.ai.size)


def _cells(R: _Rows) -> _Cells:
    uq, inv = _group((R.ai * R.n_or + R.oi) * R.n_items + R.ii, R.n_arms * R.n_or * R.n_items)
    g = uq // max(R.n_items, 1)
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if g.size else g
    return _Cells(
        of_row=inv,
        ai=uq // (R.n_or * R.n_items),
        oi=(uq // R.n_items) % R.n_or,
        ii=uq % R.n_items,
        groups=g[starts],
        group_starts=starts,
    )


def _parser_agg(
    name: str, idx: np.ndarray | None, pos: np.ndarray, R: _Rows, C: _Cells, letter_only: bool
) -> _ParserAgg | None:
    """``idx``: rows the parser read (indices into R; None = every row), ``pos``: its letter for each
    (-1: none)."""
    n_arms, n_or, n_items, nc = R.n_arms, R.n_or, R.n_items, C.n
    if idx is None:
        ref, gold, n_opt, cell, uniform = R.verdict, R.gold, R.n_opt, C.of_row, R.uniform
    else:
        ref, gold, n_opt, cell, uniform = (
            R.verdict[idx],
            R.gold[idx],
            R.n_opt[idx],
            C.of_row[idx],
            R.uniform[idx],
        )
    keep = ref >= 0
    if not keep.all():
        ref, gold, n_opt, cell, uniform, pos = (
            ref[keep],
            gold[keep],
            n_opt[keep],
            cell[keep],
            uniform[keep],
            pos[keep],
        )
    if ref.size == 0:
        return None
    bad = pos >= n_opt  # a letter beyond the displayed options is no letter
    if bad.any():
        pos = np.where(bad, -1, pos)
    pv = np.ones(ref.size, dtype=np.int64)
    pv[pos < 0] = 2
    pv[pos == gold] = 0
    # item-weighted accuracy of the parser's verdicts: mean over cells of the CORRECT share
    n_cell_all = np.bincount(cell, minlength=nc)
    cell_acc = _div(np.bincount(cell, weights=(pv == 0), minlength=nc), n_cell_all)
    has = n_cell_all > 0
    arm_item = C.ai * n_items + C.ii
    acc = _div(
        np.bincount(arm_item[has], weights=cell_acc[has], minlength=n_arms * n_items),
        np.bincount(arm_item[has], minlength=n_arms * n_items),
    ).reshape(n_arms, n_items)
    # disagreement: the strict pre-filter only where it gave a letter (a letter-less row was deferred)
    if letter_only:
        cmp = pos >= 0
        ref, pv, cell, uniform = ref[cmp], pv[cmp], cell[cmp], uniform[cmp]
        n_cell = np.bincount(cell, minlength=nc).astype(np.float64)
    else:
        n_cell = n_cell_all.astype(np.float64)
    dis = pv != ref
    d = dis.astype(np.float64)
    conf = np.bincount(((C.ai[cell] * n_or + C.oi[cell]) * 3 + ref) * 3 + pv, minlength=n_arms * n_or * 9)
    # cluster sums: clusters are items (within a cell, within an arm, or across arms)
    d_cell = np.bincount(cell, weights=d, minlength=nc)
    by_cell = _segment_sums(C.group_starts, C.groups, n_cell, d_cell, n_arms * n_or)
    n_ai = np.bincount(arm_item, weights=n_cell, minlength=n_arms * n_items).reshape(n_arms, n_items)
    d_ai = np.bincount(arm_item, weights=d_cell, minlength=n_arms * n_items).reshape(n_arms, n_items)
    by_arm = _six(n_ai, d_ai)
    pooled = _six(n_ai.sum(axis=0), d_ai.sum(axis=0))
    spot = None
    if uniform.any():
        ii_u = C.ii[cell[uniform]]
        n_u = np.bincount(ii_u, minlength=n_items).astype(np.float64)
        d_u = np.bincount(ii_u, weights=d[uniform], minlength=n_items)
        spot = _six(n_u, d_u)
    return _ParserAgg(
        name=name,
        confusion=conf.reshape(n_arms, n_or, 3, 3),
        by_cell=by_cell.reshape(n_arms, n_or, 6),
        by_arm=by_arm,
        pooled=pooled,
        spot=spot,
        acc=acc,
    )


def _parsers(frames: StudyFrames, R: _Rows, C: _Cells) -> list[_ParserAgg]:
    out: list[_ParserAgg] = []
    r = frames.rows
    fw = frames.framework
    for name in frames.info.parsers:
        if name in ("strict", "naive", "user"):
            pos = r[f"{name}_pos"].to_numpy().astype(np.int64)
            agg = _parser_agg(name, None, pos, R, C, name == "strict")
        else:
            if fw is None or not len(fw) or name not in frames.info.frameworks:
                continue
            sel = fw["parser"].to_numpy() == frames.info.frameworks.index(name)
            idx = fw["row"].to_numpy()[sel].astype(np.int64)
            agg = _parser_agg(name, idx, fw["pos"].to_numpy()[sel].astype(np.int64), R, C, False)
        if agg is not None:
            out.append(agg)
    return out


@dataclass
class _Ctx:
    frames: StudyFrames
    parsers: list[_ParserAgg]
    notes: Notes = field(default_factory=dict)


class _Grid:
    """Per-item vectors keyed by small integer tuples, built with one bincount each."""

    def __init__(self, n_items: int) -> None:
        self.n = n_items

    def sum(
        self, keys: Iterable[np.ndarray], sizes: Iterable[int], ii: np.ndarray, w: np.ndarray | None = None
    ) -> np.ndarray:
        key = np.zeros(ii.shape, dtype=np.int64)
        shape: list[int] = []
        for k, s in zip(keys, sizes, strict=True):
            key = key * s + k
            shape.append(s)
        total = int(np.prod(shape)) if shape else 1
        flat = np.bincount(key * self.n + ii, weights=w, minlength=total * self.n).astype(np.float64)
        return flat.reshape(*shape, self.n)


def compute(
    frames: StudyFrames,
    control: str | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Every metric, difference and flag of DESIGN §7, as a JSON-ready dict (see docs/report-schema.md)."""
    info = frames.info
    arms = info.arms
    orients = info.orientations
    R = _rows(frames)
    n_arms, n_items, n_or = R.n_arms, R.n_items, R.n_or
    ctrl, ctrl_source = resolve_control(arms, control, info.stored_control)
    notes: Notes = {}
    if info.stored_control and info.stored_control not in arms and control is None:
        notes["control_arm"] = f"the stored control arm {info.stored_control!r} is not in the study; ignored"
    boot = ItemBootstrap(n_items, n_boot, seed)
    grid = _Grid(n_items)
    max_n = int(R.n_opt.max()) if R.n_opt.size else 2

    # ---- cells: (arm, item, orientation), pooled over samples ----
    C = _cells(R)
    nc = C.n
    c_ai, c_oi, c_ii = C.ai, C.oi, C.ii
    cinv = C.of_row
    c_gold = np.zeros(nc, dtype=np.int64)
    c_gold[cinv] = R.gold
    c_nopt = np.ones(nc, dtype=np.int64)
    c_nopt[cinv] = R.n_opt

    def counts4(codes: np.ndarray) -> np.ndarray:  # (nc, 4): none, CORRECT, INCORRECT, OTHER
        return np.bincount(cinv * 4 + (codes + 1), minlength=nc * 4).reshape(nc, 4).astype(np.float64)

    v = R.verdict
    answered = (v == 0) | (v == 1)
    vc, ac = counts4(v), counts4(R.auto)
    n_rows = vc.sum(axis=1)
    n_c, n_i, n_o = vc[:, 1], vc[:, 2], vc[:, 3]
    n_graded = n_c + n_i + n_o
    a_graded = ac[:, 1:].sum(axis=1)
    a_share = {name: ac[:, k + 1] for k, name in enumerate(VERDICTS)}
    n_picked = np.bincount(cinv, weights=(answered & (R.pick >= 0)).astype(np.float64), minlength=nc)

    def arm_sum(w: np.ndarray) -> np.ndarray:  # (n_arms, n_items)
        return grid.sum([c_ai], [n_arms], c_ii, w)

    cell_acc = _div(n_c, n_graded)
    rows_ai, graded_ai = arm_sum(n_rows), arm_sum(n_graded)
    c_ai_, i_ai, o_ai = arm_sum(n_c), arm_sum(n_i), arm_sum(n_o)
    picked_ai = arm_sum(n_picked)
    cells_ai = arm_sum(np.ones(nc))
    gcells_ai = arm_sum((n_graded > 0).astype(np.float64))
    acc_item = _div(arm_sum(np.nan_to_num(cell_acc)), gcells_ai)  # NaN: no graded row of the item in the arm
    present = np.isfinite(acc_item)
    acells_ai = arm_sum((a_graded > 0).astype(np.float64))
    auto_share = {k: _div(arm_sum(np.nan_to_num(_div(x, a_graded))), acells_ai) for k, x in a_share.items()}
    auto_present = acells_ai > 0

    # per orientation: cells are sorted by (arm, orientation, item), so each (arm, orientation) is a slice
    group_of_cell = c_ai * n_or + c_oi
    bounds = np.searchsorted(group_of_cell, np.arange(n_arms * n_or + 1))
    rows_by_or = np.bincount(R.oi, minlength=n_or)
    ci_orients = set(np.argsort(-rows_by_or, kind="stable")[:MAX_ORIENTATIONS_WITH_CI].tolist())
    if n_or > MAX_ORIENTATIONS_WITH_CI:
        notes["accuracy_by_orientation"] = (
            f"{n_or} orientations: CIs are given for the {MAX_ORIENTATIONS_WITH_CI} with most rows, "
            "point estimates for the rest"
        )
    _or_cache: dict[tuple[int, int], np.ndarray] = {}

    def acc_or(a: int, o: int) -> np.ndarray:
        key = (a, o)
        if key not in _or_cache:
            lo, hi = bounds[a * n_or + o], bounds[a * n_or + o + 1]
            vec = np.full(n_items, np.nan)
            vec[c_ii[lo:hi]] = cell_acc[lo:hi]
            _or_cache[key] = vec
        return _or_cache[key]

    # gold position (RStd) and picked position
    c_gold_k = np.clip(c_gold, 0, max_n - 1)
    c_gold_ai = grid.sum([c_ai, c_gold_k], [n_arms, max_n], c_ii, n_c)
    g_gold_ai = grid.sum([c_ai, c_gold_k], [n_arms, max_n], c_ii, n_graded)
    pk = answered & (R.pick >= 0)
    picks_pos = grid.sum([R.ai[pk], R.pick[pk]], [n_arms, max_n], R.ii[pk])
    chance = _position_chance(c_ai, c_gold, c_nopt, n_picked, n_arms, max_n)
    balanced, gold_share = _balance(R)
    design = _design(orients, balanced, gold_share)

    # circular: every orientation the arm showed the item in has a verdict, all of them CORRECT
    eligible = (cells_ai == gcells_ai) & (gcells_ai >= 2)
    all_correct = (c_ai_ == graded_ai) & eligible
    item_nopt = np.ones(n_items)
    item_nopt[c_ii] = c_nopt
    circ_chance = np.where(eligible, (1.0 / item_nopt) ** cells_ai, 0.0)

    bin_pairs, bin_cons = _binary_consistency(R, c_ai, c_ii, answered)
    nw_num, nw_den = _nway_consistency(R, orients, max_n, answered)

    # judge vs human on reviewed rows: the uniform spot check when it has reviews, else all reviews
    reviewed = R.human >= 0
    if (reviewed & R.uniform).any():
        reviewed &= R.uniform
        scope = "uniform"
    else:
        scope = "all" if reviewed.any() else "none"
    rj = reviewed & (R.auto >= 0)
    rv_conf = grid.sum([R.ai[rj], R.auto[rj], R.human[rj]], [n_arms, 3, 3], R.ii[rj]) if rj.any() else None

    lp_cols: dict[str, np.ndarray] | None = None
    if frames.logprob is not None and len(frames.logprob):
        li = frames.logprob["row"].to_numpy().astype(np.int64)
        lpos = frames.logprob["lp_pos"].to_numpy().astype(np.int64)
        keep = v[li] >= 0
        li, lpos = li[keep], lpos[keep]
        if li.size:
            ws = {
                "n": np.ones(li.size),
                "lp_correct": (lpos == R.gold[li]).astype(np.float64),
                "text_correct": (v[li] == 0).astype(np.float64),
                "mismatch": ((v[li] == 2) | (R.pick[li] < 0) | (lpos < 0) | (lpos != R.pick[li])).astype(
                    np.float64
                ),
            }
            lp_cols = {k: grid.sum([R.ai[li]], [n_arms], R.ii[li], w) for k, w in ws.items()}
    lp_items = (lp_cols["n"] > 0).sum(axis=1) if lp_cols is not None else np.zeros(n_arms)
    items_ai = (rows_ai > 0).sum(axis=1)
    n_uniform_reviewed = int(((R.human >= 0) & R.uniform).sum())

    parsers = _parsers(frames, R, C)

    # ---- bootstrap columns ----
    col = boot.add
    for a in range(n_arms):
        col(f"acc_num/{a}", np.where(present[a], acc_item[a], 0.0))
        col(f"acc_den/{a}", present[a].astype(np.float64))
        for name, arr in (("rows", rows_ai), ("graded", graded_ai), ("c", c_ai_), ("i", i_ai), ("o", o_ai)):
            col(f"{name}/{a}", arr[a])
        col(f"ungraded/{a}", rows_ai[a] - graded_ai[a])
        col(f"answered/{a}", c_ai_[a] + i_ai[a])
        for o in ci_orients:
            if bounds[a * n_or + o] < bounds[a * n_or + o + 1]:
                vec = acc_or(a, o)
                col(f"acc_or_num/{a}/{o}", np.nan_to_num(vec))
                col(f"acc_or_den/{a}/{o}", np.isfinite(vec).astype(np.float64))
        col(f"circ_num/{a}", all_correct[a].astype(np.float64))
        col(f"circ_den/{a}", eligible[a].astype(np.float64))
        col(f"circ_chance/{a}", circ_chance[a])
        for q in range(max_n):
            col(f"gold_c/{a}/{q}", c_gold_ai[a, q])
            col(f"gold_g/{a}/{q}", g_gold_ai[a, q])
            col(f"pick/{a}/{q}", picks_pos[a, q])
        col(f"picked/{a}", picked_ai[a])
        col(f"bin_pairs/{a}", bin_pairs[a])
        col(f"bin_cons/{a}", bin_cons[a])
        col(f"nw_num/{a}", nw_num[a])
        col(f"nw_den/{a}", nw_den[a])
        if rv_conf is not None:
            for name in VERDICTS:
                col(f"share_{name}/{a}", np.nan_to_num(auto_share[name][a]))
            col(f"auto_den/{a}", auto_present[a].astype(np.float64))
            for j in range(3):
                for h in range(3):
                    col(f"rv/{a}/{j}/{h}", rv_conf[a, j, h])
        if lp_cols is not None:
            for k, arr in lp_cols.items():
                col(f"lp_{k}/{a}", arr[a])
    if rv_conf is not None:
        pooled = rv_conf.sum(axis=0)
        for j in range(3):
            for h in range(3):
                col(f"rv/all/{j}/{h}", pooled[j, h])

    # differences: each treated arm against the control, and, with three or more arms, every pair. Arms that
    # share items are compared on those (paired); arms that share none, on their own items (unpaired).
    c0 = arms.index(ctrl) if ctrl is not None else -1
    fp_mixed = _fingerprint_conflicts(info, ctrl)
    treated = [a for a in range(n_arms) if a != c0] if c0 >= 0 else []
    pairs = [(i, j) for i in range(n_arms) for j in range(i + 1, n_arms)] if n_arms >= 3 else []

    def shared(a: int, b: int) -> int:
        return int((present[a] & present[b]).sum())

    if any(shared(t, c0) == 0 for t in treated) or any(shared(i, j) == 0 for i, j in pairs):
        for p in parsers:
            for a in range(n_arms):
                has_p = np.isfinite(p.acc[a])
                col(f"pacc_num/{p.name}/{a}", np.where(has_p, p.acc[a], 0.0))
                col(f"pacc_den/{p.name}/{a}", has_p.astype(np.float64))
    for t in treated:
        both = present[t] & present[c0]
        if not both.any():
            continue
        bf = both.astype(np.float64)
        col(f"d_num/{t}", np.where(both, acc_item[t] - acc_item[c0], 0.0))
        col(f"d_den/{t}", bf)
        for o in ci_orients:
            bo = np.isfinite(acc_or(t, o)) & np.isfinite(acc_or(c0, o))
            if bo.any():
                col(f"d_or_num/{t}/{o}", np.where(bo, acc_or(t, o) - acc_or(c0, o), 0.0))
                col(f"d_or_den/{t}/{o}", bo.astype(np.float64))
        for x, arr in (("o", o_ai), ("graded", graded_ai), ("c", c_ai_)):
            col(f"dp_{x}/{t}/t", arr[t] * bf)
            col(f"dp_{x}/{t}/c", arr[c0] * bf)
        col(f"dp_answered/{t}/t", (c_ai_[t] + i_ai[t]) * bf)
        col(f"dp_answered/{t}/c", (c_ai_[c0] + i_ai[c0]) * bf)
        for p in parsers:
            bp_ = np.isfinite(p.acc[t]) & np.isfinite(p.acc[c0])
            col(f"pd_num/{p.name}/{t}", np.where(bp_, p.acc[t] - p.acc[c0], 0.0))
            col(f"pd_den/{p.name}/{t}", bp_.astype(np.float64))
    for i, j in pairs:
        both = present[i] & present[j]
        if both.any():
            col(f"pw_num/{i}/{j}", np.where(both, acc_item[i] - acc_item[j], 0.0))
            col(f"pw_den/{i}/{j}", both.astype(np.float64))
            col(f"pw_graded/{i}/{j}", (graded_ai[i] + graded_ai[j]) * both)

    S = boot.run()
    ctx = _Ctx(frames, parsers, notes)

    # point estimates for orientations without bootstrap columns
    def or_point(a: int, o: int) -> Metric | None:  # an orientation beyond the CI cap: no item vector
        vals = cell_acc[bounds[a * n_or + o] : bounds[a * n_or + o + 1]]
        vals = vals[np.isfinite(vals)]
        return (
            {"value": _r(float(vals.mean())), "ci_low": None, "ci_high": None, "n": int(vals.size)}
            if vals.size
            else None
        )

    metrics: dict[str, Any] = {}
    for a, arm in enumerate(arms):
        m = _arm_metrics(ctx, S, a, arm, max_n, balanced, chance[a], design)
        m["items"] = int(items_ai[a])
        by_or: dict[str, Any] = {}
        for o, lab in enumerate(orients):
            if bounds[a * n_or + o] == bounds[a * n_or + o + 1]:
                continue
            by_or[lab] = (
                _ratio(S, f"acc_or_num/{a}/{o}", f"acc_or_den/{a}/{o}") if o in ci_orients else or_point(a, o)
            )
        m["accuracy_by_orientation"] = by_or
        if answered[R.ai == a].sum() > picked_ai[a].sum():
            key = f"metrics.{arm}.position_pick_rate"
            extra = "answered rows without a picked letter (gold-shape judge, or a review that gave none) are left out"
            notes[key] = f"{notes[key]}; {extra}" if key in notes else extra
        ag = _agreement(ctx, S, str(a), arm, scope) if rv_conf is not None and f"rv/{a}/0/0" in S else None
        if ag is None:
            notes[f"metrics.{arm}.judge_agreement"] = "no reviewed row with an automated verdict in this arm"
        m["judge_agreement"] = ag
        if lp_cols is None or S[f"lp_n/{a}"][0] == 0:
            m["logprob_crosscheck"] = None
            notes[f"metrics.{arm}.logprob_crosscheck"] = "no graded row carries option_logprobs"
        else:
            m["logprob_crosscheck"] = _logprob(S, a, int(lp_items[a]))
        metrics[arm] = m

    delta: dict[str, Any] = {}
    delta_parser: dict[str, Any] = {}
    for t in treated:
        arm = arms[t]
        pairing = "paired" if shared(t, c0) else "unpaired"
        if arm in fp_mixed:
            delta[arm] = None
            notes[f"delta_accuracy.{arm}"] = fp_mixed[arm]
        else:
            delta[arm] = _arm_delta(ctx, S, t, c0, pairing, ci_orients)
        delta_parser[arm] = _parser_deltas(ctx, S, t, c0, pairing)
    if c0 >= 0 and not treated:
        notes["delta_accuracy"] = "the study has a single arm: nothing to compare"
    pairwise = _pairwise(ctx, S, pairs, {(i, j): shared(i, j) for i, j in pairs}) if pairs else None

    judge_agreement = _agreement(ctx, S, "all", None, scope) if rv_conf is not None else None
    if judge_agreement is None:
        notes["judge_agreement"] = "no reviewed row has an automated verdict to compare"

    result: dict[str, Any] = {
        "control_arm": ctrl,
        "control_source": ctrl_source,
        "metrics": metrics,
        "delta_accuracy": delta,
        "delta_accuracy_by_parser": delta_parser,
        "pairwise_delta": pairwise,
        "judge_agreement": judge_agreement,
        "design": design,
        "audit": {
            "reviews": info.n_reviews,
            "uniform_reviewed_rows": n_uniform_reviewed,
            "required_rows": min(MIN_AUDIT_ROWS, int(R.ai.size)),
            "audited": n_uniform_reviewed >= min(MIN_AUDIT_ROWS, int(R.ai.size)) and not info.unaudited,
        },
        "notes": notes,
    }
    result["flags"] = diagnose(info, result, parsers, verdicts=frames.verdicts)
    return result


def _binary_consistency(
    R: _Rows, c_ai: np.ndarray, c_ii: np.ndarray, answered: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per (arm, item): swapped pairs and consistent ones (CC or II), for items shown in exactly two
    orientations in the arm; one pair per sample index whose two rows are both answered."""
    n_arms, n_items = R.n_arms, R.n_items
    n_orient = np.bincount(c_ai * n_items + c_ii, minlength=n_arms * n_items)
    smax = int(R.sample.max()) + 1 if R.sample.size else 1
    key = ((R.ai * n_items + R.ii) * smax + R.sample)[answered]
    uq, inv = _group(key, n_arms * n_items * smax)
    cnt = np.bincount(inv, minlength=uq.size)
    corr = np.bincount(inv, weights=(R.verdict[answered] == 0).astype(np.float64), minlength=uq.size)
    parent = uq // smax
    pair = (cnt == 2) & (n_orient[parent] == 2)
    consistent = pair & ((corr == 0) | (corr == 2))
    size = n_arms * n_items
    pairs = np.bincount(parent, weights=pair.astype(np.float64), minlength=size).reshape(n_arms, n_items)
    cons = np.bincount(parent, weights=consistent.astype(np.float64), minlength=size).reshape(n_arms, n_items)
    return pairs, cons


def _nway_consistency(
    R: _Rows, orients: list[str], max_n: int, answered: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per (arm, item): share of rows choosing the plurality choice (a canonical option, or OTHER), for
    items with choices in two or more orientations. A CORRECT row without a letter chose the gold option;
    an INCORRECT one without a letter is left out (its option is unknown)."""
    n_arms, n_items, n_or = R.n_arms, R.n_items, R.n_or
    canon = np.full((max(n_or, 1), max_n), -1, dtype=np.int64)
    for o, lab in enumerate(orients):
        for p, ch in enumerate(lab[:max_n]):
            canon[o, p] = LETTERS.index(ch)
    choice = np.full(R.ai.size, -1, dtype=np.int64)
    choice[R.verdict == 2] = max_n
    m = answered & (R.pick >= 0)
    choice[m] = canon[R.oi[m], R.pick[m]]
    m2 = (R.verdict == 0) & (R.pick < 0)
    choice[m2] = canon[R.oi[m2], np.clip(R.gold[m2], 0, max_n - 1)]
    sel = choice >= 0
    size = n_arms * n_items
    num, den = np.zeros(size), np.zeros(size)
    if not sel.any():
        return num.reshape(n_arms, n_items), den.reshape(n_arms, n_items)
    k = max_n + 1
    ai_ii = (R.ai * n_items + R.ii)[sel]
    uq, inv = _group(ai_ii * k + choice[sel], size * k)
    cnt = np.bincount(inv, minlength=uq.size)
    parent = uq // k
    starts = np.flatnonzero(np.r_[True, parent[1:] != parent[:-1]])
    plural = np.maximum.reduceat(cnt, starts)
    total = np.add.reduceat(cnt, starts)
    par = parent[starts]
    uo, _ = _group(ai_ii * max(n_or, 1) + R.oi[sel], size * max(n_or, 1))
    n_orient = np.bincount(uo // max(n_or, 1), minlength=size)
    ok = n_orient[par] >= 2
    num[par[ok]] = plural[ok] / total[ok]
    den[par[ok]] = 1.0
    return num.reshape(n_arms, n_items), den.reshape(n_arms, n_items)


def _position_chance(
    c_ai: np.ndarray, c_gold: np.ndarray, c_nopt: np.ndarray, n_picked: np.ndarray, n_arms: int, max_n: int
) -> list[dict[str, Any]]:
    """Per arm and position: the pick share expected without position preference — 1/n averaged over the
    picked rows (balanced design), and the share of picked rows whose gold letter is there."""
    out = []
    for a in range(n_arms):
        sel = c_ai == a
        w, n, g = n_picked[sel], c_nopt[sel], c_gold[sel]
        tot = float(w.sum())
        uniform = {q: _r(float((w * (n > q) / n).sum()) / tot) if tot else None for q in range(max_n)}
        gold = {q: _r(float(w[g == q].sum()) / tot) if tot else None for q in range(max_n)}
        out.append({"uniform": uniform, "gold": gold})
    return out


def _balance(R: _Rows) -> tuple[bool, dict[str, dict[str, float]]]:
    """Whether gold positions are uniform within each option count (all rows), and their shares."""
    shares: dict[str, dict[str, float]] = {}
    balanced = True
    if not R.n_opt.size:
        return True, shares
    top = int(R.n_opt.max()) + 1
    counts = np.bincount(R.n_opt * top + np.clip(R.gold, 0, top - 1), minlength=top * top).reshape(top, top)
    for n in range(2, top):
        tot = float(counts[n].sum())
        if tot == 0:
            continue
        sh = {LETTERS[p]: float(counts[n, p]) / tot for p in range(n)}
        shares[str(n)] = {k: round(x, 6) for k, x in sh.items()}
        if max(abs(x - 1 / n) for x in sh.values()) > BALANCE_TOLERANCE:
            balanced = False
    return balanced, shares


def _design(
    orients: list[str], balanced: bool, gold_share: Mapping[str, Mapping[str, float]]
) -> dict[str, Any]:
    """Whether the design can separate position from content (DESIGN §7 ``design_imbalance``).

    Gold letters are *unbalanced* when some displayed position holds under half or over one and a half times
    its fair share 1/n of them (all gold at A, say): a position preference and the answers are then the same
    thing, so pick rates and RStd cannot be read. With *one orientation only* (per option count) nothing
    shows an item's options in another order, so the Δ cannot be checked per orientation.
    """
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
    return {
        "balanced": balanced,
        "gold_position_share": dict(gold_share),
        "gold_unbalanced": bool(skewed),
        "one_orientation": one,
        "separates_position": not (skewed or one),
        "unreadable": unreadable,
        "reason": "; ".join(reasons) or None,
    }


def _fp_conflict(info: StudyInfo, a: str, b: str) -> str | None:
    """Why arms ``a`` and ``b`` cannot be compared (graded under different judge fingerprints), or None."""
    fa, fb = set(info.arm_fingerprints.get(a, {})), set(info.arm_fingerprints.get(b, {}))
    if len(fa) > 1 or len(fb) > 1 or (fa and fb and fa != fb):
        return (
            f"not compared: {a!r} was graded under judge fingerprint(s) {', '.join(sorted(fa)) or 'none'} "
            f"and {b!r} under {', '.join(sorted(fb)) or 'none'}; re-grade both arms with one judge"
        )
    return None


def _fingerprint_conflicts(info: StudyInfo, ctrl: str | None) -> dict[str, str]:
    """Treated arms that cannot be compared with the control: graded under other judge fingerprints."""
    out: dict[str, str] = {}
    if ctrl is None:
        return out
    for arm in info.arms:
        if arm != ctrl and (why := _fp_conflict(info, arm, ctrl)):
            out[arm] = why
    return out


def _ratio(S: Sums, num: str, den: str, *, se: bool = False) -> Metric | None:
    d = S[den]
    return summarize(_div(S[num], d), int(round(d[0])), se=se)


def _arm_metrics(
    ctx: _Ctx,
    S: Sums,
    a: int,
    arm: str,
    max_n: int,
    balanced: bool,
    chance: Mapping[str, Any],
    design: Mapping[str, Any],
) -> dict[str, Any]:
    notes = ctx.notes
    p = f"metrics.{arm}"

    def note(key: str, reason: str) -> None:
        notes[f"{p}.{key}"] = reason

    out: dict[str, Any] = {"rows": int(S[f"rows/{a}"][0]), "graded": int(S[f"graded/{a}"][0])}
    out["accuracy"] = _ratio(S, f"acc_num/{a}", f"acc_den/{a}")
    if out["accuracy"] is None:
        note("accuracy", "no graded row in this arm")
    out["answered_accuracy"] = _ratio(S, f"c/{a}", f"answered/{a}")
    if out["answered_accuracy"] is None:
        note("answered_accuracy", "no CORRECT or INCORRECT row in this arm")
    out["other_rate"] = _ratio(S, f"o/{a}", f"graded/{a}")
    if out["other_rate"] is None:
        note("other_rate", "no graded row in this arm")
    out["ungraded_rate"] = _ratio(S, f"ungraded/{a}", f"rows/{a}")
    out["accuracy_by_orientation"] = {}  # filled by compute(); placed here for reading order

    circ = _ratio(S, f"circ_num/{a}", f"circ_den/{a}")
    if circ is None:
        note(
            "circular_accuracy", "no item has a verdict in every one of two or more orientations in this arm"
        )
    else:
        circ["chance"] = _r(S[f"circ_chance/{a}"][0] / S[f"circ_den/{a}"][0])
    out["circular_accuracy"] = circ

    picked = S[f"picked/{a}"]
    base = chance["uniform" if balanced else "gold"]
    out["position_baseline"] = "uniform" if balanced else "gold"
    unreadable = (
        f"unreadable: {design['reason']}; the design cannot separate a position preference from the answers"
    )
    if design["gold_unbalanced"]:
        out["position_pick_rate"] = None
        out["first_position_rate"] = None
        note("position_pick_rate", unreadable)
    elif not balanced:
        note(
            "position_pick_rate",
            "unbalanced design (gold letters are not uniform over positions): pick rates are compared with "
            "the gold-letter distribution, not 1/n",
        )
    if design["gold_unbalanced"]:
        pass
    elif picked[0] == 0:
        out["position_pick_rate"] = None
        out["first_position_rate"] = None
        note("position_pick_rate", "no answered row with a picked letter in this arm")
    else:
        ppr: dict[str, Any] = {}
        for q in range(max_n):
            m = summarize(_div(S[f"pick/{a}/{q}"], picked), int(picked[0]))
            if m is not None:
                m["chance"] = base.get(q)
            ppr[LETTERS[q]] = m
        out["position_pick_rate"] = ppr
        out["first_position_rate"] = ppr[LETTERS[0]]

    # RStd (Zheng et al. 2024): std over gold letters of recall, in percentage points
    letters_ = [q for q in range(max_n) if S[f"gold_g/{a}/{q}"][0] > 0]
    if design["gold_unbalanced"]:
        out["rstd"] = None
        out["recall_by_gold_letter"] = {}
        note("rstd", unreadable)
    elif len(letters_) >= 2:
        rec = np.stack([_div(S[f"gold_c/{a}/{q}"], S[f"gold_g/{a}/{q}"]) for q in letters_], axis=1)
        with np.errstate(invalid="ignore"):
            rstd = 100 * np.std(rec, axis=1)
        out["rstd"] = summarize(rstd, int(S[f"graded/{a}"][0]))
        out["recall_by_gold_letter"] = {
            LETTERS[q]: summarize(rec[:, j], int(S[f"gold_g/{a}/{q}"][0])) for j, q in enumerate(letters_)
        }
    else:
        out["rstd"] = None
        out["recall_by_gold_letter"] = {}
        note("rstd", "fewer than two gold letters have graded rows")

    cons: dict[str, Any] = {
        "binary": _ratio(S, f"bin_cons/{a}", f"bin_pairs/{a}"),
        "nway": _ratio(S, f"nw_num/{a}", f"nw_den/{a}"),
    }
    if cons["binary"] is None:
        note("consistency.binary", "no item shown in exactly two orientations with both rows answered")
    if cons["nway"] is None:
        note("consistency.nway", "no item has choices in two or more orientations")
    out["consistency"] = cons
    out["parser_disagreement"] = _parser_disagreement(ctx, a)
    return out


def _logprob(S: Sums, a: int, items: int) -> dict[str, Any]:
    n_lp = int(S[f"lp_n/{a}"][0])
    lp_acc = _div(S[f"lp_lp_correct/{a}"], S[f"lp_n/{a}"])
    tx_acc = _div(S[f"lp_text_correct/{a}"], S[f"lp_n/{a}"])
    return {
        "accuracy_logprob": summarize(lp_acc, n_lp),
        "accuracy_text": summarize(tx_acc, n_lp),
        "difference": summarize(lp_acc - tx_acc, n_lp),
        "mismatch_rate": summarize(_div(S[f"lp_mismatch/{a}"], S[f"lp_n/{a}"]), n_lp),
        "items": items,
    }


def _wilson(d: float, n: float, var: float) -> tuple[float, float]:
    """Wilson interval on an effective sample size that carries the item clustering (design effect)."""
    if n <= 0:
        return (math.nan, math.nan)
    r = d / n
    srs = r * (1 - r) / n
    n_eff = n if srs <= 0 or var <= 0 else max(1.0, min(n, n * srs / var))
    z = 1.959963984540054
    den = 1 + z * z / n_eff
    centre = (r + z * z / (2 * n_eff)) / den
    half = z * math.sqrt(r * (1 - r) / n_eff + z * z / (4 * n_eff * n_eff)) / den
    lo, hi = centre - half, centre + half
    return (0.0 if lo < 1e-12 else lo), (1.0 if hi > 1 - 1e-12 else hi)


def clustered_rate(sums: np.ndarray | Iterable[float]) -> Metric | None:
    """A rate Σd/Σn over item clusters, from ``(k, Σn, Σd, Σd², Σd·n, Σn²)``, with a Wilson 95 % CI whose
    effective sample size carries the clustered (ratio-estimator) variance."""
    k, sn, sd, sdd, sdn, snn = (float(x) for x in sums)
    if sn <= 0:
        return None
    r = sd / sn
    ss = sdd - 2 * r * sdn + r * r * snn  # Σ (d_i − r n_i)²
    var = (k / (k - 1)) * max(ss, 0.0) / (sn * sn) if k > 1 else 0.0
    lo, hi = _wilson(sd, sn, var)
    return {"value": _r(r), "ci_low": _r(lo), "ci_high": _r(hi), "n": int(round(sn))}


def _confusion(m: np.ndarray) -> dict[str, dict[str, int]]:
    return {VERDICTS[j]: {VERDICTS[h]: int(m[j, h]) for h in range(3)} for j in range(3)}


def _parser_disagreement(ctx: _Ctx, a: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    orients = ctx.frames.info.orientations
    for p in ctx.parsers:
        conf = p.confusion[a]
        if conf.sum() == 0:
            continue
        entry: dict[str, Any] = {
            "rate": clustered_rate(p.by_arm[a]),
            "confusion": _confusion(conf.sum(axis=0)),
            "by_orientation": {
                lab: {"rate": clustered_rate(p.by_cell[a, o]), "confusion": _confusion(conf[o])}
                for o, lab in enumerate(orients)
                if conf[o].sum() > 0
            },
        }
        if p.name == "strict":
            entry["compared"] = "rows the pre-filter resolved; a letter-less row was deferred to the judge"
        out[p.name] = entry
    return out


def _agreement(ctx: _Ctx, S: Sums, key: str, arm: str | None, scope: str) -> dict[str, Any] | None:
    """Automated verdict vs the reviewer's on reviewed rows; per arm, accuracy corrected by the review."""
    if f"rv/{key}/0/0" not in S:
        return None
    conf = np.array([[S[f"rv/{key}/{j}/{h}"] for h in range(3)] for j in range(3)])  # (3, 3, B + 1)
    total = conf.sum(axis=(0, 1))
    n = int(round(total[0]))
    if n == 0:
        return None
    row = conf.sum(axis=1)  # automated verdict
    colm = conf.sum(axis=0)  # reviewer's verdict
    po = _div(np.einsum("kkb->b", conf), total)
    pe = sum(_div(row[k], total) * _div(colm[k], total) for k in range(3))
    kappa = _div(po - pe, 1 - pe)
    out: dict[str, Any] = {
        "sample": scope,
        "reviewed_rows": n,
        "preliminary": n < MIN_AUDIT_ROWS,
        "agreement": summarize(po, n),
        "kappa": summarize(kappa, n),
        "precision": {
            VERDICTS[k]: summarize(_div(conf[k, k], row[k]), int(round(row[k][0]))) for k in range(3)
        },
        "confusion": {
            VERDICTS[j]: {VERDICTS[h]: int(round(conf[j, h, 0])) for h in range(3)} for j in range(3)
        },
    }
    where = "judge_agreement" if arm is None else f"metrics.{arm}.judge_agreement"
    for k in range(3):
        if out["precision"][VERDICTS[k]] is None:
            ctx.notes[f"{where}.precision.{VERDICTS[k]}"] = (
                f"no reviewed row with automated verdict {VERDICTS[k]}"
            )
    if scope != "uniform":
        out["caveat"] = "reviewed rows are not a uniform spot check: agreement may be biased"
    if arm is not None:
        a = int(key)
        # Σ_V (item-weighted share of automated verdict V) × P(reviewer says CORRECT | automated V)
        corr = np.zeros_like(total)
        assumed = []
        for k in range(3):
            share = _div(S[f"share_{VERDICTS[k]}/{a}"], S[f"auto_den/{a}"])
            if row[k][0] > 0:
                q = _div(conf[k, 0], row[k])
            else:
                q = np.full_like(total, 1.0 if k == 0 else 0.0)
                if S[f"share_{VERDICTS[k]}/{a}"][0] > 0:
                    assumed.append(VERDICTS[k])
            corr = corr + share * q
        m = summarize(corr, int(round(S[f"auto_den/{a}"][0])))
        if m is not None:
            m["preliminary"] = n < MIN_AUDIT_ROWS
        if m is not None and assumed:
            m["assumed_exact"] = assumed
            ctx.notes[f"metrics.{arm}.judge_agreement.corrected_accuracy"] = (
                f"no reviewed row with automated verdict {', '.join(assumed)}: taken as exact"
            )
        out["corrected_accuracy"] = m
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _unpaired(S: Sums, num_t: str, den_t: str, num_c: str, den_c: str, n: int) -> Metric | None:
    """The difference of two arms' ratios, each over its own items (independent item-clustered CIs)."""
    return summarize(_div(S[num_t], S[den_t]) - _div(S[num_c], S[den_c]), n, se=True)


def _too_few(pairing: str, items: int, n_t: int, n_c: int, arm: str, ctrl: str) -> str | None:
    """Why a Δ between two arms is not computed (DESIGN §7: fewer than 20 items), or None."""
    if pairing == "paired":
        return (
            None
            if items >= MIN_ITEMS
            else f"{_plural(items, 'shared item')} (a Δ needs at least {MIN_ITEMS})"
        )
    if min(n_t, n_c) >= MIN_ITEMS:
        return None
    return (
        f"the arms share no items; compared unpaired, {arm} has {_plural(n_t, 'graded item')} and {ctrl} "
        f"{n_c} (each needs at least {MIN_ITEMS})"
    )


def _arm_delta(ctx: _Ctx, S: Sums, t: int, c: int, pairing: str, ci_orients: set[int]) -> dict[str, Any]:
    """Treated − control: paired on the items both arms answered, else unpaired over each arm's own items."""
    info = ctx.frames.info
    arm, ctrl = info.arms[t], info.arms[c]
    key = f"delta_accuracy.{arm}"
    n_t, n_c = int(S[f"acc_den/{t}"][0]), int(S[f"acc_den/{c}"][0])
    if pairing == "paired":
        items = int(S[f"d_den/{t}"][0])
        rows = int(round(S[f"dp_graded/{t}/t"][0] + S[f"dp_graded/{t}/c"][0]))
    else:
        items = n_t + n_c
        rows = int(S[f"graded/{t}"][0] + S[f"graded/{c}"][0])
    out: dict[str, Any] = {
        "overall": None,
        "by_orientation": {},
        "other_rate": None,
        "answered_accuracy": None,
        "items": items,
        "rows": rows,
        "pairing": pairing,
    }
    if pairing == "unpaired":
        out["items_by_arm"] = {arm: n_t, ctrl: n_c}
    short = _too_few(pairing, items, n_t, n_c, arm, ctrl)
    if short is not None:
        ctx.notes[f"{key}.overall"] = short
        return out
    by: dict[str, Any] = {}
    if pairing == "paired":
        out["overall"] = _ratio(S, f"d_num/{t}", f"d_den/{t}", se=True)
        for o, lab in enumerate(info.orientations):
            if f"d_or_den/{t}/{o}" not in S:
                continue
            k = int(S[f"d_or_den/{t}/{o}"][0])
            by[lab] = _ratio(S, f"d_or_num/{t}/{o}", f"d_or_den/{t}/{o}", se=True) if k >= MIN_ITEMS else None
            if by[lab] is None:
                ctx.notes[f"{key}.by_orientation.{lab}"] = f"{_plural(k, 'shared item')} in {lab}"

        def diff(x: str, den: str) -> Metric | None:
            return summarize(
                _div(S[f"dp_{x}/{t}/t"], S[f"dp_{den}/{t}/t"])
                - _div(S[f"dp_{x}/{t}/c"], S[f"dp_{den}/{t}/c"]),
                items,
                se=True,
            )

        out["other_rate"] = diff("o", "graded")
        out["answered_accuracy"] = diff("c", "answered")
    else:
        out["overall"] = _unpaired(S, f"acc_num/{t}", f"acc_den/{t}", f"acc_num/{c}", f"acc_den/{c}", items)
        for o, lab in enumerate(info.orientations):
            if o not in ci_orients or f"acc_or_den/{t}/{o}" not in S or f"acc_or_den/{c}/{o}" not in S:
                continue
            kt, kc = int(S[f"acc_or_den/{t}/{o}"][0]), int(S[f"acc_or_den/{c}/{o}"][0])
            if min(kt, kc) >= MIN_ITEMS:
                by[lab] = _unpaired(
                    S, f"acc_or_num/{t}/{o}", f"acc_or_den/{t}/{o}", f"acc_or_num/{c}/{o}", f"acc_or_den/{c}/{o}",
                    kt + kc,
                )  # fmt: skip
            else:
                by[lab] = None
                ctx.notes[f"{key}.by_orientation.{lab}"] = f"unpaired: {kt} and {kc} items in {lab}"
        out["other_rate"] = _unpaired(S, f"o/{t}", f"graded/{t}", f"o/{c}", f"graded/{c}", items)
        out["answered_accuracy"] = _unpaired(S, f"c/{t}", f"answered/{t}", f"c/{c}", f"answered/{c}", items)
        ctx.notes[key] = (
            f"{arm} and {ctrl} share no items: compared unpaired ({n_t} and {n_c} items, independent item samples)"
        )
    out["by_orientation"] = by
    return out


def _parser_deltas(ctx: _Ctx, S: Sums, t: int, c: int, pairing: str) -> dict[str, Any]:
    """The Δ each parser's letters give, on the same footing (paired or unpaired) as the verdicts' Δ."""
    arm = ctx.frames.info.arms[t]
    out: dict[str, Any] = {}
    for p in ctx.parsers:
        key = f"delta_accuracy_by_parser.{arm}.{p.name}"
        mm: Metric | None = None
        if pairing == "paired":
            k = int(S[f"pd_den/{p.name}/{t}"][0])
            if k >= MIN_ITEMS:
                mm = _ratio(S, f"pd_num/{p.name}/{t}", f"pd_den/{p.name}/{t}", se=True)
            else:
                ctx.notes[key] = (
                    "no item graded in both arms"
                    if k == 0
                    else f"{_plural(k, 'shared item')} (a Δ needs at least {MIN_ITEMS})"
                )
        else:
            kt, kc = int(S[f"pacc_den/{p.name}/{t}"][0]), int(S[f"pacc_den/{p.name}/{c}"][0])
            if min(kt, kc) >= MIN_ITEMS:
                mm = _unpaired(
                    S, f"pacc_num/{p.name}/{t}", f"pacc_den/{p.name}/{t}", f"pacc_num/{p.name}/{c}",
                    f"pacc_den/{p.name}/{c}", kt + kc,
                )  # fmt: skip
                if mm is not None:
                    mm["pairing"] = "unpaired"
            else:
                ctx.notes[key] = f"unpaired: {kt} and {kc} items (each needs at least {MIN_ITEMS})"
        out[p.name] = mm
    return out


def _negated(m: Metric) -> Metric:
    out = dict(m)
    out["value"] = _r(-m["value"]) if m.get("value") is not None else None
    lo, hi = m.get("ci_low"), m.get("ci_high")
    out["ci_low"] = _r(-hi) if hi is not None else None
    out["ci_high"] = _r(-lo) if lo is not None else None
    return out


def _pairwise(
    ctx: _Ctx, S: Sums, pairs: list[tuple[int, int]], shared: Mapping[tuple[int, int], int]
) -> dict[str, dict[str, Any]]:
    """Δaccuracy (row arm − column arm) for every pair of arms, on their shared items (or unpaired)."""
    info = ctx.frames.info
    arms = info.arms
    out: dict[str, dict[str, Any]] = {a: {} for a in arms}
    for i, j in pairs:
        a, b = arms[i], arms[j]
        key = f"pairwise_delta.{a}.{b}"
        conflict = _fp_conflict(info, a, b)
        k = shared[(i, j)]
        m: Metric | None = None
        if conflict:
            ctx.notes[key] = conflict
        elif k:
            if k >= MIN_ITEMS:
                m = _ratio(S, f"pw_num/{i}/{j}", f"pw_den/{i}/{j}", se=True)
                if m is not None:
                    m.update(items=k, rows=int(round(S[f"pw_graded/{i}/{j}"][0])), pairing="paired")
            else:
                ctx.notes[key] = f"{_plural(k, 'shared item')} (a Δ needs at least {MIN_ITEMS})"
        else:
            ni, nj = int(S[f"acc_den/{i}"][0]), int(S[f"acc_den/{j}"][0])
            if min(ni, nj) >= MIN_ITEMS:
                m = _unpaired(S, f"acc_num/{i}", f"acc_den/{i}", f"acc_num/{j}", f"acc_den/{j}", ni + nj)
                if m is not None:
                    m.update(
                        items=ni + nj, rows=int(S[f"graded/{i}"][0] + S[f"graded/{j}"][0]), pairing="unpaired"
                    )
            else:
                ctx.notes[key] = (
                    f"no shared items; unpaired, {a} has {ni} and {b} {nj} (each needs {MIN_ITEMS})"
                )
        out[a][b] = m
        out[b][a] = _negated(m) if m is not None else None
    return out


# --- diagnostics -----------------------------------------------------------------------------------------
def _fmt(x: float | None, pct: bool = False, sign: bool = False) -> str:
    if x is None:
        return "n/a"
    if pct:
        return f"{x * 100:+.1f} pp" if sign else f"{x * 100:.1f} %"
    return f"{x:+.3f}" if sign else f"{x:.3f}"


def fmt_metric(m: Metric | None, *, pct: bool = False, sign: bool = False) -> str:
    """``0.712 [0.661, 0.758]`` (or percentages / signed) for evidence strings and tables."""
    if m is None:
        return "n/a"
    s = _fmt(m.get("value"), pct, sign)
    if m.get("ci_low") is not None and m.get("ci_high") is not None:
        s += f" [{_fmt(m['ci_low'], pct, sign)}, {_fmt(m['ci_high'], pct, sign)}]"
    return s


def _excludes_zero(m: Metric | None) -> bool:
    return bool(
        m and m["ci_low"] is not None and m["ci_high"] is not None and (m["ci_low"] > 0 or m["ci_high"] < 0)
    )


def _flag(name: str, arm: str | None, evidence: str, items: int, rows: int, **extra: Any) -> dict[str, Any]:
    """A named flag with its evidence and its n: the items and rows the evidence rests on."""
    f: dict[str, Any] = {
        "name": name,
        "arm": arm,
        "evidence": evidence,
        "items": int(items),
        "rows": int(rows),
        "page": FLAG_PAGES[name],
    }
    f.update(extra)
    return f


def orientation_instability(delta: Mapping[str, Any]) -> str | None:
    """Evidence when the Δ is position bias rather than the intervention (DESIGN §7), else None.

    Fires when two orientations have Δs of opposite sign whose CIs each exclude 0, or when the overall
    Δ's CI excludes 0 and some orientation's Δ CI lies entirely on the near side of half the overall Δ
    (that orientation shrinks the effect by more than half). Both need CIs that exclude a value, so noise
    around a null effect fires it only at about the tests' 5 % level.
    """
    by = {
        k: v
        for k, v in delta.get("by_orientation", {}).items()
        if v is not None and v.get("ci_low") is not None
    }
    pos = sorted((k for k, v in by.items() if v["ci_low"] > 0), key=lambda k: -by[k]["value"])
    neg = sorted((k for k, v in by.items() if v["ci_high"] < 0), key=lambda k: by[k]["value"])
    if pos and neg:
        a, b = pos[0], neg[0]
        return (
            f"Δ {fmt_metric(by[a], pct=True, sign=True)} in {a} but {fmt_metric(by[b], pct=True, sign=True)} in {b}: "
            "opposite signs, both CIs exclude 0"
        )
    ov = delta.get("overall")
    if ov is None or not _excludes_zero(ov) or len(by) < 2:
        return None
    d = ov["value"]
    half = d / 2
    shrunk = [k for k, v in by.items() if (v["ci_high"] < half if d > 0 else v["ci_low"] > half)]
    if not shrunk:
        return None
    k = min(shrunk, key=lambda x: abs(by[x]["value"]))
    parts = ", ".join(f"{lab} {_fmt(v['value'], True, True)}" for lab, v in by.items())
    return (
        f"overall Δ {fmt_metric(ov, pct=True, sign=True)}, but in {k} Δ {fmt_metric(by[k], pct=True, sign=True)} "
        f"lies entirely below half of it ({parts})"
    )


def parser_artifact(judge: Metric | None, parser: Metric | None) -> bool:
    """A parser's Δ differs from the verdicts' Δ in sign (either one clearly non-zero) or lies outside its CI."""
    if judge is None or parser is None or judge.get("ci_low") is None:
        return False
    pj, pp = judge["value"], parser["value"]
    outside = pp < judge["ci_low"] or pp > judge["ci_high"]
    opposite = (pj > 0 > pp) or (pj < 0 < pp)
    return outside or (opposite and (_excludes_zero(judge) or _excludes_zero(parser)))


def diagnose(
    info: StudyInfo, res: Mapping[str, Any], parsers: list[_ParserAgg], verdicts: str = "final"
) -> list[dict[str, Any]]:
    """The named flags of DESIGN §7, each with its evidence and n, most important first.

    A flag read off an estimate fires only on at least :data:`MIN_ITEMS` items (a Δ with fewer is null and
    drives none); the flags in :data:`FACT_FLAGS` state facts about the study and fire at any size.
    """
    flags: list[dict[str, Any]] = []
    ctrl = res["control_arm"]
    metrics = res["metrics"]
    design = res["design"]
    n_rows = sum(info.rows_by_arm.values())
    for arm, dp in res["delta_accuracy_by_parser"].items():
        dj = res["delta_accuracy"].get(arm)
        if dj is None or dj["overall"] is None:
            continue
        for name, m in dp.items():
            if name in ARTIFACT_PARSERS_EXCLUDED or m is None or m["n"] < MIN_ITEMS:
                continue
            if parser_artifact(dj["overall"], m):
                flags.append(
                    _flag(
                        "suspected_parser_artifact",
                        arm,
                        f"the {name} parser's letters give Δaccuracy {fmt_metric(m, pct=True, sign=True)} for "
                        f"{arm} vs {ctrl}; the {verdicts} verdicts give "
                        f"{fmt_metric(dj['overall'], pct=True, sign=True)} ({dj['items']} items, {dj['pairing']})",
                        min(m["n"], dj["items"]),
                        dj["rows"],
                        parser=name,
                    )
                )
    for arm, d in res["delta_accuracy"].items():
        if d is None or d["overall"] is None or design["one_orientation"]:
            continue
        ev = orientation_instability(d)
        if ev:
            flags.append(_flag("orientation_instability", arm, ev, d["items"], d["rows"]))
    for arm, d in res["delta_accuracy"].items():
        if d is None or d["other_rate"] is None:
            continue
        if d["other_rate"]["ci_low"] is not None and d["other_rate"]["ci_low"] > 0:
            mt, mc = metrics[arm]["other_rate"], metrics[ctrl]["other_rate"]
            flags.append(
                _flag(
                    "other_rate_rise",
                    arm,
                    f"OTHER rate {_fmt(mt and mt['value'], True)} vs {_fmt(mc and mc['value'], True)} in {ctrl} "
                    f"(Δ {fmt_metric(d['other_rate'], pct=True, sign=True)}); Δaccuracy "
                    f"{fmt_metric(d['overall'], pct=True, sign=True)}, recomputed with OTHER excluded "
                    f"(answered accuracy) Δ {fmt_metric(d['answered_accuracy'], pct=True, sign=True)}",
                    d["items"],
                    d["rows"],
                )
            )
    used = sorted({fp for fps in info.arm_fingerprints.values() for fp in fps})
    if len(used) > 1:
        parts = []
        for fp in used:
            cfg = info.judge_configs.get(fp, {})
            arms_ = [a for a in info.arms if fp in info.arm_fingerprints.get(a, {})]
            parts.append(f"{fp[:12]} ({cfg.get('model', '?')}, {cfg.get('shape', '?')}): {', '.join(arms_)}")
        flags.append(
            _flag(
                "judge_config_mixed",
                None,
                "verdicts come from different judge configurations — "
                + "; ".join(parts)
                + ". Differences between arms graded under different fingerprints are not computed.",
                info.n_items,
                n_rows,
            )
        )
    flags += _parser_disagreement_flags(parsers)
    for arm, m in metrics.items():
        lp = m.get("logprob_crosscheck")
        if (
            lp
            and lp["difference"]
            and lp["items"] >= MIN_ITEMS
            and abs(lp["difference"]["value"]) > LOGPROB_MISMATCH_MAX
        ):
            flags.append(
                _flag(
                    "logprob_mismatch",
                    arm,
                    f"accuracy by argmax log-prob {_fmt(lp['accuracy_logprob']['value'], True)} vs by text "
                    f"{_fmt(lp['accuracy_text']['value'], True)} (difference "
                    f"{fmt_metric(lp['difference'], pct=True, sign=True)}, {lp['difference']['n']} rows): "
                    "log-prob accuracy is diagnostic only",
                    lp["items"],
                    lp["difference"]["n"],
                )
            )
    for arm, m in metrics.items():
        rows, graded = m["rows"], m["graded"]
        if rows > graded:
            flags.append(
                _flag(
                    "ungraded_rows",
                    arm,
                    f"{rows - graded} of {rows} rows ({_fmt((rows - graded) / rows, True)}) have no verdict "
                    "(judge error or pending); they are left out of every denominator — re-run `mcqaudit grade`",
                    m["items"],
                    rows,
                    ungraded=rows - graded,
                )
            )
    if design["reason"]:
        names = {
            "position_pick_rate": "position pick rates",
            "first_position_rate": "the first-position rate",
            "rstd": "RStd",
            "orientation_instability": "the orientation check (orientation_instability)",
        }
        flags.append(
            _flag(
                "design_imbalance",
                None,
                f"the design cannot separate position from content: {design['reason']}. Unreadable here: "
                + ", ".join(names[k] for k in design["unreadable"]),
                info.n_items,
                n_rows,
                unreadable=list(design["unreadable"]),
            )
        )
    audit = res["audit"]
    reasons = []
    if info.unaudited:
        reasons.append("the study was graded with --no-judge (strict pre-filter only)")
    if info.n_reviews == 0:
        reasons.append("no human review yet: no verdict has been spot-checked")
    elif audit["uniform_reviewed_rows"] < audit["required_rows"]:
        reasons.append(
            f"{audit['uniform_reviewed_rows']} of the {audit['required_rows']} rows of a uniform spot check that "
            f"audit the judge are reviewed ({info.n_reviews} reviews in all, of {n_rows} rows); agreement "
            "figures are preliminary"
        )
    if reasons:
        flags.append(
            _flag(
                "judge_unaudited",
                None,
                "; ".join(reasons),
                info.n_items,
                n_rows,
                reviewed_rows=audit["uniform_reviewed_rows"],
                required_rows=audit["required_rows"],
            )
        )
    return flags


def _parser_disagreement_flags(parsers: list[_ParserAgg]) -> list[dict[str, Any]]:
    """A parser disagreeing with the verdicts on > 5 % of a ≥ 100-row sample: the uniform spot check
    when it has enough rows, else every graded row."""
    out: list[dict[str, Any]] = []
    for p in parsers:
        if p.spot is not None and p.spot[1] >= PARSER_DISAGREEMENT_MIN_ROWS:
            src, sums = "the uniform spot check", p.spot
        elif p.pooled[1] >= PARSER_DISAGREEMENT_MIN_ROWS:
            src, sums = "all graded rows", p.pooled
        else:
            continue
        m = clustered_rate(sums)
        if m and m["value"] > PARSER_DISAGREEMENT_MAX and sums[0] >= MIN_ITEMS:
            what = "rows it resolved" if p.name == "strict" else "rows"
            out.append(
                _flag(
                    "parser_disagreement",
                    None,
                    f"the {p.name} parser disagrees with the verdicts on {fmt_metric(m, pct=True)} of {m['n']} "
                    f"{what} ({src})",
                    int(sums[0]),
                    m["n"],
                    parser=p.name,
                )
            )
    return out


def sort_flags(flags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    order = {n: i for i, n in enumerate(FLAG_ORDER)}
    return sorted(flags, key=lambda f: order.get(f["name"], len(order)))


__all__ = [
    "ItemBootstrap",
    "StudyFrames",
    "StudyInfo",
    "clustered_rate",
    "compute",
    "diagnose",
    "fmt_metric",
    "orientation_instability",
    "parser_artifact",
    "resolve_control",
    "summarize",
]
