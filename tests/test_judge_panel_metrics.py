"""The judge panel in the report (docs/design.md §7 ``judge_panel``, flag ``judge_sensitive``; issue 21): two
and three scripted judges on 127.0.0.1 through the real ``openai`` client (``mcqaudit grade`` and
``grade --panel``), the report read back from the study file. Every expected figure is a hand count from the
scripts' known rules (which rows each judge reads otherwise), never a call into the code under test.

The study: ``N`` items shown to two arms in one orientation, gold A; each generation names one option in prose
(the judge must read it). ``base`` names the gold on items ``i % 4 == 0``, ``steered`` on ``i % 4 != 3``
(Δ +50 pp); four more items per arm are resolved by the strict pre-filter (letter A), never judged.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.store import Study
from mcqaudit.vocab import CORRECT, INCORRECT, OTHER
from tests.helpers import run_cli
from tests.judge_servers import Call, Reply, ScriptedJudge, add_rows

N = 40  # judged items
STRICT = 4  # items the pre-filter resolves (CORRECT in both arms)
OPTS = ["a red fruit", "a yellow fruit", "a green vegetable", "a root vegetable"]
ARMS = ("base", "steered")
BOOT = "400"


def picks_gold(arm: str, i: int) -> bool:
    return i % 4 == 0 if arm == "base" else i % 4 != 3


def rows() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for arm in ARMS:
        for i in range(N):
            opt = OPTS[0] if picks_gold(arm, i) else OPTS[1]
            out.append(dict(row_id=f"{arm}-{i}", arm=arm, item_id=f"item{i:02d}", options=OPTS, gold_letter="A",
                            generation=f"Thinking it over (row {arm} {i}), I would say it is {opt}."))  # fmt: skip
        for i in range(N, N + STRICT):
            out.append(dict(row_id=f"{arm}-{i}", arm=arm, item_id=f"item{i:02d}", options=OPTS, gold_letter="A",
                            generation="A", strict_letter="A"))  # fmt: skip
    return out


def row_of(call: Call) -> tuple[str, int]:
    m = re.search(r"\(row (\w+) (\d+)\)", call.user)
    assert m, call.user
    return m.group(1), int(m.group(2))


# --- the judges: each a rule over (arm, i), so the test can count what it says --------------------------
def primary_rule(arm: str, i: int) -> str | None:
    """The heuristic: the named option's letter, so CORRECT exactly where the row names the gold."""
    return CORRECT if picks_gold(arm, i) else INCORRECT


def second_rule(arm: str, i: int) -> str | None:
    """Agrees with the primary but answers OTHER on items i % 10 == 3 and fails (an unreadable reply: no
    verdict) on items i % 10 == 7, in both arms."""
    if i % 10 == 7:
        return None
    return OTHER if i % 10 == 3 else primary_rule(arm, i)


def flip_rule(arm: str, i: int) -> str | None:
    """Reads every steered answer as option B (INCORRECT): the steered arm's gain turns into a loss."""
    return INCORRECT if arm == "steered" else primary_rule(arm, i)


LETTER = {CORRECT: "A", INCORRECT: "B", OTHER: "OTHER"}  # the gold is A; every wrong answer names option B


def responder(rule):  # type: ignore[no-untyped-def]
    """A scripted judge answering by ``rule`` over the row the prompt shows: the letter of its verdict, or a
    reply no parser reads (the request fails) where the rule gives none."""

    def respond(call: Call) -> Reply:
        if call.parsed is None:
            return Reply("OTHER")
        got = rule(*row_of(call))
        return Reply("??" if got is None else LETTER[got])

    return respond


def fp(model: str) -> str:
    return JudgeConfig(model=model).fingerprint


def build(tmp_path: Path, *panel: str) -> Path:
    """A study graded by the primary ("scripted") and the named panel judges ("second", "flip")."""
    study = Study(tmp_path / "s.duckdb", create=True)
    add_rows(study, rows())
    rules = {"second": second_rule, "flip": flip_rule}
    with ScriptedJudge(responder(primary_rule)) as one:
        proc = run_cli(
            "grade", "--db", str(study.path), "--judge-model", "scripted", "--judge-base-url", one.base_url
        )
        assert proc.returncode == 0, proc.stderr
        assert one.count == 2 * N  # the pre-filter's rows are never sent
    for model in panel:
        with ScriptedJudge(responder(rules[model]), model=model) as srv:
            proc = run_cli("grade", "--db", str(study.path), "--judge-model", model, "--judge-base-url",
                           srv.base_url, "--panel")  # fmt: skip
            assert proc.returncode in (0, 3), proc.stderr  # 3: some requests failed (the second judge's)
            assert srv.count >= 2 * N
    return study.path


def report(db: Path, fmt: str = "json", *extra: str) -> dict:  # type: ignore[type-arg]
    proc = run_cli("report", "--db", str(db), "--format", fmt, "--bootstrap", BOOT, *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if fmt == "json" else {"text": proc.stdout}


# --- hand counts ------------------------------------------------------------------------------------------
def judged() -> list[tuple[str, int]]:
    return [(a, i) for a in ARMS for i in range(N)]


def confusion(rule) -> dict[tuple[str, str], int]:  # type: ignore[no-untyped-def]
    out: dict[tuple[str, str], int] = {}
    for a, i in judged():
        if (v := rule(a, i)) is not None:
            key = (primary_rule(a, i) or "", v)
            out[key] = out.get(key, 0) + 1
    return out


def cohen(conf: dict[tuple[str, str], int]) -> tuple[float, float, int]:
    n = sum(conf.values())
    po = sum(k for (p, q), k in conf.items() if p == q) / n
    pe = sum(sum(k for (p, _), k in conf.items() if p == v) * sum(k for (_, q), k in conf.items() if q == v)
             for v in (CORRECT, INCORRECT, OTHER)) / (n * n)  # fmt: skip
    return po, (po - pe) / (1 - pe), n


def krippendorff(units: list[list[str]]) -> float:
    """Nominal α by its textbook definition: the coincidence matrix over the pairable units."""
    o: dict[tuple[str, str], float] = {}
    for vals in units:
        m = len(vals)
        if m < 2:
            continue
        for x in range(m):
            for y in range(m):
                if x != y:
                    o[(vals[x], vals[y])] = o.get((vals[x], vals[y]), 0.0) + 1 / (m - 1)
    n_c = {c: sum(v for (a, _), v in o.items() if a == c) for c in (CORRECT, INCORRECT, OTHER)}
    n = sum(n_c.values())
    d_o = sum(v for (a, b), v in o.items() if a != b)
    d_e = sum(n_c[a] * n_c[b] for a in n_c for b in n_c if a != b)
    return 1 - (n - 1) * d_o / d_e


def delta(rule) -> float:  # type: ignore[no-untyped-def]
    """Δaccuracy steered − base under a judge: each item once (one orientation), on the items both arms have a
    verdict for; the pre-filter's items CORRECT in both."""
    diffs = [0.0] * STRICT
    for i in range(N):
        vb, vs = rule("base", i), rule("steered", i)
        if vb is not None and vs is not None:
            diffs.append((vs == CORRECT) - (vb == CORRECT))
    return sum(diffs) / len(diffs)


def close(x: float | None, y: float) -> None:
    assert x is not None and abs(x - y) < 1e-5, (x, y)


# --- the tests --------------------------------------------------------------------------------------------
def test_agreement_kappa_and_alpha_against_a_hand_count(tmp_path: Path) -> None:
    db = build(tmp_path, "second")
    rep = report(db)
    jp = rep["judge_panel"]
    assert jp["primary"] == fp("scripted") and jp["primary_model"] == "scripted"
    e = jp["judges"][fp("second")]
    assert e["model"] == "second"
    # the second judge: 80 rows asked, 8 failed (items 7, 17, 27, 37 in both arms), 8 OTHER of the 72 it read
    assert (e["rows"], e["graded"], e["compared_rows"]) == (2 * N, 2 * N - 8, 2 * N - 8)
    close(e["error_rate"]["value"], 8 / 80)
    assert e["error_rate"]["n"] == 80
    close(e["other_rate"]["value"], 8 / 72)
    conf = confusion(second_rule)
    assert sum(conf.values()) == 72 and sum(k for (p, q), k in conf.items() if p != q) == 8
    po, kappa, n = cohen(conf)
    close(e["agreement_with_primary"]["value"], po)
    close(e["agreement_with_primary"]["value"], 64 / 72)
    close(e["kappa_with_primary"]["value"], kappa)
    assert e["agreement_with_primary"]["n"] == e["kappa_with_primary"]["n"] == n == 72
    for m in (e["agreement_with_primary"], e["kappa_with_primary"]):
        assert m["ci_low"] <= m["value"] <= m["ci_high"] and m["ci_low"] < m["ci_high"]
    # the hand count of the OTHER rows: base items 3, 13, 23, 33 (all INCORRECT by the primary); steered 3, 23
    # (INCORRECT) and 13, 33 (CORRECT)
    assert e["confusion"][INCORRECT][OTHER] == 6 and e["confusion"][CORRECT][OTHER] == 2
    note = rep["notes"][f"judge_panel.judges.{fp('second')}"]
    assert note.startswith("graded 72 of the 80 rows the primary judge graded")
    # α over the two judges: the 8 rows the second failed on have one value and drop out
    units = [[v for v in (primary_rule(a, i), second_rule(a, i)) if v is not None] for a, i in judged()]
    close(jp["alpha"]["value"], krippendorff(units))
    assert jp["alpha"]["n"] == 72
    # two coders, no missing value in the 72: α = 1 − (n − 1) D_o / Σ n_c n_k with n = 144
    n_c = {CORRECT: 38 + 36, INCORRECT: 34 + 28, OTHER: 8}
    close(jp["alpha"]["value"], 1 - 143 * 16 / (144**2 - sum(v * v for v in n_c.values())))


def test_a_judge_that_flips_the_delta_fires_judge_sensitive(tmp_path: Path) -> None:
    db = build(tmp_path, "second", "flip")
    rep = report(db)
    jp = rep["judge_panel"]
    primary = rep["delta_accuracy"]["steered"]["overall"]
    close(primary["value"], delta(primary_rule))
    close(primary["value"], 20 / 44)
    by = jp["delta_by_judge"]
    close(by[fp("flip")]["steered"]["overall"]["value"], delta(flip_rule))
    close(
        by[fp("flip")]["steered"]["overall"]["value"], -10 / 44
    )  # the pre-filter's 4 items keep their verdicts
    close(by[fp("second")]["steered"]["overall"]["value"], delta(second_rule))
    assert by[fp("second")]["steered"]["items"] == 44 - 4  # items 7..37 are ungraded under it in both arms
    assert set(by[fp("flip")]["steered"]) >= {
        "overall",
        "by_orientation",
        "other_rate",
        "items",
        "rows",
        "pairing",
    }
    flags = [f for f in rep["flags"] if f["name"] == "judge_sensitive"]
    assert [(f["arm"], f["judge"]) for f in flags] == [("steered", fp("flip"))]  # the agreeing judge: none
    f = flags[0]
    assert f["items"] == 44 and f["rows"] > 0 and f["page"] == "Overview"
    assert "flip" in f["evidence"] and "-22.7" in f["evidence"] and "+45.5" in f["evidence"]
    found = [x for x in rep["findings"] if x["kind"] == "judge_panel"]
    assert len(found) == 1 and found[0]["holds"] is False
    assert "depends on the judge: under flip" in found[0]["text"] and "-22.7 pp" in found[0]["text"]
    assert "n=44 items" in found[0]["text"]
    # α over three judges, the second's failed rows missing: the textbook count
    units = [[v for v in (primary_rule(a, i), second_rule(a, i), flip_rule(a, i)) if v is not None]
             for a, i in judged()]  # fmt: skip
    close(jp["alpha"]["value"], krippendorff(units))
    assert jp["alpha"]["n"] == 2 * N
    md = report(db, "md")["text"]
    assert "## Judge panel" in md and "| flip (" in md and "depends on the judge" in md
    gate = run_cli("check", "--db", str(db), "--fail-on", "judge_sensitive", "--bootstrap", BOOT)
    assert gate.returncode == 1 and "judge_sensitive" in gate.stdout and "under judge flip" in gate.stdout


def test_an_agreeing_judge_says_the_finding_holds(tmp_path: Path) -> None:
    db = build(tmp_path, "second")
    rep = report(db)
    assert not [f for f in rep["flags"] if f["name"] == "judge_sensitive"]
    found = [x for x in rep["findings"] if x["kind"] == "judge_panel"]
    assert len(found) == 1 and found[0]["holds"] is True
    assert "holds under both judges (n=44 items)" in found[0]["text"]
    assert found[0]["judges"] == {fp("second"): pytest.approx(delta(second_rule), abs=1e-5)}
    # the headline finding comes first, the panel's right after it
    kinds = [x["kind"] for x in rep["findings"] if x["arm"] == "steered"]
    assert kinds[:2] == ["headline", "judge_panel"]


def test_no_panel_says_one_judge(tmp_path: Path) -> None:
    db = build(tmp_path)
    rep = report(db)
    assert rep["judge_panel"] is None
    assert rep["notes"]["judge_panel"].startswith("one judge: the finding is not checked against another")
    assert not [x for x in rep["findings"] if x["kind"] == "judge_panel"]
    md = report(db, "md")["text"]
    assert "## Judge panel\n\nOne judge: the finding is not checked against another" in md


def test_a_review_stays_final_under_every_judge(tmp_path: Path) -> None:
    """A human review is the final verdict whoever the judge: under the flip judge the steered rows ann
    reviewed keep her verdict (final view); the judge view leaves reviews out, so there the flip is whole."""
    db = build(tmp_path, "flip")
    labels = tmp_path / "ann.csv"
    reviewed = [i for i in range(N) if i % 4 == 1]  # 10 steered rows the primary (rightly) calls CORRECT
    labels.write_text("row_id,verdict\n" + "".join(f"steered-{i},CORRECT\n" for i in reviewed), encoding="utf-8")
    proc = run_cli("reviews", "import", str(labels), "--db", str(db), "--reviewer", "ann")
    assert proc.returncode == 0, proc.stderr

    def flip_reviewed(arm: str, i: int) -> str | None:
        return CORRECT if arm == "steered" and i in reviewed else flip_rule(arm, i)

    final = report(db)["judge_panel"]["delta_by_judge"][fp("flip")]["steered"]["overall"]
    close(final["value"], delta(flip_reviewed))
    close(final["value"], (14 - 14) / 44)
    judge = report(db, "json", "--verdicts", "judge")["judge_panel"]["delta_by_judge"][fp("flip")]["steered"]
    close(judge["overall"]["value"], delta(flip_rule))
