"""Benchmark: every dashboard page rendered with Streamlit's AppTest on a 1,000,000-row study.

The study is the one ``bench_report.py`` builds (50,000 items × 4 orientations × 5 arms, judge verdicts,
framework parsers, reviews, a spot check), written straight into the tables. For each page:

- cold: every Streamlit cache cleared and no report kept beside the study (``<study>.report.json``), then
  one render (the page's loaders run against the file), median of ``--repeat`` renders, each after a run of
  its baseline, the report computed alone (``report_and_frames``: the metrics every report page needs, at
  the dashboard's resamples). Each render is one AppTest run; the installed Streamlit components are
  discovered once for all of them, as a server does once when it starts (AppTest would scan every installed
  package's metadata again for each new instance, 0.1-0.3 s that no page view pays);
- cold, report kept: every Streamlit cache cleared, the report of the study as it is kept beside it (as a
  ``mcqaudit report`` with the dashboard's options, or the dashboard itself earlier, leaves it), same
  baseline;
- warm: a new session opening the page while the caches are filled (median of ``--repeat`` renders, each
  after a bare ``GROUP BY arm, orientation`` over ``graded_rows``, one scan of the public view) — what a user
  sees switching pages, or a second user arriving. Targets, as ratios to those baselines: cold ≤ 1.1× build_report, warm ≤ 2× the bare GROUP BY
(issue 23). Run:
``.venv/bin/python benchmarks/bench_dashboard.py [--rows 1000000 | --items 50000] [--arms 5] [--db PATH]
[--repeat 3] [--json PATH]``; ``--json`` writes the result rows benchmarks/run_all.py reads.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PAGES = ["overview", "orientations", "other", "parsers", "bias", "review", "export"]
# issue 23: every page ≤ 1.5 s cold where build_report took 1.47 s (a cold page is the report and its own reads);
# warm ≤ 0.3 s where the bare GROUP BY took 0.163 s
COLD_RATIO = 1.1  # × build_report alone, same run
WARM_RATIO = 2.0  # × the bare GROUP BY over graded_rows, same run


def _script(default: str) -> None:
    from mcqaudit.ui.app import main

    main(default=default)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """AppTest outside a server logs bare-mode warnings on every run; page errors still surface as
    ``at.exception``."""
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


_COMPONENTS: list[object] = []


def _components() -> object | None:
    """The installed Streamlit v2 components, discovered once. A served dashboard discovers them once, when
    its server starts; AppTest does it on every new instance's first run (it reads the metadata of every
    installed package: 0.1-0.3 s here), which no page view pays. Every render shares this one, so a cold
    render times the page and not that scan. None where this Streamlit has no such manager."""
    if not _COMPONENTS:
        try:
            from streamlit.components.v2.component_manager import BidiComponentManager
        except ImportError:
            return None
        manager = BidiComponentManager()
        manager.discover_and_register_components(start_file_watching=False)
        _COMPONENTS.append(manager)
    return _COMPONENTS[0]


def render(db: str, page: str) -> float:
    from streamlit.testing.v1 import AppTest

    with _quiet_stderr():
        at = AppTest.from_function(_script, kwargs={"default": page}, default_timeout=600)
        at.session_state["db_path"] = db
        components = _components()
        if components is not None and hasattr(at, "_bidi_component_manager"):
            at._bidi_component_manager = components  # the server's one discovery (see _components)
        t0 = time.perf_counter()
        at.run()
        dt = time.perf_counter() - t0
    if at.exception:
        raise RuntimeError(f"{page}: {[e.value for e in at.exception]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rows", type=int, default=None, help="study size in rows (sets --items: rows / (arms × 4))"
    )
    ap.add_argument("--items", type=int, default=50_000)
    ap.add_argument("--arms", type=int, default=5)
    ap.add_argument("--db", type=Path, default=None, help="reuse (or create) this study file")
    ap.add_argument("--repeat", type=int, default=3, help="warm renders per page (median reported)")
    ap.add_argument(
        "--json", type=Path, default=None, help="write the result rows here (benchmarks/run_all.py)"
    )
    ap.add_argument("--pages", default=",".join(PAGES), help="comma-separated pages (default: every page)")
    args = ap.parse_args()
    if args.rows is not None:
        args.items = max(1, args.rows // (args.arms * 4))

    import bench_report as br  # (this script's folder is on sys.path)
    import streamlit as st

    db, tmp = br.study_file(args.db, args.items, args.arms)

    from mcqaudit.app.report import build_report, report_and_frames
    from mcqaudit.store import Study
    from mcqaudit.store.sidecars import report_cache_path

    with _quiet_stderr():
        from mcqaudit.ui.data import bootstrap

    study = Study(db)
    rows = study.query("SELECT count(*) FROM gen_rows")[0][0]

    def bare_scan() -> float:
        t0 = time.perf_counter()
        with study.connect() as con:
            con.execute(br.BARE_SQL).fetchall()
        return time.perf_counter() - t0

    def report_alone() -> float:
        t0 = time.perf_counter()
        report_and_frames(study, n_boot=bootstrap(), seed=0)  # computed (build_report may read a kept one)
        return time.perf_counter() - t0

    n = max(1, args.repeat)
    load_start = os.getloadavg()[0]
    print(f"rows: {rows:,}   cores: {os.cpu_count()}   dashboard bootstrap resamples: {bootstrap()}   "
          f"load average at start: {load_start:.1f}")  # fmt: skip
    print(f"each page: {n} cold renders (every cache cleared) interleaved with {n} runs of build_report alone, "
          f"then {n} warm renders interleaved with {n} bare GROUP BYs; medians")  # fmt: skip
    print(
        f"{'page':<14}{'cold s':>9}{'report s':>10}{'warm s':>9}{'bare s':>9}{'cold/report':>13}{'warm/bare':>11}"
        f"   targets: cold <= {COLD_RATIO:g}x build_report, warm <= {WARM_RATIO:g}x bare"
    )
    ok = True
    results: list[dict] = []
    for page in [p for p in PAGES if p in args.pages.split(",")]:
        colds, kepts, reps, warms, bares = [], [], [], [], []
        for _ in range(n):  # interleaved, so load changes hit a figure and its baseline alike
            reps.append(report_alone())
            with _quiet_stderr():
                st.cache_data.clear()
            report_cache_path(db).unlink(missing_ok=True)
            colds.append(render(str(db), page))
            with _quiet_stderr():
                st.cache_data.clear()
            if not report_cache_path(db).exists():  # a page without the report (Review): kept as report would
                build_report(study, n_boot=bootstrap(), seed=0)
            kepts.append(render(str(db), page))
        for _ in range(n):
            bares.append(bare_scan())
            warms.append(render(str(db), page))
        cold, kept, rep = statistics.median(colds), statistics.median(kepts), statistics.median(reps)
        warm, bare = statistics.median(warms), statistics.median(bares)
        flag = "" if cold <= COLD_RATIO * rep and warm <= WARM_RATIO * bare else "  OVER TARGET"
        ok = ok and not flag
        print(f"{page:<14}{cold:9.2f}{rep:10.2f}{warm:9.2f}{bare:9.2f}{cold / rep:12.2f}x{warm / bare:10.1f}x{flag}"
              f"   cold, report kept: {kept:.2f} s")  # fmt: skip
        for kind, value, base, ratio in (
            ("cold", cold, rep, COLD_RATIO),
            ("cold, report kept", kept, rep, COLD_RATIO),
            ("warm", warm, bare, WARM_RATIO),
        ):
            results.append(
                {
                    "figure": f"dashboard page {page}, {kind}, {rows:,} rows (median of {n})",
                    "value": round(value, 3),
                    "unit": "s",
                    "baseline": round(base, 3),
                    "baseline_name": f"the report computed alone ({bootstrap()} resamples)"
                    if kind.startswith("cold")
                    else "bare GROUP BY arm, orientation over graded_rows",
                    "ratio": round(value / base, 2),
                    "target": f"<= {ratio:g}x baseline",
                    "pass": value <= ratio * base,
                }
            )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average: {load}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print("PASS" if ok else "OVER TARGET (see above)")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
