"""End to end in a real headless Chromium: `mcqaudit dashboard STUDY` serves the pages, a reviewer overrides a
verdict on Review, the Overview changes; a generation full of markup shows as text and fires nothing.

Debian's Chromium (`apt-get install chromium`, never `playwright install`). Without it the test skips, except
in CI (CI=true), where a missing browser is a failure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import ARGS, ARTIFACTS, CHROMIUM, serve, settle
from tests.ui_study import XSS

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def server(ui_db: Path):
    with serve(ui_db) as url:
        yield url, ui_db


def _metric(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has_text=label)
    return box.locator('[data-testid="stMetricValue"]').inner_text()


def test_review_in_the_browser_changes_the_overview(server) -> None:
    from playwright.sync_api import expect, sync_playwright

    from mcqaudit.store import Study

    url, db = server
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    dialogs: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.set_default_timeout(30_000)
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

            # /_stcore/health answers before the script runs: wait for what the page writes
            page.goto(url)  # the default page (Overview) lives at the root
            expect(page.get_by_role("heading", name="Overview")).to_be_visible()
            expect(page.locator('[data-testid="stMetric"]', has_text="OTHER rate · steered")).to_be_visible()
            before = _metric(page, "OTHER rate · steered")

            page.get_by_role("link", name="Review").first.click()
            expect(page.get_by_role("heading", name="Review")).to_be_visible()
            reviewer = page.get_by_role("textbox", name="Reviewer")
            reviewer.fill("e2e")
            reviewer.press("Enter")
            page.get_by_text("Filters: none").click()  # the filters sit in a collapsed expander
            search = page.get_by_role("textbox", name="Search")
            search.fill("<script>")
            search.press("Enter")
            expect(page.get_by_text("Row 1 of 1 matching rows")).to_be_visible()
            # the generation is text, shown with the naive parser's span marked: its markup shows verbatim
            # and builds no element
            gen = page.locator('pre[data-testid="mq-generation"]')
            expect(gen).to_have_text(XSS)  # the panel streams in: wait for the row the search found
            mark = gen.locator('mark[data-testid="mq-parser-span"]')
            assert mark.count() == 1 and mark.inner_text() == XSS[XSS.index("c")]  # naive's first [A-Da-d]
            assert gen.locator("*").count() == 1  # the mark is the only element inside
            assert page.locator("img[src='x']").count() == 0
            assert page.locator("img[src*='127.0.0.1:9']").count() == 0  # the Markdown image stayed text
            assert page.locator("script", has_text="alert(1)").count() == 0

            settle(page)  # the whole panel of the found row is drawn (the decision controls come after the text)
            page.get_by_role("radiogroup", name="Verdict").get_by_text("INCORRECT", exact=True).click()
            save = page.get_by_role("button", name="Save override")
            expect(save).to_be_enabled()
            save.click()
            expect(page.get_by_text("Saved review #1")).to_be_visible()
            expect(page.get_by_text("No review yet.")).to_be_hidden()  # the history shows the new review
            page.screenshot(path=str(ARTIFACTS / "dashboard-review.png"), full_page=True)

            page.get_by_role("link", name="Overview").first.click()
            expect(page.get_by_role("heading", name="Overview")).to_be_visible()
            value = page.locator('[data-testid="stMetric"]', has_text="OTHER rate · steered").locator(
                '[data-testid="stMetricValue"]'
            )
            expect(value).not_to_have_text(before)
            after = value.inner_text()
            page.screenshot(path=str(ARTIFACTS / "dashboard-overview.png"), full_page=True)
        finally:
            browser.close()

    s = Study(db)
    assert s.query("SELECT final_verdict, reviewer FROM graded_rows WHERE generation = ?", [XSS])[0] == (
        "INCORRECT",
        "e2e",
    )
    n, other = s.query(
        "SELECT count(*), count(*) FILTER (final_verdict = 'OTHER') FROM graded_rows WHERE arm = 'steered'"
    )[0]
    assert after == f"{100 * other / n:.1f} %" != before
    assert dialogs == []
    assert (ARTIFACTS / "dashboard-overview.png").stat().st_size > 10_000
