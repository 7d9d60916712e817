"""A messy, realistic study for the review-session tests and the review benchmark: three arms of chat-model-like
answers (strict letters, hedged prose, refusals, misleading openers, multi-picks), a few long passages, row
metadata and prompts: the rows, which ``tests.builders.build_review_study`` ingests and grades through the real
path (``ingest_file`` + ``grade`` against the stand-in judge on 127.0.0.1)."""

from __future__ import annotations

import random
from typing import Any

ARMS = ("base", "steered", "finetuned")
PASSAGE = "Read the passage and answer the question that follows.\n\n" + " ".join(
    f"Paragraph {k}: the committee met in the spring and argued about the harbour, the tolls and the "
    "lighthouse keeper's pension; nobody could agree whether the new road would help the market."
    for k in range(1, 9)
)


def items(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        opts = [f"answer {i}-{w}" for w in ("alpha", "bravo", "charlie", "delta")]
        q = f"Question {i}: which option is right?"
        if i % 7 == 3:
            q = PASSAGE + f"\n\nQuestion {i}: what did the committee argue about?"
        out.append({"item_id": f"item{i:03d}", "question": q, "options": opts, "gold": i % 4})
    return out


def _answer(rng: random.Random, arm: str, gold: str, options: list[str]) -> tuple[str, str | None]:
    wrong = "ABCD"[("ABCD".index(gold) + 1 + rng.randrange(3)) % 4]
    kind = rng.random()
    text = {L: options["ABCD".index(L)] for L in "ABCD"}
    if arm == "steered" and kind < 0.15:
        return "I'm sorry, but I can't help with choosing between these options.", "I"[0:0] or None
    if kind < 0.35:
        return gold, gold
    if kind < 0.55:
        return f"At first glance several fit, but I'd go with {gold}) {text[gold]}.", "A"
    if kind < 0.7:
        return f"The answer is {wrong}.", wrong
    if kind < 0.8:
        return f"Both {gold} and {wrong} look plausible; I can't pick one.", gold
    return f"A careful reading suggests **{gold}. {text[gold]}** is the best choice.", "A"


def generations(n_items: int, orientations: tuple[str, ...], seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for it in items(n_items):
        canon = it["options"]
        for orient in orientations:
            shown = [canon["ABCD".index(c)] for c in orient]
            gold = "ABCD"[orient.index("ABCD"[it["gold"]])]
            for arm in ARMS:
                gen, user = _answer(rng, arm, gold, shown)
                rows.append(
                    {
                        "item_id": it["item_id"],
                        "arm": arm,
                        "question": it["question"],
                        "options": shown,
                        "gold": gold,
                        "orientation": orient,
                        "generation": gen,
                        "parsed_letter": user,
                        "prompt": it["question"]
                        + "\n"
                        + "\n".join(f"{L}. {o}" for L, o in zip("ABCD", shown, strict=True)),
                        "model": {
                            "base": "llama-3-8b",
                            "steered": "llama-3-8b+steer",
                            "finetuned": "llama-3-8b-ft",
                        }[arm],
                        "metadata": {
                            "temperature": 0.7,
                            "run": f"{arm}-2026-11-30",
                            "tokens": len(gen.split()),
                        },
                    }
                )
    return rows

