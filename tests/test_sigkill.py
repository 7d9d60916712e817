"""Killed at any moment (SIGKILL), a run loses at most the requests in flight (docs/design.md §5).

The real CLI runs in a subprocess against a scripted judge (or model) on 127.0.0.1 that counts requests on
the server side; it is killed with SIGKILL at five random moments of one run (re-running after each kill),
then a last run finishes: every row is graded (generated) exactly once, and the requests sent in all add up
to at most rows + concurrency × kills (only the requests in flight at a kill may be sent twice). Without the
journal (store/journal.py), the replies held in the grade writer's buffer die with the process and are
asked again. Only the public CLI is used, so the same file runs against an older checkout.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from mcqaudit.store import Study
from tests.helpers import judge_rows, process_env, write_jsonl
from tests.judge_servers import Call, Reply, ScriptedJudge, add_rows, heuristic

KILLS = 5
CONCURRENCY = 16


def kill_at_random_moments(cmd: list[str], srv: ScriptedJudge, rng: random.Random) -> tuple[int, list[str]]:
    """Start ``cmd`` KILLS times, SIGKILL each at a random moment after its first request reached the
    server; returns (kills that hit a live process, what was seen)."""
    kills, seen = 0, []
    for _ in range(KILLS):
        before = srv.count
        proc = subprocess.Popen(cmd, env=process_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while srv.count == before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.05, 0.9))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait(30)
        assert proc.stderr is not None
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        assert "Traceback" not in err, err
        seen.append(f"rc {proc.returncode}, {srv.count - before} requests")
    return kills, seen


def test_grade_killed_at_five_random_moments_loses_no_reply_that_arrived(tmp_path: Path) -> None:
    n = 1000
    db = tmp_path / "study.duckdb"
    add_rows(Study(db, create=True), judge_rows(n))
    seed = random.randrange(1 << 30)
    with ScriptedJudge(heuristic, latency_s=0.05) as srv:
        cmd = [sys.executable, "-m", "mcqaudit", "grade", "--db", str(db), "--judge-model", "scripted",
               "--judge-base-url", srv.base_url, "--concurrency", str(CONCURRENCY), "--quiet"]  # fmt: skip
        kills, seen = kill_at_random_moments(cmd, srv, random.Random(seed))
        last = subprocess.run(cmd + ["--json"], env=process_env(), capture_output=True, text=True, timeout=120)
        total = srv.count
    why = f"seed {seed}; runs: {seen}; last run: {last.stdout[-400:]} {last.stderr[-400:]}"
    assert last.returncode == 0, why
    assert kills >= 3, why  # most kills must hit a run in the middle (else the test proves little)
    study = Study(db)
    # every row graded exactly once, each prompt's reply stored once (replay never doubles a record)
    assert study.query("SELECT count(*), count(DISTINCT row_id) FROM judge_verdicts WHERE status = 'ok'") == [
        (n, n)
    ], why
    assert study.query("SELECT count(*), count(DISTINCT prompt_hash) FROM judge_replies") == [(n, n)], why
    assert total <= n + CONCURRENCY * kills, f"{total} requests for {n} rows; {why}"
    assert not db.with_name(db.name + ".journal").exists(), why  # nothing left over


def test_generate_killed_at_five_random_moments_loses_no_generation_that_arrived(tmp_path: Path) -> None:
    items = [
        {
            "item_id": f"q{i}",
            "question": f"Question {i}: which one?",
            "options": ["w", "x", "y", "z"],
            "gold": "A",
        }
        for i in range(125)
    ]
    prompts = tmp_path / "prompts.jsonl"
    orient = subprocess.run(
        [sys.executable, "-m", "mcqaudit", "orient", str(write_jsonl(tmp_path / "items.jsonl", items)),
         "--out", str(prompts)], env=process_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert orient.returncode == 0, orient.stderr
    n = 125 * 4 * 2  # 4 orientations, 2 samples
    out = tmp_path / "generations.jsonl"
    seed = random.randrange(1 << 30)

    def answer(call: Call) -> Reply:
        return Reply("A")

    with ScriptedJudge(answer, latency_s=0.05) as srv:
        cmd = [sys.executable, "-m", "mcqaudit", "generate", str(prompts), "--out", str(out), "--model", "m",
               "--base-url", srv.base_url, "--samples", "2", "--concurrency", str(CONCURRENCY),
               "--quiet"]  # fmt: skip
        kills, seen = kill_at_random_moments(cmd, srv, random.Random(seed))
        last = subprocess.run(cmd, env=process_env(), capture_output=True, text=True, timeout=120)
        total = srv.count
    why = f"seed {seed}; runs: {seen}; last run: {last.stderr[-400:]}"
    assert last.returncode == 0, why
    assert kills >= 3, why
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    keys = [(r["item_id"], r["orientation"], r["sample"]) for r in rows]
    assert len(keys) == len(set(keys)) == n, why
    assert total <= n + CONCURRENCY * kills, f"{total} requests for {n} rows; {why}"
