"""The issue's "Done means" in a real headless Chromium at 1400×1000: a study graded by two judges and reviewed
by two people shows in its first screen, without scrolling, whether the finding holds under both judges and
how far the reviewers agree, with n. The screenshot lands in tests/artifacts/overview-panel.png."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import ARTIFACTS, open_page
from tests.overview_panel_study import N, panel_study

pytestmark = [pytest.mark.browser, pytest.mark.slow]
VIEWPORT = {"width": 1400, "height": 1000}


def test_both_judges_and_the_reviewers_in_the_first_screen(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    db = panel_study(tmp_path, panel=True)
    with open_page(db, VIEWPORT, timeout_ms=60_000) as (page, url):
        page.goto(url)
        expect(page.get_by_role("heading", name="Findings")).to_be_visible(timeout=60_000)
        lines = {
            "the judges": page.get_by_text("Judge panel: 2 judges", exact=False),
            "the finding under both judges": page.get_by_text(
                f"holds under both judges (n={N} items)"
            ).first,
            "the reviewers": page.get_by_text("Reviewers agree on 80.0 %", exact=False),
        }
        for loc in lines.values():
            expect(loc).to_be_visible(timeout=60_000)
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "overview-panel.png"))
        for what, loc in lines.items():
            box = loc.bounding_box()
            assert box is not None and box["y"] + box["height"] <= VIEWPORT["height"], (
                f"{what} are below the first screen ({box})"
            )
        assert "of 20 rows reviewed by two or more people" in lines["the reviewers"].inner_text()
