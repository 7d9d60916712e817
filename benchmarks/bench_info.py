"""Benchmark: `mcqaudit info` and a bare scan of the public `graded_rows` view on a 1,000,000-row study.

The study is the one ``bench_report.py`` builds (50,000 items × 4 orientations × 5 arms by default, judge
verdicts, framework parsers, 2,000 reviews, a 1,000-row uniform spot check). Measured, each in a fresh
process:

- ``mcqaudit info --db STUDY`` as a whole command (Python start, imports, queries, printing), median of 3;
- where its time goes: imports, ``summarise``, the judge fingerprints, the diagnostics (``app.info.study_flags``);
- a bare ``GROUP BY arm, orientation`` over ``graded_rows`` (counts of rows, graded rows and CORRECT),
  against the baseline of the same GROUP BY over the base table ``gen_rows``, and against ``graded_rows`` as
  it was before schema migration 6 (windows over every judge reply and review at read time).

Targets: ``info`` ≤ 0.5 s; the bare GROUP BY over graded_rows ≤ 0.25 s. Run:
``.venv/bin/python benchmarks/bench_info.py [--rows 1000000] [--arms 5] [--db PATH] [--json PATH]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

INFO_TARGET_S = 0.5
SCAN_TARGET_S = 0.25

GROUP_BY = """
SELECT arm, orientation, count(*) AS n, count(final_verdict) AS graded,
       count(*) FILTER (final_verdict = 'CORRECT') AS correct
FROM {source} GROUP BY arm, orientation
"""
BASE_GROUP_BY = "SELECT arm, orientation, count(*) AS n FROM gen_rows GROUP BY arm, orientation"


def _bench_report() -> Any:
    spec = importlib.util.spec_from_file_location("bench_report", REPO / "benchmarks" / "bench_report.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def child_scan(db: str, repeats: int) -> None:
    """Best of ``repeats`` for each scan, in this fresh process (one connection); prints a JSON line."""
    from mcqaudit.store.db import Study
    from tests.test_schema import OLD_GRADED_ROWS  # migration 4's view, the reference of the suite's test

    study = Study(db)
    out: dict[str, float] = {}
    with study.connect() as con:
        for name, sql in (
            ("base", BASE_GROUP_BY),
            ("graded_rows", GROUP_BY.format(source="graded_rows")),
            ("read_time_windows", GROUP_BY.format(source=f"({OLD_GRADED_ROWS})")),
        ):
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                con.execute(sql).fetchall()
                best = min(best, time.perf_counter() - t0)
            out[name] = best
    print(json.dumps(out))


def child_parts(db: str) -> None:
    """Where `info` spends its time, part by part, in this fresh process; prints a JSON line."""
    t = time.perf_counter()
    out: dict[str, float] = {}

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        out[name] = now - t
        t = now

    import mcqaudit.cli  # noqa: F401 - what the command imports before it runs

    lap("import the CLI")
    from mcqaudit.store.summary import summarise

    lap("import the summary (pandas)")
    from mcqaudit.store.db import Study

    study = Study(db)
    lap("open the study")
    summarise(study)
    lap("summarise (counts, parser coverage, verdicts by source)")
    from mcqaudit.store.judging import fingerprint_summary

    fingerprint_summary(study)
    lap("judge fingerprints")
    from mcqaudit.app.info import study_flags

    lap("import the metrics")
    study_flags(study)
    lap("diagnostics (app.info.study_flags: frames + metrics without resamples)")
    print(json.dumps(out))


def _child(mode: str, db: Path, repeats: int = 5) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--db", str(db), "--repeats", str(repeats)],
        capture_output=True,
        text=True,
        check=True,
        env=_env(),
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def time_info(db: Path, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "mcqaudit", "info", "--db", str(db)],
            capture_output=True,
            text=True,
            env=_env(),
        )
        out.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"mcqaudit info failed ({proc.returncode}):\n{proc.stderr}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the study (items × arms × 4)")
    ap.add_argument("--arms", type=int, default=5)
    ap.add_argument("--db", type=Path, default=None, help="reuse (or create) this study file")
    ap.add_argument("--runs", type=int, default=3, help="timed runs of `mcqaudit info`")
    ap.add_argument(
        "--json", type=Path, default=None, help="write the result rows here (benchmarks/run_all.py)"
    )
    ap.add_argument("--child", choices=("scan", "parts"), default=None, help=argparse.SUPPRESS)
    ap.add_argument("--repeats", type=int, default=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "scan":
        child_scan(str(args.db), args.repeats)
        return
    if args.child == "parts":
        child_parts(str(args.db))
        return

    tmp = tempfile.TemporaryDirectory()
    db = args.db or Path(tmp.name) / "bench.duckdb"
    n_items = max(1, args.rows // (args.arms * 4))
    if not db.exists():
        secs = _bench_report().build(db, n_items, args.arms)
        print(f"built {n_items * args.arms * 4:,} rows in {secs:.1f} s -> {db}")
    from mcqaudit.store import Study

    Study(db)  # migrate a reused older study before anything is timed
    rows = Study(db).query("SELECT count(*) FROM gen_rows")[0][0]
    scan = _child("scan", db)
    parts = _child("parts", db)
    info = time_info(db, args.runs)
    info_med = statistics.median(info)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())

    print(f"rows: {rows:,}   cores: {os.cpu_count()}   load average: {load}")
    print(
        f"mcqaudit info (whole command, median of {len(info)}): {info_med:6.2f} s   (target <= {INFO_TARGET_S:g} s)"
    )
    for name, secs in parts.items():
        print(f"  {name:<66}{secs:6.3f} s")
    ratio = scan["graded_rows"] / scan["base"]
    print(f"bare GROUP BY arm, orientation over graded_rows:       {scan['graded_rows']:6.3f} s   "
          f"(target <= {SCAN_TARGET_S:g} s)")  # fmt: skip
    print(
        f"  the same over the base table gen_rows (baseline):    {scan['base']:6.3f} s   ratio {ratio:5.1f}x"
    )
    print(f"  the same over migration 4's read-time windows:       {scan['read_time_windows']:6.3f} s   "
          f"({scan['read_time_windows'] / scan['graded_rows']:4.1f}x slower than graded_rows now)")  # fmt: skip
    results = [
        {
            "figure": f"mcqaudit info, {rows:,} rows (whole command)",
            "value": round(info_med, 3),
            "unit": "s",
            "baseline": None,
            "baseline_name": None,
            "ratio": None,
            "target": f"<= {INFO_TARGET_S:g} s",
            "pass": info_med <= INFO_TARGET_S,
        },
        {
            "figure": f"bare GROUP BY arm, orientation over graded_rows, {rows:,} rows",
            "value": round(scan["graded_rows"], 4),
            "unit": "s",
            "baseline": round(scan["base"], 4),
            "baseline_name": "the same GROUP BY over the base table gen_rows",
            "ratio": round(ratio, 1),
            "target": f"<= {SCAN_TARGET_S:g} s",
            "pass": scan["graded_rows"] <= SCAN_TARGET_S,
        },
        {
            "figure": f"bare GROUP BY over graded_rows as read-time windows (before migration 6), {rows:,} rows",
            "value": round(scan["read_time_windows"], 4),
            "unit": "s",
            "baseline": round(scan["graded_rows"], 4),
            "baseline_name": "graded_rows over the maintained tables",
            "ratio": round(scan["read_time_windows"] / scan["graded_rows"], 1),
            "target": "for reference (no target)",
            "pass": True,
        },
    ]
    ok = all(r["pass"] for r in results)
    print("PASS" if ok else "OVER TARGET")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    tmp.cleanup()


if __name__ == "__main__":
    main()
