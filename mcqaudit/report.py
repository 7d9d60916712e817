"""Render a report dict (docs/report-schema.md): the findings, and the JSON, Markdown and self-contained HTML.

Pure functions of the dict (the ``Report`` TypedDict of :mod:`mcqaudit.metrics.results`), no I/O:
:func:`findings` writes the few sentences every view opens with, each kind by its own function and each
sentence composed from its parts; Markdown and HTML are built from the same list of sections
(:func:`sections`, one function per section), so the two always say the same thing. The dict itself is
built by the application layer, :func:`mcqaudit.app.report.build_report` (study → frames → metrics → report).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

from mcqaudit.formatting import (
    html_rich,
    html_text,
    md_rich,
    md_text,
    naive_words,
    num,
    pairing_words,
    pct,
    plural,
    pp,
    with_chance,
)
from mcqaudit.metrics import MIN_AUDIT_ROWS, MIN_CI_ROWS, MIN_ITEMS, PARSER_DISAGREEMENT_MIN_ROWS
from mcqaudit.metrics.rates import no_difference_bound, round6
from mcqaudit.metrics.results import (
    ArmDelta,
    BootstrapFacts,
    FamilyDelta,
    Finding,
    FindingExtras,
    FindingKind,
    Flag,
    JudgeAgreement,
    Metric,
    ParserAlso,
    Report,
)
from mcqaudit.metrics.rules import CI_LEVEL
from mcqaudit.reading import (
    FamilyView,
    agreement_groups,
    any_truncated,
    family_entry,
    group_label,
    judge_label,
    misread_counts,
    primary_label,
    report_families,
)
from mcqaudit.vocab import LETTERS

SCHEMA_VERSION = 1
FORMATS = ("json", "md", "html")
STANDIN_BANNER = "Verdicts come from a heuristic stand-in, not an LLM: use them for demos and dry runs only."
UNAUDITED_BANNER = (
    "Unaudited study: graded with --no-judge, so verdicts come from the strict pre-filter alone and rows it "
    "could not resolve are ungraded."
)

MDE_INFORMATIVE = 0.10  # a null is called informative when the study could have seen a 10 pp effect

__all__ = [
    "FORMATS",
    "SCHEMA_VERSION",
    "STANDIN_BANNER",
    "UNAUDITED_BANNER",
    "banners",
    "findings",
    "note_label",
    "num",
    "pct",
    "render",
    "sections",
    "to_html",
    "to_markdown",
    "with_chance",
]


# --- findings -------------------------------------------------------------------------------------------
CONTROL_WORDS = {
    "--control": "chosen with --control",
    "stored": "stored in the study",
    "named control/base": "named control/base",
    "first ingested": "the first arm ingested",
}


def _clear(m: Metric | None) -> int:
    """+1 / -1 when the CI lies above / below 0, else 0."""
    lo, hi = (m.get("ci_low"), m.get("ci_high")) if m else (None, None)
    if lo is None or hi is None:
        return 0
    return 1 if lo > 0 else -1 if hi < 0 else 0


def _value(m: Metric | None) -> float | None:
    return m.get("value") if m else None


def _ci(m: Metric | None) -> list[float | None] | None:
    """A figure's CI as a finding carries it: ``[ci_low, ci_high]``, or None without one."""
    return [m["ci_low"], m["ci_high"]] if m and m.get("ci_low") is not None else None


def _finding(kind: FindingKind, text: str, arm: str | None = None, m: Metric | None = None,
             items: int | None = None, rows: int | None = None, **extra: Unpack[FindingExtras]) -> Finding:  # fmt: skip
    return {"kind": kind, "arm": arm, "text": text, "value": m.get("value") if m else None, "ci": _ci(m),
            "n_items": items, "n_rows": rows, **extra}  # fmt: skip


def findings(report: Report) -> list[Finding]:
    """A few sentences a collaborator can trust in thirty seconds, written from the report dict (pure).

    Each finding is ``{"kind", "arm", "text", "value", "ci", "n_items", "n_rows", ...}``; every sentence
    carries its number, CI and n. Kinds, per treated arm: ``headline`` (Δaccuracy vs control, and whether a
    null is informative by its MDE), ``parser`` (the Δ the naive and the user's parser would have given),
    ``other_rate`` (the OTHER-rate change beside the answered-accuracy Δ), ``orientation`` (does the Δ hold
    per orientation); before them, with three or more arms compared, ``comparisons`` (how often chance alone
    makes one of their CIs exclude 0); then ``control`` (a control picked only for being first), ``design`` and
    ``audit``.
    While rows are pending (``pending_by_arm``) a ``pending`` finding opens the list and each per-arm finding
    of a comparison with pending rows says it is provisional (``provisional``, ``pending``).
    Nothing is stated from fewer than 20 items: such a comparison reads "not enough shared items (n=2)".
    """
    out: list[Finding] = []
    arms = list(report.get("arms") or [])
    ctrl = report.get("control_arm")
    flags = report.get("flags") or []
    design = report.get("design") or {}
    if len(arms) < 2:
        out.append(
            _finding("headline", f"The study has a single arm ({ctrl or 'none'}): nothing to compare.")
        )
    elif report.get("control_source") == "first ingested":
        out.append(_finding(
            "control",
            f"The control arm is {ctrl} only because it was ingested first; if another arm is the control, "
            "name it with --control (or `mcqaudit ingest --control`).",
            ctrl,
        ))  # fmt: skip
    pending = _pending(report)
    if pending:
        out.insert(0, _pending_finding(report, pending))
    out += _comparisons_finding(report)  # before the arms' own: how far chance alone goes among so many
    name = _ParserNames(report)
    for arm, d in (report.get("delta_accuracy") or {}).items():
        out += _provisional(
            _arm_findings(report, arm, d, flags, name), pending.get(arm, 0) + pending.get(str(ctrl), 0)
        )
    for arm in report.get("delta_accuracy") or {}:
        out += _provisional(_group_findings(report, arm), pending.get(arm, 0) + pending.get(str(ctrl), 0))
    out += _letter_findings(report, name)
    if design.get("reason"):
        out.append(_finding(
            "design",
            f"The design cannot measure position bias: {design['reason']}. Position pick rates, RStd and the "
            "orientation check are not reported."
            if design.get("gold_unbalanced") else
            f"The design cannot check the effect per orientation: {design['reason']}.",
            items=report.get("study", {}).get("items"),
            rows=report.get("rows"),
        ))  # fmt: skip
    out += _audit_findings(report)
    return out


COMPARISONS_NOTED = 3  # from this many arms compared with the control, the findings say what chance alone gives


def _comparisons_finding(report: Report) -> list[Finding]:
    """With :data:`COMPARISONS_NOTED` or more treated arms compared with the control: how often chance alone
    makes one of their headline CIs exclude 0, and how many do. Each CI is at 95 %: with seven arms and no
    effect anywhere, one or more excludes 0 in 30 % of studies, so a single arm's "the CI excludes 0" among
    seven is weaker evidence than one arm's alone."""
    heads = {
        arm: ov
        for arm, d in (report.get("delta_accuracy") or {}).items()
        if d and (ov := d.get("overall")) and ov.get("ci_low") is not None
    }
    k = len(heads)
    if k < COMPARISONS_NOTED:
        return []
    clear = [arm for arm, ov in heads.items() if _clear(ov)]
    chance = 1 - CI_LEVEL**k
    here = (
        "here none does"
        if not clear
        else f"here {len(clear)} of {k} do" + (f" ({', '.join(clear)})" if len(clear) <= 3 else "")
    )
    text = (
        f"{k} arms are compared with the control, each Δaccuracy's CI at {CI_LEVEL * 100:.0f} %: with no "
        f"effect in any of them, one or more of {k} such CIs would exclude 0 by chance alone in {chance * 100:.0f} % "
        f"of studies; {here}. Read a single arm's effect with that in mind (the CIs per orientation, parser and "
        "group add more comparisons still)."
    )
    return [_finding("comparisons", text)]


class _ParserNames:
    """How the findings name the naive and the user's parser, in the order they are written: the naive
    parser's description (its letter range, §4) in the first finding that names it, "naive parser" in the
    later ones, so the first screen is findings, not the same definition again."""

    def __init__(self, report: Report) -> None:
        self._naive = naive_words(report)
        self._described = False

    def __call__(self, parser: str) -> str:
        if parser != "naive":
            return "user's own parser"
        if self._described:
            return "naive parser"
        self._described = True
        return f"naive parser ({self._naive})"


def _pending(report: Report) -> dict[str, int]:
    """Rows per arm the judge has not graded yet, while grading is under way (an unaudited study's
    unresolved rows are not waiting for anyone: its banner and audit finding say so)."""
    if (report.get("study") or {}).get("unaudited"):
        return {}
    return {a: int(n) for a, n in (report.get("pending_by_arm") or {}).items() if n}


def _pending_finding(report: Report, pending: Mapping[str, int]) -> Finding:
    n, rows = sum(pending.values()), int(report.get("rows") or 0)
    share = f" ({n / rows * 100:.1f} %)" if rows else ""
    text = (f"Grading is not finished: {n:,} of {rows:,} rows{share} are still pending (the judge has not graded "
            "them yet), so every Δ and OTHER figure below is provisional until they are graded (`mcqaudit grade`).")  # fmt: skip
    f = _finding("pending", text, None, None, None, n, pending=n)
    f["value"] = n / rows if rows else None  # the share pending: a figure with no CI
    return f


def _provisional(found: list[Finding], pending: int) -> list[Finding]:
    """An arm's findings while rows of it or of the control are pending: each says so, none reads as final."""
    if not pending:
        return found
    for f in found:
        f["text"] = (
            f"{f['text'].rstrip()} Provisional: {plural(pending, 'row')} of this comparison still pending."
        )
        f["provisional"], f["pending"] = True, pending
    return found


def _arm_findings(
    report: Report,
    arm: str,
    d: ArmDelta | None,
    flags: Sequence[Flag],
    name: _ParserNames,
) -> list[Finding]:
    """One treated arm's findings, in reading order: the headline Δ, what the naive and the user's parser
    would have said, the OTHER-rate change, the orientation check."""
    ctrl = report["control_arm"]
    vs = f"{arm} vs {ctrl}"
    if d is None:
        why = (report.get("notes") or {}).get(f"delta_accuracy.{arm}", "see notes")
        return [_finding("headline", f"{vs}: not compared ({why}).", arm)]
    ov = d.get("overall")
    out = [_headline_finding(arm, str(ctrl), d)]
    if ov is None:
        return out
    out += _judge_panel_findings(report, arm, d, flags)
    out += _parser_findings(report, arm, ov, int(d.get("rows", 0)), flags, name)
    out += _other_rate_finding(report, arm, d, flags)
    out += _orientation_findings(report, arm, d, flags)
    return out


def _headline_finding(arm: str, ctrl: str, d: ArmDelta) -> Finding:
    """Δaccuracy vs the control on the items it rests on (paired or unpaired), and whether a null is
    informative (its MDE); or why there is not enough to compare."""
    vs = f"{arm} vs {ctrl}"
    items, rows, pairing = d.get("items", 0), d.get("rows", 0), d.get("pairing", "paired")
    ov = d.get("overall")
    by = d.get("items_by_arm") or {}
    if ov is None:
        if pairing == "paired":
            text = f"{vs}: not enough shared items (n={items}) to compare; a Δ needs at least {MIN_ITEMS}."
        else:
            text = (f"{vs}: the arms share no items, and unpaired there are not enough to compare "
                    f"({by.get(arm, 0)} and {by.get(ctrl, 0)} items; each needs at least {MIN_ITEMS}).")  # fmt: skip
        return _finding("headline", text, arm, None, items, rows, pairing=pairing)
    if pairing == "paired":
        on = f"on {items} shared items ({rows} rows)"
    else:
        on = (f"compared unpaired, since the arms share no items ({by.get(arm)} and {by.get(ctrl)} items, "
              f"{rows} rows)")  # fmt: skip
    mde = ov.get("mde")
    mde_pp = f"{mde * 100:.1f}" if mde is not None else "n/a"
    if ov.get("ci_low") is None:
        text = f"{vs}: Δaccuracy {pp(ov)} {on}; no CI was computed (--bootstrap 0)."
        informative = None
    elif _clear(ov):
        text = f"{vs}: Δaccuracy {pp(ov)} {on}; the CI excludes 0 (MDE {mde_pp} pp)."
        informative = True
    else:
        informative = mde is not None and mde <= MDE_INFORMATIVE
        # every shared item answered alike in both arms: 0 in every replicate, the interval the Wilson bound of
        # 0 of n items answered differently (metrics.bootstrap._null_of_no_width)
        w = round6(no_difference_bound(ov["n"]))
        same = pairing == "paired" and ov["value"] == 0 and ov["ci_high"] == w and ov["ci_low"] == round6(-(w or 0))
        text = (
            f"{vs}: Δaccuracy {pp(ov)} {on}, "
            + ("the two arms' verdicts agree on every shared item; " if same else "no effect the study can see; ")
            + (f"with an MDE of {mde_pp} pp a null here is informative." if informative else
               f"with an MDE of {mde_pp} pp a null here is not informative (a smaller effect would not show).")
        )  # fmt: skip
    return _finding("headline", text, arm, ov, items, rows, pairing=pairing, mde=mde, informative=informative)


def _judge_panel_findings(report: Report, arm: str, d: ArmDelta, flags: Sequence[Flag]) -> list[Finding]:
    """Whether the headline Δ survives every judge on the panel (``judge_panel.delta_by_judge``): "holds under
    both judges", or "depends on the judge: under X the Δ is …" (``judge_sensitive``); nothing without a panel."""
    jp = report.get("judge_panel")
    ov = d.get("overall")
    if not jp or ov is None:
        return []
    ctrl = report["control_arm"]
    under: dict[str, Metric | None] = {}
    for fp, by in jp["delta_by_judge"].items():
        dj = by.get(arm)
        under[fp] = dj["overall"] if dj else None
    flagged = [f.get("judge") for f in flags if f["name"] == "judge_sensitive" and f.get("arm") == arm]
    parts = [f"{judge_label(jp, fp)} {pp(m)} (n={m['n']} items)" for fp, m in under.items() if m is not None]
    missing = [judge_label(jp, fp) for fp, m in under.items() if m is None]
    n_judges = 1 + len(under)
    values = {fp: m.get("value") if m else None for fp, m in under.items()}
    items, rows = int(d.get("items", 0)), int(d.get("rows", 0))
    primary = f"the primary {primary_label(jp)} {pp(ov)} (n={items} items)"
    if flagged:
        bad = [(fp, m) for fp, m in under.items() if fp in flagged and m is not None]
        said = "; ".join(f"under {judge_label(jp, fp)} the Δ is {pp(m)} (n={m['n']} items)" for fp, m in bad)
        text = (f"{arm} vs {ctrl}: the finding depends on the judge: {said}, against {pp(ov)} under the primary "
                f"judge {primary_label(jp)} (n={items} items).")  # fmt: skip
        holds: bool | None = False
    elif missing:
        text = (f"{arm} vs {ctrl}: the Δ cannot be checked under every judge on the panel: under {_and(missing)} "
                f"there are not enough items to compare (see notes)"
                + (f"; under {_and(parts)} it is in line with {primary}." if parts else "."))  # fmt: skip
        holds = None
    else:
        both = "both judges" if n_judges == 2 else f"all {n_judges} judges"
        text = (f"{arm} vs {ctrl}: the Δ holds under {both} (n={items} items): {_and(parts)}, in line with "
                f"{primary}.")  # fmt: skip
        holds = True
    return [_finding("judge_panel", text, arm, ov, items, rows, holds=holds, judges=values)]


def panel_lines(report: Report) -> list[str]:
    """What the first screen says about the judges and the reviewers (the Overview, the report's "Judge panel"
    section): one judge only, or whether each arm's Δ holds under every judge and Krippendorff's α; and how
    far the reviewers agree — each with its n."""
    jp = report.get("judge_panel")
    out: list[str] = []
    if not jp:
        out.append("One judge: the finding is not checked against another (grade a second judge with "
                   "`mcqaudit grade --panel`).")  # fmt: skip
    else:
        fnd = report.get("findings")
        found = [f for f in (fnd if fnd is not None else findings(report)) if f["kind"] == "judge_panel"]
        n_judges = 1 + len(jp["judges"])
        every = "both judges" if n_judges == 2 else f"all {n_judges} judges"

        def arms(holds: bool) -> list[str]:
            return [f"{f['arm']} (n={f['n_items']} items)" for f in found if f.get("holds") is holds]

        said = []
        if arms(True):
            said.append(f"the Δ holds under {every} for {_and(arms(True))}")
        if arms(False):
            said.append(f"it depends on the judge for {_and(arms(False))}")
        a = jp.get("alpha")
        alpha = f"Krippendorff's α {num(a)} (n={a['n']} rows)" if a else "Krippendorff's α n/a"
        names = ", ".join(judge_label(jp, fp) for fp in jp["judges"])
        out.append(f"Judge panel: {n_judges} judges (primary {primary_label(jp)}; panel {names})"
                   + (f"; {'; '.join(said)}" if said else "") + f"; {alpha}.")  # fmt: skip
    ra = report.get("reviewer_agreement")
    if ra:
        out.append(reviewer_words(ra))
    elif jp:
        out.append("No row has been reviewed by two people yet: how far the reviewers agree is not measured.")
    return out


def _pct_ci(m: Mapping[str, Any] | None) -> str:
    """``80.0 % [64.1, 93.1]`` (a share in a sentence)."""
    if not m or m.get("value") is None:
        return "n/a"
    ci = f" [{m['ci_low'] * 100:.1f}, {m['ci_high'] * 100:.1f}]" if m.get("ci_low") is not None else ""
    return f"{m['value'] * 100:.1f} %{ci}"


def reviewer_words(ra: Mapping[str, Any]) -> str:
    """``reviewer_agreement`` in one sentence, with its n; preliminary under :data:`MIN_AUDIT_ROWS` rows."""
    ag, k = ra.get("agreement"), ra.get("kappa")
    n = int(ra.get("rows", 0))
    share = _pct_ci(ag)
    kap = f"Cohen's κ {num(k)}" if k else "Cohen's κ n/a"
    cmp = int(ra.get("pairs_compared", 0))
    pairs = f", {cmp} comparisons of two reviewers" if cmp != n else ""
    return (f"Reviewers agree on {share} of {plural(n, 'row')} reviewed by two or more people ({kap}{pairs}, "
            f"n={cmp})" + (f"; preliminary: under {MIN_AUDIT_ROWS} rows" if ra.get("preliminary") else "")
            + f"; {_disagreed_words(ra)}.")  # fmt: skip


def _disagreed_words(e: Mapping[str, Any]) -> str:
    """``6 rows where they disagree (the latest review is final there): 2 settled by a later review, 4 waiting
    for a third reviewer`` — the words of the Review page's reviewers filter."""
    n, settled = int(e.get("disagreed_rows", 0)), int(e.get("settled_rows", 0))
    if not n:
        return "no row where they disagree"
    return (f"{plural(n, 'row')} where they disagree (the latest review is final there): {settled} settled by a "
            f"later review, {n - settled} waiting for a third reviewer (Review filter \"reviewers disagree\")")  # fmt: skip


def _parser_findings(
    report: Report,
    arm: str,
    ov: Metric,
    rows: int,
    flags: Sequence[Flag],
    name: _ParserNames,
) -> list[Finding]:
    """The Δ the naive and the user's parser would have reported (``delta_accuracy_by_parser``), each against
    the verdicts' Δ: in line, or what the parser does to the effect (``suspected_parser_artifact``). When both
    are in line, one sentence says so for the two (the naive parser's finding; ``also``: the user's)."""
    by_parser = (report.get("delta_accuracy_by_parser") or {}).get(arm) or {}
    vs = f"{arm} vs {report['control_arm']}"
    present = [p for p in ("naive", "user") if p in by_parser]
    artifact = {
        p: any(f["name"] == "suspected_parser_artifact" and f.get("arm") == arm and f.get("parser") == p
               for f in flags)
        for p in present
    }  # fmt: skip
    in_line = [p for p in present if by_parser[p] is not None and not artifact[p]]
    mn, mu = by_parser.get("naive"), by_parser.get("user")
    if in_line == ["naive", "user"] and mn is not None and mu is not None:
        text = (f"The {name('naive')} and the {name('user')} would have reported Δaccuracy {pp(mn)} "
                f"(n={mn['n']} items) and {pp(mu)} (n={mu['n']} items), both in line with the verdicts.")  # fmt: skip
        also: ParserAlso = {"parser": "user", "value": mu.get("value"), "ci": _ci(mu)}
        return [_finding("parser", text, arm, mn, mn["n"], rows, parser="naive", artifact=False, also=also)]
    out: list[Finding] = []
    for p in present:
        m = by_parser[p]
        label = name(p)
        if m is None:
            out.append(_finding("parser", f"The {label}: not enough items to compare {vs}.", arm, parser=p))
            continue
        n = f"n={m['n']} items"
        if not artifact[p]:
            text = f"The {label} would have reported Δaccuracy {pp(m)} ({n}), in line with the verdicts."
        else:
            ps, js = _clear(m), _clear(ov)
            verb = (
                "invents an effect the verdicts do not show" if ps and not js else
                "hides the effect the verdicts show" if js and not ps else
                "reverses the effect" if ps and js and ps != js else
                "misstates the size of the effect"
            )  # fmt: skip
            text = (f"The {label} would have reported Δaccuracy {pp(m)} instead ({n}): the parser, not the "
                    f"model, {verb} ({pp(ov)} by the verdicts).")  # fmt: skip
        out.append(_finding("parser", text, arm, m, m["n"], rows, parser=p, artifact=artifact[p]))
    return out


def _other_rate_finding(report: Report, arm: str, d: ArmDelta, flags: Sequence[Flag]) -> list[Finding]:
    """The OTHER-rate change, beside the Δ on answered rows only; when the arm is cut by the token limit more
    often (``truncation_rise``), what that does to it: the token budget named as the OTHER rise's cause when
    the truncated rows account for it (:func:`_budget_explains`), else a ``truncation`` finding of its own."""
    o, aa = d.get("other_rate"), d.get("answered_accuracy")
    if o is None:
        return []
    ctrl = str(report["control_arm"])
    mt = _value(report["metrics"][arm].get("other_rate"))
    mc = _value(report["metrics"][ctrl].get("other_rate"))
    rates = _rates_of_rows(arm, ctrl, mt, mc, "graded rows")
    s_o = _clear(o)
    head = (f"{arm} answers OTHER (refuses, hedges, picks no single option) more often" if s_o > 0 else
            f"{arm} answers OTHER less often" if s_o < 0 else "The OTHER rate shows no clear change")  # fmt: skip
    text = (f"{head}: {rates + '; ' if rates else ''}{_delta_basis(d, o['n'])}Δ {pp(o)}; on answered rows only, "
            f"Δaccuracy is {pp(aa)}.")  # fmt: skip
    rows = d.get("rows", 0)
    if not _fired(flags, "truncation_rise", arm):
        return [_finding("other_rate", text, arm, o, o["n"], rows, answered_accuracy=aa)]
    m = report["metrics"]
    cut, other = m[arm].get("truncated_other_rows", 0), m[arm].get("other_rows", 0)
    kept = d.get("other_rate_untruncated")
    if _fired(flags, "other_rate_rise", arm) and _budget_explains(report, arm, d):
        rest = _clear(kept) > 0  # most of the rise is truncated rows, but not all of it
        text = (f"{'Most of the' if rest else 'The'} OTHER rise is the token budget: {cut:,} of {other:,} OTHER "
                f"rows of {arm} were cut by the token limit (finish_reason length, or a reasoning block never "
                f"closed), against {m[ctrl].get('truncated_other_rows', 0):,} of {m[ctrl].get('other_rows', 0):,} "
                f"in {ctrl}; OTHER {'on ' + rates + ', ' if rates else ''}{_delta_basis(d, o['n'], rows)}Δ {pp(o)}, "
                f"and with the truncated rows left out Δ {pp(kept)}"
                f"{', a smaller rise that remains' if rest else ', no clear rise'}. Raise the token limit or read "
                f"the answers before reading this as a preference; on answered rows only, Δaccuracy is {pp(aa)}.")  # fmt: skip
        return [_finding("other_rate", text, arm, o, o["n"], rows, answered_accuracy=aa, token_budget=True)]
    found = _finding("other_rate", text, arm, o, o["n"], rows, answered_accuracy=aa, token_budget=False)
    return [found, _truncation_finding(report, arm, d)]


def _rates_of_rows(arm: str, ctrl: str, treated: float | None, control: float | None, of: str = "rows") -> str:
    """Each arm's rate over all of its rows (``of``: "graded rows" for a rate of graded rows), said as such:
    beside a Δ on the shared items alone they need not differ by that Δ, and a reader who subtracts them must
    see why."""
    if treated is None or control is None:
        return ""
    return f"{treated * 100:.1f} % of {arm}'s {of} vs {control * 100:.1f} % of {ctrl}'s (all items of each)"


def _delta_basis(d: ArmDelta, items: int, rows: int | None = None) -> str:
    """What a Δ of an arm's comparison rests on, before it: its shared items (or the unpaired items) and rows."""
    n = f"{items} items" + (f", {rows:,} rows" if rows else "")
    return f"on the shared items ({n}), " if d.get("pairing", "paired") == "paired" else f"compared unpaired ({n}), "


def _fired(flags: Sequence[Flag], name: str, arm: str) -> bool:
    return any(f["name"] == name and f.get("arm") == arm for f in flags)


def _budget_explains(report: Report, arm: str, d: ArmDelta) -> bool:
    """The truncated rows account for the arm's OTHER rise: with them left out the OTHER-rate Δ is no longer
    clearly above 0, or at least half of the extra OTHER rate is truncated rows (of graded rows, each arm)."""
    kept = d.get("other_rate_untruncated")
    if kept is None or _clear(kept) <= 0:
        return True
    ctrl = str(report["control_arm"])

    def shares(a: str) -> tuple[float, float]:
        e = report["metrics"][a]
        graded = e.get("graded") or 0
        if not graded:
            return 0.0, 0.0
        return e.get("other_rows", 0) / graded, e.get("truncated_other_rows", 0) / graded

    (ot, tt), (oc, tc) = shares(arm), shares(ctrl)
    return ot > oc and (tt - tc) >= 0.5 * (ot - oc)


def _truncation_finding(report: Report, arm: str, d: ArmDelta) -> Finding:
    """The arm is cut by the token limit more often (``truncation_rise``), and the OTHER rate does not tell
    the whole of it: truncated rows that were still answered were graded from a cut answer."""
    ctrl = str(report["control_arm"])
    m = report["metrics"]
    tr = d.get("truncated_rate")
    assert tr is not None  # the flag fired on it
    vt, vc = _value(m[arm].get("truncated_rate")), _value(m[ctrl].get("truncated_rate"))
    rates = _rates_of_rows(arm, ctrl, vt, vc)
    cut, other = m[arm].get("truncated_rows", 0), m[arm].get("truncated_other_rows", 0)
    kept = d.get("other_rate_untruncated")
    rest = (f"; the OTHER rise is not the token budget alone: with the truncated rows left out, Δ OTHER is still "
            f"{pp(kept)}" if _clear(kept) > 0 else "")  # fmt: skip
    basis = _delta_basis(d, tr["n"], tr.get("rows", d.get("rows", 0)))
    text = (f"{arm} is cut by the token limit more often: {rates + '; ' if rates else ''}{basis}Δ {pp(tr)}; "
            f"{other:,} of its {cut:,} truncated rows are OTHER, and the "
            f"other {cut - other:,} carry whatever answer came before the cut{rest}. Raise the token limit or read "
            "the answers.")  # fmt: skip
    return _finding("truncation", text, arm, tr, tr["n"], tr.get("rows", d.get("rows", 0)), token_budget=True)


def _orientation_findings(
    report: Report, arm: str, d: ArmDelta, flags: Sequence[Flag]
) -> list[Finding]:
    """Does the Δ hold per orientation — said per item family (the items sharing one orientation set),
    since only within a family are two orientations shown to the same items."""
    design = report.get("design") or {}
    items, rows = d.get("items", 0), d.get("rows", 0)
    if design.get("one_orientation"):
        return [_finding("orientation", "The orientation check cannot be read: every item is shown in one "
                         "orientation only.", arm, None, items, rows, holds=None)]  # fmt: skip
    fams: list[tuple[str | None, FamilyDelta]] = list((d.get("by_family") or {}).items())
    if "by_family" not in d:  # a report from before item families: its orientations as one family
        whole: FamilyDelta = {"items": items, "rows": rows, "overall": d.get("overall"),
                              "by_orientation": d.get("by_orientation") or {}}  # fmt: skip
        fams = [(None, whole)]
    known = design.get("families") or {}
    if not fams:
        return [_finding("orientation", f"No item family (the items sharing one orientation set) has {MIN_ITEMS} "
                         "shared items: the Δ cannot be checked per orientation.", arm, None, items, rows,
                         holds=None)]  # fmt: skip
    out: list[Finding] = []
    ctrl = str(report.get("control_arm"))
    m = report.get("metrics") or {}

    def in_arm(a: str, fam: str) -> int:
        am = m.get(a)
        fe = (am.get("by_family") or {}).get(fam) if am else None
        return int(fe.get("items") or 0) if fe else 0

    apart: list[str] = []  # families that only one of the two arms was asked
    for fam, fd in fams:
        if fam in known and len(known[fam]["orientations"]) < 2:
            continue  # one orientation: nothing to compare within this family
        if fam is not None and "by_family" in (m.get(arm) or {}) and min(in_arm(arm, fam), in_arm(ctrl, fam)) == 0:
            apart.append(fam)
            continue  # a family one arm never answered: no Δ within it, so nothing to say per orientation
        n, nr = fd.get("items", 0), fd.get("rows", 0)
        where = f" within {fam} ({n} items)" if fam is not None else ""
        inst = next((f for f in flags if f["name"] == "orientation_instability" and f.get("arm") == arm
                     and f.get("family") == fam), None)  # fmt: skip
        byo = {k: v for k, v in (fd.get("by_orientation") or {}).items() if v is not None}
        holds: bool | None
        if inst is not None:
            text = (f"The effect does not hold per orientation {inst['evidence']}." if fam is not None else
                    f"The effect does not hold per orientation ({n} items): {inst['evidence']}.")  # fmt: skip
            holds = False
        elif len(byo) >= 2:
            vals = [(v["value"] or 0) * 100 for v in byo.values()]
            text = (f"The Δ holds per orientation{where}: none of the {len(byo)} orientations (each on at least "
                    f"{min(v['n'] for v in byo.values())} items) contradicts it; their Δs range from "
                    f"{min(vals):+.1f} to {max(vals):+.1f} pp.")  # fmt: skip
            holds = True
        else:
            shared = "shared items" if d.get("pairing", "paired") == "paired" else "items"
            text = (f"Not enough {shared} per orientation{where} (at least {MIN_ITEMS} in two orientations) to "
                    "check the Δ per orientation.")  # fmt: skip
            holds = None
        found = _finding("orientation", text, arm, None, n, nr, holds=holds)
        if fam is not None:
            found["family"] = fam
        out.append(found)
    if apart and not out:
        out.append(_finding("orientation", f"The Δ cannot be checked per orientation: {arm} and {ctrl} answered "
                            f"no item family in common (of {_and(apart)}, none was answered by both), so no "
                            "orientation is shown to both arms' items.", arm, None, items, rows,
                            holds=None))  # fmt: skip
    return out


def _group_findings(report: Report, arm: str) -> list[Finding]:
    """Per ``--by`` key, where treated ``arm``'s Δaccuracy lives: the groups of at least ``MIN_ITEMS`` items
    whose Δ's CI excludes 0 (largest first), or that none does; small groups say nothing (docs/design.md §7)."""
    out: list[Finding] = []
    ctrl = report.get("control_arm")
    for key, groups in (report.get("by_group") or {}).items():
        facts = (report.get("group_by") or {})[key]
        with_delta = [
            (v, d) for v, e in groups.items()
            if v not in facts["small"] and arm in e and (d := e[arm].get("delta_accuracy")) is not None
        ]  # fmt: skip
        if not with_delta:
            continue
        clear = sorted(((v, d) for v, d in with_delta if _clear(d)), key=lambda vd: -abs(vd[1]["value"] or 0))
        n = len(with_delta)
        of = f"{plural(n, 'group')} of at least {MIN_ITEMS} items"
        if clear:
            named = "; ".join(f"{v}: {pp(d)} (n={d['n']} items)" for v, d in clear[:3]) + (
                "; …" if len(clear) > 3 else ""
            )
            rest = n - len(clear)
            text = (f"By {key}, {arm} vs {ctrl}: the Δaccuracy's CI excludes 0 in {len(clear)} of the {of} — "
                    f"{named}" + (f"; in the other {rest} it spans 0" if rest else "") + "."
                    + (f" Per-group CIs are not corrected for the {n} groups compared." if n > 1 else ""))  # fmt: skip
            top = clear[0][1]
            out.append(_finding("group", text, arm, top, top.get("items"), top.get("rows"), by=key,
                                groups=[v for v, _ in clear]))  # fmt: skip
        else:
            mdes = [float(x) for _, d in with_delta if (x := d.get("mde")) is not None]
            span = f" (per-group MDE {min(mdes) * 100:.0f}–{max(mdes) * 100:.0f} pp)" if mdes else ""
            text = f"By {key}, {arm} vs {ctrl}: the Δaccuracy's CI spans 0 in each of the {of}{span}."
            out.append(_finding("group", text, arm, None, sum(int(d["n"]) for _, d in with_delta), None, by=key,
                                groups=[]))  # fmt: skip
    return out


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _letter_findings(report: Report, name: _ParserNames) -> list[Finding]:
    """For the naive and the user's parser, one sentence: how many answers it misreads in each arm
    (``parser_letters``) — the question users come with; nothing when it misreads none, and one sentence
    for the two when they misread as many answers in every arm. An arm under
    :data:`PARSER_DISAGREEMENT_MIN_ROWS` answers gets its counts only, no rate. A sentence about one arm
    carries that arm and its rate (``value``, ``ci``); ``n_rows`` is the answers it counts."""
    arms = [str(a) for a in report.get("arms") or []]
    by_parser = {p: _misreads(report, p, arms) for p in ("naive", "user")}
    said = {p: s for p, s in by_parser.items() if any(bad for _, bad, _, _ in s)}  # none misread: no sentence
    counts = {p: _misread_words(s, len(arms) > 1) for p, s in said.items()}
    both = len(said) == 2 and counts["naive"] == counts["user"]
    out: list[Finding] = []
    for p, s in said.items():
        if both and p == "user":
            continue  # said with the naive parser's
        who = f"{name('naive')} and the {name('user')} each misread" if both else f"{name(p)} misreads"
        text = f"The {who} the letter of {counts[p]}."
        arm1, _, n1, m1 = s[0]
        single = len(s) == 1
        rate = m1 if single and n1 >= PARSER_DISAGREEMENT_MIN_ROWS else None
        rows = sum(n for _, _, n, _ in s)
        out.append(_finding("parser_letters", text, arm1 if single else None, rate, None, rows, parser=p))
    return out


_Misread = tuple[str, int, int, Metric]  # arm, answers misread, answers compared, the rate


def _misreads(report: Report, parser: str, arms: Sequence[str]) -> list[_Misread]:
    """Per arm with a ``parser_letters.misread`` figure: the answers the parser misreads, of how many."""
    said: list[_Misread] = []
    for arm in arms:
        e = (report["metrics"][arm].get("parser_letters") or {}).get(parser)
        m = e.get("misread") if e else None
        if e and m and m.get("value") is not None:
            said.append((arm, misread_counts(e)["misread"], int(m["n"]), m))
    return said


def _misread_words(said: Sequence[_Misread], several: bool) -> str:
    """The counts in words: "890 of 1,898 answers in m1 (46.9 % [44.6, 49.2]) and …" (counts alone under
    :data:`PARSER_DISAGREEMENT_MIN_ROWS` answers)."""
    parts = []
    for arm, bad, n, m in said:
        where = f" in {arm}" if several else ""
        if n < PARSER_DISAGREEMENT_MIN_ROWS:
            parts.append(f"{bad:,} of {n:,} answers{where} (too few for a rate)")
            continue
        lo, hi = m.get("ci_low"), m.get("ci_high")
        ci = f" [{lo * 100:.1f}, {(hi or 0) * 100:.1f}]" if lo is not None else ""
        parts.append(f"{bad:,} of {n:,} answers{where} ({(m['value'] or 0) * 100:.1f} %{ci})")
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)


def _audit_findings(report: Report) -> list[Finding]:
    audit = report.get("audit") or {}
    if not audit or audit.get("audited"):
        return []
    st = report.get("study") or {}
    done, need = audit.get("uniform_reviewed_rows", 0), audit.get("required_rows", MIN_AUDIT_ROWS)
    if st.get("unaudited"):
        text = ("The study was graded with --no-judge: verdicts come from the strict pre-filter alone, and rows "
                "it could not resolve are ungraded.")  # fmt: skip
    elif not audit.get("reviews"):
        text = (f"No row has been reviewed yet, so the judge is unaudited: review a uniform spot check of "
                f"{need} rows (`mcqaudit reviews queue --strategy uniform`).")  # fmt: skip
    else:
        text = (f"The judge is unaudited: {done} of the {need} rows of a uniform spot check it needs are reviewed "
                f"({audit['reviews']} reviews in all, of {report.get('rows')} rows); agreement figures are "
                "preliminary.")  # fmt: skip
    return [_finding("audit", text, None, None, st.get("items"), report.get("rows"), reviewed_rows=done,
                     required_rows=need)]  # fmt: skip


# --- shared content -----------------------------------------------------------------------------------------
@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    bullets: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


def ci_words(boot: BootstrapFacts) -> str:
    """How the report's CIs were computed, in words (``bootstrap.method``; reports before it had the key
    were all bootstrapped)."""
    level = f"{int(boot['ci_level'] * 100)} %"
    method = boot.get("method", "bootstrap" if boot.get("resamples") else "none")
    shares = "; a share's interval is the Wilson interval on the effective size its replicates carry"
    if method == "normal":
        return (
            f"{level}, {boot['resamples']} replicates of the item sums drawn from their normal approximation "
            f"(the item bootstrap's covariance; seed {boot['seed']}){shares}"
        )
    if method == "none":
        return "none (no resamples: point estimates only)"
    return f"{level}, {boot['resamples']} bootstrap resamples of items (seed {boot['seed']}){shares}"


def banners(report: Report) -> list[str]:
    out = []
    if report["study"].get("unaudited"):
        out.append(UNAUDITED_BANNER)
    if report["study"].get("standin_judge"):
        out.append(STANDIN_BANNER)
    return out


def sections(report: Report) -> list[Section]:
    """The report's content for people, in reading order: findings, then flags grouped by name, then tables
    (each section, or the sections of one kind, written by its own function; one that has nothing to show is
    left out)."""
    fams = report_families(report)
    return [
        _findings_section(report),
        _flags_section(report),
        _study_section(report),
        _headline_section(report),
        _accuracy_section(report, fams),
        *_delta_sections(report, fams),
        *_group_sections(report),
        *_pairwise_sections(report),
        *_parser_delta_sections(report),
        *_disagreement_sections(report),
        *_position_sections(report, fams),
        _consistency_section(report),
        *_panel_sections(report),
        *_reviewer_sections(report),
        *_agreement_sections(report),
        *_logprob_sections(report),
        *_fingerprint_sections(report),
        *_notes_sections(report),
    ]


def _findings_section(report: Report) -> Section:
    fnd = report.get("findings")
    if fnd is None:
        fnd = findings(report)
    return Section("Findings", bullets=[f["text"] for f in fnd] or ["Nothing to report."])


def _flags_section(report: Report) -> Section:
    """The flags grouped by name: one table, each name once with its count, each flag with its n."""
    flags = report["flags"]
    groups: dict[str, list[Flag]] = {}
    for f in flags:
        groups.setdefault(f["name"], []).append(f)
    rows = []
    for name, fs in groups.items():
        for k, f in enumerate(fs):
            rows.append([f"{name} ({len(fs)})" if k == 0 else "", f.get("arm") or "", f["evidence"],
                         str(f.get("items", "")), str(f.get("rows", ""))])  # fmt: skip
    return Section(
        "Flags",
        paragraphs=[] if flags else ["No diagnostic fired."],
        tables=[Table(["flag", "arm", "evidence", "items", "rows"], rows)] if rows else [],
    )


def _study_section(report: Report) -> Section:
    st, ctrl = report["study"], report["control_arm"]
    return Section(
        "Study",
        paragraphs=[
            f"{report['rows']} rows, {st.get('items')} items, {len(report['arms'])} arms, "
            f"{len(st.get('orientations', []))} orientations. "
            f"Control arm: {ctrl or 'none'} ({CONTROL_WORDS.get(report.get('control_source', ''), 'none')}). "
            f"Verdicts: {st.get('verdicts')} "
            + ("(latest review, else judge, else pre-filter, else rule)." if st.get("verdicts") == "final"
               else "(judge, else pre-filter, else rule; reviews ignored).")
            + f" Confidence intervals: {ci_words(report['bootstrap'])}; rates are percentages.",
        ],
    )  # fmt: skip


TRUNCATED_WORDS = (
    "Truncated rate: rows cut by the token limit (finish_reason length, or a reasoning block never closed), of "
    "all rows; a truncated row with no answer is OTHER by rule. Truncated OTHER: how many of the arm's OTHER "
    "rows were cut so."
)


def _headline_section(report: Report) -> Section:
    m, ctrl = report["metrics"], report["control_arm"]
    cut = any_truncated(report)
    header = ["arm", "rows", "accuracy", "answered accuracy", "OTHER rate", "ungraded rate", "circular accuracy",
              "first-position rate", "RStd (pp)"]  # fmt: skip
    if cut:
        header[5:5] = ["truncated rate", "truncated OTHER"]
    rows = []
    for a in report["arms"]:
        row = [
            a + (" (control)" if a == ctrl else ""),
            str(m[a]["rows"]),
            pct(m[a]["accuracy"]),
            pct(m[a]["answered_accuracy"]),
            pct(m[a]["other_rate"]),
            pct(m[a]["ungraded_rate"]),
            with_chance(m[a]["circular_accuracy"]),
            with_chance(m[a]["first_position_rate"]),
            num(m[a]["rstd"], 1),
        ]
        if cut:
            row[5:5] = [_with_n(m[a].get("truncated_rate")), _of(m[a], "truncated_other_rows", "other_rows")]
        rows.append(row)
    return Section("Headline", paragraphs=[TRUNCATED_WORDS] if cut else [], tables=[Table(header, rows)])


def _with_n(m: Metric | None) -> str:
    return f"{pct(m)} (n={m['n']})" if m else "n/a"


def _of(e: Mapping[str, Any], part: str, whole: str) -> str:
    """``12 of 40`` from two counts of a metrics entry."""
    return f"{int(e.get(part) or 0):,} of {int(e.get(whole) or 0):,}"


def _accuracy_section(report: Report, fams: Sequence[FamilyView]) -> Section:
    """Accuracy per orientation, one table per item family."""
    tables = []
    for fam, fo, items in fams:
        rows = []
        for a in report["arms"]:
            fe = family_entry(report["metrics"][a], fam)
            by = fe.get("accuracy_by_orientation") or {}
            rows.append([a, pct(fe.get("accuracy")), *[pct(by.get(o)) for o in fo]])
        tables.append(Table([_family_head(fam, items), "all orientations", *fo], rows))
    return Section("Accuracy by orientation", paragraphs=[_FAMILY_WORDS] if len(fams) > 1 else [], tables=tables)


def _delta_sections(report: Report, fams: Sequence[FamilyView]) -> list[Section]:
    """Δ vs the control, with its MDE, then per orientation within each item family."""
    deltas = report["delta_accuracy"]
    cut = any_truncated(report)
    blank = [""] * (6 if cut else 4)
    rows = []
    for a, d in deltas.items():
        if d is None:
            rows.append([a, "not compared (see notes)", *blank])
            continue
        ov = d["overall"]
        if ov is None:
            rows.append([a, f"not enough items (n={d.get('items', 0)})", *blank])
            continue
        mde = pct({"value": ov["mde"]}, ci=False) if ov and ov.get("mde") is not None else "n/a"
        rows.append([a, pct(ov, sign=True), mde, pct(d["other_rate"], sign=True),
                     pct(d["answered_accuracy"], sign=True), f"{d.get('items')} ({d.get('pairing')})"])  # fmt: skip
        if cut:
            rows[-1][4:4] = [
                pct(d.get("truncated_rate"), sign=True),
                pct(d.get("other_rate_untruncated"), sign=True),
            ]
    if not rows:
        return []
    ftables = []
    for fam, fo, items in fams:
        frows = []
        for a, d in deltas.items():
            if d is None or d["overall"] is None:
                continue
            fd = family_entry(d, fam)
            frows.append([a, pct(fd.get("overall"), sign=True),
                          *[pct((fd.get("by_orientation") or {}).get(o), sign=True) for o in fo],
                          str(fd.get("items", ""))])  # fmt: skip
        if frows:
            ftables.append(Table([_family_head(fam, items), "Δ all orientations", *fo, "items"], frows))
    words = (
        f"Treated − control, {pairing_words(deltas)}, in percentage points, with the "
        "minimum detectable effect (MDE ≈ 2.8 × SE: a null is informative only when the MDE is small); "
        f"a Δ on fewer than {MIN_ITEMS} items is not computed. "
        "Per orientation, the Δ is shown within each item family (the items sharing one "
        "orientation set): orientations are compared only within a family."
    ) + (
        " Δ truncated rate: rows cut by the token limit; the Δ OTHER rate with the truncated rows left out is "
        "what remains of an OTHER change once the token limit's rows are taken out."
        if cut
        else ""
    )
    header = ["arm", "Δaccuracy", "MDE", "Δ OTHER rate", "Δ answered accuracy", "items"]
    if cut:
        header[4:4] = ["Δ truncated rate", "Δ OTHER rate, truncated rows left out"]
    return [
        Section(
            f"Δ vs control ({report['control_arm']})",
            paragraphs=[words],
            tables=[Table(header, rows), *ftables],
        )
    ]


def _group_words(report: Report, key: str) -> str:
    facts = report["group_by"][key]
    ctrl = report["control_arm"]
    missing = (
        f"; rows whose metadata lacks the key are the group {facts['missing']}" if facts["missing"] else ""
    )
    return (
        f"Per value of {facts['path']} ({plural(facts['groups'], 'group')}{missing}), per arm: accuracy "
        "(item-weighted) and OTHER rate (of graded rows)"
        + (", truncated rate (of all rows)" if any_truncated(report) else "")
        + " with their CIs, and "
        f"treated − control ({ctrl}) within the group in percentage points, with its n (the group's items both "
        f"arms answered). A group under {facts['min_items']} items is marked small: shown with its n, with no Δ "
        "and no finding. Each group's CIs resample its own items (the same draw for every arm) and are not "
        "corrected for the number of groups compared."
    )


def _group_delta_cell(e: Mapping[str, Any], key: str) -> str:
    m = e.get(key)
    if m is None:
        return "n/a (small)" if e.get("small") else "n/a (see notes)"
    return f"{pct(m, sign=True)} (n={m.get('n')}{', unpaired' if m.get('pairing') == 'unpaired' else ''})"


def _group_sections(report: Report) -> list[Section]:
    """``by_group`` (``report --by metadata.KEY``): one table per key, one row per (group, arm)."""
    out = []
    cut = any_truncated(report)
    ctrl = report["control_arm"]
    for key, groups in (report.get("by_group") or {}).items():
        header = [key, "items", "arm", "rows", "accuracy", "OTHER rate", "Δaccuracy", "Δ OTHER rate"]
        if cut:
            header[6:6] = ["truncated rate"]
            header.append("Δ truncated rate")
        rows = []
        for value, entry in groups.items():
            for k, (arm, e) in enumerate(entry.items()):
                treated = arm != ctrl
                row = [
                    group_label(report, key, value) if k == 0 else "",
                    str(report["group_by"][key]["items"].get(value, "")) if k == 0 else "",
                    arm + (" (control)" if arm == ctrl else ""),
                    str(e["rows"]),
                    _with_n(e["accuracy"]),
                    pct(e["other_rate"]),
                    _group_delta_cell(e, "delta_accuracy") if treated else "",
                    _group_delta_cell(e, "delta_other_rate") if treated else "",
                ]
                if cut:
                    row[6:6] = [pct(e["truncated_rate"])]
                    row.append(_group_delta_cell(e, "delta_truncated_rate") if treated else "")
                rows.append(row)
        out.append(Section(f"By {key}", paragraphs=[_group_words(report, key)], tables=[Table(header, rows)]))
    return out


def _pairwise_sections(report: Report) -> list[Section]:
    arms, pw = report["arms"], report.get("pairwise_delta") or {}
    if not pw:
        return []
    return [Section(
        "Pairwise Δaccuracy",
        paragraphs=[f"Row arm − column arm, in percentage points, {_pairwise_words(arms, pw)}; n/a: too "
                    "few items or not comparable (see notes)."],
        tables=[Table(["", *arms], [[a, *["" if a == b else _pw_cell(pw.get(a, {}).get(b)) for b in arms]]
                                     for a in arms])],
    )]  # fmt: skip


def _parser_delta_sections(report: Report) -> list[Section]:
    dp = report.get("delta_accuracy_by_parser") or {}
    if not dp:
        return []
    parsers = list(next(iter(dp.values())).keys())
    rows = []
    for a, by in dp.items():
        d = report["delta_accuracy"].get(a)
        rows.append([a, pct(d["overall"], sign=True) if d else "n/a", *[pct(by.get(p), sign=True) for p in parsers]])
    return [Section(
        "Δaccuracy by parser",
        paragraphs=["The Δ each parser's letters would have reported (letter = gold → CORRECT, other letter → "
                    "INCORRECT, no letter → OTHER), on the rows the verdicts grade."],
        tables=[Table(["arm", "verdicts", *parsers], rows)],
    )]  # fmt: skip


def _disagreement_sections(report: Report) -> list[Section]:
    arms, m = report["arms"], report["metrics"]
    parsers: list[str] = []
    for a in arms:
        for p in m[a].get("parser_disagreement") or {}:
            if p not in parsers:
                parsers.append(p)
    if not parsers:
        return []
    rows = []
    for p in parsers:
        cells = []
        for a in arms:
            e = (m[a].get("parser_disagreement") or {}).get(p)
            rate = e.get("rate") if e else None
            cells.append(f"{pct(rate)} (n={rate['n']})" if rate else "n/a")
        rows.append([p, *cells])
    return [Section(
        "Parser disagreement with the verdicts",
        paragraphs=["Share of rows where the parser's verdict differs from the verdict (strict: on the rows it "
                    "resolved). Confusion matrices are in the JSON and the HTML report."],
        tables=[Table(["parser", *arms], rows)],
    )]  # fmt: skip


def _consistency_section(report: Report) -> Section:
    m = report["metrics"]
    rows = [[a, pct(m[a]["consistency"]["binary"]), pct(m[a]["consistency"]["nway"])] for a in report["arms"]]
    return Section("Consistency", tables=[Table(["arm", "binary (swapped pairs)", "n-way (plurality share)"], rows)])


def _share_n(m: Metric | None) -> str:
    return f"{pct(m)} (n={m['n']})" if m else "n/a"


def _num_n(m: Metric | None) -> str:
    return f"{num(m)} (n={m['n']})" if m else "n/a"


def _delta_n(d: ArmDelta | None) -> str:
    """A Δ cell with its n: ``+45.5 [+29.5, +59.1] (n=44)``, or why there is none."""
    if d is None:
        return "not compared"
    ov = d.get("overall")
    return f"{pct(ov, sign=True)} (n={d.get('items', 0)})" if ov else f"n/a (n={d.get('items', 0)})"


PANEL_WORDS = (
    "Each panel judge (`mcqaudit grade --panel`) graded the rows the primary judge graded; its verdicts sit "
    "beside the final ones, never in them. Error rate: failed requests of its rows; OTHER rate: of the rows it "
    "graded; agreement and Cohen's κ with the primary: on the rows both graded. Δ under a judge: the rows it "
    "graded take its verdict, rows the pre-filter or the rule resolved (and human reviews) keep theirs, rows it "
    "has no verdict for are ungraded under it. Krippendorff's α (nominal, CORRECT / INCORRECT / OTHER) is over "
    "every judge, the primary included, on the rows two or more of them graded."
)


def _panel_sections(report: Report) -> list[Section]:
    """The judge panel: each judge's rates, its agreement with the primary and the Δ under it; or one line
    saying the study has one judge only."""
    jp = report.get("judge_panel")
    head = panel_lines(report)[:1]
    if not jp:
        return [Section("Judge panel", paragraphs=head)]
    deltas = report.get("delta_accuracy") or {}
    arms = list(deltas)
    graded = sum(int(c.get("rows", 0)) for c in (report.get("judge_fingerprints") or {}).values())
    rows = [[f"primary: {primary_label(jp)}", str(graded), "", "", "", "",
             *[_delta_n(d) for d in deltas.values()]]]  # fmt: skip
    for fp, e in jp["judges"].items():
        by = jp["delta_by_judge"].get(fp) or {}
        rows.append([judge_label(jp, fp), str(e["rows"]), _share_n(e["error_rate"]), _share_n(e["other_rate"]),
                     _share_n(e["agreement_with_primary"]), _num_n(e["kappa_with_primary"]),
                     *[_delta_n(by.get(a)) for a in arms]])  # fmt: skip
    header = ["judge", "rows", "error rate", "OTHER rate", "agreement with primary", "Cohen's κ",
              *[f"Δaccuracy {a} (pp, n items)" for a in arms]]  # fmt: skip
    return [Section("Judge panel", paragraphs=[*head, PANEL_WORDS], tables=[Table(header, rows)])]


def _reviewer_sections(report: Report) -> list[Section]:
    ra = report.get("reviewer_agreement")
    if not ra:
        return []
    rows = [[" and ".join(pair.split("|", 1)), str(e["rows"]), _share_n(e["agreement"]), _num_n(e["kappa"])]
            for pair, e in ra["pairs"].items()]  # fmt: skip
    words = (
        "On the rows two or more people reviewed, each person's review in force (their latest not retracted); "
        "every pair of people on a row is one comparison, κ over them with each pair's verdicts in name order. "
        "A row whose reviewers disagree is settled by its latest review, which the final verdicts use."
    )
    return [Section("Reviewer agreement", paragraphs=[reviewer_words(ra), words],
                    tables=[Table(["reviewers", "rows", "agreement", "Cohen's κ"], rows)])]  # fmt: skip


def _agreement_sections(report: Report) -> list[Section]:
    """Judge vs human, all arms pooled then per arm (:func:`agreement_cells`)."""
    groups = agreement_groups(report)
    if not groups:
        return []
    rows = []
    for name, ag in groups:
        shown = agreement_cells(ag)
        rows.append([
            name + (" (preliminary)" if ag.get("preliminary") else ""),
            str(agreed["n"]) if (agreed := ag.get("agreement")) else "0",
            shown["agreement"],
            shown["kappa"],
            *[shown[f"precision {v}"] for v in ("CORRECT", "INCORRECT", "OTHER")],
            shown["corrected_accuracy"],
        ])  # fmt: skip
    sample = ja["sample"] if (ja := report.get("judge_agreement")) else "all"
    words = (
        "Automated verdict vs the reviewer's, on "
        + ("the uniform spot check." if sample == "uniform"
           else "all reviewed rows (not a uniform sample: agreement may be biased).")
        + (f" Preliminary: fewer than {MIN_AUDIT_ROWS} reviewed rows, so these figures, the "
           "judge-corrected accuracy included, are no finding yet."
           if any(g.get("preliminary") for _, g in groups) else "")
        + f" Each share carries its n (rows); on fewer than {MIN_CI_ROWS} rows only the counts are "
        "shown, with no CI."
        + (f" Each row's latest review is the one compared; reviewers: {_disagreed_words(ja)}."
           if ja and "disagreed_rows" in ja else "")
    )  # fmt: skip
    header = ["", "reviewed rows", "agreement", "Cohen's κ", "precision CORRECT", "precision INCORRECT",
              "precision OTHER", "judge-corrected accuracy"]  # fmt: skip
    return [Section("Judge vs human", paragraphs=[words], tables=[Table(header, rows)])]


def _logprob_sections(report: Report) -> list[Section]:
    m = report["metrics"]
    rows = []
    for a in report["arms"]:
        lp = m[a].get("logprob_crosscheck")
        if not lp:
            continue
        mm = lp.get("mismatch_rate")
        rows.append([
            a,
            f"{pct(mm)} (n={mm['n']})" if mm else "n/a",
            str(by_text["n"]) if (by_text := lp.get("accuracy_text")) else "0",
            pct(lp["accuracy_logprob"]),
            pct(lp["accuracy_text"]),
            pct(lp["difference"], sign=True),
        ])  # fmt: skip
    if not rows:
        return []
    header = ["arm", "row-level mismatch", "rows", "accuracy by log-prob", "accuracy by text", "difference"]
    return [Section("Log-prob cross-check", paragraphs=[LOGPROB_WORDS], tables=[Table(header, rows)])]


def _fingerprint_sections(report: Report) -> list[Section]:
    fps = report.get("judge_fingerprints") or {}
    if not fps:
        return []
    rows = [
        [fp, str(c.get("model")), str(c.get("shape")), str(c.get("temperature")), "yes" if c.get("standin") else "no",
         ", ".join(c.get("arms", [])), str(c.get("rows"))]
        for fp, c in fps.items()
    ]  # fmt: skip
    header = ["fingerprint", "model", "shape", "temperature", "stand-in", "arms", "rows"]
    return [Section("Judge configurations", tables=[Table(header, rows)])]


def _notes_sections(report: Report) -> list[Section]:
    notes = report.get("notes") or {}
    if not notes:
        return []
    return [Section("Notes", bullets=[f"{note_label(k, report)}: {v}" for k, v in notes.items()])]


def _position_sections(report: Report, fams: Sequence[FamilyView]) -> list[Section]:
    """Position picks (against chance; or, where gold letters are unbalanced, the shares alone, confounded
    by where the gold sits) and, with several item families, RStd and recall by gold letter per family."""
    arms, m = report["arms"], report["metrics"]
    out: list[Section] = []
    readable = any(m[a].get("position_pick_rate") for a in arms)

    def picks(a: str) -> dict[str, Metric | None]:
        return (m[a].get("position_pick_rate") if readable else m[a].get("pick_share")) or {}

    letters: list[str] = []
    for a in arms:
        for x in picks(a):
            if x not in letters:
                letters.append(x)
    if letters:
        rows = [[a, *[(with_chance if readable else pct)(picks(a).get(x)) for x in letters]] for a in arms]
        base = {m[a].get("position_baseline") for a in arms}
        words = (
            "Share of non-OTHER picks at each displayed position; "
            + ("chance is 1/n (balanced design)." if base == {"uniform"}
               else "the design is unbalanced, so the comparison is the gold-letter share, not 1/n.")
            if readable else
            "Share of non-OTHER picks at each displayed position: what the model picked. Confounded by the gold "
            "imbalance (design_imbalance): the gold letters are not balanced over the displayed positions, so "
            "a position preference and the answers cannot be told apart, and no chance level is given."
        )  # fmt: skip
        out.append(Section("Position picks", paragraphs=[words], tables=[Table(["arm", *letters], rows)]))
    if len(fams) > 1:
        top = max(len(fo[0]) for _, fo, _ in fams if fo)
        rows = []
        for fam, _, items in fams:
            for a in arms:
                fe = family_entry(m[a], fam)  # fam is a label: several families
                rec = fe.get("recall_by_gold_letter") or {}
                rows.append([_family_head(fam, items), a, num(fe.get("rstd"), 1),
                             *[pct(rec[x]) if x in rec else "" for x in LETTERS[:top]]])  # fmt: skip
        out.append(Section(
            "RStd by item family",
            paragraphs=["RStd (pp) and recall by gold letter (%) within each item family; the headline RStd is "
                        "their mean weighted by items. Pooled, a gold letter that only some families have (C, D "
                        "among 4-option items) would carry those items' difficulty."],
            tables=[Table(["family", "arm", "RStd (pp)", *[f"recall {x}" for x in LETTERS[:top]]], rows)],
        ))  # fmt: skip
    return out


_FAMILY_WORDS = (
    "Items fall into families by their orientation set (each family's items are shown in the same "
    "orientations); orientations are compared, and RStd computed, only within a family."
)


def _family_head(fam: str | None, items: int | None) -> str:
    return "arm" if fam is None else f"{fam} ({items} items)"


def _pairwise_words(arms: Sequence[str], pw: Mapping[str, Mapping[str, Metric | None]]) -> str:
    """:func:`pairing_words` over every pair of arms (each pair once, in arm order)."""
    pairs = {f"{a} − {b}": (pw.get(a) or {}).get(b) for k, a in enumerate(arms) for b in arms[k + 1 :]}
    return pairing_words(pairs)


LOGPROB_WORDS = (
    "Row-level mismatch: the share of rows whose argmax log-prob letter is not the letter the text answer "
    "picks (n: rows with a known text letter; an OTHER answer always mismatches; a tie in the argmax counts "
    "as no pick, so it mismatches too). Then accuracy by argmax log-prob and by text on the rows that carry "
    "option_logprobs."
)


def agreement_cells(ag: JudgeAgreement) -> dict[str, str]:
    """One ``judge_agreement`` entry as table cells: each share in percent with its CI and n, or — on fewer
    than :data:`MIN_CI_ROWS` rows — the counts alone ("5 of 6 rows"), never a percentage from 3 rows."""
    conf = ag.get("confusion") or {}

    def share(x: Metric | None, hits: int) -> str:
        if x is None or x.get("value") is None:
            return "n/a"
        n = int(x["n"])
        return f"{hits} of {plural(n, 'row')}" if n < MIN_CI_ROWS else f"{pct(x)} n={n}"

    cells = {"agreement": share(ag.get("agreement"), sum(int(conf.get(v, {}).get(v, 0)) for v in conf))}
    for v, x in (ag.get("precision") or {}).items():
        cells[f"precision {v}"] = share(x, int(conf.get(v, {}).get(v, 0)))
    kappa, corr = ag.get("kappa"), ag.get("corrected_accuracy")
    cells["kappa"] = cells["corrected_accuracy"] = "n/a"
    if kappa is not None and kappa.get("value") is not None:
        k_n = int(kappa["n"])
        cells["kappa"] = f"n/a ({plural(k_n, 'row')})" if k_n < MIN_CI_ROWS else f"{num(kappa)} n={k_n}"
    if corr is not None and corr.get("value") is not None:
        rev = int(corr.get("reviewed_rows", ag.get("reviewed_rows", 0)))
        cells["corrected_accuracy"] = (
            f"n/a ({plural(rev, 'reviewed row')})"
            if rev < MIN_CI_ROWS
            else f"{pct(corr)} n={corr['n']} items, {rev} reviewed rows"
        )
    return cells


def _pw_cell(m: Metric | None) -> str:
    if m is None:
        return "n/a"
    return f"{pct(m, sign=True)} (n={m.get('items')}{', unpaired' if m.get('pairing') == 'unpaired' else ''})"


_NOTE_WORDS = {
    "accuracy": "accuracy",
    "answered_accuracy": "answered accuracy",
    "other_rate": "OTHER rate",
    "ungraded_rate": "ungraded rate",
    "accuracy_by_orientation": "accuracy by orientation",
    "circular_accuracy": "circular accuracy",
    "position_pick_rate": "position pick rates",
    "first_position_rate": "first-position rate",
    "rstd": "RStd",
    "consistency": "consistency",
    "binary": "binary",
    "nway": "n-way",
    "parser_disagreement": "parser disagreement",
    "judge_agreement": "judge agreement",
    "corrected_accuracy": "judge-corrected accuracy",
    "precision": "precision",
    "logprob_crosscheck": "log-prob cross-check",
    "control_arm": "Control arm",
    "overall": "",
    "by_orientation": "in orientation",
    "by_family": "within",
    "recall_by_gold_letter": "recall by gold letter",
    "families": "item families",
}


def _split_path(path: str, arms: Sequence[str]) -> list[str]:
    """A note's dotted path cut into its keys, an arm name whole even when it has dots in it
    (``metrics.m-7b-0.2.rstd`` → ``metrics``, ``m-7b-0.2``, ``rstd``): where an arm can stand, the longest
    arm name that the path continues with is one key."""
    head, _, tail = path.partition(".")
    out = [head]
    slots = {"metrics": 1, "delta_accuracy": 1, "delta_accuracy_by_parser": 1, "pairwise_delta": 2}.get(
        head, 0
    )
    by_length = sorted(arms, key=len, reverse=True)
    while tail:
        arm = next((a for a in by_length if slots and (tail == a or tail.startswith(a + "."))), None)
        key = arm if arm is not None else tail.partition(".")[0]
        out.append(key)
        tail = tail[len(key) + 1 :]
        slots = max(slots - 1, 0)
    return out


def _take(tail: str, names: Sequence[str]) -> tuple[str | None, str]:
    """The longest of ``names`` that ``tail`` is or continues with (``name.``…), and what follows it."""
    for n in sorted(names, key=len, reverse=True):
        if tail == n or tail.startswith(n + "."):
            return n, tail[len(n) + 1 :]
    return None, tail


def _group_note_label(path: str, report: Report) -> str | None:
    """A ``by_group.KEY[.VALUE.ARM.metric]`` note in words (keys, values and arms whole, dots and all)."""
    groups = report.get("by_group") or {}
    key, rest = _take(path[len("by_group.") :], list(groups))
    if key is None:
        return None
    if not rest:
        return f"By {key}"
    value, rest = _take(rest, list(groups[key]))
    if value is None:
        return f"By {key}, {_NOTE_WORDS.get(rest, rest.replace('_', ' '))}"
    arm, rest = _take(rest, [str(a) for a in report.get("arms") or []])
    what = "Δaccuracy" if rest == "delta_accuracy" else _NOTE_WORDS.get(rest, rest.replace("_", " "))
    return f"{what} {arm} vs {report.get('control_arm')}, {key} {value}"


def note_label(path: str, report: Report) -> str:
    """A note's dotted JSON path in words: ``metrics.steered.rstd`` → ``RStd (steered)``; arm names are
    shown whole, dots and all."""
    if path.startswith("by_group.") and (said := _group_note_label(path, report)) is not None:
        return said
    parts = _split_path(path, [str(a) for a in report.get("arms") or []])
    ctrl = report.get("control_arm")
    head, rest = parts[0], parts[1:]

    def words(xs: Sequence[str]) -> str:
        return " ".join(w for w in (_NOTE_WORDS.get(x, x.replace("_", " ")) for x in xs) if w)

    if head == "metrics" and len(rest) >= 2:
        s = words(rest[1:])
        return f"{s[:1].upper()}{s[1:]} ({rest[0]})"
    if head == "delta_accuracy" and rest:
        tail = words(rest[1:])
        return f"Δaccuracy {rest[0]} vs {ctrl}" + (f", {tail}" if tail else "")
    if head == "delta_accuracy_by_parser" and len(rest) >= 2:
        return f"Δaccuracy {rest[0]} vs {ctrl} by the {rest[1]} parser"
    if head == "pairwise_delta" and len(rest) >= 2:
        return f"Δaccuracy {rest[0]} vs {rest[1]}"
    if head == "judge_agreement":
        return "Judge agreement (all arms)" + (f", {words(rest)}" if rest else "")
    if head == "delta_accuracy":
        return "Δaccuracy"
    s = words(parts)
    return s[:1].upper() + s[1:]


# --- Markdown ---------------------------------------------------------------------------------------------
def names_in(report: Report) -> list[str]:
    """The user-supplied names a report's sentences quote (arms, judge models): their backticks are text
    (:func:`mcqaudit.formatting.text_runs`)."""
    models = [
        str(c.get("model")) for c in (report.get("judge_fingerprints") or {}).values() if c.get("model")
    ]
    return [str(a) for a in report.get("arms") or []] + models


def _md_cell(s: str, names: Sequence[str]) -> str:
    return md_rich(" ".join(s.split()), names, line_start=False, end=" ")


def _md_table(t: Table, names: Sequence[str]) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(h, names) for h in t.header) + " |", "|" + "---|" * len(t.header)]
    lines += ["| " + " | ".join(_md_cell(c, names) for c in row) + " |" for row in t.rows]
    return lines


def to_markdown(report: Report) -> str:
    """The report as GitHub-flavoured Markdown: banners, flags with their evidence first, then tables.
    Every text is escaped (:func:`mcqaudit.formatting.md_text`): a name's Markdown or HTML stays text."""
    names = names_in(report)
    lines = ["# mcqaudit report", ""]
    for b in banners(report):
        lines += [f"> **Warning:** {md_text(b, line_start=False, after=chr(10))}", ""]
    for sec in sections(report):
        lines += [f"## {md_text(' '.join(sec.title.split()), after=chr(10))}", ""]
        for p in sec.paragraphs:
            lines += [md_rich(p, names, end="\n"), ""]
        if sec.bullets:
            lines += [f"- {md_rich(' '.join(b.split()), names, end=chr(10))}" for b in sec.bullets] + [""]
        for t in sec.tables:
            lines += [*_md_table(t, names), ""]
    return "\n".join(lines).rstrip() + "\n"


# --- HTML -------------------------------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;
padding:0 1rem;color:#1f2933;line-height:1.45}
h1{font-size:1.7rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #d9e2ec;padding-bottom:.2rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.9rem}
th,td{border:1px solid #d9e2ec;padding:.3rem .55rem;text-align:left;vertical-align:top}
th{background:#f0f4f8}.banner{background:#fff3cd;border:1px solid #e0b252;padding:.7rem 1rem;border-radius:4px;
margin:.6rem 0;font-weight:600}.findings li{margin:.35rem 0;font-size:1.02rem}code{background:#f0f4f8;padding:0 .2rem}
.fig{margin:1rem 0}
"""


def _html_table(t: Table, names: Sequence[str]) -> str:
    head = "".join(f"<th>{html_text(h)}</th>" for h in t.header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html_rich(c, names)}</td>" for c in row) + "</tr>" for row in t.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def to_html(report: Report, figures: Sequence[tuple[str, Any]] | None = None) -> str:
    """One self-contained HTML page with the tables and the plots, drawn as inline SVG: no script and no
    external reference, so it works offline and stays small (plotly.js alone would be about 4.8 MB)."""
    from mcqaudit.plots import report_figures
    from mcqaudit.svgplot import figure_svg

    figs = list(figures) if figures is not None else report_figures(report)
    names = names_in(report)
    parts = ["<h1>mcqaudit report</h1>"]
    parts += [f'<div class="banner">{html_text(b)}</div>' for b in banners(report)]
    for sec in sections(report):
        parts.append(f"<h2>{html_text(sec.title)}</h2>")
        parts += [f"<p>{html_rich(p, names)}</p>" for p in sec.paragraphs]
        if sec.bullets:
            cls = ' class="findings"' if sec.title == "Findings" else ""
            parts.append(
                f"<ul{cls}>" + "".join(f"<li>{html_rich(b, names)}</li>" for b in sec.bullets) + "</ul>"
            )
        parts += [_html_table(t, names) for t in sec.tables]
    if figs:
        parts.append("<h2>Plots</h2>")
        for k, (title, fig) in enumerate(figs):
            parts.append(
                f'<div class="fig" id="fig{k}" aria-label="{html_text(title)}">{figure_svg(fig)}</div>'
            )
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>mcqaudit report</title><style>{_CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def render(report: Report, fmt: str) -> str:
    """The report in one of :data:`FORMATS`."""
    import json

    if fmt == "json":
        return json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    if fmt == "md":
        return to_markdown(report)
    if fmt == "html":
        return to_html(report)
    raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
