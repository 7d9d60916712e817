"""`generate`: prompt rows → a model behind an OpenAI-compatible endpoint → a generations file, resumable.

The "model" is :func:`tests.judge_servers.answering_model`, a scripted stand-in (not an LLM) on a real HTTP
server on 127.0.0.1, reached through the real `openai` client; the command line runs in subprocesses where
exit codes, output and SIGKILL matter; the whole loop (orient → generate → ingest → grade → report) runs
through the real CLI.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcqaudit.generate import GenerateOptions, generate, option_logprobs, read_output
from tests.helpers import run_cli, write_jsonl
from tests.judge_servers import Answer, Call, ScriptedJudge, Status, answering_model, heuristic

ITEMS = [
    {"item_id": "geo", "question": "Which city is the capital of France?",
     "options": ["Paris", "Lyon", "Nice", "Lille"], "gold": "A"},
    {"item_id": "arith", "question": "What is three plus four?",
     "options": ["six", "seven", "eight", "nine"], "gold": 1},
    {"item_id": "planet", "question": "Which planet is called the red planet?",
     "options": ["Venus", "Mars", "Jupiter", "Saturn"], "gold": "B"},
    {"item_id": "ocean", "question": "Which is the largest ocean on Earth?",
     "options": ["Atlantic", "Indian", "Arctic", "Pacific"], "gold": "D"},
    {"item_id": "ice", "question": "Is ice frozen water?", "options": ["Yes", "No"], "gold": 0},
]  # fmt: skip
# geo and ice answered right by letter, arith wrong by letter, planet right in a sentence, ocean refused
ANSWERS = {
    "Which city is the capital of France?": Answer("Paris"),
    "What is three plus four?": Answer("eight"),
    "Which planet is called the red planet?": Answer("Mars", style="sentence"),
    "Which is the largest ocean on Earth?": Answer(None, style="refuse"),
    "Is ice frozen water?": Answer("Yes"),
}
N_PROMPTS = 4 * 4 + 2  # cyclic: four 4-option items in 4 orientations, one 2-option item in 2
CLEAN_ENV = ("OPENAI_API_KEY", "MCQAUDIT_JUDGE_MODEL", "MCQAUDIT_JUDGE_BASE_URL")


def cli(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return run_cli(*args, env={**dict.fromkeys(CLEAN_ENV), **env}, timeout=timeout)


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    items = write_jsonl(tmp_path / "items.jsonl", ITEMS)
    out = tmp_path / "prompts.jsonl"
    proc = cli("orient", str(items), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def fast(url: str, **kw) -> GenerateOptions:
    base = dict(model="answerer", base_url=url, concurrency=4, timeout_s=5.0, max_retries=3, backoff_base_s=0.01)
    base.update(kw)
    return GenerateOptions(**base)  # type: ignore[arg-type]


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def keys(rows: list[dict]) -> list[tuple]:
    return sorted((r["arm"], r["item_id"], r["orientation"], r["sample"]) for r in rows)


# --- option log-probs ---------------------------------------------------------------------------------------


def test_option_logprobs_map_the_first_tokens_letters_in_range() -> None:
    top = [("B", -0.1), (" B", -2.3), ("A", -4.0), ("a", -1.0), ("E", -0.5), ("The", -0.2), ("C", float("nan"))]
    got = option_logprobs(top, 4)
    assert got is not None and set(got) == {"A", "B"}  # lower case, out of range, non-letters, NaN left out
    assert got["B"] == pytest.approx(math.log(math.exp(-0.1) + math.exp(-2.3)), abs=1e-6)  # variants combined
    assert got["A"] == -4.0
    assert option_logprobs([("The", -0.1), (" answer", -1.0)], 4) is None
    assert option_logprobs([("C", -0.1)], 2) is None  # C is not an option of a binary item


# --- in-process runs ----------------------------------------------------------------------------------------


def test_generate_writes_rows_that_ingest_reads_with_prompt_orientation_sample_model_logprobs(
    prompts: Path, tmp_path: Path
) -> None:
    out = tmp_path / "gen.jsonl"
    with ScriptedJudge(answering_model(ANSWERS)) as srv:
        summary = generate(prompts, out, fast(srv.base_url, samples=2, seed=7, temperature=0.7, arm="base"))
        calls = list(srv.calls)
    assert summary.exit_code == 0 and summary.written == 2 * N_PROMPTS and summary.errors == 0
    assert len(calls) == 2 * N_PROMPTS
    for c in calls:
        assert c.body["logprobs"] is True and c.body["top_logprobs"] == 20
        assert c.body["temperature"] == 0.7 and c.body["max_tokens"] == 1024 and c.body["model"] == "answerer"
        assert [m["role"] for m in c.body["messages"]] == ["user"]
    assert sorted({c.body["seed"] for c in calls}) == [7, 8]  # S + sample index
    prompt_rows = {(r["item_id"], r["orientation"]): r for r in rows_of(prompts)}
    rows = rows_of(out)
    assert len(keys(rows)) == len(set(keys(rows))) == 2 * N_PROMPTS
    for r in rows:
        p = prompt_rows[(r["item_id"], r["orientation"])]
        assert r["arm"] == "base" and r["model"] == "answerer" and r["sample"] in (0, 1)
        for k in ("question", "options", "gold", "prompt"):
            assert r[k] == p[k]
        answer = ANSWERS[r["question"]]
        if answer.style == "letter":
            letter = "ABCD"[r["options"].index(answer.pick)]
            assert r["generation"] == letter  # the letter of the option as *displayed* in that orientation
            assert max(r["option_logprobs"], key=r["option_logprobs"].get) == letter
            assert set(r["option_logprobs"]) == set("ABCD"[: len(r["options"])])
        elif answer.style == "sentence":
            assert r["generation"] == "I think it is Mars." and list(r["option_logprobs"]) == [
                "ABCD"[r["options"].index("Mars")]
            ]
        else:
            assert "option_logprobs" not in r  # no letter among the first token's top log-probs: omitted
    assert summary.with_logprobs == 2 * (N_PROMPTS - 4)


def test_rerun_sends_only_what_the_file_lacks_and_rewrites_a_torn_last_line(prompts: Path, tmp_path: Path) -> None:
    out = tmp_path / "gen.jsonl"
    with ScriptedJudge(answering_model(ANSWERS)) as srv:
        generate(prompts, out, fast(srv.base_url))
        full = rows_of(out)
        lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
        # as a run killed mid-write leaves it: whole lines, then half of the next one
        out.write_text("".join(lines[:-3]) + lines[-3][: len(lines[-3]) // 2], encoding="utf-8")
        assert read_output(out).torn
        srv.reset()
        again = generate(prompts, out, fast(srv.base_url))
        assert srv.count == 3 and again.already_done == N_PROMPTS - 3 and again.written == 3
        assert again.torn_line_dropped and again.exit_code == 0
        srv.reset()
        third = generate(prompts, out, fast(srv.base_url))
        assert srv.count == 0 and third.targeted == 0 and third.exit_code == 0
    rows = rows_of(out)  # every line parses: the torn half is gone
    assert keys(rows) == keys(full) and len(set(keys(rows))) == N_PROMPTS


def test_an_endpoint_without_logprobs_is_asked_without_them(prompts: Path, tmp_path: Path) -> None:
    model = answering_model(ANSWERS)

    def responder(call: Call):
        if "logprobs" in call.body:
            return Status(400, "logprobs are not supported by this server")
        return model(call)

    out = tmp_path / "gen.jsonl"
    with ScriptedJudge(responder) as srv:
        summary = generate(prompts, out, fast(srv.base_url, concurrency=1))
        assert srv.count == N_PROMPTS + 1  # one refusal, then every request without the parameters
    assert summary.exit_code == 0 and summary.logprobs == "unsupported" and summary.with_logprobs == 0
    assert all("option_logprobs" not in r for r in rows_of(out)) and len(rows_of(out)) == N_PROMPTS


def test_429_honours_retry_after_and_lasting_failures_exit_3_until_a_rerun(prompts: Path, tmp_path: Path) -> None:
    model = answering_model(ANSWERS)
    broken = {"on": True}

    def responder(call: Call):
        if "three plus four" in call.user and broken["on"]:
            return Status(500, "upstream failed")
        if call.seen_before == 0 and "capital of France" in call.user:
            return Status(429, "slow down", headers={"retry-after": "0.3"})
        return model(call)

    out = tmp_path / "gen.jsonl"
    with ScriptedJudge(responder) as srv:
        start = time.monotonic()
        first = generate(prompts, out, fast(srv.base_url, max_retries=2, backoff_base_s=0.001))
        assert time.monotonic() - start >= 0.3
        assert first.exit_code == 3 and first.errors == 4 and first.errors_by_kind == {"server_error": 4}
        assert first.retries_by_kind["rate_limited"] == 4 and first.written == N_PROMPTS - 4
        assert {r["item_id"] for r in rows_of(out)} == {"geo", "planet", "ocean", "ice"}
        broken["on"] = False
        srv.reset()
        second = generate(prompts, out, fast(srv.base_url))
        assert second.exit_code == 0 and srv.count == 4 and second.written == 4
    assert len(set(keys(rows_of(out)))) == N_PROMPTS


# --- the command line ---------------------------------------------------------------------------------------


def test_cli_usage_errors_bad_prompts_and_a_refusing_endpoint(prompts: Path, tmp_path: Path) -> None:
    out = tmp_path / "gen.jsonl"
    remote = cli("generate", str(prompts), "--model", "m", "--base-url", "https://example.invalid/v1",
                 "--out", str(out))  # fmt: skip
    assert remote.returncode == 2 and "OPENAI_API_KEY" in remote.stderr and not out.exists()
    bad = cli("generate", str(prompts), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(out),
              "--samples", "0")  # fmt: skip
    assert bad.returncode == 2 and "--samples" in bad.stderr
    pasted = cli("generate", str(prompts), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out",
                 str(out), "--api-key-env", "sk-not-a-name")  # fmt: skip
    assert pasted.returncode == 2 and "sk-not-a-name" not in pasted.stderr
    broken = write_jsonl(tmp_path / "broken.jsonl", ['{"item_id": "a"', {"item_id": "b", "prompt": "x"}])
    badin = cli("generate", str(broken), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(out))
    assert badin.returncode == 1 and f"{broken}:1: line: not valid JSON" in badin.stderr
    assert f"{broken}:2: question: missing field(s) question, options, gold" in badin.stderr
    assert "Traceback" not in badin.stderr + remote.stderr + bad.stderr
    with ScriptedJudge(lambda c: Status(401, "who are you")) as srv:
        denied = cli("generate", str(prompts), "--model", "m", "--base-url", srv.base_url, "--out", str(out),
                     "--quiet")  # fmt: skip
    assert denied.returncode == 1 and "HTTP 401" in denied.stdout and out.read_text() == ""
    with ScriptedJudge(answering_model(ANSWERS)) as srv:
        assert cli("generate", str(prompts), "--model", "m1", "--base-url", srv.base_url, "--out", str(out),
                   "--arm", "base", "--quiet").returncode == 0  # fmt: skip
        other = cli("generate", str(prompts), "--model", "m2", "--base-url", srv.base_url, "--out", str(out),
                    "--arm", "base")  # fmt: skip
        assert other.returncode == 2 and "arm 'base' generated by model 'm1'" in other.stderr
        own_arm = cli("generate", str(prompts), "--model", "m2", "--base-url", srv.base_url, "--out", str(out),
                      "--json")  # fmt: skip  (the arm is the model's name)
        assert own_arm.returncode == 0 and json.loads(own_arm.stdout)["written"] == N_PROMPTS
    assert {r["arm"] for r in rows_of(out)} == {"base", "m2"}


def test_cli_api_key_is_sent_and_never_written(prompts: Path, tmp_path: Path) -> None:
    key = "sk-mcqaudit-gen-3c9e1a7f"
    model = answering_model(ANSWERS)
    auth = []

    def responder(call: Call):
        auth.append(call.authorization)
        if "largest ocean" in call.user:
            return Status(500, f"bad key {key}") if call.seen_before == 0 else model(call)
        if "capital of France" in call.user:
            from tests.judge_servers import Reply

            return Reply(f"Your key is {key}")  # a hostile or buggy server echoing the key
        return model(call)

    out = tmp_path / "gen.jsonl"
    with ScriptedJudge(responder) as srv:
        proc = cli("generate", str(prompts), "--model", "m", "--base-url", srv.base_url, "--out", str(out),
                   "--api-key-env", "MCQ_GEN_KEY", "--max-retries", "1", MCQ_GEN_KEY=key)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert set(auth) == {f"Bearer {key}"}
    assert key not in proc.stdout + proc.stderr and key not in out.read_text(encoding="utf-8")
    assert any(r["generation"] == "Your key is [redacted]" for r in rows_of(out))


def test_sigkill_mid_run_then_resume_completes_the_file_without_duplicates(prompts: Path, tmp_path: Path) -> None:
    many = tmp_path / "many.jsonl"  # 10 arms' worth of prompt rows: enough to kill the run in the middle
    write_jsonl(many, [dict(r, arm=f"a{k}") for k in range(10) for r in rows_of(prompts)])
    total = 10 * N_PROMPTS
    out = tmp_path / "gen.jsonl"
    with ScriptedJudge(answering_model(ANSWERS), latency_s=0.02) as srv:
        args = [sys.executable, "-m", "mcqaudit", "generate", str(many), "--model", "m", "--base-url",
                srv.base_url, "--out", str(out), "--concurrency", "4", "--quiet"]  # fmt: skip
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and out.read_bytes().count(b"\n") >= 20:
                break
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        kept = read_output(out)
        assert 20 <= len(kept.done) < total
        # a kill inside a write leaves half a line: the next run must cut it off, not append after it
        with out.open("a", encoding="utf-8") as fh:
            fh.write('{"item_id": "geo", "arm": "a0", "sam')
        srv.reset()
        srv.latency_s = 0.0
        again = cli("generate", str(many), "--model", "m", "--base-url", srv.base_url, "--out", str(out),
                    "--json")  # fmt: skip
        assert again.returncode == 0, again.stderr
        summary = json.loads(again.stdout)
        assert summary["torn_line_dropped"] and summary["already_done"] == len(kept.done)
        assert srv.count == total - len(kept.done)  # only the missing rows were asked for
    rows = rows_of(out)
    assert len(rows) == len(set(keys(rows))) == total


def test_the_whole_loop_orient_generate_ingest_grade_report(prompts: Path, tmp_path: Path) -> None:
    gens, db = tmp_path / "gen.jsonl", tmp_path / "study.duckdb"
    with ScriptedJudge(answering_model(ANSWERS)) as model, ScriptedJudge(heuristic) as judge:
        for arm in ("base", "steered"):
            g = cli("generate", str(prompts), "--model", "answerer", "--base-url", model.base_url, "--out",
                    str(gens), "--arm", arm, "--quiet")  # fmt: skip
            assert g.returncode == 0, g.stderr
        # --items: rows are written as they complete, so an item's first row need not be in canonical order
        items = prompts.parent / "items.jsonl"
        ing = cli("ingest", str(gens), "--db", str(db), "--items", str(items), "--control", "base", "--quiet")
        assert ing.returncode == 0 and f"{2 * N_PROMPTS} rows loaded" in ing.stdout, ing.stderr
        gr = cli("grade", "--db", str(db), "--judge-model", "scripted", "--judge-base-url", judge.base_url,
                 "--quiet", "--json")  # fmt: skip
        assert gr.returncode == 0, gr.stderr
        # only the sentence and the refusal needed the judge; the bare letters were the pre-filter's
        assert json.loads(gr.stdout)["targeted"] == 2 * (4 + 4)
    rep = cli("report", "--db", str(db), "--format", "json", "--bootstrap", "0")
    assert rep.returncode == 0, rep.stderr
    r = json.loads(rep.stdout)
    assert r["arms"] == ["base", "steered"] and r["rows"] == 2 * N_PROMPTS
    for arm in r["arms"]:
        m = r["metrics"][arm]
        assert m["accuracy"]["value"] == pytest.approx(3 / 5)  # geo, planet and ice right; arith wrong; ocean OTHER
        assert m["other_rate"]["value"] == pytest.approx(4 / N_PROMPTS)
        assert m["logprob_crosscheck"] is not None
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        got = con.execute(
            "SELECT item_id, orientation, final_verdict, verdict_source, prompt IS NOT NULL FROM graded_rows "
            "WHERE arm = 'base' ORDER BY item_id, orientation"
        ).fetchall()
        lp = con.execute("SELECT count(*) FROM gen_rows WHERE option_logprobs IS NOT NULL").fetchone()
    finally:
        con.close()
    verdicts = {(i, o): (v, s) for i, o, v, s, _ in got}
    assert all(p for *_, p in got)
    assert {v for (i, _), v in verdicts.items() if i == "arith"} == {("INCORRECT", "prefilter")}
    assert {v for (i, _), v in verdicts.items() if i == "planet"} == {("CORRECT", "judge")}
    assert {v for (i, _), v in verdicts.items() if i == "ocean"} == {("OTHER", "judge")}
    assert lp == (2 * (N_PROMPTS - 4),)
