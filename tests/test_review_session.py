"""A whole spot-check session in a real headless Chromium, as a reviewer lives it (docs/design.md §8).

The study has three arms of chat-model-like answers, long passages, metadata and prompts (tests/review_study.py,
graded by the stand-in judge). The reviewer sets a name, draws a uniform queue of 20 rows in total, and
reviews every row with a mix of keys and clicks: 15 confirmations and 5 overrides, one of them in blind mode,
with a reload in the middle that must resume from the URL. Then the study file must hold exactly those 20
reviews, each on the row that was on screen when it was made, all inside the queue, with the reviewer and
verdicts as entered. Screenshots at 1400×1000 land in tests/artifacts/.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from mcqaudit.store import Study
from tests.browser import ARGS, ARTIFACTS, CHROMIUM, serve, settle
from tests.builders import build_review_study as build
from tests.review_study import ARMS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REVIEWER = "Ann Lee"  # a space: the name must survive the URL
OVERRIDE_AT = {5: "keys", 10: "clicks+note", 12: "keys", 15: "blind", 19: "keys"}
CLICK_CONFIRM_AT = {6, 7, 8, 9, 13, 17}
RELOAD_BEFORE = 10
NEXT_VERDICT = {"CORRECT": "INCORRECT", "INCORRECT": "OTHER", "OTHER": "CORRECT"}


@pytest.fixture(scope="module")
def review_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("review-session") / "study.duckdb")


def shown_row(page: Any) -> str:
    line = page.locator('[data-testid="stMarkdownContainer"]', has_text=re.compile(r"· arm .* · item ")).first
    return line.locator("code").first.inner_text()


def wait_for_row(page: Any, old: str | None) -> str:
    """The row id on screen once it is no longer ``old`` and the page has been quiet for 200 ms (Streamlit
    marks a rerun's old elements stale only after a short delay, so one look can miss a run in flight)."""
    deadline = time.monotonic() + 20
    quiet: tuple[str, float] | None = None
    while time.monotonic() < deadline:
        try:
            rid = shown_row(page) if page.locator('[data-stale="true"]').count() == 0 else None
        except Exception:  # re-rendering
            rid = None
        now = time.monotonic()
        if not rid or rid == old:
            quiet = None
        elif quiet is None or quiet[0] != rid:
            quiet = (rid, now)
        elif now - quiet[1] >= 0.2:
            return rid
        page.wait_for_timeout(25)
    raise AssertionError(f"the review panel stayed on {old}")


def blur(page: Any) -> None:
    page.evaluate("document.activeElement && document.activeElement.blur()")


def _dropped(page: Any) -> bool:
    log = page.evaluate("window.__mcqauditKeyLog || []")
    return bool(log) and "refused: the row changed" in log[-1]


def press_saving(page: Any, key: str, db: Path, reviews_before: int) -> None:
    """A key that saves (c, s): pressed on a settled page, it must add a review. A key refused because the
    row changed before it could be applied (by design, see press_verdict) is pressed again; any other outcome
    fails."""
    for _ in range(3):
        settle(page)
        blur(page)
        page.keyboard.press(key)
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            if Study(db).query("SELECT count(*) FROM reviews")[0][0] > reviews_before:
                return
            page.wait_for_timeout(100)
        if not _dropped(page):
            log = page.evaluate("window.__mcqauditKeyLog || []")
            raise AssertionError(f"key {key} saved nothing; key log: {log[-5:]}")
    raise AssertionError(f"key {key} kept being dropped")


def press_verdict(page: Any, verdict: str) -> None:
    """Keys 1 / 2 / 3 choose the verdict. A key pressed while the panel re-renders waits for the rerun and is
    applied to the same row, or refused on screen when another row came (it must not act on a row not yet
    seen), as the page's key log says; then, as a person would, press again. Any other outcome fails with
    the key log (tests/test_review_keys.py presses keys without waiting)."""
    key = str(1 + ["CORRECT", "INCORRECT", "OTHER"].index(verdict))
    for _ in range(3):
        settle(page)
        blur(page)
        page.keyboard.press(key)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            if page.locator('[class*="st-key-override-"] button[disabled]').count() == 0 and page.locator(
                '[class*="st-key-override-"] button'
            ).count():
                return
            page.wait_for_timeout(50)
        if not _dropped(page):
            log = page.evaluate("window.__mcqauditKeyLog || []")
            raise AssertionError(f"key {key} did nothing; key log: {log[-5:]}")
    raise AssertionError(f"key {key} kept being dropped")


def current_verdict(page: Any) -> str:
    text = page.get_by_text(re.compile(r"^the verdict (CORRECT|INCORRECT|OTHER)$")).inner_text()
    return text.split()[-1]


def test_a_whole_spot_check_session(review_db: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    # a first page can take 10 s on a loaded 2-core machine: every expectation waits up to 30 s for its condition
    expect.set_options(timeout=30_000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    made: list[tuple[str, str, str]] = []  # (row on screen, action, verdict) in the order entered
    dialogs: list[str] = []
    with serve(review_db) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(f"{url}/review")
            expect(page.get_by_role("heading", name="Review")).to_be_visible()
            reviewer = page.get_by_role("textbox", name="Reviewer")
            reviewer.fill(REVIEWER)
            reviewer.press("Enter")
            expect(page).to_have_url(re.compile(r"reviewer=Ann(\+|%20)Lee"))

            # draw a uniform queue of 20 rows in total over the three arms; Enter in its name field submits nothing
            page.get_by_role("button", name="Spot-check queues").click()
            page.get_by_label("Rows", exact=True).fill("20")
            page.get_by_text("in total", exact=True).click()
            name = page.get_by_role("textbox", name="Name (optional)")
            name.fill("team audit")
            name.press("Enter")
            page.wait_for_timeout(500)
            assert Study(review_db).query("SELECT count(*) FROM spot_checks")[0][0] == 0
            page.get_by_role("button", name="Draw sample").click()
            expect(page.get_by_text("Spot check #1 drawn: 20 rows")).to_be_visible()
            page.keyboard.press("Escape")
            expect(page).to_have_url(re.compile(r"queue=1"))
            queue = [
                r[0] for r in Study(review_db).query("SELECT row_id FROM spot_check_rows ORDER BY position")
            ]
            assert len(queue) == 20
            assert {r[0] for r in Study(review_db).query("SELECT DISTINCT arm FROM gen_rows")} == set(ARMS)
            expect(page.get_by_text(re.compile(r"^0 of 20 rows reviewed"))).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "review-queue-start.png"))

            row = shown_row(page)
            assert row == queue[0]
            for i in range(20):
                if i == RELOAD_BEFORE:
                    page.reload()
                    expect(page.get_by_role("heading", name="Review")).to_be_visible()
                    expect(page.get_by_text(re.compile(r"^10 of 20 rows reviewed"))).to_be_visible()
                    assert shown_row(page) == row, "the reload did not resume on the row of the URL"
                    expect(page.get_by_role("textbox", name="Reviewer")).to_have_value(REVIEWER)
                    expect(page.get_by_role("combobox", name="Work through")).to_have_value("#1 team audit")
                assert row in queue, f"row {row} on screen is not in the queue"
                assert row not in {m[0] for m in made}, f"row {row} came back after its review"
                how = OVERRIDE_AT.get(i)
                if how is None:
                    verdict = current_verdict(page)
                    if i in CLICK_CONFIRM_AT:
                        page.get_by_role("button", name="Confirm", exact=True).click()
                    else:
                        press_saving(page, "c", review_db, i)
                    made.append((row, "confirm", verdict))
                elif how == "blind":
                    page.get_by_text("Blind mode", exact=True).click()
                    expect(page).to_have_url(re.compile(r"blind=1"))
                    expect(page.get_by_text(re.compile("^Blind mode: the judge's verdict"))).to_be_visible()
                    assert page.get_by_role("button", name="Confirm", exact=True).count() == 0
                    assert page.locator('mark[data-testid="mq-parser-span"]').count() == 0
                    page.screenshot(path=str(ARTIFACTS / "review-blind.png"))
                    truth = Study(review_db).query(
                        "SELECT final_verdict FROM graded_rows WHERE row_id = ?", [row]
                    )[0][0]
                    verdict = NEXT_VERDICT[truth]
                    press_verdict(page, verdict)
                    press_saving(page, "s", review_db, i)
                    made.append((row, "override", verdict))
                else:
                    verdict = NEXT_VERDICT[current_verdict(page)]
                    if how == "keys":
                        press_verdict(page, verdict)
                        press_saving(page, "s", review_db, i)
                    else:
                        page.get_by_role("radiogroup", name="Verdict").get_by_text(
                            verdict, exact=True
                        ).click()
                        note = page.get_by_role("textbox", name="Note (optional)")
                        # typed key by key: its j and s are text here, not "next" and "save"
                        note.press_sequentially("judge missed the hedge")
                        note.press("Enter")  # commits the note; saves nothing
                        page.wait_for_timeout(500)
                        assert Study(review_db).query("SELECT count(*) FROM reviews")[0][0] == i
                        assert shown_row(page) == row
                        page.get_by_role("button", name="Save override").click()
                    made.append((row, "override", verdict))
                if i < 19:
                    row = wait_for_row(page, row)
                if i == 15:
                    page.get_by_text("Blind mode", exact=True).click()
                    expect(page.get_by_text(re.compile("^Blind mode: the judge's verdict"))).to_be_hidden()
                if i == 11:
                    settle(page)
                    page.screenshot(path=str(ARTIFACTS / "review-mid-queue.png"))
            expect(page.get_by_text("Every row of this queue is reviewed.")).to_be_visible()
            expect(page.get_by_text(re.compile(r"^20 of 20 rows reviewed"))).to_be_visible()
            settle(page)  # the finished queue as it stays, not a rerun in flight
            page.screenshot(path=str(ARTIFACTS / "review-queue-done.png"))
        finally:
            browser.close()

    s = Study(review_db)
    got = s.query("SELECT row_id, action, verdict, reviewer, queue_id, note FROM reviews ORDER BY review_id")
    assert [(r[0], r[1], r[2]) for r in got] == made
    assert len(got) == 20 and {r[0] for r in got} == set(queue)
    assert {r[3] for r in got} == {REVIEWER} and {r[4] for r in got} == {1}
    assert sum(r[1] == "confirm" for r in got) == 15 and sum(r[1] == "override" for r in got) == 5
    assert [r[5] for r in got if r[5]] == ["judge missed the hedge"]
    # every verdict as entered is the final verdict now
    finals = dict(s.query("SELECT row_id, final_verdict FROM graded_rows WHERE verdict_source = 'review'"))
    assert finals == {r[0]: r[2] for r in got}
    assert dialogs == []
