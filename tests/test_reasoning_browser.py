"""A reasoning model's rows on the Review page in a real headless Chromium (docs/design.md §3, §8): the answer
comes first with the parser's span marked in it, the reasoning sits collapsed under it and opens as text
(a hostile reasoning builds no element), a row cut off by the token limit carries the "truncated" badge and
says plainly that it has no answer, and a key still reviews the row with the reasoning opened.

The study (tests/reasoning_study.py) is built through the real ingest and graded by the stand-in judge.
Screenshots at 1400×1000 land in tests/artifacts/reasoning-*.png.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from mcqaudit.store import Study
from tests.browser import ARTIFACTS, open_page, settle
from tests.reasoning_study import CUT_TOKENS, HOSTILE, KINDS, build_reasoning_study, thinking

pytestmark = [pytest.mark.browser, pytest.mark.slow]

VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture(scope="module")
def reasoning_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_reasoning_study(tmp_path_factory.mktemp("reasoning-browser") / "study.duckdb")


def thinker(db: Path, kind: str) -> tuple[str, str]:
    """(row id, gold letter) of the ABCD thinker row of ``kind``."""
    return Study(db).query(
        "SELECT row_id, gold_letter FROM graded_rows WHERE arm = 'thinker' AND item_id = ? AND orientation = 'ABCD'",
        [f"r{KINDS.index(kind):02d}"],
    )[0]


def open_row(page: Any, url: str, row_id: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{url}/review?row={row_id}&reviewer=rae")
    expect(page.get_by_role("heading", name="Review")).to_be_visible()
    expect(page.locator('[class*="st-key-mq-row-line"] code').first).to_have_text(row_id)
    settle(page)


def badge(page: Any) -> Any:
    """The "truncated" badge (its icon, then the word)."""
    return page.locator("span", has=page.get_by_role("img", name="content_cut icon")).last


def reasoning_box(page: Any) -> Any:
    return page.locator('[data-testid="stExpander"]', has_text="Reasoning (")


def test_reasoning_rows_in_the_browser(reasoning_db: Path) -> None:
    from playwright.sync_api import expect

    dialogs: list[str] = []
    with open_page(reasoning_db, VIEWPORT) as (page, url):
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

        # thinking that names other letters, then a bare letter: the answer first, marked; the thinking closed
        rid, gold = thinker(reasoning_db, "letters")
        open_row(page, url, rid)
        answer = page.locator('pre[data-testid="mq-generation"]')
        expect(answer).to_have_text(gold)
        assert answer.locator('mark[data-testid="mq-parser-span"]').inner_text() == gold
        box = reasoning_box(page)
        expect(box).to_have_count(1)
        assert box.locator("details").get_attribute("open") is None  # collapsed
        expect(page.get_by_text("is tempting too")).to_be_hidden()
        a, b = answer.bounding_box(), box.bounding_box()
        assert a and b and a["y"] + a["height"] <= b["y"]  # the answer above the reasoning
        page.screenshot(path=str(ARTIFACTS / "reasoning-answer-first.png"))
        box.get_by_text("Reasoning (").click()
        code = box.locator("code")
        expect(code).to_have_text(thinking(gold))
        assert box.locator("details").get_attribute("open") is not None
        settle(page)
        page.screenshot(path=str(ARTIFACTS / "reasoning-opened.png"))

        # the focus is on the expander's summary (not a text field): key c confirms this row
        page.keyboard.press("c")
        deadline = time.monotonic() + 20
        while (
            time.monotonic() < deadline
            and not Study(reasoning_db).query("SELECT count(*) FROM reviews")[0][0]
        ):
            page.wait_for_timeout(100)
        assert Study(reasoning_db).query("SELECT row_id, action, reviewer FROM reviews") == [
            (rid, "confirm", "rae")
        ]
        expect(page.get_by_text("Saved review #1")).to_be_visible()

        # a hostile reasoning opens as its characters and builds nothing
        rid, _ = thinker(reasoning_db, "hostile")
        open_row(page, url, rid)
        box = reasoning_box(page)
        box.get_by_text("Reasoning (").click()
        expect(box.locator("code")).to_have_text(HOSTILE)
        assert box.locator("a, strong, img, script").count() == 0
        assert page.locator("a[href='http://x']").count() == 0 and page.locator("img[src='x']").count() == 0
        assert page.locator("script", has_text="alert(1)").count() == 0
        settle(page)
        page.screenshot(path=str(ARTIFACTS / "reasoning-hostile.png"))

        # cut off by the token limit while thinking: the badge, no answer said plainly, the thinking to read
        rid, _ = thinker(reasoning_db, "cut")
        open_row(page, url, rid)
        expect(badge(page)).to_have_text(re.compile(r"truncated$"))
        expect(
            page.get_by_text(
                "No answer: the model was cut off by the token limit while thinking. OTHER by rule."
            )
        ).to_be_visible()
        expect(
            page.get_by_text(
                f"the model was stopped by the token limit · finish_reason length · {CUT_TOKENS:,} completion"
            )
        ).to_be_visible()
        assert page.locator('pre[data-testid="mq-generation"]').count() == 0
        expect(reasoning_box(page)).to_have_count(1)
        page.screenshot(path=str(ARTIFACTS / "reasoning-cut.png"))

        # cut off after it answered: the badge and the answer, marked
        rid, gold = thinker(reasoning_db, "cut_answered")
        open_row(page, url, rid)
        expect(badge(page)).to_have_text(re.compile(r"truncated$"))
        answer = page.locator('pre[data-testid="mq-generation"]')
        expect(answer).to_have_text(f"The answer is {gold}, because")
        # naive marks the "a" of "answer"; the framework parser that reads "answer is B" marks the B
        page.get_by_text(f"mmlu_pro_chain → {gold}", exact=True).click()
        expect(answer.locator('mark[data-testid="mq-parser-span"]')).to_have_text(gold)
        settle(page)
        page.screenshot(path=str(ARTIFACTS / "reasoning-cut-answered.png"))

        # j moves on (keys keep working on these rows)
        blur = "document.activeElement && document.activeElement.blur()"
        page.evaluate(blur)
        page.keyboard.press("j")
        expect(page.locator('[class*="st-key-mq-row-line"] code').first).not_to_have_text(rid)
    assert dialogs == []
