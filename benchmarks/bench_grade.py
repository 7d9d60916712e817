"""Judge throughput: `grade` vs a bare `openai.AsyncOpenAI` loop against the same server, same concurrency.

A judge server runs in its own process on 127.0.0.1 with a fixed per-request latency (default 100 ms):
the stand-in (`mcqaudit standin-judge`) when it is installed, else the scripted heuristic server of the
tests. A study gets N rows that all need the judge (distinct generations, so no prompt is shared). Then,
alternating for a few rounds so that load on the machine hits both alike:

- baseline: a bare loop — the same rendered prompts through ``openai.AsyncOpenAI`` at the same
  concurrency (an ``asyncio.Semaphore``), nothing stored;
- mcqaudit: ``grade()`` into a fresh copy of the study (selection, rendering, dedupe, cache lookup,
  reply parsing, batched writes, all timed).

Prints both rates per round and the paired ratio (grade ÷ bare in the same round; target ≥ 1.0: at this
concurrency the client is CPU-bound, so anything grade adds per request shows), the CPU time per row of
each (on a busy machine the steadier comparison), and a fully cached re-run's request count as the server
counted it (must be 0) and rows/s. ``--json PATH`` writes the result rows for benchmarks/run_all.py:
the figure is the median of the per-round rates, the ratio the median of the paired per-round ratios.

``--against TREE`` (another checkout, e.g. ``git worktree add --detach /tmp/base main``) compares before and
after instead: each round runs three arms, each in a fresh process (``grade_child.py``, a warm-up run first),
in an order that rotates from round to round: the bare loop, ``grade()`` from this checkout and ``grade()``
from TREE, against the same server and study; it prints each arm's rate and CPU per row and the paired
ratios (each grade ÷ bare, this ÷ TREE).

    .venv/bin/python benchmarks/bench_grade.py [--rows 2000] [--latency-ms 200] [--concurrency 64] [--rounds 4]
        [--json PATH] [--against TREE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import openai

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mcqaudit.app.grade import GradeOptions, grade  # noqa: E402
from mcqaudit.judge.prompts import SYSTEM_PROMPT, JudgeConfig, render  # noqa: E402
from mcqaudit.store import Study  # noqa: E402
from tests.judge_servers import add_rows  # noqa: E402

OPTIONS = ["a red fruit", "a yellow fruit", "a green vegetable", "a root vegetable"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """The judge server in a child process; ``requests()`` asks it how many requests it has served."""

    def __init__(self, latency_ms: float):
        self.latency_ms = latency_ms
        self.kind = "scripted"
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> Server:
        try:
            import mcqaudit.standin.server  # noqa: F401

            self.kind = "standin"
        except ImportError:
            self.kind = "scripted"
        if self.kind == "standin":
            port = free_port()
            cmd = [
                sys.executable,
                "-m",
                "mcqaudit",
                "standin-judge",
                "--port",
                str(port),
                "--latency-ms",
                str(self.latency_ms),
            ]
            self.proc = subprocess.Popen(
                cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True
            )
            self.base_url = f"http://127.0.0.1:{port}/v1"
            self._wait_ready()
        else:
            cmd = [sys.executable, "-m", "tests.judge_servers", "--latency-ms", str(self.latency_ms)]
            self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)
            assert self.proc.stdout is not None
            self.base_url = self.proc.stdout.readline().strip()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(
                    ("127.0.0.1", int(self.base_url.rsplit(":", 1)[1].split("/")[0])), 0.2
                ):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the judge server did not start")

    def requests(self) -> int | None:
        root = self.base_url.rsplit("/v1", 1)[0]
        for path in ("/stats", "/v1/stats", "/standin/stats"):
            try:
                with urllib.request.urlopen(root + path, timeout=2) as resp:
                    data = json.loads(resp.read())
                return int(data.get("requests", data.get("total", 0)))
            except (OSError, ValueError):
                continue
        return None

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def make_rows(n: int) -> list[dict]:
    rows = []
    for i in range(n):
        pick = OPTIONS[i % 4]
        rows.append(
            {
                "row_id": f"row{i:06d}",
                "item_id": f"item{i // 4}",
                "orientation": "ABCD",
                "sample": i % 4,
                "question": f"Question {i // 4}: which of these is {pick.split()[1]}?",
                "options": OPTIONS,
                "gold_letter": "ABCD"[(i // 4) % 4],
                "generation": f"Thinking it over (run {i}), I would say it is {pick}, final answer.",
            }
        )
    return rows


async def bare_loop(base_url: str, config: JudgeConfig, prompts: list[str], concurrency: int) -> float:
    client = openai.AsyncOpenAI(api_key="bench", base_url=base_url, max_retries=0, timeout=60)
    sem = asyncio.Semaphore(concurrency)

    async def one(user: str) -> None:
        async with sem:
            await client.chat.completions.create(
                model=config.model,
                messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
                temperature=config.temperature,
                max_tokens=config.max_tokens,
                seed=config.seed,
            )

    start = time.perf_counter()
    await asyncio.gather(*(one(p) for p in prompts))
    elapsed = time.perf_counter() - start
    await client.close()
    return len(prompts) / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--latency-ms", type=float, default=200.0)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument(
        "--json", type=Path, default=None, help="write the result rows here (benchmarks/run_all.py)"
    )
    ap.add_argument("--against", type=Path, default=None, help="another checkout: before/after (see above)")
    args = ap.parse_args()
    if args.against is not None:
        against(args)
        return

    config = JudgeConfig(model="standin-heuristic")
    rows = make_rows(args.rows)
    prompts = [render("extract", r["question"], r["options"], r["generation"]) for r in rows]
    with tempfile.TemporaryDirectory() as tmp, Server(args.latency_ms) as server:
        template = Path(tmp) / "template.duckdb"
        add_rows(Study(template, create=True), rows)
        print(
            f"server: {server.kind} at {server.base_url}, latency {args.latency_ms:g} ms; {args.rows} rows; "
            f"concurrency {args.concurrency}"
        )
        bare_rates, mcq_rates = [], []
        bare_cpu, mcq_cpu = [], []
        last_db = template
        for k in range(args.rounds):

            def run_bare() -> float:
                cpu = time.process_time()
                rate = asyncio.run(bare_loop(server.base_url, config, prompts, args.concurrency))
                bare_cpu.append((time.process_time() - cpu) / args.rows * 1000)
                return rate

            def run_mcq(k: int = k) -> tuple[float, Path]:
                db = Path(tmp) / f"round{k}.duckdb"
                shutil.copy(template, db)
                study = Study(db)
                opts = GradeOptions(config, base_url=server.base_url, concurrency=args.concurrency)
                start, cpu = time.perf_counter(), time.process_time()
                summary = grade(study, opts)
                rate = args.rows / (time.perf_counter() - start)
                mcq_cpu.append((time.process_time() - cpu) / args.rows * 1000)
                assert summary.graded == args.rows and summary.errors == 0, summary.lines()
                return rate, db

            # alternate which goes first, so that a drift in machine load hits both alike
            if k % 2 == 0:
                bare = run_bare()
                rate, last_db = run_mcq()
            else:
                rate, last_db = run_mcq()
                bare = run_bare()
            bare_rates.append(bare)
            mcq_rates.append(rate)
            print(
                f"round {k + 1}: bare {bare:.1f} rows/s ({bare_cpu[-1]:.2f} ms CPU/row), mcqaudit {rate:.1f} "
                f"rows/s ({mcq_cpu[-1]:.2f} ms CPU/row), ratio {rate / bare:.3f}"
            )

        before = server.requests()
        study = Study(last_db)
        start = time.perf_counter()
        summary = grade(study, GradeOptions(config, base_url=server.base_url, concurrency=args.concurrency))
        cached_elapsed = time.perf_counter() - start
        after = server.requests()
        served = (after - before) if before is not None and after is not None else None

        # A re-run where every row's verdict is missing but every prompt is in the reply cache.
        with study.write() as con:
            con.execute("DELETE FROM judge_verdicts")
            con.execute("DELETE FROM current_judge")  # kept with judge_verdicts (schema migration 6)
        before = server.requests()
        start = time.perf_counter()
        recache = grade(study, GradeOptions(config, base_url=server.base_url, concurrency=args.concurrency))
        recache_elapsed = time.perf_counter() - start
        after = server.requests()
        served2 = (after - before) if before is not None and after is not None else None

    best_bare, best_mcq = max(bare_rates), max(mcq_rates)
    print(f"bare openai loop : {best_bare:8.1f} rows/s (best of {args.rounds})")
    print(f"mcqaudit grade   : {best_mcq:8.1f} rows/s (best of {args.rounds})")
    ratios = sorted(m / b for m, b in zip(mcq_rates, bare_rates, strict=True))
    cpu_ratios = sorted(m / b for m, b in zip(mcq_cpu, bare_cpu, strict=True))
    print(f"ratio            : {best_mcq / best_bare:8.3f}   (best vs best)")
    print(
        f"ratio per round  : median {median(ratios):.3f}, range {ratios[0]:.3f}–{ratios[-1]:.3f} (target >= 1.0)"
    )
    print(
        f"client CPU per row (this process, all threads; median): bare {median(bare_cpu):.2f} "
        f"ms, mcqaudit {median(mcq_cpu):.2f} ms (paired ratio {median(cpu_ratios):.3f})"
    )
    print(
        f"re-run, all rows ok      : {summary.requests} requests sent, server counted "
        f"{served if served is not None else 'n/a'}; {cached_elapsed:.2f} s ({args.rows / cached_elapsed:.0f} rows/s)"
    )
    print(
        f"re-run, verdicts dropped : {recache.requests} requests sent, server counted "
        f"{served2 if served2 is not None else 'n/a'}; {recache.graded} rows from the reply cache in "
        f"{recache_elapsed:.2f} s ({args.rows / recache_elapsed:.0f} rows/s)"
    )
    if args.json is not None:
        at = f"{args.concurrency} in flight, {args.latency_ms:g} ms judge, {args.rows:,} rows"
        rows = [
            {
                "figure": f"grade rows/s at {at} (median of {args.rounds} paired rounds)",
                "value": round(median(mcq_rates), 1),
                "unit": "rows/s",
                "baseline": round(median(bare_rates), 1),
                "baseline_name": "bare openai.AsyncOpenAI loop, same server and concurrency",
                "ratio": round(median(ratios), 3),
                "target": ">= 1.0x baseline",
                "pass": median(ratios) >= 1.0,
            },
            {
                "figure": f"grade client CPU per row at {at}",
                "value": round(median(mcq_cpu), 3),
                "unit": "ms",
                "baseline": round(median(bare_cpu), 3),
                "baseline_name": "bare openai.AsyncOpenAI loop",
                "ratio": round(median(cpu_ratios), 3),
                "target": "<= 1.0x baseline",
                "pass": median(cpu_ratios) <= 1.0,
            },
            {
                "figure": f"fully cached re-run of {args.rows:,} rows: requests the server counted",
                "value": served2 if served2 is not None else recache.requests,
                "unit": "requests",
                "baseline": None,
                "baseline_name": None,
                "ratio": None,
                "target": "= 0",
                "pass": (served2 if served2 is not None else recache.requests) == 0
                and recache.graded == args.rows,
            },
        ]
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")


def against(args: argparse.Namespace) -> None:
    """``--against TREE``: bare loop, this checkout's grade and TREE's grade, each in a fresh process."""
    import os

    child = Path(__file__).resolve().with_name("grade_child.py")
    arms = [("bare", REPO, "bare"), ("this", REPO, "grade"), ("against", args.against.resolve(), "grade")]
    got: dict[str, list[dict]] = {name: [] for name, _, _ in arms}
    with tempfile.TemporaryDirectory() as tmp, Server(args.latency_ms) as server:
        template, warm = Path(tmp) / "template.duckdb", Path(tmp) / "warm.duckdb"
        add_rows(Study(template, create=True), make_rows(args.rows))
        add_rows(Study(warm, create=True), [dict(r, generation=r["generation"] + " (warm-up)") for r in make_rows(64)])
        print(
            f"server: {server.kind}, latency {args.latency_ms:g} ms; {args.rows} rows; concurrency "
            f"{args.concurrency}; this: {REPO}; against: {args.against}; load {os.getloadavg()[0]:.1f}"
        )
        for k in range(args.rounds):
            order = arms[k % 3 :] + arms[: k % 3]
            order = order[::-1] if k % 2 else order
            line = []
            for name, tree, mode in order:
                cmd = [sys.executable, str(child), str(tree), mode, str(template), str(warm), tmp,
                       server.base_url, str(args.concurrency)]  # fmt: skip
                out = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, check=False)
                if out.returncode:
                    raise SystemExit(f"{name} failed:\n{out.stderr[-4000:]}")
                r = json.loads(out.stdout.strip().splitlines()[-1])
                got[name].append(r)
                line.append(f"{name} {r['rows'] / r['elapsed_s']:.1f} rows/s ({r['cpu_s'] / r['rows'] * 1000:.2f} ms CPU/row)")
            rate = {n: got[n][-1]["rows"] / got[n][-1]["elapsed_s"] for n in got}
            print(
                f"round {k + 1}: {', '.join(line)}; this/bare {rate['this'] / rate['bare']:.3f}, against/bare "
                f"{rate['against'] / rate['bare']:.3f}; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    rates = {n: [r["rows"] / r["elapsed_s"] for r in v] for n, v in got.items()}
    cpus = {n: [r["cpu_s"] / r["rows"] * 1000 for r in v] for n, v in got.items()}
    for n in ("this", "against"):
        ratios = sorted(a / b for a, b in zip(rates[n], rates["bare"], strict=True))
        print(
            f"{n:8s}: median {median(rates[n]):.1f} rows/s (bare {median(rates['bare']):.1f}); paired ratio to "
            f"bare: median {median(ratios):.3f}, range {ratios[0]:.3f}-{ratios[-1]:.3f}; CPU per row "
            f"{median(cpus[n]):.2f} ms (bare {median(cpus['bare']):.2f})"
        )
    ab = sorted(a / b for a, b in zip(rates["this"], rates["against"], strict=True))
    print(f"this/against, paired: median {median(ab):.3f}, range {ab[0]:.3f}-{ab[-1]:.3f}")


def median(xs: list[float]) -> float:
    ys = sorted(xs)
    n = len(ys)
    return ys[n // 2] if n % 2 else (ys[n // 2 - 1] + ys[n // 2]) / 2


if __name__ == "__main__":
    main()
