"""The bill before it comes and after (docs/design.md §5 "Cost before and after"): `grade --dry-run` estimates
the tokens and cost of the requests a run would send, and `info` / the Export page report the `usage` each
reply brought.

The judge is a scripted server on 127.0.0.1 reached through the real `openai` client. It reports a `usage`
counted by a rule of its own, unlike the estimate's characters / 4: the pieces a BPE tokenizer splits text
into before merging (words with their leading space, runs of digits, runs of punctuation, line breaks), one
token each, plus the chat format's wrapping. On English text that count is within a few per cent of OpenAI's
o200k_base (measured on the sample runs' judge prompts: 0.93-0.99 of it), so the estimate's ratio to it says
how close the estimate comes to a real tokenizer; measured here: 1.12.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mcqaudit.grade.plan import BATCH_DISCOUNT, request_tokens
from mcqaudit.judge.prompts import DEFAULT_MAX_TOKENS, DEFAULT_RATIONALE_MAX_TOKENS
from mcqaudit.store import Study
from tests.helpers import REPO, run_cli, write_jsonl
from tests.judge_servers import Call, Reply, ScriptedJudge, Status, option_match
from tests.ui_study import app, no_exceptions

NO_JUDGE_ENV: dict[str, str | None] = {"MCQAUDIT_JUDGE_MODEL": None, "MCQAUDIT_JUDGE_BASE_URL": None}
SAMPLE = REPO / "sample_runs" / "generations.jsonl"
# a BPE tokenizer's pre-split (after GPT-2's / o200k's pattern, in plain `re`): each piece one token here
PIECES = re.compile(r"'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
NO_USAGE_MARK = "(reported without usage)"
HALF_USAGE_MARK = "(reported with prompt tokens only)"
FAIL_MARK = "(always answered HTTP 500)"


def pieces(text: str) -> int:
    return len(PIECES.findall(text))


class Meter:
    """The server's usage rule: the pieces of every message (+3 each) and of the reply, +3 for the reply's
    priming; a prompt carrying :data:`NO_USAGE_MARK` gets no usage, one with :data:`HALF_USAGE_MARK` only
    prompt tokens. What it reported is kept, so the tests compare with the server's own record."""

    def __init__(self) -> None:
        self.reported: list[dict[str, int]] = []
        self.unreported = 0

    def __call__(self, body: dict[str, Any], text: str | None) -> dict[str, int] | None:
        msgs = body.get("messages") or []
        user = msgs[-1]["content"] if msgs else ""
        if NO_USAGE_MARK in user:
            self.unreported += 1
            return None
        prompt = sum(pieces(m["content"]) + 3 for m in msgs) + 3
        if HALF_USAGE_MARK in user:
            self.unreported += 1
            return {"prompt_tokens": prompt}
        usage = {"prompt_tokens": prompt, "completion_tokens": max(1, pieces(text or ""))}
        self.reported.append(usage)
        return {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}


def responder(call: Call) -> Reply | Status:
    if FAIL_MARK in call.user:
        return Status(500)
    return Reply(option_match(call.parsed) if call.parsed else "OTHER")


def sample_rows(n: int) -> list[dict[str, Any]]:
    """``n`` rows of the shipped sample runs (short letters, sentences, refusals; both arms)."""
    with SAMPLE.open() as f:
        return [json.loads(line) for line in islice(f, n)]


def reasoned(rows: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Longer answers: the same rows, each answer preceded by a paragraph of working."""
    for r in rows:
        opts = r["options"]
        yield {
            **r,
            "sample": 1,
            "generation": f"Let me think it through. The question asks: {r['question']} Option A, {opts[0]}, "
            f"is tempting, but the second, {opts[1]}, deserves a look too; weighing each in turn, my answer "
            f"is this. {r['generation']}",
        }


@pytest.fixture
def db(tmp_path: Path) -> Path:
    rows = sample_rows(64)
    src = write_jsonl(tmp_path / "gen.jsonl", [*rows, *reasoned(rows)])
    out = tmp_path / "study.duckdb"
    run_cli("ingest", str(src), "--db", str(out), "--quiet", check=True)
    return out


def grade_cli(db: Path, url: str, *extra: str) -> Any:
    return run_cli(
        "grade",
        "--db",
        str(db),
        "--judge-model",
        "scripted",
        "--judge-base-url",
        url,
        *extra,
        env=NO_JUDGE_ENV,
    )


def dry_json(db: Path, url: str, *extra: str) -> dict[str, Any]:
    proc = grade_cli(db, url, "--dry-run", "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def info_json(db: Path) -> dict[str, Any]:
    proc = run_cli("info", "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def tables(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    study = Study(db)
    return {t: study.query(f"SELECT * FROM {t} ORDER BY ALL") for t in ("judge_verdicts", "judge_replies")}


# --- the estimate against what the server then reports ------------------------------------------------------


def test_the_dry_run_estimate_counts_what_a_run_sends_and_comes_close_to_the_usage_reported(db: Path) -> None:
    meter = Meter()
    with ScriptedJudge(responder, usage=meter) as srv:
        # a first run on part of the rows: their prompts are answered, so no later run sends them again
        first = grade_cli(db, srv.base_url, "--limit", "40", "-q")
        assert first.returncode == 0, first.stderr
        sent_before = srv.count
        before = tables(db)
        plan = dry_json(db, srv.base_url)
        human = grade_cli(db, srv.base_url, "--dry-run")
        assert srv.count == sent_before and tables(db) == before  # a dry run sends and writes nothing
        srv.reset()
        run = grade_cli(db, srv.base_url, "--json", "-q")
        assert run.returncode == 0, run.stderr
        calls = list(srv.calls)

    # it counts exactly the requests the run then sent: the rendered system + user message of each, no more
    assert plan["requests"] == len(calls) == json.loads(run.stdout)["prompts_sent"] > 0
    # the rows graded first are not counted again, nor rows whose prompt an earlier reply answered
    assert (
        plan["already_graded"] >= 40
        and plan["targeted_rows"] == plan["rows_needing_judge"] - plan["already_graded"]
    )
    assert plan["requests"] <= plan["targeted_rows"] - plan["cached_rows"]
    assert plan["prompt_tokens_estimate"] == sum(request_tokens(c.system, c.user) for c in calls)
    assert plan["completion_tokens_estimate"] == DEFAULT_MAX_TOKENS * len(calls)
    assert plan["cost_estimate"] is None and plan["batch"] is False and plan["batch_discount"] is None
    assert "characters / 4" in plan["token_counting"] and "upper bound" in plan["completion_assumption"]

    # ... and it comes close to what the server reported for those requests (its own count, kept)
    reported = meter.reported[-len(calls) :]
    prompt_reported = sum(u["prompt_tokens"] for u in reported)
    completion_reported = sum(u["completion_tokens"] for u in reported)
    ratio = plan["prompt_tokens_estimate"] / prompt_reported
    print(
        f"prompt tokens: estimate {plan['prompt_tokens_estimate']}, reported {prompt_reported}: {ratio:.3f}"
    )
    assert 1.0 <= ratio <= 1.25, ratio
    assert completion_reported <= plan["completion_tokens_estimate"]  # an upper bound

    out = human.stdout
    assert f"estimate for the {plan['requests']:,} requests a run would send: about " in out
    assert f"{plan['prompt_tokens_estimate']:,} prompt tokens" in out
    assert f"at most {plan['completion_tokens_estimate']:,} completion tokens" in out
    assert "characters / 4" in out and "about 10 % above OpenAI's tokenizers" in out
    assert "give --price-in and --price-out (USD per million tokens) to see it" in out

    # after the runs, `info --json` has what the server reported, summed per fingerprint
    usage = info_json(db)["judge_usage"]
    assert len(usage) == 1
    (u,) = usage.values()
    assert u["requests"] == len(meter.reported) and u["requests_without_usage"] == 0
    assert u["prompt_tokens"] == sum(x["prompt_tokens"] for x in meter.reported)
    assert u["completion_tokens"] == sum(x["completion_tokens"] for x in meter.reported)


def test_a_dry_run_says_how_far_it_has_read_and_rendered(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 1 M rows a dry run takes seconds (it renders every prompt a run would send): it reports reading the
    rows, then the rows rendered so far, a chunk at a time, up to every row it targets."""
    from mcqaudit.app.grade import GradeOptions, dry_run
    from mcqaudit.grade import plan as planning
    from mcqaudit.judge.prompts import JudgeConfig
    from mcqaudit.vocab import STANDIN_MODEL

    monkeypatch.setattr(planning, "PROGRESS_CHUNK", 10)
    heard: list[tuple[str, int, int | None]] = []
    options = GradeOptions(JudgeConfig(model=STANDIN_MODEL), base_url="http://127.0.0.1:9/v1")
    shown = dry_run(Study(db), options, progress=lambda *step: heard.append(step))
    assert heard[0] == (planning.READING_ROWS, 0, None)
    rendered = [done for stage, done, total in heard if stage == planning.RENDERING and total == shown.targeted]
    assert len(rendered) == len(heard) - 1 and shown.targeted > 20
    assert rendered == [0, *range(10, shown.targeted, 10), shown.targeted]
    assert shown.to_json() == dry_run(Study(db), options).to_json()  # the same plan, reported or not


def test_a_rationale_run_is_estimated_at_its_own_max_tokens(db: Path) -> None:
    with ScriptedJudge(responder) as srv:
        plain = dry_json(db, srv.base_url)
        rat = dry_json(db, srv.base_url, "--rationale")
        capped = dry_json(db, srv.base_url, "--rationale", "--max-tokens", "40")
        assert srv.count == 0
    assert rat["requests"] == plain["requests"]
    assert rat["completion_tokens_estimate"] == DEFAULT_RATIONALE_MAX_TOKENS * rat["requests"]
    assert capped["completion_tokens_estimate"] == 40 * rat["requests"]
    # the rationale prompt asks for JSON: longer messages, more prompt tokens
    assert rat["prompt_tokens_estimate"] > plain["prompt_tokens_estimate"]


def test_a_panel_judge_is_estimated_over_the_rows_the_primary_judge_graded(db: Path) -> None:
    meter = Meter()
    with (
        ScriptedJudge(responder, usage=meter) as one,
        ScriptedJudge(responder, model="second", usage=meter) as two,
    ):
        assert grade_cli(db, one.base_url, "--limit", "30", "-q").returncode == 0
        proc = run_cli("grade", "--db", str(db), "--judge-model", "second", "--judge-base-url", two.base_url,
                       "--panel", "--dry-run", "--json", env=NO_JUDGE_ENV)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        plan = json.loads(proc.stdout)
        assert two.count == 0
        run = run_cli("grade", "--db", str(db), "--judge-model", "second", "--judge-base-url", two.base_url,
                      "--panel", "-q", env=NO_JUDGE_ENV)  # fmt: skip
        assert run.returncode == 0, run.stderr
        calls = list(two.calls)
    assert plan["rows_needing_judge"] == 30 and plan["requests"] == len(calls) > 0
    assert plan["prompt_tokens_estimate"] == sum(request_tokens(c.system, c.user) for c in calls)
    usage = info_json(db)["judge_usage"]
    assert [u["model"] for u in usage.values()] == ["scripted", "second"]
    assert [u["requests"] for u in usage.values()] == [one.count, len(calls)]


# --- prices and the batch discount --------------------------------------------------------------------------


def test_prices_give_the_cost_and_batch_mode_half_of_it(db: Path) -> None:
    with ScriptedJudge(responder) as srv:
        online = dry_json(db, srv.base_url, "--price-in", "2.5", "--price-out", "10")
        batch = dry_json(db, srv.base_url, "--batch", "--price-in", "2.5", "--price-out", "10")
        human = grade_cli(db, srv.base_url, "--dry-run", "--batch", "--price-in", "2.5", "--price-out", "10")
        assert srv.count == 0
    by_hand = (online["prompt_tokens_estimate"] * 2.5 + online["completion_tokens_estimate"] * 10) / 1e6
    assert online["cost_estimate"] == pytest.approx(by_hand, abs=1e-6) and by_hand > 0
    assert (online["price_in_per_million"], online["price_out_per_million"]) == (2.5, 10.0)
    assert (batch["requests"], batch["prompt_tokens_estimate"]) == (
        online["requests"],
        online["prompt_tokens_estimate"],
    )
    assert batch["batch"] is True and batch["batch_discount"] == BATCH_DISCOUNT == 0.5
    assert batch["cost_estimate"] == pytest.approx(by_hand * 0.5, abs=1e-6)
    assert batch["batches"] and sum(b["lines"] for b in batch["batches"]) == batch["requests"]
    assert human.returncode == 0, human.stderr
    shown = (
        f"${batch['cost_estimate']:.4g}" if batch["cost_estimate"] < 1 else f"${batch['cost_estimate']:,.2f}"
    )
    assert (
        f"estimated cost: about {shown} (prompt at $2.5, completion at its upper bound at $10 per million "
        in (human.stdout)
    )
    assert "at the Batch API's 50 % price" in human.stdout


def test_a_batch_estimate_leaves_out_the_prompts_already_in_an_open_batch(db: Path) -> None:
    from mcqaudit.app.grade import BatchOptions, GradeOptions, grade_batch
    from mcqaudit.judge.prompts import JudgeConfig
    from mcqaudit.standin.server import BatchKnobs, StandinServer
    from mcqaudit.vocab import STANDIN_MODEL

    def run(url: str, *extra: str) -> dict[str, Any]:
        proc = run_cli("grade", "--db", str(db), "--judge-model", STANDIN_MODEL, "--judge-base-url", url,
                       "--dry-run", "--json", "--price-in", "1", "--price-out", "4", *extra, env=NO_JUDGE_ENV)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    with StandinServer(batch=BatchKnobs(seconds=60)) as slow:
        opts = GradeOptions(JudgeConfig(model=STANDIN_MODEL), base_url=slow.base_url, limit=10, max_retries=1)
        sub = grade_batch(Study(db), opts, BatchOptions(wait=False))
        assert sub.still_open and sub.prompts_sent > 0
        online, batch = run(slow.base_url), run(slow.base_url, "--batch")
    assert batch["requests"] == online["requests"] - sub.prompts_sent
    assert batch["waiting_rows"] >= sub.prompts_sent and len(batch["open_batches"]) == len(sub.still_open)
    assert batch["cost_estimate"] < online["cost_estimate"] / 2  # fewer requests, at half the price


# --- bad input ---------------------------------------------------------------------------------------------

BAD_PRICES = [
    (("--price-in", "abc", "--price-out", "1"), "--price-in 'abc': not a price"),
    (("--price-in", "0", "--price-out", "1"), "--price-in '0': not a price"),
    (("--price-in", "1", "--price-out", "-2"), "--price-out '-2': not a price"),
    (("--price-in", "nan", "--price-out", "1"), "--price-in 'nan': not a price"),
    (("--price-in", "inf", "--price-out", "1"), "--price-in 'inf': not a price"),
    (("--price-in", "1e400", "--price-out", "1"), "--price-in '1e400': not a price"),
    (("--price-in", "", "--price-out", "1"), "--price-in '': not a price"),
    (("--price-in", "2.5"), "--price-in needs --price-out too"),
    (("--price-out", "10"), "--price-out needs --price-in too"),
]


@pytest.mark.parametrize(("args", "message"), BAD_PRICES)
def test_bad_prices_are_usage_errors(db: Path, args: tuple[str, ...], message: str) -> None:
    with ScriptedJudge(responder) as srv:
        before = tables(db)
        proc = grade_cli(db, srv.base_url, "--dry-run", *args)
        assert srv.count == 0 and tables(db) == before
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), proc.stderr
    assert "positive number" in lines[0] or "too" in lines[0]
    assert not proc.stdout


def test_prices_without_a_dry_run_are_refused_before_anything_is_sent(db: Path) -> None:
    with ScriptedJudge(responder) as srv:
        proc = grade_cli(db, srv.base_url, "--price-in", "1", "--price-out", "2")
        assert srv.count == 0
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == "error: --price-in and --price-out go with --dry-run (the estimate of a run's cost)"
    )


def test_price_parsing_takes_positive_finite_numbers() -> None:
    from mcqaudit.app.grade import GradeUsageError, prices

    assert prices(None, None) is None
    p = prices(" 0.15 ", "6e-1")
    assert p is not None and (p.price_in, p.price_out) == (0.15, 0.6)
    for bad in ("-inf", "1,5", "0x10", "-0.0"):
        with pytest.raises(GradeUsageError):
            prices(bad, "1")
    assert math.isfinite(prices("1e300", "1").price_in)  # type: ignore[union-attr]


# --- usage after the run: a reply without it is unknown, never 0 --------------------------------------------


def graded_with_gaps(tmp_path: Path) -> tuple[Path, Meter]:
    """A study whose run met replies without usage (2 with none, 1 with prompt tokens only) and a request that
    failed without a reply (HTTP 500 every time)."""
    rows = sample_rows(24)
    marks = {3: NO_USAGE_MARK, 7: NO_USAGE_MARK, 11: HALF_USAGE_MARK, 15: FAIL_MARK}
    for i, mark in marks.items():
        rows[i] = {**rows[i], "generation": f"{rows[i]['generation']} {mark}"}
    db = tmp_path / "gaps.duckdb"
    run_cli("ingest", str(write_jsonl(tmp_path / "gaps.jsonl", rows)), "--db", str(db), "--quiet", check=True)
    meter = Meter()
    with ScriptedJudge(responder, usage=meter) as srv:
        proc = grade_cli(db, srv.base_url, "--max-retries", "0", "-q")
    assert proc.returncode == 3, proc.stderr  # the failed row ended in error
    return db, meter


def test_a_reply_without_usage_is_counted_as_unknown_never_as_zero(tmp_path: Path) -> None:
    db, meter = graded_with_gaps(tmp_path)
    assert meter.unreported == 3 and meter.reported
    (fp, u), = info_json(db)["judge_usage"].items()  # fmt: skip
    assert u == {
        "model": "scripted",
        "prompt_tokens": sum(x["prompt_tokens"] for x in meter.reported),
        "completion_tokens": sum(x["completion_tokens"] for x in meter.reported),
        "requests": len(meter.reported) + 3,
        "requests_without_usage": 3,
        "requests_failed": 1,
    }
    replies = Study(db).query("SELECT count(*), count(tokens_in), count(tokens_out) FROM judge_replies")[0]
    assert replies == (
        len(meter.reported) + 4,
        len(meter.reported) + 1,
        len(meter.reported),
    )  # stored as NULL

    human = run_cli("info", "--db", str(db)).stdout
    line = next(x for x in human.splitlines() if x.startswith(f"  {fp}  scripted: "))
    assert line == (
        f"  {fp}  scripted: {u['prompt_tokens']:,} prompt + {u['completion_tokens']:,} completion tokens over "
        f"{len(meter.reported)} of {u['requests']} replies; 3 replies without usage (unknown, not counted as 0); "
        "1 request failed without a reply"
    )


def test_info_json_says_what_the_study_holds(db: Path) -> None:
    facts = info_json(db)
    assert (
        facts["rows"] == 128
        and facts["arms"]
        and facts["judge_fingerprints"] == []
        and facts["judge_usage"] == {}
    )
    assert "judge usage" not in run_cli("info", "--db", str(db)).stdout


# --- the Export page ---------------------------------------------------------------------------------------
COST_HEAD = ["fingerprint", "model", "replies", "prompt tokens", "completion tokens", "replies without usage"]


def cost_table(at: Any) -> pd.DataFrame:
    hits = [d.value for d in at.dataframe if list(d.value.columns[: len(COST_HEAD)]) == COST_HEAD]
    assert hits, [list(d.value.columns) for d in at.dataframe]
    return hits[0].reset_index(drop=True)


def test_the_export_page_shows_what_grading_cost_so_far(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", "50")
    db, meter = graded_with_gaps(tmp_path)
    (fp, u), = info_json(db)["judge_usage"].items()  # fmt: skip
    at = app(db, "export").run()
    no_exceptions(at)
    t = cost_table(at)
    assert t.to_dict("records") == [
        {
            "fingerprint": fp,
            "model": "scripted",
            "replies": str(u["requests"]),
            "prompt tokens": f"{u['prompt_tokens']:,}",
            "completion tokens": f"{u['completion_tokens']:,}",
            "replies without usage": "3",
            "requests failed": "1",
        }
    ]
    assert "What grading cost so far" in [s.value for s in at.subheader]
    caption = " ".join(c.value for c in at.caption)
    assert "**3** replies reported no usage: their tokens are unknown and not counted (never as 0)" in caption

    at.number_input(key="cost_in").set_value(2.5)
    at.number_input(key="cost_out").set_value(10.0).run()
    no_exceptions(at)
    cost = (u["prompt_tokens"] * 2.5 + u["completion_tokens"] * 10) / 1e6
    assert cost_table(at).loc[0, "cost (USD)"] == f"{cost:,.4f} or more"


def test_the_export_page_of_a_study_never_judged_says_nothing_was_spent(db: Path) -> None:
    at = app(db, "export").run()
    no_exceptions(at)
    assert "No judge has been run on this study: no tokens spent." in [c.value for c in at.caption]
    assert not [d for d in at.dataframe if list(d.value.columns[:2]) == COST_HEAD[:2]]
