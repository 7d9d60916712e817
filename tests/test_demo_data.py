"""The demo study's inputs (sample_runs/): the hand-written items, the simulated respondent and its output.

The demo must show that a naive ``[A-D]`` parser fabricates an effect the judge removes, and that a reasoning
model's answers are read after its thinking, with the token budget named when it cut the thinking off. These
tests check that the committed generations are exactly what the simulator makes (the base and steered rows
exactly those of the two-arm demo), that the items are sound, and that the simulator's own latent truth has
the designed properties (see sample_runs/simulate.py and README.md).
"""

from __future__ import annotations

import collections
import hashlib
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from mcqaudit.ingest.items import read_items
from mcqaudit.orient import apply, scheme_labels
from mcqaudit.parsers import naive, strict
from mcqaudit.reasoning import FINISH_LENGTH, is_truncated, split_reasoning
from mcqaudit.standin.heuristic import pick_letter
from mcqaudit.vocab import CORRECT, LETTERS, OTHER

REPO = Path(__file__).resolve().parents[1]
SAMPLE_RUNS = REPO / "sample_runs"
ITEMS = SAMPLE_RUNS / "items.jsonl"
GENERATIONS = SAMPLE_RUNS / "generations.jsonl"

ARMS = ("base", "steered", "thinking")
ROWS_PER_ARM = 80 * 4 + 40 * 2
# sha256 of the two-arm demo's generations.jsonl (800 rows, base then steered), before the thinking arm was
# added: those rows must stay byte for byte what they were
TWO_ARM_SHA256 = "fcbb57ba4328902bc48900b5d3931a10fded627df5268e0abbb6e0009787cd5c"
# the thinking arm: share of its rows cut off by the token budget (design: about 30 %)
TRUNCATED_SHARE, TRUNCATED_TOLERANCE = 0.30, 0.07

ROW_FIELDS = [
    "item_id", "arm", "question", "options", "gold", "orientation", "prompt", "generation", "sample",
    "model", "parsed_letter",
]  # fmt: skip


@pytest.fixture(scope="module")
def sim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_simulate", SAMPLE_RUNS / "simulate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def items(sim: ModuleType) -> list:
    return sim.load_items(ITEMS)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [json.loads(line) for line in GENERATIONS.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def latent(sim: ModuleType, items: list) -> list:
    return sim.latent_truth(items)


# ---- reproducibility -------------------------------------------------------------------------------


def test_rerun_reproduces_committed_generations_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "generations.jsonl"
    # the documented command, in a fresh interpreter with a different hash seed
    proc = subprocess.run(
        [sys.executable, str(SAMPLE_RUNS / "simulate.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == GENERATIONS.read_bytes(), (
        "sample_runs/generations.jsonl is stale: run python sample_runs/simulate.py --out "
        "sample_runs/generations.jsonl"
    )


def test_in_process_rows_match_the_file(sim: ModuleType, items: list) -> None:
    assert sim.dumps_jsonl(sim.generation_rows(items)).encode("utf-8") == GENERATIONS.read_bytes()


def test_the_base_and_steered_rows_are_those_of_the_two_arm_demo(
    sim: ModuleType, items: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = GENERATIONS.read_bytes().splitlines(keepends=True)
    two_arm = b"".join(line for line in lines if json.loads(line)["arm"] in ("base", "steered"))
    assert lines[: 2 * ROWS_PER_ARM] == two_arm.splitlines(keepends=True)  # they come first
    assert hashlib.sha256(two_arm).hexdigest() == TWO_ARM_SHA256
    # and the thinking arm's draws do not touch theirs: without it, the simulator makes the same rows
    monkeypatch.setattr(sim, "ARMS", ("base", "steered"))
    assert hashlib.sha256(sim.dumps_jsonl(sim.generation_rows(items)).encode()).hexdigest() == TWO_ARM_SHA256


def test_another_seed_gives_other_generations(sim: ModuleType, items: list) -> None:
    a = sim.generation_rows(items, seed=sim.SEED)
    b = sim.generation_rows(items, seed=sim.SEED + 1)
    assert [r["generation"] for r in a] != [r["generation"] for r in b]


# ---- items -----------------------------------------------------------------------------------------


def test_items_are_valid_and_balanced(sim: ModuleType, items: list) -> None:
    raw = [json.loads(line) for line in ITEMS.read_text(encoding="utf-8").splitlines()]
    assert len(raw) == len(items)
    # the project's own items reader accepts the file and reads the same items
    assert [(i.item_id, i.options, i.gold_index) for i in read_items(ITEMS)] == [
        (i.item_id, i.options, i.gold_index) for i in items
    ]
    ids = [i.item_id for i in items]
    assert len(set(ids)) == len(ids)
    by_n = collections.defaultdict(list)
    for d, item in zip(raw, items, strict=True):
        assert re.fullmatch(r"[a-z]{3}-\d{3}", item.item_id), item.item_id
        assert isinstance(d["gold"], str) and d["gold"] in LETTERS[: len(item.options)]
        assert item.question.strip()
        texts = [o.strip().lower() for o in item.options]
        assert len(set(texts)) == len(texts), f"{item.item_id}: options not distinct"
        for a in texts:
            assert len(a) > 1, f"{item.item_id}: a one-character option cannot be told from a letter"
            for b in texts:
                assert a == b or a not in b, f"{item.item_id}: option {a!r} is inside {b!r}"
        meta = item.metadata or {}
        assert meta.get("topic") in {"geography", "science", "history", "arithmetic", "language"}
        assert meta.get("difficulty") in sim.P_KNOW
        by_n[len(item.options)].append(LETTERS[item.gold_index])
    assert set(by_n) == {2, 4}
    assert len(by_n[4]) >= 60 and len(by_n[2]) >= 30
    for n, golds in by_n.items():
        counts = collections.Counter(golds)
        assert set(counts) == set(LETTERS[:n])
        assert max(counts.values()) - min(counts.values()) <= 1, f"{n}-option gold letters: {counts}"


# ---- generation rows -------------------------------------------------------------------------------


def test_every_arm_item_orientation_exactly_once(sim: ModuleType, items: list, rows: list[dict]) -> None:
    assert sim.ARMS == ARMS
    assert collections.Counter(r["arm"] for r in rows) == {arm: ROWS_PER_ARM for arm in ARMS}
    keys = collections.Counter((r["arm"], r["item_id"], r["orientation"], r["sample"]) for r in rows)
    expected = {
        (arm, item.item_id, lab, 0)
        for arm in sim.ARMS
        for item in items
        for lab in scheme_labels(len(item.options), "cyclic")
    }
    assert set(keys) == expected
    assert set(keys.values()) == {1}


def test_rows_carry_the_input_fields(items: list, rows: list[dict]) -> None:
    by_id = {i.item_id: i for i in items}
    with_logprobs: collections.Counter[str] = collections.Counter()
    for r in rows:
        assert list(r)[: len(ROW_FIELDS)] == ROW_FIELDS
        item = by_id[r["item_id"]]
        n = len(item.options)
        assert r["options"] == apply(item.options, r["orientation"])
        assert r["options"][LETTERS.index(r["gold"])] == item.options[item.gold_index]
        assert r["question"] == item.question and r["question"] in r["prompt"]
        assert r["generation"].strip()
        # the user's parser is the naive one, on the whole generation (the thinking included): the
        # dashboard's `user` column must show exactly its letters
        assert r["parsed_letter"] == naive(r["generation"], n)
        # only the reasoning model's rows say why they stopped and what they used
        assert ("finish_reason" in r) == ("usage" in r) == (r["arm"] == "thinking")
        if "option_logprobs" in r:
            with_logprobs[r["arm"]] += 1
            lp = r["option_logprobs"]
            assert list(lp) == list(LETTERS[:n])
            assert abs(math.log(sum(math.exp(v) for v in lp.values()))) < 1e-3  # a softmax
    assert with_logprobs["base"] == with_logprobs["steered"]  # the same items in both
    assert 0.2 * ROWS_PER_ARM < with_logprobs["base"] < 0.8 * ROWS_PER_ARM
    assert with_logprobs["thinking"] == 0  # its first token is <think>, not a letter


def test_standin_judge_reads_every_generation_as_the_simulator_meant(rows: list[dict], latent: list) -> None:
    # every pick must be unambiguous and every refusal/hedge must pick nothing: the bundled stand-in judge
    # (a heuristic) and the strict pre-filter must recover the latent truth
    # (the thinking arm's answer: what ingest splits off its thinking, which is all the judge is sent)
    assert len(rows) == len(latent)
    wrong = []
    for r, lat in zip(rows, latent, strict=True):
        assert (r["arm"], r["item_id"], r["orientation"]) == (lat.arm, lat.item_id, lat.orientation)
        answer = split_reasoning(r["generation"]).answer
        assert answer == (r["generation"] if r["arm"] != "thinking" else lat.answer)
        if not answer.strip():
            assert lat.truncated and lat.picked_letter is None  # OTHER by rule, never judged
        elif pick_letter(r["options"], answer) != lat.picked_letter:
            wrong.append((answer, lat.picked_letter))
        s = strict(answer, r["options"])
        assert s is None or s == lat.picked_letter, answer
    assert len(wrong) <= 0.01 * len(rows), wrong[:10]


def test_every_template_reads_unambiguously_for_every_item(sim: ModuleType, items: list) -> None:
    # beyond the drawn rows: any seed may pair any template with any option. Covered: every option under
    # its canonical letter, and every option under A (the letter that is also an English word)
    wrong = []
    for item in items:
        n = len(item.options)
        for k, lab in enumerate(scheme_labels(n, "cyclic")):
            shown = apply(item.options, lab)
            for arm in sim.ARMS:
                for _, template in sim.PICK_FORMS[arm]:
                    if k and "{T}" not in template:
                        continue  # a letter-only answer reads the same in every orientation
                    for pos, letter in enumerate(LETTERS[: n if k == 0 else 1]):
                        text = template.replace("{L}", letter).replace("{T}", shown[pos])
                        if pick_letter(shown, text) != letter or strict(text, shown) not in (None, letter):
                            wrong.append(text)
        for arm in sim.ARMS:
            for _, template in sim.OTHER_FORMS[arm]:
                text = template.replace("{L1}", "A").replace("{L2}", "B")
                if pick_letter(item.options, text) is not None:
                    wrong.append(text)
    assert not wrong, wrong[:10]


def test_the_thinking_opens_on_a_letter_it_only_muses_over(sim: ModuleType, items: list) -> None:
    # a parser that reads the raw text reads the opener's letter: every opener, every letter and option
    wrong = []
    for item in items:
        n = len(item.options)
        for _, template in sim.THINKING_OPENER_FORMS:
            for pos, letter in enumerate(LETTERS[:n]):
                text = "<think>\n" + template.replace("{M}", letter).replace("{TM}", item.options[pos])
                if naive(text, n) != letter:
                    wrong.append(text)
    assert not wrong, wrong[:10]


# ---- the thinking arm: a reasoning model under a token budget -------------------------------------


def test_thinking_rows_think_then_answer_or_run_out_of_tokens(
    sim: ModuleType, rows: list[dict], latent: list
) -> None:
    budget, cap = sim.THINKING_MAX_TOKENS, sim.THINKING_MAX_TOKENS * sim.CHARS_PER_TOKEN
    cut = 0
    for r, lat in zip(rows, latent, strict=True):
        if r["arm"] != "thinking":
            assert not lat.truncated
            continue
        g, usage = r["generation"], r["usage"]
        split = split_reasoning(g)
        assert g.startswith("<think>\n") and split.reasoning
        assert usage["prompt_tokens"] == math.ceil(len(r["prompt"]) / sim.CHARS_PER_TOKEN)
        assert lat.truncated == is_truncated(r["finish_reason"], split.closed)
        if lat.truncated:
            cut += 1
            # cut off inside the thinking, at the budget: the block never closes and there is no answer
            assert r["finish_reason"] == FINISH_LENGTH and usage["completion_tokens"] == budget
            assert "</think>" not in g and len(g) == cap and split.answer == ""
            assert lat.verdict == OTHER and lat.behaviour == sim.TRUNCATED
        else:
            assert r["finish_reason"] == "stop" and g.count("</think>") == 1
            assert usage["completion_tokens"] == math.ceil(len(g) / sim.CHARS_PER_TOKEN) < budget
            assert split.closed and split.answer == lat.answer and split.answer.strip()
        # the raw text's first letter is the thinking's (one it muses over), not the answer's
        assert r["parsed_letter"] is not None
        assert r["parsed_letter"] == naive(split.reasoning, len(r["options"]))
    assert abs(cut / ROWS_PER_ARM - TRUNCATED_SHARE) <= TRUNCATED_TOLERANCE, cut


def test_thinking_runs_out_of_tokens_more_often_on_what_it_does_not_know(latent: list) -> None:
    thinking = [lat for lat in latent if lat.arm == "thinking"]
    share = {
        knows: np.mean([lat.truncated for lat in thinking if lat.knows == knows]) for knows in (True, False)
    }
    assert share[False] > share[True] + 0.15, share


def test_the_thinking_arm_knows_what_the_others_know(latent: list) -> None:
    knows = collections.defaultdict(set)
    for lat in latent:
        knows[lat.item_id].add(lat.knows)
    assert all(len(v) == 1 for v in knows.values())
    # on the rows it finishes, it answers what it knows: only a hedge now and then is not the gold
    finished_known = [lat for lat in latent if lat.arm == "thinking" and lat.knows and not lat.truncated]
    assert np.mean([lat.verdict == CORRECT for lat in finished_known]) > 0.95


def test_reading_the_thinking_fabricates_letters_reading_the_answer_does_not(
    rows: list[dict], latent: list
) -> None:
    thinking = [lat for lat in latent if lat.arm == "thinking"]
    n_options = {r["item_id"]: len(r["options"]) for r in rows}
    cut = [lat for lat in thinking if lat.truncated]
    # the raw text gives a letter on every row the budget cut off: a letter the model never answered
    assert all(lat.naive_letter is not None for lat in cut)
    # and on the rows it answered, it reads the musing's letter, never the answer's
    answered = [lat for lat in thinking if lat.picked_letter is not None]
    assert not any(lat.naive_letter == lat.picked_letter for lat in answered)
    # the naive parser on the answer alone reads about what the model meant: close to the truth, as for base
    on_answer = {lat: naive(lat.answer, n_options[lat.item_id]) for lat in thinking}

    def accuracy(correct) -> float:
        return _accuracy(thinking, "thinking", correct)

    truth = accuracy(_true)
    raw = accuracy(_naive)
    answer = accuracy(lambda lat: on_answer[lat] == lat.gold_letter)
    assert raw < truth - 0.3, (raw, truth)
    assert abs(answer - truth) < 0.15, (answer, truth)


# ---- the designed effects, on the simulator's latent truth ----------------------------------------


def _accuracy(latent: list, arm: str, correct, orientation: str | None = None) -> float:
    """Item-weighted accuracy (docs/design.md §7): mean over items of the mean over orientations."""
    per_item = collections.defaultdict(list)
    for lat in latent:
        if lat.arm == arm and (orientation is None or lat.orientation == orientation):
            per_item[lat.item_id].append(correct(lat))
    return float(np.mean([np.mean(v) for v in per_item.values()]))


def _true(lat) -> bool:
    return lat.verdict == CORRECT


def _naive(lat) -> bool:
    return lat.naive_letter == lat.gold_letter


def _delta(latent: list, correct, orientation: str | None = None) -> float:
    return _accuracy(latent, "steered", correct, orientation) - _accuracy(
        latent, "base", correct, orientation
    )


def _delta_ci(latent: list, orientation: str, reps: int = 2000) -> tuple[float, float]:
    """Paired item-bootstrap 95 % CI of the true Δ in one orientation."""
    pair = collections.defaultdict(dict)
    for lat in latent:
        if lat.orientation == orientation:
            pair[lat.item_id][lat.arm] = float(_true(lat))
    d = np.array([v["steered"] - v["base"] for v in pair.values()])
    boot = d[np.random.default_rng(0).integers(0, len(d), (reps, len(d)))].mean(axis=1)
    return float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))


def test_naive_parser_fabricates_a_drop_the_truth_does_not_have(latent: list) -> None:
    true_delta = _delta(latent, _true)
    naive_delta = _delta(latent, _naive)
    assert abs(true_delta) < 0.06, true_delta  # the intervention changes no knowledge
    assert naive_delta < true_delta - 0.15, (naive_delta, true_delta)
    # per arm: naive misreads the steered prose far more than the base arm's mostly terse answers
    gap = {arm: _accuracy(latent, arm, _true) - _accuracy(latent, arm, _naive) for arm in ("base", "steered")}
    assert gap["steered"] > gap["base"] + 0.15, gap


def test_position_preference_gives_opposite_orientation_effects(latent: list) -> None:
    # steered gains where the hard items' gold is displayed first (ABCD) and loses in BA
    assert _delta(latent, _true, "ABCD") > 0.08
    assert _delta(latent, _true, "BA") < -0.2
    low, _ = _delta_ci(latent, "ABCD")
    _, high = _delta_ci(latent, "BA")
    assert low > 0 and high < 0, (low, high)
    # the position preference itself: steered picks the first displayed option far more often
    first = {
        arm: np.mean([lat.picked_letter == "A" for lat in latent if lat.arm == arm and lat.picked_letter])
        for arm in ("base", "steered")
    }
    assert first["steered"] > first["base"] + 0.05, first


def test_thinking_loses_accuracy_to_the_budget_not_to_knowledge(latent: list) -> None:
    truth = {arm: _accuracy(latent, arm, _true) for arm in ("base", "thinking")}
    assert truth["thinking"] < truth["base"] - 0.12, truth  # the budget costs it accuracy
    answered = {
        arm: np.mean([lat.verdict == CORRECT for lat in latent if lat.arm == arm and lat.verdict != OTHER])
        for arm in ("base", "thinking")
    }
    # on the rows it answers it is no worse than base (better: it runs out of tokens where it is unsure)
    assert answered["thinking"] >= answered["base"] - 0.02, answered


def test_steered_other_share_is_at_least_three_times_base(latent: list) -> None:
    share = {
        arm: np.mean([lat.verdict == OTHER for lat in latent if lat.arm == arm])
        for arm in ("base", "steered")
    }
    assert 0.01 < share["base"] < 0.07, share
    assert 0.12 < share["steered"] < 0.25, share
    assert share["steered"] >= 3 * share["base"], share


def test_a_new_judge_template_rebuilds_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo records what it was built from; the stand-in's fingerprint is part of it, so a study
    graded under an older template is rebuilt, not shown as current (issue 17: a new template version)."""
    from mcqaudit import demo
    from mcqaudit.judge import prompts

    before = demo.inputs_hash()
    assert demo.inputs_hash() == before  # stable
    monkeypatch.setattr(prompts, "TEMPLATE_VERSION", "an-older-version")
    assert demo.inputs_hash() != before
