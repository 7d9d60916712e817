"""End to end in a real headless Chromium: `mcqaudit dashboard STUDY` serves the pages, a reviewer overrides a
verdict on Review, the Overview changes; a generation full of markup shows as text and fires nothing.

Debian's Chromium (`apt-get install chromium`, never `playwright install`). Without it the test skips, except
in CI (CI=true), where a missing browser is a failure.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_ui_fixture import XSS, _ui_db, _ui_template  # noqa: F401

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = REPO / "tests" / "artifacts"

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _need_browser() -> None:
    missing = None
    if not Path(CHROMIUM).exists():
        missing = f"{CHROMIUM} not found (apt-get install -y chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "the playwright package is not installed"
    if missing:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI: {missing}")
        pytest.skip(missing)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(ui_db: Path):
    with serve(ui_db) as url:
        yield url, ui_db


@contextlib.contextmanager
def serve(db: Path) -> Iterator[str]:
    """`mcqaudit dashboard DB` on a free port; yields its URL once the page script answers."""
    _need_browser()
    port = _free_port()
    env = {**os.environ, "MCQAUDIT_DASHBOARD_BOOTSTRAP": "200", "PYTHONPATH": str(REPO)}
    log = open(db.parent / "streamlit.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcqaudit", "dashboard", str(db), "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # the CLI starts streamlit as a child: stop the whole group
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                raise AssertionError("dashboard did not start:\n" + (db.parent / "streamlit.log").read_text())
            time.sleep(0.25)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


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
            expect(gen).to_be_visible()
            assert gen.inner_text() == XSS
            mark = gen.locator('mark[data-testid="mq-parser-span"]')
            assert mark.count() == 1 and mark.inner_text() == XSS[XSS.index("c")]  # naive's first [A-Da-d]
            assert gen.locator("*").count() == 1  # the mark is the only element inside
            assert page.locator("img[src='x']").count() == 0
            assert page.locator("img[src*='127.0.0.1:9']").count() == 0  # the Markdown image stayed text
            assert page.locator("script", has_text="alert(1)").count() == 0

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
