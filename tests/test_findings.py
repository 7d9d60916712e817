"""Findings and small samples (docs/design.md §7, §8): studies built through the real path — `mcqaudit ingest`, then
`mcqaudit grade --no-judge` or the stand-in judge — and the report's JSON, its findings and its Markdown.

Each study is one of the ways a first look goes wrong: arms that share 2 items or none (and a control
picked only for being ingested first), a design with every gold answer at A, a dozen reviews of ~1,900
rows, and the demo study, whose findings must tell its story in words.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mcqaudit import orient
from mcqaudit.app.report import build_report
from mcqaudit.demo import build_demo
from mcqaudit.report import findings, to_html, to_markdown
from mcqaudit.standin.server import StandinOptions, StandinServer
from tests.helpers import run_cli, write_jsonl

LABELS = orient.scheme_labels(4, "cyclic")


def _rows(arm: str, items: range, rng: np.random.Generator, p: float = 0.7,
          labels: list[str] = LABELS, gold: int | None = None, prose: float = 0.0) -> list[dict[str, Any]]:  # fmt: skip
    out = []
    for k in items:
        item = orient.Item(f"q{k:03d}", f"Question {k}?", tuple(f"answer {k}-{j}" for j in range(4)),
                           k % 4 if gold is None else gold)  # fmt: skip
        for prompt in orient.orient_item(item, labels):
            g = prompt["gold"]
            pick = g if rng.random() < p else [x for x in "ABCD" if x != g][int(rng.integers(0, 3))]
            text = f"I think {pick} is the one." if rng.random() < prose else pick
            out.append({**prompt, "arm": arm, "generation": text})
    return out


def _ingest(tmp: Path, rows: list[dict[str, Any]], *extra: str) -> Path:
    src = write_jsonl(tmp / "generations.jsonl", rows)
    db = tmp / "study.duckdb"
    run_cli("ingest", str(src), "--db", str(db), "--quiet", *extra, check=True)
    return db


def _no_judge(db: Path) -> None:
    run_cli("grade", "--db", str(db), "--no-judge", "--quiet", check=True)


def _flags(rep: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [f for f in rep["flags"] if f["name"] == name]


def _texts(rep: dict[str, Any], kind: str | None = None, arm: str | None = None) -> list[str]:
    return [f["text"] for f in rep["findings"] if (kind is None or f["kind"] == kind) and (arm is None or f["arm"] == arm)]


# --- arms sharing 2 items, or none; the control only ingested first ------------------------------------------
@pytest.fixture(scope="module")
def three_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """m1 answers items 0–39, m2 items 38–77 (2 shared with m1), m3 items 80–119 (none shared)."""
    tmp = tmp_path_factory.mktemp("three")
    rng = np.random.default_rng(7)
    rows = _rows("m1", range(0, 40), rng) + _rows("m2", range(38, 78), rng) + _rows("m3", range(80, 120), rng, p=0.4)
    db = _ingest(tmp, rows)
    _no_judge(db)
    return build_report(db, n_boot=300, seed=0)


def test_two_shared_items_give_no_delta_and_no_flag(three_models: dict[str, Any]) -> None:
    rep = three_models
    assert rep["control_arm"] == "m1" and rep["control_source"] == "first ingested"
    d = rep["delta_accuracy"]["m2"]
    assert d["overall"] is None and d["items"] == 2 and d["pairing"] == "paired"
    assert d["other_rate"] is None and d["answered_accuracy"] is None and d["by_orientation"] == {}
    assert rep["notes"]["delta_accuracy.m2.overall"].startswith("2 shared items")
    assert all(v is None for v in rep["delta_accuracy_by_parser"]["m2"].values())
    assert not [f for f in rep["flags"] if f["arm"] == "m2"]  # a Δ on 2 items drives no flag
    (text,) = _texts(rep, "headline", "m2")
    assert "not enough shared items (n=2) to compare" in text
    assert len(_texts(rep, arm="m2")) == 1  # nothing else is said from 2 items


def test_arms_sharing_no_items_are_compared_unpaired(three_models: dict[str, Any]) -> None:
    rep = three_models
    d = rep["delta_accuracy"]["m3"]
    assert d["pairing"] == "unpaired" and d["items"] == 80 and d["items_by_arm"] == {"m3": 40, "m1": 40}
    acc = rep["metrics"]
    assert d["overall"]["value"] == pytest.approx(acc["m3"]["accuracy"]["value"] - acc["m1"]["accuracy"]["value"], abs=1e-5)
    assert d["overall"]["ci_low"] < d["overall"]["value"] < d["overall"]["ci_high"]
    assert "unpaired" in rep["notes"]["delta_accuracy.m3"]
    (text,) = _texts(rep, "headline", "m3")
    assert "compared unpaired, since the arms share no items (40 and 40 items" in text
    assert "pp [" in text and "MDE" in text


def test_an_unpaired_other_rate_says_so(three_models: dict[str, Any]) -> None:
    (text,) = _texts(three_models, "other_rate", "m3")
    assert "of m3's graded rows vs" in text and "of m1's (all items of each); compared unpaired (80 items), Δ " in text


def test_rates_over_all_rows_and_a_delta_on_shared_items_say_which_is_which(tmp_path: Path) -> None:
    """The control answers 60 items and the treated arm 30 of them; both leave half their answers blank (OTHER
    by rule) on those 30 items alone. Over all its rows the treated arm is OTHER about twice as often as the
    control, yet on the shared items the two do not differ: the finding gives both figures, each with what it
    is taken over, so that a reader who subtracts the rates sees why they differ from the Δ."""
    rng = np.random.default_rng(3)
    rows = _rows("ctrl", range(0, 60), rng, p=0.8) + _rows("treated", range(0, 30), rng, p=0.8)
    for r in rows:
        if int(r["item_id"][1:]) < 30 and rng.random() < 0.5:
            r["generation"] = ""
    db = _ingest(tmp_path, rows, "--control", "ctrl")
    _no_judge(db)
    rep = build_report(db, n_boot=300, seed=0)

    def blank_share(arm: str, shared_only: bool) -> float:  # counted from the rows written, not the report
        mine = [r for r in rows if r["arm"] == arm and (not shared_only or int(r["item_id"][1:]) < 30)]
        return sum(r["generation"] == "" for r in mine) / len(mine)  # every row graded: a letter, or blank

    t, c = blank_share("treated", False), blank_share("ctrl", False)
    delta = blank_share("treated", True) - blank_share("ctrl", True)
    assert t - c > 0.15 and abs(delta) < 0.1  # the two bases disagree by more than 10 pp
    (text,) = _texts(rep, "other_rate", "treated")
    assert (
        f"{t * 100:.1f} % of treated's graded rows vs {c * 100:.1f} % of ctrl's (all items of each); on the "
        f"shared items (30 items), Δ {delta * 100:+.1f} pp [" in text
    ), text


def test_pairwise_matrix_and_control_source(three_models: dict[str, Any]) -> None:
    pw = three_models["pairwise_delta"]
    assert set(pw) == {"m1", "m2", "m3"} and "m1" not in pw["m1"]
    assert pw["m1"]["m2"] is None and pw["m2"]["m1"] is None
    assert three_models["notes"]["pairwise_delta.m1.m2"].startswith("2 shared items")
    e = pw["m2"]["m3"]
    assert e["pairing"] == "unpaired" and e["items"] == 80 and set(e) >= {"value", "ci_low", "ci_high", "n"}
    back = pw["m3"]["m2"]
    assert back["value"] == pytest.approx(-e["value"]) and back["ci_low"] == pytest.approx(-e["ci_high"])
    (ctrl,) = _texts(three_models, "control")
    assert "m1" in ctrl and "ingested first" in ctrl and "--control" in ctrl


def test_every_flag_states_its_n(three_models: dict[str, Any]) -> None:
    assert three_models["flags"]
    for f in three_models["flags"]:
        assert isinstance(f["items"], int) and isinstance(f["rows"], int), f
    (un,) = _flags(three_models, "judge_unaudited")
    assert (un["items"], un["rows"]) == (118, 480)  # 40 + 38 + 40 distinct items


def test_markdown_opens_with_findings_and_says_notes_in_words(three_models: dict[str, Any]) -> None:
    md = to_markdown(three_models)
    heads = re.findall(r"^## (.+)$", md, flags=re.M)
    assert heads[:2] == ["Findings", "Flags"] and heads.index("Flags") < heads.index("Headline")
    assert "Pairwise Δaccuracy" in heads
    notes = md[md.index("## Notes") :]
    assert "delta_accuracy.m2" not in notes and "`" not in notes
    assert "Δaccuracy m2 vs m1: 2 shared items" in notes


# --- every gold answer at A, one orientation ------------------------------------------------------------------
def test_all_gold_at_a_is_a_design_that_cannot_measure_position_bias(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    rows = [r for arm in ("base", "steered") for r in _rows(arm, range(30), rng, labels=["ABCD"], gold=0)]
    db = _ingest(tmp_path, rows)
    _no_judge(db)
    rep = build_report(db, n_boot=200)
    assert rep["design"]["gold_unbalanced"] and rep["design"]["one_orientation"]
    (flag,) = _flags(rep, "design_imbalance")
    assert "position pick rates" in flag["evidence"] and "RStd" in flag["evidence"]
    assert "orientation_instability" in flag["unreadable"] and (flag["items"], flag["rows"]) == (30, 60)
    for arm in rep["arms"]:
        m = rep["metrics"][arm]
        assert m["position_pick_rate"] is None and m["first_position_rate"] is None and m["rstd"] is None
        assert "unreadable" in rep["notes"][f"metrics.{arm}.position_pick_rate"]
    assert not _flags(rep, "orientation_instability")
    (design,) = _texts(rep, "design")
    assert design.startswith("The design cannot measure position bias") and "A 100 %" in design
    assert "one orientation only" in _texts(rep, "orientation", "steered")[0]
    md = to_markdown(rep)
    assert "chance 100.0" not in md and "chance 0.0" not in md


# --- a dozen reviews of ~1,900 rows ---------------------------------------------------------------------------
def _queue_and_review(db: Path, size: int, strategy: str, seed: int, tmp: Path) -> list[str]:
    out = run_cli("reviews", "queue", "--db", str(db), "--size", str(size), "--strategy", strategy,
                  "--seed", str(seed), "--json", check=True).stdout  # fmt: skip
    ids = json.loads(out.strip().splitlines()[-1])["rows"]
    src = write_jsonl(tmp / f"reviews-{strategy}-{size}.jsonl", [{"row_id": r, "verdict": "CORRECT"} for r in ids])
    run_cli("reviews", "import", str(src), "--db", str(db), "--reviewer", "tester", check=True)
    return ids


def test_a_dozen_reviews_leave_the_judge_unaudited_and_agreement_preliminary(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    rows = _rows("base", range(240), rng, prose=0.02) + _rows("steered", range(240), rng, prose=0.02)
    rows = rows[:1898]  # 1,898 rows, as in the report that prompted this
    db = _ingest(tmp_path, rows, "--control", "base")
    with StandinServer(StandinOptions(seed=0)) as judge:
        run_cli("grade", "--db", str(db), "--judge-model", "standin-heuristic", "--judge-base-url", judge.base_url,
                "--quiet", env={"OPENAI_API_KEY": "x"}, check=True, timeout=300)  # fmt: skip
    _queue_and_review(db, 12, "uniform", 1, tmp_path)
    rep = build_report(db, n_boot=200)
    (flag,) = _flags(rep, "judge_unaudited")
    assert (flag["reviewed_rows"], flag["required_rows"], flag["rows"]) == (12, 100, 1898)
    assert "12 of the 100 rows" in flag["evidence"]
    ag = rep["judge_agreement"]
    assert ag["preliminary"] is True and ag["reviewed_rows"] == 12
    assert rep["metrics"]["base"]["judge_agreement"]["corrected_accuracy"]["preliminary"] is True
    (audit,) = _texts(rep, "audit")
    assert "12 of the 100 rows" in audit and "preliminary" in audit
    md = to_markdown(rep)
    assert "all arms (preliminary)" in md and "Preliminary: fewer than 100 reviewed rows" in md
    assert "corrected" not in " ".join(_texts(rep))  # no judge-corrected accuracy as a finding

    # 100 reviewed rows of a stratified hunt do not audit the judge; 100 of a uniform spot check do
    _queue_and_review(db, 100, "stratified", 2, tmp_path)
    rep = build_report(db, n_boot=0)
    assert _flags(rep, "judge_unaudited") and rep["audit"]["audited"] is False
    _queue_and_review(db, 100, "uniform", 3, tmp_path)
    rep = build_report(db, n_boot=0)
    assert not _flags(rep, "judge_unaudited") and rep["audit"]["audited"] is True
    assert rep["judge_agreement"]["preliminary"] is False and not _texts(rep, "audit")


# --- the demo study tells its story ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_demo(tmp_path_factory.mktemp("demo") / "demo.duckdb")


@pytest.fixture(scope="module")
def demo_report(demo_db: Path) -> dict[str, Any]:
    return build_report(demo_db)


def test_demo_findings_tell_the_story(demo_report: dict[str, Any]) -> None:
    rep = demo_report
    kinds = [f["kind"] for f in rep["findings"]]
    assert kinds[:5] == ["headline", "parser", "parser", "other_rate", "orientation"]
    head = rep["findings"][0]
    assert head["arm"] == "steered" and head["n_items"] == 120 and head["n_rows"] == 800
    assert head["text"].startswith("steered vs base: Δaccuracy -2.7 pp [-7.3, +2.3] on 120 shared items")
    assert "a null here is informative" in head["text"] and head["informative"] is True
    naive = next(f for f in rep["findings"] if f.get("parser") == "naive" and f["arm"] == "steered")
    assert naive["artifact"] and naive["value"] == pytest.approx(-0.265, abs=1e-3)
    assert "-26.5 pp [" in naive["text"] and "invents an effect" in naive["text"]
    other = next(f for f in rep["findings"] if f["kind"] == "other_rate" and f["arm"] == "steered")
    assert "answers OTHER" in other["text"] and "more often" in other["text"] and "19.5 %" in other["text"]
    assert "answered rows only, Δaccuracy is +15.0 pp" in other["text"]
    # orientations are compared within each item family, never BA (2-option items) against ABCD (4-option)
    orient_ = [f for f in rep["findings"] if f["kind"] == "orientation" and f["arm"] == "steered"]
    assert [(f["family"], f["n_items"]) for f in orient_] == [("2-option items", 40), ("4-option items", 80)]
    for f, labels in zip(orient_, (("AB", "BA"), ("ABCD", "BCDA", "CDAB", "DABC")), strict=True):
        assert f"within {f['family']} ({f['n_items']} items)" in f["text"]
        others = {"AB", "BA", "ABCD", "BCDA", "CDAB", "DABC"} - set(labels)
        assert not any(re.search(rf"\b{x}\b", f["text"]) for x in others), f["text"]
    two = rep["delta_accuracy"]["steered"]["by_family"]["2-option items"]["by_orientation"]
    assert two["BA"]["value"] == pytest.approx(-0.35) and two["AB"]["value"] == pytest.approx(0.0)
    assert not [f for f in rep["flags"] if f["name"] == "orientation_instability"]
    assert findings(rep) == rep["findings"]  # pure: the same sentences from the dict alone


def test_demo_reasoning_arm_is_read_after_its_thinking(demo_report: dict[str, Any]) -> None:
    """The thinking arm (a reasoning model cut off by its token budget on 30 % of rows): its answers are read,
    not its thinking, so the naive parser agrees with the verdicts and only the user's parser, which read the
    raw text, invents an effect."""
    rep = demo_report
    mine = [f for f in rep["findings"] if f.get("arm") == "thinking"]
    head = mine[0]
    assert head["kind"] == "headline" and head["n_items"] == 120 and head["n_rows"] == 800
    assert head["text"].startswith("thinking vs base: Δaccuracy -19.8 pp [")
    by_parser = {f["parser"]: f for f in mine if f["kind"] == "parser"}
    assert "in line with the verdicts" in by_parser["naive"]["text"] and not by_parser["naive"]["artifact"]
    assert by_parser["user"]["artifact"] and "-53.5 pp [" in by_parser["user"]["text"]
    artifacts = {(f["arm"], f["parser"]) for f in rep["flags"] if f["name"] == "suspected_parser_artifact"}
    assert ("thinking", "user") in artifacts and ("thinking", "naive") not in artifacts
    other = next(f for f in mine if f["kind"] == "other_rate")
    assert "31.0 % of thinking's graded rows vs 4.2 % of base's (all items of each)" in other["text"]
    assert "on the shared items (120 items, 800 rows), Δ +26.8 pp [" in other["text"]
    # the token budget is named as the cause: the flag, and the OTHER finding's words
    (cut,) = [f for f in rep["flags"] if f["name"] == "truncation_rise"]
    assert cut["arm"] == "thinking" and cut["items"] == 120
    assert "truncated rate 29.8 % vs 0.0 % in base" in cut["evidence"] and "119 of 400 rows" in cut["evidence"]
    assert other["text"].startswith("The OTHER rise is the token budget: 119 of 124 OTHER rows of thinking")
    assert rep["metrics"]["thinking"]["truncated_rate"]["value"] == pytest.approx(119 / 400)


def test_demo_reasoning_arm_rows_are_split_and_cut_rows_never_judged(demo_db: Path) -> None:
    from mcqaudit.store import Study

    by_arm = {
        arm: (rows, cut, blank, rule, judged)
        for arm, rows, cut, blank, rule, judged in Study(demo_db).query(
            "SELECT arm, count(*), count(*) FILTER (truncated), count(*) FILTER (truncated AND answer = ''),"
            " count(*) FILTER (truncated AND final_verdict = 'OTHER' AND verdict_source = 'rule'),"
            " count(*) FILTER (judge_status = 'ok') FROM graded_rows GROUP BY arm"
        )
    }
    assert by_arm["base"][1] == by_arm["steered"][1] == 0
    rows, cut, blank, rule, judged = by_arm["thinking"]
    assert rows == 400 and cut == blank == rule == 119  # 29.8 %: cut inside the thinking, OTHER by rule
    # the rest are terse answers the strict pre-filter resolves once the thinking is split off
    assert judged == 5
    # the parsers read the answer (no letter where there is none); the user's letters came from the raw text
    letters = Study(demo_db).query(
        "SELECT count(naive_letter), count(user_letter) FROM graded_rows WHERE arm = 'thinking' AND truncated"
    )
    assert letters == [(0, 119)]


def test_demo_html_is_small_offline_and_opens_with_findings(demo_report: dict[str, Any]) -> None:
    page = to_html(demo_report)
    assert len(page.encode()) < 1_500_000
    assert "<script" not in page and not re.search(r"(src|href)=", page)
    assert page.index("<h2>Findings</h2>") < page.index("<h2>Flags</h2>") < page.index("<h2>Headline</h2>")
    assert page.count("<svg") >= 8


# --- the wording, on hand-made reports ------------------------------------------------------------------------
def _m(v: float, lo: float, hi: float, n: int = 50, mde: float | None = None) -> dict[str, Any]:
    return {"value": v, "ci_low": lo, "ci_high": hi, "n": n, "se": None, "mde": mde}


def _report(overall: dict[str, Any], naive: dict[str, Any] | None, flags: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "arms": ["base", "new"], "control_arm": "base", "control_source": "stored", "rows": 400,
        "study": {"items": 50}, "flags": flags, "notes": {}, "design": {}, "audit": {"audited": True},
        "metrics": {a: {"other_rate": _m(0.05, 0.03, 0.07)} for a in ("base", "new")},
        "delta_accuracy": {"new": {"overall": overall, "by_orientation": {}, "other_rate": _m(0.0, -0.02, 0.02),
                                   "answered_accuracy": _m(0.0, -0.05, 0.05), "items": 50, "rows": 400,
                                   "pairing": "paired"}},
        "delta_accuracy_by_parser": {"new": {"naive": naive}},
    }  # fmt: skip


def test_a_wide_null_is_not_informative_and_a_hidden_effect_is_named() -> None:
    wide = findings(_report(_m(0.01, -0.2, 0.22, mde=0.3), _m(0.0, -0.1, 0.1), []))
    assert "with an MDE of 30.0 pp a null here is not informative" in wide[0]["text"]
    assert "in line with the verdicts" in wide[1]["text"]
    assert "The OTHER rate shows no clear change" in wide[2]["text"]
    art = [{"name": "suspected_parser_artifact", "arm": "new", "parser": "naive", "evidence": "", "items": 50, "rows": 400}]
    hid = findings(_report(_m(0.12, 0.05, 0.19, mde=0.07), _m(0.01, -0.03, 0.05), art))
    assert "the CI excludes 0" in hid[0]["text"] and "hides the effect the verdicts show" in hid[1]["text"]
