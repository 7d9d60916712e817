"""`grade --batch` (docs/design.md §5 "Batch mode"): the stand-in judge's Batch API on 127.0.0.1 through the real
`openai` client, a real DuckDB file, and the real `mcqaudit` command in a subprocess where exit codes, output
and SIGKILL matter. Batches are counted on the server, so "nothing resubmitted" is measured, not assumed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from mcqaudit.app.grade import GradeOptions, grade, grade_batch
from mcqaudit.grade.batch import BatchJudge, BatchOptions, _split
from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.standin.server import BatchKnobs, StandinServer
from mcqaudit.store import Study
from mcqaudit.store import batches as batch_store
from mcqaudit.store.batches import BatchLine
from mcqaudit.vocab import STANDIN_MODEL
from tests.judge_servers import add_rows

OPTIONS = ["the Seine", "the Thames", "the Danube", "the Tiber"]
GENERATIONS = [
    "I'd go with the Seine.",
    "The Thames, surely.",
    "No idea, sorry.",
    "It is the Danube.",
    "Answer: D",
    "Probably the Tiber, or maybe the Seine.",
]
FAST = BatchOptions(poll_interval_s=0.02, poll_max_s=0.1)
VERDICT_COLS = "row_id, fingerprint, status, letter, verdict, reply, rationale, prompt_hash"


def rows(n: int, arm: str = "base", prefix: str = "r") -> list[dict]:
    """``n`` rows; every sixth shares its generation with an earlier row of another item (a shared prompt)."""
    out = []
    for i in range(n):
        gen = GENERATIONS[i % len(GENERATIONS)] + ("" if i % 6 == 5 else f" (take {i})")
        out.append(
            dict(
                row_id=f"{prefix}{i:03d}",
                arm=arm,
                item_id=f"i{i:03d}",
                question="Which river flows through Paris?",
                options=OPTIONS,
                generation=gen,
            )
        )
    return out


def prompts(n: int) -> int:
    """Distinct prompts among ``rows(n)`` (they differ only by generation)."""
    return len({r["generation"] for r in rows(n)})


def options(url: str, **kw) -> GradeOptions:
    base = dict(base_url=url, timeout_s=10.0, max_retries=2, backoff_base_s=0.01, flush_interval_s=0.05)
    base.update(kw)
    return GradeOptions(JudgeConfig(model=STANDIN_MODEL), **base)  # type: ignore[arg-type]


def verdicts(study: Study) -> list[tuple]:
    return study.query(f"SELECT {VERDICT_COLS} FROM judge_verdicts ORDER BY row_id")


def env(**extra: str) -> dict:
    e = {k: v for k, v in os.environ.items() if k not in ("MCQAUDIT_JUDGE_MODEL", "MCQAUDIT_JUDGE_BASE_URL")}
    e.update(extra)
    return e


def batch_cli(study: Study, url: str, *extra: str, **environ: str) -> subprocess.CompletedProcess:
    cmd = [
        "grade",
        "--db",
        str(study.path),
        "--judge-model",
        STANDIN_MODEL,
        "--judge-base-url",
        url,
        "--batch",
    ]
    return subprocess.run(
        [sys.executable, "-m", "mcqaudit", *cmd, "--poll-interval", "0.05", *extra],
        capture_output=True,
        text=True,
        env=env(**environ),
        timeout=120,
    )


# --- the stand-in's Batch API, as OpenAI publishes it ---------------------------------------------------------


def _line(cid: str, user: str, url: str = "/v1/chat/completions") -> bytes:
    body = {"model": STANDIN_MODEL, "messages": [{"role": "user", "content": user}], "temperature": 0}
    return (json.dumps({"custom_id": cid, "method": "POST", "url": url, "body": body}) + "\n").encode()


def _wait(client: openai.OpenAI, batch_id: str, timeout_s: float = 20) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        b = client.batches.retrieve(batch_id)
        if b.status in ("completed", "failed", "expired", "cancelled"):
            return b
        time.sleep(0.02)
    raise AssertionError(f"batch {batch_id} did not finish")


def test_standin_batch_api_follows_the_published_shapes(study: Study) -> None:
    from mcqaudit.grade.plan import plan_requests
    from mcqaudit.store.judging import select_rows

    add_rows(study, rows(24))
    config = JudgeConfig(model=STANDIN_MODEL)
    requests = plan_requests(config, select_rows(study, config.fingerprint)[0]).requests
    with StandinServer(batch=BatchKnobs(fail_rate=0.25, seed=3)) as judge:
        client = openai.OpenAI(base_url=judge.base_url, api_key="x", max_retries=0)
        data = b"".join(_line(r.prompt_hash, r.user) for r in requests) + _line("not-a-judge-prompt", "hello")
        f = client.files.create(file=("in.jsonl", data), purpose="batch")
        assert (f.object, f.purpose, f.bytes) == ("file", "batch", len(data))
        assert client.files.content(f.id).content == data
        created = client.batches.create(
            input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert created.status == "validating" and created.input_file_id == f.id
        b = _wait(client, created.id)
        assert b.status == "completed" and b.completed_at and b.finalizing_at and b.in_progress_at  # type: ignore[attr-defined]
        counts = b.request_counts  # type: ignore[attr-defined]
        out = [json.loads(x) for x in client.files.content(b.output_file_id).text.splitlines()]  # type: ignore[attr-defined]
        err = [json.loads(x) for x in client.files.content(b.error_file_id).text.splitlines()]  # type: ignore[attr-defined]
        assert (counts.total, counts.completed, counts.failed) == (len(requests) + 1, len(out), len(err))
        assert {o["custom_id"] for o in out} | {e["custom_id"] for e in err} == {
            *(r.prompt_hash for r in requests),
            "not-a-judge-prompt",
        }
        assert all(o["response"]["status_code"] == 200 and o["error"] is None for o in out)
        assert all(
            o["response"]["body"]["object"] == "chat.completion" and o["response"]["request_id"] for o in out
        )
        codes = {e["custom_id"]: e["response"]["status_code"] for e in err}
        assert codes.pop("not-a-judge-prompt") == 400 and set(codes.values()) == {500}  # injected failures
        order = [r.prompt_hash for r in requests if r.prompt_hash in {o["custom_id"] for o in out}]
        assert [o["custom_id"] for o in out] != order  # output order is not input order
        assert judge.batch_stats()["lines_failed"] == len(err)

        # a line for another endpoint fails the batch's validation, with the line named
        f2 = client.files.create(file=("bad.jsonl", _line("x", "hi", url="/v1/embeddings")), purpose="batch")
        bad = _wait(
            client,
            client.batches.create(
                input_file_id=f2.id, endpoint="/v1/chat/completions", completion_window="24h"
            ).id,
        )
        assert bad.status == "failed" and bad.errors.data[0].line == 1  # type: ignore[attr-defined]
        # expiry: half the lines run, the rest are in the error file as batch_expired
        judge.batch_knobs.expire, judge.batch_knobs.fail_rate = True, 0.0
        exp = _wait(
            client,
            client.batches.create(
                input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h"
            ).id,
        )
        assert exp.status == "expired"  # type: ignore[attr-defined]
        lines = [json.loads(x) for x in client.files.content(exp.error_file_id).text.splitlines()]  # type: ignore[attr-defined]
        expired = [x for x in lines if x["response"] is None]
        assert len(expired) == (len(requests) + 1) - (len(requests) + 1) // 2
        assert {x["error"]["code"] for x in expired} == {"batch_expired"}
        # cancel, list, unknown ids
        judge.batch_knobs.expire, judge.batch_knobs.seconds = False, 5.0
        slow = client.batches.create(
            input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        time.sleep(0.1)
        assert client.batches.cancel(slow.id).status in ("cancelling", "cancelled")
        assert _wait(client, slow.id).status == "cancelled"  # type: ignore[attr-defined]
        listed = [b.id for b in client.batches.list(limit=2)]
        assert listed[0] == slow.id and len(listed) == 4
        with pytest.raises(openai.NotFoundError):
            client.batches.retrieve("batch-nope")
        with pytest.raises(urllib.error.HTTPError) as no_key:
            urllib.request.urlopen(f"{judge.base_url}/batches/{slow.id}", timeout=10)
        assert no_key.value.code == 401


# --- batch grading ----------------------------------------------------------------------------------------------


def test_batch_grading_equals_online_grading(tmp_path: Path) -> None:
    online = Study(tmp_path / "online.duckdb", create=True)
    add_rows(
        online,
        rows(36)
        + [
            dict(row_id="blank", options=OPTIONS, generation="  "),
            dict(row_id="strict", options=OPTIONS, generation="B", strict_letter="B"),
        ],
    )
    shutil.copy(online.path, tmp_path / "batch.duckdb")
    batched = Study(tmp_path / "batch.duckdb")
    with StandinServer(batch=BatchKnobs(seconds=0.2)) as judge:
        on = grade(online, options(judge.base_url))
        summary = grade_batch(batched, options(judge.base_url), FAST)
        assert judge.batch_stats()["batches_created"] == 1
    assert on.exit_code == summary.exit_code == 0
    assert (
        (summary.graded, summary.errors, summary.targeted)
        == (on.graded, on.errors, on.targeted)
        == (36, 0, 36)
    )
    assert summary.prompts_sent == on.prompts_sent and summary.shared == on.shared > 0
    assert verdicts(batched) == verdicts(online)  # same verdicts, replies, fingerprint and prompt hashes
    graded = "SELECT row_id, judge_status, final_verdict, judge_fingerprint FROM graded_rows ORDER BY row_id"
    assert batched.query(graded) == online.query(graded)
    assert summary.standin and batched.query("SELECT standin FROM judge_configs") == [(True,)]
    assert batched.query("SELECT count(*) FROM judge_replies") == online.query(
        "SELECT count(*) FROM judge_replies"
    )


def test_split_at_max_lines_and_bytes(study: Study) -> None:
    add_rows(study, rows(30))  # 26 distinct prompts (every sixth row shares one)
    assert prompts(30) == 26
    with StandinServer() as judge:
        summary = grade_batch(study, options(judge.base_url), BatchOptions(max_lines=7, poll_interval_s=0.02))
        stats = judge.batch_stats()
    assert summary.exit_code == 0 and summary.graded == 30
    assert stats["batches_created"] == len(summary.submitted) == 4 and stats["lines"] == 26
    assert study.query("SELECT lines FROM judge_batches ORDER BY submitted_at") == [(7,), (7,), (7,), (5,)]
    assert study.query("SELECT count(*) FROM judge_batches WHERE collected_at IS NULL") == [(0,)]
    # bytes: the size limit splits too, and a line longer than the limit goes alone
    items = [(BatchLine(str(i), str(i), 4), b"x" * n) for i, n in enumerate([40, 40, 40, 200, 10])]
    assert [len(c) for c in _split(items, 50_000, 100)] == [2, 1, 1, 1]
    assert [len(c) for c in _split(items, 2, 10_000)] == [2, 2, 1]
    # ... a chunk at a time: a run holds one file's lines, never every line (770 MB at 1 M rows)
    encoded: list[int] = []

    def lines() -> Iterator[tuple[BatchLine, bytes]]:
        for i in range(10):
            encoded.append(i)
            yield BatchLine(str(i), str(i), 4), b"x" * 40

    chunks = _split(lines(), 2, 10_000)
    assert len(next(chunks)) == 2 and len(encoded) <= 3
    assert len(next(chunks)) == 2 and len(encoded) <= 5


def test_sigkill_after_submit_then_rerun_resumes_polling_without_resubmitting(study: Study) -> None:
    add_rows(study, rows(20))
    with StandinServer(batch=BatchKnobs(seconds=30.0)) as judge:
        cmd = [
            sys.executable,
            "-m",
            "mcqaudit",
            "grade",
            "--db",
            str(study.path),
            "--judge-model",
            STANDIN_MODEL,
            "--judge-base-url",
            judge.base_url,
            "--batch",
            "--poll-interval",
            "0.05",
            "--quiet",
        ]
        log = study.path.with_name("grade.log").open("w+")
        proc = subprocess.Popen(cmd, env=env(), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if study.query("SELECT count(*) FROM judge_batches WHERE batch_id IS NOT NULL")[0][0]:
                break
            time.sleep(0.02)
        log.seek(0)
        assert proc.poll() is None, f"grade --batch ended before it was killed: {log.read()}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
        assert proc.returncode == -signal.SIGKILL
        assert judge.batch_stats()["batches_created"] == 1
        assert study.query("SELECT count(*) FROM judge_verdicts") == [(0,)]  # killed while waiting
        judge.batch_knobs.seconds = 0.0
        again = batch_cli(study, judge.base_url, "--quiet")
        assert again.returncode == 0, again.stderr
        stats = judge.batch_stats()
    assert (stats["batches_created"], stats["files_created"] - stats["by_status"]["completed"]) == (1, 1)
    assert study.query("SELECT count(*), count(DISTINCT row_id) FROM judge_verdicts WHERE status = 'ok'") == [
        (20, 20)
    ]
    assert "1 collected" in again.stdout and "0 submitted" in again.stdout


def test_crash_between_upload_and_create_or_before_the_id_was_recorded(study: Study) -> None:
    """The two narrower windows: the submission is recorded, but the batch was never created (created from the
    uploaded file, not uploaded again), or was created but its id never recorded (found by its input file)."""
    import asyncio

    from mcqaudit.grade.plan import plan_requests
    from mcqaudit.store.judging import select_rows

    add_rows(study, rows(12))
    config = JudgeConfig(model=STANDIN_MODEL)
    reqs = plan_requests(config, select_rows(study, config.fingerprint)[0]).requests
    half = len(reqs) // 2

    async def upload(part, create: bool) -> None:
        async with BatchJudge(config, api_key="x", base_url=judge.base_url) as bj:
            data = b"".join(_line(r.prompt_hash, r.user) for r in part)
            fid = await bj.upload(data, 30)
            lines = [BatchLine(r.prompt_hash, r.prompt_hash, r.n_options) for r in part]
            batch_store.record_upload(
                study,
                input_file_id=fid,
                fingerprint=config.fingerprint,
                base_url=bj.base_url,
                lines=lines,
                size=len(data),
            )
            if create:
                await bj.create(fid, config.fingerprint)  # ... and the process died before recording the id

    with StandinServer() as judge:
        asyncio.run(upload(reqs[:half], create=False))
        asyncio.run(upload(reqs[half:], create=True))
        assert judge.batch_stats()["batches_created"] == 1
        summary = grade_batch(study, options(judge.base_url), FAST)
        stats = judge.batch_stats()
    assert summary.exit_code == 0 and summary.graded == 12 and summary.prompts_sent == 0
    assert stats["batches_created"] == 2 and stats["lines"] == len(reqs)  # one created now, one found
    assert stats["files_created"] == 2 + 2  # two inputs, two outputs: nothing uploaded again


def test_failed_and_expired_lines_are_error_rows_and_a_rerun_resubmits_only_those(study: Study) -> None:
    add_rows(study, rows(40))
    with StandinServer(batch=BatchKnobs(fail_rate=0.3, seed=7)) as judge:
        first = grade_batch(study, options(judge.base_url), FAST)
        failed = judge.batch_stats()["lines_failed"]
        assert failed > 0 and first.exit_code == 3
        err = study.query("SELECT row_id, error, reply FROM judge_verdicts WHERE status = 'error'")
        assert len(err) == first.errors >= failed
        assert all(e[1].startswith("server_error: HTTP 500") and e[2] is None for e in err)
        assert first.errors_by_kind == {"server_error": first.errors}
        ok_before = verdicts(study)

        judge.batch_knobs.fail_rate, judge.batch_knobs.expire = 0.0, True
        second = grade_batch(study, options(judge.base_url), FAST)
        stats = judge.batch_stats()
        assert stats["lines"] == prompts(40) + failed  # only the failed prompts were sent again
        expired = stats["lines_expired"]
        assert expired > 0 and second.exit_code == 3 and second.errors_by_kind.keys() == {"batch_expired"}
        assert (
            "completion window expired"
            in study.query("SELECT error FROM judge_verdicts WHERE status = 'error' LIMIT 1")[0][0]
        )

        judge.batch_knobs.expire = False
        third = grade_batch(study, options(judge.base_url), FAST)
        assert judge.batch_stats()["lines"] == stats["lines"] + expired
    assert third.exit_code == 0 and third.errors == 0
    ok_rows = {r[0]: r for r in ok_before if r[2] == "ok"}
    now = {r[0]: r for r in verdicts(study)}
    assert all(now[k] == v for k, v in ok_rows.items())  # an ok verdict is never rewritten
    assert study.query("SELECT count(*) FROM judge_verdicts WHERE status = 'ok'") == [(40,)]


def test_a_cancelled_batch_keeps_what_ran_and_its_other_rows_are_errors(study: Study) -> None:
    add_rows(study, rows(30))
    with StandinServer(batch=BatchKnobs(seconds=60)) as judge:
        sub = grade_batch(study, options(judge.base_url), BatchOptions(wait=False))
        (batch_id,) = sub.still_open
        client = openai.OpenAI(base_url=judge.base_url, api_key="x", max_retries=0)
        deadline = time.monotonic() + 30
        while client.batches.retrieve(batch_id).request_counts.completed < 1:  # type: ignore[union-attr]
            assert time.monotonic() < deadline
            time.sleep(0.02)
        client.batches.cancel(batch_id)
        summary = grade_batch(study, options(judge.base_url), FAST)
        ran = client.batches.retrieve(batch_id).request_counts.completed  # type: ignore[union-attr]
    assert summary.exit_code == 3 and summary.statuses == {"cancelled": 1} and 0 < ran < prompts(30)
    assert set(summary.errors_by_kind) == {"batch_cancelled"}
    ok = study.query("SELECT count(DISTINCT prompt_hash) FROM judge_verdicts WHERE status = 'ok'")[0][0]
    assert ok == ran


def test_a_refused_batch_gives_error_rows_that_a_rerun_sends_again(study: Study) -> None:
    add_rows(study, rows(8))
    with StandinServer(batch=BatchKnobs(refuse_create=True)) as judge:
        refused = grade_batch(study, options(judge.base_url), FAST)
        assert refused.exit_code == 3 and refused.errors_by_kind == {"batch_refused": 8}
        assert "HTTP 400" in study.query("SELECT error FROM judge_verdicts LIMIT 1")[0][0]
        assert study.query("SELECT count(*) FROM judge_batches WHERE collected_at IS NULL") == [(0,)]
        judge.batch_knobs.refuse_create = False
        again = grade_batch(study, options(judge.base_url), FAST)
        assert judge.batch_stats()["batches_created"] == 1
    assert again.exit_code == 0 and again.graded == 8


def test_an_endpoint_without_the_batch_api_stops_the_run_with_a_reason(study: Study) -> None:
    from tests.judge_servers import ScriptedJudge, heuristic

    add_rows(study, rows(3))
    with ScriptedJudge(heuristic) as srv:  # chat completions only: /v1/files is a 404
        summary = grade_batch(study, options(srv.base_url), FAST)
    assert summary.exit_code == 1 and "Batch API" in (summary.aborted or "")
    assert study.query("SELECT count(*) FROM judge_batches") == [(0,)]


def test_a_batch_that_fails_validation_or_is_lost_gives_error_rows(study: Study) -> None:
    add_rows(study, rows(6))
    with StandinServer(batch=BatchKnobs(fail_validation=True)) as judge:
        summary = grade_batch(study, options(judge.base_url), FAST)
    assert summary.exit_code == 3 and summary.errors_by_kind == {"batch_failed": 6}
    assert "Validation failed" in study.query("SELECT error FROM judge_batches")[0][0]
    # the server is gone and a new one does not know the open batch: its rows are errors, then resubmitted
    with StandinServer(batch=BatchKnobs(seconds=30)) as judge:
        grade_batch(study, options(judge.base_url), BatchOptions(wait=False))
    with StandinServer() as judge:
        lost = grade_batch(study, options(judge.base_url), FAST)
        assert lost.errors_by_kind == {"batch_lost": 6} and judge.batch_stats()["batches_created"] == 0
        again = grade_batch(study, options(judge.base_url), FAST)
    assert again.exit_code == 0 and again.graded == 6


def test_no_wait_submits_and_exits_0_then_a_later_run_collects(study: Study) -> None:
    add_rows(study, rows(12))
    with StandinServer(batch=BatchKnobs(seconds=30)) as judge:
        sub = batch_cli(study, judge.base_url, "--no-wait")
        assert sub.returncode == 0, sub.stderr
        (batch_id,) = [r[0] for r in study.query("SELECT batch_id FROM judge_batches")]
        assert batch_id in sub.stdout and "still running: 1 batches" in sub.stdout
        assert study.query("SELECT DISTINCT judge_status FROM graded_rows") == [("pending",)]
        again = batch_cli(study, judge.base_url, "--no-wait", "--json")  # nothing new sent meanwhile
        assert again.returncode == 0 and json.loads(again.stdout)["batch"]["open"] == [batch_id]
        judge.batch_knobs.seconds = 0.0
        done = batch_cli(study, judge.base_url, "--json")
        assert done.returncode == 0, done.stderr
        stats = judge.batch_stats()
    summary = json.loads(done.stdout)
    assert (
        summary["batch"]["collected"] == [batch_id] and summary["graded"] == 12 and summary["exit_code"] == 0
    )
    assert stats["batches_created"] == 1
    assert study.query("SELECT DISTINCT judge_status FROM graded_rows") == [("ok",)]


def test_cache_and_ok_rows_are_honoured(study: Study) -> None:
    add_rows(study, rows(12, arm="a", prefix="a") + rows(12, arm="b", prefix="b"))  # b repeats a's prompts
    with StandinServer() as judge:
        grade(study, options(judge.base_url, arms=("a",)))
        b = grade_batch(study, options(judge.base_url, arms=("b",)), FAST)
        assert judge.batch_stats()["batches_created"] == 0  # every prompt already had a legal reply
        assert (b.graded, b.from_cache, b.prompts_sent) == (12, 12, 0)
        with study.write() as con:
            con.execute(
                "DELETE FROM judge_replies WHERE prompt_hash IN "
                "(SELECT prompt_hash FROM judge_verdicts WHERE row_id IN ('a000', 'a001'))"
            )
            con.execute(
                "UPDATE judge_verdicts SET status = 'error', letter = NULL, verdict = NULL "
                "WHERE row_id IN ('a000', 'a001')"
            )
        again = grade_batch(study, options(judge.base_url), FAST)
        stats = judge.batch_stats()
    # error rows without a cached reply are resubmitted; ok rows are skipped
    assert (again.targeted, again.already_ok, again.prompts_sent, stats["lines"]) == (2, 22, 2, 2)
    assert again.graded == 2 and again.exit_code == 0


def test_cli_key_never_echoed_and_usage_errors(study: Study, tmp_path: Path) -> None:
    key = "sk-mcqaudit-batch-test-5e2d8a"
    add_rows(study, rows(8))
    with StandinServer(batch=BatchKnobs(fail_rate=0.5, seed=1)) as judge:
        proc = batch_cli(study, judge.base_url, "--judge-api-key-env", "MCQ_BATCH_KEY", MCQ_BATCH_KEY=key)
        denied = batch_cli(
            study,
            "http://127.0.0.1:9/v1",
            "--judge-api-key-env",
            "MCQ_BATCH_KEY",
            "--max-retries",
            "0",
            MCQ_BATCH_KEY=key,
        )
    assert proc.returncode == 3 and "re-run" in proc.stdout
    assert (
        denied.returncode == 1 and "could not connect" in denied.stdout and "Traceback" not in denied.stderr
    )
    for p in (proc, denied):
        assert key not in p.stdout + p.stderr
    for f in tmp_path.iterdir():
        if f.name.startswith("study.duckdb"):
            assert key.encode() not in f.read_bytes(), f.name
    plain = [
        sys.executable,
        "-m",
        "mcqaudit",
        "grade",
        "--db",
        str(study.path),
        "--judge-model",
        STANDIN_MODEL,
    ]
    for extra in (
        ["--no-wait"],
        ["--batch", "--batch-max-lines", "0"],
        ["--batch", "--poll-interval", "0"],
        ["--batch", "--batch-max-lines", "50001"],
    ):
        bad = subprocess.run(
            [*plain, "--judge-base-url", "http://127.0.0.1:9/v1", *extra],
            capture_output=True,
            text=True,
            env=env(),
            timeout=60,
        )
        assert bad.returncode == 2 and "error:" in bad.stderr and "Traceback" not in bad.stderr, extra
    helptext = subprocess.run([*plain[:4], "--help"], capture_output=True, text=True, env=env(), timeout=60)
    assert all(f in helptext.stdout for f in ("--batch", "--no-wait", "--batch-max-lines", "--poll-interval"))


# --- what `info` and `grade --dry-run --batch` say about batches ---------------------------------------------


def info_cli(study: Study) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mcqaudit", "info", "--db", str(study.path)],
        capture_output=True,
        text=True,
        env=env(COLUMNS="200"),
        timeout=60,
    )


def test_info_lists_open_batches_and_counts_collected_ones(study: Study) -> None:
    from mcqaudit.grade.plan import plan_requests
    from mcqaudit.store.judging import select_rows

    add_rows(study, rows(12))
    assert "batches:" not in info_cli(study).stdout  # no batch yet: no section
    config = JudgeConfig(model=STANDIN_MODEL)
    reqs = plan_requests(config, select_rows(study, config.fingerprint)[0]).requests
    with StandinServer(batch=BatchKnobs(seconds=60)) as judge:
        sub = grade_batch(study, options(judge.base_url, limit=6), BatchOptions(wait=False, max_lines=4))
        assert len(sub.still_open) == 2
        # a submission whose batch was never created (a crash between upload and create)
        batch_store.record_upload(
            study,
            input_file_id="file-never-created",
            fingerprint=config.fingerprint,
            base_url=judge.base_url,
            lines=[BatchLine(r.prompt_hash, r.prompt_hash, r.n_options) for r in reqs[-3:]],
            size=123,
        )
        shown = info_cli(study)
        assert shown.returncode == 0, shown.stderr
        out = shown.stdout
        assert "batches: 3 open (9 lines), 0 collected" in out and "grade --batch" in out
        lines = {ln.split()[0]: ln for ln in out.splitlines() if "provider status" in ln}
        assert set(lines) == {*sub.still_open, "not"}, out
        for bid, n in zip(sub.still_open, (4, 2), strict=True):
            assert f"model {STANDIN_MODEL}, {n} lines, provider status in_progress, submitted " in lines[bid]
            assert " s ago)" in lines[bid]
        assert "not yet created (uploaded file file-never-created)" in lines["not"]
        assert "3 lines, provider status uploaded" in lines["not"]

        judge.batch_knobs.seconds = 0.0
        done = grade_batch(study, options(judge.base_url), FAST)  # the made-up file is refused: error rows
        assert done.statuses["refused"] == 1 and not done.still_open
    closed = info_cli(study).stdout
    assert (
        f"batches: none open; {sum(done.statuses.values())} collected" in closed
        and "provider status" not in closed
    )


def test_dry_run_batch_plans_submissions_and_polls_and_sends_nothing(study: Study) -> None:
    from mcqaudit.grade.batch import batch_dry_run

    add_rows(study, rows(30))  # 26 distinct prompts
    with StandinServer() as judge:
        assert grade(study, options(judge.base_url, limit=6)).graded == 6  # 6 prompts now cached
    slow = StandinServer(batch=BatchKnobs(seconds=60))
    with slow:
        first = grade_batch(study, options(slow.base_url, limit=10), BatchOptions(wait=False, max_lines=3))
        open_ids = first.still_open
        assert len(open_ids) >= 2 and first.prompts_sent > 0
        before = {
            t: study.query(f"SELECT * FROM {t} ORDER BY ALL")
            for t in ("judge_batches", "judge_batch_lines", "judge_verdicts", "judge_replies")
        }

        with StandinServer() as quiet:
            proc = subprocess.run(
                [
                    sys.executable, "-m", "mcqaudit", "grade", "--db", str(study.path),
                    "--judge-model", STANDIN_MODEL, "--judge-base-url", quiet.base_url,
                    "--batch", "--dry-run", "--batch-max-lines", "7",
                ],
                capture_output=True,
                text=True,
                env=env(COLUMNS="200"),
                timeout=60,
            )  # fmt: skip
            assert quiet.stats()["requests"] == 0
            assert {k: v for k, v in quiet.batch_stats().items() if k != "by_status"} == dict.fromkeys(
                ("files_created", "batches_created", "lines", "lines_failed", "lines_expired"), 0
            )
        assert proc.returncode == 0, proc.stderr
        after = {t: study.query(f"SELECT * FROM {t} ORDER BY ALL") for t in before}
        assert after == before  # nothing written

        plan = batch_dry_run(study, options(slow.base_url), BatchOptions(max_lines=7))
        open_prompts = len(batch_store.open_prompt_hashes(study, plan.plan.fingerprint))
        assert plan.prompts == 26 - 6 - open_prompts > 0 and plan.plan.targeted == 30 - plan.plan.already_ok
        assert [sub.batch_id for sub in plan.open] == open_ids
        out = proc.stdout
        assert f"{plan.waiting} waiting on batches still open" in out and plan.waiting > 0
        assert (
            f"batch mode: a run would submit {plan.prompts} prompts in {len(plan.batches)} batches "
            "(at most 7 lines / 100 MB each): " + ", ".join(str(n) for n, _ in plan.batches) + " lines"
        ) in out
        assert f"it would first poll {len(open_ids)} open batches" in out
        assert all(f"  {bid}  " in out for bid in open_ids) and "sending" not in out

        # the plan is what a real run does: the same prompts, batches, lines and bytes
        real = grade_batch(study, options(slow.base_url), BatchOptions(wait=False, max_lines=7))
        new = study.query(
            "SELECT lines, bytes FROM judge_batches WHERE batch_id IN (SELECT unnest(?)) ORDER BY submitted_at",
            [real.submitted],
        )
    assert real.prompts_sent == plan.prompts and [tuple(r) for r in new] == plan.batches


def test_an_endpoint_without_batch_listing_neither_fails_nor_keeps_answered_submissions_open(study: Study) -> None:
    """An endpoint that serves the Batch API but not ``GET /v1/batches`` (issue 18): a submission left by a
    crash between upload and create is created from its uploaded file instead of failing every re-run with
    "listing batches: HTTP 404"; and one whose rows were all graded meanwhile (online) is closed, not created,
    polled or listed as open."""
    import asyncio

    from mcqaudit.grade.plan import plan_requests
    from mcqaudit.store.judging import select_rows

    add_rows(study, rows(12))
    config = JudgeConfig(model=STANDIN_MODEL)
    reqs = plan_requests(config, select_rows(study, config.fingerprint)[0]).requests

    async def upload_only(judge_url: str) -> str:  # ... and the process died before batches.create
        async with BatchJudge(config, api_key="x", base_url=judge_url) as bj:
            data = b"".join(_line(r.prompt_hash, r.user) for r in reqs)
            fid = await bj.upload(data, 30)
            batch_store.record_upload(
                study,
                input_file_id=fid,
                fingerprint=config.fingerprint,
                base_url=bj.base_url,
                lines=[BatchLine(r.prompt_hash, r.prompt_hash, r.n_options) for r in reqs],
                size=len(data),
            )
            return fid

    with StandinServer(batch=BatchKnobs(list_batches=False)) as judge:
        client = openai.OpenAI(base_url=judge.base_url, api_key="x", max_retries=0)
        with pytest.raises(openai.NotFoundError):
            client.batches.list()  # the route really is missing
        # 1. graded online meanwhile: the submission is closed, nothing is created
        asyncio.run(upload_only(judge.base_url))
        online = grade(study, options(judge.base_url))
        assert online.exit_code == 0 and online.graded == 12
        again = batch_cli(study, judge.base_url)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "closed without collecting: 1 open submissions" in again.stdout, again.stdout
        assert judge.batch_stats()["batches_created"] == 0
        shown = info_cli(study).stdout
        assert "batches: none open; 1 collected" in shown, shown
        assert batch_cli(study, judge.base_url).returncode == 0  # and every later run is quiet too

        # 2. rows still waiting: created from the uploaded file (no listing), collected, nothing uploaded again
        with study.write() as con:
            con.execute("DELETE FROM judge_verdicts")
            con.execute("DELETE FROM current_judge")
            con.execute("DELETE FROM judge_replies")
        files_before = judge.batch_stats()["files_created"]
        asyncio.run(upload_only(judge.base_url))
        resumed = batch_cli(study, judge.base_url, "--json")
        stats = judge.batch_stats()
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    s = json.loads(resumed.stdout)
    assert s["graded"] == 12 and s["prompts_sent"] == 0 and s["batch"]["open"] == []
    assert stats["batches_created"] == 1 and stats["files_created"] == files_before + 1 + 1  # input, output
    assert "none open; 2 collected" in info_cli(study).stdout
