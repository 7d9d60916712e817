"""Orientations: the orders in which an item's options are displayed, and the letter <-> option maps.

An orientation is labelled by the canonical letters in displayed order: for canonical options
``[w, x, y, z]`` the orientation ``BCDA`` displays ``[x, y, z, w]``. Pure: no I/O.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mcqaudit.vocab import LETTERS, MAX_OPTIONS, letters

MAX_ALL_OPTIONS = 6

DEFAULT_TEMPLATE = (
    "Answer the following multiple-choice question.\n\n"
    "{question}\n\n"
    "{options}\n\n"
    "Reply with the letter of the correct option only."
)


class OrientationError(ValueError):
    """A scheme, label or option order that cannot be honoured."""


def label(perm: Sequence[int]) -> str:
    """Orientation label of a permutation given as canonical indices in displayed order."""
    return "".join(LETTERS[i] for i in perm)


def perm_of(label_: str) -> list[int]:
    """Canonical indices in displayed order for an orientation label; validates the label."""
    n = len(label_)
    # letters(n) itself raises for n > 26: check the size first so the error stays an OrientationError
    if not 2 <= n <= MAX_OPTIONS or sorted(label_) != list(letters(n)):
        shown = letters(min(max(n, 2), MAX_OPTIONS))
        raise OrientationError(f"orientation {label_!r} is not a permutation of {shown!r}")
    return [LETTERS.index(c) for c in label_]


def identity(n: int) -> str:
    return letters(n)


def apply(canonical: Sequence[str], label_: str) -> list[str]:
    """Options as displayed in orientation ``label_``."""
    perm = perm_of(label_)
    if len(perm) != len(canonical):
        raise OrientationError(f"orientation {label_!r} has {len(perm)} letters for {len(canonical)} options")
    return [canonical[i] for i in perm]


def unapply(displayed: Sequence[str], label_: str) -> list[str]:
    """Canonical order back from the displayed options (inverse of :func:`apply`)."""
    perm = perm_of(label_)
    if len(perm) != len(displayed):
        raise OrientationError(f"orientation {label_!r} has {len(perm)} letters for {len(displayed)} options")
    out: list[str] = [""] * len(perm)
    for pos, i in enumerate(perm):
        out[i] = displayed[pos]
    return out


def derive(canonical: Sequence[str], displayed: Sequence[str]) -> str:
    """Orientation label from the displayed order; raises if the option sets differ."""
    index = {opt: i for i, opt in enumerate(canonical)}
    if len(index) != len(canonical):
        raise OrientationError("the item's options are not distinct")
    if len(displayed) != len(canonical) or set(displayed) != set(index):
        raise OrientationError("the displayed options are not the item's option set")
    return label([index[o] for o in displayed])


def displayed_letter(canonical_letter: str, label_: str) -> str:
    """Displayed letter of the option whose canonical letter is given."""
    return LETTERS[label_.index(canonical_letter)]


def canonical_letter(displayed_letter_: str, label_: str) -> str:
    """Canonical letter of the option displayed under ``displayed_letter_``."""
    return label_[LETTERS.index(displayed_letter_)]


def scheme_labels(n: int, scheme: str, seed: int = 0) -> list[str]:
    """Orientation labels for ``n`` options under a scheme: cyclic, swap, all, random:K."""
    if not 2 <= n <= MAX_OPTIONS:
        raise OrientationError(f"an item has between 2 and {MAX_OPTIONS} options, not {n}")
    base = list(range(n))
    if scheme == "cyclic":
        return [label(base[k:] + base[:k]) for k in range(n)]
    if scheme == "swap":
        if n == 2:
            return ["AB", "BA"]
        # swap of the first and last option beside the canonical order: the binary idea for n options
        swapped = base.copy()
        swapped[0], swapped[-1] = swapped[-1], swapped[0]
        return [label(base), label(swapped)]
    if scheme == "all":
        if n > MAX_ALL_OPTIONS:
            raise OrientationError(
                f"scheme 'all' gives {math.factorial(n)} orders for {n} options; it is refused above "
                f"{MAX_ALL_OPTIONS} options (use cyclic or random:K)"
            )
        return [label(p) for p in itertools.permutations(base)]
    if scheme.startswith("random:"):
        try:
            k = int(scheme.split(":", 1)[1])
        except ValueError:
            raise OrientationError(f"scheme {scheme!r}: K must be an integer, e.g. random:4") from None
        if k < 1:
            raise OrientationError(f"scheme {scheme!r}: K must be at least 1")
        # an item with fewer orders than K (a binary item beside 4-option ones) gets all of its orders
        k = min(k, math.factorial(n))
        rng = random.Random(f"{seed}:{n}")
        seen: list[str] = []
        while len(seen) < k:
            p = base.copy()
            rng.shuffle(p)
            lab = label(p)
            if lab not in seen:
                seen.append(lab)
        return seen
    raise OrientationError(f"unknown scheme {scheme!r}: use cyclic, swap, all or random:K")


def format_options(displayed: Sequence[str]) -> str:
    return "\n".join(f"{LETTERS[i]}. {opt}" for i, opt in enumerate(displayed))


_PLACEHOLDER = re.compile(r"\{(question|options)\}")


def render_prompt(question: str, displayed: Sequence[str], template: str = DEFAULT_TEMPLATE) -> str:
    # not str.format: questions and user templates may hold literal braces; and in one pass, so that a
    # question that contains the text "{options}" is not expanded itself
    values = {"question": question, "options": format_options(displayed)}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


@dataclass(frozen=True)
class Item:
    item_id: str
    question: str
    options: tuple[str, ...]  # canonical order
    gold_index: int
    metadata: dict[str, Any] | None = None


def gold_index(gold: object, n: int) -> int:
    """0-based gold index from a letter or an index; raises ValueError with a reason."""
    if isinstance(gold, bool):
        raise ValueError("gold must be a letter or a 0-based index, not a boolean")
    if isinstance(gold, int):
        if not 0 <= gold < n:
            raise ValueError(f"gold index {gold} is out of range for {n} options (0..{n - 1})")
        return gold
    if isinstance(gold, str):
        g = gold.strip().upper()
        if len(g) == 1 and g in letters(n):
            return LETTERS.index(g)
        raise ValueError(f"gold {gold!r} is not a letter in {letters(n)[0]}..{letters(n)[-1]}")
    raise ValueError(f"gold must be a letter or a 0-based index, not {type(gold).__name__}")


def orient_item(item: Item, labels: Iterable[str], template: str = DEFAULT_TEMPLATE) -> list[dict[str, Any]]:
    """Prompt rows (docs/design.md §3 fields minus generation and arm) for one item in each orientation."""
    rows = []
    gold_canon = LETTERS[item.gold_index]
    for lab in labels:
        displayed = apply(item.options, lab)
        row: dict[str, Any] = {
            "item_id": item.item_id,
            "question": item.question,
            "options": displayed,
            "gold": displayed_letter(gold_canon, lab),
            "orientation": lab,
            "prompt": render_prompt(item.question, displayed, template),
        }
        if item.metadata is not None:
            row["metadata"] = item.metadata
        rows.append(row)
    return rows
