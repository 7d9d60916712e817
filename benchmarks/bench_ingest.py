"""Ingest speed: `mcqaudit ingest` (parsers included) vs DuckDB's own read_json of the same file.

Builds a 1,000,000-row JSONL (4 options, ~300-character generations, 4 orientations, 2 arms), then times
in the same run: (1) DuckDB `CREATE TABLE AS SELECT * FROM read_json(...)` into a fresh file, the
baseline; (2) `mcqaudit ingest` into a fresh study, in a subprocess whose peak RSS is read back.
Prints both times and the ratio (target <= 3) and the peak memory (target < 2 GiB).

    python benchmarks/bench_ingest.py [--rows 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

OPENERS = [
    "Let me think about this carefully. ",
    "At the garden of knowledge we find that ",
    "Considering each option in turn, ",
    "The question asks which statement holds; ",
    "Certainly! Looking at the options, ",
]


def build(path: Path, rows: int) -> None:
    """Write the JSONL with DuckDB (fast and deterministic)."""
    items = rows // 8
    con = duckdb.connect()
    con.execute(
        f"""
        COPY (
          WITH it AS (SELECT i, 'item-' || i AS item_id,
                             ['alpha option ' || i, 'beta option ' || i, 'gamma option ' || i, 'delta option ' || i] AS canon,
                             i % 4 AS gold FROM range({items}) t(i)),
          o AS (SELECT * FROM (VALUES (0, 'ABCD'), (1, 'BCDA'), (2, 'CDAB'), (3, 'DABC')) v(k, lab)),
          a AS (SELECT * FROM (VALUES ('base'), ('steered')) v(arm))
          SELECT item_id, arm, 'Which of the following is true of item ' || i || '? Pick one.' AS question,
                 list_transform(range(4), lambda p: canon[((p + k) % 4) + 1]) AS options,
                 chr((65 + ((gold - k + 4) % 4))::INTEGER) AS gold,
                 CASE WHEN (i + k) % 10 = 0 THEN chr((65 + ((i + k) % 4))::INTEGER)
                      ELSE {OPENERS!r}[((i * 7 + k) % 5) + 1] ||
                           repeat('the evidence points one way and the reasoning follows from it, ', 4) ||
                           'so my final answer is ' || chr((65 + ((i + k) % 4))::INTEGER) || '.' END AS generation,
                 lab AS orientation
          FROM it, o, a
        ) TO '{path}' (FORMAT JSON)
        """
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, default=None)
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_ingest_"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "generations.jsonl"
    t0 = time.perf_counter()
    build(src, args.rows)
    print(f"built {src} ({src.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s")

    base_db = work / "baseline.duckdb"
    base_db.unlink(missing_ok=True)
    t0 = time.perf_counter()
    con = duckdb.connect(str(base_db))
    con.execute("CREATE TABLE t AS SELECT * FROM read_json(?, format = 'newline_delimited')", [str(src)])
    n = con.execute("SELECT count(*) FROM t").fetchone()[0]  # type: ignore[index]
    con.close()
    baseline = time.perf_counter() - t0

    def ingest(*extra: str) -> tuple[float, float, str]:
        study = work / "study.duckdb"
        study.unlink(missing_ok=True)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "mcqaudit", "ingest", str(src), "--db", str(study), "--quiet", *extra],
            capture_output=True,
            text=True,
        )
        took = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stdout, proc.stderr)
            raise SystemExit("ingest failed")
        # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: run the lighter variant first
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 / 1024
        return took, peak, proc.stdout.strip()

    core, core_peak, out = ingest("--no-framework-parsers")
    full, full_peak, _ = ingest()
    print(out)
    print(f"rows: {n:,}")
    print(f"duckdb read_json baseline                    : {baseline:6.2f} s")
    print(
        f"mcqaudit ingest (strict, naive, user parsers) : {core:6.2f} s   ratio {core / baseline:5.2f} (target <= 3)"
    )
    print(f"  + the 4 framework patterns (default)        : {full:6.2f} s   ratio {full / baseline:5.2f}")
    print(
        f"peak RSS of ingest                            : {core_peak:6.2f} GiB / {full_peak:.2f} GiB (target < 2)"
    )
    if args.keep is None:
        for p in work.iterdir():
            p.unlink()
        os.rmdir(work)


if __name__ == "__main__":
    main()
