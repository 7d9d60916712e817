"""The typed shape of the report JSON (docs/report-schema.md): what :func:`~mcqaudit.metrics.compute` returns
and what :func:`mcqaudit.app.report.build_report` wraps it in. Pure types, no code.

These are ``TypedDict``s, so the values stay plain JSON-ready dicts (the dashboard and users' scripts read
them as such) while mypy checks every key the metrics write. Keys are listed in the order the JSON prints
them; ``NotRequired`` keys appear only where the schema says so.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

Notes = dict[str, str]  # a note's dotted JSON path -> why the value there is null (or how to read it)
Confusion = dict[str, dict[str, int]]  # verdict -> verdict -> rows
LetterConfusion = dict[str, dict[str, int]]  # reference letter or "none" -> parser letter or "none" -> rows
Pairing = Literal["paired", "unpaired"]


class Metric(TypedDict):
    """One statistic: the point estimate, its 95 % percentile bootstrap CI, and its denominator's size."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    se: NotRequired[float | None]  # differences: the bootstrap standard error ...
    mde: NotRequired[float | None]  # ... and the minimum detectable effect, MDE_FACTOR × se
    chance: NotRequired[float | None]  # circular accuracy, position pick rates: the chance level
    preliminary: NotRequired[bool]  # judge-corrected accuracy from fewer than MIN_AUDIT_ROWS reviewed rows
    assumed_exact: NotRequired[list[str]]  # judge-corrected accuracy: automated verdicts with no review
    reviewed_rows: NotRequired[int]  # judge-corrected accuracy: the reviewed rows it rests on
    items: NotRequired[int]  # pairwise Δ: the items it rests on ...
    rows: NotRequired[int]
    pairing: NotRequired[Pairing]  # ... and how the two arms were paired


class Consistency(TypedDict):
    binary: Metric | None
    nway: Metric | None


class OrientationDisagreement(TypedDict):
    rate: Metric | None
    confusion: Confusion


class ParserDisagreement(TypedDict):
    rate: Metric | None
    confusion: Confusion  # rows: the chosen verdict; columns: the parser's
    by_orientation: dict[str, OrientationDisagreement]
    compared: NotRequired[str]  # strict: only the rows it resolved


class LetterRates(TypedDict):
    """A parser's letters against the reference letters (each rate over the same rows: those whose
    reference is known; misread = wrong_letter + fabricated + missed)."""

    misread: Metric | None
    wrong_letter: Metric | None
    fabricated: Metric | None
    missed: Metric | None
    confusion: LetterConfusion  # rows: the reference letter; columns: the parser's


class ParserLetters(LetterRates):
    by_orientation: dict[str, LetterRates]
    compared: NotRequired[str]  # strict: only the rows it resolved


class JudgeAgreement(TypedDict):
    sample: Literal["uniform", "all"]
    reviewed_rows: int
    preliminary: bool
    agreement: Metric | None
    kappa: Metric | None
    precision: dict[str, Metric | None]
    confusion: Confusion  # rows: the automated verdict; columns: the reviewer's
    caveat: NotRequired[str]
    corrected_accuracy: NotRequired[Metric | None]  # per arm only
    disagreed_rows: NotRequired[int]  # rows whose reviewers disagree (the latest review is the one compared)
    settled_rows: NotRequired[int]  # ... of which a later review settled (the earlier ones already differed)


class LogprobCrosscheck(TypedDict):
    mismatch_rate: Metric | None  # row level: the argmax letter is not the text's (clustered interval)
    accuracy_logprob: Metric | None
    accuracy_text: Metric | None
    difference: Metric | None
    items: int


class FamilyMetrics(TypedDict):
    """One arm's figures within one item family (the items sharing one orientation set)."""

    items: int  # the family's items with a graded row in the arm
    accuracy: Metric | None
    accuracy_by_orientation: dict[str, Metric | None]
    rstd: Metric | None
    recall_by_gold_letter: dict[str, Metric | None]


class ArmMetrics(TypedDict):
    rows: int
    graded: int
    accuracy: Metric | None
    answered_accuracy: Metric | None
    other_rate: Metric | None
    ungraded_rate: Metric | None
    truncated_rate: Metric | None  # rows cut by the token limit / rows
    truncated_rate_by_orientation: dict[str, Metric | None]
    other_rows: int  # OTHER rows ...
    truncated_rows: int  # ... truncated rows ...
    truncated_other_rows: int  # ... and the OTHER rows that were truncated
    accuracy_by_orientation: dict[str, Metric | None]
    circular_accuracy: Metric | None
    position_baseline: Literal["uniform", "gold"]
    position_pick_rate: dict[str, Metric | None] | None
    first_position_rate: Metric | None
    rstd: Metric | None
    recall_by_gold_letter: dict[str, Metric | None]
    by_family: dict[str, FamilyMetrics]
    pick_share: dict[str, Metric | None] | None
    consistency: Consistency
    parser_disagreement: dict[str, ParserDisagreement]
    parser_letters: dict[str, ParserLetters]
    items: int
    judge_agreement: JudgeAgreement | None
    logprob_crosscheck: LogprobCrosscheck | None


class FamilyDelta(TypedDict):
    """Treated − control within one item family: on its items graded in both arms (or unpaired)."""

    items: int
    rows: int
    overall: Metric | None
    by_orientation: dict[str, Metric | None]


class ArmDelta(TypedDict):
    """Treated − control Δs; ``overall`` is null (with a note) on fewer than MIN_ITEMS items."""

    overall: Metric | None
    by_orientation: dict[str, Metric | None]
    by_family: dict[str, FamilyDelta]
    other_rate: Metric | None
    answered_accuracy: Metric | None
    truncated_rate: Metric | None  # adds ``rows``: both arms' rows it rests on
    other_rate_untruncated: Metric | None  # Δ of the OTHER rate over the rows not truncated
    items: int
    rows: int
    pairing: Pairing
    items_by_arm: NotRequired[dict[str, int]]  # unpaired only


class Family(TypedDict):
    options: int
    orientations: list[str]
    items: int
    reported: bool  # has per-family figures (``by_family`` entries)


class Design(TypedDict):
    balanced: bool
    gold_position_share: dict[str, dict[str, float]]
    gold_unbalanced: bool
    one_orientation: bool
    separates_position: bool
    unreadable: list[str]
    reason: str | None
    families: dict[str, Family]


class Audit(TypedDict):
    reviews: int
    uniform_reviewed_rows: int
    required_rows: int
    audited: bool


class Flag(TypedDict):
    name: str
    arm: str | None
    evidence: str
    items: int
    rows: int
    page: str
    family: NotRequired[str]  # orientation_instability: the item family it was judged within
    parser: NotRequired[str]
    level: NotRequired[Literal["letter", "verdict"]]  # parser_disagreement: read on letters or on verdicts
    ungraded: NotRequired[int]
    unreadable: NotRequired[list[str]]
    reviewed_rows: NotRequired[int]
    required_rows: NotRequired[int]
    provisional: NotRequired[bool]
    pending: NotRequired[int]


class PanelJudge(TypedDict):
    """One panel judge of ``judge_panel.judges`` (docs/design.md §7): its verdicts beside the primary's."""

    model: str | None
    rows: int  # rows it has a verdict record for (ok or failed)
    graded: int  # ... of which it answered
    error_rate: Metric | None  # failed requests / rows
    other_rate: Metric | None  # OTHER / graded rows
    compared_rows: int  # rows both it and the primary graded
    agreement_with_primary: Metric | None  # same verdict, on the compared rows
    kappa_with_primary: Metric | None  # Cohen's κ over CORRECT / INCORRECT / OTHER, on the compared rows
    confusion: Confusion  # rows: the primary's verdict; columns: this judge's


class JudgePanel(TypedDict):
    """``judge_panel``: the study's panel judges against its primary (``grade --panel``, issue 21)."""

    primary: str | None  # the fingerprint of the final verdicts' judge (the one with most rows, if several)
    primary_model: str | None
    judges: dict[str, PanelJudge]
    alpha: Metric | None  # Krippendorff's α (nominal) over every judge, the primary included; n: rows
    delta_by_judge: dict[str, dict[str, ArmDelta | None]]  # fingerprint -> treated arm -> Δ under that judge


class ReviewerPair(TypedDict):
    rows: int
    agreement: Metric | None
    kappa: Metric | None
    confusion: Confusion  # rows: the first name's verdict; columns: the second's


class ReviewerAgreement(TypedDict):
    """``reviewer_agreement``: people against each other on the rows two or more of them reviewed."""

    rows: int  # rows reviewed by two or more people
    reviewers: list[str]
    preliminary: bool  # fewer than MIN_AUDIT_ROWS such rows
    pairs_compared: int  # (row, pair of reviewers) comparisons
    agreement: Metric | None  # share of those comparisons that agree
    kappa: Metric | None  # Cohen's κ over them, each pair's verdicts in name order
    disagreed_rows: int  # rows whose reviewers disagree: the latest review is in force
    settled_rows: int  # ... of which a later review settled (the reviews before it already differed)
    pairs: dict[str, ReviewerPair]  # "ann|bob" (names in order)


class Results(TypedDict):
    """What :func:`~mcqaudit.metrics.compute` returns: the report's computed part."""

    control_arm: str | None
    control_source: str
    flags: list[Flag]
    metrics: dict[str, ArmMetrics]
    delta_accuracy: dict[str, ArmDelta | None]
    delta_accuracy_by_parser: dict[str, dict[str, Metric | None]]
    pairwise_delta: dict[str, dict[str, Metric | None]] | None
    judge_agreement: JudgeAgreement | None
    design: Design
    audit: Audit
    notes: Notes
    judge_panel: NotRequired[JudgePanel | None]
    reviewer_agreement: NotRequired[ReviewerAgreement | None]


class GroupDelta(TypedDict):
    """A treated arm's Δs against the control within one group (``by_group``): each a Δ metric with
    ``items`` and ``pairing``; ``delta_accuracy`` also ``rows``. ``null`` with the reason in ``notes``."""

    delta_accuracy: Metric | None
    delta_other_rate: Metric | None
    delta_truncated_rate: Metric | None


class GroupArm(TypedDict):
    """One arm's figures within one group of ``by_group`` (docs/report-schema.md)."""

    rows: int
    graded: int
    items: int
    small: bool  # the group has fewer than MIN_ITEMS items: no Δ, no flag, no finding
    accuracy: Metric | None
    answered_accuracy: Metric | None
    other_rate: Metric | None
    truncated_rate: Metric | None
    accuracy_by_orientation: dict[str, Metric | None]
    delta_accuracy: NotRequired[Metric | None]  # treated arms compared with the control only
    delta_other_rate: NotRequired[Metric | None]
    delta_truncated_rate: NotRequired[Metric | None]


class GroupFacts(TypedDict):
    """What a ``by_group`` key rests on (``group_by``)."""

    path: str  # metadata.KEY, as `report --by` names it
    control_arm: str | None
    groups: int
    items: dict[str, int]  # value -> the group's items (any arm)
    small: list[str]  # the groups under min_items items
    missing: str | None  # the name of the group of rows that lack the key; None when every row has it
    min_items: int


class ParserAlso(TypedDict):
    """A second parser said in the same finding (``Finding.also``): its Δ and CI."""

    parser: str
    value: float | None
    ci: list[float | None] | None


class FindingExtras(TypedDict, total=False):
    """The keys a finding carries beside its sentence and figure, by kind (docs/report-schema.md)."""

    pairing: Pairing
    mde: float | None
    informative: bool | None
    parser: str
    artifact: bool
    answered_accuracy: Metric | None
    holds: bool | None
    family: str
    reviewed_rows: int
    required_rows: int
    provisional: bool
    pending: int
    also: ParserAlso  # a second parser said in the same sentence (parser, value, ci)
    token_budget: bool  # other_rate, truncation: the token limit (truncation_rise) is named as a cause
    judges: dict[str, float | None]  # judge_panel: each panel judge's Δ (fingerprint -> value)
    by: str  # group: the metadata key (`report --by metadata.KEY`)
    groups: list[str]  # group: the groups whose Δaccuracy CI excludes 0, largest |Δ| first


FindingKind = Literal[
    "headline",
    "group",
    "parser",
    "parser_letters",
    "other_rate",
    "truncation",
    "orientation",
    "pending",
    "control",
    "design",
    "audit",
    "judge_panel",
    "comparisons",
]


class Finding(FindingExtras):
    """One sentence of ``findings`` (docs/report-schema.md): the JSON prints these keys first, then the
    :class:`FindingExtras` its kind carries."""

    kind: FindingKind
    arm: str | None
    text: str
    value: float | None
    ci: list[float | None] | None
    n_items: int | None
    n_rows: int | None


class StudyFacts(TypedDict):
    path: str
    created: str | None
    unaudited: bool
    standin_judge: bool
    verdicts: str
    items: int
    orientations: list[str]
    parsers: list[str]
    reviews: int


class FingerprintUse(TypedDict):
    model: str | None
    shape: str | None
    temperature: float | None
    standin: bool
    arms: list[str]
    rows: int


class BootstrapFacts(TypedDict):
    resamples: int
    seed: int
    unit: Literal["item"]
    ci_level: float
    method: Literal["bootstrap", "normal", "none"]  # how the replicates were drawn (docs/report-schema.md)


class Report(Results):
    """The whole report dict (``mcqaudit report --format json``): :class:`Results` and the study's facts.
    (The JSON prints ``schema_version``, ``mcqaudit_version``, ``study``, ``arms``, ``control_arm``,
    ``control_source``, ``rows``, ``rows_by_arm``, ``pending_by_arm``, ``judge_fingerprints``, ``bootstrap``, ``findings``, then
    the computed keys.)"""

    schema_version: int
    mcqaudit_version: str
    study: StudyFacts
    arms: list[str]
    rows: int
    rows_by_arm: dict[str, int]
    pending_by_arm: dict[str, int]
    judge_fingerprints: dict[str, FingerprintUse]
    bootstrap: BootstrapFacts
    findings: list[Finding]
    # with `report --by metadata.KEY` only: {KEY: {value: {arm: {…}}}} and {KEY: facts}
    by_group: NotRequired[dict[str, dict[str, dict[str, GroupArm]]]]
    group_by: NotRequired[dict[str, GroupFacts]]
