"""Reviewer agreement (docs/design.md §7 ``reviewer_agreement``; issue 21): do two of us agree with each
other, before the judge is measured against "us"? Pure.

On the rows two or more people reviewed, each person's review in force on the row (their latest that no
retraction withdraws; the frames' ``reviewers``): every pair of people who reviewed the same row is one
comparison. ``agreement`` is the share of comparisons that agree; ``kappa`` is Cohen's κ over them, each
pair's verdicts in the order of the names (for two reviewers, their Cohen's κ); ``pairs`` gives the same per
pair of people. CIs resample items (the study's item bootstrap). Fewer than :data:`MIN_AUDIT_ROWS` rows:
preliminary, as the judge's agreement with the reviews is.

A row whose reviewers disagree has its latest review in force (the final verdict); it is *settled* when the
reviews before that one already disagreed (a third person, or a later word, decided), as the Review page's
reviewers filter says; :func:`disagreements` counts both, also for ``judge_agreement``.
"""

from __future__ import annotations

import numpy as np

from mcqaudit.metrics.bootstrap import ItemBootstrap, summarize
from mcqaudit.metrics.cells import Rows
from mcqaudit.metrics.inputs import StudyFrames, column
from mcqaudit.metrics.panel import NV, kappa
from mcqaudit.metrics.results import Metric, Notes, Results, ReviewerAgreement, ReviewerPair
from mcqaudit.metrics.rules import MIN_AUDIT_ROWS, MIN_CI_ROWS, CIMethod
from mcqaudit.vocab import VERDICT_CODES, VerdictCode

# one comparison: the row, the two people (indices, first < second), their verdicts
Comparisons = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _reviews(frames: StudyFrames) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The reviews in force per (row, person), sorted by row then person; None without two reviewers."""
    f = frames.reviewers
    if f is None or not len(f) or len(frames.info.reviewers) < 2:
        return None
    row = column(f, "row").astype(np.int64)
    who = column(f, "reviewer").astype(np.int64)
    verdict = column(f, "verdict").astype(np.int64)
    keep = (verdict >= 0) & (verdict < NV) & (who >= 0)
    row, who, verdict = row[keep], who[keep], verdict[keep]
    order = np.lexsort((who, row))
    return row[order], who[order], verdict[order]


def comparisons(frames: StudyFrames) -> Comparisons | None:
    """Every pair of people on every row both reviewed (vectorised: element ``i`` against ``i + d`` of the
    sorted reviews, for each gap ``d`` within a row)."""
    got = _reviews(frames)
    if got is None:
        return None
    row, who, verdict = got
    parts: list[list[np.ndarray]] = [[], [], [], [], []]
    d = 1
    while d < row.size:
        same = row[d:] == row[:-d]
        if not same.any():
            break
        for part, x in zip(parts, (row[:-d], who[:-d], who[d:], verdict[:-d], verdict[d:]), strict=True):
            part.append(x[same])
        d += 1
    if not parts[0]:
        return None
    r, a, b, va, vb = (np.concatenate(p) for p in parts)
    return r, a, b, va, vb


def _differ(row: np.ndarray, verdict: np.ndarray, n_rows: int) -> np.ndarray:
    """Per row: two different verdicts among these."""
    lo, hi = np.full(n_rows, NV, dtype=np.int64), np.full(n_rows, -1, dtype=np.int64)
    np.minimum.at(lo, row, verdict)
    np.maximum.at(hi, row, verdict)
    return hi > lo


def disagreements(frames: StudyFrames, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: whether its reviewers disagree (their reviews in force differ: the row's latest review is its
    final verdict), and whether a later review *settled* it — the reviews before the latest already differed
    among themselves, so someone decided after them (the Review page's reviewers filter: "settled"; a row
    that disagrees but is not settled is one it lists as "reviewers disagree", waiting for a third person)."""
    f = frames.reviewers
    none = np.zeros(n_rows, dtype=bool)
    if f is None or not len(f) or len(frames.info.reviewers) < 2:
        return none, none
    row, verdict = column(f, "row").astype(np.int64), column(f, "verdict").astype(np.int64)
    k = column(f, "k").astype(np.int64) if "k" in f else np.ones_like(row)
    keep = (verdict >= 0) & (verdict < NV)
    row, verdict, k = row[keep], verdict[keep], k[keep]
    disagree = _differ(row, verdict, n_rows)
    earlier = k > 1
    return disagree, disagree & _differ(row[earlier], verdict[earlier], n_rows)


def _thin(m: Metric | None, n: int) -> Metric | None:
    if m is not None and n < MIN_CI_ROWS:
        m["ci_low"] = m["ci_high"] = None
    return m


def reviewer_agreement(
    frames: StudyFrames, R: Rows, n_boot: int, seed: int, method: CIMethod, notes: Notes
) -> ReviewerAgreement | None:
    """People against each other on the rows two or more of them reviewed; None (with a note) when no row was."""
    got = comparisons(frames)
    if got is None:
        notes["reviewer_agreement"] = "no row has been reviewed by two people yet"
        return None
    r, a, b, va, vb = got
    names = frames.info.reviewers
    n_items = R.n_items
    boot = ItemBootstrap(n_items, n_boot, seed, method)
    ii = R.ii[r]
    pair_ids = sorted({(int(x), int(y)) for x, y in zip(a, b, strict=True)})
    for p in range(NV):
        for q in range(NV):
            hit = (va == p) & (vb == q)
            boot.add(("all", p, q), np.bincount(ii, weights=hit.astype(np.float64), minlength=n_items))
            for x, y in pair_ids:
                w = (hit & (a == x) & (b == y)).astype(np.float64)
                boot.add(("pair", x, y, p, q), np.bincount(ii, weights=w, minlength=n_items))
    S = boot.run()

    def figures(key: tuple[object, ...]) -> tuple[int, Metric | None, Metric | None, np.ndarray]:
        conf = np.array([[S[(*key, p, q)] for q in range(NV)] for p in range(NV)])
        n = int(round(conf[:, :, 0].sum()))
        po, k = kappa(conf)
        return n, _thin(summarize(po, n), n), _thin(summarize(k, n), n), conf[:, :, 0]

    pairs: dict[str, ReviewerPair] = {}
    for x, y in pair_ids:
        n, ag, k, conf = figures(("pair", x, y))
        pairs[f"{names[x]}|{names[y]}"] = {
            "rows": n,
            "agreement": ag,
            "kappa": k,
            "confusion": {
                u.name: {w.name: int(round(conf[u, w])) for w in VERDICT_CODES} for u in VERDICT_CODES
            },
        }
    n_cmp, ag, k, _ = figures(("all",))
    disagree, settled = disagreements(frames, R.ai.size)
    rows = int(np.unique(r).size)
    if k is None:
        notes["reviewer_agreement.kappa"] = "every review gives one verdict: κ is undefined"
    return {
        "rows": rows,
        "reviewers": sorted({names[int(x)] for x in np.concatenate([a, b])}),
        "preliminary": rows < MIN_AUDIT_ROWS,
        "pairs_compared": n_cmp,
        "agreement": ag,
        "kappa": k,
        "disagreed_rows": int(disagree.sum()),
        "settled_rows": int(settled.sum()),
        "pairs": pairs,
    }


def add_settled(result: Results, frames: StudyFrames, R: Rows) -> None:
    """``disagreed_rows`` and ``settled_rows`` in every ``judge_agreement`` (pooled and per arm): of the reviewed
    rows it compares with the automated verdict (the uniform spot check when it reads that), those whose
    reviewers disagree — it compares the latest review — and those of them a later review settled
    (:func:`disagreements`)."""
    if frames.reviewers is None:
        return
    disagree, settled = disagreements(frames, R.ai.size)
    compared = (R.review != VerdictCode.NONE) & (R.auto_verdict != VerdictCode.NONE)
    entries = [(result["judge_agreement"], -1)] + [
        (m["judge_agreement"], a) for a, m in enumerate(result["metrics"].values())
    ]
    for ag, a in entries:
        if ag is None:
            continue
        mask = compared & (R.uniform if ag["sample"] == "uniform" else True)
        if a >= 0:
            mask = mask & (R.ai == a)
        ag["disagreed_rows"] = int((disagree & mask).sum())
        ag["settled_rows"] = int((settled & mask).sum())
