"""Rows cut by the token limit (docs/design.md §3, §7; issue 20): ``truncated_rate`` per arm and orientation,
the ``truncation_rise`` flag, the finding that names the token budget as the cause of an OTHER rise, and the
OTHER-by-arm figure that shows truncated as its own share of OTHER.

The studies: two arms over the same 4-option items in the four cyclic orientations, a given share of each
arm's rows (exactly, rounded) cut by the token limit — OTHER, the model never answered, or still carrying the
letter it picked before the cut. One arm truncating 35 % of the time and the other 2 % must fire the flag and
name the budget; both at 2 % must not; neither may a study of fewer than 20 items.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mcqaudit import orient
from mcqaudit.app.report import build_report, report_from_frames
from mcqaudit.metrics import compute
from mcqaudit.plots import fig_other_rate
from mcqaudit.report import to_html, to_markdown
from mcqaudit.store.frames import load_frames
from mcqaudit.svgplot import figure_svg
from mcqaudit.vocab import LETTERS
from tests.builders import StudyBuilder, frames_of
from tests.helpers import run_cli, write_jsonl

LABELS = orient.scheme_labels(4, "cyclic")
BOOT = 500


def truncating_study(
    path: Path,
    rates: dict[str, float],
    n_items: int = 40,
    *,
    answered: bool = False,
    other: float = 0.0,
    items: dict[str, range] | None = None,
    seed: int = 0,
) -> StudyBuilder:
    """Arms ``base`` and ``steered``, each over ``items[arm]`` (default: the same ``n_items`` items) in the
    four cyclic orientations. ``round(rates[arm] × rows)`` of the arm's rows, drawn at random, stopped at the
    token limit (``finish_reason`` length; the rest ``stop``): with no answer, OTHER by rule, unless
    ``answered`` (then they keep their letter, judged). Every other row picks the gold letter 70 % of
    the time, else the next letter; in ``steered`` a share ``other`` of them is OTHER too (a refusal, not a
    cut)."""
    rng = np.random.default_rng(seed)
    b = StudyBuilder(path)
    items = items or {"base": range(n_items), "steered": range(n_items)}
    for k in sorted({k for r in items.values() for k in r}):
        b.item(f"q{k:03d}", n=4, gold=k % 4)
    for arm in ("base", "steered"):
        n = len(items[arm]) * len(LABELS)
        chosen = set(rng.permutation(n)[: round(rates[arm] * n)].tolist())
        j = 0
        for k in items[arm]:
            for o in LABELS:
                t, j = j in chosen, j + 1
                gold = b.gold_letter(f"q{k:03d}", o)
                letter = gold if rng.random() < 0.7 else LETTERS[(LETTERS.index(gold) + 1) % 4]
                refuses = arm == "steered" and not t and rng.random() < other
                finish = "length" if t else "stop"
                if t and not answered:  # cut while thinking: no answer, OTHER by rule
                    b.row(arm, f"q{k:03d}", o, "OTHER", source="blank", finish_reason=finish)
                else:
                    b.row(arm, f"q{k:03d}", o, "OTHER" if refuses else letter, finish_reason=finish)
    return b


def report(b: StudyBuilder, **kw: Any) -> dict[str, Any]:
    """The report of the builder's study from its frames built in memory."""
    return dict(report_from_frames(frames_of(b), n_boot=BOOT, seed=0, **kw))


def named(rep: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [f for f in rep["flags"] if f["name"] == name]


def said(rep: dict[str, Any], kind: str, arm: str = "steered") -> list[dict[str, Any]]:
    return [f for f in rep["findings"] if f["kind"] == kind and f["arm"] == arm]


@pytest.fixture(scope="module")
def budget(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """steered is cut by the token limit on 35 % of its 160 rows (56), base on 2 % (3); cut rows are OTHER."""
    return report(
        truncating_study(tmp_path_factory.mktemp("budget") / "s.duckdb", {"base": 0.02, "steered": 0.35})
    )


# --- the rate ---------------------------------------------------------------------------------------------
def test_truncated_rate_per_arm_and_orientation(budget: dict[str, Any]) -> None:
    m = budget["metrics"]
    for arm, cut in (("base", 3), ("steered", 56)):
        e = m[arm]
        assert e["truncated_rows"] == cut and e["truncated_other_rows"] == cut  # every cut row is OTHER here
        tr = e["truncated_rate"]
        assert tr["value"] == pytest.approx(cut / 160) and tr["n"] == 160  # n: rows
        assert tr["ci_low"] <= tr["value"] <= tr["ci_high"]
        by = e["truncated_rate_by_orientation"]
        assert list(by) == LABELS and all(v["n"] == 40 for v in by.values())
        assert sum(round(v["value"] * v["n"]) for v in by.values()) == cut  # the orientations add up
        assert all(v["ci_low"] <= v["value"] <= v["ci_high"] for v in by.values())
    assert m["steered"]["other_rows"] == 56 and m["base"]["other_rows"] == 3
    d = budget["delta_accuracy"]["steered"]
    tr = d["truncated_rate"]
    assert tr["value"] == pytest.approx((56 - 3) / 160) and tr["n"] == 40 and tr["rows"] == 320
    assert tr["ci_low"] > 0 and {"se", "mde"} <= set(tr)
    # every OTHER row of either arm was a cut: with them left out, nothing of the OTHER rise is left
    kept = d["other_rate_untruncated"]
    assert kept["value"] == 0 and kept["ci_low"] <= 0 <= kept["ci_high"]


def test_the_study_file_gives_the_same_report(tmp_path: Path) -> None:
    """The rows the builder writes into a real study file, read back by load_frames (``gen_rows.truncated``),
    give the report the in-memory frames give."""
    b = truncating_study(tmp_path / "s.duckdb", {"base": 0.02, "steered": 0.35}, other=0.1)
    assert compute(load_frames(b.build()), n_boot=100) == compute(frames_of(b), n_boot=100)


# --- the flag and the finding ----------------------------------------------------------------------------------
def test_35_vs_2_percent_fires_the_flag_with_its_n(budget: dict[str, Any]) -> None:
    (f,) = named(budget, "truncation_rise")
    assert f["arm"] == "steered" and f["page"] == "OTHER by arm"
    assert (f["items"], f["rows"]) == (40, 320)
    ev = f["evidence"]
    assert ev.startswith("truncated rate 35.0 % vs 1.9 % in base (Δ +33.1 pp [")
    assert "56 of 160 rows of steered were cut by the token limit" in ev and "56 of them OTHER" in ev
    assert "left out +0.0 pp" in ev
    assert named(budget, "other_rate_rise")  # the rise the truncation explains
    names = [x["name"] for x in budget["flags"]]
    assert names.index("other_rate_rise") < names.index("truncation_rise")  # FLAG_ORDER


def test_the_finding_names_the_token_budget(budget: dict[str, Any]) -> None:
    (f,) = said(budget, "other_rate")
    assert f["token_budget"] is True and (f["n_items"], f["n_rows"]) == (40, 320)
    assert f["text"].startswith("The OTHER rise is the token budget: 56 of 56 OTHER rows of steered were cut by "
                                "the token limit (finish_reason length, or a reasoning block never closed), "
                                "against 3 of 3 in base;")  # fmt: skip
    assert (
        "on the shared items (40 items, 320 rows), Δ +" in f["text"]
        and "left out Δ +0.0 pp [-8.8, +8.8], no clear rise." in f["text"]  # 0 of 40 items: a Wilson bound
    )
    assert "Raise the token limit or read the answers" in f["text"]
    assert f["value"] == budget["delta_accuracy"]["steered"]["other_rate"]["value"]
    assert not said(budget, "truncation")  # said once, in the OTHER finding
    md = to_markdown(budget)  # type: ignore[arg-type]
    assert f["text"] in md
    head = next(line for line in md.splitlines() if line.startswith("| arm | rows | accuracy"))
    assert "| OTHER rate | truncated rate | truncated OTHER |" in head
    assert "| 35.0 [" in md and "(n=160) | 56 of 56 |" in md
    assert "| Δ truncated rate | Δ OTHER rate, truncated rows left out |" in md


def test_null_both_at_2_percent_says_nothing_of_a_budget(tmp_path: Path) -> None:
    rep = report(truncating_study(tmp_path / "s.duckdb", {"base": 0.02, "steered": 0.02}, seed=1))
    assert rep["metrics"]["steered"]["truncated_rows"] == rep["metrics"]["base"]["truncated_rows"] == 3
    tr = rep["delta_accuracy"]["steered"]["truncated_rate"]
    assert tr["ci_low"] <= 0 <= tr["ci_high"]
    assert not named(rep, "truncation_rise") and not named(rep, "other_rate_rise")
    assert not said(rep, "truncation")
    assert all("token" not in f["text"] for f in rep["findings"])
    assert "token_budget" not in said(rep, "other_rate")[0]


def test_under_20_items_neither_flag_nor_finding(tmp_path: Path) -> None:
    rep = report(truncating_study(tmp_path / "s.duckdb", {"base": 0.02, "steered": 0.35}, n_items=12))
    assert rep["metrics"]["steered"]["truncated_rows"] == round(0.35 * 48)  # the rate is still reported ...
    d = rep["delta_accuracy"]["steered"]
    assert d["truncated_rate"] is None and d["other_rate_untruncated"] is None  # ... but no Δ from 12 items
    assert not named(rep, "truncation_rise") and not named(rep, "other_rate_rise")
    assert [f["kind"] for f in rep["findings"] if f["arm"] == "steered"] == ["headline"]
    assert "not enough shared items (n=12)" in said(rep, "headline")[0]["text"]


def test_most_of_an_other_rise_cut_by_the_limit(tmp_path: Path) -> None:
    """steered is cut on 35 % of its rows and refuses on a tenth of the rest: with the cut rows left out a
    smaller OTHER rise remains, but most of the extra OTHER is the cut — the budget is named, and the rest."""
    rep = report(truncating_study(tmp_path / "s.duckdb", {"base": 0.02, "steered": 0.35}, other=0.1, seed=1))
    assert rep["delta_accuracy"]["steered"]["other_rate_untruncated"]["ci_low"] > 0
    (o,) = said(rep, "other_rate")
    assert o["token_budget"] is True
    assert o["text"].startswith(
        "Most of the OTHER rise is the token budget: 56 of 67 OTHER rows of steered were cut"
    )
    assert ", a smaller rise that remains. Raise the token limit" in o["text"]
    assert not said(rep, "truncation")


def test_cut_answers_that_still_carry_a_letter(tmp_path: Path) -> None:
    """Truncated rows that still carry a letter: no OTHER rise to explain, but the arm is cut more often —
    a finding of its own says so, and that those answers were read from a cut text."""
    rep = report(truncating_study(tmp_path / "s.duckdb", {"base": 0.02, "steered": 0.35}, answered=True))
    assert rep["metrics"]["steered"]["truncated_other_rows"] == 0
    (f,) = named(rep, "truncation_rise")
    assert "0 of them OTHER" in f["evidence"]
    assert not named(rep, "other_rate_rise")
    (o,) = said(rep, "other_rate")
    assert o["token_budget"] is False and "token budget" not in o["text"]
    (t,) = said(rep, "truncation")
    assert t["text"].startswith(
        "steered is cut by the token limit more often: 35.0 % of steered's rows vs 1.9 % of base's (all items "
        "of each); on the shared items (40 items, 320 rows), Δ +33.1 pp ["
    )
    assert "; 0 of its 56 truncated rows are OTHER, and the other 56 carry whatever answer" in t["text"]
    assert t["text"].endswith("Raise the token limit or read the answers.")
    assert t["token_budget"] is True and (t["n_items"], t["n_rows"]) == (40, 320)
    kinds = [f["kind"] for f in rep["findings"] if f["arm"] == "steered"]
    assert kinds.index("other_rate") + 1 == kinds.index("truncation")


def test_an_other_rise_the_truncation_does_not_explain(tmp_path: Path) -> None:
    """steered refuses (OTHER, not cut) on 30 % of its rows and is cut on 35 % with its letter kept: both flags
    fire, and the budget is not named as the OTHER rise's cause."""
    b = truncating_study(tmp_path / "s.duckdb", {"base": 0.02, "steered": 0.35}, answered=True, other=0.3)
    rep = report(b)
    assert named(rep, "truncation_rise") and named(rep, "other_rate_rise")
    kept = rep["delta_accuracy"]["steered"]["other_rate_untruncated"]
    assert kept["ci_low"] > 0
    (o,) = said(rep, "other_rate")
    assert o["token_budget"] is False and o["text"].startswith("steered answers OTHER (refuses")
    (t,) = said(rep, "truncation")
    assert (
        "the OTHER rise is not the token budget alone: with the truncated rows left out, Δ OTHER is still +"
        in t["text"]
    )


def test_arms_sharing_no_items_compare_truncation_unpaired(tmp_path: Path) -> None:
    b = truncating_study(tmp_path / "s.duckdb", {"base": 0.02, "steered": 0.35},
                              items={"base": range(0, 30), "steered": range(30, 60)})  # fmt: skip
    rep = report(b)
    d = rep["delta_accuracy"]["steered"]
    assert d["pairing"] == "unpaired"
    tr = d["truncated_rate"]
    assert tr["value"] == pytest.approx(round(0.35 * 120) / 120 - round(0.02 * 120) / 120, abs=1e-5)
    assert tr["n"] == 60 and tr["rows"] == 240 and tr["ci_low"] > 0
    (f,) = named(rep, "truncation_rise")
    assert (f["items"], f["rows"]) == (60, 240)
    assert said(rep, "other_rate")[0]["token_budget"] is True


# --- the views: a study without truncation looks as before; one with it shows the share of OTHER -----------------
def test_no_truncated_row_no_truncated_columns(tmp_path: Path) -> None:
    rep = report(truncating_study(tmp_path / "s.duckdb", {"base": 0.0, "steered": 0.0}, other=0.2))
    tr = rep["metrics"]["steered"]["truncated_rate"]
    assert (tr["value"], tr["ci_low"], tr["ci_high"], tr["n"]) == (0.0, 0.0, 0.0, 160)
    assert all(
        v["value"] == 0.0 and v["ci_high"] == 0.0
        for v in rep["metrics"]["base"]["truncated_rate_by_orientation"].values()
    )
    md = to_markdown(rep)  # type: ignore[arg-type]
    assert "truncated" not in md.lower()
    fig = fig_other_rate(rep)  # type: ignore[arg-type]
    assert [t.name for t in fig.data] == ["OTHER rate", "ungraded rate"]
    assert all(t.offsetgroup is None for t in fig.data)


def test_other_figure_stacks_the_cut_share_of_other(tmp_path: Path) -> None:
    """steered: 56 rows cut (OTHER) and a fifth of the rest refused (OTHER, not cut)."""
    budget = report(truncating_study(tmp_path / "s.duckdb", {"base": 0.02, "steered": 0.35}, other=0.2))
    fig = fig_other_rate(budget)  # type: ignore[arg-type]
    cut, rest, ungraded = fig.data
    assert (cut.name, rest.name, ungraded.name) == (
        "OTHER, cut by the token limit",
        "OTHER, not cut",
        "ungraded rate",
    )
    assert cut.offsetgroup == rest.offsetgroup == "other_rate" != ungraded.offsetgroup
    assert list(rest.base) == list(cut.y)  # the rest sits on the cut share: one stacked bar per arm
    m = budget["metrics"]
    for k, arm in enumerate(budget["arms"]):
        assert cut.y[k] + rest.y[k] == pytest.approx(m[arm]["other_rate"]["value"] * 100)
        assert cut.y[k] == pytest.approx(100 * m[arm]["truncated_other_rows"] / m[arm]["graded"])
    other = m["steered"]["other_rows"]
    assert other > 56
    assert list(cut.text) == ["3 of 3 OTHER", f"56 of {other} OTHER"]  # with its n
    assert list(rest.text) == ["", f"{other - 56} of {other} OTHER"]  # no label on an empty part
    svg = figure_svg(fig)
    assert f"56 of {other} OTHER" in svg and "OTHER, cut by the token limit" in svg
    # the two parts of steered's bar share one x and meet: the upper one starts where the lower one ends
    rects = re.findall(
        r'<rect x="([\d.]+)" y="([\d.]+)" width="[\d.]+" height="([\d.]+)" fill="([^"]+)"><title>([^<]*)', svg
    )
    steered = [r for r in rects if "steered" in r[4] and "OTHER" in r[4]]
    assert len(steered) == 2 and steered[0][0] == steered[1][0]
    lower, upper = sorted(steered, key=lambda r: -float(r[1]))
    assert float(upper[1]) + float(upper[2]) == pytest.approx(float(lower[1]), abs=0.2)
    assert "OTHER rate by arm" in to_html(budget)  # type: ignore[arg-type]


# --- through the public path: ingest with finish_reason and thinking blocks, then grade ------------------------
def test_a_reasoning_arm_cut_by_its_token_budget_through_ingest(tmp_path: Path) -> None:
    """A reasoning model's answers as a user has them: every generation thinks in a <think> block first. In
    ``steered`` 35 % of the rows ran out of tokens inside the thinking (finish_reason length, the block never
    closed: no answer), in ``base`` 2 %; the rest close the block and answer with a bare letter. Ingested,
    graded with --no-judge (the strict pre-filter reads the answer after the thinking; a truncated row with
    no answer is OTHER by rule), the report names the token budget."""
    rng = np.random.default_rng(3)
    rows = []
    for arm, rate in (("base", 0.02), ("steered", 0.35)):
        prompts = [
            p
            for k in range(40)
            for p in orient.orient_item(
                orient.Item(f"q{k:03d}", f"Question {k}?", tuple(f"answer {k}-{j}" for j in range(4)), k % 4),
                LABELS,
            )
        ]
        cut = set(rng.permutation(len(prompts))[: round(rate * len(prompts))].tolist())
        for j, p in enumerate(prompts):
            gold = p["gold"]
            pick = gold if rng.random() < 0.7 else LETTERS[(LETTERS.index(gold) + 1) % 4]
            if j in cut:
                text, finish = "<think>Option A looks plausible, and C is tempting, but", "length"
            else:
                text, finish = (
                    f"<think>Option A looks plausible, and C is tempting.</think>\n\n{pick}",
                    "stop",
                )
            rows.append({**p, "arm": arm, "generation": text, "finish_reason": finish})
    db = tmp_path / "study.duckdb"
    run_cli("ingest", str(write_jsonl(tmp_path / "g.jsonl", rows)), "--db", str(db), "--quiet", check=True)
    run_cli("grade", "--db", str(db), "--no-judge", "--quiet", check=True)
    rep = build_report(db, n_boot=BOOT, seed=0)
    m = rep["metrics"]
    assert (m["base"]["truncated_rows"], m["steered"]["truncated_rows"]) == (3, 56)
    assert m["steered"]["truncated_other_rows"] == m["steered"]["other_rows"] == 56
    assert (
        m["steered"]["ungraded_rate"]["value"] == 0
    )  # the letter after the thinking is read, not the A in it
    (f,) = named(dict(rep), "truncation_rise")
    assert (f["arm"], f["items"], f["rows"]) == ("steered", 40, 320)
    (o,) = said(dict(rep), "other_rate")
    assert o["token_budget"] is True
    assert o["text"].startswith("The OTHER rise is the token budget: 56 of 56 OTHER rows of steered were cut")
    assert "Raise the token limit or read the answers" in o["text"]
    # the thinking's "Option A" is not read as a pick: accuracy is what the answers after it say
    assert m["steered"]["answered_accuracy"]["value"] == pytest.approx(
        m["base"]["answered_accuracy"]["value"], abs=0.12
    )


# --- the dashboard's OTHER-by-arm page ------------------------------------------------------------------------
def test_other_page_shows_the_cut_share_of_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcqaudit.ui.pages.other import truncation_by_arm, truncation_by_orientation
    from tests.ui_study import BOOT as UI_BOOT
    from tests.ui_study import app, no_exceptions, report_of

    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", str(UI_BOOT))
    db = tmp_path / "s.duckdb"
    truncating_study(db, {"base": 0.02, "steered": 0.35}, other=0.1).build()
    rep = report_of(db)
    at = app(db, "other").run()
    no_exceptions(at)
    assert "Cut by the token limit" in [s.value for s in at.subheader]
    shown = " ".join(m.value for m in at.markdown)
    assert "**truncation_rise**" in shown and "**other_rate_rise**" in shown
    frames = [d.value for d in at.dataframe]
    by_arm = next(f for f in frames if "OTHER rows cut by the token limit" in f.columns).reset_index(
        drop=True
    )
    want = truncation_by_arm(rep)
    assert by_arm.astype(str).equals(want.astype(str))
    other = rep["metrics"]["steered"]["other_rows"]
    assert by_arm.loc[1, "OTHER rows cut by the token limit"] == f"56 of {other}"
    assert by_arm.loc[1, "truncated rate %"].endswith("n=160")  # every rate with its n
    assert by_arm.loc[0, "arm"] == "base (control)"
    by_or = next(f for f in frames if list(f.columns) == ["arm", "orientation", "truncated rate %"])
    assert by_or.astype(str).equals(truncation_by_orientation(rep).astype(str)) and len(by_or) == 8
    chart = at.get("plotly_chart")[0].proto.spec
    assert "OTHER, cut by the token limit" in chart and "56 of" in chart
