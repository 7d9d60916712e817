"""Bias family: position and token bias (``position_pick_rate``, ``first_position_rate``, ``rstd``),
``consistency`` across orientations, and whether the design can separate position from content
(``design``, behind the ``design_imbalance`` flag). Pure.

Bootstrap columns read here: ``("pick", arm, position)`` / ``("picked", arm)``, ``("gold_correct" |
"gold_graded", arm, position)``, ``("binary_consistent" | "binary_pairs", arm)`` and ``("nway_num" |
"nway_den", arm)``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence

import numpy as np

from mcqaudit.metrics.bootstrap import Sums, proportion, round6, safe_div, share_metric, summarize
from mcqaudit.metrics.cells import Families, Rows, group_ids
from mcqaudit.metrics.facts import design_reasons, gold_shares
from mcqaudit.metrics.results import Consistency, Design, Family, Metric
from mcqaudit.vocab import LETTERS, VerdictCode

Note = Callable[[str, str], None]  # (key under the arm's path, reason)
# one arm's chance level of a pick at each displayed position: "uniform" (1/n) and "gold" (the gold share)
Chance = dict[str, dict[int, float | None]]


def binary_consistency(
    R: Rows, c_ai: np.ndarray, c_ii: np.ndarray, answered: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per (arm, item): swapped pairs and consistent ones (CC or II), for items shown in exactly two
    orientations in the arm; one pair per sample index whose two rows are both answered."""
    n_arms, n_items = R.n_arms, R.n_items
    n_orient = np.bincount(c_ai * n_items + c_ii, minlength=n_arms * n_items)
    smax = int(R.sample.max()) + 1 if R.sample.size else 1
    key = ((R.ai * n_items + R.ii) * smax + R.sample)[answered]
    uq, inv = group_ids(key, n_arms * n_items * smax)
    cnt = np.bincount(inv, minlength=uq.size)
    correct = R.verdict[answered] == VerdictCode.CORRECT
    corr = np.bincount(inv, weights=correct.astype(np.float64), minlength=uq.size)
    parent = uq // smax
    pair = (cnt == 2) & (n_orient[parent] == 2)
    consistent = pair & ((corr == 0) | (corr == 2))
    size = n_arms * n_items
    pairs = np.bincount(parent, weights=pair.astype(np.float64), minlength=size).reshape(n_arms, n_items)
    cons = np.bincount(parent, weights=consistent.astype(np.float64), minlength=size).reshape(n_arms, n_items)
    return pairs, cons


def nway_consistency(
    R: Rows, orients: list[str], max_n: int, answered: np.ndarray
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
    choice[R.verdict == VerdictCode.OTHER] = max_n
    m = answered & (R.pick >= 0)
    choice[m] = canon[R.oi[m], R.pick[m]]
    m2 = (R.verdict == VerdictCode.CORRECT) & (R.pick < 0)
    choice[m2] = canon[R.oi[m2], np.clip(R.gold[m2], 0, max_n - 1)]
    sel = choice >= 0
    size = n_arms * n_items
    num, den = np.zeros(size), np.zeros(size)
    if not sel.any():
        return num.reshape(n_arms, n_items), den.reshape(n_arms, n_items)
    k = max_n + 1
    ai_ii = (R.ai * n_items + R.ii)[sel]
    uq, inv = group_ids(ai_ii * k + choice[sel], size * k)
    cnt = np.bincount(inv, minlength=uq.size)
    parent = uq // k
    starts = np.flatnonzero(np.r_[True, parent[1:] != parent[:-1]])
    plural = np.maximum.reduceat(cnt, starts)
    total = np.add.reduceat(cnt, starts)
    par = parent[starts]
    uo, _ = group_ids(ai_ii * max(n_or, 1) + R.oi[sel], size * max(n_or, 1))
    n_orient = np.bincount(uo // max(n_or, 1), minlength=size)
    ok = n_orient[par] >= 2
    num[par[ok]] = plural[ok] / total[ok]
    den[par[ok]] = 1.0
    return num.reshape(n_arms, n_items), den.reshape(n_arms, n_items)


def position_chance(
    c_ai: np.ndarray, c_gold: np.ndarray, c_nopt: np.ndarray, n_picked: np.ndarray, n_arms: int, max_n: int
) -> list[Chance]:
    """Per arm and position: the pick share expected without position preference — 1/n averaged over the
    picked rows (balanced design), and the share of picked rows whose gold letter is there."""
    out: list[Chance] = []
    for a in range(n_arms):
        sel = c_ai == a
        w, n, g = n_picked[sel], c_nopt[sel], c_gold[sel]
        tot = float(w.sum())
        uniform = {q: round6(float((w * (n > q) / n).sum()) / tot) if tot else None for q in range(max_n)}
        gold = {q: round6(float(w[g == q].sum()) / tot) if tot else None for q in range(max_n)}
        out.append({"uniform": uniform, "gold": gold})
    return out


def gold_balance(R: Rows) -> tuple[bool, dict[str, dict[str, float]]]:
    """Whether gold positions are uniform within each option count (all rows), and their shares
    (:func:`mcqaudit.metrics.facts.gold_shares` over the counts)."""
    if not R.n_opt.size:
        return True, {}
    top = int(R.n_opt.max()) + 1
    counts = np.bincount(R.n_opt * top + np.clip(R.gold, 0, top - 1), minlength=top * top).reshape(top, top)
    return gold_shares({n: counts[n].tolist() for n in range(2, top)})


def design_of(
    orients: list[str],
    balanced: bool,
    gold_share: Mapping[str, Mapping[str, float]],
    families: Families,
    reported: Sequence[int],
) -> Design:
    """Whether the design can separate position from content (docs/design.md §7 ``design_imbalance``).

    Gold letters are *unbalanced* when some displayed position holds under half or over one and a half times
    its fair share 1/n of them (all gold at A, say): a position preference and the answers are then the same
    thing, so pick rates and RStd cannot be read. With *one orientation only* (per option count) nothing
    shows an item's options in another order, so the Δ cannot be checked per orientation. ``families``
    are the item families (the items sharing one orientation set), within which alone orientations are
    compared and RStd is computed; ``reported`` are those with per-family figures.
    """
    d = design_reasons(orients, gold_share)
    return {
        "balanced": balanced,
        "gold_position_share": {k: dict(v) for k, v in gold_share.items()},
        "gold_unbalanced": d.gold_unbalanced,
        "one_orientation": d.one_orientation,
        "separates_position": not (d.gold_unbalanced or d.one_orientation),
        "unreadable": d.unreadable,
        "reason": d.reason,
        "families": {
            lab: _family(families, f, orients, f in reported) for f, lab in enumerate(families.labels)
        },
    }


def _family(F: Families, f: int, orients: list[str], reported: bool) -> Family:
    return {
        "options": F.options[f],
        "orientations": [orients[o] for o in F.orientations[f]],
        "items": F.items[f],
        "reported": reported,
    }


def position_pick_rates(
    S: Sums, a: int, max_n: int, balanced: bool, chance: Chance, design: Design, note: Note
) -> tuple[dict[str, Metric | None] | None, Metric | None, dict[str, Metric | None] | None]:
    """Arm ``a``'s share of non-OTHER picks at each displayed position with its chance level, the first
    position's, and the shares alone (``pick_share``: what the model picked, which holds whatever the design).
    The first two are ``None`` when the design cannot read them as a position preference (gold letters
    unbalanced); all three when no answered row has a picked letter."""
    picked = S["picked", a]
    base = chance["uniform" if balanced else "gold"]
    if design["gold_unbalanced"]:
        note(
            "position_pick_rate",
            _unreadable(design)
            + "; pick_share gives the shares themselves, confounded by where the gold sits",
        )
    elif not balanced:
        note(
            "position_pick_rate",
            "unbalanced design (gold letters are not uniform over positions): pick rates are compared with "
            "the gold-letter distribution, not 1/n",
        )
    if picked[0] == 0:
        if not design["gold_unbalanced"]:
            note("position_pick_rate", "no answered row with a picked letter in this arm")
        return None, None, None
    share = {
        LETTERS[q]: share_metric(safe_div(S["pick", a, q], picked), int(picked[0])) for q in range(max_n)
    }
    if design["gold_unbalanced"]:
        return None, None, share
    ppr: dict[str, Metric | None] = {}
    for q in range(max_n):
        m = share[LETTERS[q]]
        ppr[LETTERS[q]] = None if m is None else {**m, "chance": base.get(q)}
    return ppr, ppr[LETTERS[0]], share


def _recalls(
    S: Sums, correct: Callable[[int], Hashable], graded: Callable[[int], Hashable], letters: range
) -> tuple[np.ndarray | None, dict[str, Metric | None]]:
    """Replicates of the std over gold letters of recall (pp), and the recalls, over the gold letters that
    have graded rows; ``(None, {})`` with fewer than two such letters."""
    have = [q for q in letters if graded(q) in S and S.point(graded(q)) > 0]
    if len(have) < 2:
        return None, {}
    rec = np.stack([safe_div(S[correct(q)], S[graded(q)]) for q in have], axis=1)
    with np.errstate(invalid="ignore"):
        spread = 100 * np.std(rec, axis=1)
    return spread, {
        LETTERS[q]: share_metric(rec[:, j], int(S.point(graded(q)))) for j, q in enumerate(have)
    }


FamilyRstd = tuple[Metric | None, dict[str, Metric | None]]


def rstd(
    S: Sums,
    a: int,
    max_n: int,
    design: Design,
    note: Note,
    families: Sequence[tuple[int, str, int]],
    single: bool,
) -> tuple[Metric | None, dict[str, Metric | None], dict[str, FamilyRstd]]:
    """RStd (Zheng et al. 2024), the std over gold letters of recall in percentage points: within each item
    family ``(index, label, options)``, and the headline — the family's own in a study of one family, else
    the mean of the families' RStd weighted by their items in the arm. Gold letters are compared only within
    a family: pooled, gold C and D would come only from the 4-option items, and their difficulty would read
    as a letter preference. Also the pooled recalls by gold letter (``recall_by_gold_letter``)."""
    if design["gold_unbalanced"]:
        note("rstd", _unreadable(design))
        return None, {}, {lab: (None, {}) for _, lab, _ in families}
    _, recall = _recalls(S, lambda q: ("gold_correct", a, q), lambda q: ("gold_graded", a, q), range(max_n))
    per: dict[str, FamilyRstd] = {}
    parts: list[tuple[float, np.ndarray, int, str]] = []  # (items, replicates, graded rows, label)
    for f, lab, n in families:
        reps, rec = _recalls(
            S, _key("fam_gold_correct", a, f), _key("fam_gold_graded", a, f), range(min(n, max_n))
        )
        rows = int(S.point(("fam_graded", a, f)))
        per[lab] = (summarize(reps, rows) if reps is not None else None, rec)
        if reps is not None and per[lab][0] is not None:
            parts.append((S.point(("fam_acc_den", a, f)), reps, rows, lab))
    if not parts:
        note("rstd", "fewer than two gold letters have graded rows" if single else (
            "no item family (the items sharing one orientation set) of 20 items or more has graded rows at two "
            "gold letters; RStd compares gold letters within a family"
        ))  # fmt: skip
        return None, recall, per
    head: np.ndarray = parts[0][1]
    if len(parts) > 1:
        head = np.sum([w * r for w, r, _, _ in parts], axis=0) / sum(w for w, _, _, _ in parts)
    if not single:
        note("rstd", "the mean of RStd within each item family (the items sharing one orientation set), weighted "
             "by items: " + "; ".join(f"{lab} {per[lab][0]['value']:.1f} pp on {int(w)} items"  # type: ignore[index]
                                      for w, _, _, lab in parts))  # fmt: skip
        if recall:
            note("recall_by_gold_letter", "pools the item families (different items, different option counts): "
                 "compare gold letters within by_family")  # fmt: skip
    return summarize(head, sum(r for _, _, r, _ in parts)), recall, per


def _key(*prefix: Hashable) -> Callable[[int], Hashable]:
    """The bootstrap column of a gold letter ``q`` under ``prefix``."""
    return lambda q: (*prefix, q)


def consistency(S: Sums, a: int, note: Note) -> Consistency:
    """Binary (CC+II over swapped pairs) and n-way (plurality share) consistency of arm ``a``."""
    out: Consistency = {
        "binary": proportion(S, ("binary_consistent", a), ("binary_pairs", a)),
        "nway": proportion(S, ("nway_num", a), ("nway_den", a)),
    }
    if out["binary"] is None:
        note("consistency.binary", "no item shown in exactly two orientations with both rows answered")
    if out["nway"] is None:
        note("consistency.nway", "no item has choices in two or more orientations")
    return out


def _unreadable(design: Design) -> str:
    return (
        f"unreadable: {design['reason']}; the design cannot separate a position preference from the answers"
    )
