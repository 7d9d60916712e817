"""`generate` against a reasoning model: the reply's thinking, finish_reason and usage are kept on the row.

The model is :func:`tests.reasoning_server.reasoning_model`, a scripted stand-in (not an LLM) on a real HTTP
server on 127.0.0.1, reached through the real `openai` client, in the forms servers use: the thinking in
the message's ``reasoning_content`` (or ``reasoning``) field beside the answer, or inline as
``<think>…</think>`` before it, with a seeded share of replies cut by the token limit inside the thinking.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from mcqaudit.generate import GenerateOptions, cut_by_length, generate, reply_reasoning, reply_usage
from tests.helpers import run_cli, write_jsonl
from tests.judge_servers import Answer, Call
from tests.reasoning_server import NO_USAGE, ReasoningServer, Thought, reasoning_model, tokens, with_reply

ITEMS = [
    {"item_id": "geo", "question": "Which city is the capital of France?",
     "options": ["Paris", "Lyon", "Nice", "Lille"], "gold": "A"},
    {"item_id": "arith", "question": "What is three plus four?",
     "options": ["six", "seven", "eight", "nine"], "gold": 1},
    {"item_id": "planet", "question": "Which planet is called the red planet?",
     "options": ["Venus", "Mars", "Jupiter", "Saturn"], "gold": "B"},
    {"item_id": "ice", "question": "Is ice frozen water?", "options": ["Yes", "No"], "gold": 0},
]  # fmt: skip
# geo and ice right by letter, arith wrong by letter, planet right in a sentence (the pre-filter defers it)
ANSWERS = {
    "Which city is the capital of France?": Answer("Paris"),
    "What is three plus four?": Answer("eight"),
    "Which planet is called the red planet?": Answer("Mars", style="sentence"),
    "Is ice frozen water?": Answer("Yes"),
}
N_PROMPTS = 3 * 4 + 2  # cyclic: three 4-option items in 4 orientations, one 2-option item in 2
CLEAN_ENV = ("OPENAI_API_KEY", "MCQAUDIT_JUDGE_MODEL", "MCQAUDIT_JUDGE_BASE_URL")


def cli(*args: str, **env: str) -> Any:
    return run_cli(*args, env={**dict.fromkeys(CLEAN_ENV), **env})


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    items = write_jsonl(tmp_path / "items.jsonl", ITEMS)
    out = tmp_path / "prompts.jsonl"
    proc = cli("orient", str(items), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def fast(url: str, **kw: Any) -> GenerateOptions:
    base = dict(
        model="reasoner", base_url=url, concurrency=4, timeout_s=5.0, max_retries=2, backoff_base_s=0.01
    )
    base.update(kw)
    return GenerateOptions(**base)  # type: ignore[arg-type]


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def recording(responder: Any) -> tuple[Any, dict[tuple[str, Any], Thought]]:
    """The responder, and what it sent for each (prompt, request seed): the server's side of every row."""
    sent: dict[tuple[str, Any], Thought] = {}

    def respond(call: Call) -> Any:
        got = responder(call)
        if isinstance(got, Thought):
            sent[(call.user, call.body.get("seed"))] = got
        return got

    return respond, sent


# --- reading a reply (pure) ------------------------------------------------------------------------------


def test_a_replys_reasoning_finish_reason_and_usage_are_read_as_servers_send_them() -> None:
    from types import SimpleNamespace as NS

    assert reply_reasoning(NS(content="B", reasoning_content="hm", reasoning="other")) == "hm"
    assert (
        reply_reasoning(NS(content="B", reasoning_content="", reasoning="hm")) == "hm"
    )  # blank: the next one
    assert reply_reasoning(NS(content="<think>hm</think>B")) is None  # inline: for ingest to split
    assert reply_reasoning(NS(content="B", reasoning_content=["hm"])) is None
    assert [cut_by_length(w) for w in ("length", "max_tokens", " length ", "stop", "end_turn", None)] == [
        True, True, True, False, False, False
    ]  # fmt: skip
    assert reply_usage(NS(usage=NS(prompt_tokens=3, completion_tokens=0, total_tokens=3))) == {
        "prompt_tokens": 3, "completion_tokens": 0
    }  # fmt: skip
    assert reply_usage(NS(usage=None)) is None and reply_usage(NS()) is None


# --- the JSONL rows -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_a_reasoning_field_is_kept_apart_with_finish_reason_and_usage(
    prompts: Path, tmp_path: Path, field: str
) -> None:
    out = tmp_path / "gen.jsonl"
    responder, sent = recording(reasoning_model(ANSWERS, form=field, truncate=0.3, seed=3))
    with ReasoningServer(responder) as srv:
        summary = generate(prompts, out, fast(srv.base_url, samples=2, seed=11, max_tokens=256))
        assert srv.count == 2 * N_PROMPTS
    rows = rows_of(out)
    assert summary.exit_code == 0 and summary.written == len(rows) == 2 * N_PROMPTS
    cut = [r for r in rows if sent[(r["prompt"], 11 + r["sample"])].answer is None]
    assert 0 < len(cut) < len(rows)  # the seeded share cuts some replies, not all
    for r in rows:
        t = sent[(r["prompt"], 11 + r["sample"])]
        assert r["reasoning"] == t.thinking and re.match(r"Option [A-D] looks plausible", r["reasoning"])
        assert "<think>" not in r["generation"]
        if t.answer is None:  # cut inside the thinking: no content at all (null), nothing answered
            assert r["generation"] == "" and r["finish_reason"] == "length"
            assert r["usage"] == {"prompt_tokens": tokens(r["prompt"]), "completion_tokens": 256}
        else:
            assert r["generation"] == t.answer and r["finish_reason"] == "stop"
            spent = tokens(t.thinking) + tokens(t.answer)
            assert r["usage"] == {"prompt_tokens": tokens(r["prompt"]), "completion_tokens": spent}
        assert set(r["usage"]) == {"prompt_tokens", "completion_tokens"}  # not the reply's total_tokens
    assert summary.with_reasoning == len(rows) and summary.without_usage == 0
    assert summary.cut_by_length == len(cut) and summary.finish_reasons == {
        "length": len(cut),
        "stop": len(rows) - len(cut),
    }
    assert summary.tokens_out == sum(r["usage"]["completion_tokens"] for r in rows)
    said = "\n".join(summary.lines())
    assert f"cut by the token limit (finish_reason length): {len(cut)} of {len(rows)} written" in said
    assert "raise --max-tokens (this run: 256)" in said
    assert f"with reasoning (the reply's reasoning field, kept apart): {len(rows)} of {len(rows)}" in said


def test_inline_thinking_stays_in_the_generation_verbatim_without_a_reasoning_field(
    prompts: Path, tmp_path: Path
) -> None:
    out = tmp_path / "gen.jsonl"
    responder, sent = recording(reasoning_model(ANSWERS, form="inline", truncate=0.3, seed=3))
    with ReasoningServer(responder) as srv:
        summary = generate(prompts, out, fast(srv.base_url, samples=2, seed=11))
    rows = rows_of(out)
    assert summary.exit_code == 0 and len(rows) == 2 * N_PROMPTS
    n_cut = 0
    for r in rows:
        t = sent[(r["prompt"], 11 + r["sample"])]
        assert "reasoning" not in r  # ingest splits the block off
        assert r["generation"].startswith("<think>\n" + t.thinking)
        if t.answer is None:
            n_cut += 1
            assert r["generation"] == "<think>\n" + t.thinking and r["finish_reason"] == "length"
            assert r["usage"]["completion_tokens"] == 1024
        else:
            assert (
                r["generation"] == f"<think>\n{t.thinking}\n</think>\n\n{t.answer}"
                and r["finish_reason"] == "stop"
            )
    assert 0 < n_cut < len(rows) and summary.cut_by_length == n_cut and summary.with_reasoning == 0
    assert not any("with reasoning" in line for line in summary.lines())


def test_the_fake_server_cuts_the_same_replies_whatever_the_order(prompts: Path, tmp_path: Path) -> None:
    cuts = []
    for k, concurrency in enumerate((1, 8)):
        out = tmp_path / f"gen{k}.jsonl"
        with ReasoningServer(reasoning_model(ANSWERS, form="inline", truncate=0.3, seed=3)) as srv:
            generate(prompts, out, fast(srv.base_url, samples=3, seed=1, concurrency=concurrency))
        cuts.append(
            sorted((r["prompt"], r["sample"]) for r in rows_of(out) if r["finish_reason"] == "length")
        )
    with ReasoningServer(reasoning_model(ANSWERS, form="inline", truncate=0.3, seed=4)) as srv:
        generate(prompts, tmp_path / "other.jsonl", fast(srv.base_url, samples=3, seed=1))
    other = sorted(
        (r["prompt"], r["sample"])
        for r in rows_of(tmp_path / "other.jsonl")
        if r["finish_reason"] == "length"
    )
    assert cuts[0] == cuts[1] and cuts[0] and other != cuts[0]  # seeded: the seed, not the order, decides


# --- bad replies ------------------------------------------------------------------------------------------


BAD_USAGE: list[Any] = [
    NO_USAGE,
    None,  # "usage": null
    "lots",
    [12, 3],
    {"prompt_tokens": "12", "completion_tokens": 3},
    {"prompt_tokens": 12},
    {"prompt_tokens": -1, "completion_tokens": 3},
    {"prompt_tokens": 12.5, "completion_tokens": 3},
    {"prompt_tokens": True, "completion_tokens": 3},
]


def test_missing_or_malformed_usage_and_unknown_finish_reasons(prompts: Path, tmp_path: Path) -> None:
    prompt_rows = [p["prompt"] for p in rows_of(prompts)]
    bad = dict(zip(prompt_rows, BAD_USAGE, strict=False))
    odd = dict(zip(prompt_rows[len(BAD_USAGE) :], ["end_turn", " eos ", None, 7], strict=False))
    responder = reasoning_model(ANSWERS, form="reasoning_content")
    for p, u in bad.items():
        responder = with_reply(responder, lambda c, p=p: c.user == p, usage=u)
    for p, fr in odd.items():
        responder = with_reply(responder, lambda c, p=p: c.user == p, finish_reason=fr)
    out = tmp_path / "gen.jsonl"
    with ReasoningServer(responder) as srv:
        summary = generate(prompts, out, fast(srv.base_url))
    rows = {r["prompt"]: r for r in rows_of(out)}
    assert summary.exit_code == 0 and len(rows) == N_PROMPTS and summary.errors == 0  # every row is written
    for p, r in rows.items():
        assert ("usage" in r) is (p not in bad), (bad.get(p), r.get("usage"))
        assert r["reasoning"] and r["generation"] in "ABCD" or r["generation"].startswith("I think it is")
    assert summary.without_usage == len(bad) == len(BAD_USAGE)
    # an unknown word kept as given (ingest normalises); null and a number are not finish reasons: left out
    assert [rows[p].get("finish_reason", "-") for p in odd] == ["end_turn", " eos ", "-", "-"]
    assert (
        summary.cut_by_length == 0
        and summary.finish_reasons["end_turn"] == 1
        and summary.finish_reasons["none"] == 2
    )
    said = "\n".join(summary.lines())
    assert f"without usage (the reply had none, or not two token counts): {len(bad)} of {N_PROMPTS}" in said
    assert f"cut by the token limit (finish_reason length): 0 of {N_PROMPTS} written" in said
    # what generate wrote ingests as it is: a malformed usage never reaches the file to fail as `usage:`
    db = tmp_path / "study.duckdb"
    ing = cli("ingest", str(out), "--db", str(db), "--items", str(prompts.parent / "items.jsonl"), "--quiet")
    assert ing.returncode == 0, ing.stderr
    graded = _graded(db)
    got = [graded[(p, 0)] for p in odd]
    assert [(g["finish_reason"], g["truncated"]) for g in got] == [("end_turn", False), ("eos", False),
                                                                    (None, False), (None, False)]  # fmt: skip
    assert all(g["answer"] and g["reasoning"] for g in graded.values())
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        stored = dict(con.execute("SELECT prompt, usage FROM gen_rows").fetchall())
    finally:
        con.close()
    assert {p for p, u in stored.items() if u is None} == set(bad)
    assert all(json.loads(u) == rows[p]["usage"] for p, u in stored.items() if u is not None)


# --- the command line ---------------------------------------------------------------------------------------


def test_cli_says_how_many_replies_the_token_limit_cut(prompts: Path, tmp_path: Path) -> None:
    out = tmp_path / "gen.jsonl"
    with ReasoningServer(reasoning_model(ANSWERS, form="inline", truncate=0.5, seed=2)) as srv:
        text = cli("generate", str(prompts), "--model", "reasoner", "--base-url", srv.base_url, "--out", str(out),
                   "--max-tokens", "64", "--quiet")  # fmt: skip
        as_json = cli("generate", str(prompts), "--model", "reasoner", "--base-url", srv.base_url, "--out",
                      str(tmp_path / "again.jsonl"), "--max-tokens", "64", "--json")  # fmt: skip
    assert text.returncode == 0 and as_json.returncode == 0, text.stderr + as_json.stderr
    n_cut = sum(r["finish_reason"] == "length" for r in rows_of(out))
    assert 0 < n_cut < N_PROMPTS
    assert f"cut by the token limit (finish_reason length): {n_cut} of {N_PROMPTS} written" in text.stdout
    assert "raise --max-tokens (this run: 64)" in text.stdout
    got = json.loads(as_json.stdout)
    assert got["cut_by_length"] == n_cut and got["written"] == N_PROMPTS and got["max_tokens"] == 64
    assert got["finish_reasons"] == {"length": n_cut, "stop": N_PROMPTS - n_cut} and got["without_usage"] == 0


# --- ingest and grade what generate wrote -----------------------------------------------------------------


def _graded(db: Path) -> dict[tuple[str, int], dict[str, Any]]:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        cur = con.execute(
            "SELECT prompt, sample, generation, answer, reasoning, finish_reason, truncated, naive_letter, "
            "strict_letter, final_verdict, verdict_source, judge_status FROM graded_rows"
        )
        names = [d[0] for d in cur.description]
        return {(r[0], r[1]): dict(zip(names, r, strict=True)) for r in cur.fetchall()}
    finally:
        con.close()


@pytest.mark.parametrize("form", ["reasoning_content", "inline"])
def test_ingest_reads_the_answer_and_the_judge_sees_only_answers(
    prompts: Path, tmp_path: Path, form: str
) -> None:
    from mcqaudit.standin.server import StandinServer
    from tests.judge_servers import ScriptedJudge, heuristic

    planet = "Which planet is called the red planet?"
    model = reasoning_model(ANSWERS, form=form, truncate=0.3, seed=3)
    # one sample of the planet's sentence answers is also cut by the limit, after it answered
    model = with_reply(model, lambda c: planet in c.user and c.body.get("seed") == 12, finish_reason="length")
    responder, sent = recording(model)
    gens = tmp_path / "gen.jsonl"
    with ReasoningServer(responder) as srv:
        assert generate(prompts, gens, fast(srv.base_url, samples=2, seed=11, arm="base")).exit_code == 0
    items = prompts.parent / "items.jsonl"
    dbs = [tmp_path / "standin.duckdb", tmp_path / "scripted.duckdb"]
    for db in dbs:
        ing = cli("ingest", str(gens), "--db", str(db), "--items", str(items), "--quiet")
        assert ing.returncode == 0, ing.stderr
    rows = _graded(dbs[0])
    assert len(rows) == 2 * N_PROMPTS
    answered_planets: list[str] = []  # the prompts of the planet's rows that have an answer, one per row
    for (prompt, sample), r in rows.items():
        t = sent[(prompt, 11 + sample)]
        assert r["reasoning"] == t.thinking  # apart from the answer, whichever form the server used
        if form == "inline":
            assert r["generation"].startswith("<think>")  # verbatim
        if t.answer is None:  # cut inside the thinking: no answer, OTHER by rule, never judged
            assert r["answer"] == "" and r["finish_reason"] == "length" and r["truncated"] is True
            assert (r["final_verdict"], r["verdict_source"]) == ("OTHER", "rule")
            assert r["naive_letter"] is None  # not the letter the thinking names
            continue
        assert r["answer"].strip() == t.answer
        assert r["truncated"] is (t.finish_reason == "length") and r["finish_reason"] == t.finish_reason
        if planet in prompt:
            answered_planets.append(prompt)
            assert r["strict_letter"] is None  # a sentence: the pre-filter defers it to the judge
        else:
            assert (
                r["strict_letter"] == r["naive_letter"] == t.answer
            )  # the answer's letter, not the thinking's
            assert r["verdict_source"] == "prefilter"
    cut_after_answer = [r for r in rows.values() if r["truncated"] and r["answer"]]
    assert cut_after_answer and len(answered_planets) > len(cut_after_answer)
    # rows that render to the same judge prompt share one request: the samples of one orientation whose
    # answers are the same sentence
    distinct = len(set(answered_planets))
    with StandinServer() as standin:
        gr = cli("grade", "--db", str(dbs[0]), "--judge-model", "standin-heuristic", "--judge-base-url",
                 standin.base_url, "--quiet", "--json")  # fmt: skip
        judged = standin.stats()["requests"]
    assert gr.returncode == 0, gr.stderr + gr.stdout
    # no cut row without an answer, no bare letter reached the judge: only the planet's answered rows
    assert json.loads(gr.stdout)["targeted"] == len(answered_planets) and judged == distinct
    with ScriptedJudge(heuristic) as judge:
        gr = cli("grade", "--db", str(dbs[1]), "--judge-model", "scripted", "--judge-base-url", judge.base_url,
                 "--quiet")  # fmt: skip
        calls = list(judge.calls)
    assert gr.returncode == 0, gr.stderr + gr.stdout
    assert len(calls) == distinct
    # the judge is sent the answer alone: none of the thinking, none of its tags
    assert all(c.parsed is not None and c.parsed.generation.strip() == "I think it is Mars." for c in calls)
    assert all("plausible" not in c.user and "think>" not in c.user for c in calls)
    for db in dbs:
        after = _graded(db)
        for key, r in after.items():
            if planet in key[0] and r["answer"]:
                assert (r["final_verdict"], r["verdict_source"]) == ("CORRECT", "judge"), r
            if r["truncated"] and not r["answer"]:
                assert (r["final_verdict"], r["verdict_source"], r["judge_status"]) == (
                    "OTHER",
                    "rule",
                    "skipped",
                )
        assert sum(r["truncated"] for r in after.values()) == len(cut_after_answer) + sum(
            t.answer is None for t in sent.values()
        )
