"""A small study of a reasoning model's answers for the Review page's tests (a helper module, not a test
module): thinking that names other letters before the answer (as a ``reasoning`` field and as an inline
``<think>`` block), rows cut off by the token limit with and without an answer, a reasoning block that never
closes (at the token limit, and in a row that says it stopped), and a hostile reasoning text. Built through
the real ingest and the stand-in judge (:func:`build_reasoning_study`).

Arms: ``base`` answers with a bare letter, no reasoning; ``thinker`` is the reasoning model, one kind of row
per item (:data:`KINDS`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ARMS = ("base", "thinker")
ORIENTATIONS = ("ABCD", "BCDA")
# one kind of thinker row per item, in item order
KINDS = ("letters", "inline", "cut", "unclosed", "cut_answered", "hostile", "unclosed_stop")
HOSTILE = "<script>alert(1)</script> [link](http://x) **bold** <img src=x onerror=alert(2)> A"
CUT_TOKENS = 4096


def items() -> list[dict[str, Any]]:
    return [
        {
            "item_id": f"r{i:02d}",
            "question": f"Which option is right for reasoning question {i}?",
            "options": [f"r{i}-{k}" for k in ("alpha", "beta", "gamma", "delta")],
            "gold": (i + 1) % 4,
        }
        for i in range(len(KINDS))
    ]


def thinking(gold: str) -> str:
    """Thinking that names every other letter before it settles (a naive parser reading it would take A)."""
    others = [x for x in "ABCD" if x != gold]
    return (
        f"Option {others[0]} looks plausible at first, and {others[1]} is tempting too.\n"
        f"But {others[2]} contradicts the stem, so it must be {gold}."
    )


def thinker_row(kind: str, gold: str) -> dict[str, Any]:
    """The input fields of one thinker row of ``kind`` (beside the item's fields)."""
    usage = {"prompt_tokens": 120, "completion_tokens": 310}
    if kind == "letters":
        return {"reasoning": thinking(gold), "generation": gold, "finish_reason": "stop", "usage": usage}
    if kind == "inline":
        return {
            "generation": f"<think>{thinking(gold)}</think>\n\nThe answer is {gold}.",
            "finish_reason": "stop",
        }
    cut = {"prompt_tokens": 120, "completion_tokens": CUT_TOKENS}
    if kind == "cut":
        return {
            "reasoning": thinking(gold) + " Unless A",
            "generation": "",
            "finish_reason": "length",
            "usage": cut,
        }
    if kind == "unclosed":
        return {
            "generation": f"<think>{thinking(gold)} Wait, A and C",
            "finish_reason": "length",
            "usage": cut,
        }
    if kind == "unclosed_stop":  # the block never closes, though the provider says it stopped
        return {"generation": f"<think>{thinking(gold)} Hmm", "finish_reason": "stop"}
    if kind == "cut_answered":
        return {
            "reasoning": thinking(gold),
            "generation": f"The answer is {gold}, because",
            "finish_reason": "length",
            "usage": cut,
        }
    if kind == "hostile":
        return {"reasoning": HOSTILE, "generation": gold, "finish_reason": "stop", "usage": usage}
    raise ValueError(kind)


def generations() -> list[dict[str, Any]]:
    rows = []
    for it, kind in zip(items(), KINDS, strict=True):
        canon = it["options"]
        for orient in ORIENTATIONS:
            shown = [canon["ABCD".index(c)] for c in orient]
            gold = "ABCD"[orient.index("ABCD"[it["gold"]])]
            for arm in ARMS:
                base = {
                    "item_id": it["item_id"],
                    "arm": arm,
                    "question": it["question"],
                    "options": shown,
                    "gold": gold,
                    "orientation": orient,
                }
                extra = {"generation": gold} if arm == "base" else thinker_row(kind, gold)
                rows.append({**base, **extra})
    return rows


def build_reasoning_study(path: Path) -> Path:
    """This study at ``path`` (its inputs beside it), ingested and graded through the public path."""
    from tests.builders import build_graded_study, write_inputs

    gens, items_path = write_inputs(path.parent / "inputs", items(), generations())
    return build_graded_study(path, gens, items=items_path)
