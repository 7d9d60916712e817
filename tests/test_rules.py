"""The rules, once (docs/design.md §1): the SQL macros of ``store.schema`` checked by running them in a real study file,
against their Python twins in ``vocab`` and against the final-verdict precedence; the migration that brought
them; and a blank-looking generation carried through ingest and grade."""

from __future__ import annotations

import itertools
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcqaudit.app.grade import GradeOptions, grade
from mcqaudit.app.ingest import ingest_file
from mcqaudit.judge.prompts import JudgeConfig
from mcqaudit.metrics.rules import arm_order, compared_arms
from mcqaudit.standin.server import StandinOptions, StandinServer
from mcqaudit.store import Study
from mcqaudit.store.frames import load_frames, verdict_code_sql
from mcqaudit.store.rows import study_choices, verdict_counts
from mcqaudit.store.schema import MIGRATIONS
from mcqaudit.vocab import (
    CORRECT,
    INCORRECT,
    LETTERS,
    OTHER,
    SOURCE_JUDGE,
    SOURCE_PREFILTER,
    SOURCE_REVIEW,
    SOURCE_RULE,
    VERDICT_CODES,
    VERDICTS,
    WHITESPACE,
    VerdictCode,
    is_blank,
    verdict_of,
)
from tests.builders import StudyBuilder
from tests.helpers import read_cases, write_jsonl

FIXTURES = Path(__file__).parent / "fixtures"
# the generation the issue names: only characters str.strip() removes, three of which RE2's \s does not
BLANK_LOOKING = "\x1c\v\u0085 "
GRADED_ROWS_COLUMNS = [
    "row_id",
    "arm",
    "item_id",
    "orientation",
    "sample",
    "question",
    "options",
    "gold_letter",
    "gold_option",
    "generation",
    "prompt",
    "user_letter",
    "naive_letter",
    "strict_letter",
    "judge_letter",
    "judge_verdict",
    "judge_status",
    "judge_reply",
    "judge_rationale",
    "judge_fingerprint",
    "review_verdict",
    "reviewer",
    "reviewed_at",
    "final_verdict",
    "verdict_source",
    "picked_letter",
    "picked_option",
    "picked_position",
    "answer",
    "reasoning",
    "finish_reason",
    "truncated",
]


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory):
    """A connection to a real study file, migrated by the production code: the macros are the study's own."""
    study = Study(tmp_path_factory.mktemp("rules") / "study.duckdb", create=True)
    with study.connect() as c:
        yield c


def _blank_in_sql(con: duckdb.DuckDBPyConnection, texts: list[str]) -> list[bool]:
    rows = con.execute(
        "SELECT i, is_blank(t) FROM (SELECT unnest(?::VARCHAR[]) AS t, unnest(range(?)) AS i) ORDER BY i",
        [texts, len(texts)],
    ).fetchall()
    return [bool(r[1]) for r in rows]


# --- blank --------------------------------------------------------------------------------------------------
def test_whitespace_is_exactly_what_str_strip_removes() -> None:
    assert set(WHITESPACE) == {chr(c) for c in range(0x110000) if chr(c).isspace()}
    assert len(set(WHITESPACE)) == len(WHITESPACE)


def test_is_blank_in_sql_matches_python_on_every_character(con: duckdb.DuckDBPyConnection) -> None:
    chars = [chr(c) for c in range(1, 0x3100) if not 0xD800 <= c < 0xE000] + ["\U0001f600", "\U000e0020"]
    texts = ["", *chars, *(c * 3 for c in WHITESPACE), WHITESPACE, BLANK_LOOKING, "\v", "\x85", "\x1c\x1f"]
    assert _blank_in_sql(con, texts) == [is_blank(t) for t in texts]
    assert is_blank(BLANK_LOOKING) and _blank_in_sql(con, [BLANK_LOOKING]) == [True]


@pytest.mark.parametrize("name", ["parsers.jsonl", "standin_cases.jsonl"])
def test_is_blank_in_sql_matches_python_on_the_case_files(con: duckdb.DuckDBPyConnection, name: str) -> None:
    texts = [c["generation"] for c in read_cases(name)]
    assert _blank_in_sql(con, texts) == [is_blank(t) for t in texts]


_spacey = st.text(
    st.one_of(st.sampled_from(WHITESPACE + "\u200b\ufeff\x00\x1b\x7fa."), st.characters(codec="utf-8"))
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_spacey, min_size=1, max_size=20))
def test_is_blank_in_sql_matches_python_on_random_text(
    con: duckdb.DuckDBPyConnection, texts: list[str]
) -> None:
    assert _blank_in_sql(con, texts) == [is_blank(t) for t in texts]


# --- letter -> verdict ----------------------------------------------------------------------------------------
def test_verdict_of_in_sql_matches_python(con: duckdb.DuckDBPyConnection) -> None:
    pairs = [(letter, gold) for letter in [None, *LETTERS[:6]] for gold in LETTERS[:6]]
    got = con.execute(
        "SELECT verdict_of(l, g) FROM (SELECT unnest(?::VARCHAR[]) AS l, unnest(?::VARCHAR[]) AS g, "
        "unnest(range(?)) AS i) ORDER BY i",
        [[p[0] for p in pairs], [p[1] for p in pairs], len(pairs)],
    ).fetchall()
    assert [r[0] for r in got] == [verdict_of(letter, gold) for letter, gold in pairs]
    assert (verdict_of("B", "B"), verdict_of("C", "B"), verdict_of(None, "B")) == (CORRECT, INCORRECT, OTHER)


# --- verdict -> code (the metrics' frames) ----------------------------------------------------------------------
def test_verdict_codes_in_sql_match_the_enum(con: duckdb.DuckDBPyConnection) -> None:
    """The frames' SQL code of every verdict (and of none) is the VerdictCode the metrics compare with,
    also over the verdict_of macro's output."""
    values = [*VERDICTS, None, "not a verdict"]
    got = con.execute(
        f"SELECT {verdict_code_sql('v')} FROM (SELECT unnest(?::VARCHAR[]) AS v, unnest(range(?)) AS i) ORDER BY i",
        [values, len(values)],
    ).fetchall()
    assert [r[0] for r in got] == [VerdictCode.of(v) for v in values[:-1]] + [VerdictCode.NONE]
    # the frames' documented codes
    assert [int(c) for c in (*VERDICT_CODES, VerdictCode.NONE)] == [0, 1, 2, -1]
    assert [c.name for c in VERDICT_CODES] == list(VERDICTS)
    pairs = [(letter, gold) for letter in [None, *LETTERS[:4]] for gold in LETTERS[:4]]
    got = con.execute(
        f"SELECT {verdict_code_sql('verdict_of(l, g)')} FROM (SELECT unnest(?::VARCHAR[]) AS l, "
        "unnest(?::VARCHAR[]) AS g, unnest(range(?)) AS i) ORDER BY i",
        [[p[0] for p in pairs], [p[1] for p in pairs], len(pairs)],
    ).fetchall()
    assert [r[0] for r in got] == [VerdictCode.of(verdict_of(letter, gold)) for letter, gold in pairs]


# --- final-verdict precedence ------------------------------------------------------------------------------------
def _expected(review, review_letter, judge, judge_letter, strict_letter, blank, gold="A"):
    """docs/design.md §1, read literally: latest review, else judge, else strict pre-filter, else rule."""
    if review is not None:
        return review, SOURCE_REVIEW, review_letter
    if judge is not None:
        return judge, SOURCE_JUDGE, judge_letter
    if strict_letter is not None:
        return verdict_of(strict_letter, gold), SOURCE_PREFILTER, strict_letter
    if blank:
        return OTHER, SOURCE_RULE, None
    return None, None, None


_COMBOS = list(
    itertools.product(
        [None, (CORRECT, "A"), (INCORRECT, "C"), (INCORRECT, None), (OTHER, None)],  # review, its letter
        [
            None,
            (CORRECT, "A"),
            (INCORRECT, "B"),
            (OTHER, None),
            (CORRECT, None),
        ],  # judge (gold shape: no letter)
        [None, "A", "B"],  # strict letter
        [False, True],  # blank
    )
)


def test_final_verdict_source_and_picked_letter_follow_the_precedence(con: duckdb.DuckDBPyConnection) -> None:
    sql = """
        SELECT final_verdict(rv, jv, sl, 'A', b), verdict_source(rv, jv, sl, b), picked_letter(rv, rl, jv, jl, sl)
        FROM (SELECT ?::VARCHAR AS rv, ?::VARCHAR AS rl, ?::VARCHAR AS jv, ?::VARCHAR AS jl, ?::VARCHAR AS sl,
                     ?::BOOLEAN AS b)
    """
    for review, judge, strict_letter, blank in _COMBOS:
        rv, rl = review or (None, None)
        jv, jl = judge or (None, None)
        got = con.execute(sql, [rv, rl, jv, jl, strict_letter, blank]).fetchone()
        assert got == _expected(rv, rl, jv, jl, strict_letter, blank), (review, judge, strict_letter, blank)


def test_automated_verdict_is_the_final_one_without_reviews(con: duckdb.DuckDBPyConnection) -> None:
    got = con.execute(
        "SELECT final_verdict(NULL, NULL, 'B', 'A', false), picked_letter(NULL, NULL, NULL, NULL, 'B')"
    )
    assert got.fetchone() == (INCORRECT, "B")


def test_needs_judge_unless_the_prefilter_or_the_rule_resolved_it(con: duckdb.DuckDBPyConnection) -> None:
    got = con.execute(
        "SELECT needs_judge(NULL, false), needs_judge('A', false), needs_judge(NULL, true), needs_judge('A', true)"
    ).fetchone()
    assert got == (True, False, False, False)


# --- migrations ------------------------------------------------------------------------------------------------
def test_a_study_created_at_migration_1_opens_and_upgrades(tmp_path: Path) -> None:
    """Migration 1 exactly as it shipped (its graded_rows spelled the rules out), one row stored by the old
    code (whose blank test missed \\v, U+0085 and \\x1c), then the current Study opens and upgrades it."""
    path = tmp_path / "v1.duckdb"
    c = duckdb.connect(str(path))
    c.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ)")
    c.execute((FIXTURES / "schema_migration_1.sql").read_text(encoding="utf-8"))
    c.execute("INSERT INTO schema_migrations VALUES (1, now())")
    for row_id, gen, blank_then, strict_letter in [
        ("r-blank-looking", BLANK_LOOKING, False, None),
        ("r-strict", "B", False, "B"),
        ("r-prose", "I think it is Paris.", False, None),
    ]:
        c.execute(
            """INSERT INTO gen_rows (row_id, arm, item_id, orientation, sample, question, options, gold_letter,
                   generation, is_blank, strict_letter, ingest_id)
               VALUES (?, 'base', ?, 'AB', 0, 'Capital of France?', ['Paris', 'Rome'], 'A', ?, ?, ?, 1)""",
            [row_id, row_id, gen, blank_then, strict_letter],
        )
    assert c.execute(
        "SELECT verdict_source FROM graded_rows WHERE row_id = 'r-blank-looking'"
    ).fetchone() == (None,)
    c.close()

    study = Study(path)
    assert study.query("SELECT max(version) FROM schema_migrations") == [(len(MIGRATIONS),)]
    assert [r[0] for r in study.query("DESCRIBE graded_rows")] == GRADED_ROWS_COLUMNS
    got = {
        r[0]: r[1:]
        for r in study.query(
            "SELECT row_id, judge_status, verdict_source, final_verdict, picked_letter FROM graded_rows"
        )
    }
    assert got == {
        "r-blank-looking": ("skipped", SOURCE_RULE, OTHER, None),  # re-read with the rule: no longer pending
        "r-strict": ("skipped", SOURCE_PREFILTER, INCORRECT, "B"),
        "r-prose": ("pending", None, None, None),
    }
    assert Study(path, read_only=True).query("SELECT count(*) FROM graded_rows") == [(3,)]


# --- blank through ingest and grade -------------------------------------------------------------------------------
def test_a_blank_looking_generation_is_other_by_rule_and_never_judged(tmp_path: Path) -> None:
    study = Study(tmp_path / "study.duckdb", create=True)
    base = {"arm": "base", "question": "Which river flows through Paris?", "gold": "A"}
    options = ["the Seine", "the Thames"]
    rows = [
        {**base, "item_id": "blank", "options": options, "generation": BLANK_LOOKING},
        {**base, "item_id": "prose", "options": options, "generation": "The answer is the Seine, of course."},
    ]
    ingest_file(study, write_jsonl(tmp_path / "g.jsonl", rows))
    assert study.query("SELECT item_id, judge_status FROM graded_rows ORDER BY item_id") == [
        ("blank", "skipped"),
        ("prose", "pending"),
    ]
    with StandinServer(StandinOptions(latency_ms=1)) as judge:
        summary = grade(
            study,
            GradeOptions(
                JudgeConfig(model="standin-heuristic"), base_url=judge.base_url, flush_interval_s=0.05
            ),
        )
    assert (summary.targeted, summary.graded, summary.exit_code) == (1, 1, 0)
    got = study.query(
        "SELECT item_id, judge_status, verdict_source, final_verdict, judge_reply FROM graded_rows ORDER BY item_id"
    )
    assert got == [
        ("blank", "skipped", SOURCE_RULE, OTHER, None),
        ("prose", "ok", SOURCE_JUDGE, CORRECT, "A"),
    ]
    # nothing was ever asked about it: no verdict, and no prompt holding it among the replies
    assert study.query(
        "SELECT count(*) FROM judge_verdicts v JOIN gen_rows g USING (row_id) WHERE g.item_id = 'blank'"
    ) == [(0,)]
    assert study.query("SELECT count(*) FROM judge_replies") == [(1,)]


# --- arm order ----------------------------------------------------------------------------------------------------
def test_arm_order_in_sql_matches_python(tmp_path: Path) -> None:
    """metrics.rules.arm_order (ingest order, then arms without one by name) is the order of the frames' arms,
    of the dashboard's arm choices and of the verdict counts, whose SQL spells it ``ordinal NULLS LAST, arm``."""
    b = StudyBuilder(tmp_path / "arms.duckdb")
    b.item("i0", n=2)
    for arm in ("zeta", "base", "alpha", "orphan-b", "orphan-a"):
        b.row(arm, "i0", "AB", "A")
    study = b.build()
    with study.write() as c:  # arms only in gen_rows (no ordinal): last, by name
        c.execute("DELETE FROM arms WHERE arm LIKE 'orphan-%'")
    want = arm_order(["orphan-b", "alpha", "zeta", "orphan-a", "base"], {"zeta": 0, "base": 1, "alpha": 2})
    assert want == ["zeta", "base", "alpha", "orphan-a", "orphan-b"]
    assert load_frames(study).info.arms == want
    assert study_choices(study)["arms"] == want
    assert list(dict.fromkeys(verdict_counts(study)["arm"])) == want
    assert compared_arms(want, "base") == (
        ["zeta", "alpha", "orphan-a", "orphan-b"],
        [(a, b) for k, a in enumerate(want) for b in want[k + 1 :]],
    )
    assert compared_arms(want[:2], None) == ([], [])
