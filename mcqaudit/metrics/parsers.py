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

from dataclasses import dataclass
from typing import Literal

import numpy as np

from mcqaudit.metrics.bootstrap import clustered_rate, safe_div
from mcqaudit.metrics.cells import Cells, Rows, cluster_sums, segment_cluster_sums
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
# parser_letters rates, each over the same rows (those whose reference letter is known), so that
# misread = wrong_letter + fabricated + missed
LetterKind = Literal["misread", "wrong_letter", "fabricated", "missed"]
LETTER_KINDS: tuple[LetterKind, ...] = ("misread", "wrong_letter", "fabricated", "missed")
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
    n_arms, n_or, n_items, nc = R.n_arms, R.n_or, R.n_items, C.n
    k = d.shape[0]
    n_cell = np.bincount(cell, minlength=nc).astype(np.float64)
    n_ai = np.bincount(C.arm_item, weights=n_cell, minlength=n_arms * n_items).reshape(n_arms, n_items)
    by_cell = np.zeros((n_arms * n_or, k, 6))
    by_arm = np.zeros((n_arms, k, 6))
    pooled = np.zeros((k, 6))
    spot = np.zeros((k, 6)) if uniform.any() else None
    ii_u = C.ii[cell[uniform]]
    n_u = np.bincount(ii_u, minlength=n_items).astype(np.float64)
    for j in range(k):
        d_cell = np.bincount(cell, weights=d[j], minlength=nc)
        by_cell[:, j] = segment_cluster_sums(C.group_starts, C.groups, n_cell, d_cell, n_arms * n_or)
        d_ai = np.bincount(C.arm_item, weights=d_cell, minlength=n_arms * n_items).reshape(n_arms, n_items)
        by_arm[:, j] = cluster_sums(n_ai, d_ai)
        pooled[j] = cluster_sums(n_ai.sum(axis=0), d_ai.sum(axis=0))
        if spot is not None:
            spot[j] = cluster_sums(n_u, np.bincount(ii_u, weights=d[j][uniform], minlength=n_items))
    return RateSums(by_cell.reshape(n_arms, n_or, k, 6), by_arm, pooled, spot)


@dataclass
class LetterTally:
    """One parser's letters against the reference letters, on graded rows whose reference is known."""

    rates: RateSums  # k = LETTER_KINDS
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


def _letter_tally(
    verdict: np.ndarray, pick: np.ndarray, pos: np.ndarray, cell: np.ndarray, uniform: np.ndarray,
    R: Rows, C: Cells,
) -> LetterTally | None:  # fmt: skip
    """Letters (``pos``, -1 none) against the reference letters of graded rows (``verdict`` not NONE)."""
    other = verdict == VerdictCode.OTHER
    known = other | (pick >= 0)
    if not known.any():
        return None
    ref = np.where(other, -1, pick)[known]
    pos, cell, uniform = pos[known], cell[known], uniform[known]
    has_ref, has_pos = ref >= 0, pos >= 0
    wrong = has_ref & has_pos & (pos != ref)
    fabricated = has_pos & ~has_ref
    missed = has_ref & ~has_pos
    d = np.stack([wrong | fabricated | missed, wrong, fabricated, missed]).astype(np.float64)
    side = int(R.n_opt.max()) + 1
    key = (C.group[cell] * side + (ref + 1)) * side + (pos + 1)
    conf = np.bincount(key, minlength=R.n_arms * R.n_or * side * side)
    return LetterTally(
        rates=rate_sums(d, cell, uniform, R, C),
        confusion=conf.reshape(R.n_arms, R.n_or, side, side),
    )


def _tally(
    name: str, idx: np.ndarray | None, pos: np.ndarray, R: Rows, C: Cells, letter_only: bool
) -> ParserTally | None:
    """``idx``: rows the parser read (indices into R; None = every row), ``pos``: its letter for each
    (-1: none)."""
    n_arms, n_or, n_items, nc = R.n_arms, R.n_or, R.n_items, C.n
    cols: tuple[np.ndarray, ...] = (R.verdict, R.gold, R.n_opt, C.of_row, R.uniform, R.pick)
    if idx is not None:
        cols = tuple(c[idx] for c in cols)
    keep = cols[0] != VerdictCode.NONE
    if not keep.all():
        cols = tuple(c[keep] for c in cols)
        pos = pos[keep]
    ref, gold, n_opt, cell, uniform, pick = cols
    if ref.size == 0:
        return None
    bad = pos >= n_opt  # a letter beyond the displayed options is no letter
    if bad.any():
        pos = np.where(bad, -1, pos)
    # the parser's verdicts (vocab.verdict_of over codes): no letter OTHER, the gold one CORRECT, else INCORRECT
    pv = np.full(ref.size, VerdictCode.INCORRECT, dtype=np.int64)
    pv[pos < 0] = VerdictCode.OTHER
    pv[pos == gold] = VerdictCode.CORRECT
    # item-weighted accuracy of the parser's verdicts: mean over cells of the CORRECT share
    n_cell_all = np.bincount(cell, minlength=nc)
    cell_acc = safe_div(np.bincount(cell, weights=(pv == VerdictCode.CORRECT), minlength=nc), n_cell_all)
    has = n_cell_all > 0
    arm_item = C.arm_item
    acc = safe_div(
        np.bincount(arm_item[has], weights=cell_acc[has], minlength=n_arms * n_items),
        np.bincount(arm_item[has], minlength=n_arms * n_items),
    ).reshape(n_arms, n_items)
    # compared rows: the strict pre-filter only where it gave a letter (a letter-less row was deferred)
    if letter_only:
        cmp = pos >= 0
        ref, pv, cell, uniform, pick, pos = ref[cmp], pv[cmp], cell[cmp], uniform[cmp], pick[cmp], pos[cmp]
    nv = len(VERDICT_CODES)
    conf = np.bincount((C.group[cell] * nv + ref) * nv + pv, minlength=n_arms * n_or * nv * nv)
    return ParserTally(
        name=name,
        confusion=conf.reshape(n_arms, n_or, nv, nv),
        disagreement=rate_sums((pv != ref).astype(np.float64)[None], cell, uniform, R, C),
        letters=_letter_tally(ref, pick, pos, cell, uniform, R, C),
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
    """The four rates from their cluster sums (``(4, 6)``, :data:`LETTER_KINDS` order) and the confusion."""
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


def misread_counts(entry: LetterRates) -> dict[str, int]:
    """The rows behind each of a ``parser_letters`` entry's four rates (they share their ``n``)."""
    m = entry.get("misread")
    n = int(m["n"]) if m else 0
    out: dict[str, int] = {}
    for k in LETTER_KINDS:
        rate = entry.get(k)
        out[k] = round(((rate["value"] if rate else None) or 0.0) * n)
    return out
