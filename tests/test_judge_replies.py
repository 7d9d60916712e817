"""Judge reply parsing (docs/design.md §5), driven by tests/cases/judge_replies.jsonl: first the pure parser, then
every case again as a real reply from a real HTTP server through the real `openai` client."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcqaudit.judge.client import JudgeClient, JudgeOutcome, JudgeRequest
from mcqaudit.judge.prompts import SYSTEM_PROMPT, JudgeConfig, prompt_hash, render
from mcqaudit.judge.replies import ILLEGAL_KINDS, TRUNCATED, cut_off, judged, parse_reply
from mcqaudit.vocab import LETTERS
from tests.helpers import read_cases
from tests.judge_servers import Call, Reply, ScriptedJudge

CASES = read_cases("judge_replies.jsonl")
IDS = [c["id"] for c in CASES]


def test_case_file_covers_the_issue() -> None:
    assert len(CASES) >= 50 and len(set(IDS)) == len(IDS)
    kinds = {c["kind"] for c in CASES}
    assert set(ILLEGAL_KINDS) <= kinds
    assert {c["shape"] for c in CASES if c["value"]} == {"extract", "gold"}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_reply_case(case: dict) -> None:
    parsed = parse_reply(case["reply"], case["shape"], case["n_options"])
    assert parsed.value == case["value"]
    assert parsed.kind == case["kind"]
    assert parsed.rationale == case.get("rationale")  # verbatim; an empty one is none
    if parsed.value is None:
        assert parsed.error  # a reason, for the summary and the dashboard


def test_rationale_is_kept_from_json() -> None:
    parsed = parse_reply('{"choice": "A", "rationale": "it says A twice"}', "extract", 4)
    assert parsed.value == "A" and parsed.rationale == "it says A twice"


def test_cut_off_reply_is_truncated_only_when_illegal() -> None:
    cut = cut_off(parse_reply('{"choice": "B", "rationale": "The resp', "extract", 4), 128)
    assert (cut.value, cut.kind, cut.rationale) == (None, TRUNCATED, None)
    assert cut.error and "128" in cut.error
    # a reply whose text is complete stays legal even when it used up the last token
    whole = parse_reply('{"choice": "B", "rationale": "It says B."}', "extract", 4)
    assert cut_off(whole, 12) == whole


def test_judged_compares_with_gold_in_code() -> None:
    assert judged("extract", "B", "B") == ("B", "CORRECT")
    assert judged("extract", "C", "B") == ("C", "INCORRECT")
    assert judged("extract", "OTHER", "B") == (None, "OTHER")
    assert judged("gold", "INCORRECT", "B") == (None, "INCORRECT")


@given(reply=st.text(max_size=60), n=st.integers(2, 26), shape=st.sampled_from(["extract", "gold"]))
def test_parser_never_raises_and_only_yields_legal_values(reply: str, n: int, shape: str) -> None:
    parsed = parse_reply(reply, shape, n)
    legal = [*LETTERS[:n], "OTHER"] if shape == "extract" else ["CORRECT", "INCORRECT", "OTHER"]
    assert parsed.value is None or parsed.value in legal
    assert (parsed.value is None) == (parsed.kind is not None)


@given(
    value=st.sampled_from(["A", "B", "D", "OTHER"]),
    left=st.text(alphabet=" \n\t\"'*([", max_size=4),
    right=st.text(alphabet=" \n\t\"'*)]", max_size=4),
    lower=st.booleans(),
)
def test_wrapped_legal_value_is_read(value: str, left: str, right: str, lower: bool) -> None:
    text = left + (value.lower() if lower else value) + right
    assert parse_reply(text, "extract", 4).value == value


# --- the same cases over real HTTP ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def case_server():
    """Replies with the case whose id is the generation of the prompt it receives."""
    by_id = {c["id"]: c for c in CASES}

    def responder(call: Call) -> Reply:
        assert call.parsed is not None
        return Reply(by_id[call.parsed.generation]["reply"])

    with ScriptedJudge(responder) as srv:
        yield srv


def test_every_case_over_http(case_server: ScriptedJudge) -> None:
    async def run() -> list:
        outcomes = []
        for shape in ("extract", "gold"):
            engine = JudgeClient(
                JudgeConfig(model="scripted", shape=shape),
                api_key="k",
                base_url=case_server.base_url,
                concurrency=8,
                reask=0,
            )
            requests = []
            for c in (c for c in CASES if c["shape"] == shape):
                options = [f"option {i}" for i in range(c["n_options"])]
                user = render(shape, "Q?", options, c["id"], gold_letter="A")
                requests.append(JudgeRequest(prompt_hash(SYSTEM_PROMPT, user), user, c["n_options"]))
            async with engine:
                got: list = []
                await engine.run(requests, got.append)
            outcomes.extend(got)
        return outcomes

    outcomes = asyncio.run(run())
    by_id = {c["id"]: c for c in CASES}
    assert len(outcomes) == len(CASES)
    seen = set()
    for out in outcomes:
        case_id = out.request.user.split("<<<RESPONSE\n")[-1].split("\nRESPONSE>>>")[0]
        case = by_id[case_id]
        seen.add(case_id)
        assert out.value == case["value"], case_id
        assert out.error_kind == case["kind"], case_id
        assert out.reply == case["reply"], case_id  # the raw reply is kept verbatim
        assert out.rationale == case.get("rationale"), case_id
        assert out.attempts == 1
    assert seen == set(by_id)


def test_finish_reason_length_over_http() -> None:
    """The endpoint's finish_reason reaches the engine: a cut-off illegal reply is `truncated` (and is
    re-asked once, like any illegal reply); a complete one that used the last token is still legal."""
    replies = {
        "cut": Reply('{"choice": "A", "rationale": "The response names', finish_reason="length"),
        "whole": Reply('{"choice": "B", "rationale": "It names B."}', finish_reason="length"),
    }

    def responder(call: Call) -> Reply:
        assert call.parsed is not None
        return replies[call.parsed.generation]

    async def run() -> dict[str, JudgeOutcome]:
        config = JudgeConfig(model="scripted", rationale=True)
        async with JudgeClient(config, api_key="k", base_url=srv.base_url) as engine:
            got: list[JudgeOutcome] = []
            requests = []
            for gen in replies:
                user = render("extract", "Q?", ["a", "b"], gen, rationale=True)
                requests.append(JudgeRequest(prompt_hash(SYSTEM_PROMPT, user), user, 2))
            await engine.run(requests, got.append)
        return {o.request.user.split("<<<RESPONSE\n")[-1].split("\nRESPONSE>>>")[0]: o for o in got}

    with ScriptedJudge(responder) as srv:
        out = asyncio.run(run())
        assert srv.count == 3  # cut: asked and re-asked; whole: once
    cut, whole = out["cut"], out["whole"]
    assert (cut.value, cut.error_kind, cut.rationale) == (None, TRUNCATED, None)
    assert cut.reply == replies["cut"].text and "max tokens (128)" in cut.error
    assert (whole.value, whole.rationale) == ("B", "It names B.")
