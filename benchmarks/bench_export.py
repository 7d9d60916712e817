"""Benchmark: ``mcqaudit export`` of a 1,000,000-row study (50,000 items × 4 orientations × 5 arms) to Parquet
and JSON Lines, with the nested ``reviews`` and ``panel_verdicts`` columns, and to CSV.

The study is :func:`bench_report.build`'s (30 % of rows resolved by the strict pre-filter, the rest judged,
2,000 reviews), copied, plus one panel judge with a verdict on every judged row (``grade --panel``'s table,
written with SQL), so that both nested columns have something to carry. Each figure is the whole command in a
fresh process (interpreter start, imports, the query, writing the file), median of ``--repeat`` runs, with its
peak RSS; the baseline in the same run is DuckDB's own ``COPY (SELECT … ORDER BY …) TO …`` of the same rows (the
same query, nested columns included; for CSV graded_rows as it is) in the same format, in a fresh process:
what the database alone takes to write them. Then the file is read back (pyarrow.dataset counts its rows) so
that a figure never stands for a broken file.

Run: ``.venv/bin/python benchmarks/bench_export.py [--rows 1000000 | --items 50000] [--arms 5] [--repeat 3]
[--db PATH] [--json PATH]``. ``--json`` writes the result rows benchmarks/run_all.py reads.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

PANEL_SQL = [
    """INSERT OR IGNORE INTO judge_configs VALUES ('fp-panel', 'panel-judge', 'extract', 0.0, 16, 0, 'bench', '{}', false,
       TIMESTAMPTZ '2026-01-01 00:00:00+00')""",
    "INSERT OR IGNORE INTO panel_judges VALUES ('fp-panel', TIMESTAMPTZ '2026-01-02 00:00:00+00')",
    """INSERT OR IGNORE INTO judge_verdicts
       SELECT row_id, 'fp-panel', status, CASE WHEN hash(row_id) % 7 = 0 THEN NULL ELSE letter END,
              CASE WHEN status <> 'ok' THEN NULL WHEN hash(row_id) % 7 = 0 THEN 'OTHER' ELSE verdict END,
              reply, NULL, NULL, 'h', 'http://127.0.0.1', 1, TIMESTAMPTZ '2026-01-02 00:00:00+00'
       FROM judge_verdicts WHERE fingerprint = 'fp-bench'""",
]
FORMATS = ("parquet", "jsonl", "csv")
BARE_OPTIONS = {
    "parquet": "(FORMAT parquet, COMPRESSION snappy)",
    "jsonl": "(FORMAT json)",
    "csv": "(FORMAT csv, HEADER)",
}
# the whole command against DuckDB's own COPY of the same rows: interpreter start, imports, the Arrow batches,
# the progress, the fsync and rename cost at most this much more
TARGET_RATIO = {"parquet": 1.5, "jsonl": 1.5, "csv": 1.5}
RSS_LIMIT_MIB = 2048


def build(path: Path, n_items: int, n_arms: int) -> float:
    """bench_report's study plus one panel judge; seconds taken."""
    import bench_report

    from mcqaudit.store.db import Study

    t0 = time.perf_counter()
    bench_report.build(path, n_items, n_arms)
    study = Study(path)
    with study.write() as con:
        for sql in PANEL_SQL:
            con.execute(sql)
    with study.connect() as con:
        con.execute("CHECKPOINT")
    return time.perf_counter() - t0


def child(mode: str, db: str, out: str, fmt: str) -> None:
    """One run in this (fresh) process: the CLI command, or DuckDB's bare COPY; prints a JSON line."""
    import resource

    t0 = time.perf_counter()
    if mode == "command":
        from mcqaudit.cli import main as cli_main

        sys.argv = ["mcqaudit", "export", "--db", db, "--out", out, "--format", fmt]
        try:
            cli_main()
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise
    else:
        from mcqaudit.store.db import Study
        from mcqaudit.store.export import rows_sql

        target = "'" + out.replace("'", "''") + "'"
        rows = "graded_rows" if fmt == "csv" else f"({rows_sql(iso_times=fmt == 'jsonl')})"
        with Study(db, read_only=True).connect() as con:
            con.execute(
                f"COPY (SELECT * FROM {rows} ORDER BY arm, item_id, orientation, sample) TO {target} {BARE_OPTIONS[fmt]}"
            ).fetchall()
    dt = time.perf_counter() - t0
    print(
        json.dumps({"seconds": dt, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    )


def _run(mode: str, db: Path, out: Path, fmt: str) -> tuple[float, float]:
    """Wall seconds (interpreter start included) and peak RSS of one child run."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--db", str(db), "--out", str(out), "--format", fmt],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{mode} {fmt} failed:\n{proc.stdout}\n{proc.stderr}")
    return took, float(json.loads(proc.stdout.strip().splitlines()[-1])["peak_rss_mib"])


def _check(out: Path, fmt: str, rows: int) -> str:
    """The file read back: its row count must be the study's; a line about it."""
    import pyarrow.dataset as ds

    if fmt == "jsonl":
        with out.open("rb") as fh:
            n = sum(1 for _ in fh)
    else:
        n = ds.dataset(out, format=fmt).count_rows()
    if n != rows:
        raise SystemExit(f"{out}: {n:,} rows read back, expected {rows:,}")
    return f"{out.stat().st_size / 2**20:,.0f} MiB, {n:,} rows read back"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rows", type=int, default=None, help="study size in rows (sets --items: rows / (arms × 4))"
    )
    ap.add_argument("--items", type=int, default=50_000)
    ap.add_argument("--arms", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command (median reported)")
    ap.add_argument("--db", type=Path, default=None, help="bench_report's study to copy (built when missing)")
    ap.add_argument(
        "--json", type=Path, default=None, help="write the result rows here (benchmarks/run_all.py)"
    )
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--child", choices=("command", "bare"), default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--format", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, str(args.db), args.out, args.format)
        return
    if args.rows is not None:
        args.items = max(1, args.rows // (args.arms * 4))
    rows = args.items * args.arms * 4
    with tempfile.TemporaryDirectory(prefix="mcqaudit_export_") as tmp:
        work = Path(tmp)
        db = work / "export.duckdb"
        if args.db is not None and args.db.exists():
            shutil.copy(args.db, db)
            from mcqaudit.store.db import Study

            with Study(db).write() as con:
                for sql in PANEL_SQL:
                    con.execute(sql)
        else:
            print(f"built {rows:,} rows (with a panel judge) in {build(db, args.items, args.arms):.1f} s")
        results = []
        for fmt in args.formats.split(","):
            cmd, bare, rss = [], [], []
            for _ in range(max(1, args.repeat)):  # interleaved, so load changes hit both alike
                took, _peak = _run("bare", db, work / f"bare.{fmt}", fmt)
                bare.append(took)
                took, peak = _run("command", db, work / f"rows.{fmt}", fmt)
                cmd.append(took)
                rss.append(peak)
            about = _check(work / f"rows.{fmt}", fmt, rows)
            c, b = statistics.median(cmd), statistics.median(bare)
            print(f"export --format {fmt}: median {c:6.2f} s of {', '.join(f'{x:.2f}' for x in cmd)}; "
                  f"DuckDB COPY of the same rows {b:6.2f} s; ratio {c / b:4.2f}x; peak RSS {max(rss):,.0f} MiB; "
                  f"{about}")  # fmt: skip
            nested = "" if fmt == "csv" else " with reviews and panel_verdicts"
            results += [
                {
                    "figure": f"mcqaudit export --format {fmt}{nested}, whole command, {rows:,} rows",
                    "value": round(c, 2),
                    "unit": "s",
                    "baseline": round(b, 2),
                    "baseline_name": f"DuckDB COPY of the same rows to {fmt}",
                    "ratio": round(c / b, 2) if b else None,
                    "target": f"<= {TARGET_RATIO[fmt]}x baseline",
                    "pass": c <= TARGET_RATIO[fmt] * b,
                },
                {
                    "figure": f"mcqaudit export --format {fmt}, peak RSS, {rows:,} rows",
                    "value": round(max(rss)),
                    "unit": "MiB",
                    "baseline": None,
                    "baseline_name": None,
                    "ratio": None,
                    "target": f"<= {RSS_LIMIT_MIB} MiB",
                    "pass": max(rss) <= RSS_LIMIT_MIB,
                },
            ]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print("PASS" if all(r["pass"] for r in results) else "OVER TARGET")


if __name__ == "__main__":
    main()
