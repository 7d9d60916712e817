"""Simulated respondent for the demo study: turns ``items.jsonl`` into ``generations.jsonl``.

The demo must show mcqaudit's point: a naive ``[A-D]`` first-match parser fabricates an effect between two
arms that the three-way judge removes, and that a reasoning model's answers must be read after its
thinking, with the token budget named when it cut the thinking off. Nothing here is a real model. Three
arms answer every item in every cyclic orientation (oriented with mcqaudit's own ``orient`` module), one
row per (arm, item, orientation):

``base``
    Knows most items; when it does not, it follows a per-item hunch and, now and then, takes the first
    displayed option (a mild first-position preference). Refuses about 3 % of the time. Answers tersely
    (``B``, ``B. Paris``, ``Answer: C``, ``(A)``) with some short sentences.
``steered``
    The same per-item knowledge and hunches as ``base``: the intervention changes no knowledge. What it
    changes is the wording, the position preference and the willingness to commit:

    * verbose prose openers (``At first glance…``, ``A valid choice here is…``, ``As an AI…``,
      ``Actually…``, ``Certainly!…``) whose first letters fool the naive parser, followed by the real pick
      stated as letter and option text;
    * on an item it does not know it settles on the first displayed option unless it senses that option is
      wrong: it never rejects the gold, and it rejects a wrong first option with probability
      ``STEERED_DOUBT``, hedging instead of committing (``I can't be sure; it could be B or C.``);
    * many more refusals and hedges overall (15-20 % OTHER against about 3 %).
``thinking``
    A reasoning model with the same per-item knowledge and hunches (again no new knowledge). Each
    generation opens with an inline ``<think>…</think>`` block that muses over several option letters
    (``Option C is Marseille, which looks plausible at first. But A, Lyon, is also tempting.``) and then
    answers tersely after the block (``B``, ``**B**``, ``Answer: B``). It ran under a small token budget
    (``max_tokens`` 256): on about 30 % of rows, more often on items it does not know, it keeps going round
    the options until the budget cuts it off inside its thinking: ``finish_reason: "length"``, a block
    that never closes, no answer. Every row carries ``finish_reason`` and ``usage``; none carries
    ``option_logprobs`` (its first token is ``<think>``, not a letter).

The designed results, on the true (latent) verdicts:

(a) ``suspected_parser_artifact``: the naive parser reads ``A`` (or ``C``, ``B``) from the steered arm's
    openers whatever it picked, so its Δaccuracy (steered − base) is about −26 points; the true Δ is about
    −3 points with a CI around 0, and the judge, reading the whole text, recovers it.
(b) ``orientation_instability``: the steered first-position preference helps exactly when the gold is
    displayed first. With cyclic rotation and balanced gold letters a pure position preference would
    average out in every orientation, so the hard items (those the model rarely knows, marked
    ``"difficulty": "hard"`` in ``items.jsonl``) were written with their key in canonical position A
    (35 of 39), as happens when a benchmark's writer lists the right answer first. The steered arm then
    gains in the canonical orientation ``ABCD`` (about +14 points) and loses in ``BA`` (about −35: binary
    hard items, where the base arm's hunch is usually right): Δs of opposite sign whose item-bootstrap
    CIs exclude 0.
(c) ``other_rate_rise``: steered OTHER about 19 % against base 4 %. Because the steered arm hedges mostly
    where it would have been wrong, its answered accuracy (OTHER excluded) rises: selective abstention,
    not knowledge.
(d) ``truncation_rise``: the thinking arm's rows are cut off by the token budget about 30 % of the time
    against never for base, so its OTHER rate rises by about as much and its accuracy falls by about
    20 points, with no change of knowledge: the budget, not a preference, is the cause. Read as answers
    (the thinking split off), its finished rows are read right by the strict pre-filter and the judge; a
    parser that reads the raw text (the user's ``parsed_letter``) reads the first letter the thinking
    muses over instead, on finished and cut-off rows alike, and fabricates an effect.

The numbers above are those of the committed file (``SEED``); over other seeds the effects keep their
direction, and the orientation flag's two CIs both exclude 0 for most (about 85 %) of seeds.

Determinism: every random draw comes from ``random.Random`` seeded with a string built from ``SEED`` and the
draw's purpose (item, arm, orientation; the thinking arm's rows draw under their own purpose, ``think``),
and only ``random()`` is called, whose sequence Python guarantees across versions. The same seed and items
give a byte-identical file, and the base and steered rows are the same with or without the thinking arm.

Regenerate the committed file::

    python sample_runs/simulate.py --out sample_runs/generations.jsonl

:func:`latent_truth` gives the simulator's own truth per row (what each generation really picks); it is
used by ``tests/test_demo_data.py`` and is deliberately not part of the committed generations.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from mcqaudit.orient import Item, gold_index, orient_item, scheme_labels
from mcqaudit.vocab import CORRECT, INCORRECT, OTHER, letters

HERE = Path(__file__).resolve().parent
ITEMS_PATH = HERE / "items.jsonl"
GENERATIONS_PATH = HERE / "generations.jsonl"

# ---------------------------------------------------------------------------------------------------------
# Parameters. Every number that shapes the demo lives here.
# ---------------------------------------------------------------------------------------------------------

#: Seed of every random draw (see "Determinism" above).
SEED = 20251130
#: Orientation scheme (mcqaudit.orient): cyclic gives ABCD/BCDA/CDAB/DABC for four options, AB/BA for two.
SCHEME = "cyclic"
#: Arms in output order; ``base`` is the control. ``thinking`` was added after the other two: their rows come
#: first and are unchanged (tests/test_demo_data.py holds their hash).
ARMS = ("base", "steered", "thinking")
#: The reasoning arm: thinks in an inline ``<think>`` block before it answers, under a token budget.
THINKING = "thinking"
#: The ``model`` field of each arm's rows.
MODELS = {
    "base": "sim-respondent-base",
    "steered": "sim-respondent-steered",
    THINKING: "sim-respondent-thinking",
}
#: One sample per (arm, item, orientation).
SAMPLE = 0

#: Probability that the model knows an item, by the item's ``metadata.difficulty``. Drawn once per item and
#: shared by both arms and all orientations (orientations of one item are correlated, as in reality).
#: With the bundled items (81 easy, 39 hard) the model knows about 66 % of items outright; with its hunches
#: the base arm's accuracy is about 77 %.
P_KNOW = {"easy": 0.95, "hard": 0.05}
#: On an item the model does not know it has a hunch, drawn once per item and shared by both arms: the gold
#: with this probability (by number of options), else a distractor chosen uniformly. Four-option hard items
#: have an attractive distractor (a misconception, so below chance); on two-option items partial knowledge
#: usually points the right way.
HUNCH_RIGHT = {2: 0.85, 4: 0.10}

#: base: probability of refusing any row (OTHER), known or not.
BASE_REFUSAL = 0.03
#: base, item not known: probability of taking the first displayed option instead of following the hunch
#: (a mild first-position preference: about 1/3 of its unknown-item picks land on position A of 4).
BASE_FIRST_PULL = 0.10

#: steered, item known: probability of hedging anyway (OTHER) instead of giving the answer it knows.
STEERED_KNOWN_HEDGE = 0.03
#: steered, item not known, gold displayed first: probability of accepting that first option.
STEERED_ACCEPT_GOLD_FIRST = 0.96
#: steered, item not known, gold displayed first: probability of hedging (the rest follows the hunch).
STEERED_HEDGE_GOLD_FIRST = 0.02
#: steered, item not known, a distractor displayed first: probability of sensing it is wrong and hedging.
STEERED_DOUBT = 0.65
#: steered, item not known, a distractor displayed first: probability of taking it anyway (the remaining
#: 1 - STEERED_DOUBT - STEERED_TAKE_FIRST follows the hunch).
STEERED_TAKE_FIRST = 0.32

#: Share of items (drawn once per item) whose rows carry ``option_logprobs``, in both arms.
LOGPROB_ITEM_SHARE = 0.5
#: Probability that the log-prob argmax is the letter the text picks (for OTHER rows: the option the model
#: leaned to); otherwise another letter is on top.
LOGPROB_AGREEMENT = 0.90
#: Logit ranges before the log-softmax: the top letter in [TOP_LOW, TOP_LOW + TOP_SPAN), the others in
#: [REST_LOW, REST_LOW + REST_SPAN); TOP_LOW > REST_LOW + REST_SPAN, so the top letter is the argmax.
LOGIT_TOP_LOW, LOGIT_TOP_SPAN = 3.0, 1.5
LOGIT_REST_LOW, LOGIT_REST_SPAN = -1.0, 2.0
#: Decimal places of the stored log-probabilities.
LOGPROB_DECIMALS = 4

#: thinking, item known: probability that it keeps re-checking the options until the token budget cuts it
#: off inside its thinking (``finish_reason: "length"``, the block never closes, no answer).
THINKING_TRUNCATE_KNOWN = 0.20
#: thinking, item not known: the same, more often (it muses longer when it is unsure). With about 68 % of
#: the rows on known items, about 30 % of the arm's rows are cut off.
THINKING_TRUNCATE_UNKNOWN = 0.50
#: thinking, a row it finishes: probability of ending its thinking undecided and answering with a hedge
#: (OTHER); otherwise it answers the item it knows, or follows its hunch (no position preference).
THINKING_REFUSAL = 0.03
#: thinking, a row it finishes: number of musing sentences between the opener and the decision, drawn
#: uniformly from this range (inclusive).
THINKING_MUSINGS = (1, 3)
#: The token budget (``max_tokens``) the thinking arm ran under; a cut-off row's ``completion_tokens``.
THINKING_MAX_TOKENS = 256
#: The simulated tokenizer: a token is this many characters (rounded up). ``usage.prompt_tokens`` is the
#: prompt's length in tokens, ``usage.completion_tokens`` the generation's; a cut-off generation is exactly
#: THINKING_MAX_TOKENS × CHARS_PER_TOKEN characters long.
CHARS_PER_TOKEN = 4

# Wording. (weight, template); {L} is the picked displayed letter, {T} its option text, {L1}/{L2} two
# displayed letters a hedge wavers between. Picks state the letter and/or the option text, never another
# option's text; hedges and refusals pick no single option.

#: base picks: mostly terse. The strict pre-filter resolves "B", "B. Paris", "Answer: C", "(A)", "**B**",
#: "B) Paris" and "The answer is B."; the rest goes to the judge. "Answer: C" and "The answer is D…" already
#: fool the naive parser (it reads the "a" of "answer"), and "I'd go with C." reads as D.
BASE_PICK_FORMS: tuple[tuple[int, str], ...] = (
    (26, "{L}"),
    (14, "{L}. {T}"),
    (12, "Answer: {L}"),
    (8, "({L})"),
    (4, "**{L}**"),
    (5, "{L}) {T}"),
    (6, "The answer is {L}."),
    (6, "I'd go with {L}."),
    (5, "The answer is {L}, because {T} is the one that fits."),
    (5, "{T}"),
    (4, "I think it's {L}."),
    (3, "Option {L}."),
)
#: base refusals (OTHER).
BASE_OTHER_FORMS: tuple[tuple[int, str], ...] = (
    (3, "I'm not sure."),
    (3, "I don't know."),
    (2, "I don't know the answer to this one."),
    (2, "I can't answer this with any confidence."),
)
#: steered picks: a prose opener whose first [A-D] letter is not the pick, then the pick as letter and text.
STEERED_PICK_FORMS: tuple[tuple[int, str], ...] = (
    (14, "At first glance a few of these look close, but the answer is {L}: {T}."),
    (12, "A valid choice here is {L}, {T}, and it's the one I'm going with."),
    (12, "As an AI, I'd say the answer is {T} ({L})."),
    (10, "Actually, I'm fairly confident about this one: it's {L}, {T}."),
    (10, "Certainly! The correct answer is {L}. {T}."),
    (8, "Alright, let me think. My answer is {L} ({T})."),
    (8, "After weighing the options, I'd choose {L}: {T}."),
    (6, "Absolutely. The answer is {T}, which is option {L}."),
    (6, "Based on what I know, the answer is {L}, {T}."),
)
#: steered hedges and refusals (OTHER).
STEERED_OTHER_FORMS: tuple[tuple[int, str], ...] = (
    (16, "I can't be sure; it could be {L1} or {L2}."),
    (12, "Actually, I'm torn between {L1} and {L2}, and I can't settle on one."),
    (10, "A case could be made for {L1} or for {L2}; I honestly don't know which."),
    (10, "I'd rather not answer that."),
    (8, "None of these seem right to me."),
    (8, "As an AI, I can't verify this, so I won't pick one."),
    (6, "Certainly an interesting question, but I don't know the answer."),
)

# The thinking arm's generations: ``<think>\n`` + sentences + ``\n</think>\n\n`` + a short answer. In the
# thinking, {M}/{TM} are a displayed letter it muses over and that option's text; {L}/{T} its pick.

#: thinking: the first sentence of the thinking. Its first [A-Da-d] character is the mused letter {M} (a
#: letter other than the one it leans to), so a parser that reads the raw text, thinking included, reads
#: that letter: the user's parser (``parsed_letter``) does.
THINKING_OPENER_FORMS: tuple[tuple[int, str], ...] = (
    (3, "Option {M} is {TM}, which looks plausible at first."),
    (3, "First thought: {M}, {TM}."),
    (2, "Hmm, {M} ({TM}) is tempting."),
    (2, "Let me go through the options. {M} is {TM}; that might fit."),
    (2, "My first guess is {M}: {TM}."),
)
#: thinking: musing sentences, each over a letter other than the one mused over just before.
THINKING_MUSE_FORMS: tuple[tuple[int, str], ...] = (
    (3, "But {M}, {TM}, is also tempting."),
    (3, "What about {M}? {TM} could fit too."),
    (2, "Then again, {M} ({TM}) matches part of the question."),
    (2, "Let me reconsider {M}: {TM}."),
    (2, "I keep coming back to {M}."),
    (2, "{M} seems less likely, though I'm not certain."),
)
#: thinking, a row cut off by the budget: after the musings it goes round the options again, sentence after
#: sentence, until the budget cuts it mid-sentence.
THINKING_LOOP_FORMS: tuple[tuple[int, str], ...] = (
    (3, "Wait, let me check {M} again: {TM}."),
    (3, "Hmm, but what if it's {M}?"),
    (2, "Actually, no. Let me go back to {M}, {TM}."),
    (2, "On the other hand, {M} could also be argued."),
    (2, "I should double-check {M} before deciding."),
)
#: thinking, the last sentence of a finished thinking: the decision.
THINKING_DECIDE_FORMS: tuple[tuple[int, str], ...] = (
    (3, "So the answer is {L}."),
    (3, "I'm fairly sure it's {L}, {T}."),
    (2, "{L} it is: {T}."),
    (2, "Going with {L}."),
)
#: thinking, the last sentence of a thinking that ends undecided (its answer is a hedge).
THINKING_UNDECIDED = "I can't settle between {L1} and {L2}."
#: thinking: the answer after the block, terse (the strict pre-filter resolves most of it).
THINKING_PICK_FORMS: tuple[tuple[int, str], ...] = (
    (30, "{L}"),
    (16, "**{L}**"),
    (14, "{L}. {T}"),
    (12, "Answer: {L}"),
    (10, "The answer is {L}."),
    (8, "({L})"),
    (10, "{L}) {T}"),
)
#: thinking: the answer after an undecided thinking (OTHER).
THINKING_OTHER_FORMS: tuple[tuple[int, str], ...] = (
    (3, "I'm not sure."),
    (3, "I can't be sure; it could be {L1} or {L2}."),
    (2, "I don't know."),
)
PICK_FORMS = {"base": BASE_PICK_FORMS, "steered": STEERED_PICK_FORMS, THINKING: THINKING_PICK_FORMS}
OTHER_FORMS = {"base": BASE_OTHER_FORMS, "steered": STEERED_OTHER_FORMS, THINKING: THINKING_OTHER_FORMS}
#: finish_reason of the thinking arm's rows.
FINISH_STOP, FINISH_LENGTH = "stop", "length"

# Behaviours recorded in the latent truth.
KNOWN = "known"  # answers the item it knows
HUNCH = "hunch"  # follows its per-item hunch on an item it does not know
FIRST = "first-position"  # takes the first displayed option on an item it does not know
REFUSAL = "refusal"  # refuses or hedges: OTHER
TRUNCATED = "truncated"  # thinking arm: cut off by the token budget inside its thinking, no answer: OTHER


@dataclass(frozen=True)
class LatentRow:
    """The simulator's truth for one row: what the generation really picks, and why."""

    arm: str
    item_id: str
    orientation: str
    sample: int
    knows: bool
    behaviour: str
    picked_letter: str | None  # displayed letter; None for OTHER
    gold_letter: str  # displayed letter
    verdict: str
    naive_letter: str | None  # the naive parser on the whole generation (= parsed_letter)
    truncated: bool = False  # thinking arm: cut off by the token budget
    answer: str | None = None  # thinking arm: the generation after its thinking ("" when cut off)


@dataclass(frozen=True)
class _ItemLatent:
    knows: bool
    hunch: int  # canonical index of the option the model leans to when it does not know
    logprobs: bool


def load_items(path: Path | str = ITEMS_PATH) -> list[Item]:
    """Items from a JSONL file with the docs/design.md §3 item fields (item_id, question, options, gold, metadata)."""
    items = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            d = json.loads(line)
            try:
                options = tuple(d["options"])
                items.append(
                    Item(
                        item_id=d["item_id"],
                        question=d["question"],
                        options=options,
                        gold_index=gold_index(d["gold"], len(options)),
                        metadata=d.get("metadata"),
                    )
                )
            except (KeyError, ValueError) as e:
                raise ValueError(f"{path}:{n}: {e}") from None
    return items


def naive_letter(text: str, n_options: int) -> str | None:
    """The naive parser (docs/design.md §4): first letter within the option range, case-insensitive, anywhere."""
    legal = letters(n_options)
    for ch in text:
        if ch.upper() in legal:
            return ch.upper()
    return None


def _rng(seed: int, *parts: object) -> random.Random:
    # str seeds are hashed with SHA-512 (seed version 2): stable across runs, platforms and PYTHONHASHSEED
    return random.Random("|".join(str(p) for p in (seed, *parts)))


def _weighted(forms: Sequence[tuple[int, str]], u: float) -> str:
    total = sum(w for w, _ in forms)
    x = u * total
    for w, text in forms:
        if x < w:
            return text
        x -= w
    return forms[-1][1]


def _difficulty(item: Item) -> str:
    difficulty = (item.metadata or {}).get("difficulty", "easy")
    if difficulty not in P_KNOW:
        raise ValueError(f"item {item.item_id}: difficulty {difficulty!r} is not one of {sorted(P_KNOW)}")
    return difficulty


def _item_latent(item: Item, seed: int) -> _ItemLatent:
    r = _rng(seed, "item", item.item_id)
    n = len(item.options)
    knows = r.random() < P_KNOW[_difficulty(item)]
    hunch_right = r.random() < HUNCH_RIGHT[n]
    distractors = [i for i in range(n) if i != item.gold_index]
    distractor = distractors[int(r.random() * len(distractors))]
    hunch = item.gold_index if hunch_right else distractor
    logprobs = r.random() < LOGPROB_ITEM_SHARE
    return _ItemLatent(knows=knows, hunch=hunch, logprobs=logprobs)


def _behave(arm: str, lat: _ItemLatent, gold_pos: int, r: random.Random) -> str:
    """One row's behaviour; gold_pos is the gold's 0-based displayed position."""
    u = r.random()
    if arm == "base":
        if u < BASE_REFUSAL:
            return REFUSAL
        if lat.knows:
            return KNOWN
        return FIRST if r.random() < BASE_FIRST_PULL else HUNCH
    if arm == "steered":
        if lat.knows:
            return REFUSAL if u < STEERED_KNOWN_HEDGE else KNOWN
        if gold_pos == 0:
            if u < STEERED_ACCEPT_GOLD_FIRST:
                return FIRST
            return REFUSAL if u < STEERED_ACCEPT_GOLD_FIRST + STEERED_HEDGE_GOLD_FIRST else HUNCH
        if u < STEERED_DOUBT:
            return REFUSAL
        return FIRST if u < STEERED_DOUBT + STEERED_TAKE_FIRST else HUNCH
    raise ValueError(f"unknown arm {arm!r}")


def _other_text(arm: str, displayed_letters: str, lean_pos: int, r: random.Random) -> str:
    template = _weighted(OTHER_FORMS[arm], r.random())
    # a hedge wavers between the option it leaned to and one other, named in displayed order
    others = [i for i in range(len(displayed_letters)) if i != lean_pos]
    second = others[int(r.random() * len(others))]
    l1, l2 = sorted((displayed_letters[lean_pos], displayed_letters[second]))
    return template.replace("{L1}", l1).replace("{L2}", l2)


def _logprobs(displayed_letters: str, top: int, r: random.Random) -> dict[str, float]:
    logits = [LOGIT_REST_LOW + LOGIT_REST_SPAN * r.random() for _ in displayed_letters]
    logits[top] = LOGIT_TOP_LOW + LOGIT_TOP_SPAN * r.random()
    m = max(logits)
    log_z = m + math.log(sum(math.exp(x - m) for x in logits))
    return {c: round(x - log_z, LOGPROB_DECIMALS) for c, x in zip(displayed_letters, logits, strict=True)}


def _tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _thinking_text(shown: str, displayed: Sequence[str], lean_pos: int, cut: bool, r: random.Random) -> str:
    """The sentences of a thinking (without its tags): an opener over a letter other than ``lean_pos``, then
    musings over letters other than the one before; ``cut``: loops on until past the budget."""
    sentences: list[str] = []
    mused = lean_pos

    def muse(forms: Sequence[tuple[int, str]]) -> None:
        nonlocal mused
        template = _weighted(forms, r.random())
        others = [i for i in range(len(shown)) if i != mused]
        mused = others[int(r.random() * len(others))]
        sentences.append(template.replace("{M}", shown[mused]).replace("{TM}", displayed[mused]))

    muse(THINKING_OPENER_FORMS)
    low, high = THINKING_MUSINGS
    for _ in range(low + int(r.random() * (high - low + 1))):
        muse(THINKING_MUSE_FORMS)
    while cut and len(" ".join(sentences)) < THINKING_MAX_TOKENS * CHARS_PER_TOKEN:
        muse(THINKING_LOOP_FORMS)
    return " ".join(sentences)


def _thinking_row(item: Item, lat: _ItemLatent, prompt_row: dict, seed: int) -> tuple[dict, LatentRow]:
    """One row of the thinking arm, from its own draws (seed purpose ``think``): the other arms' draws and
    rows do not depend on it."""
    n = len(item.options)
    orientation, displayed, gold = prompt_row["orientation"], prompt_row["options"], prompt_row["gold"]
    shown = letters(n)
    gold_pos = shown.index(gold)
    r = _rng(seed, "think", item.item_id, orientation, SAMPLE)
    lean_pos = gold_pos if lat.knows else displayed.index(item.options[lat.hunch])
    truncated = r.random() < (THINKING_TRUNCATE_KNOWN if lat.knows else THINKING_TRUNCATE_UNKNOWN)
    refuses = not truncated and r.random() < THINKING_REFUSAL
    thinking = _thinking_text(shown, displayed, lean_pos, truncated, r)
    picked: str | None = None
    if truncated:
        behaviour, answer = TRUNCATED, ""
        generation = ("<think>\n" + thinking)[: THINKING_MAX_TOKENS * CHARS_PER_TOKEN]
    else:
        if refuses:
            behaviour = REFUSAL
            others = [i for i in range(n) if i != lean_pos]
            second = others[int(r.random() * len(others))]
            l1, l2 = sorted((shown[lean_pos], shown[second]))
            decision = THINKING_UNDECIDED
            answer = _weighted(THINKING_OTHER_FORMS, r.random())
            decision, answer = (t.replace("{L1}", l1).replace("{L2}", l2) for t in (decision, answer))
        else:
            behaviour = KNOWN if lat.knows else HUNCH
            picked = shown[lean_pos]
            decision = _weighted(THINKING_DECIDE_FORMS, r.random())
            answer = _weighted(THINKING_PICK_FORMS, r.random())
            decision, answer = (
                t.replace("{L}", picked).replace("{T}", displayed[lean_pos]) for t in (decision, answer)
            )
        generation = f"<think>\n{thinking} {decision}\n</think>\n\n{answer}"
        if _tokens(generation) >= THINKING_MAX_TOKENS:
            raise ValueError(f"{item.item_id} {orientation}: a finished thinking row is over the budget")
    naive = naive_letter(generation, n)
    row: dict = {
        "item_id": item.item_id,
        "arm": THINKING,
        "question": prompt_row["question"],
        "options": displayed,
        "gold": gold,
        "orientation": orientation,
        "prompt": prompt_row["prompt"],
        "generation": generation,
        "sample": SAMPLE,
        "model": MODELS[THINKING],
        "parsed_letter": naive,
        "finish_reason": FINISH_LENGTH if truncated else FINISH_STOP,
        "usage": {
            "prompt_tokens": _tokens(prompt_row["prompt"]),
            "completion_tokens": THINKING_MAX_TOKENS if truncated else _tokens(generation),
        },
    }
    if "metadata" in prompt_row:
        row["metadata"] = prompt_row["metadata"]
    verdict = OTHER if picked is None else (CORRECT if picked == gold else INCORRECT)
    latent = LatentRow(
        arm=THINKING,
        item_id=item.item_id,
        orientation=orientation,
        sample=SAMPLE,
        knows=lat.knows,
        behaviour=behaviour,
        picked_letter=picked,
        gold_letter=gold,
        verdict=verdict,
        naive_letter=naive,
        truncated=truncated,
        answer=answer,
    )
    return row, latent


def _rows(items: Sequence[Item], seed: int) -> Iterator[tuple[dict, LatentRow]]:
    latents = {item.item_id: _item_latent(item, seed) for item in items}
    for arm in ARMS:
        for item in items:
            lat = latents[item.item_id]
            n = len(item.options)
            for prompt_row in orient_item(item, scheme_labels(n, SCHEME)):
                orientation = prompt_row["orientation"]
                displayed = prompt_row["options"]
                shown = letters(n)
                gold = prompt_row["gold"]
                gold_pos = shown.index(gold)
                hunch_pos = displayed.index(item.options[lat.hunch])
                if arm == THINKING:
                    yield _thinking_row(item, lat, prompt_row, seed)
                    continue
                r = _rng(seed, "row", arm, item.item_id, orientation, SAMPLE)
                behaviour = _behave(arm, lat, gold_pos, r)
                pick_pos = {KNOWN: gold_pos, HUNCH: hunch_pos, FIRST: 0, REFUSAL: None}[behaviour]
                if pick_pos is None:
                    # what it leaned to before hedging: the first option (steered), its hunch (base)
                    lean_pos = gold_pos if lat.knows else (0 if arm == "steered" else hunch_pos)
                    generation = _other_text(arm, shown, lean_pos, r)
                    picked, verdict = None, OTHER
                else:
                    lean_pos = pick_pos
                    template = _weighted(PICK_FORMS[arm], r.random())
                    generation = template.replace("{L}", shown[pick_pos]).replace("{T}", displayed[pick_pos])
                    picked = shown[pick_pos]
                    verdict = CORRECT if picked == gold else INCORRECT
                naive = naive_letter(generation, n)
                row: dict = {
                    "item_id": item.item_id,
                    "arm": arm,
                    "question": prompt_row["question"],
                    "options": displayed,
                    "gold": gold,
                    "orientation": orientation,
                    "prompt": prompt_row["prompt"],
                    "generation": generation,
                    "sample": SAMPLE,
                    "model": MODELS[arm],
                    "parsed_letter": naive,
                }
                if lat.logprobs:
                    agree = r.random() < LOGPROB_AGREEMENT
                    others = [i for i in range(n) if i != lean_pos]
                    top = lean_pos if agree else others[int(r.random() * len(others))]
                    row["option_logprobs"] = _logprobs(shown, top, r)
                if "metadata" in prompt_row:
                    row["metadata"] = prompt_row["metadata"]
                latent = LatentRow(
                    arm=arm,
                    item_id=item.item_id,
                    orientation=orientation,
                    sample=SAMPLE,
                    knows=lat.knows,
                    behaviour=behaviour,
                    picked_letter=picked,
                    gold_letter=gold,
                    verdict=verdict,
                    naive_letter=naive,
                )
                yield row, latent


def generation_rows(items: Sequence[Item] | None = None, seed: int = SEED) -> list[dict]:
    """The generation rows (docs/design.md §3 fields) that ``main`` writes."""
    return [row for row, _ in _rows(load_items() if items is None else items, seed)]


def latent_truth(items: Sequence[Item] | None = None, seed: int = SEED) -> list[LatentRow]:
    """The simulator's truth for each row, in the same order as :func:`generation_rows`."""
    return [latent for _, latent in _rows(load_items() if items is None else items, seed)]


def dumps_jsonl(rows: Sequence[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=Path, default=ITEMS_PATH, help="items JSONL (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=GENERATIONS_PATH, help="generations JSONL to write")
    parser.add_argument("--seed", type=int, default=SEED, help="seed of every draw (default: %(default)s)")
    parser.add_argument(
        "--latent-out", type=Path, help="also write the simulator's truth per row here (JSONL), for study"
    )
    args = parser.parse_args(argv)
    items = load_items(args.items)
    pairs = list(_rows(items, args.seed))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps_jsonl([row for row, _ in pairs]), encoding="utf-8", newline="\n")
    if args.latent_out is not None:
        latent = [asdict(lat) for _, lat in pairs]
        args.latent_out.write_text(dumps_jsonl(latent), encoding="utf-8", newline="\n")
    print(
        f"wrote {len(pairs)} rows for {len(items)} items and {len(ARMS)} arms to {args.out}", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
