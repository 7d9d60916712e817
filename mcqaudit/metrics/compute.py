"""Every metric, difference and flag of docs/design.md §7 from a study's frames: the one entry point
:func:`compute`, which aggregates rows into per-item vectors, registers them as bootstrap columns, runs one
item bootstrap, and hands the sums to each metric family (:mod:`~mcqaudit.metrics.accuracy`,
:mod:`~mcqaudit.metrics.bias`, :mod:`~mcqaudit.metrics.parsers`, :mod:`~mcqaudit.metrics.agreement`) and the
results to :mod:`~mcqaudit.metrics.diagnostics`. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from mcqaudit.metrics import accuracy, agreement, bias, panel, reviewers, rules
from mcqaudit.metrics.bootstrap import (
    Column,
    ItemBootstrap,
    Sums,
    proportion,
    ratio,
    round6,
    safe_div,
    summarize,
)
from mcqaudit.metrics.cells import (
    Cells,
    Families,
    ItemGrid,
    Rows,
    cells_of,
    cluster_sums,
    code_col,
    code_counts,
    item_families,
    rows_of,
)
from mcqaudit.metrics.diagnostics import diagnose
from mcqaudit.metrics.inputs import StudyFrames, column
from mcqaudit.metrics.parsers import ParserTally, parser_disagreement, parser_letters, parser_tallies
from mcqaudit.metrics.results import (
    ArmDelta,
    ArmMetrics,
    Design,
    FamilyMetrics,
    JudgeAgreement,
    LogprobCrosscheck,
    Metric,
    Notes,
    Pairing,
    Results,
)
from mcqaudit.metrics.rules import MAX_FAMILIES, MIN_AUDIT_ROWS, MIN_ITEMS, resolve_control
from mcqaudit.vocab import VERDICT_CODES, VERDICTS, VerdictCode

COUNTS = ("rows", "graded", "correct", "incorrect", "other")  # per (arm, item) row counts


@dataclass
class _Orientations:
    """Per (arm, orientation) item accuracy; cells are sorted by (arm, orientation, item), so each
    (arm, orientation) is a slice. Only the :attr:`with_ci` orientations get bootstrap columns."""

    bounds: np.ndarray
    cell_acc: np.ndarray
    c_ii: np.ndarray
    n_items: int
    n_or: int
    with_ci: set[int]
    _cache: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)

    def shown(self, a: int, o: int) -> bool:
        return bool(self.bounds[a * self.n_or + o] < self.bounds[a * self.n_or + o + 1])

    def acc(self, a: int, o: int) -> np.ndarray:
        """Item accuracy of arm ``a`` in orientation ``o`` (NaN: the item has no graded row there)."""
        key = (a, o)
        if key not in self._cache:
            lo, hi = self.bounds[a * self.n_or + o], self.bounds[a * self.n_or + o + 1]
            vec = np.full(self.n_items, np.nan)
            vec[self.c_ii[lo:hi]] = self.cell_acc[lo:hi]
            self._cache[key] = vec
        return self._cache[key]

    def spread(self, a: int, o: int, cell_values: np.ndarray) -> np.ndarray:
        """Per-cell values of arm ``a`` in orientation ``o`` as an item vector (0: the item is not shown there)."""
        lo, hi = self.bounds[a * self.n_or + o], self.bounds[a * self.n_or + o + 1]
        vec = np.zeros(self.n_items)
        vec[self.c_ii[lo:hi]] = cell_values[lo:hi]
        return vec

    def cells(self, a: int, o: int) -> slice:
        """Where arm ``a``'s cells in orientation ``o`` lie among the cells."""
        return slice(int(self.bounds[a * self.n_or + o]), int(self.bounds[a * self.n_or + o + 1]))

    def point(self, a: int, o: int, items: np.ndarray | None = None) -> Metric | None:
        """An orientation beyond the CI cap: the point estimate only (on ``items``, a mask, when given)."""
        lo, hi = self.bounds[a * self.n_or + o], self.bounds[a * self.n_or + o + 1]
        vals = self.cell_acc[lo:hi]
        if items is not None:
            vals = vals[items[self.c_ii[lo:hi]]]
        vals = vals[np.isfinite(vals)]
        if not vals.size:
            return None
        return {"value": round6(float(vals.mean())), "ci_low": None, "ci_high": None, "n": int(vals.size)}


@dataclass
class _Tables:
    """Everything :func:`compute` derives from the rows before the bootstrap: (arm, item) arrays
    (shape ``(n_arms, n_items)`` unless said otherwise) for every family."""

    max_n: int
    counts: dict[str, np.ndarray]  # COUNTS -> rows of each kind
    picked: np.ndarray  # answered rows with a picked letter
    answered_rows: np.ndarray  # (n_arms,) answered rows, with or without a picked letter
    acc_item: np.ndarray  # item accuracy (mean over its orientations); NaN: no graded row
    present: np.ndarray  # acc_item is defined
    orientations: _Orientations
    families: Families
    reported: list[int]  # the families with per-family figures (see _reported_families), in family order
    circular_eligible: np.ndarray
    circular_correct: np.ndarray
    circular_chance: np.ndarray
    gold_correct: np.ndarray  # (n_arms, max_n, n_items) by gold position
    gold_graded: np.ndarray
    picks: np.ndarray  # (n_arms, max_n, n_items) by picked position
    chance: list[bias.Chance]
    balanced: bool
    design: Design
    binary: tuple[np.ndarray, np.ndarray]  # pairs, consistent
    nway: tuple[np.ndarray, np.ndarray]  # num, den
    review_scope: str
    review_vs_auto: np.ndarray | None  # (n_arms, 3, 3, n_items): automated verdict × review verdict
    auto_share: dict[str, np.ndarray]
    auto_present: np.ndarray
    logprob: dict[str, np.ndarray] | None  # agreement.LOGPROB_COLUMNS -> (n_arms, n_items)
    logprob_mismatch: np.ndarray | None  # (n_arms, 6) cluster sums of the row-level mismatch
    logprob_items: np.ndarray  # (n_arms,)
    items: np.ndarray  # (n_arms,) items with any row
    uniform_reviewed_rows: int


@dataclass
class _Truncation:
    """Rows cut by the token limit (``Rows.truncated``): per (arm, item) arrays, shape ``(n_arms, n_items)``,
    and per cell (:class:`Cells` order) the cell's rows and truncated rows."""

    rows: np.ndarray  # truncated rows
    other: np.ndarray  # truncated rows whose verdict is OTHER
    graded: np.ndarray  # truncated rows with a verdict
    cell_rows: np.ndarray
    cell_truncated: np.ndarray

    def arm_has(self, a: int) -> bool:
        return bool(self.rows[a].any())


def _truncation_tables(R: Rows, C: Cells) -> _Truncation:
    tr = R.truncated.astype(np.float64)

    def per_cell(w: np.ndarray) -> np.ndarray:
        return np.bincount(C.of_row, weights=w, minlength=C.n).astype(np.float64)

    def arm_sum(w: np.ndarray) -> np.ndarray:
        return np.bincount(C.arm_item, weights=per_cell(w), minlength=R.n_arms * R.n_items).reshape(
            R.n_arms, R.n_items
        )

    return _Truncation(
        rows=arm_sum(tr),
        other=arm_sum(tr * (R.verdict == VerdictCode.OTHER)),
        graded=arm_sum(tr * (R.verdict != VerdictCode.NONE)),
        cell_rows=per_cell(np.ones(R.ai.size)),
        cell_truncated=per_cell(tr),
    )


def _tables(frames: StudyFrames, R: Rows, C: Cells, notes: Notes) -> _Tables:
    n_arms, n_items, n_or = R.n_arms, R.n_items, R.n_or
    grid = ItemGrid(n_items)
    max_n = int(R.n_opt.max()) if R.n_opt.size else 2
    nc = C.n
    c_ai, c_oi, c_ii, cinv = C.ai, C.oi, C.ii, C.of_row
    c_gold = np.zeros(nc, dtype=np.int64)
    c_gold[cinv] = R.gold
    c_nopt = np.ones(nc, dtype=np.int64)
    c_nopt[cinv] = R.n_opt

    def counts4(codes: np.ndarray) -> np.ndarray:  # (nc, 4): columns code_col(VerdictCode)
        return code_counts(cinv, codes, nc).astype(np.float64)

    def arm_sum(w: np.ndarray) -> np.ndarray:  # cells -> (n_arms, n_items)
        return np.bincount(C.arm_item, weights=w, minlength=n_arms * n_items).reshape(n_arms, n_items)

    # accuracy: verdict counts per cell, item accuracy = mean over the item's graded cells
    v = R.verdict
    answered = (v == VerdictCode.CORRECT) | (v == VerdictCode.INCORRECT)
    vc, ac = counts4(v), counts4(R.auto_verdict)
    n_c, n_i, n_o = (vc[:, code_col(c)] for c in VERDICT_CODES)
    n_graded = n_c + n_i + n_o
    n_picked = np.bincount(cinv, weights=(answered & (R.pick >= 0)).astype(np.float64), minlength=nc)
    cell_acc = safe_div(n_c, n_graded)
    counts = {k: arm_sum(x) for k, x in zip(COUNTS, (vc.sum(axis=1), n_graded, n_c, n_i, n_o), strict=True)}
    cells_ai = arm_sum(np.ones(nc))
    gcells_ai = arm_sum((n_graded > 0).astype(np.float64))
    acc_item = safe_div(arm_sum(np.nan_to_num(cell_acc)), gcells_ai)  # NaN: no graded row of the item
    a_graded = ac[:, [code_col(c) for c in VERDICT_CODES]].sum(axis=1)
    acells_ai = arm_sum((a_graded > 0).astype(np.float64))
    auto_share = {
        c.name: safe_div(arm_sum(np.nan_to_num(safe_div(ac[:, code_col(c)], a_graded))), acells_ai)
        for c in VERDICT_CODES
    }

    rows_by_or = np.bincount(R.oi, minlength=n_or)
    cap = rules.MAX_ORIENTATIONS_WITH_CI
    with_ci = set(np.argsort(-rows_by_or, kind="stable")[:cap].tolist())
    if n_or > cap:
        notes["accuracy_by_orientation"] = (
            f"{n_or} orientations: CIs are given for the {cap} with most rows, point estimates for the rest"
        )
    bounds = np.searchsorted(c_ai * n_or + c_oi, np.arange(n_arms * n_or + 1))

    # circular: every orientation the arm showed the item in has a verdict, all of them CORRECT
    eligible = (cells_ai == gcells_ai) & (gcells_ai >= 2)
    item_nopt = np.ones(n_items)
    item_nopt[c_ii] = c_nopt

    # bias: gold and picked positions
    c_gold_k = np.clip(c_gold, 0, max_n - 1)
    pk = answered & (R.pick >= 0)
    balanced, gold_share = bias.gold_balance(R)

    # agreement: automated vs review verdict on reviewed rows, the uniform spot check when it has reviews
    reviewed = R.review != VerdictCode.NONE
    if (reviewed & R.uniform).any():
        reviewed &= R.uniform
        scope = "uniform"
    else:
        scope = "all" if reviewed.any() else "none"
    rj = reviewed & (R.auto_verdict != VerdictCode.NONE)
    keys, nv = [R.ai[rj], R.auto_verdict[rj], R.review[rj]], len(VERDICT_CODES)
    review_vs_auto = grid.sum(keys, [n_arms, nv, nv], R.ii[rj]) if rj.any() else None

    families = item_families(R, frames.info.orientations)
    reported = _reported_families(families, notes)
    lp_tables = _logprob_tables(frames.ready(), R, grid)  # last: the log-probs may still be being read
    logprob, lp_mismatch = lp_tables if lp_tables is not None else (None, None)
    return _Tables(
        max_n=max_n,
        counts=counts,
        picked=arm_sum(n_picked),
        answered_rows=np.bincount(R.ai[answered], minlength=n_arms),
        acc_item=acc_item,
        present=np.isfinite(acc_item),
        orientations=_Orientations(bounds, cell_acc, c_ii, n_items, n_or, with_ci),
        families=families,
        reported=reported,
        circular_eligible=eligible,
        circular_correct=(counts["correct"] == counts["graded"]) & eligible,
        circular_chance=np.where(eligible, (1.0 / item_nopt) ** cells_ai, 0.0),
        gold_correct=grid.sum([c_ai, c_gold_k], [n_arms, max_n], c_ii, n_c),
        gold_graded=grid.sum([c_ai, c_gold_k], [n_arms, max_n], c_ii, n_graded),
        picks=grid.sum([R.ai[pk], R.pick[pk]], [n_arms, max_n], R.ii[pk]),
        chance=bias.position_chance(c_ai, c_gold, c_nopt, n_picked, n_arms, max_n),
        balanced=balanced,
        design=bias.design_of(frames.info.orientations, balanced, gold_share, families, reported),
        binary=bias.binary_consistency(R, c_ai, c_ii, answered),
        nway=bias.nway_consistency(R, frames.info.orientations, max_n, answered),
        review_scope=scope,
        review_vs_auto=review_vs_auto,
        auto_share=auto_share,
        auto_present=acells_ai > 0,
        logprob=logprob,
        logprob_mismatch=lp_mismatch,
        logprob_items=(logprob["n"] > 0).sum(axis=1) if logprob is not None else np.zeros(n_arms),
        items=(counts["rows"] > 0).sum(axis=1),
        uniform_reviewed_rows=int(((R.review != VerdictCode.NONE) & R.uniform).sum()),
    )


def _reported_families(F: Families, notes: Notes) -> list[int]:
    """The families that get per-family figures: a study's only family; else those of at least
    ``MIN_ITEMS`` items, the ``MAX_FAMILIES`` largest. The others are named in a note."""
    n = len(F.items)
    if n <= 1:
        return list(range(n))
    big = sorted((f for f in range(n) if F.items[f] >= MIN_ITEMS), key=lambda f: -F.items[f])
    keep = sorted(big[:MAX_FAMILIES])
    left = [f for f in range(n) if f not in keep]
    if left:
        items = sum(F.items[f] for f in left)
        why = f"under {MIN_ITEMS} items" + (
            f", or beyond the {MAX_FAMILIES} largest" if len(big) > MAX_FAMILIES else ""
        )
        notes["design.families"] = (
            f"{len(left)} of {n} item families ({items} items in all) have no per-family figures ({why}): "
            + ", ".join(f"{F.labels[f]} ({F.items[f]} items)" for f in left[:6])
            + (", …" if len(left) > 6 else "")
        )
    return keep


def _logprob_tables(
    frames: StudyFrames, R: Rows, grid: ItemGrid
) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
    """Graded rows with option_logprobs: per (arm, item) rows, log-prob and text correct
    (:data:`agreement.LOGPROB_COLUMNS`); and per arm the item-cluster sums of the row-level mismatch between
    the argmax letter and the text's letter, on the rows whose text letter is known (a picked letter, or
    none for OTHER; a tie in the argmax is no letter): ``(n_arms, 6)``."""
    if frames.logprob is None or not len(frames.logprob):
        return None
    v = R.verdict
    li = column(frames.logprob, "row").astype(np.int64)
    lpos = column(frames.logprob, "lp_pos").astype(np.int64)
    keep = v[li] != VerdictCode.NONE
    li, lpos = li[keep], lpos[keep]
    if not li.size:
        return None
    ws = {
        "n": np.ones(li.size),
        "lp_correct": (lpos == R.gold[li]).astype(np.float64),
        "text_correct": (v[li] == VerdictCode.CORRECT).astype(np.float64),
    }
    pick, other = R.pick[li], v[li] == VerdictCode.OTHER
    known = (other | (pick >= 0)).astype(np.float64)
    mismatch = known * (other | (lpos < 0) | (lpos != pick))
    n_k, d_k = (grid.sum([R.ai[li]], [R.n_arms], R.ii[li], w) for w in (known, mismatch))
    return {k: grid.sum([R.ai[li]], [R.n_arms], R.ii[li], w) for k, w in ws.items()}, cluster_sums(n_k, d_k)


@dataclass
class _Comparisons:
    """Which arms are compared: each treated arm against the control, and with three or more arms every
    pair. Arms that share items are compared on those (paired); arms that share none, unpaired."""

    control: int  # -1: none
    treated: list[int]
    pairs: list[tuple[int, int]]
    present: np.ndarray

    def shared(self, a: int, b: int) -> int:
        return int((self.present[a] & self.present[b]).sum())

    def pairing(self, a: int, b: int) -> Pairing:
        return "paired" if self.shared(a, b) else "unpaired"

    @property
    def any_unpaired(self) -> bool:
        return any(self.shared(t, self.control) == 0 for t in self.treated) or any(
            self.shared(i, j) == 0 for i, j in self.pairs
        )


def _add_arm_columns(col: Callable[[Column, np.ndarray], object], T: _Tables, n_arms: int) -> None:
    orients = T.orientations
    for a in range(n_arms):
        col(("acc_num", a), np.where(T.present[a], T.acc_item[a], 0.0))
        col(("acc_den", a), T.present[a].astype(np.float64))
        for name in COUNTS:
            col((name, a), T.counts[name][a])
        col(("ungraded", a), T.counts["rows"][a] - T.counts["graded"][a])
        col(("answered", a), T.counts["correct"][a] + T.counts["incorrect"][a])
        for o in orients.with_ci:
            if orients.shown(a, o):
                vec = orients.acc(a, o)
                col(("acc_or_num", a, o), np.nan_to_num(vec))
                col(("acc_or_den", a, o), np.isfinite(vec).astype(np.float64))
        col(("circular_num", a), T.circular_correct[a].astype(np.float64))
        col(("circular_den", a), T.circular_eligible[a].astype(np.float64))
        col(("circular_chance", a), T.circular_chance[a])
        for q in range(T.max_n):
            col(("gold_correct", a, q), T.gold_correct[a, q])
            col(("gold_graded", a, q), T.gold_graded[a, q])
            col(("pick", a, q), T.picks[a, q])
        col(("picked", a), T.picked[a])
        col(("binary_pairs", a), T.binary[0][a])
        col(("binary_consistent", a), T.binary[1][a])
        col(("nway_num", a), T.nway[0][a])
        col(("nway_den", a), T.nway[1][a])
        if T.review_vs_auto is not None:
            for name in VERDICTS:
                col(("auto_share", name, a), np.nan_to_num(T.auto_share[name][a]))
            col(("auto_den", a), T.auto_present[a].astype(np.float64))
            for j in VERDICT_CODES:
                for h in VERDICT_CODES:
                    col(("review_vs_auto", a, int(j), int(h)), T.review_vs_auto[a, j, h])
        if T.logprob is not None:
            for k, arr in T.logprob.items():
                col(("logprob", k, a), arr[a])
    _add_family_columns(col, T, n_arms)
    if T.review_vs_auto is not None:
        pooled = T.review_vs_auto.sum(axis=0)
        for j in VERDICT_CODES:
            for h in VERDICT_CODES:
                col(("review_vs_auto", "all", int(j), int(h)), pooled[j, h])


def _add_truncation_columns(
    col: Callable[[Column, np.ndarray], object], T: _Tables, X: _Truncation, cmp: _Comparisons, n_arms: int
) -> None:
    """Per arm: truncated rows, and OTHER and graded rows with the truncated ones left out; per (arm,
    orientation) with a CI, truncated rows and rows (only for an arm with a truncated row: else every rate
    is 0 in every replicate); per treated arm, the same on the items graded in both arms (``delta_part``)."""
    orients = T.orientations
    kept = {"other_kept": T.counts["other"] - X.other, "graded_kept": T.counts["graded"] - X.graded}
    for a in range(n_arms):
        col(("truncated", a), X.rows[a])
        for name, arr in kept.items():
            col((name, a), arr[a])
        if X.arm_has(a):
            for o in orients.with_ci:
                if orients.shown(a, o):
                    col(("truncated_or", a, o), orients.spread(a, o, X.cell_truncated))
                    col(("rows_or", a, o), orients.spread(a, o, X.cell_rows))
    parts = {"truncated": X.rows, "rows": T.counts["rows"], **kept}
    for t in cmp.treated:
        both = T.present[t] & T.present[cmp.control]
        if both.any():
            for x, arr in parts.items():
                col(("delta_part", x, t, "t"), arr[t] * both)
                col(("delta_part", x, t, "c"), arr[cmp.control] * both)


def _add_family_columns(col: Callable[[Column, np.ndarray], object], T: _Tables, n_arms: int) -> None:
    """Per (arm, reported family): accuracy, accuracy per orientation, recall by gold letter, graded rows.
    A study with one family gets columns equal to the pooled ones, which the bootstrap sums once."""
    orients, F = T.orientations, T.families
    for f in T.reported:
        mask = F.mask(f)
        mf = mask.astype(np.float64)
        for a in range(n_arms):
            pres = T.present[a] & mask
            col(("fam_acc_num", a, f), np.where(pres, T.acc_item[a], 0.0))
            col(("fam_acc_den", a, f), pres.astype(np.float64))
            col(("fam_graded", a, f), T.counts["graded"][a] * mf)
            for o in F.orientations[f]:
                if o in orients.with_ci and orients.shown(a, o):
                    vec = orients.acc(a, o)
                    col(("fam_or_num", a, f, o), np.where(mask, np.nan_to_num(vec), 0.0))
                    col(("fam_or_den", a, f, o), (np.isfinite(vec) & mask).astype(np.float64))
            for q in range(min(F.options[f], T.max_n)):
                col(("fam_gold_correct", a, f, q), T.gold_correct[a, q] * mf)
                col(("fam_gold_graded", a, f, q), T.gold_graded[a, q] * mf)


def _add_family_delta_columns(
    col: Callable[[Column, np.ndarray], object], T: _Tables, t: int, c0: int, both: np.ndarray
) -> None:
    """Treated ``t`` − control within each reported family, on the family's items graded in both arms."""
    orients, F, acc_item = T.orientations, T.families, T.acc_item
    graded = T.counts["graded"]
    for f in T.reported:
        mask = F.mask(f)
        bf = both & mask
        if not bf.any():
            continue
        col(("fam_delta_num", t, f), np.where(bf, acc_item[t] - acc_item[c0], 0.0))
        col(("fam_delta_den", t, f), bf.astype(np.float64))
        col(("fam_delta_graded", t, f), (graded[t] + graded[c0]) * bf)
        for o in F.orientations[f]:
            if o not in orients.with_ci:
                continue
            bo = np.isfinite(orients.acc(t, o)) & np.isfinite(orients.acc(c0, o)) & mask
            if bo.any():
                col(("fam_delta_or_num", t, f, o), np.where(bo, orients.acc(t, o) - orients.acc(c0, o), 0.0))
                col(("fam_delta_or_den", t, f, o), bo.astype(np.float64))


def _add_comparison_columns(
    col: Callable[[Column, np.ndarray], object],
    T: _Tables,
    tallies: list[ParserTally],
    cmp: _Comparisons,
    n_arms: int,
) -> None:
    orients, c0, present, acc_item = T.orientations, cmp.control, T.present, T.acc_item
    if cmp.any_unpaired:
        for p in tallies:
            for a in range(n_arms):
                has_p = np.isfinite(p.acc[a])
                col(("parser_acc_num", p.name, a), np.where(has_p, p.acc[a], 0.0))
                col(("parser_acc_den", p.name, a), has_p.astype(np.float64))
    answered = T.counts["correct"] + T.counts["incorrect"]
    for t in cmp.treated:
        both = present[t] & present[c0]
        if not both.any():
            continue
        bf = both.astype(np.float64)
        col(("delta_num", t), np.where(both, acc_item[t] - acc_item[c0], 0.0))
        col(("delta_den", t), bf)
        for o in orients.with_ci:
            bo = np.isfinite(orients.acc(t, o)) & np.isfinite(orients.acc(c0, o))
            if bo.any():
                col(("delta_or_num", t, o), np.where(bo, orients.acc(t, o) - orients.acc(c0, o), 0.0))
                col(("delta_or_den", t, o), bo.astype(np.float64))
        _add_family_delta_columns(col, T, t, c0, both)
        for x, arr in (("other", T.counts["other"]), ("graded", T.counts["graded"]), ("correct", T.counts["correct"]),
                       ("answered", answered)):  # fmt: skip
            col(("delta_part", x, t, "t"), arr[t] * bf)
            col(("delta_part", x, t, "c"), arr[c0] * bf)
        for p in tallies:
            bp_ = np.isfinite(p.acc[t]) & np.isfinite(p.acc[c0])
            col(("parser_delta_num", p.name, t), np.where(bp_, p.acc[t] - p.acc[c0], 0.0))
            col(("parser_delta_den", p.name, t), bp_.astype(np.float64))
    for i, j in cmp.pairs:
        both = present[i] & present[j]
        if both.any():
            col(("pairwise_num", i, j), np.where(both, acc_item[i] - acc_item[j], 0.0))
            col(("pairwise_den", i, j), both.astype(np.float64))
            col(("pairwise_graded", i, j), (T.counts["graded"][i] + T.counts["graded"][j]) * both)


def _family_metrics(
    S: Sums,
    T: _Tables,
    orientations: list[str],
    fam_rstd: dict[str, bias.FamilyRstd],
    a: int,
) -> dict[str, FamilyMetrics]:
    """Arm ``a``'s figures within each reported item family (``by_family``)."""
    orients, F = T.orientations, T.families
    by_family: dict[str, FamilyMetrics] = {}
    for f in T.reported:
        lab = F.labels[f]
        mask = F.mask(f)
        fam_or: dict[str, Metric | None] = {}
        for o in F.orientations[f]:
            if orients.shown(a, o):
                fam_or[orientations[o]] = (
                    proportion(S, ("fam_or_num", a, f, o), ("fam_or_den", a, f, o))
                    if o in orients.with_ci
                    else orients.point(a, o, mask)
                )
        by_family[lab] = {
            "items": int(S.point(("fam_acc_den", a, f))),
            "accuracy": proportion(S, ("fam_acc_num", a, f), ("fam_acc_den", a, f)),
            "accuracy_by_orientation": fam_or,
            "rstd": fam_rstd[lab][0],
            "recall_by_gold_letter": fam_rstd[lab][1],
        }
    return by_family


def _truncated_rates(
    S: Sums, T: _Tables, X: _Truncation, orientations: list[str], a: int
) -> tuple[Metric | None, dict[str, Metric | None]]:
    """Arm ``a``'s truncated rate (truncated rows / rows) and the same per orientation it showed: with a CI
    for the orientations that get one (an arm with no truncated row: 0 in every replicate), else the point."""
    orients = T.orientations
    by: dict[str, Metric | None] = {}
    zero = np.zeros_like(S[("rows", a)])
    for o, lab in enumerate(orientations):
        if not orients.shown(a, o):
            continue
        cells = orients.cells(a, o)
        n = int(X.cell_rows[cells].sum())
        if not X.arm_has(a):
            by[lab] = summarize(zero, n)
        elif o in orients.with_ci:
            by[lab] = ratio(S, ("truncated_or", a, o), ("rows_or", a, o))
        else:
            k = float(X.cell_truncated[cells].sum())
            by[lab] = {"value": round6(k / n), "ci_low": None, "ci_high": None, "n": n}
    return ratio(S, ("truncated", a), ("rows", a)), by


def _arm_metrics(
    S: Sums, T: _Tables, X: _Truncation, frames: StudyFrames, tallies: list[ParserTally], notes: Notes, a: int
) -> ArmMetrics:
    """Arm ``a``'s entry of ``metrics``, keys in the report's order."""
    info = frames.info
    arm = info.arms[a]
    orients = T.orientations

    def note(key: str, reason: str) -> None:
        notes[f"metrics.{arm}.{key}"] = reason

    rates = accuracy.rates(S, a, note)
    circular = accuracy.circular_accuracy(S, a, note)
    picks, first, share = bias.position_pick_rates(S, a, T.max_n, T.balanced, T.chance[a], T.design, note)
    F = T.families
    spread, recall, fam_rstd = bias.rstd(
        S, a, T.max_n, T.design, note, [(f, F.labels[f], F.options[f]) for f in T.reported], len(F.items) <= 1
    )
    cons = bias.consistency(S, a, note)
    by_or: dict[str, Metric | None] = {}
    for o, lab in enumerate(info.orientations):
        if orients.shown(a, o):
            by_or[lab] = (
                proportion(S, ("acc_or_num", a, o), ("acc_or_den", a, o))
                if o in orients.with_ci
                else orients.point(a, o)
            )
    by_family = _family_metrics(S, T, info.orientations, fam_rstd, a)
    truncated, truncated_by_or = _truncated_rates(S, T, X, info.orientations, a)
    letters = parser_letters(tallies, info.orientations, a)
    unpicked = int(T.answered_rows[a] - T.picked[a].sum())
    if unpicked:
        extra = "answered rows without a picked letter (gold-shape judge, or a review that gave none) are left out"
        key = f"metrics.{arm}.position_pick_rate"
        notes[key] = f"{notes[key]}; {extra}" if key in notes else extra
        if letters:
            note("parser_letters", f"{unpicked} {extra}: their reference letter is unknown")
    if not letters:
        note("parser_letters", "no graded row with a known reference letter (a picked letter, or OTHER)")
    ag: JudgeAgreement | None = None
    if T.review_vs_auto is not None and agreement.has_reviews(S, a):
        ag = agreement.judge_agreement(S, notes, a, arm, T.review_scope)
    if ag is None:
        note("judge_agreement", "no reviewed row with an automated verdict in this arm")
    lp: LogprobCrosscheck | None = None
    if T.logprob is None or S.point(("logprob", "n", a)) == 0:
        note("logprob_crosscheck", "no graded row carries option_logprobs")
    else:
        assert T.logprob_mismatch is not None  # computed with T.logprob
        lp = agreement.logprob_crosscheck(S, a, int(T.logprob_items[a]), T.logprob_mismatch[a])
        if lp["mismatch_rate"] is None:
            note(
                "logprob_crosscheck.mismatch_rate",
                "no such row has a known text letter (a picked letter, or OTHER)",
            )
    return {
        "rows": int(S.point(("rows", a))),
        "graded": int(S.point(("graded", a))),
        "accuracy": rates["accuracy"],
        "answered_accuracy": rates["answered_accuracy"],
        "other_rate": rates["other_rate"],
        "ungraded_rate": rates["ungraded_rate"],
        "truncated_rate": truncated,
        "truncated_rate_by_orientation": truncated_by_or,
        "other_rows": int(S.point(("other", a))),
        "truncated_rows": int(S.point(("truncated", a))),
        "truncated_other_rows": int(round(float(X.other[a].sum()))),
        "accuracy_by_orientation": by_or,
        "circular_accuracy": circular,
        "position_baseline": "uniform" if T.balanced else "gold",
        "position_pick_rate": picks,
        "first_position_rate": first,
        "rstd": spread,
        "recall_by_gold_letter": recall,
        "by_family": by_family,
        "pick_share": share,
        "consistency": cons,
        "parser_disagreement": parser_disagreement(tallies, info.orientations, a),
        "parser_letters": letters,
        "items": int(T.items[a]),
        "judge_agreement": ag,
        "logprob_crosscheck": lp,
    }


# the bootstrap columns accuracy.arm_delta reads (paired or unpaired, per family and orientation)
_DELTA_COLUMNS = frozenset({
    "acc_num", "acc_den", "acc_or_num", "acc_or_den", "rows", "graded", "other", "correct", "answered", "truncated",
    "other_kept", "graded_kept", "delta_num", "delta_den", "delta_or_num", "delta_or_den", "delta_part",
    "fam_acc_num", "fam_acc_den", "fam_graded", "fam_or_num", "fam_or_den", "fam_delta_num", "fam_delta_den",
    "fam_delta_graded", "fam_delta_or_num", "fam_delta_or_den",
})  # fmt: skip


def _deltas_only(
    frames: StudyFrames, ctrl: str | None, n_boot: int, seed: int, method: rules.CIMethod, notes: Notes
) -> dict[str, ArmDelta | None]:
    """``delta_accuracy`` alone, from frames whose verdicts are one panel judge's (``panel.judge_frames``):
    the same columns, the same bootstrap draws (same seed and items) and the same Δ as :func:`compute`'s."""
    info = frames.info
    R = rows_of(frames)
    C = cells_of(R)
    T = _tables(frames, R, C, {})
    c0 = info.arms.index(ctrl) if ctrl is not None else -1
    treated, _ = rules.compared_arms(info.arms, ctrl)
    cmp = _Comparisons(control=c0, treated=[info.arms.index(a) for a in treated], pairs=[], present=T.present)
    boot = ItemBootstrap(R.n_items, n_boot, seed, method)

    def add(name: Column, values: np.ndarray) -> object:  # only the columns a Δ reads
        return boot.add(name, values) if isinstance(name, tuple) and name[0] in _DELTA_COLUMNS else None

    _add_arm_columns(add, T, R.n_arms)
    _add_comparison_columns(add, T, [], cmp, R.n_arms)
    X = _truncation_tables(R, C)
    _add_truncation_columns(add, T, X, cmp, R.n_arms)
    S = boot.run()
    fp_mixed = accuracy.fingerprint_conflicts(info, ctrl)
    fam_specs = [(f, T.families.labels[f], T.families.orientations[f]) for f in T.reported]
    out: dict[str, ArmDelta | None] = {}
    for t in cmp.treated:
        arm = info.arms[t]
        if arm in fp_mixed:
            out[arm], notes[arm] = None, fp_mixed[arm]
            continue
        out[arm] = accuracy.arm_delta(
            S, info, notes, t, c0, cmp.pairing(t, c0), T.orientations.with_ci, fam_specs
        )
    return out


def _panel_and_reviewers(
    frames: StudyFrames, R: Rows, result: Results, n_boot: int, seed: int, method: rules.CIMethod
) -> None:
    """``judge_panel`` (with the Δ under each panel judge), ``reviewer_agreement``, and how many of the rows
    judge_agreement reads were settled by a later reviewer (docs/design.md §7; issue 21)."""
    notes = result["notes"]
    jp = panel.judge_panel(frames, R, n_boot, seed, method, notes)
    if jp is not None:
        for j, fp in enumerate(frames.info.panel_judges):
            got: Notes = {}
            jp["delta_by_judge"][fp] = _deltas_only(
                panel.judge_frames(frames, R, j), result["control_arm"], n_boot, seed, method, got
            )
            for arm in jp["delta_by_judge"][fp]:
                why = got.get(f"delta_accuracy.{arm}.overall") or got.get(arm)
                if why:
                    notes[f"judge_panel.delta_by_judge.{fp}.{arm}"] = why
    result["judge_panel"] = jp
    result["reviewer_agreement"] = reviewers.reviewer_agreement(frames, R, n_boot, seed, method, notes)
    reviewers.add_settled(result, frames, R)


def compute(
    frames: StudyFrames, control: str | None = None, n_boot: int = 2000, seed: int = 0, ci: str = "auto"
) -> Results:
    """Every metric, difference and flag of docs/design.md §7, as a JSON-ready dict (see docs/report-schema.md).

    ``ci``: how the replicates behind the CIs are drawn (:func:`~mcqaudit.metrics.rules.ci_method`: ``auto``,
    ``bootstrap``, ``normal``); the report says which (``bootstrap.method``)."""
    info = frames.info
    arms = info.arms
    R = rows_of(frames)
    n_arms = R.n_arms
    ctrl, ctrl_source = resolve_control(arms, control, info.stored_control)
    notes: Notes = {}
    if info.stored_control and info.stored_control not in arms and control is None:
        notes["control_arm"] = f"the stored control arm {info.stored_control!r} is not in the study; ignored"
    C = cells_of(R)
    # the parser tallies read nothing the tables write: on a second thread they overlap (numpy's loops
    # release the GIL), which on two cores takes a third off the metrics of a 1,000,000-row study
    with ThreadPoolExecutor(1) as pool:
        later = pool.submit(parser_tallies, frames, R, C)
        T = _tables(frames, R, C, notes)
        tallies = later.result()
    frames.ready()
    c0 = arms.index(ctrl) if ctrl is not None else -1
    treated, pairs = rules.compared_arms(arms, ctrl)
    cmp = _Comparisons(
        control=c0,
        treated=[arms.index(a) for a in treated],
        pairs=[(arms.index(a), arms.index(b)) for a, b in pairs],
        present=T.present,
    )

    boot = ItemBootstrap(R.n_items, n_boot, seed, rules.ci_method(R.n_items, n_boot, ci))
    _add_arm_columns(boot.add, T, n_arms)
    _add_comparison_columns(boot.add, T, tallies, cmp, n_arms)
    X = _truncation_tables(R, C)
    _add_truncation_columns(boot.add, T, X, cmp, n_arms)
    S = boot.run()
    metrics = {arm: _arm_metrics(S, T, X, frames, tallies, notes, a) for a, arm in enumerate(arms)}
    fp_mixed = accuracy.fingerprint_conflicts(info, ctrl)
    parser_names = [p.name for p in tallies]
    F = T.families
    fam_specs = [(f, F.labels[f], F.orientations[f]) for f in T.reported]
    in_families = np.bincount([o for f in T.reported for o in F.orientations[f]], minlength=R.n_or)
    shared_orients = set(np.flatnonzero(in_families > 1).tolist())
    delta: dict[str, ArmDelta | None] = {}
    delta_parser: dict[str, dict[str, Metric | None]] = {}
    for t in cmp.treated:
        arm = arms[t]
        pairing = cmp.pairing(t, c0)
        if arm in fp_mixed:
            delta[arm] = None
            notes[f"delta_accuracy.{arm}"] = fp_mixed[arm]
        else:
            delta[arm] = accuracy.arm_delta(
                S, info, notes, t, c0, pairing, T.orientations.with_ci, fam_specs, shared_orients
            )
        delta_parser[arm] = accuracy.parser_deltas(S, info, notes, parser_names, t, c0, pairing)
    if c0 >= 0 and not cmp.treated:
        notes["delta_accuracy"] = "the study has a single arm: nothing to compare"
    pairwise = (
        accuracy.pairwise_delta(S, info, notes, cmp.pairs, {(i, j): cmp.shared(i, j) for i, j in cmp.pairs})
        if cmp.pairs
        else None
    )
    judge_agreement = (
        agreement.judge_agreement(S, notes, "all", None, T.review_scope)
        if T.review_vs_auto is not None
        else None
    )
    if judge_agreement is None:
        notes["judge_agreement"] = "no reviewed row has an automated verdict to compare"

    required = min(MIN_AUDIT_ROWS, int(R.ai.size))
    result: Results = {
        "control_arm": ctrl,
        "control_source": ctrl_source,
        "metrics": metrics,
        "delta_accuracy": delta,
        "delta_accuracy_by_parser": delta_parser,
        "pairwise_delta": pairwise,
        "judge_agreement": judge_agreement,
        "design": T.design,
        "audit": {
            "reviews": info.n_reviews,
            "uniform_reviewed_rows": T.uniform_reviewed_rows,
            "required_rows": required,
            "audited": T.uniform_reviewed_rows >= required and not info.unaudited,
        },
        "notes": notes,
        "flags": [],
    }
    _panel_and_reviewers(frames, R, result, n_boot, seed, boot.method)
    result["flags"] = diagnose(info, result, tallies, verdicts=frames.verdicts)
    return result
