"""Parsers vs judge in a real headless Chromium: the letter heatmap beside the 3×3 verdict matrix is shaded
(misreads red, agreement blue), a click on a count lists exactly its rows, and "Review these rows" opens
Review on them. Screenshots land in tests/artifacts/ (look at them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import ARTIFACTS, open_page, settle
from tests.builders import hand_study

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_letter_heatmap_click_lists_its_rows_and_opens_review(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    db = hand_study(tmp_path).build().path
    with open_page(db, {"width": 1500, "height": 1100}, timeout_ms=60_000) as (page, url):
        try:
            page.goto(url.rstrip("/") + "/parsers")
            expect(page.get_by_role("heading", name="Parsers vs judge")).to_be_visible(timeout=60_000)
            expect(page.locator(".st-key-lcell-C-D")).to_be_visible(timeout=60_000)
            settle(page, quiet_ms=800, timeout_s=90)

            def button(key: str):  # type: ignore[no-untyped-def]
                return page.locator(f".st-key-{key} button").first

            cell = button("lcell-C-D")
            expect(cell).to_have_text("1", timeout=60_000)  # a first run may still be replaced by a second
            settle(page, quiet_ms=800, timeout_s=90)
            red = cell.evaluate("b => getComputedStyle(b).backgroundColor")
            blue = button("lcell-B-B").evaluate("b => getComputedStyle(b).backgroundColor")
            empty = button("lcell-B-C").evaluate("b => getComputedStyle(b).backgroundColor")
            assert red.startswith("rgba(214, 39, 40") and blue.startswith("rgba(31, 119, 180"), (red, blue)
            assert empty != red and empty != blue
            page.screenshot(path=str(ARTIFACTS / "parsers_letters.png"), full_page=True)
            cell.click()
            listed = page.get_by_text("1 row with reference letter C where the naive parser reads D")
            expect(listed).to_be_visible(timeout=30_000)
            settle(page, timeout_s=90)
            page.screenshot(path=str(ARTIFACTS / "parsers_letter_cell.png"), full_page=True)
            page.get_by_role("button", name="Review these 1 rows →").click()
            expect(page.get_by_role("heading", name="Review")).to_be_visible(timeout=60_000)
            banner = page.get_by_text("Confusion cell from Parsers vs judge: rows with reference letter C where the")
            expect(banner).to_be_visible(timeout=30_000)
            page.wait_for_url("**row=base%7Ci6%7CABCD%7C0**")
            settle(page, timeout_s=90)
            page.screenshot(path=str(ARTIFACTS / "parsers_letter_review.png"), full_page=True)
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "parsers_letters_failure.png"), full_page=True)
            raise
