"""In a real headless Chromium: the Orientations page compares orientations within each item family, and the
Bias page shows the pick shares of a gold-unbalanced study, marked as confounded (issue 17).

The study has 2-option items shown as AB and BA (gold balanced) and 4-option items with every gold at
canonical A shown as ABCD and BCDA only (the gold sits at displayed A or D: unbalanced).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import ARTIFACTS, open_page, settle
from tests.builders import StudyBuilder

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _study(path: Path) -> Path:
    b = StudyBuilder(path)
    for k in range(24):
        two = b.item(f"t{k:02d}", n=2, gold=k % 2)
        for lab in ("AB", "BA"):
            b.row("base", two, lab, b.gold_letter(two, lab))
            b.row("steered", two, lab, b.gold_letter(two, lab) if k % 4 else "A")
        four = b.item(f"f{k:02d}", n=4, gold=0)
        for lab in ("ABCD", "BCDA"):
            b.row("base", four, lab, "A")  # the first displayed option: the gold in ABCD only
            b.row("steered", four, lab, b.gold_letter(four, lab) if k % 3 else "B")
    b.build()
    return path


def _drawn(page) -> None:  # type: ignore[no-untyped-def]
    """Wait until the page's tables and charts are drawn (both render after the script's run ends)."""
    from playwright.sync_api import expect

    settle(page)
    expect(page.locator('[data-testid="stDataFrame"] canvas').first).to_be_attached()
    expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_visible()
    settle(page)


def test_orientations_per_family_and_confounded_picks_in_the_browser(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)  # the first run of each page computes its report on a busy machine
    db = _study(tmp_path / "families.duckdb")
    with open_page(db, {"width": 1400, "height": 1000}, timeout_ms=30_000) as (page, url):
        page.goto(url)
        expect(page.get_by_role("heading", name="Overview")).to_be_visible()
        page.get_by_role("link", name="Orientations").first.click()
        expect(page.get_by_role("heading", name="Orientations")).to_be_visible()
        for caption in ("2-option items (24 items, shown as AB, BA)", "4-option items (24 items, shown as ABCD, BCDA)"):
            expect(page.get_by_text(caption).first).to_be_visible()
        expect(page.locator('[data-testid="stPlotlyChart"]')).to_have_count(4)
        _drawn(page)
        page.screenshot(path=str(ARTIFACTS / "families-orientations.png"), full_page=True)

        page.get_by_role("link", name="Bias").first.click()
        expect(page.get_by_role("heading", name="Bias")).to_be_visible()
        warning = page.get_by_test_id("stAlertContentWarning")
        expect(warning.get_by_text("Confounded by the gold imbalance (design_imbalance)")).to_be_visible()
        chart = page.get_by_test_id("stPlotlyChart").get_by_text("Picks by displayed position")
        expect(chart).to_contain_text("confounded by the gold imbalance")
        page.reload()  # the page and its note survive a reload
        expect(page.get_by_role("heading", name="Bias")).to_be_visible()
        expect(warning.get_by_text("Confounded by the gold imbalance (design_imbalance)")).to_be_visible()
        expect(page.get_by_text("no row has a picked letter")).to_have_count(0)
        _drawn(page)
        page.screenshot(path=str(ARTIFACTS / "families-bias.png"), full_page=True)
