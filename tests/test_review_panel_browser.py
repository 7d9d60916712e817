"""A judges_disagree queue worked by key in a real headless Chromium (issue 21; docs/design.md §8).

The study is graded by two scripted judges that disagree on 12 rows known by hand (tests/panel_study.py). A
queue of those rows is drawn with `mcqaudit reviews queue --strategy judges_disagree`; the reviewer opens its
link and works four rows with the keys (c to confirm the primary's verdict, 3 then s to side with the panel
judge's OTHER), each time reading the row on screen and the judges' table first. The study file must then
hold exactly those reviews, each on the row that was on screen when its key was pressed. Screenshots at
1400×1000 land in tests/artifacts/.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from mcqaudit.store import Study
from tests.browser import ARTIFACTS, open_page, settle
from tests.helpers import run_cli
from tests.panel_study import DISAGREE, build_panel_study

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# what the reviewer does on each of the first four rows: confirm the primary, or say OTHER with the panel
PLAN = ("c", "other", "c", "other")


def shown_row(page: Any) -> str:
    line = page.locator('[data-testid="stMarkdownContainer"]', has_text=re.compile(r"· arm .* · item ")).first
    return str(line.locator("code").first.inner_text())


def wait_for_row(page: Any, old: str) -> str:
    """The row on screen once it is no longer ``old`` and the page has been quiet for 200 ms."""
    deadline = time.monotonic() + 30
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


def press(page: Any, key: str) -> None:
    settle(page)
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press(key)


def reviews(db: Path) -> int:
    return int(Study(db).query("SELECT count(*) FROM reviews")[0][0])


def press_until_saved(page: Any, key: str, db: Path, before: int) -> None:
    """A saving key (c, s) on a settled page must add a review; one the page refused because the row changed
    under it (its key log says so) is pressed again, as a person would."""
    for _ in range(3):
        press(page, key)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if reviews(db) > before:
                return
            page.wait_for_timeout(100)
        log = page.evaluate("window.__mcqauditKeyLog || []")
        if not (log and "refused" in log[-1]):
            raise AssertionError(f"key {key} saved nothing; key log: {log[-5:]}")
    raise AssertionError(f"key {key} kept being refused")


def test_a_judges_disagree_queue_worked_by_key(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    db = build_panel_study(tmp_path / "panel.duckdb")
    p = run_cli(
        "reviews", "queue", "--db", str(db), "--strategy", "judges_disagree", "--size", "12", "--json"
    )
    assert p.returncode == 0, p.stderr
    queue = json.loads(p.stdout)["rows"]
    assert sorted(queue) == DISAGREE
    made: list[tuple[str, str, str]] = []  # (row on screen, action, verdict), in the order entered
    with open_page(db, {"width": 1400, "height": 1000}) as (page, url):
        page.goto(f"{url}/review?queue=1&reviewer=ann")
        expect(page.get_by_role("heading", name="Review")).to_be_visible()
        expect(page.get_by_text(re.compile(r"^0 of 12 rows reviewed"))).to_be_visible()
        row = shown_row(page)
        assert row == queue[0]
        for k, what in enumerate(PLAN):
            # the judges' table of the row on screen: the primary's verdict, and the panel judge's OTHER
            judges = page.get_by_text(re.compile(r"^Every judge \(the primary.*1 differs from the primary"))
            expect(judges).to_be_visible()
            final = (
                page.get_by_text(re.compile(r"^the verdict (CORRECT|INCORRECT|OTHER)$"))
                .inner_text()
                .split()[-1]
            )
            if k == 0:
                settle(page)
                judges.scroll_into_view_if_needed()
                page.screenshot(path=str(ARTIFACTS / "review-judges-disagree.png"))
            assert row in queue and row not in {m[0] for m in made}
            before = reviews(db)
            if what == "c":
                press_until_saved(page, "c", db, before)
                made.append((row, "confirm", final))
            else:
                press(page, "3")
                # OTHER is chosen once the row's Save override is enabled (Streamlit draws a button with help twice)
                button = page.locator(f".st-key-override-{row} button")
                expect(button.first).to_be_attached()
                expect(page.locator(f".st-key-override-{row} button[disabled]")).to_have_count(0)
                press_until_saved(page, "s", db, before)
                made.append((row, "override", "OTHER"))
            row = wait_for_row(page, row)
        expect(page.get_by_text(re.compile(r"^4 of 12 rows reviewed"))).to_be_visible()
        settle(page)
        page.screenshot(path=str(ARTIFACTS / "review-judges-disagree-4-done.png"))
        assert row == next(r for r in queue if r not in {m[0] for m in made})
    got = Study(db).query(
        "SELECT row_id, action, verdict, reviewer, queue_id FROM reviews ORDER BY review_id"
    )
    assert [g[:3] for g in got] == made
    assert {(g[3], g[4]) for g in got} == {("ann", 1)}
    finals = dict(
        Study(db).query("SELECT row_id, final_verdict FROM graded_rows WHERE verdict_source = 'review'")
    )
    assert finals == {m[0]: m[2] for m in made}
