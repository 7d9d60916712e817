"""Benchmark: `mcqaudit grade --dry-run` on a 1,000,000-row study, against the bare fetch of the rows it plans.

A dry run says what a run would send — the rows that need the judge, the distinct prompts they render to,
the estimated tokens and one prompt — so it reads every such row and renders every prompt (the same plan
as a run: nothing estimated that a run would not do). On the study ``bench_report.py`` builds (50,000 items ×
4 orientations × 5 arms; 727,770 rows need the judge, 430,037 distinct prompts), measured in fresh
processes, interleaved ``--repeat`` times (medians):

- the whole command, ``python -m mcqaudit grade --db STUDY --dry-run --json`` (a judge named, none reached);
- the baseline: the same rows fetched from DuckDB into Python by a bare ``fetchall()`` (the query the dry run
  runs, nothing rendered) — target ≤ 4× (the prompts are rendered, hashed and grouped in Python: ~3 µs a row);
- for reference, in process: the rows planned by the planner (its bulk renderer: the template made once,
  each question and option list formatted once, the garbage collector paused) against ``render()`` and
  ``prompt_hash()`` called for each row, the planner's loop before (with today's ``render()``).

Run: ``.venv/bin/python benchmarks/bench_dry_run.py [--rows 1000000 | --items 50000] [--arms 5] [--db PATH]
[--repeat 3] [--json PATH]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RATIO = 4.0  # the whole dry run ≤ 4 × the bare fetch of the rows it plans, in the same run
JUDGE = ["--judge-model", "bench-dry-run", "--judge-base-url", "http://127.0.0.1:9/v1"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "unused-by-a-dry-run"}


def whole_command(db: Path) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mcqaudit", "grade", "--db", str(db), "--dry-run", "--json", *JUDGE],
        capture_output=True, text=True, env=_env(), check=True,
    )  # fmt: skip
    return time.perf_counter() - t0, json.loads(proc.stdout)


def child(mode: str, db: str) -> None:
    """One measurement in this fresh process; prints a JSON line."""
    from mcqaudit.judge.prompts import JudgeConfig
    from mcqaudit.store import judging
    from mcqaudit.store.db import Study

    study = Study(Path(db))
    config = JudgeConfig(model="bench-dry-run")
    if mode == "fetch":  # the dry run's query, fetched row by row as DuckDB hands it over
        sql, params = _select_sql(config.fingerprint)
        with study.connect() as con:
            t0 = time.perf_counter()
            rows = con.execute(sql, params).fetchall()
            print(json.dumps({"seconds": time.perf_counter() - t0, "rows": len(rows)}))
        return
    from mcqaudit.grade.plan import plan_requests
    from mcqaudit.judge.prompts import SYSTEM_PROMPT, prompt_hash, render

    t0 = time.perf_counter()
    targets, _ = judging.select_rows(study, config.fingerprint)
    t1 = time.perf_counter()
    if mode == "planned":
        plan = plan_requests(config, targets)
        t2 = time.perf_counter()
        print(json.dumps({"select": t1 - t0, "plan": t2 - t1, "prompts": len(plan.requests)}))
        return
    seen: set[str] = set()  # mode "one_by_one": what the planner did per row before the bulk renderer
    for row in targets:
        seen.add(prompt_hash(SYSTEM_PROMPT, render(config.shape, row.question, row.options, row.generation)))
    print(json.dumps({"select": t1 - t0, "plan": time.perf_counter() - t1, "prompts": len(seen)}))


def _select_sql(fingerprint: str) -> tuple[str, list[Any]]:
    from mcqaudit.store.judging import _NEEDS_JUDGE

    sql = f"""
        SELECT g.row_id, g.arm, g.question, g.options, g.gold_letter, coalesce(g.answer, g.generation), g.reasoning
        FROM gen_rows g
        WHERE {_NEEDS_JUDGE}
          AND NOT EXISTS (SELECT 1 FROM judge_verdicts v
                          WHERE v.row_id = g.row_id AND v.fingerprint = ? AND v.status = 'ok')
        ORDER BY g.arm, g.item_id, g.sample, g.orientation, g.row_id
    """
    return sql, [fingerprint]


def _run_child(mode: str, db: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--db", str(db)],
        capture_output=True, text=True, env=_env(), check=True,
    )  # fmt: skip
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def result_rows(rows: int, cmd: float, fetch: float, planned: dict, old: dict, plan: dict) -> list[dict]:
    return [
        {
            "figure": f"mcqaudit grade --dry-run --json, whole command, {rows:,} rows "
            f"({plan['rows']:,} need the judge, {plan['prompts']:,} prompts)",
            "value": round(cmd, 2),
            "unit": "s",
            "baseline": round(fetch, 2),
            "baseline_name": "the same rows fetched into Python (bare fetchall of the dry run's query)",
            "ratio": round(cmd / fetch, 2) if fetch else None,
            "target": f"<= {RATIO:g}x baseline",
            "pass": cmd <= RATIO * fetch,
        },
        {
            "figure": f"dry run's rows planned into prompts, in process ({plan['rows']:,} rows)",
            "value": round(planned["plan"], 2),
            "unit": "s",
            "baseline": round(old["plan"], 2),
            "baseline_name": "render() and prompt_hash() for each row (the planner's loop before the bulk renderer)",
            "ratio": round(planned["plan"] / old["plan"], 2) if old["plan"] else None,
            "target": "for reference (no target)",
            "pass": None,
        },
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=None, help="study size in rows (sets --items: rows / (arms × 4))")
    ap.add_argument("--items", type=int, default=50_000)
    ap.add_argument("--arms", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3, help="runs of the whole command (median reported)")
    ap.add_argument("--db", type=Path, default=None, help="reuse (or create) this study file")
    ap.add_argument("--json", type=Path, default=None, help="write the result rows here (benchmarks/run_all.py)")
    ap.add_argument("--child", choices=("fetch", "planned", "one_by_one"), default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, str(args.db))
        return
    if args.rows is not None:
        args.items = max(1, args.rows // (args.arms * 4))
    import bench_report  # (this script's folder is on sys.path)

    db, tmp = bench_report.study_file(args.db, args.items, args.arms)
    rows = args.items * args.arms * 4
    cmd_runs, fetch_runs = [], []
    shown: dict[str, Any] = {}
    for _ in range(max(1, args.repeat)):  # interleaved, so load changes hit both alike
        fetch_runs.append(_run_child("fetch", db)["seconds"])
        secs, shown = whole_command(db)
        cmd_runs.append(secs)
    cmd, fetch = statistics.median(cmd_runs), statistics.median(fetch_runs)
    planned, old = _run_child("planned", db), _run_child("one_by_one", db)
    plan = {"rows": shown["targeted_rows"], "prompts": shown["requests"]}
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"rows: {rows:,} ({plan['rows']:,} need the judge, {plan['prompts']:,} prompts)   load average: {load}")
    print(f"grade --dry-run --json (whole command): median {cmd:6.2f} s of {', '.join(f'{x:.2f}' for x in cmd_runs)}")
    print(f"bare fetchall of the same rows: median {fetch:6.2f} s   ratio {cmd / fetch:5.1f}x (target <= {RATIO:g}x)")
    print(f"in process: rows selected {planned['select']:.2f} s, planned {planned['plan']:.2f} s; "
          f"row by row as before: planned {old['plan']:.2f} s")  # fmt: skip
    assert planned["prompts"] == old["prompts"] == plan["prompts"], (planned, old, plan)
    results = result_rows(rows, cmd, fetch, planned, old, plan)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print("PASS" if all(r["pass"] is not False for r in results) else "OVER TARGET")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
