"""The shareable report: the JSON dict (docs/report-schema.md), and its Markdown and self-contained HTML.

:func:`build_report` is the one entry point the CLI and the dashboard call; it loads aggregated frames
from the study (:mod:`mcqaudit.store.frames`, imported lazily so this module stays free of duckdb) and
hands them to :func:`mcqaudit.metrics.compute`. The renderers are pure functions of the dict: Markdown
and HTML are built from the same list of sections, so the two always say the same thing.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcqaudit import __version__
from mcqaudit.metrics import CI_LEVEL, StudyFrames, compute, sort_flags

if TYPE_CHECKING:
    from mcqaudit.store.db import Study

SCHEMA_VERSION = 1
FORMATS = ("json", "md", "html")
STANDIN_BANNER = "Verdicts come from a heuristic stand-in, not an LLM: use them for demos and dry runs only."
UNAUDITED_BANNER = (
    "Unaudited study: graded with --no-judge, so verdicts come from the strict pre-filter alone and rows it "
    "could not resolve are ungraded."
)

Report = dict[str, Any]


def build_report(
    study: str | Path | Study,
    control: str | None = None,
    verdicts: str = "final",
    n_boot: int = 2000,
    seed: int = 0,
) -> Report:
    """The report dict of a study file (path or open :class:`~mcqaudit.store.db.Study`)."""
    from mcqaudit.store.db import Study
    from mcqaudit.store.frames import load_frames

    st = study if isinstance(study, Study) else Study(study)
    return report_from_frames(load_frames(st, verdicts), control=control, n_boot=n_boot, seed=seed)  # type: ignore[arg-type]


def report_from_frames(
    frames: StudyFrames, control: str | None = None, n_boot: int = 2000, seed: int = 0
) -> Report:
    """The report dict from already loaded frames (pure)."""
    info = frames.info
    res = compute(frames, control=control, n_boot=n_boot, seed=seed)
    used = {fp for fps in info.arm_fingerprints.values() for fp in fps}
    fingerprints: dict[str, Any] = {}
    for fp in sorted(used):
        cfg = info.judge_configs.get(fp, {})
        fingerprints[fp] = {
            "model": cfg.get("model"),
            "shape": cfg.get("shape"),
            "temperature": cfg.get("temperature"),
            "standin": bool(cfg.get("standin", False)),
            "arms": [a for a in info.arms if fp in info.arm_fingerprints.get(a, {})],
            "rows": sum(info.arm_fingerprints.get(a, {}).get(fp, 0) for a in info.arms),
        }
    standin = any(v["standin"] for v in fingerprints.values())
    return {
        "schema_version": SCHEMA_VERSION,
        "mcqaudit_version": __version__,
        "study": {
            "path": info.path,
            "created": info.created,
            "unaudited": info.unaudited,
            "standin_judge": standin,
            "verdicts": frames.verdicts,
            "items": info.n_items,
            "orientations": info.orientations,
            "parsers": info.parsers,
            "reviews": info.n_reviews,
        },
        "arms": info.arms,
        "control_arm": res["control_arm"],
        "control_source": res["control_source"],
        "rows": sum(info.rows_by_arm.values()),
        "rows_by_arm": info.rows_by_arm,
        "judge_fingerprints": fingerprints,
        "bootstrap": {"resamples": int(n_boot), "seed": int(seed), "unit": "item", "ci_level": CI_LEVEL},
        "flags": sort_flags(res["flags"]),
        "metrics": res["metrics"],
        "delta_accuracy": res["delta_accuracy"],
        "delta_accuracy_by_parser": res["delta_accuracy_by_parser"],
        "judge_agreement": res["judge_agreement"],
        "design": res["design"],
        "notes": dict(sorted(res["notes"].items())),
    }


def flags_for(study: str | Path | Study, n_boot: int = 500, seed: int = 0) -> list[dict[str, Any]]:
    """The diagnostics of a study (for ``mcqaudit info``): the report's flags, most important first."""
    return build_report(study, n_boot=n_boot, seed=seed)["flags"]


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


def pct(m: Mapping[str, Any] | None, *, sign: bool = False, ci: bool = True) -> str:
    """A metric in percent (or percentage points) with its CI: ``71.2 [66.1, 75.8]``; ``n/a`` when missing."""
    if m is None or m.get("value") is None:
        return "n/a"
    f = "{:+.1f}" if sign else "{:.1f}"
    s = f.format(m["value"] * 100)
    if ci and m.get("ci_low") is not None and m.get("ci_high") is not None:
        s += f" [{f.format(m['ci_low'] * 100)}, {f.format(m['ci_high'] * 100)}]"
    return s


def num(m: Mapping[str, Any] | None, digits: int = 2, scale: float = 1.0) -> str:
    if m is None or m.get("value") is None:
        return "n/a"
    s = f"{m['value'] * scale:.{digits}f}"
    if m.get("ci_low") is not None and m.get("ci_high") is not None:
        s += f" [{m['ci_low'] * scale:.{digits}f}, {m['ci_high'] * scale:.{digits}f}]"
    return s


def with_chance(m: Mapping[str, Any] | None) -> str:
    s = pct(m)
    if m is not None and m.get("chance") is not None:
        s += f" (chance {m['chance'] * 100:.1f})"
    return s


def banners(report: Mapping[str, Any]) -> list[str]:
    out = []
    if report["study"].get("unaudited"):
        out.append(UNAUDITED_BANNER)
    if report["study"].get("standin_judge"):
        out.append(STANDIN_BANNER)
    return out


def sections(report: Mapping[str, Any]) -> list[Section]:
    """The report's content for people, in reading order: flags first."""
    arms: list[str] = report["arms"]
    ctrl = report["control_arm"]
    st = report["study"]
    orients: list[str] = st.get("orientations", [])
    m = report["metrics"]
    out: list[Section] = []

    flags = report["flags"]
    out.append(
        Section(
            "Flags",
            bullets=[
                f"**{f['name']}**" + (f" ({f['arm']})" if f.get("arm") else "") + f": {f['evidence']}"
                for f in flags
            ]
            or ["No diagnostic fired."],
        )
    )

    boot = report["bootstrap"]
    src = {
        "option": "--control",
        "study": "stored in the study",
        "name": "by name",
        "first": "first arm ingested",
    }
    out.append(
        Section(
            "Study",
            paragraphs=[
                f"{report['rows']} rows, {st.get('items')} items, {len(arms)} arms, {len(orients)} orientations. "
                f"Control arm: {ctrl or 'none'} ({src.get(report.get('control_source', ''), 'none')}). "
                f"Verdicts: {st.get('verdicts')} "
                + ("(latest review, else judge, else pre-filter, else rule)." if st.get("verdicts") == "final"
                   else "(judge, else pre-filter, else rule; reviews ignored).")
                + f" Confidence intervals: {int(boot['ci_level'] * 100)} %, {boot['resamples']} bootstrap resamples "
                f"of items (seed {boot['seed']}); rates are percentages.",
            ],
        )
    )  # fmt: skip

    head = Table(
        [
            "arm",
            "rows",
            "accuracy",
            "answered accuracy",
            "OTHER rate",
            "ungraded rate",
            "circular accuracy",
            "first-position rate",
            "RStd (pp)",
        ],
        [
            [
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
            for a in arms
        ],
    )
    out.append(Section("Headline", tables=[head]))

    out.append(
        Section(
            "Accuracy by orientation",
            tables=[
                Table(
                    ["arm", *orients],
                    [[a, *[pct(m[a]["accuracy_by_orientation"].get(o)) for o in orients]] for a in arms],
                )
            ],
        )
    )

    drows = []
    for a, d in report["delta_accuracy"].items():
        if d is None:
            drows.append([a, "not compared (see notes)", "", *["" for _ in orients], "", ""])
            continue
        ov = d["overall"]
        drows.append(
            [
                a,
                pct(ov, sign=True),
                pct({"value": ov["mde"]}, ci=False) if ov and ov.get("mde") is not None else "n/a",
                *[pct(d["by_orientation"].get(o), sign=True) for o in orients],
                pct(d["other_rate"], sign=True),
                pct(d["answered_accuracy"], sign=True),
            ]
        )
    if drows:
        out.append(
            Section(
                f"Δ vs control ({ctrl})",
                paragraphs=[
                    "Treated − control on the same items, in percentage points, with the minimum detectable effect "
                    "(MDE ≈ 2.8 × SE: a null is informative only when the MDE is small)."
                ],
                tables=[
                    Table(["arm", "Δaccuracy", "MDE", *orients, "Δ OTHER rate", "Δ answered accuracy"], drows)
                ],
            )
        )
    dp = report.get("delta_accuracy_by_parser") or {}
    if dp:
        parsers = list(next(iter(dp.values())).keys())
        rows = []
        for a, by in dp.items():
            d = report["delta_accuracy"].get(a)
            rows.append(
                [
                    a,
                    pct(d["overall"], sign=True) if d else "n/a",
                    *[pct(by.get(p), sign=True) for p in parsers],
                ]
            )
        out.append(
            Section(
                "Δaccuracy by parser",
                paragraphs=["The Δ each parser's letters would have reported (letter = gold → CORRECT, other letter → "
                            "INCORRECT, no letter → OTHER), on the rows the verdicts grade."],
                tables=[Table(["arm", "verdicts", *parsers], rows)],
            )
        )  # fmt: skip

    parsers_all: list[str] = []
    for a in arms:
        for p in m[a].get("parser_disagreement") or {}:
            if p not in parsers_all:
                parsers_all.append(p)
    if parsers_all:
        rows = []
        for p in parsers_all:
            cells = []
            for a in arms:
                e = (m[a].get("parser_disagreement") or {}).get(p)
                cells.append(f"{pct(e['rate'])} (n={e['rate']['n']})" if e and e.get("rate") else "n/a")
            rows.append([p, *cells])
        out.append(
            Section(
                "Parser disagreement with the verdicts",
                paragraphs=["Share of rows where the parser's verdict differs from the verdict (strict: on the rows it "
                            "resolved). Confusion matrices are in the JSON and the HTML report."],
                tables=[Table(["parser", *arms], rows)],
            )
        )  # fmt: skip

    pos_rows = []
    letters: list[str] = []
    for a in arms:
        for x in m[a].get("position_pick_rate") or {}:
            if x not in letters:
                letters.append(x)
    for a in arms:
        ppr = m[a].get("position_pick_rate") or {}
        pos_rows.append([a, *[with_chance(ppr.get(x)) for x in letters]])
    if letters:
        base = {m[a].get("position_baseline") for a in arms}
        out.append(
            Section(
                "Position picks",
                paragraphs=[
                    "Share of non-OTHER picks at each displayed position; "
                    + ("chance is 1/n (balanced design)." if base == {"uniform"}
                       else "the design is unbalanced, so the comparison is the gold-letter share, not 1/n.")
                ],
                tables=[Table(["arm", *letters], pos_rows)],
            )
        )  # fmt: skip

    out.append(
        Section(
            "Consistency",
            tables=[
                Table(
                    ["arm", "binary (swapped pairs)", "n-way (plurality share)"],
                    [[a, pct(m[a]["consistency"]["binary"]), pct(m[a]["consistency"]["nway"])] for a in arms],
                )
            ],
        )
    )

    ag_rows = []
    groups: list[tuple[str, Mapping[str, Any]]] = []
    if report.get("judge_agreement"):
        groups.append(("all arms", report["judge_agreement"]))
    groups += [(a, m[a]["judge_agreement"]) for a in arms if m[a].get("judge_agreement")]
    for name, ag in groups:
        prec = ag["precision"]
        ag_rows.append(
            [
                name,
                str(ag["agreement"]["n"]) if ag.get("agreement") else "0",
                pct(ag["agreement"]),
                num(ag["kappa"]),
                *[pct(prec.get(v)) for v in ("CORRECT", "INCORRECT", "OTHER")],
                pct(ag.get("corrected_accuracy")),
            ]
        )
    if ag_rows:
        sample = report["judge_agreement"]["sample"] if report.get("judge_agreement") else "all"
        out.append(
            Section(
                "Judge vs human",
                paragraphs=[
                    "Automated verdict vs the reviewer's, on "
                    + ("the uniform spot check." if sample == "uniform"
                       else "all reviewed rows (not a uniform sample: agreement may be biased).")
                ],
                tables=[
                    Table(
                        ["", "reviewed rows", "agreement", "Cohen's κ", "precision CORRECT", "precision INCORRECT",
                         "precision OTHER", "judge-corrected accuracy"],
                        ag_rows,
                    )
                ],
            )
        )  # fmt: skip

    lp_rows = []
    for a in arms:
        lp = m[a].get("logprob_crosscheck")
        if lp:
            lp_rows.append(
                [
                    a,
                    str(lp["accuracy_text"]["n"]) if lp.get("accuracy_text") else "0",
                    pct(lp["accuracy_logprob"]),
                    pct(lp["accuracy_text"]),
                    pct(lp["difference"], sign=True),
                    pct(lp["mismatch_rate"]),
                ]
            )
    if lp_rows:
        out.append(
            Section(
                "Log-prob cross-check",
                tables=[
                    Table(
                        [
                            "arm",
                            "rows",
                            "accuracy by log-prob",
                            "accuracy by text",
                            "difference",
                            "mismatch rate",
                        ],
                        lp_rows,
                    )
                ],
            )
        )

    fps = report.get("judge_fingerprints") or {}
    if fps:
        out.append(
            Section(
                "Judge configurations",
                tables=[
                    Table(
                        ["fingerprint", "model", "shape", "temperature", "stand-in", "arms", "rows"],
                        [
                            [
                                fp,
                                str(c.get("model")),
                                str(c.get("shape")),
                                str(c.get("temperature")),
                                "yes" if c.get("standin") else "no",
                                ", ".join(c.get("arms", [])),
                                str(c.get("rows")),
                            ]
                            for fp, c in fps.items()
                        ],
                    )
                ],
            )
        )
    notes = report.get("notes") or {}
    if notes:
        out.append(Section("Notes", bullets=[f"`{k}`: {v}" for k, v in notes.items()]))
    return out


# --- Markdown ---------------------------------------------------------------------------------------------
def _md_cell(s: str) -> str:
    return " ".join(s.replace("\\", "\\\\").replace("|", "\\|").split())


def _md_table(t: Table) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(h) for h in t.header) + " |", "|" + "---|" * len(t.header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
    return lines


def to_markdown(report: Mapping[str, Any]) -> str:
    """The report as GitHub-flavoured Markdown: banners, flags with their evidence first, then tables."""
    lines = ["# mcqaudit report", ""]
    for b in banners(report):
        lines += [f"> **Warning:** {b}", ""]
    for sec in sections(report):
        lines += [f"## {sec.title}", ""]
        for p in sec.paragraphs:
            lines += [p, ""]
        if sec.bullets:
            lines += [f"- {' '.join(b.split())}" for b in sec.bullets] + [""]
        for t in sec.tables:
            lines += [*_md_table(t), ""]
    return "\n".join(lines).rstrip() + "\n"


# --- HTML -------------------------------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;
padding:0 1rem;color:#1f2933;line-height:1.45}
h1{font-size:1.7rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #d9e2ec;padding-bottom:.2rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.9rem}
th,td{border:1px solid #d9e2ec;padding:.3rem .55rem;text-align:left;vertical-align:top}
th{background:#f0f4f8}.banner{background:#fff3cd;border:1px solid #e0b252;padding:.7rem 1rem;border-radius:4px;
margin:.6rem 0;font-weight:600}.flags li{margin:.3rem 0}code{background:#f0f4f8;padding:0 .2rem}
.fig{margin:1rem 0}
"""


def _inline(s: str) -> str:
    """Escape text, then turn the Markdown bits the sections use (**bold**, `code`) into tags."""
    out = html.escape(s)
    parts = out.split("**")
    out = "".join(f"<strong>{p}</strong>" if k % 2 else p for k, p in enumerate(parts))
    parts = out.split("`")
    return "".join(f"<code>{p}</code>" if k % 2 else p for k, p in enumerate(parts))


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in t.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def to_html(report: Mapping[str, Any], figures: Sequence[tuple[str, Any]] | None = None) -> str:
    """One self-contained HTML page (plotly.js embedded once; works offline) with the tables and plots."""
    import plotly.io as pio

    from mcqaudit.plots import report_figures

    figs = list(figures) if figures is not None else report_figures(report)
    parts = ["<h1>mcqaudit report</h1>"]
    parts += [f'<div class="banner">{html.escape(b)}</div>' for b in banners(report)]
    for sec in sections(report):
        parts.append(f"<h2>{html.escape(sec.title)}</h2>")
        parts += [f"<p>{_inline(p)}</p>" for p in sec.paragraphs]
        if sec.bullets:
            cls = ' class="flags"' if sec.title == "Flags" else ""
            parts.append(f"<ul{cls}>" + "".join(f"<li>{_inline(b)}</li>" for b in sec.bullets) + "</ul>")
        parts += [_html_table(t) for t in sec.tables]
    if figs:
        parts.append("<h2>Plots</h2>")
        for k, (title, fig) in enumerate(figs):
            div = pio.to_html(
                fig,
                full_html=False,
                include_plotlyjs=k == 0,
                div_id=f"fig{k}",
                config={"displaylogo": False, "responsive": True},
            )
            parts.append(f'<div class="fig" aria-label="{html.escape(title)}">{div}</div>')
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>mcqaudit report</title><style>{_CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def render(report: Mapping[str, Any], fmt: str) -> str:
    """The report in one of :data:`FORMATS`."""
    import json

    if fmt == "json":
        return json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    if fmt == "md":
        return to_markdown(report)
    if fmt == "html":
        return to_html(report)
    raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
