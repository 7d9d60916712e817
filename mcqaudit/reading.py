"""How a report dict is read by what renders it (the report's text in :mod:`mcqaudit.report`, its figures in
:mod:`mcqaudit.plots`, the dashboard's tables): its item families, one family's part of an arm's figures, and
the judge-vs-human groups, whether any row was truncated. Pure; both renderers import it, neither imports the other for it."""

from __future__ import annotations

from typing import Literal, TypedDict, overload

from mcqaudit.metrics.results import (
    ArmDelta,
    ArmMetrics,
    FamilyDelta,
    FamilyMetrics,
    JudgeAgreement,
    JudgePanel,
    LetterRates,
    Metric,
    Report,
)

__all__ = [
    "LETTER_KINDS",
    "FamilyView",
    "LetterKind",
    "NoFamilyDelta",
    "NoFamilyMetrics",
    "agreement_groups",
    "any_truncated",
    "family_entry",
    "first_family",
    "group_label",
    "judge_label",
    "misread_counts",
    "primary_label",
    "report_families",
]

FamilyView = tuple[str | None, list[str], int | None]  # an item family: label, orientations, items
# parser_letters rates, each over the same rows (those whose reference letter is known), so that
# misread = wrong_letter + fabricated + missed
LetterKind = Literal["misread", "wrong_letter", "fabricated", "missed"]
LETTER_KINDS: tuple[LetterKind, ...] = ("misread", "wrong_letter", "fabricated", "missed")


def any_truncated(report: Report) -> bool:
    """Some row of the study was cut by the token limit (``truncated_rows``): only then do the views show
    truncated rates (a study without ``finish_reason`` or reasoning blocks has none to show)."""
    return any((report["metrics"][a].get("truncated_rows") or 0) > 0 for a in report.get("arms") or [])


def report_families(report: Report) -> list[FamilyView]:
    """The item families with per-family figures, as ``(label, orientations, items)``, in the report's order;
    a report from before item families gives one family of every orientation, labelled ``None``."""
    fams = (report.get("design") or {}).get("families")
    if fams is None:
        return [(None, list((report.get("study") or {}).get("orientations", [])), None)]
    return [(lab, list(f["orientations"]), f["items"]) for lab, f in fams.items() if f.get("reported")]


def first_family(report: Report) -> FamilyView:
    """The first family of :func:`report_families`; with none (no family has per-family figures), the
    arm-level figures, over no orientation."""
    return next(iter(report_families(report)), (None, [], None))


class NoFamilyMetrics(TypedDict, total=False):
    """What :func:`family_entry` gives for a family an arm has no figures in: ``{}`` (the keys of
    :class:`~mcqaudit.metrics.results.FamilyMetrics`, none present)."""

    items: int
    accuracy: Metric | None
    accuracy_by_orientation: dict[str, Metric | None]
    rstd: Metric | None
    recall_by_gold_letter: dict[str, Metric | None]


class NoFamilyDelta(TypedDict, total=False):
    """What :func:`family_entry` gives for a family a Δ has no entry for: ``{}`` (the keys of
    :class:`~mcqaudit.metrics.results.FamilyDelta`, none present)."""

    items: int
    rows: int
    overall: Metric | None
    by_orientation: dict[str, Metric | None]


@overload
def family_entry(entry: ArmMetrics, label: str | None) -> ArmMetrics | FamilyMetrics | NoFamilyMetrics: ...
@overload
def family_entry(entry: ArmDelta, label: str | None) -> ArmDelta | FamilyDelta | NoFamilyDelta: ...
def family_entry(
    entry: ArmMetrics | ArmDelta, label: str | None
) -> ArmMetrics | FamilyMetrics | NoFamilyMetrics | ArmDelta | FamilyDelta | NoFamilyDelta:
    """One family's part (``by_family[label]``) of an arm's metrics or Δ, which has the same keys as the
    entry itself (``accuracy``, ``accuracy_by_orientation``, ``rstd``, …; ``overall``, ``by_orientation``);
    the entry itself for the family ``None`` of a report from before item families."""
    if label is None:
        return entry
    return (entry.get("by_family") or {}).get(label) or {}


def agreement_groups(report: Report) -> list[tuple[str, JudgeAgreement]]:
    """Judge vs human, all arms pooled then per arm: (label, ``judge_agreement`` entry), those that exist."""
    groups: list[tuple[str, JudgeAgreement]] = []
    if ja := report.get("judge_agreement"):
        groups.append(("all arms", ja))
    m = report["metrics"]
    return groups + [(a, ag) for a in report["arms"] if (ag := m[a].get("judge_agreement"))]


def group_label(report: Report, key: str, value: str, *, items: bool = False) -> str:
    """A ``by_group`` group as the views name it: the value, ``history (small)`` for a group under the minimum
    of items; with ``items``, its item count too: ``geography (28 items)``, ``history (12 items, small)``.
    (The rows that lack the key are the group ``group_by[key].missing``, e.g. ``(none)``.)"""
    facts = (report.get("group_by") or {}).get(key)
    small = bool(facts and value in facts["small"])
    if not items or not facts:
        return f"{value} (small)" if small else value
    n = facts["items"].get(value, 0)
    return f"{value} ({n} item{'' if n == 1 else 's'}{', small' if small else ''})"


def misread_counts(entry: LetterRates) -> dict[str, int]:
    """The rows behind each of a ``parser_letters`` entry's four rates (they share their ``n``)."""
    m = entry.get("misread")
    n = int(m["n"]) if m else 0
    out: dict[str, int] = {}
    for k in LETTER_KINDS:
        rate = entry.get(k)
        out[k] = round(((rate["value"] if rate else None) or 0.0) * n)
    return out


def judge_label(panel: JudgePanel, fp: str) -> str:
    """A panel judge in words: its model and the head of its fingerprint."""
    model = panel["judges"][fp]["model"] if fp in panel["judges"] else None
    return f"{model} ({fp[:12]})" if model else fp[:12]


def primary_label(panel: JudgePanel) -> str:
    fp = panel["primary"] or ""
    return f"{panel['primary_model']} ({fp[:12]})" if panel["primary_model"] else fp[:12]
