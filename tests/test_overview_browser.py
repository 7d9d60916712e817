"""The Overview's first screen in a real headless Chromium at 1400×1000: on the demo study and on a three-arm
study, the findings and the headline figures are on screen without scrolling; on the demo, so are the
reasoning arm's findings, the token budget named among them. Screenshots land in
tests/artifacts/ (look at them); the demo's is also the README's picture (docs/overview.png) when
MCQAUDIT_REGEN_SCREENSHOT=1.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.browser import ARTIFACTS, PLOT_AREAS_JS, open_page
from tests.builders import build_review_study as build
from tests.helpers import REPO

pytestmark = [pytest.mark.browser, pytest.mark.slow]
VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mcqaudit.demo import build_demo

    return Path(build_demo(tmp_path_factory.mktemp("demo") / "demo.duckdb"))


@pytest.fixture(scope="module")
def three_arm_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("three-arm") / "study.duckdb")


def _first_screen(db: Path, shot: str) -> list[tuple[str, float]]:
    """The findings' texts, each with the y its box ends at."""
    from playwright.sync_api import expect

    with open_page(db, VIEWPORT, timeout_ms=60_000) as (page, url):
        page.goto(url)
        expect(page.get_by_role("heading", name="Overview")).to_be_visible(timeout=60_000)
        findings = page.get_by_role("heading", name="Findings")
        expect(findings).to_be_visible(timeout=60_000)
        card = page.locator('[data-testid="stMetric"]').first
        expect(card).to_be_visible(timeout=60_000)
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / shot))
        for what, loc in (("findings", findings), ("headline figures", card)):
            box = loc.bounding_box()
            assert box is not None and box["y"] + box["height"] <= VIEWPORT["height"], (
                f"the {what} are below the first screen ({box})"
            )
        items = []
        for li in page.locator('[data-testid="stMarkdownContainer"] li').all():
            box = li.bounding_box()
            items.append((li.inner_text(), box["y"] + box["height"] if box else float("inf")))
        assert page.get_by_text("Deploy").count() == 0  # client.toolbarMode=minimal
    return items


def test_the_demo_tells_its_story_in_the_first_screen(demo_db: Path) -> None:
    items = _first_screen(demo_db, "overview-demo.png")
    text = " ".join(t for t, _ in items)
    assert "naive" in text and "n=" in text, items
    # the reasoning arm: its headline and the finding that names the token budget, without scrolling
    for needle in ("thinking vs base", "is the token budget"):
        bottom = next((b for t, b in items if needle in t), None)
        assert bottom is not None and bottom <= VIEWPORT["height"], (needle, items)
    if os.environ.get("MCQAUDIT_REGEN_SCREENSHOT") == "1":
        shutil.copy(ARTIFACTS / "overview-demo.png", REPO / "docs" / "overview.png")


def test_three_arms_in_the_first_screen(three_arm_db: Path) -> None:
    items = _first_screen(three_arm_db, "overview-three-arms.png")
    text = " ".join(t for t, _ in items)
    assert "steered" in text and "finetuned" in text, items


# every element of a headline figure whose text runs past its box (shown cut, "71.…")
CUT_FIGURES_JS = """() => Array.from(document.querySelectorAll(
    '[data-testid="stMetricValue"], [data-testid="stMetricValue"] *'))
  .filter(el => el.scrollWidth > el.clientWidth + 1).map(el => el.textContent)"""


def test_eight_arms_with_long_names_show_every_headline_figure_whole(tmp_path: Path) -> None:
    """Eight arms of one model, their names 28-50 characters sharing a long start, one at 100.0 %: every arm's
    card shows its figures whole (four cards a row had cut every value: "71.…", in 15 of 16) and every figure
    keeps its plot area (the pairwise Δ of 8 arms; the arms' names cut there, telling them apart)."""
    from playwright.sync_api import expect

    from mcqaudit.formatting import short_labels
    from tests.builders import MANY_ARMS, many_arm_study

    db = tmp_path / "many.duckdb"
    many_arm_study(db).build()
    with open_page(db, VIEWPORT, timeout_ms=60_000) as (page, url):
        page.goto(url)
        expect(page.get_by_role("heading", name="Findings")).to_be_visible(timeout=60_000)
        values = page.locator('[data-testid="stMetricValue"]')
        expect(values).to_have_count(2 * len(MANY_ARMS))
        page.locator(".js-plotly-plot").first.wait_for()  # the pairwise Δ of 8 arms
        page.wait_for_timeout(800)
        page.screenshot(path=str(ARTIFACTS / "overview-eight-arms.png"))
        assert "100.0 %" in [values.nth(k).inner_text() for k in range(values.count())]
        assert page.evaluate(CUT_FIGURES_JS) == []
        page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        areas = page.evaluate(PLOT_AREAS_JS)
        assert areas and all(w >= 0.5 * width and h >= 0.4 * height for _, w, width, h, height in areas), areas
        ticks = page.evaluate(
            "() => Array.from(document.querySelectorAll('.js-plotly-plot .xtick text')).map(t => t.textContent)"
        )
        assert sorted(ticks) == sorted(short_labels(MANY_ARMS).values()), ticks
