"""Benchmark: the Review page as a reviewer uses it, in a real headless Chromium, on a 1,000,000-row study.

The study is the one ``bench_report.py`` builds (50,000 items × 4 orientations × 5 arms by default, judge
verdicts, framework parsers, 2,000 reviews, a 1,000-row uniform spot check), served by ``mcqaudit dashboard``.
Working through that spot check, each action is timed from the key press or click until the browser shows
its result (the next row's id on screen and no element of the previous run left):

- confirm by key (``c``) and by click → the next unreviewed row shown;
- override by keys (``2``/``3`` then ``s``) → the next row shown;
- next / previous (``j`` / ``k``);
- page switch, warm: Review → Overview (its headline figures shown) → Review (the row shown again).

Baseline measured in the same run: the same browser clicking a button in a one-line Streamlit fragment
(``st.fragment`` that prints a counter) until the new count shows — Streamlit's own round trip on this
machine. Targets: confirm → next row ≤ 0.5 s and page switch ≤ 1 s (medians). Run:
``.venv/bin/python benchmarks/bench_review.py [--rows 1000000] [--arms 5] [--db PATH] [--rounds 20] [--json PATH]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.browser import ARGS, CHROMIUM  # noqa: E402 - the repository root is on sys.path first
from tests.browser import free_port as _free_port  # noqa: E402
from tests.browser import serve_command as _serve  # noqa: E402

SAVE_TARGET_S = 0.5
SWITCH_TARGET_S = 1.0

BASELINE_APP = textwrap.dedent(
    """
    import streamlit as st

    @st.fragment
    def panel():
        st.session_state.setdefault("n", 0)
        if st.button("Bump", key="bump"):
            st.session_state.n += 1
        st.markdown(f"count `{st.session_state.n}`")

    panel()
    """
)


def _shown_row(page: Any) -> str | None:
    return page.evaluate(
        """() => {
            if (document.querySelector('[data-stale="true"]')) return null;
            const e = Array.from(document.querySelectorAll('[data-testid="stMarkdownContainer"]'))
                .find(x => /· arm .* · item /.test(x.innerText));
            const c = e && e.querySelector('code');
            return c ? c.innerText : null;
        }"""
    )


def _until(page: Any, pred: Callable[[], bool], timeout: float = 30.0) -> float:
    t0 = time.perf_counter()
    while not pred():
        if time.perf_counter() - t0 > timeout:
            shot = Path(tempfile.gettempdir()) / "bench_review_timeout.png"
            page.screenshot(path=str(shot))
            log = page.evaluate("window.__mcqauditKeyLog || []")
            raise SystemExit(f"timed out waiting for the page (screenshot: {shot}); keys: {log[-6:]}")
        page.wait_for_timeout(5)
    return time.perf_counter() - t0


def _settle(page: Any) -> str:
    """Wait until a row is on screen and nothing has been stale for 200 ms (Streamlit marks a rerun's old
    elements stale only after a short delay, so a single look can miss a run in flight); its id."""
    quiet_since = None
    while True:
        rid = _shown_row(page)
        now = time.perf_counter()
        if rid is None:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= 0.2:
            return rid
        page.wait_for_timeout(10)


def _timed(page: Any, act: Callable[[], None]) -> float:
    """Seconds from ``act`` until another row is on screen and the previous run's elements are gone."""
    before = _settle(page)
    t0 = time.perf_counter()
    act()
    _until(page, lambda: (r := _shown_row(page)) is not None and r != before)
    return time.perf_counter() - t0


def _blur(page: Any) -> None:
    page.evaluate("document.activeElement && document.activeElement.blur()")


def _stats(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]


def baseline(browser: Any, tmp: Path, rounds: int) -> list[float]:
    app = tmp / "baseline_app.py"
    app.write_text(BASELINE_APP)
    port = _free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"]  # fmt: skip
    out = []
    with _serve(cmd, port, tmp / "baseline.log") as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        page.get_by_text("count 0").wait_for()
        for k in range(rounds):
            t0 = time.perf_counter()
            page.get_by_role("button", name="Bump").click()
            page.get_by_text(f"count {k + 1}", exact=True).wait_for()
            out.append(time.perf_counter() - t0)
        page.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the study (items × arms × 4)")
    ap.add_argument("--items", type=int, default=None, help="items instead of --rows")
    ap.add_argument("--arms", type=int, default=5)
    ap.add_argument(
        "--json", type=Path, default=None, help="write the result rows here (benchmarks/run_all.py)"
    )
    ap.add_argument("--db", type=Path, default=None, help="reuse (or create) this study file")
    ap.add_argument("--rounds", type=int, default=20, help="timed repetitions of each action")
    args = ap.parse_args()

    import bench_report as br  # (this script's folder is on sys.path)
    from playwright.sync_api import sync_playwright

    from mcqaudit.store import Study
    tmp_dir = tempfile.TemporaryDirectory()
    tmp = Path(tmp_dir.name)
    db = args.db or tmp / "bench.duckdb"
    n_items = args.items or max(1, args.rows // (args.arms * 4))
    br.ensure_built(db, n_items, args.arms)
    rows = Study(db).query("SELECT count(*) FROM gen_rows")[0][0]
    n = args.rounds
    results: dict[str, list[float]] = {}
    port = _free_port()
    cmd = [sys.executable, "-m", "mcqaudit", "dashboard", str(db), "--port", str(port)]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        results["baseline: fragment button round trip"] = baseline(browser, tmp, n)
        with _serve(cmd, port, tmp / "dashboard.log") as url:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(120_000)
            page.goto(f"{url}/review?reviewer=bench-reviewer&queue=1")
            _until(page, lambda: _shown_row(page) is not None, timeout=300)
            _until(page, lambda: bool(page.evaluate("window.__mcqauditKeysInstalled === true")))
            # one untimed round of each action: the first render of each loader is not what a reviewer waits on
            _blur(page)
            _timed(page, lambda: page.keyboard.press("c"))
            confirm_key, confirm_click, override, nav = [], [], [], []

            def choose_other() -> None:
                _blur(page)
                page.keyboard.press("3")
                _until(
                    page,
                    lambda: page.locator('[class*="st-key-override-"] button').count() > 0
                    and page.locator('[class*="st-key-override-"] button[disabled]').count() == 0,
                )
                _settle(page)

            def graded() -> bool:
                # a row the judge failed on has no verdict to confirm: override it (untimed) instead
                if page.get_by_text("no verdict to confirm: override it").count() == 0:
                    return True
                choose_other()
                _timed(page, lambda: page.keyboard.press("s"))
                return False

            for _ in range(n):
                while not graded():
                    pass
                _blur(page)
                confirm_key.append(_timed(page, lambda: page.keyboard.press("c")))
                while not graded():
                    pass
                confirm_click.append(
                    _timed(page, lambda: page.get_by_role("button", name="Confirm", exact=True).click())
                )
                choose_other()
                override.append(_timed(page, lambda: page.keyboard.press("s")))
                _blur(page)
                nav.append(_timed(page, lambda: page.keyboard.press("k")))
                nav.append(_timed(page, lambda: page.keyboard.press("j")))
            switch = []
            for k in range(n // 2 + 1):
                row = _shown_row(page)
                t0 = time.perf_counter()
                page.get_by_role("link", name="Overview").first.click()
                page.get_by_role("heading", name="Overview").wait_for()
                _until(
                    page,
                    lambda: page.locator('[data-stale="true"]').count() == 0
                    and page.locator('[data-testid="stMetric"]', has_text="accuracy").count() > 0,
                )
                to_overview = time.perf_counter() - t0
                t0 = time.perf_counter()
                page.get_by_role("link", name="Review").first.click()
                _until(page, lambda row=row: _shown_row(page) == row)
                back = time.perf_counter() - t0
                if k:  # the first visit fills the caches: warm switches only
                    switch += [to_overview, back]
            page.screenshot(path=str(tmp / "last.png"))
            if not re.search(r"queue=1", page.url):
                raise SystemExit(f"the URL lost the queue: {page.url}")
        browser.close()
    results["confirm (key c) -> next row"] = confirm_key
    results["confirm (click) -> next row"] = confirm_click
    results["override (keys 3, s) -> next row"] = override
    results["next / previous (j / k)"] = nav
    results["page switch, warm"] = switch
    base = statistics.median(results["baseline: fragment button round trip"])

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"rows: {rows:,}   cores: {os.cpu_count()}   rounds: {n}   load average: {load}")
    print(f"{'action':<40}{'median s':>10}{'p90 s':>8}{'/ baseline':>12}   target")
    ok = True
    rows_out = []
    for name, xs in results.items():
        med, p90 = _stats(xs)
        target = SAVE_TARGET_S if "-> next row" in name else SWITCH_TARGET_S if "switch" in name else None
        flag = "" if target is None or med <= target else "  OVER TARGET"
        ok = ok and not flag
        print(
            f"{name:<40}{med:10.3f}{p90:8.3f}{med / base:11.1f}x   {'' if target is None else f'<= {target:g} s'}{flag}"
        )
        if not name.startswith("baseline"):
            rows_out.append(
                {
                    "figure": f"review page, {name} (median of {len(xs)}), {rows:,} rows",
                    "value": round(med, 3),
                    "unit": "s",
                    "baseline": round(base, 3),
                    "baseline_name": "Streamlit fragment button round trip, same browser",
                    "ratio": round(med / base, 1),
                    "target": "for reference (no target)" if target is None else f"<= {target:g} s",
                    "pass": target is None or med <= target,
                }
            )
    if args.json:
        args.json.write_text(json.dumps(rows_out, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    reviews = Study(db).query("SELECT count(*) FROM reviews WHERE reviewer = 'bench-reviewer'")[0][0]
    print(f"reviews saved by the benchmark: {reviews}")
    print("PASS" if ok else "OVER TARGET (see above)")
    tmp_dir.cleanup()


if __name__ == "__main__":
    main()
