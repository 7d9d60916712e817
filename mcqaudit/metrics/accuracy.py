"""Accuracy family: per-arm accuracy, answered accuracy, OTHER and ungraded rates, circular accuracy, and
every difference between arms (``delta_accuracy``, ``delta_accuracy_by_parser``, ``pairwise_delta``, and the
truncated-rate Δs of :func:`truncation_delta`). Pure.

A Δ uses the items both arms answered (paired); arms that share none are compared unpaired, each over its
own items. Fewer than :data:`MIN_ITEMS` items give a null Δ with the reason in ``notes``. Arms graded under
different judge fingerprints are never compared.

Bootstrap columns read here (arm indices ``a``, orientation indices ``o``): ``("acc_num" | "acc_den", a)``,
``("acc_or_num" | "acc_or_den", a, o)``, the row counts ``(count, a)`` for ``rows graded correct incorrect
other ungraded answered``, ``("circular_num" | "circular_den" | "circular_chance", a)``, and for Δs
``("delta_num" | "delta_den", t)``, ``("delta_or_num" | "delta_or_den", t, o)``, ``("delta_part", count, t,
"t" | "c")`` (counts ``other graded correct answered``, and ``truncated rows other_kept graded_kept`` for the
truncation Δs, with ``(count, a)`` for those three per arm), ``("parser_acc_num" | "parser_acc_den", parser, a)``, ``("parser_delta_num" |
"parser_delta_den", parser, t)`` and ``("pairwise_num" | "pairwise_den" | "pairwise_graded", i, j)``.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence

from mcqaudit.formatting import plural
from mcqaudit.metrics.bootstrap import Sums, negated, proportion, ratio, round6, safe_div, summarize, unpaired
from mcqaudit.metrics.inputs import StudyInfo
from mcqaudit.metrics.results import ArmDelta, FamilyDelta, Metric, Notes, Pairing
from mcqaudit.metrics.rules import MIN_ITEMS

Note = Callable[[str, str], None]  # (key under the arm's path, reason)
FamilySpec = tuple[int, str, list[int]]  # a reported item family: index, label, orientation indices


def rates(S: Sums, a: int, note: Note) -> dict[str, Metric | None]:
    """Arm ``a``'s ``accuracy`` (item-weighted), ``answered_accuracy``, ``other_rate`` and ``ungraded_rate``."""
    out = {
        "accuracy": proportion(S, ("acc_num", a), ("acc_den", a)),
        "answered_accuracy": proportion(S, ("correct", a), ("answered", a)),
        "other_rate": proportion(S, ("other", a), ("graded", a)),
        "ungraded_rate": ratio(S, ("ungraded", a), ("rows", a)),
    }
    if out["accuracy"] is None:
        note("accuracy", "no graded row in this arm")
    if out["answered_accuracy"] is None:
        note("answered_accuracy", "no CORRECT or INCORRECT row in this arm")
    if out["other_rate"] is None:
        note("other_rate", "no graded row in this arm")
    return out


def circular_accuracy(S: Sums, a: int, note: Note) -> Metric | None:
    """Share of items CORRECT in every orientation (MMBench CircularEval), with its chance level."""
    circ = proportion(S, ("circular_num", a), ("circular_den", a))
    if circ is None:
        note(
            "circular_accuracy", "no item has a verdict in every one of two or more orientations in this arm"
        )
    else:
        circ["chance"] = round6(S.point(("circular_chance", a)) / S.point(("circular_den", a)))
    return circ


# --- comparability ----------------------------------------------------------------------------------------
def fingerprint_conflict(info: StudyInfo, a: str, b: str) -> str | None:
    """Why arms ``a`` and ``b`` cannot be compared (graded under different judge fingerprints), or None."""
    fa, fb = set(info.arm_fingerprints.get(a, {})), set(info.arm_fingerprints.get(b, {}))
    if len(fa) > 1 or len(fb) > 1 or (fa and fb and fa != fb):
        return (
            f"not compared: {a!r} was graded under judge fingerprint(s) {', '.join(sorted(fa)) or 'none'} "
            f"and {b!r} under {', '.join(sorted(fb)) or 'none'}; re-grade both arms with one judge"
        )
    return None


def fingerprint_conflicts(info: StudyInfo, ctrl: str | None) -> dict[str, str]:
    """Treated arms that cannot be compared with the control: graded under other judge fingerprints."""
    out: dict[str, str] = {}
    if ctrl is None:
        return out
    for arm in info.arms:
        if arm != ctrl and (why := fingerprint_conflict(info, arm, ctrl)):
            out[arm] = why
    return out


def _too_few(pairing: Pairing, items: int, n_t: int, n_c: int, arm: str, ctrl: str) -> str | None:
    """Why a Δ between two arms is not computed (docs/design.md §7: fewer than 20 items), or None."""
    if pairing == "paired":
        return (
            None if items >= MIN_ITEMS else f"{plural(items, 'shared item')} (a Δ needs at least {MIN_ITEMS})"
        )
    if min(n_t, n_c) >= MIN_ITEMS:
        return None
    return (
        f"the arms share no items; compared unpaired, {arm} has {plural(n_t, 'graded item')} and {ctrl} "
        f"{n_c} (each needs at least {MIN_ITEMS})"
    )


# --- differences ------------------------------------------------------------------------------------------
def arm_delta(
    S: Sums,
    info: StudyInfo,
    notes: Notes,
    t: int,
    c: int,
    pairing: Pairing,
    ci_orients: set[int],
    families: Sequence[FamilySpec] = (),
    shared: Container[int] = (),
) -> ArmDelta:
    """Treated − control: paired on the items both arms answered, else unpaired over each arm's own items;
    overall, per orientation (pooled over the items shown in it) and within each item family. A null Δ of a
    family in an orientation is noted only for the ``shared`` orientations (shown in several families): the
    others' family Δ is their pooled Δ, noted already."""
    arm, ctrl = info.arms[t], info.arms[c]
    key = f"delta_accuracy.{arm}"
    n_t, n_c = int(S.point(("acc_den", t))), int(S.point(("acc_den", c)))
    if pairing == "paired":
        items = int(S.point(("delta_den", t)))
        rows = int(
            round(S.point(("delta_part", "graded", t, "t")) + S.point(("delta_part", "graded", t, "c")))
        )
    else:
        items = n_t + n_c
        rows = int(S.point(("graded", t)) + S.point(("graded", c)))
    out: ArmDelta = {
        "overall": None,
        "by_orientation": {},
        "by_family": {},
        "other_rate": None,
        "answered_accuracy": None,
        "truncated_rate": None,
        "other_rate_untruncated": None,
        "items": items,
        "rows": rows,
        "pairing": pairing,
    }
    if pairing == "unpaired":
        out["items_by_arm"] = {arm: n_t, ctrl: n_c}
    short = _too_few(pairing, items, n_t, n_c, arm, ctrl)
    if short is not None:
        notes[f"{key}.overall"] = short
        return out
    by: dict[str, Metric | None] = {}
    if pairing == "paired":
        out["overall"] = ratio(S, ("delta_num", t), ("delta_den", t), se=True)
        for o, lab in enumerate(info.orientations):
            if ("delta_or_den", t, o) not in S:
                continue
            k = int(S.point(("delta_or_den", t, o)))
            by[lab] = (
                ratio(S, ("delta_or_num", t, o), ("delta_or_den", t, o), se=True) if k >= MIN_ITEMS else None
            )
            if by[lab] is None:
                notes[f"{key}.by_orientation.{lab}"] = f"{plural(k, 'shared item')} in {lab}"

        def diff(x: str, den: str) -> Metric | None:
            return summarize(
                safe_div(S["delta_part", x, t, "t"], S["delta_part", den, t, "t"])
                - safe_div(S["delta_part", x, t, "c"], S["delta_part", den, t, "c"]),
                items,
                se=True,
            )

        out["other_rate"] = diff("other", "graded")
        out["answered_accuracy"] = diff("correct", "answered")
        out["truncated_rate"], out["other_rate_untruncated"] = truncation_delta(S, t, c, pairing, items)
    else:
        out["overall"] = unpaired(S, ("acc_num", t), ("acc_den", t), ("acc_num", c), ("acc_den", c), items)
        for o, lab in enumerate(info.orientations):
            if o not in ci_orients or ("acc_or_den", t, o) not in S or ("acc_or_den", c, o) not in S:
                continue
            kt, kc = int(S.point(("acc_or_den", t, o))), int(S.point(("acc_or_den", c, o)))
            if min(kt, kc) >= MIN_ITEMS:
                by[lab] = unpaired(
                    S, ("acc_or_num", t, o), ("acc_or_den", t, o), ("acc_or_num", c, o), ("acc_or_den", c, o),
                    kt + kc,
                )  # fmt: skip
            else:
                by[lab] = None
                notes[f"{key}.by_orientation.{lab}"] = f"unpaired: {kt} and {kc} items in {lab}"
        out["other_rate"] = unpaired(S, ("other", t), ("graded", t), ("other", c), ("graded", c), items)
        out["answered_accuracy"] = unpaired(
            S, ("correct", t), ("answered", t), ("correct", c), ("answered", c), items
        )
        out["truncated_rate"], out["other_rate_untruncated"] = truncation_delta(S, t, c, pairing, items)
        notes[key] = (
            f"{arm} and {ctrl} share no items: compared unpaired ({n_t} and {n_c} items, independent item samples)"
        )
    out["by_orientation"] = by
    out["by_family"] = {
        lab: family_delta(S, info, notes, t, c, pairing, f, ors, ci_orients, f"{key}.by_family.{lab}", shared)
        for f, lab, ors in families
    }
    return out


def truncation_delta(
    S: Sums, t: int, c: int, pairing: Pairing, items: int
) -> tuple[Metric | None, Metric | None]:
    """Treated − control of the truncated rate (truncated rows / rows; the Δ adds ``rows``: both arms' rows
    it rests on) and of the OTHER rate over the rows not truncated — what is left of an OTHER rise once the
    rows the token limit cut are taken out. Paired: row-pooled within the items graded in both arms."""
    if pairing == "paired":

        def diff(x: str, den: str, fact: bool = False) -> Metric | None:
            return summarize(
                safe_div(S["delta_part", x, t, "t"], S["delta_part", den, t, "t"])
                - safe_div(S["delta_part", x, t, "c"], S["delta_part", den, t, "c"]),
                items,
                se=True,
                fact=fact,
            )

        trunc, kept = diff("truncated", "rows", fact=True), diff("other_kept", "graded_kept")
        rows = S.point(("delta_part", "rows", t, "t")) + S.point(("delta_part", "rows", t, "c"))
    else:
        trunc = unpaired(S, ("truncated", t), ("rows", t), ("truncated", c), ("rows", c), items, fact=True)
        kept = unpaired(
            S, ("other_kept", t), ("graded_kept", t), ("other_kept", c), ("graded_kept", c), items
        )
        rows = S.point(("rows", t)) + S.point(("rows", c))
    if trunc is not None:
        trunc["rows"] = int(round(rows))
    return trunc, kept


def family_delta(
    S: Sums,
    info: StudyInfo,
    notes: Notes,
    t: int,
    c: int,
    pairing: Pairing,
    f: int,
    orients: Sequence[int],
    ci_orients: set[int],
    key: str,
    shared: Container[int] = (),
) -> FamilyDelta:
    """Treated − control within item family ``f``: overall on the family's items graded in both arms, and per
    orientation on those graded in both arms in it (unpaired: each arm over its own items of the family).
    Nothing here compares an orientation of one family with another's."""
    if pairing == "paired":
        items = int(S.point(("fam_delta_den", t, f))) if ("fam_delta_den", t, f) in S else 0
        rows = int(round(S.point(("fam_delta_graded", t, f)))) if items else 0
        overall = (
            ratio(S, ("fam_delta_num", t, f), ("fam_delta_den", t, f), se=True)
            if items >= MIN_ITEMS
            else None
        )
    else:
        n_t, n_c = (int(S.point(("fam_acc_den", a, f))) for a in (t, c))
        items, rows = n_t + n_c, int(S.point(("fam_graded", t, f)) + S.point(("fam_graded", c, f)))
        overall = (
            unpaired(S, ("fam_acc_num", t, f), ("fam_acc_den", t, f), ("fam_acc_num", c, f), ("fam_acc_den", c, f), items)
            if min(n_t, n_c) >= MIN_ITEMS
            else None
        )  # fmt: skip
    if overall is None:
        notes[f"{key}.overall"] = (
            f"{plural(items, 'shared item') if pairing == 'paired' else f'{items} items, unpaired,'} in the family "
            f"(a Δ needs at least {MIN_ITEMS})"
        )
        return {"items": items, "rows": rows, "overall": None, "by_orientation": {}}
    by: dict[str, Metric | None] = {}
    for o in orients:
        if o not in ci_orients:
            continue
        lab = info.orientations[o]
        if pairing == "paired":
            if ("fam_delta_or_den", t, f, o) not in S:
                continue
            k = int(S.point(("fam_delta_or_den", t, f, o)))
            by[lab] = (
                ratio(S, ("fam_delta_or_num", t, f, o), ("fam_delta_or_den", t, f, o), se=True)
                if k >= MIN_ITEMS
                else None
            )
            why = f"{plural(k, 'shared item')} of the family in {lab}"
        else:
            if ("fam_or_den", t, f, o) not in S or ("fam_or_den", c, f, o) not in S:
                continue
            kt, kc = int(S.point(("fam_or_den", t, f, o))), int(S.point(("fam_or_den", c, f, o)))
            by[lab] = (
                unpaired(S, ("fam_or_num", t, f, o), ("fam_or_den", t, f, o), ("fam_or_num", c, f, o),
                         ("fam_or_den", c, f, o), kt + kc)
                if min(kt, kc) >= MIN_ITEMS
                else None
            )  # fmt: skip
            why = f"unpaired: {kt} and {kc} items of the family in {lab}"
        if by[lab] is None and o in shared:
            notes[f"{key}.by_orientation.{lab}"] = why
    return {"items": items, "rows": rows, "overall": overall, "by_orientation": by}


def parser_deltas(
    S: Sums, info: StudyInfo, notes: Notes, parsers: Sequence[str], t: int, c: int, pairing: Pairing
) -> dict[str, Metric | None]:
    """The Δ each parser's letters give, on the same footing (paired or unpaired) as the verdicts' Δ."""
    arm = info.arms[t]
    out: dict[str, Metric | None] = {}
    for p in parsers:
        key = f"delta_accuracy_by_parser.{arm}.{p}"
        mm: Metric | None = None
        if pairing == "paired":
            k = int(S.point(("parser_delta_den", p, t)))
            if k >= MIN_ITEMS:
                mm = ratio(S, ("parser_delta_num", p, t), ("parser_delta_den", p, t), se=True)
            else:
                notes[key] = (
                    "no item graded in both arms"
                    if k == 0
                    else f"{plural(k, 'shared item')} (a Δ needs at least {MIN_ITEMS})"
                )
        else:
            kt, kc = int(S.point(("parser_acc_den", p, t))), int(S.point(("parser_acc_den", p, c)))
            if min(kt, kc) >= MIN_ITEMS:
                mm = unpaired(
                    S, ("parser_acc_num", p, t), ("parser_acc_den", p, t), ("parser_acc_num", p, c),
                    ("parser_acc_den", p, c), kt + kc,
                )  # fmt: skip
                if mm is not None:
                    mm["pairing"] = "unpaired"
            else:
                notes[key] = f"unpaired: {kt} and {kc} items (each needs at least {MIN_ITEMS})"
        out[p] = mm
    return out


def pairwise_delta(
    S: Sums,
    info: StudyInfo,
    notes: Notes,
    pairs: list[tuple[int, int]],
    shared: Mapping[tuple[int, int], int],
) -> dict[str, dict[str, Metric | None]]:
    """Δaccuracy (row arm − column arm) for every pair of arms, on their shared items (or unpaired)."""
    arms = info.arms
    out: dict[str, dict[str, Metric | None]] = {a: {} for a in arms}
    for i, j in pairs:
        a, b = arms[i], arms[j]
        key = f"pairwise_delta.{a}.{b}"
        conflict = fingerprint_conflict(info, a, b)
        k = shared[(i, j)]
        m: Metric | None = None
        if conflict:
            notes[key] = conflict
        elif k:
            if k >= MIN_ITEMS:
                m = ratio(S, ("pairwise_num", i, j), ("pairwise_den", i, j), se=True)
                if m is not None:
                    m["items"] = k
                    m["rows"] = int(round(S.point(("pairwise_graded", i, j))))
                    m["pairing"] = "paired"
            else:
                notes[key] = f"{plural(k, 'shared item')} (a Δ needs at least {MIN_ITEMS})"
        else:
            ni, nj = int(S.point(("acc_den", i))), int(S.point(("acc_den", j)))
            if min(ni, nj) >= MIN_ITEMS:
                m = unpaired(S, ("acc_num", i), ("acc_den", i), ("acc_num", j), ("acc_den", j), ni + nj)
                if m is not None:
                    m["items"] = ni + nj
                    m["rows"] = int(S.point(("graded", i)) + S.point(("graded", j)))
                    m["pairing"] = "unpaired"
            else:
                notes[key] = f"no shared items; unpaired, {a} has {ni} and {b} {nj} (each needs {MIN_ITEMS})"
        out[a][b] = m
        out[b][a] = negated(m) if m is not None else None
    return out
