"""Real headless Chromium for the dashboard's end-to-end tests (a helper module, not a test module).

Debian's Chromium (`apt-get install chromium`, never `playwright install`). Without it a browser test skips,
except in CI (CI=true), where a missing browser is a failure.
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
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.helpers import REPO

# Playwright's assertions wait 5 s by default; a page that computes its report on a loaded machine (the suite
# runs on every core) can take longer: every browser test waits for what it expects for up to 30 s.
expect.set_options(timeout=30_000)

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


def need_browser() -> None:
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_command(cmd: list[str], port: int, log_path: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start a Streamlit server command (its own process group) and yield its URL once
    ``/_stcore/health`` answers; stop the whole group afterwards. Used by the browser tests and
    benchmarks/bench_review.py."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # `mcqaudit dashboard` starts streamlit as a child: stop the whole group
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise AssertionError("the server did not start:\n" + log_path.read_text())
                time.sleep(0.25)
            yield url
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def serve(db: Path) -> Iterator[str]:
    """`mcqaudit dashboard DB` on a free port; yields its URL once the page script answers."""
    need_browser()
    port = free_port()
    cmd = [sys.executable, "-m", "mcqaudit", "dashboard", str(db), "--port", str(port)]
    with serve_command(cmd, port, db.parent / "streamlit.log", {"MCQAUDIT_DASHBOARD_BOOTSTRAP": "200"}) as url:
        yield url



@contextlib.contextmanager
def open_page(db: Path, viewport: dict[str, int], *, timeout_ms: float = 30_000) -> Iterator[tuple[Any, str]]:
    """The dashboard on study ``db`` (:func:`serve`) and one page of a headless Chromium of ``viewport``
    (``{"width": 1400, "height": 1000}``) with the default timeout ``timeout_ms``; yields (page, URL) and
    closes the browser and the server afterwards. Screenshots go to :data:`ARTIFACTS` (created)."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serve(db) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport=viewport)  # type: ignore[arg-type]
            page.set_default_timeout(timeout_ms)
            yield page, url
        finally:
            browser.close()


def settle(page, quiet_ms: int = 300, timeout_s: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    """Wait until no element has been stale for ``quiet_ms``: Streamlit marks a rerun's old elements stale
    only after a short delay, and a page streams in top to bottom, so one look can catch a run in flight."""
    deadline = time.monotonic() + timeout_s
    quiet_since = None
    while time.monotonic() < deadline:
        now = time.monotonic()
        if page.locator('[data-stale="true"]').count():
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif (now - quiet_since) * 1000 >= quiet_ms:
            return
        page.wait_for_timeout(25)
    raise AssertionError("the page kept re-rendering")


# each plotly figure on the page: its title, the width and height of its plot area and of the whole figure
PLOT_AREAS_JS = r"""() => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(el => el._fullLayout)
  .map(el => { const L = el._fullLayout;
    return [(L.title && L.title.text || '').slice(0, 60), L._size.w, L.width, L._size.h, L.height]; })"""
