"""What the views call things (issues 17 and 18): the words follow the data, and names are text.

- ``md_text`` (the one Markdown escaper, the dashboard's and the Markdown report's) keeps any text literal
  under a GFM-like renderer (markdown-it with tables, strikethrough, linkify, math, footnotes, task lists):
  Hypothesis over the characters that start markup;
- the Markdown and HTML reports of a study whose arm names carry a phishing link, ``**bold**``, backticks,
  ``<img onerror>``, an icon and an e-mail: parsed, no element comes from a name and the names are there
  literally; an arm name with a dot is whole in the notes;
- arms that share no items read "unpaired" in the Markdown, the HTML and the Overview (nothing says paired
  or shared);
- the naive parser is described by the study's own letter range ([A-Ga-g] on 7-option items, per option
  count when mixed) in the findings, the report and the Parsers page;
- a study still being graded says how many rows are pending, and none of its Δ or OTHER findings reads as
  final until the judge has graded them.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcqaudit import orient
from mcqaudit.app.report import build_report
from mcqaudit.formatting import WORD_JOINER, md_text, naive_range, pairing_words, text_runs
from mcqaudit.report import note_label, to_html, to_markdown
from tests.builders import fixture_study
from tests.helpers import run_cli, write_jsonl

PHISH = "[Session expired - log in again](http://127.0.0.1:8799/phish)"
HOSTILE_ARMS = (
    "base",
    f"{PHISH} **HBOLD** `HCODE`",
    "mistral-7b-True-0.2 <img src=x onerror=alert(1)> :material/bug_report: :smile: a@hlink.com",
)


# --- a GFM-like renderer and an HTML reader -------------------------------------------------------------------
def _markdown() -> Any:
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.footnote import footnote_plugin
    from mdit_py_plugins.tasklists import tasklists_plugin

    md = MarkdownIt("gfm-like").use(dollarmath_plugin).use(footnote_plugin).use(tasklists_plugin)
    md.linkify.set({"fuzzy_link": False})  # GFM links www., scheme:// and e-mails, not bare domains
    return md


class Page(HTMLParser):
    """Every element (tag, attributes, its text) and the page's text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None], list[str]]] = []
        self.open: list[list[str]] = []
        self.chunks: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el: list[str] = []
        self.elements.append((tag, dict(attrs), el))
        if tag not in ("br", "img", "hr", "meta", "input", "line", "rect", "path", "circle"):
            self.open.append(el)

    def handle_endtag(self, tag: str) -> None:
        if self.open:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        self.chunks.append(data)
        for el in self.open:
            el.append(data)

    def tags(self, *names: str) -> list[tuple[str, str]]:
        return [(t, "".join(x)) for t, _, x in self.elements if t in names]

    @property
    def text(self) -> str:
        return " ".join("".join(self.chunks).replace(WORD_JOINER, "").split())


MARKUP = st.sampled_from(
    list("ab1 _*`[]()<>!&#;:/.@$|~\\-+=^{}\"'\n\t\r")
    + ["www.", "http://", "a@b.co", ":smile:", ":material/flag:", ":red[x]", "1. ", "1)", "    ", "&amp;",
       "<b>", "<img src=x onerror=alert(1)>", "](", "[x]: y", "```", "---", "===", "***", "___", "<!--", "$$",
       "~~", "| a |", "[^1]", "^[x]", "![x](y)", "é", "😄", "HTTPS://", "WWW.", "mailto:", "//h.co"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(MARKUP, max_size=12).map("".join))
def test_md_text_is_literal_under_a_gfm_renderer(s: str) -> None:
    md = _markdown()
    norm = " ".join(s.split())
    for prefix in ("- ", "", "x "):  # a list item, a paragraph, mid-sentence
        page = Page(md.render(prefix + md_text(s, line_start=prefix != "x ")))
        assert _all(page) <= {"p", "br", "ul", "li"}, (s, md_text(s), [t for t, _, _ in page.elements])
        assert page.text == " ".join((prefix.strip("- ") + " " + norm).split()), (s, md_text(s), page.text)
    cell = " ".join(md_text(s, line_start=False, after=" ").split())
    page = Page(md.render(f"| h |\n|---|\n| {cell} |\n"))
    assert {t for t, _, _ in page.elements} <= {"table", "thead", "tbody", "tr", "th", "td"}, (s, cell)
    assert page.text == " ".join(("h " + norm).split())


def _all(page: Page) -> set[str]:
    return {t for t, _, _ in page.elements}


def test_streamlits_colour_directives_stay_text() -> None:
    # Streamlit reads :red[…] even with a word joiner after the colon (seen in Chromium): the bracket after
    # a word is escaped, a CI's bracket after a space is not
    assert md_text(":red[HRED]") == f":{WORD_JOINER}red\\[HRED\\]"
    assert (
        md_text("-2.1 pp [-4.0, +0.3] (n=24)", line_start=False, after=" ") == "-2.1 pp [-4.0, +0.3] (n=24)"
    )


def test_our_backticks_are_code_a_names_are_text() -> None:
    name = "x `HCODE` y"
    runs = text_runs(f"{name} vs base: run `mcqaudit grade`.", [name])
    assert runs == [(f"{name} vs base: run ", False), ("mcqaudit grade", True), (".", False)]
    assert text_runs("an `unpaired backtick", []) == [("an `unpaired backtick", False)]


def test_words_helpers() -> None:
    assert naive_range([4]) == "[A-Da-d]" and naive_range([7]) == "[A-Ga-g]"
    assert naive_range([7, 2]) == "[A-Ba-b] for 2-option items, [A-Ga-g] for 7-option items"
    assert pairing_words({"a": {"pairing": "paired"}, "b": None}) == "paired on shared items"
    assert pairing_words({"a": {"pairing": "unpaired"}}) == "unpaired (the arms share no items)"
    mixed = pairing_words({"a": {"pairing": "paired"}, "b.c": {"pairing": "unpaired"}})
    assert mixed == "paired on shared items; unpaired for b.c (no items shared)"


# --- hostile names in both reports ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    db = fixture_study(tmp_path_factory.mktemp("names") / "s.duckdb", arm_names=HOSTILE_ARMS).build()
    return build_report(db, n_boot=50)


def _no_element_from_a_name(page: Page) -> None:
    for tag, attrs, text in page.elements:
        body = "".join(text)
        assert tag not in ("img", "a", "strong", "em", "script", "iframe", "svg:image"), (tag, attrs, body)
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        if tag == "code":
            assert body.startswith("mcqaudit "), body  # only our own commands are code


def test_markdown_report_keeps_names_as_text(hostile_report: dict[str, Any]) -> None:
    md = to_markdown(hostile_report)
    assert not re.search(r"(?<!\\)<img|(?<!\\)\]\(http|\*\*HBOLD", md)  # every one escaped
    page = Page(_markdown().render(md))
    _no_element_from_a_name(page)
    for name in HOSTILE_ARMS:
        assert name in page.text, name
    # the arm with a dot, whole in the notes (it was "…True-0 …, 2" when the path was split at every dot)
    assert f"Log-prob cross-check ({HOSTILE_ARMS[2]}): no graded row" in page.text


def test_html_report_keeps_names_as_text(hostile_report: dict[str, Any]) -> None:
    page = Page(to_html(hostile_report))
    _no_element_from_a_name(page)
    assert any(t == "code" and "".join(x) == "mcqaudit grade" for t, _, x in page.elements)
    for name in HOSTILE_ARMS:
        assert name in page.text, name
        assert name in "".join(c for c in page.chunks if c)  # in the tables, the findings and the SVG labels
    svg_text = [x for t, x in page.tags("text", "title")]
    assert any(HOSTILE_ARMS[1] in x for x in svg_text)


def test_notes_name_an_arm_with_a_dot_whole() -> None:
    rep = {"arms": ["base", "mistral-7b-True-0.2"], "control_arm": "base"}
    assert note_label("metrics.mistral-7b-True-0.2.rstd", rep) == "RStd (mistral-7b-True-0.2)"
    assert (
        note_label("delta_accuracy.mistral-7b-True-0.2.overall", rep)
        == "Δaccuracy mistral-7b-True-0.2 vs base"
    )
    assert (
        note_label("pairwise_delta.base.mistral-7b-True-0.2", rep) == "Δaccuracy base vs mistral-7b-True-0.2"
    )
    assert note_label("delta_accuracy_by_parser.mistral-7b-True-0.2.naive", rep) == (
        "Δaccuracy mistral-7b-True-0.2 vs base by the naive parser"
    )


# --- real studies: unpaired arms, 7 options, pending rows ----------------------------------------------------------
def _rows(arm: str, items: range, rng: np.random.Generator, *, n_opt: int = 4, prose: float = 0.0,
          p: float = 0.7) -> list[dict[str, Any]]:  # fmt: skip
    letters = "ABCDEFG"[:n_opt]
    out = []
    for k in items:
        item = orient.Item(
            f"q{k:03d}", f"Question {k}?", tuple(f"answer {k}-{j}" for j in range(n_opt)), k % n_opt
        )
        for prompt in orient.orient_item(item, orient.scheme_labels(n_opt, "cyclic")[:4]):
            g = prompt["gold"]
            pick = g if rng.random() < p else [x for x in letters if x != g][int(rng.integers(0, n_opt - 1))]
            text = f"Hmm, I would say {pick}, though I am not sure." if rng.random() < prose else pick
            out.append({**prompt, "arm": arm, "generation": text})
    return out


def _study(tmp: Path, rows: list[dict[str, Any]], *grade: str) -> Path:
    db = tmp / "study.duckdb"
    run_cli("ingest", str(write_jsonl(tmp / "g.jsonl", rows)), "--db", str(db), "--quiet", "--control", "m1",
            check=True)  # fmt: skip
    if grade:
        run_cli("grade", "--db", str(db), "--quiet", *grade, check=True)
    return db


@pytest.fixture(scope="module")
def unpaired(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    return _study(tmp_path_factory.mktemp("unpaired"), _rows("m1", range(0, 30), rng) + _rows("m2", range(50, 80), rng, p=0.4),
                  "--no-judge")  # fmt: skip


def test_unpaired_arms_read_unpaired_in_markdown_and_html(unpaired: Path) -> None:
    rep = build_report(unpaired, n_boot=100)
    assert rep["delta_accuracy"]["m2"]["pairing"] == "unpaired"
    for text in (to_markdown(rep), Page(to_html(rep)).text):
        body = text[text.index("Δ vs control") :]
        assert "Treated − control, unpaired (the arms share no items)" in body
        assert "paired on" not in body.replace("unpaired", "") and "same items" not in body
        assert "shared items" not in body.split("Δ vs control")[1][:400]


def test_unpaired_arms_read_unpaired_on_the_overview(unpaired: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.ui_study import BOOT, app, no_exceptions

    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", str(BOOT))
    at = app(unpaired, "overview").run()
    no_exceptions(at)
    shown = " ".join(m.value for m in at.markdown)
    assert "in percentage points, unpaired (the arms share no items):" in shown
    assert "paired item bootstrap" not in shown
    deltas = [d.value for d in at.dataframe if "pairing" in d.value.columns][0]
    assert "shared items" not in deltas.columns and list(deltas["pairing"]) == ["unpaired"]
    from mcqaudit.plots import fig_delta_by_orientation

    title = fig_delta_by_orientation(build_report(unpaired, n_boot=BOOT)).layout.title.text
    assert "unpaired" in title and "paired item bootstrap" not in title


def test_naive_is_described_by_the_studys_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    db = _study(tmp_path, _rows("m1", range(0, 24), rng, n_opt=7) + _rows("m2", range(0, 24), rng, n_opt=7, p=0.4),
                "--no-judge")  # fmt: skip
    rep = build_report(db, n_boot=100)
    (naive,) = [f["text"] for f in rep["findings"] if f.get("parser") == "naive"]
    assert "[A-Ga-g]" in naive and "[A-D]" not in naive
    assert "[A-Ga-g]" in to_markdown(rep) and "[A-D]" not in to_markdown(rep)
    from tests.ui_study import BOOT, app, no_exceptions

    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", str(BOOT))
    at = app(db, "parsers").run()
    no_exceptions(at)
    captions = " ".join(c.value for c in at.caption)
    assert "\\[A-Ga-g\\]" in captions or "[A-Ga-g]" in captions.replace("\\", ""), captions
    mixed = {**rep, "study": {**rep["study"], "orientations": ["AB", "BA", *rep["study"]["orientations"]]}}
    assert "[A-Ba-b] for 2-option items, [A-Ga-g] for 7-option items" in to_markdown(
        {**mixed, "findings": None}
    ).replace("\\", "")


def test_findings_say_rows_are_pending_until_the_judge_grades_them(tmp_path: Path) -> None:
    from mcqaudit.standin.server import StandinServer

    rng = np.random.default_rng(11)
    rows = _rows("m1", range(0, 30), rng, prose=0.3) + _rows("m2", range(0, 30), rng, prose=0.3, p=0.5)
    db = _study(tmp_path, rows)  # ingested only: the strict pre-filter resolved the bare letters
    rep = build_report(db, n_boot=100)
    n = sum(rep["pending_by_arm"].values())
    assert n > 0 and rep["metrics"]["m2"]["other_rate"]["value"] == 0.0  # the figure that read as final
    first = rep["findings"][0]
    assert first["kind"] == "pending" and first["n_rows"] == n
    assert f"{n:,} of {rep['rows']:,} rows" in first["text"] and "provisional" in first["text"]
    per_arm = [f for f in rep["findings"] if f["arm"] == "m2"]
    assert {f["kind"] for f in per_arm} >= {"headline", "other_rate"}
    for f in per_arm:
        assert f["provisional"] is True and f["pending"] == n
        assert re.search(rf"Provisional: {n} rows of this comparison still pending\.$", f["text"]), f["text"]
    with StandinServer() as server:
        run_cli("grade", "--db", str(db), "--quiet", "--judge-model", "standin-heuristic", "--judge-base-url",
                server.base_url, check=True)  # fmt: skip
    done = build_report(db, n_boot=100)
    assert done["pending_by_arm"] == {}
    assert not any(f.get("provisional") or f["kind"] == "pending" for f in done["findings"])


def test_a_failed_judge_call_is_not_pending(tmp_path: Path) -> None:
    rep = build_report(fixture_study(tmp_path / "s.duckdb").build(), n_boot=20)
    assert rep["metrics"]["hedging"]["ungraded_rate"]["value"] > 0  # one judge call failed
    assert rep["pending_by_arm"] == {} and not any(f.get("provisional") for f in rep["findings"])


def test_arms_with_no_item_family_in_common_get_one_orientation_sentence(tmp_path: Path) -> None:
    """m1 was asked only 2-option items and m2 only 4-option ones: no orientation is shown to both arms'
    items, so the findings say that once — never "not enough items within 4-option items (0 items)"."""
    rng = np.random.default_rng(5)
    db = _study(tmp_path, _rows("m1", range(0, 30), rng, n_opt=2) + _rows("m2", range(50, 80), rng, p=0.4),
                "--no-judge")  # fmt: skip
    rep = build_report(db, n_boot=100)
    said = [f["text"] for f in rep["findings"] if f["kind"] == "orientation" and f.get("arm") == "m2"]
    assert said == [
        "The Δ cannot be checked per orientation: m2 and m1 answered no item family in common (of 2-option "
        "items and 4-option items, none was answered by both), so no orientation is shown to both arms' items."
    ]
    assert "(0 items)" not in to_markdown(rep)
