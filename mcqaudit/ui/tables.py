"""Tables the pages show, built from the report dict (docs/design.md §7 shape) and store frames. Pure: no streamlit.

Percentages are shown as ``71.2 [66.1, 75.8]`` (value and 95 % CI, in percent or percentage points); a
metric that could not be computed is ``n/a``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from mcqaudit.formatting import md_text
from mcqaudit.metrics.results import (
    LetterRates,
    Metric,
    OrientationDisagreement,
    ParserDisagreement,
    Report,
)
from mcqaudit.reading import (
    FamilyView,
    agreement_groups,
    family_entry,
    first_family,
    misread_counts,
    report_families,
)
from mcqaudit.report import agreement_cells, num, with_chance
from mcqaudit.report import pct as _pct
from mcqaudit.vocab import VERDICTS

NA = "n/a"


def md_escape(text: object) -> str:
    """Text that Streamlit's Markdown shows literally (in st.markdown, captions, labels, metrics, popovers,
    tabs and progress texts): :func:`mcqaudit.formatting.md_text`, the one Markdown escaper."""
    return md_text(text)


def pct(m: Metric | None, *, sign: bool = False, ci: bool = True) -> str:
    """The report's percent-with-CI, and beside every CI its n (items, or rows for a row-level rate): a
    number without its sample size is not shown to anyone."""
    s = _pct(m, sign=sign, ci=ci)
    if ci and m is not None and m.get("value") is not None and m.get("n") is not None:
        s += f" n={int(m['n'])}"
    return s


def arm_label(report: Report, arm: str) -> str:
    return f"{arm} (control)" if arm == report.get("control_arm") else arm


def headline(report: Report) -> pd.DataFrame:
    m = report["metrics"]
    rows = []
    for a in report["arms"]:
        x = m[a]
        rows.append(
            {
                "arm": arm_label(report, a),
                "rows": x["rows"],
                "accuracy %": pct(x["accuracy"]),
                "answered accuracy %": pct(x["answered_accuracy"]),
                "OTHER rate %": pct(x["other_rate"]),
                "ungraded rate %": pct(x["ungraded_rate"]),
                "circular accuracy %": with_chance(x["circular_accuracy"]),
                "first-position rate %": with_chance(x["first_position_rate"]),
                "RStd (pp)": num(x["rstd"], 1),
            }
        )
    return pd.DataFrame(rows)


def deltas(report: Report) -> pd.DataFrame:
    rows: list[dict[str, object]] = []
    for a, d in (report.get("delta_accuracy") or {}).items():
        if d is None:
            rows.append({"arm": a, "Δaccuracy (pp)": "not compared (see notes)"})
            continue
        ov = d["overall"]
        mde = ov.get("mde") if ov else None
        rows.append(
            {
                "arm": a,
                "items": d.get("items"),
                "pairing": d.get("pairing", ""),
                "Δaccuracy (pp)": pct(ov, sign=True),
                "MDE (pp)": f"{mde * 100:.1f}" if mde is not None else NA,
                "Δ OTHER rate (pp)": pct(d.get("other_rate"), sign=True),
                "Δ answered accuracy (pp)": pct(d.get("answered_accuracy"), sign=True),
            }
        )
    return pd.DataFrame(rows)


def families(report: Report) -> list[FamilyView]:
    """The item families with per-family figures (the items sharing one orientation set)."""
    return report_families(report)


def family_caption(fam: FamilyView) -> str:
    label, fo, items = fam
    return "every item" if label is None else f"{label} ({items} items, shown as {', '.join(fo)})"


def accuracy_by_orientation(report: Report, family: FamilyView | None = None) -> pd.DataFrame:
    """Accuracy per orientation of one item family (default: the first), and over its orientations."""
    label, fo, _ = family or first_family(report)
    rows = []
    for a in report["arms"]:
        fe = family_entry(report["metrics"][a], label)
        by = fe.get("accuracy_by_orientation") or {}
        rows.append({"arm": arm_label(report, a), **{o: pct(by.get(o)) for o in fo},
                     "all orientations": pct(fe.get("accuracy"))})  # fmt: skip
    return pd.DataFrame(rows)


def delta_by_orientation(report: Report, family: FamilyView | None = None) -> pd.DataFrame:
    """Δaccuracy vs control per orientation within one item family (default: the first)."""
    label, fo, _ = family or first_family(report)
    rows = []
    for a, d in (report.get("delta_accuracy") or {}).items():
        if d is None:
            continue
        fd = family_entry(d, label)
        rows.append(
            {
                "arm": f"{a} − {report['control_arm']}",
                "overall": pct(fd.get("overall"), sign=True),
                **{o: pct((fd.get("by_orientation") or {}).get(o), sign=True) for o in fo},
                "items": fd.get("items", ""),
            }
        )
    return pd.DataFrame(rows)


def circular(report: Report) -> pd.DataFrame:
    rows = []
    for a in report["arms"]:
        c = report["metrics"][a]["circular_accuracy"]
        chance = c.get("chance") if c else None
        rows.append(
            {
                "arm": arm_label(report, a),
                "circular accuracy %": pct(c),
                "chance %": f"{chance * 100:.2f}" if chance is not None else NA,
                "items": c["n"] if c else 0,
                "accuracy %": pct(report["metrics"][a]["accuracy"]),
            }
        )
    return pd.DataFrame(rows)


def other_by_arm(report: Report) -> pd.DataFrame:
    rows = []
    for a in report["arms"]:
        x = report["metrics"][a]
        d = (report.get("delta_accuracy") or {}).get(a)
        rows.append(
            {
                "arm": arm_label(report, a),
                "OTHER rate %": pct(x["other_rate"]),
                "ungraded rate %": pct(x["ungraded_rate"]),
                "accuracy %": pct(x["accuracy"]),
                "answered accuracy %": pct(x["answered_accuracy"]),
                "Δaccuracy (pp)": pct(d["overall"], sign=True) if d else "",
                "Δ answered accuracy (pp)": pct(d["answered_accuracy"], sign=True) if d else "",
                "Δ OTHER rate (pp)": pct(d["other_rate"], sign=True) if d else "",
            }
        )
    return pd.DataFrame(rows)


def rates_by_orientation(counts: pd.DataFrame) -> pd.DataFrame:
    """Per arm and orientation: row counts with the OTHER and ungraded rates (OTHER over graded rows,
    ungraded over all rows, as in the metrics)."""
    df = counts.copy()
    graded = df["rows"] - df["ungraded"]
    df["OTHER rate %"] = (100 * df["other"] / graded.where(graded > 0)).round(1)
    df["ungraded rate %"] = (100 * df["ungraded"] / df["rows"].where(df["rows"] > 0)).round(1)
    return df


def parsers_of(report: Report) -> list[str]:
    out: list[str] = []
    for a in report["arms"]:
        for p in report["metrics"][a].get("parser_disagreement") or {}:
            if p not in out:
                out.append(p)
    return out


def parser_entry(
    report: Report, parser: str, arm: str, orientation: str | None
) -> ParserDisagreement | OrientationDisagreement | None:
    """The parser_disagreement entry ({rate, confusion}) of one arm, overall or for one orientation."""
    e = (report["metrics"][arm].get("parser_disagreement") or {}).get(parser)
    if e is None or orientation is None:
        return e
    return (e.get("by_orientation") or {}).get(orientation)


def letters_entry(report: Report, parser: str, arm: str, orientation: str | None) -> LetterRates | None:
    """The parser_letters entry (the four rates and the letter confusion) of one arm, overall or for one
    orientation; None where no row with a known reference letter was compared."""
    e = (report["metrics"][arm].get("parser_letters") or {}).get(parser)
    if e is None or orientation is None:
        return e
    return (e.get("by_orientation") or {}).get(orientation)


def letter_rates(report: Report) -> pd.DataFrame:
    """Per parser and arm: the share of answers whose letter it misreads, with CI and n, and how many of
    them were another letter, a letter made up (the answer picks none) and a letter missed."""
    rows = []
    for p in parsers_of(report):
        row: dict[str, str] = {"parser": p}
        for a in report["arms"]:
            e = report["metrics"][a]["parser_letters"].get(p)
            m = e["misread"] if e else None
            if not e or not m:
                row[a] = NA
                continue
            count = misread_counts(e)
            split = " / ".join(str(count[k]) for k in ("wrong_letter", "fabricated", "missed"))
            row[a] = f"{pct(m)} (another / made up / missed: {split})"
        rows.append(row)
    return pd.DataFrame(rows)


def confusion_frame(conf: Mapping[str, Mapping[str, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        [[int(conf[r][c]) for c in VERDICTS] for r in VERDICTS],
        index=[f"verdict {r}" for r in VERDICTS],
        columns=[f"parser {c}" for c in VERDICTS],
    )


def parser_deltas(report: Report) -> pd.DataFrame:
    """Per treated arm: the verdicts' Δaccuracy, then each parser's, with CIs."""
    rows = []
    for a, by in (report.get("delta_accuracy_by_parser") or {}).items():
        d = (report.get("delta_accuracy") or {}).get(a)
        rows.append(
            {
                "arm": a,
                "source": "verdicts (judge)",
                "Δaccuracy (pp)": pct(d["overall"], sign=True) if d else NA,
            }
        )
        for p, m in by.items():
            rows.append({"arm": a, "source": p, "Δaccuracy (pp)": pct(m, sign=True)})
    return pd.DataFrame(rows)


def disagreement_rates(report: Report) -> pd.DataFrame:
    rows = []
    for p in parsers_of(report):
        row: dict[str, str] = {"parser": p}
        for a in report["arms"]:
            e = (report["metrics"][a].get("parser_disagreement") or {}).get(p)
            rate = e.get("rate") if e else None
            row[a] = f"{pct(rate)} (n={rate['n']})" if rate else NA
        rows.append(row)
    return pd.DataFrame(rows)


def position_picks(report: Report) -> pd.DataFrame:
    """Pick shares by displayed position, against chance; where the design leaves no chance level (gold
    letters unbalanced), the shares alone (``pick_share``), which :func:`picks_confounded` says."""
    confounded = picks_confounded(report)
    rows = []
    for a in report["arms"]:
        m = report["metrics"][a]
        ppr = (m.get("pick_share") if confounded else m.get("position_pick_rate")) or {}
        rows.append(
            {
                "arm": arm_label(report, a),
                **{x: (pct if confounded else with_chance)(v) for x, v in ppr.items()},
            }
        )
    return pd.DataFrame(rows)


def picks_confounded(report: Report) -> bool:
    """The pick shares are shown, but no arm's pick rate can be read against chance (gold unbalanced)."""
    m = report["metrics"]
    return not any(m[a].get("position_pick_rate") for a in report["arms"]) and any(
        m[a].get("pick_share") for a in report["arms"]
    )


def bias_summary(report: Report) -> pd.DataFrame:
    rows = []
    for a in report["arms"]:
        x = report["metrics"][a]
        cons = x.get("consistency") or {}
        rows.append(
            {
                "arm": arm_label(report, a),
                "first-position rate %": with_chance(x.get("first_position_rate")),
                "RStd (pp)": num(x.get("rstd"), 1),
                "consistency, swapped pairs %": pct(cons.get("binary")),
                "consistency, plurality share %": pct(cons.get("nway")),
            }
        )
    return pd.DataFrame(rows)


def recall_by_gold(report: Report, family: FamilyView | None = None) -> pd.DataFrame:
    """Recall by gold letter within one item family (default: the first), with its RStd."""
    label, _, _ = family or first_family(report)
    rows = []
    for a in report["arms"]:
        fe = family_entry(report["metrics"][a], label)
        rec = fe.get("recall_by_gold_letter") or {}
        rows.append(
            {
                "arm": arm_label(report, a),
                **{x: pct(m) for x, m in rec.items()},
                "RStd (pp)": num(fe.get("rstd"), 1),
            }
        )
    return pd.DataFrame(rows)


def logprob(report: Report) -> pd.DataFrame:
    """The log-prob cross-check per arm, the row-level mismatch first (see :data:`LOGPROB_WORDS`)."""
    rows = []
    for a in report["arms"]:
        lp = report["metrics"][a].get("logprob_crosscheck")
        if lp:
            text = lp.get("accuracy_text")
            rows.append(
                {
                    "arm": arm_label(report, a),
                    "row-level mismatch %": pct(lp.get("mismatch_rate")),
                    "rows": text["n"] if text else 0,
                    "accuracy by log-prob %": pct(lp.get("accuracy_logprob")),
                    "accuracy by text %": pct(lp.get("accuracy_text")),
                    "difference (pp)": pct(lp.get("difference"), sign=True),
                }
            )
    return pd.DataFrame(rows)


def fingerprints(report: Report) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "fingerprint": fp,
                "model": c.get("model"),
                "shape": c.get("shape"),
                "temperature": c.get("temperature"),
                "stand-in (not an LLM)": "yes" if c.get("standin") else "no",
                "arms": ", ".join(c.get("arms", [])),
                "rows": c.get("rows"),
            }
            for fp, c in (report.get("judge_fingerprints") or {}).items()
        ]
    )


def judge_agreement(report: Report) -> pd.DataFrame:
    """Judge vs human, all arms then per arm: each share with its CI and n, or on fewer than 10 rows the
    counts alone (:func:`mcqaudit.report.agreement_cells`)."""
    rows = []
    for name, ag in agreement_groups(report):
        cells = agreement_cells(ag)
        rows.append(
            {
                "": name,
                "reviewed rows": int(
                    ag.get("reviewed_rows") or (a["n"] if (a := ag.get("agreement")) else 0)
                ),
                "agreement %": cells["agreement"],
                "Cohen's κ": cells["kappa"],
                **{f"precision {v} %": cells.get(f"precision {v}", NA) for v in VERDICTS},
                "judge-corrected accuracy %": cells["corrected_accuracy"],
                "sample": ag.get("sample", ""),
                "status": "preliminary (< 100 reviewed rows)" if ag.get("preliminary") else "",
            }
        )
    return pd.DataFrame(rows)


def pairwise(report: Report) -> pd.DataFrame | None:
    """With three or more arms: Δaccuracy of every pair on their shared items (row arm − column arm, pp),
    each cell with its CI, n and pairing; None for fewer arms."""
    pw = report.get("pairwise_delta")
    if not pw:
        return None
    arms = list(report["arms"])

    def cell(a: str, b: str) -> str:
        m = (pw.get(a) or {}).get(b)
        if a == b:
            return "—"
        if not m or m.get("value") is None:
            return "not compared"
        return f"{pct(m, sign=True)} · {m.get('pairing', 'paired')}"

    # built by column (a cell at a time through .loc took ~8 ms for five arms)
    return pd.DataFrame({b: [cell(a, b) for a in arms] for b in arms}, index=arms, columns=arms)
