"""Recovery: simulated respondents with known parameters, through the real path — `mcqaudit ingest` →
`mcqaudit grade` (the stand-in judge, a real HTTP server) → `build_report` — and the estimates must recover
the truth within their CIs; each flag fires on the arm built for it and stays silent on a clean twin.

One study (built once per module), 4-option items with gold option A, shown in the 4 cyclic orientations:

| arm | respondent (p = 0.7 correct; wrong picks uniform over the other options) |
|---|---|
| `control` | baseline |
| `steered` | +0.25 correct in orientation ABCD only (the intervention works in one orientation) |
| `biased` | picks displayed A with probability 0.4, else as control (a first-position preference) |
| `refusing` | refuses (OTHER) with probability 0.3, else as control; its log-probs point at gold when it refuses |
| `verbose` | the control's picks, written "After careful thought, …": the naive parser reads "A" |
| `placebo` | the control's distribution with independent draws (a clean twin) |

Arms other than `placebo` share the control's random draws (a temperature-0 model answers the same way
unless the intervention changes it), so their differences carry only the built-in effect.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from mcqaudit import orient
from mcqaudit.app.report import build_report
from mcqaudit.standin.server import StandinOptions, StandinServer
from tests.helpers import run_cli, write_jsonl

# 160 items: in the three orientations where steered answers every item as control does, its Δ is 0 with the
# Wilson bound of no item answered differently (±2.3 pp at 160 items, ±4.6 pp at 80), which must lie below half
# of the overall Δ (+3.1 pp) for orientation_instability to show that the effect lives in one orientation
N_ITEMS = 160
P = 0.7
STEER = 0.25
BIAS = 0.4
REFUSE = 0.3
LABELS = orient.scheme_labels(4, "cyclic")


def _text(letter: str, option: str, style: int) -> str:
    if style == 0:
        return letter  # resolved by the strict pre-filter
    if style == 1:
        return f"{letter} is correct."  # sent to the judge
    return f"After careful thought, my final answer is ({letter}): {option}."


def generations(seed: int = 11) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for k in range(N_ITEMS):
        item = orient.Item(
            f"item{k:03d}",
            f"Question {k}: which one is right?",
            tuple(f"choice {k}-{j}" for j in range(4)),
            0,
        )
        for prompt in orient.orient_item(item, LABELS):
            lab, gold = prompt["orientation"], prompt["gold"]
            u, v, w, z = rng.random(4)
            wrong = [x for x in "ABCD" if x != gold][int(rng.integers(0, 3))]
            twin_u, twin_wrong = rng.random(), [x for x in "ABCD" if x != gold][int(rng.integers(0, 3))]
            style = int(rng.random() < 0.25)  # a quarter of the answers need the judge
            base_pick = gold if u < P else wrong
            picks = {
                "control": base_pick,
                "steered": gold if u < P + (STEER if lab == "ABCD" else 0.0) else wrong,
                "biased": "A" if v < BIAS else base_pick,
                "refusing": None if w < REFUSE else base_pick,
                "verbose": base_pick,
                "placebo": gold if twin_u < P else twin_wrong,
            }
            for arm, pick in picks.items():
                if pick is None:
                    gen = "I'm sorry, but I can't help with that."
                else:
                    option = prompt["options"]["ABCD".index(pick)]
                    gen = _text(pick, option, 2 if arm == "verbose" else style)
                row = {**prompt, "arm": arm, "generation": gen}
                if arm in ("control", "refusing"):
                    row["option_logprobs"] = {x: (-0.2 if x == (pick or gold) else -2.0) for x in "ABCD"}
                rows.append(row)
            del z
    return rows


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("recovery")
    src = write_jsonl(tmp / "generations.jsonl", generations())
    db = tmp / "study.duckdb"
    run_cli("ingest", str(src), "--db", str(db), "--control", "control", "--quiet", check=True)
    with StandinServer(StandinOptions(seed=0)) as judge:
        run_cli(
            "grade", "--db", str(db), "--judge-model", "standin-heuristic", "--judge-base-url", judge.base_url,
            "--quiet", "--concurrency", "32", env={"OPENAI_API_KEY": "x"}, check=True, timeout=300,
        )  # fmt: skip
    rep = build_report(db, n_boot=600, seed=1)
    (tmp / "report.json").write_text(json.dumps(rep, indent=1), encoding="utf-8")
    return rep


def covers(m: dict[str, Any] | None, truth: float) -> bool:
    return m is not None and m["ci_low"] - 1e-9 <= truth <= m["ci_high"] + 1e-9


def flags(rep: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [f for f in rep["flags"] if f["name"] == name]


def test_the_study_went_through_the_real_path(report: dict[str, Any]) -> None:
    assert report["arms"] == ["control", "steered", "biased", "refusing", "verbose", "placebo"]
    assert report["control_arm"] == "control" and report["control_source"] == "stored"
    assert report["rows"] == 6 * N_ITEMS * 4
    assert report["study"]["standin_judge"] is True
    (fp,) = report["judge_fingerprints"].values()
    assert fp["model"] == "standin-heuristic"
    for arm in report["arms"]:
        assert report["metrics"][arm]["ungraded_rate"]["value"] == 0.0
    assert not flags(report, "ungraded_rows") and not flags(report, "judge_config_mixed")
    assert flags(report, "judge_unaudited")  # no human has reviewed anything


def test_accuracy_and_placebo_recover_the_truth(report: dict[str, Any]) -> None:
    m = report["metrics"]
    assert covers(m["control"]["accuracy"], P)
    assert covers(m["placebo"]["accuracy"], P)
    assert covers(report["delta_accuracy"]["placebo"]["overall"], 0.0)
    assert covers(m["control"]["first_position_rate"], 0.25)
    assert m["control"]["position_baseline"] == "uniform"


def test_effect_in_one_orientation(report: dict[str, Any]) -> None:
    d = report["delta_accuracy"]["steered"]
    assert covers(d["by_orientation"]["ABCD"], STEER)
    for lab in LABELS[1:]:
        assert d["by_orientation"][lab]["value"] == 0.0
    assert covers(d["overall"], STEER / 4)
    assert [f["arm"] for f in flags(report, "orientation_instability") if f["arm"] == "steered"] == [
        "steered"
    ]


def test_first_position_preference(report: dict[str, Any]) -> None:
    m = report["metrics"]["biased"]
    truth = BIAS + (1 - BIAS) * 0.25  # under the balanced cyclic design, chance is 1/4
    assert covers(m["first_position_rate"], truth)
    assert m["first_position_rate"]["chance"] == 0.25
    assert m["first_position_rate"]["ci_low"] > 0.25
    # gold is option A, so ABCD shows it first: the preference helps there and hurts elsewhere
    d = report["delta_accuracy"]["biased"]["by_orientation"]
    assert covers(d["ABCD"], BIAS * (1 - P))
    assert covers(d["BCDA"], -BIAS * P)
    assert "biased" in {f["arm"] for f in flags(report, "orientation_instability")}


def test_refusals_in_one_arm(report: dict[str, Any]) -> None:
    m = report["metrics"]["refusing"]
    d = report["delta_accuracy"]["refusing"]
    assert covers(m["other_rate"], REFUSE)
    assert covers(d["other_rate"], REFUSE)
    assert covers(d["overall"], -REFUSE * P)
    assert covers(d["answered_accuracy"], 0.0)  # excluding OTHER, nothing changed
    (rise,) = flags(report, "other_rate_rise")
    assert rise["arm"] == "refusing" and "answered accuracy" in rise["evidence"]
    # log-probs point at the pick, or at gold when the text refuses: log-prob accuracy (1 - REFUSE) P + REFUSE
    lp = m["logprob_crosscheck"]
    assert covers(lp["difference"], REFUSE)
    assert [f["arm"] for f in flags(report, "logprob_mismatch")] == ["refusing"]
    assert report["metrics"]["control"]["logprob_crosscheck"]["difference"]["value"] == 0.0


def test_naive_parser_artifact(report: dict[str, Any]) -> None:
    # the verbose arm answers exactly like control; "After ..." makes naive read A everywhere
    d = report["delta_accuracy"]["verbose"]["overall"]
    z = 1.959963984540054
    w = z * z / (N_ITEMS + z * z)  # no item answered differently: the Wilson bound, not a CI of no width
    assert d["value"] == 0.0 and d["ci_high"] == pytest.approx(w, rel=1e-5) == -d["ci_low"]
    assert d["mde"] == pytest.approx(2.8 * w / z, rel=1e-5)
    naive = report["delta_accuracy_by_parser"]["verbose"]["naive"]
    assert naive["ci_high"] < -0.2
    hits = {(f["arm"], f.get("parser")) for f in flags(report, "suspected_parser_artifact")}
    assert ("verbose", "naive") in hits
    assert {f.get("parser") for f in flags(report, "parser_disagreement")} >= {"naive"}


def test_clean_twin_stays_silent(report: dict[str, Any]) -> None:
    for f in report["flags"]:
        assert f["arm"] != "placebo", f
    for name in (
        "orientation_instability",
        "other_rate_rise",
        "suspected_parser_artifact",
        "logprob_mismatch",
    ):
        assert all(f["arm"] not in ("placebo", "control") for f in flags(report, name))
