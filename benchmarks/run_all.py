"""Run every benchmark and print one table: figure, baseline measured in the same run, ratio, target, pass/miss.

Each benchmark is its own script (run alone for its detailed printout); here each runs in a subprocess with
``--json FILE`` and its size options, and the rows it writes are collected:
``[{"figure", "value", "unit", "baseline", "baseline_name", "ratio", "target", "pass"}, ...]``.

    python benchmarks/run_all.py                    # 1,000,000 rows
    python benchmarks/run_all.py --rows 100000      # smaller, quicker
    python benchmarks/run_all.py --ten-million      # also ingest 10,000,000 rows (spilling; minutes)
    python benchmarks/run_all.py --only ingest,report
    python benchmarks/run_all.py --results benchmarks/RESULTS.md   # keep the output (date, machine, commit)

The study-based benchmarks (report, info, dashboard, export, dry_run, review) share one study of ``--rows`` rows
(5 arms × 4 orientations), built once; review runs last because it writes reviews. Exit status 0 when every target is
met, 1 when one is missed, 2 when a benchmark failed to run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ARMS = 5
ORIENTATIONS = 4


@dataclass(frozen=True)
class Bench:
    name: str
    script: str
    args: Callable[[argparse.Namespace, Path], list[str]]


def _study_args(ns: argparse.Namespace, work: Path) -> list[str]:
    items = max(1, ns.rows // (ARMS * ORIENTATIONS))
    return ["--items", str(items), "--arms", str(ARMS), "--db", str(work / "study.duckdb")]


BENCHES = [
    Bench(
        "ingest", "bench_ingest.py", lambda ns, work: ["--rows", str(ns.rows)] + (["--big"] if ns.big else [])
    ),
    Bench("grade", "bench_grade.py", lambda ns, work: []),
    Bench("report", "bench_report.py", _study_args),
    Bench(
        "info",
        "bench_info.py",
        lambda ns, work: ["--rows", str(ns.rows), "--arms", str(ARMS), "--db", str(work / "study.duckdb")],
    ),
    Bench("dashboard", "bench_dashboard.py", _study_args),
    Bench("export", "bench_export.py", _study_args),  # on a copy of the study, given a panel judge
    Bench("dry_run", "bench_dry_run.py", _study_args),  # grade --dry-run: reads the study, writes nothing
    Bench("review", "bench_review.py", _study_args),
]


def machine() -> str:
    cores = os.cpu_count()
    mem = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 2**20:.0f} GiB"
    except OSError:
        pass
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cores} cores ({cpu}), {mem} memory, Python {platform.python_version()}, {platform.system()}"


def commit() -> str:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        return rev + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def fmt(value: object, unit: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        text = f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = str(value)
    return f"{text} {unit}".strip()


def table(rows: list[dict]) -> str:
    head = ["benchmark", "figure", "value", "baseline (same run)", "ratio", "target", "result"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        base = "—"
        if r.get("baseline") is not None:
            base = fmt(r["baseline"], r.get("baseline_unit", r.get("unit", "")))
            if r.get("baseline_name"):
                base += f" ({r['baseline_name']})"
        ratio = fmt(r.get("ratio")) + ("×" if r.get("ratio") is not None else "")
        result = {True: "pass", False: "**miss**", None: "—"}[r.get("pass")]
        cells = [
            r["bench"],
            r["figure"],
            fmt(r.get("value"), r.get("unit", "")),
            base,
            ratio,
            r.get("target") or "—",
            result,
        ]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def run_one(bench: Bench, ns: argparse.Namespace, work: Path) -> tuple[list[dict], str | None]:
    out = work / f"{bench.name}.json"
    cmd = [sys.executable, str(HERE / bench.script), "--json", str(out), *bench.args(ns, work)]
    print(f"\n=== {bench.name}: {shlex.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO)
    took = time.perf_counter() - t0
    if proc.returncode != 0 or not out.exists():
        return [], f"{bench.script} exited {proc.returncode} after {took:.0f} s"
    rows = json.loads(out.read_text())
    for r in rows:
        r["bench"] = bench.name
    print(f"=== {bench.name}: {len(rows)} figure(s) in {took:.0f} s", flush=True)
    return rows, None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the generated inputs/studies")
    ap.add_argument(
        "--ten-million",
        "--big",
        dest="big",
        action="store_true",
        help="also ingest 10,000,000 rows (spilling; minutes; not in CI)",
    )
    ap.add_argument(
        "--only", default="", help="comma-separated benchmark names: " + ",".join(b.name for b in BENCHES)
    )
    ap.add_argument("--results", type=Path, default=None, help="write the table to this Markdown file")
    ap.add_argument("--work", type=Path, default=None, help="keep inputs and studies in this folder")
    ns = ap.parse_args()
    chosen = [b for b in BENCHES if not ns.only or b.name in ns.only.split(",")]
    unknown = set(filter(None, ns.only.split(","))) - {b.name for b in BENCHES}
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    work = Path(ns.work or tempfile.mkdtemp(prefix="mcqaudit_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    rows: list[dict] = []
    failures: list[str] = []
    for bench in chosen:
        got, failure = run_one(bench, ns, work)
        rows += got
        if failure:
            failures.append(f"{bench.name}: {failure}")
    text = table(rows)
    header = [
        f"# Benchmark results ({ns.rows:,} rows{', plus 10 M-row ingest' if ns.big else ''})",
        "",
        f"- date: {started:%Y-%m-%d %H:%M} UTC",
        f"- machine: {machine()}",
        f"- commit: {commit()}",
        f"- load average at start: {load:.2f}" if load is not None else "- load average: unknown",
        f"- command: `python benchmarks/run_all.py {shlex.join(sys.argv[1:])}`".replace(
            "`python benchmarks/run_all.py `", "`python benchmarks/run_all.py`"
        ),
        "",
        "Each baseline is measured in the same run, on the same machine, as its figure; a ratio target compares "
        "the two, an absolute target (seconds, GiB) the figure alone.",
        "",
    ]
    footer = ["", *(f"- **failed to run**: {f}" for f in failures)]
    doc = "\n".join(header) + "\n" + text + "\n" + "\n".join(footer).rstrip() + "\n"
    print("\n" + doc)
    if ns.results:
        ns.results.write_text(doc)
        print(f"wrote {ns.results}")
    if failures:
        return 2
    return 0 if all(r.get("pass") is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
