"""Ingest speed and memory: `mcqaudit ingest` (parsers included) vs DuckDB's own read_json of the same file.

Two shapes of data, each built with DuckDB (fast, deterministic):

- ``mmlu``: 4 options, ~300-character generations, 4 orientations, 2 arms;
- ``varied``: 5 options with non-ASCII texts, 5 orientations, 3 arms, a metadata object per row, generations
  from a bare letter to a few KB (some quoting the non-ASCII option texts).

For each shape, in the same run: (1) the baseline, DuckDB `CREATE TABLE AS SELECT * FROM read_json(...)` into
a fresh file; (2) `mcqaudit ingest --no-framework-parsers` (strict, naive, user) and (3) the default ingest
(+ the 4 framework parsers), each in a subprocess whose own peak RSS is read back (wait4). Targets (issue 11):
(2) <= 2x the baseline, (3) <= 3x, peak RSS <= 1.5 GiB at 1 M rows; with --ten-million, 10 M rows of the
first shape must finish with a peak RSS under 3 GiB (DuckDB spills).

    python benchmarks/bench_ingest.py [--rows 1000000] [--shapes mmlu,varied] [--ten-million] [--json PATH]
                                      [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def build_mmlu(path: Path, rows: int) -> None:
    items = max(rows // 8, 1)
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


def build_varied(path: Path, rows: int) -> None:
    """5 options (non-ASCII texts), 5 cyclic orientations, 3 arms, metadata, generations of 1 B to ~4 KB."""
    items = max(rows // 15, 1)
    con = duckdb.connect()
    con.execute(
        f"""
        COPY (
          WITH it AS (SELECT i, 'q' || i AS item_id,
                             ['Größe ' || i, 'naïve café ' || i, '東京 ' || i, 'Ωmega ' || i, 'plain ' || i] AS canon,
                             i % 5 AS gold FROM range({items}) t(i)),
          o AS (SELECT k, array_to_string(list_transform(range(5), lambda p: chr((65 + ((p + k) % 5))::INTEGER)), '') AS lab
                FROM range(5) t(k)),
          a AS (SELECT * FROM (VALUES ('base', 0), ('steered-0.5', 1), ('steered-1.0', 2)) v(arm, m))
          SELECT item_id, arm, 'Über welche Aussage über Objekt ' || i || ' stimmt? 选择一个。' AS question,
                 list_transform(range(5), lambda p: canon[((p + k) % 5) + 1]) AS options,
                 (gold - k + 5) % 5 AS gold,
                 CASE (i + k + m) % 7
                      WHEN 0 THEN chr((65 + ((i + k) % 5))::INTEGER)
                      WHEN 1 THEN 'Answer: ' || chr((65 + ((i + k + m) % 5))::INTEGER) || '. ' || canon[(i % 5) + 1]
                      WHEN 2 THEN '答案是' || chr((65 + ((i + m) % 5))::INTEGER) || '。'
                      ELSE {OPENERS!r}[((i * 7 + k) % 5) + 1] ||
                           repeat('Weighing « ' || canon[((i + m) % 5) + 1] || ' » against the rest, the argument goes on. ',
                                  ((i * 13 + k * 7 + m) % 40)::INTEGER) ||
                           'So the answer is (' || chr((65 + ((i + k + m) % 5))::INTEGER) || ').' END AS generation,
                 lab AS orientation,
                 {{'subject': 'topic-' || (i % 57), 'difficulty': i % 5, 'tags': ['t' || (i % 3), 'ü'],
                   'source': {{'split': 'test', 'index': i}}}} AS metadata,
                 'model-' || arm AS model
          FROM it, o, a
        ) TO '{path}' (FORMAT JSON)
        """
    )


BUILDERS = {"mmlu": build_mmlu, "varied": build_varied}


def baseline(src: Path, work: Path) -> tuple[float, int]:
    db = work / "baseline.duckdb"
    db.unlink(missing_ok=True)
    t0 = time.perf_counter()
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT * FROM read_json(?, format = 'newline_delimited')", [str(src)])
    n = con.execute("SELECT count(*) FROM t").fetchone()[0]  # type: ignore[index]
    con.close()
    took = time.perf_counter() - t0
    db.unlink(missing_ok=True)
    return took, int(n)


def ingest(src: Path, work: Path, *extra: str) -> tuple[float, float, str]:
    """(seconds, peak RSS of the ingest process in GiB, its output)."""
    study = work / "study.duckdb"
    for f in (study, study.with_name(study.name + ".wal")):
        f.unlink(missing_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcqaudit", "ingest", str(src), "--db", str(study), "--quiet", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, errs = proc.communicate()
    took = time.perf_counter() - t0
    peak = _peak_of_last_child()
    if proc.returncode != 0:
        print(out, errs)
        raise SystemExit("ingest failed")
    study.unlink(missing_ok=True)
    return took, peak, out.strip()


def _peak_of_last_child() -> float:
    """ru_maxrss of RUSAGE_CHILDREN: the largest child so far, which is this one (`run_isolated` runs each
    ingest from a fresh helper process)."""
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 / 1024


def run_isolated(src: Path, work: Path, *extra: str) -> tuple[float, float, str]:
    """Run one ingest in a fresh helper process, so that its peak RSS is its own."""
    root = str(Path(__file__).resolve().parent.parent)
    code = (
        f"import sys, json; sys.path.insert(0, {root!r}); from benchmarks.bench_ingest import ingest; "
        "from pathlib import Path; r = ingest(Path(sys.argv[1]), Path(sys.argv[2]), *sys.argv[3:]); "
        "print(json.dumps(r))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(src), str(work), *extra], capture_output=True, text=True
    )
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr)
        raise SystemExit("ingest failed")
    took, peak, out = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(took), float(peak), str(out)


def row(figure: str, value: float, unit: str, base: float | None, target: str, limit: float) -> dict:
    ratio = value / base if base else None
    measured = ratio if ratio is not None else value
    return {
        "figure": figure,
        "value": round(value, 3),
        "unit": unit,
        "baseline": None if base is None else round(base, 3),
        "baseline_name": None if base is None else "DuckDB read_json into a table",
        "ratio": None if ratio is None else round(ratio, 2),
        "target": target,
        "pass": measured <= limit,
    }


def bench_shape(shape: str, rows: int, work: Path, results: list[dict], rss_limit: float) -> None:
    src = work / f"{shape}.jsonl"
    t0 = time.perf_counter()
    BUILDERS[shape](src, rows)
    print(f"[{shape}] built {src} ({src.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s")
    base, n = baseline(src, work)
    core, core_peak, out = run_isolated(src, work, "--no-framework-parsers")
    full, full_peak, _ = run_isolated(src, work)
    base2, _ = baseline(src, work)  # again after, so the ratio uses the load of the whole run
    base = min(base, base2)
    print(f"[{shape}] {out}")
    print(f"[{shape}] rows: {n:,}")
    print(f"[{shape}] duckdb read_json baseline                     : {base:6.2f} s")
    print(
        f"[{shape}] ingest (strict, naive, user parsers)          : {core:6.2f} s   ratio {core / base:5.2f} (target <= 2)"
    )
    print(
        f"[{shape}]   + the 4 framework parsers (default)         : {full:6.2f} s   ratio {full / base:5.2f} (target <= 3)"
    )
    print(
        f"[{shape}] peak RSS of ingest                            : {core_peak:6.2f} GiB / {full_peak:.2f} GiB (target <= {rss_limit})"
    )
    label = f"{n:,} rows" + ("" if shape == "mmlu" else f", {shape} shape")
    results.append(row(f"ingest {label}, strict/naive/user parsers", core, "s", base, "<= 2x baseline", 2.0))
    results.append(row(f"ingest {label}, default parsers", full, "s", base, "<= 3x baseline", 3.0))
    results.append(
        row(
            f"ingest {label}, peak RSS",
            max(core_peak, full_peak),
            "GiB",
            None,
            f"<= {rss_limit} GiB",
            rss_limit,
        )
    )
    src.unlink()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--shapes", default="mmlu,varied")
    ap.add_argument("--ten-million", action="store_true", help="also ingest 10 M rows (mmlu shape) once")
    ap.add_argument("--json", type=Path, default=None, help="write the result rows (benchmarks/run_all.py)")
    ap.add_argument("--keep", type=Path, default=None)
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_ingest_"))
    work.mkdir(parents=True, exist_ok=True)
    results: list[dict] = []
    try:
        for shape in [s.strip() for s in args.shapes.split(",") if s.strip()]:
            bench_shape(shape, args.rows, work, results, 1.5)
        if args.ten_million:
            src = work / "ten.jsonl"
            build_mmlu(src, 10_000_000)
            took, peak, out = run_isolated(src, work)
            print(f"[10M] {out}\n[10M] ingest {took:.1f} s, peak RSS {peak:.2f} GiB (target < 3)")
            results.append(
                row("ingest 10,000,000 rows, default parsers, peak RSS", peak, "GiB", None, "< 3 GiB", 3.0)
            )
            src.unlink()
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load average: {os.getloadavg()[0]:.1f} (2 cores)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
