"""Benchmark: every dashboard page rendered with Streamlit's AppTest on a 1,000,000-row study.

The study is the one ``bench_report.py`` builds (50,000 items × 4 orientations × 5 arms, judge verdicts,
framework parsers, reviews, a spot check), written straight into the tables. For each page:

- cold: every Streamlit cache cleared, then one render (the page's loaders run against the file);
- warm: a new session opening the page while the caches are filled (median of ``--repeat`` renders) —
  what a user sees switching pages, or a second user arriving.

Baselines measured in the same run: a bare ``GROUP BY arm, orientation`` over ``graded_rows`` (one scan of
the public view), and ``build_report`` alone (the metrics every report page needs, at the dashboard's
resamples). Targets (issue 11): cold ≤ 2 s, warm ≤ 0.3 s per page. Run:
``.venv/bin/python benchmarks/bench_dashboard.py [--rows 1000000 | --items 50000] [--arms 5] [--db PATH]
[--repeat 3] [--json PATH]``; ``--json`` writes the result rows benchmarks/run_all.py reads.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PAGES = ["overview", "orientations", "other", "parsers", "bias", "review", "export"]
WARM_TARGET_S = 0.3
COLD_TARGET_S = 2.0


def _bench_report():
    spec = importlib.util.spec_from_file_location("bench_report", REPO / "benchmarks" / "bench_report.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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


def render(db: str, page: str) -> float:
    from streamlit.testing.v1 import AppTest

    with _quiet_stderr():
        at = AppTest.from_function(_script, kwargs={"default": page}, default_timeout=600)
        at.session_state["db_path"] = db
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

    import streamlit as st

    br = _bench_report()
    tmp = None
    db = args.db
    if db is None:
        tmp = tempfile.TemporaryDirectory()
        db = Path(tmp.name) / "bench.duckdb"
    if not db.exists():
        secs = br.build(db, args.items, args.arms)
        print(f"built {args.items * args.arms * 4:,} rows in {secs:.1f} s -> {db}")

    from mcqaudit.app.report import build_report
    from mcqaudit.store import Study

    with _quiet_stderr():
        from mcqaudit.ui.data import bootstrap

    study = Study(db)
    rows = study.query("SELECT count(*) FROM gen_rows")[0][0]
    t0 = time.perf_counter()
    with study.connect() as con:
        con.execute(br.BARE_SQL).fetchall()
    bare = time.perf_counter() - t0
    t0 = time.perf_counter()
    build_report(study, n_boot=bootstrap(), seed=0)
    rep = time.perf_counter() - t0

    print(f"rows: {rows:,}   cores: {os.cpu_count()}   dashboard bootstrap resamples: {bootstrap()}")
    print(f"baseline: bare GROUP BY over graded_rows {bare:6.2f} s;  build_report {rep:6.2f} s")
    print(
        f"{'page':<14}{'cold s':>9}{'warm s':>9}{'warm/bare':>11}   targets: cold < {COLD_TARGET_S:g} s, warm < {WARM_TARGET_S:g} s"
    )
    ok = True
    results: list[dict] = []
    for page in [p for p in PAGES if p in args.pages.split(",")]:
        with _quiet_stderr():
            st.cache_data.clear()
        cold = render(str(db), page)
        warm = statistics.median(render(str(db), page) for _ in range(max(1, args.repeat)))
        flag = "" if cold <= COLD_TARGET_S and warm <= WARM_TARGET_S else "  OVER TARGET"
        ok = ok and not flag
        print(f"{page:<14}{cold:9.2f}{warm:9.2f}{warm / bare:10.1f}x{flag}")
        for kind, value, target in (("cold", cold, COLD_TARGET_S), ("warm", warm, WARM_TARGET_S)):
            results.append(
                {
                    "figure": f"dashboard page {page}, {kind}, {rows:,} rows",
                    "value": round(value, 3),
                    "unit": "s",
                    "baseline": round(rep if kind == "cold" else bare, 3),
                    "baseline_name": f"build_report alone ({bootstrap()} resamples)"
                    if kind == "cold"
                    else "bare GROUP BY arm, orientation over graded_rows",
                    "ratio": round(value / (rep if kind == "cold" else bare), 2),
                    "target": f"<= {target:g} s",
                    "pass": value <= target,
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
