"""What keeps a grade run from losing replies it received or paying for a prompt twice (issue 18,
docs/design.md §5): a full disk mid-run, two runs on one study, an endpoint that refuses every request, and a
read-only study. The real CLI runs in subprocesses against a scripted judge on 127.0.0.1 that counts the
requests it answers, so "nothing asked twice" is measured on the server.

The full-disk and read-only tests need root (they mount a real tmpfs) and skip cleanly without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcqaudit.standin.server import BatchKnobs, StandinServer
from mcqaudit.store import Study
from mcqaudit.vocab import STANDIN_MODEL
from tests.helpers import judge_rows, mounted_tmpfs, process_env
from tests.judge_servers import Action, Call, Reply, ScriptedJudge, Status, add_rows, heuristic

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
CONCURRENCY = 8


def grade_cmd(db: Path, url: str, *extra: str, model: str = "scripted") -> list[str]:
    return [sys.executable, "-m", "mcqaudit", "grade", "--db", str(db), "--judge-model", model,
            "--judge-base-url", url, "--concurrency", str(CONCURRENCY), "--quiet", *extra]  # fmt: skip


def run(cmd: list[str], timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=process_env(), capture_output=True, text=True, timeout=timeout)


def ok_once(study: Study, n: int) -> None:
    """Every row has exactly one ok verdict, and every prompt's reply is stored once."""
    assert study.query("SELECT count(*), count(DISTINCT row_id) FROM judge_verdicts WHERE status = 'ok'") == [
        (n, n)
    ]
    assert study.query("SELECT count(*), count(DISTINCT prompt_hash) FROM judge_replies") == [(n, n)]


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real 8 MB tmpfs (unmounted after the test)."""
    with mounted_tmpfs(tmp_path / "disk", "8m") as mnt:
        yield mnt


def fill(folder: Path, leave: int) -> Path:
    """A filler file that leaves about ``leave`` bytes free on ``folder``'s file system."""
    st = os.statvfs(folder)
    filler = folder / "filler"
    with filler.open("wb") as fh:
        fh.truncate(0)
        os.posix_fallocate(fh.fileno(), 0, max(st.f_bavail * st.f_frsize - leave, 0))
    return filler


# --- 1. a full disk mid-run -------------------------------------------------------------------------------


def test_a_full_disk_stops_sending_keeps_every_reply_and_the_rerun_pays_for_none_twice(tmpfs: Path) -> None:
    n = 2000
    db = tmpfs / "study.duckdb"
    add_rows(Study(db, create=True), judge_rows(n))
    filler = fill(tmpfs, 1_200_000)  # room for the journal's reserve and a few hundred replies, not 2,000
    with ScriptedJudge(heuristic, latency_s=0.01) as srv:
        first = run(grade_cmd(db, srv.base_url, "--json"))
        answered = srv.count
        why = f"{answered} requests; {first.stdout[-1500:]} {first.stderr[-1500:]}"
        assert first.returncode == 1, why
        assert "Traceback" not in first.stderr, why
        summary = json.loads(first.stdout)  # --json still prints its summary
        assert "no space left on the device" in summary["aborted"], why
        assert "\n" not in summary["aborted"], why  # one line
        assert "stopped sending" in summary["aborted"], why
        assert 0 < answered < n and summary["not_attempted"] > 0, why
        # it stopped at the first failed write: what it sent after is what was in flight then, at most
        assert answered - (summary["graded"] + summary["errors"]) <= CONCURRENCY, why
        assert summary["requests"] == answered, why

        filler.unlink()  # room again
        again = run(grade_cmd(db, srv.base_url, "--json"))
        total = srv.count
    why = f"{answered} then {total - answered} requests; {again.stdout[-1500:]} {again.stderr[-800:]}"
    assert again.returncode == 0, why
    # every reply the first run received was kept: the re-run asks only what it never got (and what was in
    # flight at the stop, at most)
    assert total <= n + CONCURRENCY, why
    ok_once(Study(db), n)
    assert not db.with_name(db.name + ".journal").exists(), why


def test_a_disk_without_room_for_the_journal_reserve_sends_nothing(tmpfs: Path) -> None:
    db = tmpfs / "study.duckdb"
    add_rows(Study(db, create=True), judge_rows(20))
    fill(tmpfs, 64 * 1024)
    with ScriptedJudge(heuristic) as srv:
        proc = run(grade_cmd(db, srv.base_url))
        assert srv.count == 0
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.strip()]
    assert line.startswith("error: ") and "no room for the journal" in line and "Nothing was sent" in line, line


# --- 2. two runs on one study -----------------------------------------------------------------------------


def test_two_grade_runs_on_one_study_pay_for_each_prompt_once(tmp_path: Path) -> None:
    n = 200
    db = tmp_path / "study.duckdb"
    add_rows(Study(db, create=True), judge_rows(n))
    second_waits = threading.Event()

    def answer(call: Call) -> Action:
        # held until the second run has said that it waits (however long a loaded machine takes to start it),
        # then quick: the first run cannot finish before the second reaches the lock
        reply = heuristic(call)
        return Reply(reply.text, until=second_waits) if isinstance(reply, Reply) else reply

    with ScriptedJudge(answer) as srv:
        first = subprocess.Popen(grade_cmd(db, srv.base_url, "--json"), env=process_env(), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 120
        while srv.count == 0 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        # the second starts while the first is sending
        second = subprocess.Popen(grade_cmd(db, srv.base_url, "--json"), env=process_env(), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert second.stderr is not None
        said = second.stderr.readline()  # its wait line; without the lock it sends instead, and ends
        second_waits.set()
        out1, err1 = first.communicate(timeout=180)
        out2, err2 = second.communicate(timeout=180)
        total = srv.count
    err2 = said + err2
    why = f"{total} requests for {n} prompts; first: {out1[-300:]} {err1[-300:]}; second: {out2[-600:]} {err2[-600:]}"
    assert first.returncode == 0 and second.returncode == 0, why
    assert total <= n + CONCURRENCY, why
    assert said.startswith(f"waiting for {db}: `mcqaudit grade` (pid {first.pid})"), why
    assert "no prompt is paid for twice" in said, why
    s2 = json.loads(out2)
    assert s2["targeted"] == 0 and s2["requests"] == 0, why  # it found the work done
    ok_once(Study(db), n)


def test_a_second_batch_run_waits_and_no_wait_refuses(tmp_path: Path) -> None:
    db = tmp_path / "study.duckdb"
    study = Study(db, create=True)
    add_rows(study, judge_rows(30))
    with StandinServer(batch=BatchKnobs(seconds=600.0)) as judge:  # sped up once the second run waits
        cmd = grade_cmd(db, judge.base_url, "--batch", "--poll-interval", "0.05", model=STANDIN_MODEL)
        first = subprocess.Popen(cmd, env=process_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and first.poll() is None:
            if study.query("SELECT count(*) FROM judge_batches WHERE batch_id IS NOT NULL")[0][0]:
                break
            time.sleep(0.02)
        second = subprocess.Popen(cmd, env=process_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert second.stderr is not None
        said = second.stderr.readline()
        refused = run([*cmd, "--no-wait"])
        judge.batch_knobs.seconds = 0.0
        out1, err1 = first.communicate(timeout=120)
        out2, err2 = second.communicate(timeout=120)
        stats = judge.batch_stats()
    why = f"first: {out1[-300:]} {err1[-300:]}; second: {out2[-600:]} {said}{err2[-600:]}; no-wait: {refused.stderr}"
    assert first.returncode == 0 and second.returncode == 0, why
    assert stats["batches_created"] == 1, why
    assert said.startswith(f"waiting for {db}: `mcqaudit grade` (pid {first.pid})"), why
    assert "0 submitted" in out2, why
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, why
    assert f"`mcqaudit grade` (pid {first.pid})" in refused.stderr and "--no-wait does not wait" in refused.stderr
    assert study.query("SELECT count(*) FROM judge_verdicts WHERE status = 'ok'") == [(30,)]


# --- 4. an endpoint that refuses every request ------------------------------------------------------------


def test_identical_refusals_stop_the_run_and_show_the_servers_reason(tmp_path: Path) -> None:
    n = 300
    db = tmp_path / "study.duckdb"
    add_rows(Study(db, create=True), judge_rows(n))
    key = "sk-mcqaudit-guard-4b1d9e"

    def refuse(call: Call) -> Status:
        return Status(400, f"Unsupported parameter: 'seed' (request from {call.authorization})")

    with ScriptedJudge(refuse) as srv:
        as_json = subprocess.run(grade_cmd(db, srv.base_url, "--json", "--judge-api-key-env", "GUARD_KEY"),
                                 env={**process_env(), "GUARD_KEY": key}, capture_output=True, text=True, timeout=120)  # fmt: skip
        sent = srv.count
        text = subprocess.run(grade_cmd(db, srv.base_url, "--judge-api-key-env", "GUARD_KEY"),
                              env={**process_env(), "GUARD_KEY": key}, capture_output=True, text=True, timeout=120)  # fmt: skip
    why = f"{sent} requests; {as_json.stdout[-1200:]} {as_json.stderr[-600:]}"
    assert as_json.returncode == 1 and text.returncode == 1, why
    assert sent <= 10 + CONCURRENCY, why  # ten refusals in a row, and what was in flight then
    s = json.loads(as_json.stdout)
    assert "HTTP 400" in s["aborted"] and "Unsupported parameter: 'seed'" in s["aborted"], why
    assert s["not_attempted"] >= n - 10 - CONCURRENCY and s["errors"] == sent, why
    assert any(
        line.startswith("stopped: ") and "Unsupported parameter: 'seed'" in line for line in text.stdout.splitlines()
    ), text.stdout
    for out in (as_json.stdout, as_json.stderr, text.stdout, text.stderr):
        assert key not in out
    assert "[redacted]" in s["aborted"]  # the server echoed the key: shown scrubbed
    study = Study(db)
    # refused rows are errors with the server's reason; the rest stay pending, for a re-run
    assert study.query("SELECT count(*) FROM graded_rows WHERE judge_status = 'pending'")[0][0] >= n - 2 * sent


def test_refusals_that_differ_or_alternate_with_replies_do_not_stop_the_run(tmp_path: Path) -> None:
    n = 60
    db = tmp_path / "study.duckdb"
    add_rows(Study(db, create=True), judge_rows(n))

    def some(call: Call):
        return Status(400, f"prompt {call.index} refused") if call.index % 2 == 0 else heuristic(call)

    with ScriptedJudge(some) as srv:
        proc = run(grade_cmd(db, srv.base_url, "--json"))
        assert srv.count == n
    assert proc.returncode == 3, proc.stdout + proc.stderr  # some rows in error, none left unsent
    assert json.loads(proc.stdout)["not_attempted"] == 0


# --- 5. a read-only study ---------------------------------------------------------------------------------


def test_grade_no_judge_on_a_read_only_study_is_one_clear_line(tmpfs: Path) -> None:
    db = tmpfs / "study.duckdb"
    add_rows(Study(db, create=True), judge_rows(5))
    remount = subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], capture_output=True)
    if remount.returncode != 0:
        pytest.skip(f"cannot remount the tmpfs read-only: {remount.stderr.decode(errors='replace').strip()}")
    for extra in (["--no-judge"], ["--judge-model", "m", "--judge-base-url", "http://127.0.0.1:9/v1"]):
        proc = run([sys.executable, "-m", "mcqaudit", "grade", "--db", str(db), *extra])
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        (line,) = [x for x in proc.stderr.splitlines() if x.strip()]
        assert line == f"error: {db}: the study file is read-only (file, folder or disk): nothing can be written to it"


def test_a_full_disk_during_grade_batch_is_one_line_and_the_rerun_collects(tmpfs: Path) -> None:
    """A batch run whose disk fills while it records what the provider returned ends with one line naming the
    study and the OS's reason (never DuckDB's `TransactionException`), and once there is room a re-run
    collects the batch it submitted instead of submitting again."""
    n = 2000
    db = tmpfs / "study.duckdb"
    add_rows(Study(db, create=True), judge_rows(n))
    filler = fill(tmpfs, 900_000)
    with StandinServer() as judge:
        cmd = grade_cmd(db, judge.base_url, "--batch", "--poll-interval", "0.05", model=STANDIN_MODEL)
        first = run(cmd)
        why = f"{first.stdout[-800:]} {first.stderr[-1500:]}"
        assert first.returncode == 1 and "Traceback" not in first.stderr, why
        lines = [x for x in first.stderr.splitlines() if x.strip() and x.startswith("error:")]
        assert len(lines) == 1 and "no space left on the device" in lines[0], why
        assert "TransactionException" not in first.stderr, why
        filler.unlink()
        again = run(cmd)
        stats = judge.batch_stats()
    why = f"{again.stdout[-800:]} {again.stderr[-800:]}; {stats}"
    assert again.returncode == 0, why
    assert Study(db).query("SELECT count(*) FROM judge_verdicts WHERE status = 'ok'") == [(n,)], why
