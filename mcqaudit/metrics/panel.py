"""Panel judges (docs/design.md §7 ``judge_panel``, flag ``judge_sensitive``; issue 21): would another judge
have told the same story? Pure.

A panel judge (``grade --panel``) grades the rows the primary judge graded; its verdicts sit beside the final
ones (the frames' ``panel``). Here, per panel judge: its error and OTHER rates, its verdict agreement and
Cohen's κ with the primary on the rows both graded; Krippendorff's α over every judge, the primary included;
and, through :func:`judge_frames`, the frames as that judge would have graded them, from which
:func:`mcqaudit.metrics.compute.compute` takes the Δaccuracy under it (``delta_by_judge``).

The primary's verdict on a row is its automated verdict where the final verdicts' judge answered (the
frames' ``fp`` ≥ 0): the judge outranks the pre-filter. CIs resample items with the study's item bootstrap
(same seed and replicates, so the draws are the main computation's).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mcqaudit.metrics.bootstrap import ItemBootstrap, Sums, safe_div, summarize
from mcqaudit.metrics.cells import Rows
from mcqaudit.metrics.inputs import Columns, StudyFrames, column
from mcqaudit.metrics.results import (
    Confusion,
    JudgePanel,
    Metric,
    Notes,
    PanelJudge,
)
from mcqaudit.metrics.rules import MIN_CI_ROWS, MIN_ITEMS, CIMethod
from mcqaudit.vocab import VERDICT_CODES, VerdictCode

NV = len(VERDICT_CODES)  # CORRECT, INCORRECT, OTHER: the values a judge gives (codes 0..2)


def _thin(m: Metric | None, n: int) -> Metric | None:
    """A figure on fewer than :data:`MIN_CI_ROWS` rows keeps its value and n, not its CI (as judge_agreement)."""
    if m is not None and n < MIN_CI_ROWS:
        m["ci_low"] = m["ci_high"] = None
    return m


def kappa(conf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Observed agreement and Cohen's κ of ``conf`` (``(NV, NV, B)``: rater 1 × rater 2, per replicate)."""
    total = conf.sum(axis=(0, 1))
    po = safe_div(np.einsum("kkb->b", conf), total)
    row, col = conf.sum(axis=1), conf.sum(axis=0)
    pe = sum(safe_div(row[k], total) * safe_div(col[k], total) for k in range(NV))
    return po, safe_div(po - pe, 1 - pe)


def alpha(coincidence: np.ndarray) -> np.ndarray:
    """Krippendorff's α (nominal) from the coincidence matrix ``o`` (``(NV, NV, B)``, per replicate):
    ``1 − (n − 1) Σ_{c≠k} o_ck / Σ_{c≠k} n_c n_k``, with ``n_c`` its row sums and ``n`` their total
    (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"). NaN when every value is one category."""
    n_c = coincidence.sum(axis=1)
    n = n_c.sum(axis=0)
    observed = n - np.einsum("kkb->b", coincidence)  # Σ_{c≠k} o_ck
    expected = n * n - (n_c * n_c).sum(axis=0)  # Σ_{c≠k} n_c n_k
    return 1 - safe_div((n - 1) * observed, expected)


def coincidences(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per unit (a row of ``values``: one column per judge, a VerdictCode or NONE for missing), its share of
    the coincidence matrix: ``(units, NV, NV)``, and which units are pairable (two or more values). A unit
    with ``m`` values adds ``n_c n_k / (m − 1)`` to ``o_ck`` (``n_c (n_c − 1) / (m − 1)`` on the diagonal)."""
    cnt = np.stack([(values == c).sum(axis=1) for c in range(NV)], axis=1).astype(np.float64)
    m = cnt.sum(axis=1)
    pairable = m >= 2
    w = safe_div(np.ones_like(m), m - 1)
    o = cnt[:, :, None] * cnt[:, None, :] - np.eye(NV)[None] * cnt[:, :, None]
    return np.where(pairable[:, None, None], o * np.nan_to_num(w)[:, None, None], 0.0), pairable


def primary_verdicts(frames: StudyFrames, R: Rows) -> np.ndarray:
    """Each row's verdict by the final verdicts' judge (NONE where it gave none)."""
    fp = column(frames.rows, "fp").astype(np.int64)
    return np.where(fp >= 0, R.auto_verdict, int(VerdictCode.NONE))


def _panel(frames: StudyFrames) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    p = frames.panel
    assert p is not None
    return (
        column(p, "row").astype(np.int64),
        column(p, "judge").astype(np.int64),
        column(p, "verdict").astype(np.int64),
        column(p, "pick_pos").astype(np.int64),
    )


def judge_frames(frames: StudyFrames, R: Rows, j: int) -> StudyFrames:
    """The frames as panel judge ``j`` would have graded them: the rows the primary judge graded take this
    judge's verdict and letter (none: ungraded under it); rows the pre-filter or the rule resolved keep
    theirs, and so (in the final view) does a human review, final under any judge. No panel, no reviewers:
    only the Δ is read off these."""
    rows_, judge, verdict, pick = _panel(frames)
    mine = judge == j
    n = len(R.ai)
    v_j = np.full(n, int(VerdictCode.NONE), dtype=np.int64)
    p_j = np.full(n, -1, dtype=np.int64)
    v_j[rows_[mine]], p_j[rows_[mine]] = verdict[mine], pick[mine]
    fp = column(frames.rows, "fp").astype(np.int64)
    judged = fp >= 0
    swap = judged & ((R.review == VerdictCode.NONE) | (frames.verdicts != "final"))
    src = frames.rows
    cols = {k: column(src, k) for k in ("ai", "ii", "oi", "sample", "gold_pos", "n_opt", "human", "strict_pos",
                                         "naive_pos", "user_pos", "uniform", "truncated")}  # fmt: skip
    cols["verdict"] = np.where(swap, v_j, column(src, "verdict"))
    cols["pick_pos"] = np.where(swap, p_j, column(src, "pick_pos"))
    cols["auto_verdict"] = np.where(judged, v_j, column(src, "auto_verdict"))
    fp_j = frames.info.panel_judges[j]
    cols["fp"] = np.where(judged & (v_j != VerdictCode.NONE), 0, -1)
    counts = np.bincount(R.ai[judged & (v_j != VerdictCode.NONE)], minlength=R.n_arms)
    info = replace(
        frames.info,
        arm_fingerprints={a: {fp_j: int(counts[k])} for k, a in enumerate(frames.info.arms) if counts[k]},
        panel_judges=[],
        reviewers=[],
    )
    return StudyFrames(info=info, verdicts=frames.verdicts, rows=Columns(cols))


def primary_of(frames: StudyFrames) -> str | None:
    """The final verdicts' judge: its fingerprint (the one with most rows when arms were graded under several)."""
    used: dict[str, int] = {}
    for fps in frames.info.arm_fingerprints.values():
        for fp, k in fps.items():
            used[fp] = used.get(fp, 0) + k
    return max(sorted(used), key=lambda fp: used[fp]) if used else None


def _confusion(conf: np.ndarray) -> Confusion:
    return {p.name: {q.name: int(round(conf[p, q])) for q in VERDICT_CODES} for p in VERDICT_CODES}


def judge_panel(
    frames: StudyFrames, R: Rows, n_boot: int, seed: int, method: CIMethod, notes: Notes
) -> JudgePanel | None:
    """Every panel judge against the primary, and α over all of them (``delta_by_judge`` left empty for
    :func:`~mcqaudit.metrics.compute.compute` to fill). None when the study has no panel judge."""
    info = frames.info
    if not info.panel_judges or frames.panel is None:
        notes["judge_panel"] = (
            "one judge: the finding is not checked against another (grade a second judge with "
            "mcqaudit grade --panel)"
        )
        return None
    rows_, judge, verdict, _ = _panel(frames)
    n_j, n_items = len(info.panel_judges), R.n_items
    primary = primary_verdicts(frames, R)
    # α's units: the rows some panel judge has a record for (the others have one value at most)
    units, unit_of = np.unique(rows_, return_inverse=True)
    values = np.full((units.size, 1 + n_j), int(VerdictCode.NONE), dtype=np.int64)
    values[:, 0] = primary[units]
    values[unit_of.reshape(-1), 1 + judge] = verdict
    boot = ItemBootstrap(n_items, n_boot, seed, method)
    ii = R.ii[rows_]

    def per_item(mask: np.ndarray) -> np.ndarray:
        return np.bincount(ii, weights=mask.astype(np.float64), minlength=n_items)

    for j in range(n_j):
        mine = judge == j
        ok = mine & (verdict != VerdictCode.NONE)
        boot.add(("records", j), per_item(mine))
        boot.add(("errors", j), per_item(mine & ~ok))
        boot.add(("ok", j), per_item(ok))
        boot.add(("other", j), per_item(ok & (verdict == VerdictCode.OTHER)))
        both = ok & (primary[rows_] != VerdictCode.NONE)
        for p in range(NV):
            for q in range(NV):
                boot.add(("conf", j, p, q), per_item(both & (primary[rows_] == p) & (verdict == q)))
    o, pairable = coincidences(values)
    for c in range(NV):
        for k in range(NV):
            boot.add(("alpha", c, k), np.bincount(R.ii[units], weights=o[:, c, k], minlength=n_items))
    S = boot.run()
    judges = {fp: _judge_entry(S, info.judge_configs.get(fp, {}).get("model"), j) for j, fp in
              enumerate(info.panel_judges)}  # fmt: skip
    judged = int((primary != VerdictCode.NONE).sum())
    for fp, e in judges.items():
        if e["compared_rows"] < judged:
            notes[f"judge_panel.judges.{fp}"] = (
                f"graded {e['compared_rows']} of the {judged} rows the primary judge graded (the rest: not yet, or "
                "failed): its figures and its Δ rest on those; grade --panel again to complete it"
            )
    n_units = int(pairable.sum())
    a = alpha(np.array([[S["alpha", c, k] for k in range(NV)] for c in range(NV)]))
    alpha_m = _thin(summarize(a, n_units), n_units)
    if alpha_m is None:
        notes["judge_panel.alpha"] = (
            "no row graded by two judges" if not n_units else "every verdict of every judge is one category"
        )
    fp0 = primary_of(frames)
    if len({fp for fps in info.arm_fingerprints.values() for fp in fps}) > 1:
        notes["judge_panel.primary"] = (
            "the final verdicts come from several judge configurations: each panel judge is compared with "
            "whichever of them graded the row"
        )
    return {
        "primary": fp0,
        "primary_model": info.judge_configs.get(fp0, {}).get("model") if fp0 else None,
        "judges": judges,
        "alpha": alpha_m,
        "delta_by_judge": {},
    }


def _judge_entry(S: Sums, model: str | None, j: int) -> PanelJudge:
    rows, graded = int(S.point(("records", j))), int(S.point(("ok", j)))
    conf = np.array([[S["conf", j, p, q] for q in range(NV)] for p in range(NV)])
    compared = int(round(conf[:, :, 0].sum()))
    po, k = kappa(conf)
    return {
        "model": model,
        "rows": rows,
        "graded": graded,
        "error_rate": _thin(summarize(safe_div(S["errors", j], S["records", j]), rows), rows),
        "other_rate": _thin(summarize(safe_div(S["other", j], S["ok", j]), graded), graded),
        "compared_rows": compared,
        "agreement_with_primary": _thin(summarize(po, compared), compared),
        "kappa_with_primary": _thin(summarize(k, compared), compared),
        "confusion": _confusion(conf[:, :, 0]),
    }


# --- the flag -----------------------------------------------------------------------------------------
def _excludes_zero(m: Metric) -> bool:
    lo, hi = m.get("ci_low"), m.get("ci_high")
    return lo is not None and hi is not None and (lo > 0 or hi < 0)


def sensitive(primary: Metric | None, other: Metric | None) -> bool:
    """The Δ under another judge differs from the primary's (flag ``judge_sensitive``): in sign with both CIs
    excluding 0, or by more than the primary's CI (it lies outside it). Both on at least :data:`MIN_ITEMS`
    items, the primary's with a CI."""
    if primary is None or other is None:
        return False
    lo, hi, vp, vo = primary.get("ci_low"), primary.get("ci_high"), primary.get("value"), other.get("value")
    if lo is None or hi is None or vp is None or vo is None or min(primary["n"], other["n"]) < MIN_ITEMS:
        return False
    opposite = (vp > 0 > vo) or (vp < 0 < vo)
    return vo < lo or vo > hi or (opposite and _excludes_zero(primary) and _excludes_zero(other))
