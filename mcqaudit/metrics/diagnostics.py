"""Diagnostics: the named flags of docs/design.md §7, each with its evidence and its n, most important first. Pure.

A flag read off an estimate fires only on at least :data:`MIN_ITEMS` items (a Δ with fewer is null and
drives none); the flags in :data:`FACT_FLAGS` state facts about the study and fire at any size. The flags in
:data:`CI_FLAGS` are read off bootstrap CIs, so a computation without resamples cannot raise them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from mcqaudit.formatting import fmt_metric, fmt_value
from mcqaudit.metrics.rates import clustered_rate
from mcqaudit.metrics.results import ArmDelta, Flag, Metric, Results
from mcqaudit.metrics.rules import (
    ARTIFACT_PARSERS_EXCLUDED,
    FLAG_ORDER,
    FLAG_PAGES,
    LOGPROB_MISMATCH_MAX,
    MIN_ITEMS,
    MISREAD_WORDS,
    PARSER_DISAGREEMENT_MAX,
    PARSER_DISAGREEMENT_MIN_ROWS,
)

if TYPE_CHECKING:
    from mcqaudit.metrics.inputs import StudyInfo


class RateSample(Protocol):
    """The cluster sums a parser flag reads (``metrics.parsers.RateSums``, or the plain lists of
    ``metrics.facts``): ``(k, 6)`` rows of ``k, Σn, Σd, Σd², Σd·n, Σn²``, all rows and the uniform spot check."""

    @property
    def pooled(self) -> Any: ...
    @property
    def spot(self) -> Any: ...  # None: no such row


class LetterRates(Protocol):
    @property
    def rates(self) -> RateSample: ...


class Tally(Protocol):
    """What :func:`parser_disagreement_flags` reads of a parser (``metrics.parsers.ParserTally``)."""

    @property
    def name(self) -> str: ...
    @property
    def letters(self) -> LetterRates | None: ...
    @property
    def disagreement(self) -> RateSample: ...


_UNREADABLE_WORDS = {
    "position_pick_rate": "position pick rates",
    "first_position_rate": "the first-position rate",
    "rstd": "RStd",
    "orientation_instability": "the orientation check (orientation_instability)",
}


def _excludes_zero(m: Mapping[str, Any] | None) -> bool:
    return bool(
        m and m["ci_low"] is not None and m["ci_high"] is not None and (m["ci_low"] > 0 or m["ci_high"] < 0)
    )


def _flag(name: str, arm: str | None, evidence: str, items: int, rows: int, **extra: Any) -> Flag:
    """A named flag with its evidence and its n: the items and rows the evidence rests on."""
    f: Flag = {
        "name": name,
        "arm": arm,
        "evidence": evidence,
        "items": int(items),
        "rows": int(rows),
        "page": FLAG_PAGES[name],
    }
    f.update(extra)  # type: ignore[typeddict-item]
    return f


def orientation_instability(delta: Mapping[str, Any]) -> str | None:
    """Evidence when the Δ is position bias rather than the intervention (docs/design.md §7), else None.

    ``delta`` is one item family's Δ (``{"overall", "by_orientation"}``, ``delta_accuracy.<arm>.by_family``):
    its orientations are shown to the same items, so their Δs differ by the order alone.

    Fires when two orientations have Δs of opposite sign whose CIs each exclude 0, or when the overall
    Δ's CI excludes 0 and some orientation's Δ CI lies entirely on the near side of half the overall Δ
    (that orientation shrinks the effect by more than half). Both need CIs that exclude a value, so noise
    around a null effect fires it only at about the tests' 5 % level.
    """
    by = {
        k: v
        for k, v in delta.get("by_orientation", {}).items()
        if v is not None and v.get("ci_low") is not None
    }
    pos = sorted((k for k, v in by.items() if v["ci_low"] > 0), key=lambda k: -by[k]["value"])
    neg = sorted((k for k, v in by.items() if v["ci_high"] < 0), key=lambda k: by[k]["value"])
    if pos and neg:
        a, b = pos[0], neg[0]
        return (
            f"Δ {fmt_metric(by[a], pct=True, sign=True)} in {a} but {fmt_metric(by[b], pct=True, sign=True)} in {b}: "
            "opposite signs, both CIs exclude 0"
        )
    ov = delta.get("overall")
    if ov is None or not _excludes_zero(ov) or len(by) < 2:
        return None
    d = ov["value"]
    half = d / 2
    shrunk = [k for k, v in by.items() if (v["ci_high"] < half if d > 0 else v["ci_low"] > half)]
    if not shrunk:
        return None
    k = min(shrunk, key=lambda x: abs(by[x]["value"]))
    parts = ", ".join(f"{lab} {fmt_value(v['value'], True, True)}" for lab, v in by.items())
    return (
        f"overall Δ {fmt_metric(ov, pct=True, sign=True)}, but in {k} Δ {fmt_metric(by[k], pct=True, sign=True)} "
        f"lies entirely below half of it ({parts})"
    )


def _orientation_flags(res: Results) -> list[Flag]:
    """``orientation_instability`` per treated arm and item family: orientations are compared only within a
    family (the items sharing one orientation set), never `AB` (2-option items) against `ABCD`."""
    out: list[Flag] = []
    for arm, d in res["delta_accuracy"].items():
        if d is None or d["overall"] is None:
            continue
        for fam, fd in d["by_family"].items():
            if fd["overall"] is not None and (ev := orientation_instability(fd)):
                out.append(
                    _flag(
                        "orientation_instability",
                        arm,
                        f"within {fam} ({fd['items']} items): {ev}",
                        fd["items"],
                        fd["rows"],
                        family=fam,
                    )  # fmt: skip
                )
    return out


def parser_artifact(judge: Mapping[str, Any] | None, parser: Mapping[str, Any] | None) -> bool:
    """A parser's Δ differs from the verdicts' Δ in sign (either one clearly non-zero) or lies outside its CI."""
    if judge is None or parser is None or judge.get("ci_low") is None:
        return False
    pj, pp = judge["value"], parser["value"]
    outside = pp < judge["ci_low"] or pp > judge["ci_high"]
    opposite = (pj > 0 > pp) or (pj < 0 < pp)
    return outside or (opposite and (_excludes_zero(judge) or _excludes_zero(parser)))


def _artifact_flags(res: Results, verdicts: str) -> list[Flag]:
    out: list[Flag] = []
    ctrl = res["control_arm"]
    for arm, dp in res["delta_accuracy_by_parser"].items():
        dj = res["delta_accuracy"].get(arm)
        if dj is None or dj["overall"] is None:
            continue
        for name, m in dp.items():
            if name in ARTIFACT_PARSERS_EXCLUDED or m is None or m["n"] < MIN_ITEMS:
                continue
            if parser_artifact(dj["overall"], m):
                out.append(
                    _flag(
                        "suspected_parser_artifact",
                        arm,
                        f"the {name} parser's letters give Δaccuracy {fmt_metric(m, pct=True, sign=True)} for "
                        f"{arm} vs {ctrl}; the {verdicts} verdicts give "
                        f"{fmt_metric(dj['overall'], pct=True, sign=True)} ({dj['items']} items, {dj['pairing']})",
                        min(m["n"], dj["items"]),
                        dj["rows"],
                        parser=name,
                    )
                )
    return out


def _judge_sensitive_flags(res: Results) -> list[Flag]:
    """``judge_sensitive`` per treated arm and panel judge whose Δ tells another story than the primary's
    (:func:`mcqaudit.metrics.panel.sensitive`: the sign, both CIs excluding 0, or beyond the primary's CI)."""
    jp = res.get("judge_panel")
    out: list[Flag] = []
    if not jp:
        return out
    from mcqaudit.metrics.panel import sensitive  # numpy: the report's path only
    from mcqaudit.reading import judge_label, primary_label

    ctrl = res["control_arm"]
    for fp, by_arm in jp["delta_by_judge"].items():
        for arm, d in by_arm.items():
            dp = res["delta_accuracy"].get(arm)
            if d is None or dp is None or not sensitive(dp["overall"], d["overall"]):
                continue
            out.append(
                _flag(
                    "judge_sensitive",
                    arm,
                    f"under judge {judge_label(jp, fp)} Δaccuracy {arm} vs {ctrl} is "
                    f"{fmt_metric(d['overall'], pct=True, sign=True)} ({d['items']} items, {d['rows']} rows); "
                    f"under the primary judge {primary_label(jp)} "
                    f"{fmt_metric(dp['overall'], pct=True, sign=True)} ({dp['items']} items, {dp['rows']} rows): "
                    "the finding depends on the judge chosen",
                    min(d["items"], dp["items"]),
                    d["rows"],
                    judge=fp,
                )
            )
    return out


def _other_rate_flag(arm: str, d: ArmDelta, res: Results) -> Flag | None:
    o = d["other_rate"]
    if o is None or o["ci_low"] is None or not o["ci_low"] > 0:
        return None
    ctrl = res["control_arm"]
    assert ctrl is not None  # a Δ exists only against a control
    mt, mc = res["metrics"][arm]["other_rate"], res["metrics"][ctrl]["other_rate"]
    return _flag(
        "other_rate_rise",
        arm,
        f"OTHER rate {fmt_value(mt and mt['value'], True)} vs {fmt_value(mc and mc['value'], True)} in {ctrl} "
        f"(Δ {fmt_metric(o, pct=True, sign=True)}); Δaccuracy "
        f"{fmt_metric(d['overall'], pct=True, sign=True)}, recomputed with OTHER excluded "
        f"(answered accuracy) Δ {fmt_metric(d['answered_accuracy'], pct=True, sign=True)}",
        d["items"],
        d["rows"],
    )


def _truncation_flag(arm: str, d: ArmDelta, res: Results) -> Flag | None:
    """The treated arm is cut by the token limit more often than the control (the Δ's CI lies above 0; a Δ
    exists only on at least MIN_ITEMS items)."""
    tr = d.get("truncated_rate")
    if tr is None or tr["ci_low"] is None or not tr["ci_low"] > 0:
        return None
    ctrl = res["control_arm"]
    assert ctrl is not None  # a Δ exists only against a control
    mt, mc = res["metrics"][arm], res["metrics"][ctrl]
    cut, other = mt["truncated_rows"], mt["truncated_other_rows"]
    return _flag(
        "truncation_rise",
        arm,
        f"truncated rate {fmt_value(_v(mt['truncated_rate']), True)} vs "
        f"{fmt_value(_v(mc['truncated_rate']), True)} in {ctrl} (Δ {fmt_metric(tr, pct=True, sign=True)}): "
        f"{cut} of {mt['rows']} rows of {arm} were cut by the token limit (finish_reason length, or a "
        f"reasoning block never closed), {other} of them OTHER; Δ OTHER rate with the truncated rows left out "
        f"{fmt_metric(d.get('other_rate_untruncated'), pct=True, sign=True)}",
        d["items"],
        tr.get("rows", d["rows"]),
    )


def _v(m: Metric | None) -> float | None:
    return m["value"] if m else None


def judge_config_flag(
    arms: Sequence[str],
    arm_fingerprints: Mapping[str, Mapping[str, int]],
    judge_configs: Mapping[str, Mapping[str, Any]],
    n_items: int,
    n_rows: int,
) -> Flag | None:
    """Arms graded under different judge fingerprints (``arm_fingerprints``: arm -> fingerprint -> rows)."""
    used = sorted({fp for fps in arm_fingerprints.values() for fp in fps})
    if len(used) <= 1:
        return None
    parts = []
    for fp in used:
        cfg = judge_configs.get(fp, {})
        arms_ = [a for a in arms if fp in arm_fingerprints.get(a, {})]
        parts.append(f"{fp[:12]} ({cfg.get('model', '?')}, {cfg.get('shape', '?')}): {', '.join(arms_)}")
    return _flag(
        "judge_config_mixed",
        None,
        "verdicts come from different judge configurations — "
        + "; ".join(parts)
        + ". Differences between arms graded under different fingerprints are not computed.",
        n_items,
        n_rows,
    )


def _flag_sample(sums: RateSample) -> tuple[str, Any] | None:
    """The rows a parser flag reads, and their sums (``(k, 6)``): the uniform spot check when it has enough
    rows, else every row; None when neither has."""
    if sums.spot is not None and sums.spot[0][1] >= PARSER_DISAGREEMENT_MIN_ROWS:
        return "the uniform spot check", sums.spot
    if sums.pooled[0][1] >= PARSER_DISAGREEMENT_MIN_ROWS:
        return "all graded rows", sums.pooled
    return None


def parser_disagreement_flags(tallies: Sequence[Tally]) -> list[Flag]:
    """A parser disagreeing with the verdicts on > 5 % of a ≥ 100-row sample: the uniform spot check
    when it has enough rows, else every graded row. Read on letters (``parser_letters.misread``) where
    that sample has enough rows with a known reference letter, else on verdicts."""
    out: list[Flag] = []
    for p in tallies:
        got = _flag_sample(p.letters.rates) if p.letters is not None else None
        level = "letter" if got is not None else "verdict"
        got = got or _flag_sample(p.disagreement)
        if got is None:
            continue
        src, sums = got
        m = clustered_rate(sums[0])
        if not (
            m and m["value"] is not None and m["value"] > PARSER_DISAGREEMENT_MAX and sums[0][0] >= MIN_ITEMS
        ):
            continue
        resolved = " it resolved" if p.name == "strict" else ""
        if level == "letter":
            split = ", ".join(
                f"{w} on {int(round(d))}"
                for w, d in zip(MISREAD_WORDS.values(), [r[2] for r in sums[1:]], strict=True)
            )
            evidence = (
                f"the {p.name} parser misreads the answer's letter on {fmt_metric(m, pct=True)} of {m['n']} "
                f"rows{resolved} whose letter is known ({src}): {split}"
            )
        else:
            evidence = (
                f"the {p.name} parser disagrees with the verdicts on {fmt_metric(m, pct=True)} of {m['n']} "
                f"rows{resolved} ({src})"
            )
        out.append(
            _flag("parser_disagreement", None, evidence, int(sums[0][0]), m["n"], parser=p.name, level=level)
        )
    return out


def logprob_flag(arm: str, lp: Mapping[str, Any] | None) -> Flag | None:
    """The argmax log-prob letter disagrees with the text's on more than 5 % of rows (the rate's CI low
    above 5 %), or the two accuracies differ by more than 5 pp."""
    if not (lp and lp["items"] >= MIN_ITEMS):
        return None
    mm: Metric | None = lp["mismatch_rate"]
    diff: Metric | None = lp["difference"]
    rows_off = bool(mm and mm["ci_low"] is not None and mm["ci_low"] > LOGPROB_MISMATCH_MAX)
    acc_off = bool(diff and diff["value"] is not None and abs(diff["value"]) > LOGPROB_MISMATCH_MAX)
    if not (rows_off or acc_off):
        return None
    parts = []
    if mm is not None:
        parts.append(
            f"the argmax log-prob letter differs from the text's on {fmt_metric(mm, pct=True)} of {mm['n']} rows "
            "(a tie in the argmax counts as no pick)"
        )
    if diff is not None:
        parts.append(
            f"accuracy by argmax log-prob {fmt_value(lp['accuracy_logprob']['value'], True)} vs by text "
            f"{fmt_value(lp['accuracy_text']['value'], True)} (difference {fmt_metric(diff, pct=True, sign=True)}, "
            f"{diff['n']} rows)"
        )
    rows = max(m["n"] for m in (mm, diff) if m is not None)
    return _flag("logprob_mismatch", arm, "; ".join(parts) + ": log-prob accuracy is diagnostic only",
                 lp["items"], rows)  # fmt: skip


def ungraded_flag(arm: str, rows: int, graded: int, items: int) -> Flag | None:
    if rows <= graded:
        return None
    return _flag(
        "ungraded_rows",
        arm,
        f"{rows - graded} of {rows} rows ({fmt_value((rows - graded) / rows, True)}) have no verdict "
        "(judge error or pending); they are left out of every denominator — re-run `mcqaudit grade`",
        items,
        rows,
        ungraded=rows - graded,
    )


def audit_flag(
    unaudited: bool, n_reviews: int, reviewed_rows: int, required_rows: int, n_items: int, n_rows: int
) -> Flag | None:
    """The judge is not audited: graded with --no-judge, no review yet, or fewer than ``required_rows`` rows
    of a uniform spot check reviewed (``reviewed_rows``)."""
    reasons = []
    if unaudited:
        reasons.append("the study was graded with --no-judge (strict pre-filter only)")
    if n_reviews == 0:
        reasons.append("no human review yet: no verdict has been spot-checked")
    elif reviewed_rows < required_rows:
        reasons.append(
            f"{reviewed_rows} of the {required_rows} rows of a uniform spot check that "
            f"audit the judge are reviewed ({n_reviews} reviews in all, of {n_rows} rows); agreement "
            "figures are preliminary"
        )
    if not reasons:
        return None
    return _flag(
        "judge_unaudited",
        None,
        "; ".join(reasons),
        n_items,
        n_rows,
        reviewed_rows=reviewed_rows,
        required_rows=required_rows,
    )


def design_flag(reason: str | None, unreadable: Sequence[str], n_items: int, n_rows: int) -> Flag | None:
    """The design cannot separate position from content (``design.reason``, :func:`metrics.facts.design_reasons`)."""
    if not reason:
        return None
    return _flag(
        "design_imbalance",
        None,
        f"the design cannot separate position from content: {reason}. Unreadable here: "
        + ", ".join(_UNREADABLE_WORDS[k] for k in unreadable),
        n_items,
        n_rows,
        unreadable=list(unreadable),
    )


def diagnose(info: StudyInfo, res: Results, parsers: Sequence[Tally], verdicts: str = "final") -> list[Flag]:
    """The named flags of docs/design.md §7, each with its evidence and n (in the order they are checked; the report
    sorts them with :func:`sort_flags`). ``mcqaudit info`` checks the same flags but those read off CIs from
    plain counts, in this order too (:func:`mcqaudit.metrics.facts.quick_flags`)."""
    design = res["design"]
    n_rows = sum(info.rows_by_arm.values())
    flags = _artifact_flags(res, verdicts)
    flags += _judge_sensitive_flags(res)
    if not design["one_orientation"]:
        flags += _orientation_flags(res)
    for arm, d in res["delta_accuracy"].items():
        if d is not None and (f := _other_rate_flag(arm, d, res)):
            flags.append(f)
        if d is not None and (f := _truncation_flag(arm, d, res)):
            flags.append(f)
    if f := judge_config_flag(info.arms, info.arm_fingerprints, info.judge_configs, info.n_items, n_rows):
        flags.append(f)
    flags += parser_disagreement_flags(parsers)
    for arm, m in res["metrics"].items():
        if f := logprob_flag(arm, m.get("logprob_crosscheck")):
            flags.append(f)
    for arm, m in res["metrics"].items():
        if f := ungraded_flag(arm, m["rows"], m["graded"], m["items"]):
            flags.append(f)
    if f := design_flag(design["reason"], design["unreadable"], info.n_items, n_rows):
        flags.append(f)
    audit = res["audit"]
    if f := audit_flag(
        info.unaudited,
        info.n_reviews,
        audit["uniform_reviewed_rows"],
        audit["required_rows"],
        info.n_items,
        n_rows,
    ):
        flags.append(f)
    return flags


def sort_flags(flags: list[Flag]) -> list[Flag]:
    """Most important first (:data:`FLAG_ORDER`); flags of one name keep their order."""
    order = {n: i for i, n in enumerate(FLAG_ORDER)}
    return sorted(flags, key=lambda f: order.get(f["name"], len(order)))
