"""Parser family: each parser's letters read as verdicts, against the chosen verdicts (docs/design.md §7
``parser_disagreement``, and the per-parser accuracy behind ``delta_accuracy_by_parser``). Pure.

Disagreement rates use an analytic item-clustered interval (:func:`clustered_rate`), no replicates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcqaudit.metrics.bootstrap import clustered_rate, safe_div
from mcqaudit.metrics.cells import Cells, Rows, cluster_sums, segment_cluster_sums
from mcqaudit.metrics.inputs import StudyFrames, column
from mcqaudit.metrics.results import Confusion, ParserDisagreement
from mcqaudit.vocab import VERDICTS

ROW_PARSERS = ("strict", "naive", "user")  # parsers with a letter column in the frames' rows


@dataclass
class ParserTally:
    """One parser's verdicts against the chosen verdicts, on graded rows."""

    name: str
    confusion: np.ndarray  # (n_arms, n_or, 3, 3): rows = verdict, columns = the parser's verdict
    by_cell: np.ndarray  # (n_arms, n_or, 6) disagreement cluster sums (clusters: items)
    by_arm: np.ndarray  # (n_arms, 6)
    pooled: np.ndarray  # (6,) all arms
    spot: np.ndarray | None  # (6,) rows of the uniform spot check, all arms
    acc: np.ndarray  # (n_arms, n_items) item-weighted accuracy of the parser's verdicts; NaN = no row


def _tally(
    name: str, idx: np.ndarray | None, pos: np.ndarray, R: Rows, C: Cells, letter_only: bool
) -> ParserTally | None:
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
    cell_acc = safe_div(np.bincount(cell, weights=(pv == 0), minlength=nc), n_cell_all)
    has = n_cell_all > 0
    arm_item = C.arm_item
    acc = safe_div(
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
    conf = np.bincount((C.group[cell] * 3 + ref) * 3 + pv, minlength=n_arms * n_or * 9)
    # cluster sums: clusters are items (within a cell, within an arm, or across arms)
    d_cell = np.bincount(cell, weights=d, minlength=nc)
    by_cell = segment_cluster_sums(C.group_starts, C.groups, n_cell, d_cell, n_arms * n_or)
    n_ai = np.bincount(arm_item, weights=n_cell, minlength=n_arms * n_items).reshape(n_arms, n_items)
    d_ai = np.bincount(arm_item, weights=d_cell, minlength=n_arms * n_items).reshape(n_arms, n_items)
    by_arm = cluster_sums(n_ai, d_ai)
    pooled = cluster_sums(n_ai.sum(axis=0), d_ai.sum(axis=0))
    spot = None
    if uniform.any():
        ii_u = C.ii[cell[uniform]]
        n_u = np.bincount(ii_u, minlength=n_items).astype(np.float64)
        d_u = np.bincount(ii_u, weights=d[uniform], minlength=n_items)
        spot = cluster_sums(n_u, d_u)
    return ParserTally(
        name=name,
        confusion=conf.reshape(n_arms, n_or, 3, 3),
        by_cell=by_cell.reshape(n_arms, n_or, 6),
        by_arm=by_arm,
        pooled=pooled,
        spot=spot,
        acc=acc,
    )


def parser_tallies(frames: StudyFrames, R: Rows, C: Cells) -> list[ParserTally]:
    """A tally for every parser of the study that read at least one graded row, in ``info.parsers`` order."""
    out: list[ParserTally] = []
    r = frames.rows
    fw = frames.framework
    for name in frames.info.parsers:
        if name in ROW_PARSERS:
            pos = column(r, f"{name}_pos").astype(np.int64)
            agg = _tally(name, None, pos, R, C, name == "strict")
        else:
            if fw is None or not len(fw) or name not in frames.info.frameworks:
                continue
            sel = column(fw, "parser") == frames.info.frameworks.index(name)
            idx = column(fw, "row")[sel].astype(np.int64)
            agg = _tally(name, idx, column(fw, "pos")[sel].astype(np.int64), R, C, False)
        if agg is not None:
            out.append(agg)
    return out


def confusion_of(m: np.ndarray) -> Confusion:
    """A 3 × 3 count matrix as ``{verdict: {verdict: rows}}``."""
    return {VERDICTS[j]: {VERDICTS[h]: int(m[j, h]) for h in range(3)} for j in range(3)}


def parser_disagreement(
    tallies: list[ParserTally], orientations: list[str], a: int
) -> dict[str, ParserDisagreement]:
    """Arm ``a``'s ``parser_disagreement``: per parser, the rate and confusion, overall and per orientation."""
    out: dict[str, ParserDisagreement] = {}
    for p in tallies:
        conf = p.confusion[a]
        if conf.sum() == 0:
            continue
        entry: ParserDisagreement = {
            "rate": clustered_rate(p.by_arm[a]),
            "confusion": confusion_of(conf.sum(axis=0)),
            "by_orientation": {
                lab: {"rate": clustered_rate(p.by_cell[a, o]), "confusion": confusion_of(conf[o])}
                for o, lab in enumerate(orientations)
                if conf[o].sum() > 0
            },
        }
        if p.name == "strict":
            entry["compared"] = "rows the pre-filter resolved; a letter-less row was deferred to the judge"
        out[p.name] = entry
    return out
