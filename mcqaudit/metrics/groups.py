"""Results by subject (docs/design.md §7 ``by_group``, ``report --by metadata.KEY``): for each value of a
metadata key and each arm, accuracy, answered accuracy, OTHER rate, truncated rate and accuracy by
orientation; for each treated arm, the Δs against the control within the group. Pure.

The rows of a group are those whose metadata holds the value (:class:`~mcqaudit.metrics.inputs.Grouping`);
rows that lack the key form one more group, :data:`MISSING` (named in ``group_by.missing``). Each group is
a small study of its own items: its figures are computed as the report's are (item-weighted accuracy, row-
pooled rates, Δs paired on the items both arms answered, else unpaired) and bootstrapped on the group's own
items — a stratified item bootstrap: every replicate draws the group's items with replacement, the same draw
for every arm, so its Δs stay paired, and the seed is the report's. A study with one group gets the
report's own figures and CIs.

A group under :data:`~mcqaudit.metrics.rules.MIN_ITEMS` items is ``small``: its figures are shown with their
n, but it has no Δ (a Δ needs that many shared items), drives no flag and no finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mcqaudit.formatting import plural
from mcqaudit.metrics.bootstrap import ItemBootstrap, Sums, proportion, ratio, safe_div, summarize, unpaired
from mcqaudit.metrics.cells import group_ids
from mcqaudit.metrics.inputs import Grouping, StudyFrames, column
from mcqaudit.metrics.results import GroupArm, GroupDelta, GroupFacts, Metric, Notes, Pairing
from mcqaudit.metrics.rules import MAX_ORIENTATIONS_WITH_CI, MIN_ITEMS, ci_method
from mcqaudit.vocab import VerdictCode

MISSING = "(none)"  # the group of the rows whose metadata lacks the key
_COUNTS = ("rows", "graded", "correct", "answered", "other", "truncated")


def missing_label(key: str, labels: Sequence[str]) -> str:
    """The name of the rows that lack ``key``: ``(none)``, or ``(no KEY)`` when ``(none)`` is a real value."""
    return MISSING if MISSING not in labels else f"(no {key})"


@dataclass
class _Group:
    """One group's rows, aggregated per (arm, local item): the group's items are ``items`` (study item
    indices, ascending), local index = position there."""

    items: np.ndarray
    counts: dict[str, np.ndarray]  # _COUNTS -> (n_arms, n_local)
    acc: np.ndarray  # (n_arms, n_local) item accuracy: mean over its graded orientations; NaN: none graded
    acc_or: np.ndarray  # (n_arms, n_or, n_local) cell accuracy; NaN: no graded row there
    shown_or: np.ndarray  # (n_arms, n_or) the arm showed some item of the group in the orientation


def _aggregate(frames: StudyFrames, mask: np.ndarray) -> _Group:
    r, info = frames.rows, frames.info
    n_arms, n_or = len(info.arms), max(len(info.orientations), 1)
    ai = column(r, "ai").astype(np.int64)[mask]
    oi = column(r, "oi").astype(np.int64)[mask]
    items, li = np.unique(column(r, "ii").astype(np.int64)[mask], return_inverse=True)
    li = li.reshape(-1)
    n = items.size
    v = column(r, "verdict").astype(np.int64)[mask]
    graded = v != VerdictCode.NONE
    correct = v == VerdictCode.CORRECT
    weights = {
        "rows": np.ones(v.size),
        "graded": graded,
        "correct": correct,
        "answered": correct | (v == VerdictCode.INCORRECT),
        "other": v == VerdictCode.OTHER,
        "truncated": column(r, "truncated").astype(bool)[mask],
    }
    arm_item = ai * n + li
    counts = {
        k: np.bincount(arm_item, weights=np.asarray(w, dtype=np.float64), minlength=n_arms * n).reshape(
            n_arms, n
        )
        for k, w in weights.items()
    }
    # cells: (arm, orientation, item), pooled over samples; an item's accuracy is the mean over its cells
    cell_key = (ai * n_or + oi) * n + li
    cells, of_row = group_ids(cell_key, n_arms * n_or * max(n, 1))
    c_graded = np.bincount(of_row, weights=graded.astype(np.float64), minlength=cells.size)
    c_acc = safe_div(np.bincount(of_row, weights=correct.astype(np.float64), minlength=cells.size), c_graded)
    acc_or = np.full((n_arms * n_or * max(n, 1),), np.nan)
    acc_or[cells] = c_acc
    acc_or = acc_or.reshape(n_arms, n_or, max(n, 1))[:, :, :n]
    shown = np.zeros(n_arms * n_or, dtype=bool)
    shown[np.unique(cells // max(n, 1))] = True
    graded_cells = np.isfinite(acc_or)
    acc = safe_div(
        np.where(graded_cells, acc_or, 0.0).sum(axis=1), graded_cells.sum(axis=1).astype(np.float64)
    )
    return _Group(items, counts, acc, acc_or, shown.reshape(n_arms, n_or))


def _columns(boot: ItemBootstrap, G: _Group, arms: range, n_or: int, treated: list[int], c0: int) -> None:
    """The group's bootstrap columns: per arm its counts, accuracy and accuracy per orientation; per treated
    arm the Δ parts on the items both it and the control answered."""
    present = np.isfinite(G.acc)
    for a in arms:
        boot.add(("acc_num", a), np.where(present[a], G.acc[a], 0.0))
        boot.add(("acc_den", a), present[a].astype(np.float64))
        for k in _COUNTS:
            boot.add((k, a), G.counts[k][a])
        for o in range(n_or if n_or <= MAX_ORIENTATIONS_WITH_CI else 0):
            if G.shown_or[a, o]:
                vec = G.acc_or[a, o]
                boot.add(("or_num", a, o), np.nan_to_num(vec))
                boot.add(("or_den", a, o), np.isfinite(vec).astype(np.float64))
    for t in treated:
        both = present[t] & present[c0]
        boot.add(("d_num", t), np.where(both, G.acc[t] - G.acc[c0], 0.0))
        boot.add(("d_den", t), both.astype(np.float64))
        for k in ("other", "graded", "truncated", "rows"):
            boot.add(("d_part", k, t, "t"), G.counts[k][t] * both)
            boot.add(("d_part", k, t, "c"), G.counts[k][c0] * both)


def _arm_entry(S: Sums, G: _Group, a: int, orientations: Sequence[str], small: bool) -> GroupArm:
    by_or: dict[str, Metric | None] = {}
    for o, lab in enumerate(orientations if len(orientations) <= MAX_ORIENTATIONS_WITH_CI else ()):
        if G.shown_or[a, o]:
            by_or[lab] = proportion(S, ("or_num", a, o), ("or_den", a, o))
    return {
        "rows": int(S.point(("rows", a))),
        "graded": int(S.point(("graded", a))),
        "items": int((G.counts["rows"][a] > 0).sum()),
        "small": small,
        "accuracy": proportion(S, ("acc_num", a), ("acc_den", a)),
        "answered_accuracy": proportion(S, ("correct", a), ("answered", a)),
        "other_rate": proportion(S, ("other", a), ("graded", a)),
        "truncated_rate": ratio(S, ("truncated", a), ("rows", a)),
        "accuracy_by_orientation": by_or,
    }


def _delta(S: Sums, t: int, c: int) -> tuple[str | None, GroupDelta]:
    """Treated ``t`` − control ``c`` within the group: (why there is none, or None; the Δs). Paired on the
    items both arms answered; arms that share none of the group's items, unpaired over each arm's own."""
    out: GroupDelta = {"delta_accuracy": None, "delta_other_rate": None, "delta_truncated_rate": None}
    shared = int(S.point(("d_den", t)))
    pairing: Pairing
    if shared:
        if shared < MIN_ITEMS:
            return f"{plural(shared, 'shared item')} in the group (a Δ needs at least {MIN_ITEMS})", out

        def diff(x: str, den: str, fact: bool = False) -> Metric | None:
            return summarize(
                safe_div(S["d_part", x, t, "t"], S["d_part", den, t, "t"])
                - safe_div(S["d_part", x, t, "c"], S["d_part", den, t, "c"]),
                shared,
                se=True,
                fact=fact,
            )

        out = {
            "delta_accuracy": ratio(S, ("d_num", t), ("d_den", t), se=True),
            "delta_other_rate": diff("other", "graded"),
            "delta_truncated_rate": diff("truncated", "rows", fact=True),
        }
        items, pairing = shared, "paired"
        rows = S.point(("d_part", "graded", t, "t")) + S.point(("d_part", "graded", t, "c"))
    else:
        kt, kc = int(S.point(("acc_den", t))), int(S.point(("acc_den", c)))
        if min(kt, kc) < MIN_ITEMS:
            why = (f"the arms share no item in the group; unpaired, {kt} and {kc} graded items (each needs at "
                   f"least {MIN_ITEMS})")  # fmt: skip
            return why, out
        items, pairing = kt + kc, "unpaired"
        out = {
            "delta_accuracy": unpaired(
                S, ("acc_num", t), ("acc_den", t), ("acc_num", c), ("acc_den", c), items
            ),
            "delta_other_rate": unpaired(S, ("other", t), ("graded", t), ("other", c), ("graded", c), items),
            "delta_truncated_rate": unpaired(
                S, ("truncated", t), ("rows", t), ("truncated", c), ("rows", c), items, fact=True
            ),
        }
        rows = S.point(("graded", t)) + S.point(("graded", c))
    for m in (out["delta_accuracy"], out["delta_other_rate"], out["delta_truncated_rate"]):
        if m is not None:
            m["items"], m["pairing"] = items, pairing
    if out["delta_accuracy"] is not None:
        out["delta_accuracy"]["rows"] = int(round(rows))
    return None, out


def by_group(
    frames: StudyFrames,
    grouping: Grouping,
    control: str | None,
    fingerprint_conflicts: dict[str, str],
    notes: Notes,
    n_boot: int = 2000,
    seed: int = 0,
    ci: str = "auto",
) -> tuple[dict[str, dict[str, GroupArm]], GroupFacts]:
    """The ``by_group`` entry of one metadata key, ``{value: {arm: {…}}}`` (groups in the key's order, the
    rows lacking it last), and its facts (``group_by``). ``control``: the report's control arm;
    ``fingerprint_conflicts``: the treated arms the report does not compare with it, and why. Reasons for a
    null Δ go into ``notes`` (``by_group.KEY.VALUE.ARM.delta_accuracy``); the small groups are named under
    ``by_group.KEY``."""
    info = frames.info
    arms = info.arms
    c0 = arms.index(control) if control in arms else -1
    treated = [t for t, a in enumerate(arms) if c0 >= 0 and t != c0]
    codes = np.asarray(grouping.codes)
    labels = list(grouping.labels)
    missing = missing_label(grouping.key, labels)
    values = [*labels, missing] if (codes < 0).any() else labels
    out: dict[str, dict[str, GroupArm]] = {}
    sizes: dict[str, int] = {}
    for k, value in enumerate(values):
        G = _aggregate(frames, codes == (k if k < len(labels) else -1))
        n = int(G.items.size)
        sizes[value] = n
        small = n < MIN_ITEMS
        boot = ItemBootstrap(n, n_boot, seed, ci_method(n, n_boot, ci))
        present = [a for a in range(len(arms)) if G.counts["rows"][a].any()]
        compared = [
            t for t in treated if t in present and c0 in present and arms[t] not in fingerprint_conflicts
        ]
        _columns(boot, G, range(len(arms)), len(info.orientations), compared, c0)
        S = boot.run()
        entry = {arms[a]: _arm_entry(S, G, a, info.orientations, small) for a in present}
        for t in compared:
            why, d = _delta(S, t, c0)
            entry[arms[t]].update(d)  # type: ignore[typeddict-item]
            if why and not small:
                notes[f"by_group.{grouping.key}.{value}.{arms[t]}.delta_accuracy"] = why
        for t in treated:
            if t in present and arms[t] in fingerprint_conflicts and not small:
                notes[f"by_group.{grouping.key}.{value}.{arms[t]}.delta_accuracy"] = fingerprint_conflicts[
                    arms[t]
                ]
        out[value] = entry
    if len(info.orientations) > MAX_ORIENTATIONS_WITH_CI:
        notes[f"by_group.{grouping.key}.accuracy_by_orientation"] = (
            f"{len(info.orientations)} orientations: accuracy by orientation is not broken down by group"
        )
    small_groups = [v for v in values if sizes[v] < MIN_ITEMS]
    if small_groups:
        notes[f"by_group.{grouping.key}"] = (
            f"{plural(len(small_groups), 'group')} under {MIN_ITEMS} items, shown with their n but with no Δ and "
            "no finding: " + ", ".join(f"{v} ({plural(sizes[v], 'item')})" for v in small_groups[:12])
            + (", …" if len(small_groups) > 12 else "")
        )  # fmt: skip
    facts: GroupFacts = {
        "path": f"metadata.{grouping.key}",
        "control_arm": control,
        "groups": len(values),
        "items": sizes,
        "small": small_groups,
        "missing": missing if missing in values else None,
        "min_items": MIN_ITEMS,
    }
    return out, facts
