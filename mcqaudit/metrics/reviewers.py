"""Reviewer agreement (docs/design.md §7 ``reviewer_agreement``; issue 21): do two of us agree with each
other, before the judge is measured against "us"? Pure.

On the rows two or more people reviewed, each person's review in force on the row (their latest that no
retraction withdraws; the frames' ``reviewers``): every pair of people who reviewed the same row is one
comparison. ``agreement`` is the share of comparisons that agree; ``kappa`` is Cohen's κ over them, each
pair's verdicts in the order of the names (for two reviewers, their Cohen's κ); ``pairs`` gives the same per
pair of people. CIs resample items (the study's item bootstrap). Fewer than :data:`MIN_AUDIT_ROWS` rows:
preliminary, as the judge's agreement with the reviews is.

A row whose reviewers disagree is *settled* by its latest review (the one in force in the final verdicts);
:func:`settled_rows` counts them for ``judge_agreement``.
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


def settled(frames: StudyFrames, n_rows: int) -> np.ndarray:
    """Per row: two or more people reviewed it and their reviews disagree (the latest is in force)."""
    out = np.zeros(n_rows, dtype=bool)
    got = comparisons(frames)
    if got is not None:
        r, _, _, va, vb = got
        out[r[va != vb]] = True
    return out


def settled_rows(frames: StudyFrames, mask: np.ndarray) -> int:
    """How many of the rows in ``mask`` were settled by a later reviewer (:func:`settled`)."""
    return int((settled(frames, mask.size) & mask).sum())


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
        "settled_rows": int(np.unique(r[va != vb]).size),
        "pairs": pairs,
    }


def add_settled(result: Results, frames: StudyFrames, R: Rows) -> None:
    """``settled_rows`` in every ``judge_agreement`` (pooled and per arm): of the reviewed rows it compares
    with the automated verdict (the uniform spot check when it reads that), those whose reviewers disagree,
    settled by the latest review."""
    if frames.reviewers is None:
        return
    done = settled(frames, R.ai.size)
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
        ag["settled_rows"] = int((done & mask).sum())
