"""Hostile text in the dashboard, in a real headless Chromium (issue 13): generations, questions, options,
item ids, arm names, reviewer names and review notes that carry HTML, script, Markdown, links and LaTeX
(tests/hostile_study.py) render as literal text in every view. No injected element, emphasis, link or
formula exists in the DOM; no dialog opens and no console line says PWNED; the literal text is on screen.
The Review search is a parameter, never SQL: quotes, comments and LIKE wildcards match as text, with the
count the straightforward computation gives. And the server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcqaudit.formatting import short_label
from tests.browser import ARGS, ARTIFACTS, CHROMIUM, PLOT_AREAS_JS, free_port, serve, serve_command, settle
from tests.builders import build_hostile_study as build
from tests.hostile_study import ARMS, PHISH, QUEUE, REVIEWER

pytestmark = [pytest.mark.browser, pytest.mark.slow]
VIEWPORT = {"width": 1400, "height": 1000}
PAGES = ["overview", "orientations", "other", "parsers", "bias", "review", "export"]

# every way a payload could have come alive in the page
TRACES_JS = r"""() => {
  const out = [];
  if (typeof window.__pwned !== 'undefined') out.push('window.__pwned = ' + window.__pwned);
  const all = (sel) => Array.from(document.querySelectorAll(sel));
  for (const el of all('.hinj')) out.push('injected element <' + el.tagName.toLowerCase() + '>');
  for (const el of all('img[src="x"], svg[onload], iframe[src^="javascript"], [onerror], [onload]'))
    out.push('injected attribute on <' + el.tagName.toLowerCase() + '>');
  for (const el of all('script')) if (el.textContent.includes('__pwned')) out.push('injected <script>');
  for (const el of all('strong, b, em, i'))
    if (/^(HBOLD|HTAG|steer)$/.test(el.textContent.trim()) || el.textContent.startsWith('HBOLD'))
      out.push('rendered emphasis <' + el.tagName.toLowerCase() + '>' + el.textContent.slice(0, 20));
  for (const el of all('a'))
    if (/HLINK|hlink|phish|Session expired|^HA$/.test(el.textContent.trim()) ||
        /^javascript|phish|hlink/.test(el.getAttribute('href') || ''))
      out.push('rendered link ' + el.outerHTML.slice(0, 60));
  for (const el of all('[role="img"], [data-testid="stIconMaterial"]'))
    if (/bug_report/.test(el.textContent + (el.getAttribute('aria-label') || '')))
      out.push('rendered icon ' + el.outerHTML.slice(0, 60));
  if (document.body.innerText.includes('\u{1F604}')) out.push('rendered emoji');
  for (const el of all('.katex, math')) out.push('rendered LaTeX ' + el.textContent.slice(0, 20));
  for (const el of all('code')) if (el.textContent.trim() === 'HCODE') out.push('rendered inline code');
  for (const el of all('span')) if (el.textContent.trim() === 'HRED') out.push('rendered colour span');
  for (const el of all('tspan'))
    if (/steer|HTAG/.test(el.textContent) && /bold/.test(el.getAttribute('style') || ''))
      out.push('bold plot label ' + el.textContent.slice(0, 20));
  return out;
}"""


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("hostile") / "study.duckdb")


@pytest.fixture(scope="module")
def browser_page(hostile_db: Path) -> Iterator[tuple[Any, str, list[str]]]:
    from playwright.sync_api import sync_playwright

    with serve(hostile_db) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(60_000)
            events: list[str] = []
            page.on("dialog", lambda d: (events.append(f"dialog: {d.message}"), d.dismiss()))
            page.on("console", lambda m: events.append(f"console: {m.text}") if "PWNED" in m.text else None)
            yield page, url, events
        finally:
            browser.close()


def look(page: Any, events: list[str], where: str, area: str = '[data-testid="stMain"]') -> str:
    """Settle, then fail on any trace of a payload; return the visible text of ``area`` (the main area),
    word joiners taken out (the Markdown escaper's, invisible: they keep `http://` and `:smile:` text)."""
    page.wait_for_timeout(800)
    settle(page, 400)
    page.wait_for_timeout(400)
    traces = page.evaluate(TRACES_JS) + events
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"hostile-{where}.png"))
    assert not traces, f"{where}: {sorted(set(traces))}"
    return str(page.locator(area).first.inner_text()).replace("\u2060", "")


def test_every_page_renders_hostile_text_as_text(
    hostile_db: Path, browser_page: tuple[Any, str, list[str]]
) -> None:
    page, url, events = browser_page
    for name in PAGES:
        page.goto(url if name == "overview" else f"{url}/{name}")  # the Overview is the root page
        page.get_by_role("heading", level=1).first.wait_for()
        text = look(page, events, name)
        if name in ("overview", "other", "orientations"):  # the arm names, literally, in every sentence
            for arm in ARMS[1:]:
                # (some pages name an arm in their figures alone: a long name cut there, whole in the hover)
                assert arm in text or short_label(arm) in text, (name, arm, text[:3000])
        if name == "overview":
            assert "Control arm: base" in text and PHISH in text
        # an arm name of 150 characters does not squeeze a plot into a strip beside its legend or under its
        # tick labels (it did: 64 px of 940 in six figures): the figures show it cut, and whole in the hover
        areas = page.evaluate(PLOT_AREAS_JS)
        assert areas or name in ("review", "export"), name
        for title, w, width, h, height in areas:
            assert w >= 0.5 * width and h >= 0.4 * height, (name, title, w, width, h, height)


def test_review_panel_history_and_marked_spans(
    hostile_db: Path, browser_page: tuple[Any, str, list[str]]
) -> None:
    from mcqaudit.store import Study

    page, url, events = browser_page
    rows = Study(hostile_db).query(
        "SELECT row_id, arm FROM graded_rows WHERE review_verdict IS NOT NULL AND naive_letter IS NOT NULL "
        "ORDER BY arm DESC, row_id"
    )
    assert rows, "the hostile study has reviewed rows with a naive letter"
    for row_id, _arm in rows[:2]:
        page.goto(f"{url}/review?row={row_id}")
        page.get_by_role("heading", name="Review").wait_for()
        text = look(page, events, f"review-{row_id}")
        # the generation, question, options, item id, the reviewer's name and note: all as literal text
        for literal in (
            "<script>window.__pwned=2",
            "**HBOLD**",
            "[HLINK](javascript:alert('PWNED'))",
            "$$HLATEX^2$$",
        ):
            assert literal in text, (literal, text[:3000])
        assert "Review history" in text  # reviewer names and notes are in its grid (drawn on a canvas)
        # every parser's span marked in turn (our own <mark> around escaped text)
        marks = page.get_by_role("radiogroup").filter(has_text="naive").get_by_role("radio")
        for k in range(marks.count()):
            marks.nth(k).check(force=True)
            look(page, events, f"review-{row_id}-mark{k}")
            assert page.locator("mark").count() >= 1
    # the spot-check queue with a hostile name: its progress caption names every arm, its popover the queue
    from mcqaudit.store import Study as _Study

    (qid,) = _Study(hostile_db).query("SELECT queue_id FROM spot_checks")[0]
    page.goto(f"{url}/review?queue={qid}")
    page.get_by_role("heading", name="Review").wait_for()
    page.locator('[data-testid="stProgress"]').get_by_text("rows reviewed").wait_for()
    text = look(page, events, "review-queue")
    assert f"{ARMS[2]} 0/4" in text, text[:3000]  # the progress caption, the arm name as text
    shown = page.evaluate(
        "(q) => Array.from(document.querySelectorAll('[data-testid=\"stSelectbox\"] *'))"
        ".some(e => (e.value || e.getAttribute('title') || e.textContent || '').includes(q))",
        f"#{qid} {QUEUE}",
    )
    assert shown  # the queue selector shows the queue's name as text
    page.get_by_role("button", name="Spot-check queues").click()
    pop = look(page, events, "review-queue-popover", '[data-testid="stPopoverBody"]')
    assert "Draw a new spot check" in pop
    # a hostile reviewer name typed in the sidebar
    box = page.get_by_role("textbox", name="Reviewer")
    box.fill(REVIEWER)
    box.press("Enter")
    look(page, events, "review-reviewer")


def _count_like(hostile_db: Path, s: str) -> int:
    """The straightforward computation of the Review search: case-insensitive substring of question,
    generation or item id, or an exact row id."""
    from mcqaudit.store import Study

    rows = Study(hostile_db).query("SELECT row_id, item_id, question, generation FROM graded_rows")
    low = s.lower()
    return sum(rid == s or any(low in (t or "").lower() for t in (iid, q, g)) for rid, iid, q, g in rows)


SEARCHES = [
    "'; DROP TABLE reviews; --",
    '" OR 1=1 --',
    "') OR ('1'='1",
    "%",
    "_",
    "\\",
    "**HBOLD** <b class=hinj>x</b> [HLINK](javascript:alert('PWNED')) $$HLATEX$$ :red[HRED]",
    "item03<b class=hinj>x</b>",
]


def test_search_and_filters_are_parameters(
    hostile_db: Path, browser_page: tuple[Any, str, list[str]]
) -> None:
    from mcqaudit.store import Study

    page, url, events = browser_page
    before = Study(hostile_db).query("SELECT count(*) FROM reviews")
    page.goto(f"{url}/review")
    page.get_by_role("heading", name="Review").wait_for()
    settle(page, 400)
    box = page.get_by_role("textbox", name="Search")
    for s in SEARCHES:
        if not box.is_visible():
            page.get_by_text("Filters:").first.click()
        box.fill(s)
        box.press("Enter")
        text = look(page, events, "review-search")
        want = _count_like(hostile_db, s)
        m = re.search(r"of ([\d,]+) matching rows", text)
        got = int(m.group(1).replace(",", "")) if m else (0 if "No rows match" in text else None)
        assert got == want, (s, got, want)
        assert f"search “{s}”" in text  # the label shows the search literally
    assert Study(hostile_db).query("SELECT count(*) FROM reviews") == before
    assert Study(hostile_db).query("SELECT count(*) FROM graded_rows") == [(144,)]


# ---- where the server listens ---------------------------------------------------------------------------


def _listening(port: int) -> set[str]:
    """Local addresses with a socket listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table) as fh:
            for line in fh.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, p = local.rsplit(":", 1)
                if state == "0A" and int(p, 16) == port:  # 0A: LISTEN
                    found.add(addr)
    return found


@pytest.mark.parametrize(
    "env", [{}, {"STREAMLIT_SERVER_ADDRESS": "0.0.0.0"}], ids=["default", "env-says-all"]
)
def test_the_dashboard_listens_on_localhost_only(hostile_db: Path, env: dict[str, str]) -> None:
    if not os.path.exists("/proc/net/tcp"):
        pytest.skip("needs Linux's /proc/net/tcp")
    port = free_port()
    cmd = [sys.executable, "-m", "mcqaudit", "dashboard", str(hostile_db), "--port", str(port)]
    with serve_command(cmd, port, hostile_db.parent / "bind.log", env):
        deadline = time.monotonic() + 10
        while not _listening(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _listening(port) == {"0100007F"}, _listening(port)  # 127.0.0.1, and nothing else
    args = subprocess.run(
        [sys.executable, "-c", "import mcqaudit.cli, inspect; print(inspect.getsource(mcqaudit.cli.dashboard))"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert '"--server.address", "127.0.0.1"' in args
