"""Parser family: each parser's letters read as verdicts, against the chosen verdicts (docs/design.md §7
``parser_disagreement``, and the per-parser accuracy behind ``delta_accuracy_by_parser``), and read as
letters, against the reference letter (``parser_letters``). Pure.

Both families are row-level rates with an analytic item-clustered interval (:func:`clustered_rate`), no
replicates: :class:`RateSums` holds the cluster sums they are read from.

The *reference letter* of a graded row is its picked letter (of the chosen verdicts), and none for OTHER;
an answered row without a picked letter (a gold-shape judge, a review that gave none) has no known
reference and is left out of ``parser_letters``. Two different wrong letters agree as verdicts (both
INCORRECT) and disagree as letters: this is why the two families differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mcqaudit.metrics.bootstrap import clustered_rate, safe_div
from mcqaudit.metrics.cells import Cells, Rows, cluster_sums
from mcqaudit.metrics.inputs import StudyFrames, column
from mcqaudit.metrics.results import (
    Confusion,
    LetterConfusion,
    LetterRates,
    ParserDisagreement,
    ParserLetters,
)
from mcqaudit.metrics.rules import MISREAD_WORDS as MISREAD_WORDS  # the words live with the rules (no numpy)
from mcqaudit.vocab import LETTERS, VERDICT_CODES, VerdictCode

ROW_PARSERS = ("strict", "naive", "user")  # parsers with a letter column in the frames' rows
# the three ways of misreading, in words (flag evidence, findings)
# the confusion's key for "no letter": the reference of an OTHER row, or a parser that read none
NO_LETTER = "none"
STRICT_COMPARED = "rows the pre-filter resolved; a letter-less row was deferred to the judge"


@dataclass
class RateSums:
    """Item-cluster sums of ``k`` row-level rates over the same rows, as :func:`clustered_rate` reads them
    (``k, Σn, Σd, Σd², Σd·n, Σn²`` over item clusters), at every level the report shows."""

    by_cell: np.ndarray  # (n_arms, n_or, k, 6): one arm, one orientation
    by_arm: np.ndarray  # (n_arms, k, 6)
    pooled: np.ndarray  # (k, 6): all arms (an item is one cluster across arms)
    spot: np.ndarray | None  # (k, 6): rows of the uniform spot check, all arms; None: no such row


def rate_sums(d: np.ndarray, cell: np.ndarray, uniform: np.ndarray, R: Rows, C: Cells) -> RateSums:
    """The cluster sums of ``k`` rates over some rows: ``d`` (k, rows) their 0/1 numerators, ``cell`` each
    row's cell, ``uniform`` whether it is in the uniform spot check."""
    return _rate_sums([np.asarray(x, dtype=bool) for x in d], _rows_base(cell, uniform, R, C), R, C)


@dataclass
class _RowsBase:
    """What the rate sums over some rows read of the rows alone (no numerator), computed once for every rate
    over them: each row's cell and spot-check membership, rows per cell and per (arm, item), and the cluster
    sums' row-only columns (k, Σn, Σn²) per (arm, orientation), per arm and pooled."""

    cell: np.ndarray
    uniform: np.ndarray
    n_cell: np.ndarray
    n_ai: np.ndarray
    n_pool: np.ndarray
    by_cell: np.ndarray  # (n_arms * n_or, 3)
    by_arm: np.ndarray  # (n_arms, 3)
    pooled: np.ndarray  # (3,)
    ii_u: np.ndarray | None  # the items of the rows in the uniform spot check (None: no such row)
    n_u: np.ndarray | None


def _rows_base(
    cell: np.ndarray, uniform: np.ndarray, R: Rows, C: Cells, n_cell: np.ndarray | None = None
) -> _RowsBase:
    if n_cell is None:
        n_cell = np.bincount(cell, minlength=C.n)
    n_ai = np.bincount(C.arm_item, weights=n_cell, minlength=R.n_arms * R.n_items).reshape(
        R.n_arms, R.n_items
    )
    n_pool = n_ai.sum(axis=0)
    by_cell = np.zeros((R.n_arms * R.n_or, 3))
    if C.group_starts.size:
        for col, w in enumerate((n_cell > 0, n_cell, n_cell * n_cell)):
            by_cell[C.groups, col] = np.add.reduceat(w.astype(np.int64), C.group_starts)
    ii_u = n_u = None
    if uniform.any():
        ii_u = C.ii[cell[uniform]]
        n_u = np.bincount(ii_u, minlength=R.n_items).astype(np.float64)
    return _RowsBase(
        cell=cell,
        uniform=uniform,
        n_cell=n_cell,
        n_ai=n_ai,
        n_pool=n_pool,
        by_cell=by_cell,
        by_arm=np.stack([(n_ai > 0).sum(axis=-1), n_ai.sum(axis=-1), (n_ai * n_ai).sum(axis=-1)], -1),
        pooled=np.array([(n_pool > 0).sum(), n_pool.sum(), (n_pool * n_pool).sum()], dtype=np.float64),
        ii_u=ii_u,
        n_u=n_u,
    )


def _numerator_cells(cells: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct cells (of ``n``) among ``cells``, ascending, and how often each occurs: counted over every
    cell when they are many (cheaper than sorting them), sorted when they are few."""
    if cells.size * 8 > n:
        counts = np.bincount(cells, minlength=n)
        at = np.flatnonzero(counts)
        return at, counts[at]
    at, dn = np.unique(cells, return_counts=True)
    return at, dn


def _rate_sums(d: Sequence[np.ndarray], base: _RowsBase, R: Rows, C: Cells) -> RateSums:
    """:func:`rate_sums` of the 0/1 numerators ``d`` (one boolean row mask per rate) over the rows of ``base``.

    Every sum here is of counts, exact in any order, so each is taken where it is cheapest: what depends on
    the rows alone once (:class:`_RowsBase`), and each rate's numerator only over the cells where it is not
    0 (a parser misreads a few rows in ten)."""
    n_arms, n_or, n_items = R.n_arms, R.n_or, R.n_items
    k, n_groups = len(d), n_arms * n_or
    cell, n_cell, n_ai, n_pool = base.cell, base.n_cell, base.n_ai, base.n_pool
    by_cell = np.zeros((n_groups, k, 6))
    by_arm = np.zeros((n_arms, k, 6))
    pooled = np.zeros((k, 6))
    by_cell[:, :, [0, 1, 5]] = base.by_cell[:, None]
    by_arm[:, :, [0, 1, 5]] = base.by_arm[:, None]
    pooled[:, [0, 1, 5]] = base.pooled
    spot = None
    if base.ii_u is not None and base.n_u is not None:
        spot = np.zeros((k, 6))
        for j in range(k):
            w = d[j][base.uniform]
            spot[j] = cluster_sums(base.n_u, np.bincount(base.ii_u, weights=w, minlength=n_items))
    for j in range(k):
        at, dn = _numerator_cells(cell[d[j]], C.n)  # the cells with a numerator, and its count
        if not at.size:
            continue
        ng = n_cell[at]
        for col, w in ((2, dn), (3, dn * dn), (4, dn * ng)):
            by_cell[:, j, col] = np.bincount(C.group[at], weights=w, minlength=n_groups)
        d_ai = np.bincount(C.arm_item[at], weights=dn, minlength=n_arms * n_items).reshape(n_arms, n_items)
        by_arm[:, j, 2:5] = np.stack(
            [d_ai.sum(axis=-1), (d_ai * d_ai).sum(axis=-1), (d_ai * n_ai).sum(axis=-1)], -1
        )
        d_pool = d_ai.sum(axis=0)
        pooled[j, 2:5] = [d_pool.sum(), (d_pool * d_pool).sum(), (d_pool * n_pool).sum()]
    return RateSums(by_cell.reshape(n_arms, n_or, k, 6), by_arm, pooled, spot)


@dataclass
class LetterTally:
    """One parser's letters against the reference letters, on graded rows whose reference is known."""

    rates: RateSums  # k = mcqaudit.reading.LETTER_KINDS
    # (n_arms, n_or, L + 1, L + 1) rows, reference × parser letter; index 0 = none, q + 1 = letter q
    confusion: np.ndarray


@dataclass
class ParserTally:
    """One parser's verdicts against the chosen verdicts, and its letters against the reference letters,
    on graded rows."""

    name: str
    confusion: np.ndarray  # (n_arms, n_or, 3, 3): rows = verdict, columns = the parser's verdict
    disagreement: RateSums  # k = 1: the parser's verdict differs from the verdict
    letters: LetterTally | None  # None: no compared row has a known reference letter
    acc: np.ndarray  # (n_arms, n_items) item-weighted accuracy of the parser's verdicts; NaN = no row


@dataclass
class _Known:
    """The rows of a letter tally whose reference letter is known, what they give alone: where they are
    among the rows (None: all of them), their reference letters (-1: none, for OTHER), groups and rate base."""

    at: np.ndarray | None
    ref: np.ndarray
    group: np.ndarray
    base: _RowsBase


def _known(
    verdict: np.ndarray, pick: np.ndarray, base: _RowsBase, group: np.ndarray, R: Rows, C: Cells
) -> _Known | None:
    """The rows among graded rows (``verdict``, ``pick``, ``base``, ``group``) whose reference letter is known
    (an OTHER row, or a picked letter); None when there is none."""
    other = verdict == VerdictCode.OTHER
    known = other | (pick >= 0)
    if not known.any():
        return None
    at: np.ndarray | None = None
    if not known.all():
        at = np.flatnonzero(known)
        other, pick, group = other[at], pick[at], group[at]
        base = _rows_base(base.cell[at], base.uniform[at], R, C)
    return _Known(at, np.where(other, -1, pick), group, base)


def _letter_tally(pos: np.ndarray, k: _Known, R: Rows, C: Cells) -> LetterTally:
    """Letters (``pos`` of the graded rows the tally reads, -1 none) against the reference letters of those
    rows whose reference is known (``k``, :func:`_known`)."""
    if k.at is not None:
        pos = pos[k.at]
    ref, base, group = k.ref, k.base, k.group
    has_ref, has_pos = ref >= 0, pos >= 0
    wrong = has_ref & has_pos & (pos != ref)
    fabricated = has_pos & ~has_ref
    missed = has_ref & ~has_pos
    side = int(R.n_opt.max()) + 1
    key = (group * side + (ref + 1)) * side + (pos + 1)
    conf = np.bincount(key, minlength=R.n_arms * R.n_or * side * side)
    return LetterTally(
        rates=_rate_sums([wrong | fabricated | missed, wrong, fabricated, missed], base, R, C),
        confusion=conf.reshape(R.n_arms, R.n_or, side, side),
    )


@dataclass
class _Graded:
    """Graded rows some parser read, and what its tally reads of them alone (shared by the parsers that read
    the same rows: strict, naive and user read every row)."""

    verdict: np.ndarray
    gold: np.ndarray
    n_opt: np.ndarray
    cell: np.ndarray
    uniform: np.ndarray
    pick: np.ndarray
    at: np.ndarray | None  # where they are among the rows asked for (None: all of them)
    group: np.ndarray  # each row's (arm, orientation) group
    n_cell: np.ndarray  # rows per cell
    has: np.ndarray  # the cells with a row
    arm_item: np.ndarray  # the (arm, item) of each such cell
    cells_ai: np.ndarray  # cells with a row per (arm, item)
    # what every parser reading all of these rows shares, made by the first :func:`_tally` over them
    base: _RowsBase | None = field(default=None, repr=False)
    known: _Known | None = field(default=None, repr=False)


def _graded(R: Rows, C: Cells, idx: np.ndarray | None) -> _Graded:
    """The graded rows among ``idx`` (None: every row)."""
    graded = R.verdict != VerdictCode.NONE
    keep = graded if idx is None else graded[idx]
    at: np.ndarray | None = None
    if not keep.all():
        at = np.flatnonzero(keep)
    rows = (idx if at is None else idx[at]) if idx is not None else at
    cols = (R.verdict, R.gold, R.n_opt, C.of_row, R.uniform, R.pick)
    verdict, gold, n_opt, cell, uniform, pick = cols if rows is None else tuple(c[rows] for c in cols)
    n_cell = np.bincount(cell, minlength=C.n)
    has = n_cell > 0
    arm_item = C.arm_item[has]
    return _Graded(
        verdict, gold, n_opt, cell, uniform, pick, at, C.group[cell], n_cell, has, arm_item,
        np.bincount(arm_item, minlength=R.n_arms * R.n_items),
    )  # fmt: skip


def _tally(
    name: str, g: _Graded, pos: np.ndarray, R: Rows, C: Cells, letter_only: bool
) -> ParserTally | None:
    """``g``: the graded rows the parser read (:func:`_graded`), ``pos``: its letter for each (-1: none)."""
    n_arms, n_or, n_items, nc = R.n_arms, R.n_or, R.n_items, C.n
    ref, gold, n_opt, cell, uniform, pick, group = (
        g.verdict,
        g.gold,
        g.n_opt,
        g.cell,
        g.uniform,
        g.pick,
        g.group,
    )
    if ref.size == 0:
        return None
    bad = pos >= n_opt  # a letter beyond the displayed options is no letter
    if bad.any():
        pos = np.where(bad, -1, pos)
    # the parser's verdicts (vocab.verdict_of over codes): no letter OTHER, the gold one CORRECT, else INCORRECT
    pv = np.full(ref.size, VerdictCode.INCORRECT, dtype=np.int64)
    pv[pos < 0] = VerdictCode.OTHER
    correct = pos == gold
    pv[correct] = VerdictCode.CORRECT
    # item-weighted accuracy of the parser's verdicts: mean over cells of the CORRECT share (the cells
    # without a row have none)
    cell_acc = np.bincount(cell, weights=correct, minlength=nc)[g.has] / g.n_cell[g.has]
    acc = safe_div(np.bincount(g.arm_item, weights=cell_acc, minlength=n_arms * n_items), g.cells_ai).reshape(
        n_arms, n_items
    )
    # compared rows: the strict pre-filter only where it gave a letter (a letter-less row was deferred)
    if letter_only:
        cmp = pos >= 0
        ref, pv, cell, uniform, pick, pos = ref[cmp], pv[cmp], cell[cmp], uniform[cmp], pick[cmp], pos[cmp]
        group = group[cmp]
        base = _rows_base(cell, uniform, R, C)
        known = _known(ref, pick, base, group, R, C)
    else:  # every graded row of g: what the rows alone give is the same for every parser reading them
        if g.base is None:
            g.base = _rows_base(cell, uniform, R, C, g.n_cell)
            g.known = _known(ref, pick, g.base, group, R, C)
        base, known = g.base, g.known
    nv = len(VERDICT_CODES)
    conf = np.bincount((group * nv + ref) * nv + pv, minlength=n_arms * n_or * nv * nv)
    return ParserTally(
        name=name,
        confusion=conf.reshape(n_arms, n_or, nv, nv),
        disagreement=_rate_sums([pv != ref], base, R, C),
        letters=_letter_tally(pos, known, R, C) if known is not None else None,
        acc=acc,
    )


def parser_tallies(frames: StudyFrames, R: Rows, C: Cells) -> list[ParserTally]:
    """A tally for every parser of the study that read at least one graded row, in ``info.parsers`` order."""
    out: list[ParserTally] = []
    r = frames.rows
    every: _Graded | None = None  # the graded rows, shared by the row parsers
    for name in frames.info.parsers:
        if name in ROW_PARSERS:
            every = every or _graded(R, C, None)
            pos = column(r, f"{name}_pos").astype(np.int64)
            agg = _tally(name, every, pos if every.at is None else pos[every.at], R, C, name == "strict")
        else:
            fw = frames.ready().framework  # the row parsers come first: the framework letters may be in by now
            if fw is None or not len(fw) or name not in frames.info.frameworks:
                continue
            sel = column(fw, "parser") == frames.info.frameworks.index(name)
            idx, pos = column(fw, "row")[sel].astype(np.int64), column(fw, "pos")[sel].astype(np.int64)
            if idx.size == R.ai.size and (np.bincount(idx, minlength=R.ai.size) == 1).all():
                # the parser read every row once (as a framework parser usually does): its letters in row order
                # are the row parsers' case (the order of rows changes no sum: each is of counts per cell)
                every = every or _graded(R, C, None)
                in_order = np.empty(R.ai.size, dtype=np.int64)
                in_order[idx] = pos
                agg = _tally(name, every, in_order if every.at is None else in_order[every.at], R, C, False)
            else:
                g = _graded(R, C, idx)
                agg = _tally(name, g, pos if g.at is None else pos[g.at], R, C, False)
        if agg is not None:
            out.append(agg)
    return out


def confusion_of(m: np.ndarray) -> Confusion:
    """A 3 × 3 count matrix indexed by VerdictCode as ``{verdict: {verdict: rows}}``."""
    return {j.name: {h.name: int(m[j, h]) for h in VERDICT_CODES} for j in VERDICT_CODES}


def parser_disagreement(
    tallies: list[ParserTally], orientations: list[str], a: int
) -> dict[str, ParserDisagreement]:
    """Arm ``a``'s ``parser_disagreement``: per parser, the rate and confusion, overall and per orientation."""
    out: dict[str, ParserDisagreement] = {}
    for p in tallies:
        conf = p.confusion[a]
        if conf.sum() == 0:
            continue
        s = p.disagreement
        entry: ParserDisagreement = {
            "rate": clustered_rate(s.by_arm[a, 0]),
            "confusion": confusion_of(conf.sum(axis=0)),
            "by_orientation": {
                lab: {"rate": clustered_rate(s.by_cell[a, o, 0]), "confusion": confusion_of(conf[o])}
                for o, lab in enumerate(orientations)
                if conf[o].sum() > 0
            },
        }
        if p.name == "strict":
            entry["compared"] = STRICT_COMPARED
        out[p.name] = entry
    return out


def letter_confusion_of(m: np.ndarray, n_letters: int) -> LetterConfusion:
    """A reference × parser letter count matrix (index 0 = none) as ``{reference: {parser letter: rows}}``,
    the first ``n_letters`` letters, then ``none``."""
    idx = [*range(1, n_letters + 1), 0]
    keys = [*LETTERS[:n_letters], NO_LETTER]
    return {keys[j]: {keys[h]: int(m[r, c]) for h, c in enumerate(idx)} for j, r in enumerate(idx)}


def _letter_rates(sums: np.ndarray, conf: np.ndarray, n_letters: int) -> LetterRates:
    """The four rates from their cluster sums (``(4, 6)``, :data:`mcqaudit.reading.LETTER_KINDS` order) and the confusion."""
    return {
        "misread": clustered_rate(sums[0]),
        "wrong_letter": clustered_rate(sums[1]),
        "fabricated": clustered_rate(sums[2]),
        "missed": clustered_rate(sums[3]),
        "confusion": letter_confusion_of(conf, n_letters),
    }


def parser_letters(tallies: list[ParserTally], orientations: list[str], a: int) -> dict[str, ParserLetters]:
    """Arm ``a``'s ``parser_letters``: per parser, the four letter-level rates and the letter confusion,
    overall and per orientation (letters: as many as the displayed options, then ``none``)."""
    out: dict[str, ParserLetters] = {}
    for p in tallies:
        if p.letters is None:
            continue
        conf, sums = p.letters.confusion[a], p.letters.rates
        shown = [o for o in range(len(orientations)) if conf[o].sum() > 0]
        if not shown:
            continue
        overall = _letter_rates(sums.by_arm[a], conf.sum(axis=0), max(len(orientations[o]) for o in shown))
        entry: ParserLetters = {
            "misread": overall["misread"],
            "wrong_letter": overall["wrong_letter"],
            "fabricated": overall["fabricated"],
            "missed": overall["missed"],
            "confusion": overall["confusion"],
            "by_orientation": {
                orientations[o]: _letter_rates(sums.by_cell[a, o], conf[o], len(orientations[o]))
                for o in shown
            },
        }
        if p.name == "strict":
            entry["compared"] = STRICT_COMPARED
        out[p.name] = entry
    return out
