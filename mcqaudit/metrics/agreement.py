"""Agreement family: the automated verdict against reviews (``judge_agreement``, with Cohen's κ and the
review-corrected accuracy) and the log-prob cross-check (``logprob_crosscheck``). Pure.

Bootstrap columns read here: ``("review_vs_auto", arm | "all", auto, review)`` (reviewed rows by automated
and review verdict), ``("auto_share", verdict, arm)`` / ``("auto_den", arm)`` (item-weighted share of each
automated verdict) and ``("logprob", what, arm)``.
"""

from __future__ import annotations

import numpy as np

from mcqaudit.formatting import plural
from mcqaudit.metrics.bootstrap import Sums, clustered_rate, round6, safe_div, share_metric, summarize
from mcqaudit.metrics.results import JudgeAgreement, LogprobCrosscheck, Metric, Notes
from mcqaudit.metrics.rules import MIN_AUDIT_ROWS, MIN_CI_ROWS
from mcqaudit.vocab import VERDICT_CODES, VerdictCode

LOGPROB_COLUMNS = ("n", "lp_correct", "text_correct")


def _counts_only(m: Metric | None, n: int, what: str, thin: list[str]) -> None:
    """A figure on fewer than :data:`MIN_CI_ROWS` rows keeps its value and n, not its CI (a CI from 2 rows
    reads [0, 100] or [100, 100]): it is shown as counts; ``thin`` collects it for the group's note."""
    if m is None or n >= MIN_CI_ROWS:
        return
    m["ci_low"] = m["ci_high"] = None
    thin.append(f"{what} ({plural(n, 'row')})")


def has_reviews(S: Sums, key: int | str) -> bool:
    """Arm ``key`` (or ``"all"``) has reviewed rows with an automated verdict (its review_vs_auto columns)."""
    return ("review_vs_auto", key, int(VerdictCode.CORRECT), int(VerdictCode.CORRECT)) in S


def _kappa_at_one(out: JudgeAgreement, pe: float) -> None:
    """κ = 1 in every replicate (the reviewer agreed on every row: "κ 1.00 [1.00, 1.00]", certainty from 30
    rows): its lower end is read off the agreement's, the Wilson lower end (:func:`~mcqaudit.metrics.bootstrap.
    share_metric`), at the point's chance agreement ``pe``: (p_low − pe) / (1 − pe)."""
    ag, kp = out["agreement"], out["kappa"]
    low = ag.get("ci_low") if ag is not None else None
    if kp is None or low is None or pe >= 1:
        return
    if kp["value"] == 1.0 and kp.get("ci_low") == kp.get("ci_high") == 1.0:
        kp["ci_low"] = round6(max(-1.0, (float(low) - pe) / (1 - pe)))


def judge_agreement(
    S: Sums, notes: Notes, key: int | str, arm: str | None, scope: str
) -> JudgeAgreement | None:
    """Automated verdict vs the reviewer's on reviewed rows of arm ``key`` (or ``"all"``); per arm, also
    the accuracy corrected by the reviews. None when no reviewed row has an automated verdict."""
    if not has_reviews(S, key):
        return None
    # (3, 3, B + 1), indexed by VerdictCode: automated × reviewer's
    codes = [int(c) for c in VERDICT_CODES]
    conf = np.array([[S["review_vs_auto", key, j, h] for h in codes] for j in codes])
    total = conf.sum(axis=(0, 1))
    n = int(round(total[0]))
    if n == 0:
        return None
    row = conf.sum(axis=1)  # automated verdict
    colm = conf.sum(axis=0)  # reviewer's verdict
    po = safe_div(np.einsum("kkb->b", conf), total)
    pe = sum(safe_div(row[k], total) * safe_div(colm[k], total) for k in VERDICT_CODES)
    kappa = safe_div(po - pe, 1 - pe)
    out: JudgeAgreement = {
        "sample": "uniform" if scope == "uniform" else "all",
        "reviewed_rows": n,
        "preliminary": n < MIN_AUDIT_ROWS,
        "agreement": share_metric(po, n),  # 12 of 12 reviewed rows: not [100, 100]
        "kappa": summarize(kappa, n),
        "precision": {
            k.name: share_metric(safe_div(conf[k, k], row[k]), int(round(row[k][0])))
            for k in VERDICT_CODES
        },
        "confusion": {
            j.name: {h.name: int(round(conf[j, h, 0])) for h in VERDICT_CODES} for j in VERDICT_CODES
        },
    }
    _kappa_at_one(out, float(pe[0]))
    where = "judge_agreement" if arm is None else f"metrics.{arm}.judge_agreement"
    thin: list[str] = []
    _counts_only(out["agreement"], n, "agreement", thin)
    _counts_only(out["kappa"], n, "κ", thin)
    for k in VERDICT_CODES:
        v = k.name
        if out["precision"][v] is None:
            notes[f"{where}.precision.{v}"] = f"no reviewed row with automated verdict {v}"
        else:
            _counts_only(out["precision"][v], int(round(row[k][0])), f"precision {v}", thin)
    if scope != "uniform":
        out["caveat"] = "reviewed rows are not a uniform spot check: agreement may be biased"
    if arm is not None:
        # Σ_V (item-weighted share of automated verdict V) × P(reviewer says CORRECT | automated V)
        corr = np.zeros_like(total)
        assumed = []
        for k in VERDICT_CODES:
            share = safe_div(S["auto_share", k.name, key], S["auto_den", key])
            if row[k][0] > 0:
                q = safe_div(conf[k, VerdictCode.CORRECT], row[k])
            else:
                q = np.full_like(total, 1.0 if k == VerdictCode.CORRECT else 0.0)
                if S.point(("auto_share", k.name, key)) > 0:
                    assumed.append(k.name)
            corr = corr + share * q
        m = share_metric(corr, int(round(S.point(("auto_den", key)))))
        if m is not None:
            m["preliminary"] = n < MIN_AUDIT_ROWS
            m["reviewed_rows"] = n
            _counts_only(m, n, "judge-corrected accuracy", thin)
        if m is not None and assumed:
            m["assumed_exact"] = assumed
            key = f"{where}.corrected_accuracy"
            exact = f"no reviewed row with automated verdict {', '.join(assumed)}: taken as exact"
            notes[key] = exact
        out["corrected_accuracy"] = m
    if thin:
        notes[where] = f"counts only, no CI (a CI needs {MIN_CI_ROWS} rows): {', '.join(thin)}"
    return out


def logprob_crosscheck(S: Sums, a: int, items: int, mismatch: np.ndarray) -> LogprobCrosscheck:
    """Accuracy by argmax log-prob vs by text on arm ``a``'s graded rows that carry option_logprobs, and the
    row-level mismatch rate from its item-cluster sums (``mismatch``, see ``compute._logprob_tables``)."""
    n = S["logprob", "n", a]
    n_lp = int(n[0])
    lp_acc = safe_div(S["logprob", "lp_correct", a], n)
    tx_acc = safe_div(S["logprob", "text_correct", a], n)
    return {
        "mismatch_rate": clustered_rate(mismatch),
        "accuracy_logprob": share_metric(lp_acc, n_lp),
        "accuracy_text": share_metric(tx_acc, n_lp),
        "difference": summarize(lp_acc - tx_acc, n_lp),
        "items": items,
    }
