"""One timed arm of `bench_grade.py --against`, in a fresh process: the bare loop, or `grade()` from the
checkout at TREE (this one, or another: its own `mcqaudit` is imported). A warm-up run on a small study
comes first, as the in-process rounds after the first are warm. Prints one JSON line.

    python benchmarks/grade_child.py TREE bare|grade TEMPLATE WARM WORKDIR BASE_URL CONCURRENCY
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from pathlib import Path


def main() -> None:
    tree, mode, template, warm, work, base_url, conc = sys.argv[1:8]
    sys.path.insert(0, tree)
    import duckdb
    import openai

    from mcqaudit.app.grade import GradeOptions, grade
    from mcqaudit.judge.prompts import SYSTEM_PROMPT, JudgeConfig, render
    from mcqaudit.store import Study

    config = JudgeConfig(model="standin-heuristic")
    concurrency = int(conc)

    def rows_of(path: str) -> list[tuple[str, list[str], str]]:
        con = duckdb.connect(path, read_only=True)
        try:
            got = con.execute("SELECT question, options, generation FROM gen_rows ORDER BY row_id").fetchall()
        finally:
            con.close()
        return [(q, list(o), g) for q, o, g in got]

    async def bare(prompts: list[str]) -> float:  # as bench_grade.bare_loop: the client made before timing
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
        return elapsed

    def graded(src: str, tag: str) -> tuple[int, float, float]:
        db = Path(work) / f"{mode}-{tag}-{time.time_ns()}.duckdb"
        shutil.copy(src, db)
        study = Study(db)
        start, cpu = time.perf_counter(), time.process_time()
        summary = grade(study, GradeOptions(config, base_url=base_url, concurrency=concurrency))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        assert summary.errors == 0 and summary.graded == summary.targeted, summary.lines()
        return summary.graded, elapsed, cpu

    if mode == "bare":
        prompts = [render("extract", q, o, g) for q, o, g in rows_of(template)]
        asyncio.run(bare([render("extract", q, o, g) for q, o, g in rows_of(warm)]))
        cpu = time.process_time()
        elapsed = asyncio.run(bare(prompts))
        n, cpu = len(prompts), time.process_time() - cpu
    else:
        graded(warm, "warm")
        n, elapsed, cpu = graded(template, "timed")
    print(json.dumps({"rows": n, "elapsed_s": elapsed, "cpu_s": cpu}))


if __name__ == "__main__":
    main()
