"""Orientations (mcqaudit/orient.py): letter <-> option maps and orientation schemes, by Hypothesis."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcqaudit.orient import (
    MAX_ALL_OPTIONS,
    Item,
    OrientationError,
    apply,
    canonical_letter,
    derive,
    displayed_letter,
    gold_index,
    label,
    orient_item,
    perm_of,
    render_prompt,
    scheme_labels,
    unapply,
)
from mcqaudit.vocab import LETTERS, MAX_OPTIONS

HYP = settings(max_examples=100, deadline=None)


@st.composite
def item_and_label(draw: st.DrawFn, max_n: int = MAX_OPTIONS) -> tuple[list[str], str]:
    canonical = draw(st.lists(st.text(max_size=8), min_size=2, max_size=max_n, unique=True))
    perm = draw(st.permutations(range(len(canonical))))
    return canonical, label(perm)


@HYP
@given(item_and_label())
def test_unapply_inverts_apply(example: tuple[list[str], str]) -> None:
    canonical, lab = example
    assert unapply(apply(canonical, lab), lab) == canonical


@HYP
@given(item_and_label())
def test_derive_recovers_the_label(example: tuple[list[str], str]) -> None:
    canonical, lab = example
    assert derive(canonical, apply(canonical, lab)) == lab
    assert perm_of(lab) == [LETTERS.index(c) for c in lab]


@HYP
@given(item_and_label())
def test_displayed_and_canonical_letters_are_inverse(example: tuple[list[str], str]) -> None:
    canonical, lab = example
    displayed = apply(canonical, lab)
    for i, option in enumerate(canonical):
        d = displayed_letter(LETTERS[i], lab)
        assert displayed[LETTERS.index(d)] == option
        assert canonical_letter(d, lab) == LETTERS[i]


SCHEMES = ["cyclic", "swap", "all", "random:1", "random:3"]


@HYP
@given(
    st.lists(st.text(min_size=1, max_size=8), min_size=2, max_size=MAX_ALL_OPTIONS, unique=True),
    st.data(),
    st.sampled_from(SCHEMES),
)
def test_gold_letter_follows_the_gold_option(options: list[str], data: st.DataObject, scheme: str) -> None:
    gold = data.draw(st.integers(0, len(options) - 1))
    item = Item(item_id="q1", question="Which one?", options=tuple(options), gold_index=gold)
    labels = scheme_labels(len(options), scheme, seed=7)
    rows = orient_item(item, labels)
    assert [r["orientation"] for r in rows] == labels
    for row in rows:
        shown = row["options"]
        assert shown[LETTERS.index(row["gold"])] == options[gold]
        assert derive(options, shown) == row["orientation"]
        # the prompt lists the options in displayed order under their displayed letters
        for i, opt in enumerate(shown):
            assert f"{LETTERS[i]}. {opt}" in row["prompt"]


@HYP
@given(st.integers(2, MAX_OPTIONS))
def test_cyclic_puts_each_option_at_each_position_once(n: int) -> None:
    labels = scheme_labels(n, "cyclic")
    assert len(labels) == n == len(set(labels))
    for pos in range(n):
        assert sorted(lab[pos] for lab in labels) == list(LETTERS[:n])


@pytest.mark.parametrize("n", range(2, MAX_ALL_OPTIONS + 1))
def test_all_gives_every_order_once(n: int) -> None:
    labels = scheme_labels(n, "all")
    assert len(labels) == len(set(labels)) == math.factorial(n)
    assert set(labels) == {label(p) for p in itertools.permutations(range(n))}


def test_all_is_refused_above_six_options() -> None:
    with pytest.raises(OrientationError, match="refused"):
        scheme_labels(MAX_ALL_OPTIONS + 1, "all")


@HYP
@given(st.integers(2, 10), st.integers(1, 30), st.integers(0, 2**32))
def test_random_k_is_reproducible_and_distinct(n: int, k: int, seed: int) -> None:
    labels = scheme_labels(n, f"random:{k}", seed=seed)
    assert labels == scheme_labels(n, f"random:{k}", seed=seed)
    assert len(labels) == len(set(labels)) == min(k, math.factorial(n))
    assert all(sorted(lab) == list(LETTERS[:n]) for lab in labels)


def test_random_k_above_the_number_of_orders_gives_every_order() -> None:
    # a binary item beside 4-option ones under random:4 gets both of its orders
    assert sorted(scheme_labels(2, "random:4")) == ["AB", "BA"]
    assert sorted(scheme_labels(3, "random:7")) == sorted(scheme_labels(3, "all"))


def test_random_k_depends_on_the_seed() -> None:
    assert scheme_labels(8, "random:5", seed=1) != scheme_labels(8, "random:5", seed=2)


def test_swap() -> None:
    assert scheme_labels(2, "swap") == ["AB", "BA"]
    assert scheme_labels(4, "swap") == ["ABCD", "DBCA"]


@pytest.mark.parametrize(
    ("n", "scheme"),
    [
        (4, "rotate"),
        (4, ""),
        (4, "random"),
        (4, "random:"),
        (4, "random:x"),
        (4, "random:0"),
        (4, "random:-2"),
        (4, "CYCLIC"),
        (1, "cyclic"),
        (MAX_OPTIONS + 1, "cyclic"),
    ],
)
def test_bad_schemes_raise_orientation_error(n: int, scheme: str) -> None:
    with pytest.raises(OrientationError):
        scheme_labels(n, scheme)


@pytest.mark.parametrize("bad", ["", "A", "AA", "ABB", "ABD", "abc", "A" * (MAX_OPTIONS + 1), "AB C"])
def test_bad_labels_raise_orientation_error(bad: str) -> None:
    with pytest.raises(OrientationError):
        perm_of(bad)


def test_maps_refuse_mismatched_options() -> None:
    with pytest.raises(OrientationError):
        apply(["x", "y", "z"], "BA")
    with pytest.raises(OrientationError):
        unapply(["x"], "BA")
    with pytest.raises(OrientationError):
        derive(["x", "y"], ["x", "z"])
    with pytest.raises(OrientationError):
        derive(["x", "x", "y"], ["x", "y", "x"])


def test_gold_index_reads_letters_and_indices() -> None:
    assert gold_index("b", 4) == 1
    assert gold_index(" C ", 4) == 2
    assert gold_index(3, 4) == 3
    for bad in ("E", "AB", 4, -1, True, 1.0, None):
        with pytest.raises(ValueError):
            gold_index(bad, 4)


def test_render_prompt_substitutes_in_one_pass() -> None:
    prompt = render_prompt("What does {options} mean in {braces}?", ["x", "y"], "{question}\n{options}")
    assert prompt == "What does {options} mean in {braces}?\nA. x\nB. y"
