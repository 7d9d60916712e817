"""Rows → (arm, item, orientation) cells → per-item sums: the vectorised aggregation every family uses.

Everything here is numpy over dense integer codes (``bincount``, ``reduceat``), never a Python loop over
rows. Rows are pooled into cells (over samples), and cells into per-item vectors; every metric is then a
function of per-item sums, which is what lets one item bootstrap serve them all. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mcqaudit.metrics.inputs import StudyFrames, column
from mcqaudit.vocab import VerdictCode

N_CODES = len(VerdictCode)  # the verdict codes, NONE included: the width of a code_counts table


def code_col(code: VerdictCode) -> int:
    """The column of verdict code ``code`` in a :func:`code_counts` table (codes ascending: NONE first)."""
    return code - VerdictCode.NONE


def code_counts(group: np.ndarray, codes: np.ndarray, size: int) -> np.ndarray:
    """Rows per group (``0 <= group < size``) and verdict code: ``(size, N_CODES)``, the count of code ``c``
    in column :func:`code_col` ``(c)``."""
    slot = codes.astype(np.int64, copy=False) - VerdictCode.NONE
    key = group.astype(np.int64, copy=False) * N_CODES + slot
    return np.bincount(key, minlength=size * N_CODES).reshape(size, N_CODES)


def group_ids(key: np.ndarray, space: int) -> tuple[np.ndarray, np.ndarray]:
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


def cluster_sums(n: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Along the last axis (item clusters; n = 0 is no cluster): k, Σn, Σd, Σd², Σd·n, Σn² — what
    :func:`~mcqaudit.metrics.bootstrap.clustered_rate` reads."""
    return np.stack(
        [(n > 0).sum(axis=-1), n.sum(axis=-1), d.sum(axis=-1), (d * d).sum(axis=-1), (d * n).sum(axis=-1),
         (n * n).sum(axis=-1)],
        axis=-1,
    ).astype(np.float64)  # fmt: skip


def segment_cluster_sums(
    starts: np.ndarray, groups: np.ndarray, n: np.ndarray, d: np.ndarray, size: int
) -> np.ndarray:
    """:func:`cluster_sums` over contiguous segments (``starts``) that belong to ``groups``; shape (size, 6)."""
    out = np.zeros((size, 6))
    if starts.size == 0:
        return out
    for j, w in enumerate(((n > 0).astype(np.float64), n, d, d * d, d * n, n * n)):
        out[groups, j] = np.add.reduceat(w, starts)
    return out


@dataclass
class Rows:
    """The frames' row codes as int64 arrays (positions beyond the displayed options are no letter)."""

    ai: np.ndarray
    ii: np.ndarray
    oi: np.ndarray
    sample: np.ndarray
    gold: np.ndarray
    n_opt: np.ndarray
    verdict: np.ndarray  # the chosen view's VerdictCode (final or judge); NONE ungraded
    pick: np.ndarray
    auto_verdict: np.ndarray  # judge, else pre-filter, else rule; NONE ungraded
    review: np.ndarray  # the effective review's VerdictCode; NONE not reviewed
    uniform: np.ndarray  # in the uniform spot check
    truncated: np.ndarray  # cut by the token limit (finish_reason length, or a reasoning block never closed)
    n_arms: int
    n_or: int
    n_items: int


def rows_of(frames: StudyFrames) -> Rows:
    r = frames.rows
    info = frames.info

    def col(name: str) -> np.ndarray:
        return column(r, name).astype(np.int64)

    n_opt = col("n_opt")

    def legal(pos: np.ndarray) -> np.ndarray:  # a letter beyond the displayed options is no letter
        return np.where(pos < n_opt, pos, -1)

    return Rows(
        ai=col("ai"),
        ii=col("ii"),
        oi=col("oi"),
        sample=col("sample"),
        gold=col("gold_pos"),
        n_opt=n_opt,
        verdict=col("verdict"),
        pick=legal(col("pick_pos")),
        auto_verdict=col("auto_verdict"),
        review=col("human"),  # the frames' column name (mcqaudit.store.frames)
        uniform=column(r, "uniform").astype(bool),
        truncated=column(r, "truncated").astype(bool),
        n_arms=len(info.arms),
        n_or=len(info.orientations),
        n_items=info.n_items,
    )


@dataclass
class Cells:
    """(arm, item, orientation) cells, pooled over samples; ``of_row`` maps each row to its cell."""

    of_row: np.ndarray
    ai: np.ndarray
    oi: np.ndarray
    ii: np.ndarray
    groups: np.ndarray  # the (arm, orientation) groups present, as ai * n_or + oi, ascending
    group_starts: np.ndarray  # where each group's cells start (cells are sorted by group, then item)
    arm_item: np.ndarray  # each cell's ai * n_items + ii (the (arm, item) bincount key)
    group: np.ndarray  # each cell's ai * n_or + oi

    @property
    def n(self) -> int:
        return int(self.ai.size)


def cells_of(R: Rows) -> Cells:
    uq, inv = group_ids((R.ai * R.n_or + R.oi) * R.n_items + R.ii, R.n_arms * R.n_or * R.n_items)
    g = uq // max(R.n_items, 1)
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if g.size else g
    ai = uq // (R.n_or * R.n_items)
    ii = uq % R.n_items
    return Cells(
        of_row=inv,
        ai=ai,
        oi=(uq // R.n_items) % R.n_or,
        ii=ii,
        groups=g[starts],
        group_starts=starts,
        arm_item=ai * R.n_items + ii,
        group=g,
    )


@dataclass
class Families:
    """Item families: the items that share one orientation set (all 2-option items shown as AB and BA, all
    4-option items in the four cyclic rotations, …). Orientations are compared only within a family: `AB`
    and `ABCD` are shown to different items, so their Δs differ by the items as much as by the order."""

    of_item: np.ndarray  # each item's family, -1 for an item without rows
    orientations: list[list[int]]  # each family's orientation indices, ascending
    items: list[int]  # each family's item count
    options: list[int]  # each family's option count
    labels: list[str]

    def mask(self, f: int) -> np.ndarray:
        out: np.ndarray = self.of_item == f
        return out


def family_labels(option_counts: list[int], orientation_sets: list[list[str]]) -> list[str]:
    """``4-option items``; where several families have the same option count, each names its orientations
    (``4-option items (ABCD, CDAB)``), or its rank among them when the set is long."""
    out = []
    for n, labs in zip(option_counts, orientation_sets, strict=True):
        same = [k for k, m in enumerate(option_counts) if m == n]
        if len(same) == 1:
            out.append(f"{n}-option items")
        elif len(labs) <= 6:
            out.append(f"{n}-option items ({', '.join(labs)})")
        else:
            out.append(f"{n}-option items, orientation set {same.index(len(out)) + 1}")
    return out


def item_families(R: Rows, orientations: list[str]) -> Families:
    """Each item's family (its set of orientations over every arm's rows), families ordered by option count,
    then by size (largest first). Vectorised: one bit per orientation, OR-reduced over the item's rows."""
    n_or, n_items = max(R.n_or, 1), R.n_items
    pairs, _ = group_ids(R.ii * n_or + R.oi, n_items * n_or)  # distinct (item, orientation), sorted
    p_ii, p_oi = pairs // n_or, pairs % n_or
    of_item = np.full(n_items, -1, dtype=np.int64)
    if not pairs.size:
        return Families(of_item, [], [], [], [])
    starts = np.flatnonzero(np.r_[True, p_ii[1:] != p_ii[:-1]])
    words = (n_or + 63) // 64
    sig = np.zeros((starts.size, words), dtype=np.uint64)
    bit = np.left_shift(np.uint64(1), (p_oi % 64).astype(np.uint64))
    for w in range(words):  # distinct bits per item: OR is their sum
        sig[:, w] = np.bitwise_or.reduceat(np.where(p_oi // 64 == w, bit, np.uint64(0)), starts)
    uniq, inv = np.unique(sig, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    sets = [[o for o in range(n_or) if int(u[o // 64]) >> (o % 64) & 1] for u in uniq]
    size = np.bincount(inv, minlength=len(sets))
    order = sorted(range(len(sets)), key=lambda f: (len(orientations[sets[f][0]]), -int(size[f]), sets[f]))
    rank = np.empty(len(sets), dtype=np.int64)
    rank[order] = np.arange(len(sets))
    of_item[p_ii[starts]] = rank[inv]
    fam_sets = [sets[f] for f in order]
    options = [len(orientations[s[0]]) for s in fam_sets]
    labels = family_labels(options, [[orientations[o] for o in s] for s in fam_sets])
    return Families(of_item, fam_sets, [int(size[f]) for f in order], options, labels)


class ItemGrid:
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
        flat = np.bincount(key * self.n + ii, weights=w, minlength=total * self.n).astype(
            np.float64, copy=False
        )
        return flat.reshape(*shape, self.n)
