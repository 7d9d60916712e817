"""Ingest speed and memory: `mcqaudit ingest` (parsers included) vs DuckDB's own read_json of the same file.

Two shapes of data, each built with DuckDB (fast, deterministic):

- ``mmlu``: 4 options, ~300-character generations, 4 orientations, 2 arms;
- ``varied``: 5 options with non-ASCII texts, 5 orientations, 3 arms, a metadata object per row, generations
  from a bare letter to a few KB (some quoting the non-ASCII option texts).

For each shape, in the same run: (1) the baseline, DuckDB `CREATE TABLE AS SELECT * FROM read_json(...)` into
a fresh file; (2) `mcqaudit ingest --no-framework-parsers` (strict, naive, user) and (3) the default ingest
(+ the 4 framework parsers), each in a subprocess whose own peak RSS is read back (wait4). Targets (issue 23):
(2) <= 2x the baseline, (3) <= 3x, peak RSS <= 1.0 GiB at 1 M rows; with --ten-million (--big), 10 M rows of
the first shape must finish with a peak RSS under 3 GiB (DuckDB spills).

On a shared machine: ``--repeat N`` runs N rounds (the baseline each round and once more at the end) and
reports medians, with the CPU seconds of each run (all its threads; less sensitive to other load than the
wall clock) and the load average when each started. ``--against TREE`` times another source tree (a
checkout before a change) in the same rounds, in turns with this one, for a before/after in one run.

    python benchmarks/bench_ingest.py [--rows 1000000] [--shapes mmlu,varied] [--ten-million] [--json PATH]
                                      [--keep DIR] [--repeat 3] [--against /path/to/old/checkout]
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
from dataclasses import dataclass
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mcqaudit.store.sidecars import discard_study  # noqa: E402

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
RSS_LIMIT = 1.0  # GiB at 1 M rows (issue 23; issue 11 asked 1.5)


ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Run:
    """One timed run: wall seconds, CPU seconds (all its threads), peak RSS in GiB (None for the baseline,
    which runs in this process), and the 1-minute load average when it started."""

    wall: float
    cpu: float
    peak: float | None
    load: float


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def baseline(src: Path, work: Path) -> Run:
    db = work / "baseline.duckdb"
    db.unlink(missing_ok=True)
    load = _load()
    t0, c0 = time.perf_counter(), time.process_time()
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT * FROM read_json(?, format = 'newline_delimited')", [str(src)])
    con.execute("SELECT count(*) FROM t").fetchall()
    con.close()
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    db.unlink(missing_ok=True)
    return Run(took, cpu, None, load)


def _timed(
    sql: str,
    params: list[object],
    work: Path,
    memory_limit: str | None = None,
    prep: tuple[str, list[object]] | None = None,
) -> float:
    """Seconds for one statement into a fresh DuckDB file (``prep``, a statement and its parameters, untimed,
    runs first in the same file)."""
    db = work / "floor.duckdb"
    discard_study(db)
    con = duckdb.connect(str(db))
    try:
        if memory_limit:
            con.execute("SET memory_limit = ?", [memory_limit])
        if prep:
            con.execute(*prep)
        t0 = time.perf_counter()
        con.execute(sql, params)
        took = time.perf_counter() - t0
    finally:
        con.close()
        discard_study(db)
    return took


@dataclass(frozen=True)
class Floor:
    """What no ingest of this contract avoids, each one statement timed alone in DuckDB (seconds), beside the
    baseline (:func:`baseline`, DuckDB's ``read_json`` of the file into a table):

    - ``typed``: every field read as JSON (what the checks read: a value of the wrong type is named, never
      coerced), stored as read;
    - ``ordered``: the rows stored in row-id order under ingest's memory limit (the order that finds a row by
      zone maps, which the review flow's speed rests on; the limit is what keeps ingest's peak RSS target);
    - ``letters``: the rows read and stored with the four framework parsers' letters computed in the same
      statement (their patterns over every generation): the least an ingest with the default parsers does,
      with no check, no canonical order, no row order and no write of the letters' own rows.

    ``letters + ordered - baseline`` is then a floor of the default ingest that keeps the row order, and
    ``ordered`` one of an ingest without the framework parsers."""

    typed: float
    ordered: float
    letters: float


_KEY = "'r' || left(md5(arm || chr(31) || item_id || chr(31) || coalesce(orientation, '')), 20)"


def floor(src: Path, work: Path) -> Floor:
    from mcqaudit import parsers
    from mcqaudit.ingest.fields import field_keys
    from mcqaudit.store.loading import INGEST_MEMORY_LIMIT, _lit, framework_letters_by_row_sql

    spec = "{" + ", ".join(f"{_lit(k)}: 'JSON'" for k in field_keys(None)) + "}"
    typed = _timed(
        f"CREATE TABLE t AS SELECT * FROM read_json(?, format = 'newline_delimited', records = true, "
        f"columns = {spec}, ignore_errors = true, maximum_object_size = 16777216)",
        [str(src)],
        work,
    )
    ordered = _timed(
        f"CREATE TABLE t AS SELECT {_KEY} AS row_id, * FROM read_json(?, format = 'newline_delimited') "
        "ORDER BY row_id",
        [str(src)],
        work,
        INGEST_MEMORY_LIMIT,
    )
    # ingest's own SQL of the letters (one pass, every parser), over the file as it is read, every column kept
    fw_sql, _, fw_params = framework_letters_by_row_sql(
        {name: fp.patterns for name, fp in parsers.FRAMEWORK_PARSERS.items()}, "_src"
    )
    read = (
        f"(SELECT {_KEY} AS row_id, len(options)::INTEGER AS n_opt, * "
        "FROM read_json(?, format = 'newline_delimited'))"
    )
    fused = fw_sql.replace("SELECT row_id, ", "SELECT *, ", 1).replace(
        "(SELECT row_id, n_opt, ", "(SELECT *, ", 1
    )
    if "FROM _src" not in fused:
        raise SystemExit("bench_ingest: framework_letters_by_row_sql changed shape; update floor()")
    letters = _timed(
        f"CREATE TABLE t AS {fused.replace('FROM _src', 'FROM ' + read)}", [*fw_params, str(src)], work
    )
    return Floor(typed, ordered, letters)


def rows_of(src: Path) -> int:
    con = duckdb.connect()
    ((n,),) = con.execute(
        "SELECT count(*) FROM read_json(?, format = 'newline_delimited')", [str(src)]
    ).fetchall()
    return int(n)


def ingest(src: Path, work: Path, tree: Path, *extra: str) -> tuple[float, float, float, str]:
    """(seconds, CPU seconds, peak RSS of the ingest process in GiB, its output), with mcqaudit from ``tree``."""
    import resource

    study = work / "study.duckdb"
    discard_study(study)  # the file and what it keeps beside it (WAL, lock, info's summary)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcqaudit", "ingest", str(src), "--db", str(study), "--quiet", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tree,  # `python -m` imports from the working directory first
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    out, errs = proc.communicate()
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    peak = after.ru_maxrss / 1024 / 1024  # the largest child so far, which is this one (run_isolated)
    if proc.returncode != 0:
        print(out, errs)
        raise SystemExit("ingest failed")
    discard_study(study)
    return took, cpu, peak, out.strip()


def run_isolated(src: Path, work: Path, *extra: str, tree: Path = ROOT) -> tuple[Run, str]:
    """Run one ingest in a fresh helper process, so that its peak RSS is its own."""
    code = (
        f"import sys, json; sys.path.insert(0, {str(ROOT)!r}); from benchmarks.bench_ingest import ingest; "
        "from pathlib import Path; r = ingest(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), "
        "*sys.argv[4:]); print(json.dumps(r))"
    )
    load = _load()
    proc = subprocess.run(
        [sys.executable, "-c", code, str(src), str(work), str(tree), *extra], capture_output=True, text=True
    )
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr)
        raise SystemExit("ingest failed")
    took, cpu, peak, out = json.loads(proc.stdout.strip().splitlines()[-1])
    return Run(float(took), float(cpu), float(peak), load), str(out)


def row(figure: str, value: float, unit: str, base: float | None, target: str, limit: float | None) -> dict:
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
        "pass": None if limit is None else measured <= limit,
    }


MODES = {"strict/naive/user parsers": ("--no-framework-parsers",), "default parsers": ()}
LIMITS = {"strict/naive/user parsers": 2.0, "default parsers": 3.0}


def _median(runs: list[Run], key: str) -> float:
    return float(statistics.median(getattr(r, key) for r in runs))


def bench_shape(
    shape: str,
    rows: int,
    work: Path,
    results: list[dict],
    rss_limit: float,
    repeat: int,
    against: Path | None,
) -> None:
    """Each round: the baseline, then each mode with this tree and (``against``) the other tree, in turns
    (the order of the two trees alternates between rounds); medians over the rounds."""
    src = work / f"{shape}.jsonl"
    t0 = time.perf_counter()
    BUILDERS[shape](src, rows)
    print(f"[{shape}] built {src} ({src.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s")
    n = rows_of(src)
    trees = [ROOT] + ([against] if against else [])
    bases: list[Run] = []
    floors: list[Floor] = []
    runs: dict[tuple[str, Path], list[Run]] = {(m, t): [] for m in MODES for t in trees}
    out = ""
    for k in range(repeat):
        bases.append(baseline(src, work))
        floors.append(floor(src, work))
        for mode, extra in MODES.items():
            for tree in trees if k % 2 == 0 else trees[::-1]:
                got, text = run_isolated(src, work, *extra, tree=tree)
                runs[(mode, tree)].append(got)
                out = out or text
                print(
                    f"[{shape}] round {k + 1} {mode:28s} {tree}: {got.wall:6.2f} s, cpu {got.cpu:6.2f} s, "
                    f"load {got.load:.1f}",
                    flush=True,
                )
    bases.append(baseline(src, work))  # again after, so the baseline sees the load of the whole run
    base, base_cpu = _median(bases, "wall"), _median(bases, "cpu")
    loads = [r.load for r in bases] + [r.load for rs in runs.values() for r in rs]
    print(f"[{shape}] {out}")
    print(
        f"[{shape}] rows: {n:,}; load average (1 min) during the runs: median {statistics.median(loads):.1f}, "
        f"{min(loads):.1f} to {max(loads):.1f} ({os.cpu_count()} cores)"
    )
    print(
        f"[{shape}] duckdb read_json baseline (median of {len(bases)}): {base:6.2f} s, cpu {base_cpu:6.2f} s"
    )
    label = f"{n:,} rows" + ("" if shape == "mmlu" else f", {shape} shape")
    for mode in MODES:
        for tree in trees:
            rs = runs[(mode, tree)]
            wall, cpu = _median(rs, "wall"), _median(rs, "cpu")
            name = "this tree" if tree == ROOT else str(tree)
            print(
                f"[{shape}] ingest ({mode}), {name}: median {wall:6.2f} s (ratio {wall / base:5.2f}, target <= "
                f"{LIMITS[mode]:g}), cpu {cpu:6.2f} s (ratio {cpu / base_cpu:5.2f}); runs "
                f"{[round(r.wall, 2) for r in rs]}"
            )
        results.append(
            row(
                f"ingest {label}, {mode}",
                _median(runs[(mode, ROOT)], "wall"),
                "s",
                base,
                f"<= {LIMITS[mode]:g}x baseline",
                LIMITS[mode],
            )
        )
        results.append(
            row(
                f"ingest {label}, {mode}, CPU seconds",
                _median(runs[(mode, ROOT)], "cpu"),
                "s",
                base_cpu,
                "for reference (no target)",
                None,
            )
        )
        if against:
            results.append(
                row(
                    f"ingest {label}, {mode}, before ({against})",
                    _median(runs[(mode, against)], "wall"),
                    "s",
                    base,
                    "for reference (no target)",
                    None,
                )
            )
    _floor_rows(shape, label, floors, base, results)
    peak = max(r.peak or 0.0 for m in MODES for r in runs[(m, ROOT)])
    print(f"[{shape}] peak RSS of ingest: {peak:6.2f} GiB (target <= {rss_limit})")
    results.append(row(f"ingest {label}, peak RSS", peak, "GiB", None, f"<= {rss_limit} GiB", rss_limit))
    src.unlink()


def _floor_rows(shape: str, label: str, floors: list[Floor], base: float, results: list[dict]) -> None:
    """The floors (:class:`Floor`, medians over the rounds) as rows for reference: each, and the floor of each
    mode against that mode's target (an ingest of this contract cannot be faster than its floor)."""
    typed, ordered, letters = (
        float(statistics.median(getattr(f, k) for f in floors)) for k in ("typed", "ordered", "letters")
    )
    both = letters + ordered - base
    print(
        f"[{shape}] floors (median of {len(floors)}): every field read as JSON {typed:.2f} s ({typed / base:.2f}x); "
        f"stored in row-id order {ordered:.2f} s ({ordered / base:.2f}x); read with the framework letters "
        f"{letters:.2f} s ({letters / base:.2f}x); default parsers in row-id order {both:.2f} s ({both / base:.2f}x)"
    )
    for figure, value, limit in (
        ("floor: every field read as JSON (what the checks read), one statement", typed, None),
        (
            "floor: the rows stored in row-id order under ingest's memory limit, one statement",
            ordered,
            LIMITS["strict/naive/user parsers"],
        ),
        ("floor: the rows read and stored with the framework parsers' letters, one statement", letters, None),
        (
            "floor: default parsers, rows in row-id order (the two statements above less one read)",
            both,
            LIMITS["default parsers"],
        ),
    ):
        target = (
            "for reference (no target)"
            if limit is None
            else f"for reference: its mode's target is <= {limit:g}x"
        )
        r = row(f"ingest {label}, {figure}", value, "s", base, target, None)
        results.append(r)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--shapes", default="mmlu,varied")
    ap.add_argument(
        "--ten-million", "--big", action="store_true", help="also ingest 10 M rows (mmlu shape) once"
    )
    ap.add_argument("--repeat", type=int, default=1, help="rounds of each timing; medians are reported")
    ap.add_argument(
        "--against", type=Path, default=None, help="another source tree (before a change): timed in turns"
    )
    ap.add_argument("--json", type=Path, default=None, help="write the result rows (benchmarks/run_all.py)")
    ap.add_argument("--keep", type=Path, default=None)
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_ingest_"))
    work.mkdir(parents=True, exist_ok=True)
    results: list[dict] = []
    against = args.against.resolve() if args.against else None
    try:
        for shape in [s.strip() for s in args.shapes.split(",") if s.strip()]:
            bench_shape(shape, args.rows, work, results, RSS_LIMIT, max(args.repeat, 1), against)
        if args.ten_million:
            src = work / "ten.jsonl"
            build_mmlu(src, 10_000_000)
            got, out = run_isolated(src, work)
            print(f"[10M] {out}\n[10M] ingest {got.wall:.1f} s, peak RSS {got.peak:.2f} GiB (target < 3)")
            results.append(
                row(
                    "ingest 10,000,000 rows, default parsers, peak RSS",
                    got.peak or 0.0,
                    "GiB",
                    None,
                    "< 3 GiB",
                    3.0,
                )
            )
            src.unlink()
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load average: {_load():.1f} ({os.cpu_count()} cores)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
