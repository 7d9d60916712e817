"""Benchmark: ``mcqaudit report --format json`` on a 1,000,000-row study (50,000 items × 4 orientations × 5 arms).

The study is written straight into the tables with DuckDB SQL (no ingest, no judge): 30 % of rows resolved
by the strict pre-filter, the rest judged (1 % judge errors), four framework parsers' letters for every
row, log-probs on 10 % of rows, 2,000 reviews and a 1,000-row uniform spot check. Then, each in a fresh
process:

- the whole command, ``python -m mcqaudit report --db FILE --format json --bootstrap 1000`` (interpreter
  start, imports, frames, metrics, JSON), median of ``--repeat`` runs, interleaved with the baseline — target
  ≤ 3.7× the baseline (issue 23: ≤ 1.0 s where the bare GROUP BY took 0.27 s): computed (the reports' cache
  beside the study removed before each run), and answered from that cache (the study unchanged since the
  computed run, the same options: ``<study>.report.json``, docs/design.md), each beside the baseline;
- the report in process (computed: ``report_and_frames``, which never reads the cache, + JSON): wall time and peak RSS (``resource.getrusage``, DuckDB
  included), target < 2 GiB; Python-heap peak (``tracemalloc``, a second run); and, for reference, the same
  with the item bootstrap forced (``ci="bootstrap"``; from 10,000 items the report draws its replicates from
  the normal approximation of the item sums, docs/report-schema.md);
- where the in-process time goes (a fresh process): imports, loading the frames (the SQL), the metrics, the
  JSON rendering;
- the baseline in the same run: a bare ``SELECT arm, orientation, count(*), … FROM graded_rows GROUP BY ALL``.

Run: ``.venv/bin/python benchmarks/bench_report.py [--rows 1000000 | --items 50000] [--arms 5] [--boot 1000]
[--repeat 3] [--db PATH] [--json PATH]``. ``--json`` writes the result rows benchmarks/run_all.py reads.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BUILD_SQL = [
    """INSERT INTO judge_configs VALUES ('fp-bench', 'bench-judge', 'extract', 0.0, 16, 0, 'bench', '{}', false,
       TIMESTAMPTZ '2026-01-01 00:00:00+00')""",
    """INSERT INTO items
       SELECT printf('item%06d', i), 'Question ' || i || '?',
              [printf('opt%d_a', i), printf('opt%d_b', i), printf('opt%d_c', i), printf('opt%d_d', i)],
              (hash(i) % 4)::INTEGER, NULL, 'items'
       FROM range(?) t(i)""",
    """INSERT INTO arms SELECT CASE WHEN a = 0 THEN 'base' ELSE 'arm' || a END, a, 1 FROM range(?) t(a)""",
    # one row per (item, arm, orientation); the respondent: accuracy falls with the arm index, arm k has a
    # first-position preference of k %, and an OTHER rate that rises with k
    """CREATE TEMP TABLE sim AS
       WITH o(orientation, oi) AS (VALUES ('ABCD', 0), ('BCDA', 1), ('CDAB', 2), ('DABC', 3)),
       base AS (
           SELECT it.item_id, it.options AS canon, it.gold_index, a.arm, a.ordinal AS k, o.orientation,
                  it.item_id || '|' || a.arm || '|' || o.orientation AS row_id
           FROM items it CROSS JOIN arms a CROSS JOIN o
       ), r AS (
           SELECT *, chr((64 + instr(orientation, chr(65 + gold_index)))::INTEGER) AS gold_letter,
                  (hash(row_id || 'u') % 10000) / 10000.0 AS u,
                  (hash(row_id || 'w') % 3)::INTEGER AS w,
                  (hash(row_id || 's') % 10)::INTEGER AS s
           FROM base
       )
       SELECT *,
           CASE WHEN u < 0.70 - 0.03 * k THEN gold_letter
                WHEN u < 0.70 - 0.03 * k + 0.01 * k THEN 'A'
                WHEN u < 0.75 THEN NULL
                ELSE chr((65 + ((ascii(gold_letter) - 65 + 1 + w) % 4))::INTEGER) END AS pick
       FROM r""",
    # the columns of migration 1 (later migrations' columns take their defaults: answer NULL, not truncated)
    """INSERT INTO gen_rows (row_id, arm, item_id, orientation, sample, question, options, gold_letter, generation,
                            is_blank, prompt, model, metadata, option_logprobs, user_letter, naive_letter,
                            strict_letter, ingest_id, source_line)
       SELECT row_id, arm, item_id, orientation, 0, 'Question?',
              [canon[ascii(orientation[1]) - 64], canon[ascii(orientation[2]) - 64],
               canon[ascii(orientation[3]) - 64], canon[ascii(orientation[4]) - 64]],
              gold_letter,
              CASE WHEN pick IS NULL THEN 'I am not sure.' WHEN s < 3 THEN pick
                   ELSE 'Thinking it over, the answer is ' || pick || '.' END,
              false, NULL, NULL, NULL,
              CASE WHEN s = 9 THEN json_object('A', -1.0 - (w = 0)::INT, 'B', -1.5, 'C', -2.0, 'D', -2.5) END,
              CASE WHEN pick IS NULL THEN 'A' ELSE pick END,
              CASE WHEN pick IS NULL THEN 'A' ELSE pick END,
              CASE WHEN s < 3 THEN pick END, 1, NULL
       FROM sim""",
    """INSERT INTO judge_verdicts
       SELECT row_id, 'fp-bench', CASE WHEN w = 0 AND s = 5 THEN 'error' ELSE 'ok' END,
              CASE WHEN w = 0 AND s = 5 THEN NULL ELSE pick END,
              CASE WHEN w = 0 AND s = 5 THEN NULL WHEN pick IS NULL THEN 'OTHER'
                   WHEN pick = gold_letter THEN 'CORRECT' ELSE 'INCORRECT' END,
              coalesce(pick, 'OTHER'), NULL, NULL, 'h', 'http://127.0.0.1', 1, TIMESTAMPTZ '2026-01-01 00:00:00+00'
       FROM sim WHERE pick IS NULL OR s >= 3""",
    """INSERT INTO parser_letters
       SELECT row_id, p.parser, CASE WHEN pick IS NOT NULL AND (p.parser <> 'simple_evals' OR s < 8) THEN pick END
       FROM sim CROSS JOIN (VALUES ('simple_evals'), ('lm_eval_flexible'), ('opencompass_first_option'),
                                   ('mmlu_pro_chain')) p(parser)""",
    """INSERT INTO reviews (review_id, row_id, action, verdict, picked_letter, reviewer, created_at)
       SELECT nextval('review_seq'), row_id, 'confirm',
              CASE WHEN pick IS NULL THEN 'OTHER' WHEN pick = gold_letter THEN 'CORRECT' ELSE 'INCORRECT' END,
              pick, 'bench', TIMESTAMPTZ '2026-01-01 00:00:00+00'
       FROM sim WHERE hash(row_id || 'r') % 500 = 0 LIMIT 2000""",
    """INSERT INTO spot_checks (queue_id, name, strategy, seed, size, arms, created_by, created_at)
       VALUES (nextval('queue_seq'), 'uniform', 'uniform', 0, 1000, (SELECT list(DISTINCT arm ORDER BY arm) FROM sim), 'bench',
       TIMESTAMPTZ '2026-01-01 00:00:00+00')""",
    """INSERT INTO spot_check_rows SELECT 1, row_number() OVER () - 1, row_id FROM (
           SELECT row_id FROM sim ORDER BY hash(row_id || 'q') LIMIT 1000)""",
]

CMD_RATIO = 3.7  # the whole report command against the bare GROUP BY below, measured in the same run

BARE_SQL = """
SELECT arm, orientation, count(*) AS n, count(final_verdict) AS graded,
       count(*) FILTER (final_verdict = 'CORRECT') AS correct
FROM graded_rows GROUP BY arm, orientation
"""


def build(path: Path, n_items: int, n_arms: int) -> float:
    from mcqaudit.store.db import Study
    from mcqaudit.store.schema import rebuild_current

    t0 = time.perf_counter()
    study = Study(path, create=True)
    with study.write() as con:
        for sql in BUILD_SQL:
            params = [n_items] if "range(?) t(i)" in sql else [n_arms] if "range(?) t(a)" in sql else []
            con.execute(sql, params)
        con.execute("DROP TABLE sim")
        rebuild_current(con)  # judge_verdicts and reviews were written with the SQL above
    with study.connect() as con:
        con.execute("CHECKPOINT")
    return time.perf_counter() - t0


def study_file(
    db: Path | None, n_items: int, n_arms: int
) -> tuple[Path, tempfile.TemporaryDirectory[str] | None]:
    """The study a benchmark runs on: ``db`` (``--db``), else a file in a temporary folder (returned too, for the
    caller to clean up), built by :func:`ensure_built` when missing."""
    tmp = tempfile.TemporaryDirectory() if db is None else None
    path = db if tmp is None else Path(tmp.name) / "bench.duckdb"
    ensure_built(path, n_items, n_arms)
    return path, tmp


def ensure_built(path: Path, n_items: int, n_arms: int) -> None:
    """The study at ``path`` as :func:`build` makes it, built (and said so) only when the file is missing: the
    benchmarks that share one study (``run_all.py``) build it once."""
    if not path.exists():
        secs = build(path, n_items, n_arms)
        print(f"built {n_items * n_arms * 4:,} rows in {secs:.1f} s -> {path}")


def child(mode: str, db: str, n_boot: int) -> None:
    """One measurement in this (fresh) process; prints a JSON line."""
    import tracemalloc

    if mode == "bare":
        from mcqaudit.store.db import Study

        study = Study(db)
        t0 = time.perf_counter()
        with study.connect() as con:
            con.execute(BARE_SQL).fetchall()
        dt = time.perf_counter() - t0
        print(json.dumps({"seconds": dt}))
        return
    if mode == "phases":
        t0 = time.perf_counter()
        from mcqaudit.app import report as api
        from mcqaudit.report import render

        t1 = time.perf_counter()
        frames = api.load_frames(db)
        t2 = time.perf_counter()
        rep = api.report_from_frames(frames, n_boot=n_boot, seed=0)
        t3 = time.perf_counter()
        render(rep, "json")
        t4 = time.perf_counter()
        print(json.dumps({"import": t1 - t0, "frames": t2 - t1, "metrics": t3 - t2, "render": t4 - t3}))
        return
    from mcqaudit.app.report import report_and_frames
    from mcqaudit.report import render

    if mode == "trace":
        tracemalloc.start()
    t0 = time.perf_counter()
    # computed: report_and_frames never reads the reports' cache (build_report would answer from it)
    rep = report_and_frames(db, n_boot=n_boot, seed=0, ci="bootstrap" if mode == "bootstrap" else "auto")[0]
    text = render(rep, "json")
    dt = time.perf_counter() - t0
    out = {
        "seconds": dt,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "json_bytes": len(text),
        "flags": [f["name"] for f in rep["flags"]],
        "method": rep["bootstrap"]["method"],
    }
    if mode == "trace":
        out["tracemalloc_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
    print(json.dumps(out))


def _run_child(mode: str, db: Path, n_boot: int) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--db", str(db), "--boot", str(n_boot)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def whole_command(db: Path, n_boot: int, *, cached: bool = False) -> float:
    """Wall seconds of ``python -m mcqaudit report --format json`` in a fresh interpreter, output discarded:
    computed (no report kept beside the study), or ``cached`` (the report of these options kept there)."""
    from mcqaudit.store.sidecars import report_cache_path

    if not cached:
        report_cache_path(db).unlink(missing_ok=True)
    elif not report_cache_path(db).exists():
        raise SystemExit("no report kept beside the study: run the computed command first")
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "mcqaudit", "report", "--db", str(db), "--format", "json", "--bootstrap",
         str(n_boot), "--out", os.devnull],
        check=True,
        capture_output=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    return time.perf_counter() - t0


def result_rows(
    rows: int, n_boot: int, cmd: float, cached: float, bare: float, rep: dict, boot: dict
) -> list[dict]:
    """The rows of ``--json`` (the format of benchmarks/run_all.py)."""
    return [
        *(
            {
                "figure": f"mcqaudit report --format json, whole command, {rows:,} rows, {n_boot:,} resamples, "
                + how,
                "value": round(secs, 3),
                "unit": "s",
                "baseline": round(bare, 3),
                "baseline_name": "bare GROUP BY arm, orientation over graded_rows",
                "ratio": round(secs / bare, 2) if bare else None,
                "target": f"<= {CMD_RATIO:g}x baseline",
                "pass": secs <= CMD_RATIO * bare,
            }
            for how, secs in (
                ("computed (no report kept)", cmd),
                ("from the reports' cache (study unchanged, same options)", cached),
            )
        ),
        {
            "figure": f"report peak RSS, {rows:,} rows",
            "value": round(rep["peak_rss_mib"]),
            "unit": "MiB",
            "baseline": None,
            "baseline_name": None,
            "ratio": None,
            "target": "<= 2048 MiB",
            "pass": rep["peak_rss_mib"] <= 2048,
        },
        {
            "figure": f"report computed + JSON in process, {rows:,} rows ({rep['method']} CIs)",
            "value": round(rep["seconds"], 3),
            "unit": "s",
            "baseline": round(boot["seconds"], 3),
            "baseline_name": "the same with the item bootstrap forced",
            "ratio": round(rep["seconds"] / boot["seconds"], 2) if boot["seconds"] else None,
            "target": "<= 1x baseline",
            "pass": rep["seconds"]
            <= boot["seconds"] * 1.1,  # noise allowance: the same method below 10,000 items
        },
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rows", type=int, default=None, help="study size in rows (sets --items: rows / (arms × 4))"
    )
    ap.add_argument("--items", type=int, default=50_000)
    ap.add_argument("--arms", type=int, default=5)
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of the whole command (median reported)")
    ap.add_argument("--db", type=Path, default=None, help="reuse (or create) this study file")
    ap.add_argument(
        "--json", type=Path, default=None, help="write the result rows here (benchmarks/run_all.py)"
    )
    ap.add_argument(
        "--child",
        choices=("report", "trace", "bare", "bootstrap", "phases"),
        default=None,
        help=argparse.SUPPRESS,
    )
    args = ap.parse_args()
    if args.child:
        child(args.child, str(args.db), args.boot)
        return
    if args.rows is not None:
        args.items = max(1, args.rows // (args.arms * 4))
    db, tmp = study_file(args.db, args.items, args.arms)
    rows = args.items * args.arms * 4
    bare_runs, cmd_runs, cached_runs = [], [], []
    for _ in range(max(1, args.repeat)):  # interleaved, so load changes hit all alike
        bare_runs.append(_run_child("bare", db, 0)["seconds"])
        cmd_runs.append(whole_command(db, args.boot))
        cached_runs.append(whole_command(db, args.boot, cached=True))
    bare, cmd, cached = (statistics.median(x) for x in (bare_runs, cmd_runs, cached_runs))
    rep = _run_child("report", db, args.boot)
    boot = _run_child("bootstrap", db, args.boot)
    trace = _run_child("trace", db, args.boot)
    phases = _run_child("phases", db, args.boot)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"rows: {rows:,}   resamples: {args.boot}   cores: {os.cpu_count()}   load average: {load}")
    print(f"mcqaudit report --format json (whole command), computed: median {cmd:6.2f} s of "
          f"{', '.join(f'{x:.2f}' for x in cmd_runs)}   (target <= {CMD_RATIO:g}x the bare GROUP BY)")  # fmt: skip
    print(f"  from the reports' cache (study unchanged): median {cached:6.2f} s of "
          f"{', '.join(f'{x:.2f}' for x in cached_runs)}   ratio {cached / bare:5.1f}x")  # fmt: skip
    print(f"bare GROUP BY arm, orientation over graded_rows: median {bare:6.2f} s   ratio {cmd / bare:5.1f}x")
    print(f"report computed + JSON in process: {rep['seconds']:6.2f} s ({rep['method']} CIs)   peak RSS "
          f"{rep['peak_rss_mib']:7.0f} MiB (target < 2048 MiB)")  # fmt: skip
    print(f"  the same with the item bootstrap forced: {boot['seconds']:6.2f} s")
    print(
        f"  python heap peak:    {trace['tracemalloc_peak_mib']:7.0f} MiB (tracemalloc run: {trace['seconds']:.2f} s)"
    )
    print("  where the in-process time goes: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()))
    print(f"flags: {', '.join(rep['flags']) or 'none'}")
    results = result_rows(rows, args.boot, cmd, cached, bare, rep, boot)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print("PASS" if all(r["pass"] for r in results) else "OVER TARGET")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
