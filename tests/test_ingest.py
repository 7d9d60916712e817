"""Ingest: formats, idempotence, canonical order, bad input reported with file:line:field, one transaction."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mcqaudit.app.ingest import ingest_file
from mcqaudit.ingest.errors import InputError
from mcqaudit.reasoning import split_reasoning
from mcqaudit.store import Study
from tests.helpers import BAD_LINES, row, run_cli, write_jsonl


def graded(study: Study) -> pd.DataFrame:
    return study.query_df("SELECT * FROM graded_rows ORDER BY arm, item_id, orientation, sample")


def count(study: Study, table: str) -> int:
    return study.query(f"SELECT count(*) FROM {table}")[0][0]


def test_orientation_derived_and_gold_follows_option(study: Study, tmp_path: Path) -> None:
    rows = [
        row(),
        row(options=["Rome", "Berlin", "Madrid", "Paris"], gold="D", generation="D"),
        row(options=["Berlin", "Madrid", "Paris", "Rome"], gold=2, generation="I think Paris."),
    ]
    res = ingest_file(study, write_jsonl(tmp_path / "g.jsonl", rows))
    assert res.loaded == 3
    df = graded(study)
    assert list(df.orientation) == ["ABCD", "BCDA", "CDAB"]
    assert list(df.gold_letter) == ["A", "D", "C"]
    assert set(df.gold_option) == {"Paris"}
    assert list(df.options.iloc[1]) == ["Rome", "Berlin", "Madrid", "Paris"]


def test_prefilter_rule_and_pending(study: Study, tmp_path: Path) -> None:
    rows = [
        row(generation="A"),  # strict: bare letter, correct
        row(arm="steered", generation="B. Rome"),  # strict: letter + its own option text, incorrect
        row(sample=1, generation="  \n\t "),  # blank: OTHER by rule
        row(sample=2, generation="At the garden of the Louvre, I'd say Paris."),  # needs the judge
    ]
    ingest_file(study, write_jsonl(tmp_path / "g.jsonl", rows))
    df = graded(study).set_index(["arm", "sample"])
    assert df.loc[
        ("base", 0), ["final_verdict", "verdict_source", "judge_status", "picked_letter"]
    ].tolist() == ["CORRECT", "prefilter", "skipped", "A"]
    assert df.loc[
        ("steered", 0), ["final_verdict", "verdict_source", "picked_option", "picked_position"]
    ].tolist() == ["INCORRECT", "prefilter", "Rome", 1]
    assert df.loc[("base", 1), ["final_verdict", "verdict_source", "judge_status"]].tolist() == [
        "OTHER",
        "rule",
        "skipped",
    ]
    pending = df.loc[("base", 2)]
    assert pending.judge_status == "pending"
    assert pd.isna(pending.final_verdict) and pd.isna(pending.verdict_source)
    assert pending.naive_letter == "A"  # the classic fabrication, stored to be shown
    assert pd.isna(pending.strict_letter)


def test_idempotent_and_conflicts(study: Study, tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "g.jsonl", [row(), row(arm="steered")])
    ingest_file(study, f)
    before = graded(study)
    again = ingest_file(study, f)
    assert again.loaded == 0 and again.unchanged == 2
    pd.testing.assert_frame_equal(before, graded(study))
    conflict = write_jsonl(tmp_path / "c.jsonl", [row(generation="B")])
    with pytest.raises(InputError) as exc:
        ingest_file(study, conflict)
    assert "c.jsonl:1: generation: conflicts with the row already in the study" in str(exc.value)
    assert graded(study).generation.tolist() == ["A", "A"]
    res = ingest_file(study, conflict, replace=True)
    assert res.replaced == 1
    assert sorted(graded(study).generation.tolist()) == ["A", "B"]
    assert count(study, "gen_rows") == 2


def test_duplicate_in_file(study: Study, tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "g.jsonl", [row(), row(), row(generation="C")])
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    assert "g.jsonl:3: generation: duplicate of line 1" in str(exc.value)
    assert count(study, "gen_rows") == 0



@pytest.mark.parametrize(
    ("text", "field", "reason"), BAD_LINES, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD_LINES)]
)
def test_each_bad_line_is_reported_and_nothing_written(
    study: Study, tmp_path: Path, text: str, field: str, reason: str
) -> None:
    f = write_jsonl(tmp_path / "g.jsonl", [row(item_id="ok-item"), text])
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    msg = str(exc.value)
    assert f"g.jsonl:2: {field}: " in msg and reason in msg, msg
    assert "g.jsonl:1:" not in msg
    assert count(study, "gen_rows") == 0 and count(study, "items") == 0 and count(study, "arms") == 0


def test_all_problems_reported_not_just_first(study: Study, tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "g.jsonl", [t for t, _, _ in BAD_LINES])
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    lines = {p.line for p in exc.value.problems}
    assert lines == set(range(1, len(BAD_LINES) + 1))


def test_option_set_differs_between_rows(study: Study, tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "g.jsonl", [row(), row(arm="x", options=["Paris", "Rome", "Berlin", "Oslo"])])
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    assert "g.jsonl:2: options: the option set differs from item cap-fr's (first seen at line 1)" in str(
        exc.value
    )


def test_gold_option_must_agree_across_rows(study: Study, tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "g.jsonl", [row(), row(arm="x", gold="B")])
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    assert 'g.jsonl:2: gold: gold option "Rome" differs from item cap-fr\'s gold option "Paris"' in str(
        exc.value
    )


def test_non_utf8_and_empty(study: Study, tmp_path: Path) -> None:
    f = tmp_path / "g.jsonl"
    f.write_bytes(json.dumps(row()).encode() + b"\n" + b'{"item_id": "caf\xe9"}\n')
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    assert "g.jsonl:2: line: not valid UTF-8 (byte 0xe9" in str(exc.value)
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    with pytest.raises(InputError, match="the file is empty"):
        ingest_file(study, empty)
    blank = tmp_path / "b.jsonl"
    blank.write_text("\n \n")
    with pytest.raises(InputError, match="no rows"):
        ingest_file(study, blank)


def test_skip_bad_keeps_rejects(study: Study, tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "g.jsonl", [row(), "{oops", row(arm="s", gold=9)])
    res = ingest_file(study, f, skip_bad=True)
    assert (res.loaded, res.rejected) == (1, 2)
    rej = study.query_df("SELECT line, field, reason, raw FROM rejected_rows ORDER BY line")
    assert rej.line.tolist() == [2, 3]
    assert rej.raw.iloc[0] == "{oops"
    assert rej.field.tolist() == ["line", "gold"]


def test_items_file_fixes_canonical_order(study: Study, tmp_path: Path) -> None:
    items = write_jsonl(
        tmp_path / "items.jsonl",
        [
            {
                "item_id": "cap-fr",
                "question": "Capital of France?",
                "options": ["Rome", "Paris", "Berlin", "Madrid"],
                "gold": 1,
            }
        ],
    )
    ingest_file(study, write_jsonl(tmp_path / "g.jsonl", [row()]), items_path=items)
    assert graded(study).orientation.tolist() == ["BACD"]
    # a later file cannot move the canonical order
    ingest_file(
        study,
        write_jsonl(
            tmp_path / "h.jsonl", [row(arm="s", options=["Rome", "Paris", "Berlin", "Madrid"], gold="B")]
        ),
    )
    assert sorted(graded(study).orientation.tolist()) == ["ABCD", "BACD"]


def test_arm_option(study: Study, tmp_path: Path) -> None:
    r = row()
    del r["arm"]
    ingest_file(study, write_jsonl(tmp_path / "g.jsonl", [r]), arm="steered")
    assert graded(study).arm.tolist() == ["steered"]
    with pytest.raises(InputError, match="arm base contradicts --arm steered"):
        ingest_file(study, write_jsonl(tmp_path / "h.jsonl", [row(item_id="x")]), arm="steered")
    with pytest.raises(InputError, match="missing required field arm .*try --arm NAME"):
        ingest_file(study, write_jsonl(tmp_path / "i.jsonl", [r]))


def test_csv_and_parquet(study: Study, tmp_path: Path) -> None:
    df = pd.DataFrame(
        [
            {
                "item_id": "q1",
                "arm": "base",
                "question": "Q?",
                "options": json.dumps(["x", "y"]),
                "gold": "1",
                "generation": "B",
                "parsed_letter": "B",
                "sample": "0",
            },
            {
                "item_id": "q1",
                "arm": "base",
                "question": "Q?",
                "options": json.dumps(["y", "x"]),
                "gold": "A",
                "generation": "",
                "parsed_letter": "",
                "sample": "0",
            },
        ]
    )
    df.to_csv(tmp_path / "g.csv", index=False)
    ingest_file(study, tmp_path / "g.csv")
    out = graded(study)
    assert out.orientation.tolist() == ["AB", "BA"]
    assert out.final_verdict.tolist() == ["CORRECT", "OTHER"]
    assert out.user_letter.iloc[0] == "B" and pd.isna(out.user_letter.iloc[1])
    pq = pd.DataFrame(
        [
            {
                "item_id": "q2",
                "arm": "base",
                "question": "Q2?",
                "options": ["a", "b", "c"],
                "gold": 2,
                "generation": "C",
                "sample": 3,
            }
        ]
    )
    pq.to_parquet(tmp_path / "g.parquet")
    ingest_file(study, tmp_path / "g.parquet")
    q2 = graded(study).query("item_id == 'q2'")
    assert q2[["orientation", "sample", "final_verdict"]].values.tolist() == [["ABC", 3, "CORRECT"]]
    bad = pd.DataFrame(
        [
            {
                "item_id": "q3",
                "arm": "base",
                "question": "Q",
                "options": "not json",
                "gold": "A",
                "generation": "A",
            }
        ]
    )
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(InputError, match=r"bad.csv:row 1: options: must be a list of option texts"):
        ingest_file(study, tmp_path / "bad.csv")


def test_user_letters_logprobs_metadata_kept(study: Study, tmp_path: Path) -> None:
    ingest_file(
        study,
        write_jsonl(
            tmp_path / "g.jsonl",
            [
                row(
                    parsed_letter="b",
                    option_logprobs={"A": -0.1, "B": -2.5},
                    metadata={"k": 1},
                    model="m1",
                    prompt="P",
                )
            ],
        ),
    )
    r = study.query(
        "SELECT user_letter, option_logprobs::VARCHAR, metadata::VARCHAR, model, prompt FROM gen_rows"
    )[0]
    assert r[0] == "B" and json.loads(r[1]) == {"A": -0.1, "B": -2.5} and json.loads(r[2]) == {"k": 1}
    assert r[3:] == ("m1", "P")


def test_cli_ingest_exit_codes_and_info(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    good = write_jsonl(tmp_path / "g.jsonl", [row(), row(arm="steered", generation="At the garden")])
    p = run_cli("ingest", str(good), "--db", str(db), "--quiet", "--control", "base")
    assert p.returncode == 0, p.stderr
    assert "2 rows loaded" in p.stdout
    bad = write_jsonl(tmp_path / "b.jsonl", [row(item_id="z", gold="Q")])
    p = run_cli("ingest", str(bad), "--db", str(db), "--quiet")
    assert p.returncode == 1
    assert "b.jsonl:1: gold: 'Q' is not a letter in A..D" in p.stderr
    p = run_cli("ingest", str(bad), "--db", str(db), "--quiet", "--skip-bad")
    assert p.returncode == 0 and "1 rows rejected" in p.stderr
    p = run_cli("info", "--db", str(db))
    assert p.returncode == 0, p.stderr
    for text in ("2 rows, 1 items", "base, steered", "control: base", "ABCD", "naive", "rejected rows (1"):
        assert text in p.stdout, p.stdout


def test_strict_preselection_trims_like_python(study: Study, tmp_path: Path) -> None:
    # a bare answer padded with more non-space whitespace than the strict bound must still be pre-filtered
    gen = "B" + "\n\u00a0\u3000" * 40
    ingest_file(study, write_jsonl(tmp_path / "g.jsonl", [row(generation=gen)]))
    assert graded(study)[["strict_letter", "verdict_source"]].values.tolist() == [["B", "prefilter"]]


def test_ingest_parsers_match_the_python_reference(study: Study, tmp_path: Path) -> None:
    """Ingest runs naive and the framework patterns in SQL and strict on a pre-selection: every case of the
    parser case file must get exactly the letters the pure Python parsers give."""
    from mcqaudit import parsers
    from tests.helpers import read_cases

    cases = read_cases("parsers.jsonl")
    rows = []
    for i, c in enumerate(cases):
        n = len(c["options"])
        rows.append(
            {
                "item_id": f"case-{i}",
                "arm": "a",
                "question": "Q?",
                "options": c["options"],
                "gold": 0,
                "generation": c["generation"],
            }
        )
        assert n >= 2
    ingest_file(study, write_jsonl(tmp_path / "cases.jsonl", rows))
    # the parsers read each row's answer (docs/design.md §3: a leading <think> block is not part of it)
    got = study.query_df(
        "SELECT item_id, answer AS generation, options, naive_letter, strict_letter FROM graded_rows"
    )
    answers = [split_reasoning(cases[int(i.split("-")[1])]["generation"]).answer for i in got["item_id"]]
    assert got["generation"].tolist() == answers
    fw = study.query_df(
        "SELECT g.item_id, p.parser, p.letter FROM parser_letters p JOIN gen_rows g USING (row_id)"
    )
    fw_map = {(r.item_id, r.parser): (None if pd.isna(r.letter) else r.letter) for r in fw.itertuples()}
    assert len(got) == len(cases)
    for r in got.itertuples():
        opts = list(r.options)
        assert (None if pd.isna(r.naive_letter) else r.naive_letter) == parsers.naive(
            r.generation, len(opts)
        ), r.item_id
        assert (None if pd.isna(r.strict_letter) else r.strict_letter) == parsers.strict(
            r.generation, opts
        ), r.item_id
        for name, fp in parsers.FRAMEWORK_PARSERS.items():
            assert fw_map[(r.item_id, name)] == fp.parse(r.generation, len(opts)), (r.item_id, name)


def test_empty_and_mixed_option_lists(study: Study, tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "g.jsonl", [row(options=[]), row(item_id="m", options=["a", 1, "c"])])
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    msg = str(exc.value)
    assert "g.jsonl:1: options: needs at least 2 options, got 0" in msg
    assert "g.jsonl:2: options: every option must be a string" in msg


def test_blank_lines_crlf_and_bom_keep_line_numbers(study: Study, tmp_path: Path) -> None:
    f = tmp_path / "g.jsonl"
    good = json.dumps(row())
    bad = json.dumps(row(arm="s", gold="Z"))
    f.write_bytes(("\ufeff" + good + "\r\n\r\n  \n" + bad + "\r\n").encode())
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    assert [p.line for p in exc.value.problems] == [4]
    clean = tmp_path / "c.jsonl"
    clean.write_bytes(("\ufeff" + good + "\r\n" + json.dumps(row(arm="s")) + "\r\n").encode())
    res = ingest_file(study, clean)
    assert res.loaded == 2 and res.blank_lines == 0
    assert study.query("SELECT source_line FROM gen_rows ORDER BY source_line") == [(1,), (2,)]


# --------------------------------------------------------------------------------- --map, options objects
def issue_file(path: Path, n: int = 300) -> Path:
    """The issue's file: real answers with `question`, `options` as an object, `llm_output` and `model`
    (and the item's id and gold), as a user's own eval writes them."""
    rows = []
    for i in range(n):
        opts = [f"option {k} of {i // 2}" for k in range(4)]
        if i % 2:  # the same item shown in another order
            opts = opts[1:] + opts[:1]
        rows.append(
            {
                "item_id": f"q{i // 2}",
                "question": f"Question {i // 2}?",
                "options": dict(zip("ABCD", opts, strict=True)),
                "gold": "ABCD"[(0 - (i % 2)) % 4],
                "llm_output": f"I think the answer is {'ABCD'[i % 4]}.",
                "model": "gpt-small" if i % 3 else "gpt-large",
            }
        )
    return write_jsonl(path, rows)


def test_the_issue_file_needs_one_map_line(tmp_path: Path) -> None:
    src = issue_file(tmp_path / "answers.jsonl")
    db = tmp_path / "study.duckdb"
    p = run_cli("ingest", str(src), "--db", str(db), "--quiet")
    assert p.returncode == 1
    # one line: the missing fields, the columns the file has, and the --map that would fix it
    assert p.stderr.strip().splitlines() == [
        f"error: {src}: fields: missing required fields arm (or pass --arm), generation; the file's columns: "
        "item_id, question, options, gold, llm_output, model; try --map arm=model --map generation=llm_output"
    ]
    assert sorted(tmp_path.iterdir()) == [src]  # no study, .lock or .wal left behind

    p = run_cli(
        "ingest", str(src), "--db", str(db), "--quiet", "--map", "generation=llm_output", "--map", "arm=model"
    )
    assert p.returncode == 0, p.stderr
    assert "300 rows loaded" in p.stdout
    df = graded(Study(db))
    want = [json.loads(line) for line in src.read_text().splitlines()]
    got = {(r.item_id, r.orientation): r for r in df.itertuples()}
    assert len(got) == 300
    for w in want:
        r = got[(w["item_id"], "ABCD" if int(w["item_id"][1:]) * 2 == want.index(w) else "BCDA")]
        assert list(r.options) == list(w["options"].values())
        assert (r.generation, r.arm, r.gold_letter) == (w["llm_output"], w["model"], w["gold"])
        assert r.gold_option == w["options"][w["gold"]]
    assert set(df.arm) == {"gpt-small", "gpt-large"}
    # the model column is read as `model` as well as the arm
    assert Study(db).query("SELECT count(*) FROM gen_rows WHERE model = arm")[0][0] == 300


@pytest.mark.parametrize(
    ("maps", "says"),
    [
        (["colour=llm_output"], "unknown field 'colour'"),
        (["generation"], "write FIELD=COLUMN"),
        (["=llm_output"], "write FIELD=COLUMN"),
        (["generation=llm_output", "generation=model"], "two maps onto generation"),
        (["generation=reply"], "has no column 'reply'"),
    ],
    ids=["unknown-field", "no-equals", "no-field", "two-onto-one", "column-absent"],
)
def test_bad_map_is_a_usage_error(tmp_path: Path, maps: list[str], says: str) -> None:
    src = issue_file(tmp_path / "answers.jsonl", n=4)
    db = tmp_path / "study.duckdb"
    p = run_cli(
        "ingest", str(src), "--db", str(db), "--quiet", "--arm", "x", *[a for m in maps for a in ("--map", m)]
    )
    assert p.returncode == 2, p.stderr
    assert says in p.stderr and "Traceback" not in p.stderr
    assert sorted(tmp_path.iterdir()) == [src]


def test_map_on_csv_and_parquet(study: Study, tmp_path: Path) -> None:
    rows = [
        {
            "id": "t1",
            "stem": "Sky?",
            "choices": {"A": "blue", "B": "green"},
            "answer": "A",
            "response": "A",
            "model": "m1",
        },
        {
            "id": "t1",
            "stem": "Sky?",
            "choices": {"A": "green", "B": "blue"},
            "answer": 1,
            "response": "",
            "model": "m1",
        },
    ]
    maps = {
        "item_id": "id",
        "question": "stem",
        "options": "choices",
        "gold": "answer",
        "generation": "response",
        "arm": "model",
    }
    csv = tmp_path / "g.csv"
    pd.DataFrame(
        [{**r, "choices": json.dumps(r["choices"]), "answer": str(r["answer"])} for r in rows]
    ).to_csv(csv, index=False)
    res = ingest_file(study, csv, maps=maps)
    assert res.loaded == 2
    df = graded(study)
    assert [list(o) for o in df.options] == [["blue", "green"], ["green", "blue"]]
    assert list(df.orientation) == ["AB", "BA"] and set(df.gold_option) == {"blue"}
    assert list(df.generation) == ["A", ""] and set(df.arm) == {"m1"}
    # without the maps: one error for the header, naming the close columns
    with pytest.raises(InputError) as exc:
        ingest_file(study, csv)
    assert len(exc.value.problems) == 1
    assert (
        "try --map item_id=id --map arm=model --map question=stem --map options=choices --map gold=answer "
        "--map generation=response" in str(exc.value)
    )

    pq = tmp_path / "g.parquet"
    pd.DataFrame(
        [
            {**r, "choices": list(r["choices"].values()), "model": "m2", "answer": "AB"[i]}
            for i, r in enumerate(rows)
        ]
    ).to_parquet(pq)
    res = ingest_file(study, pq, maps={**maps, "arm": "model"})
    assert res.loaded == 2 and res.new_arms == ["m2"]
    with pytest.raises(
        InputError, match=r"g.parquet: fields: missing required fields item_id, arm .*columns: id, "
    ):
        ingest_file(study, pq)


OBJECT_OPTIONS: list[tuple[dict, str]] = [
    ({"B": "Rome", "A": "Paris"}, "keys, got B, A"),
    ({"A": "Paris", "C": "Rome"}, "keys, got A, C"),
    ({"a": "Paris", "b": "Rome"}, "keys, got a, b"),
    ({"1": "Paris", "2": "Rome"}, "keys, got 1, 2"),
    ({"A": "Paris", "B": 2}, "every option must be a string"),
    ({"A": "Paris"}, "needs at least 2 options, got 1"),
    ({"A": "Paris", "B": "Paris"}, "duplicate option texts: Paris"),
]


def test_options_object_errors_name_the_line(study: Study, tmp_path: Path) -> None:
    good = row(options={"A": "Paris", "B": "Rome"}, gold="B")
    f = write_jsonl(
        tmp_path / "g.jsonl",
        [good] + [row(item_id=f"x{i}", options=o) for i, (o, _) in enumerate(OBJECT_OPTIONS)],
    )
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    got = {p.line: str(p) for p in exc.value.problems}
    assert set(got) == set(range(2, len(OBJECT_OPTIONS) + 2)), got
    for i, (_, reason) in enumerate(OBJECT_OPTIONS, start=2):
        assert got[i].startswith(f"{f}:{i}: options: ") and reason in got[i], got[i]
    assert "displayed letters A, B, ... in order" in got[2]
    assert count(study, "gen_rows") == 0
    ingest_file(study, write_jsonl(tmp_path / "ok.jsonl", [good]))
    assert graded(study).gold_option.tolist() == ["Rome"]


def test_failed_ingest_leaves_an_existing_study_untouched(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    run_cli("ingest", str(write_jsonl(tmp_path / "g.jsonl", [row()])), "--db", str(db), "--quiet", check=True)
    before = (count(Study(db), "gen_rows"), count(Study(db), "ingests"))
    p = run_cli("ingest", str(issue_file(tmp_path / "a.jsonl", n=4)), "--db", str(db), "--quiet")
    assert p.returncode == 1 and db.exists()
    assert (count(Study(db), "gen_rows"), count(Study(db), "ingests")) == before == (1, 1)


# --- the canonical order from a row's orientation label (issue 17: README's own workflow) ------------------
ITEMS_17 = [
    {
        "item_id": "s1",
        "question": "Primary colour?",
        "options": ["Red", "Green-blue", "Brown", "Grey"],
        "gold": "A",
    },
    {"item_id": "s2", "question": "Is ice cold?", "options": ["Yes", "No"], "gold": 1},
    {"item_id": "s3", "question": "Odd one?", "options": ["2", "4", "7"], "gold": "C"},
]


def test_orient_then_answers_in_arrival_order_ingest_without_items(tmp_path: Path) -> None:
    import random

    items = write_jsonl(tmp_path / "items.jsonl", ITEMS_17)
    prompts = tmp_path / "prompts.jsonl"
    run_cli("orient", str(items), "--out", str(prompts), check=True)
    rows = [json.loads(x) for x in prompts.read_text().splitlines()]
    answers = [{**r, "arm": arm, "generation": "B"} for arm in ("base", "steered") for r in rows]
    random.Random(3).shuffle(answers)  # as a concurrent runner (or `mcqaudit generate`) writes them
    assert answers[0]["orientation"] != "ABCD" or answers[1]["orientation"] != "ABCD"
    gens = write_jsonl(tmp_path / "gen.jsonl", answers)
    db = tmp_path / "s.duckdb"
    p = run_cli("ingest", str(gens), "--db", str(db), "--quiet")
    assert p.returncode == 0, p.stderr
    study = Study(db)
    got = {r[0]: list(r[1]) for r in study.query("SELECT item_id, options FROM items")}
    assert got == {it["item_id"]: it["options"] for it in ITEMS_17}
    assert study.query("SELECT item_id, gold_index FROM items ORDER BY 1") == [
        ("s1", 0),
        ("s2", 1),
        ("s3", 2),
    ]
    # every row keeps the label orient gave it, and its gold is the items file's gold option
    stored = study.query("SELECT item_id, arm, orientation, options, gold_option FROM graded_rows")
    want = {
        (r["item_id"], a, r["orientation"], tuple(r["options"])) for a in ("base", "steered") for r in rows
    }
    assert {(i, a, o, tuple(opts)) for i, a, o, opts, _ in stored} == want
    gold = {
        it["item_id"]: it["options"][ord(it["gold"]) - 65 if isinstance(it["gold"], str) else it["gold"]]
        for it in ITEMS_17
    }
    assert all(g == gold[i] for i, _, _, _, g in stored)
    # a second file of the same items, in yet another order, lands on the same rows
    random.Random(4).shuffle(answers)
    again = ingest_file(study, write_jsonl(tmp_path / "gen2.jsonl", answers))
    assert (again.loaded, again.unchanged) == (0, len(answers))


def test_a_row_label_fixes_the_canonical_order(study: Study, tmp_path: Path) -> None:
    # DESIGN §3: a row labelled BCDA showing [x, y, z, w] says the canonical order is [w, x, y, z]
    rows = [
        row(options=["x", "y", "z", "w"], orientation="BCDA", gold="D"),
        row(options=["w", "x", "y", "z"], gold="A", arm="s"),  # unlabelled: derived against that order
    ]
    ingest_file(study, write_jsonl(tmp_path / "g.jsonl", rows))
    assert study.query("SELECT options, gold_index, origin FROM items") == [
        (["w", "x", "y", "z"], 0, "row-label")
    ]
    assert study.query("SELECT arm, orientation, gold_option FROM graded_rows ORDER BY arm") == [
        ("base", "BCDA", "w"),
        ("s", "ABCD", "w"),
    ]


def test_rows_whose_labels_contradict_each_other_are_errors(study: Study, tmp_path: Path) -> None:
    rows = [
        row(orientation="ABCD"),
        row(arm="s", options=["Rome", "Berlin", "Madrid", "Paris"], orientation="BCDA", gold="D"),
        # the same displayed order as line 1, but another label: the two labels cannot both be true
        row(arm="t", orientation="DABC"),
    ]
    f = write_jsonl(tmp_path / "g.jsonl", rows)
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    assert [str(p) for p in exc.value.problems] == [
        f"{f}:3: orientation: 'DABC' contradicts the orientation 'ABCD' of line 1 (same item): by that label "
        "this option order is 'ABCD'"
    ]
    assert count(study, "gen_rows") == 0 and count(study, "items") == 0


def test_a_label_against_an_item_the_study_has_is_an_error(study: Study, tmp_path: Path) -> None:
    ingest_file(study, write_jsonl(tmp_path / "a.jsonl", [row()]))
    f = write_jsonl(tmp_path / "b.jsonl", [row(arm="s", orientation="ABDC")])
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    assert [str(p) for p in exc.value.problems] == [
        f"{f}:1: orientation: 'ABDC' contradicts the option order, which is 'ABCD' by item cap-fr's "
        "canonical order (already in the study)"
    ]


# --- what looks identical to a person is refused, not accepted silently (issue 18) --------------------------
LOOK_ALIKE: list[tuple[dict, str, str]] = [
    (
        row(options=["Paris", "Paris "]),
        "options",
        'options A and B look the same to a reader ("Paris" and "Paris ")',
    ),
    (row(options=["caf\u00e9", "cafe\u0301"]), "options", "options A and B look the same to a reader"),
    (
        row(options=["Yes", "no", "yes"]),
        "options",
        'options A and C look the same to a reader ("Yes" and "yes")',
    ),
    # the cheap guard before the full comparison (issue 23) lets none of these through: a run of spaces,
    # a tab, a space at an option's start, a unit separator inside an option (the guard's join character)
    (row(options=["New  York", "New York"]), "options", "options A and B look the same to a reader"),
    (row(options=["a\tb", "a b"]), "options", "options A and B look the same to a reader"),
    (row(options=[" Lyon", "Nice", "lyon"]), "options", "options A and C look the same to a reader"),
    (row(options=["x\u001fY", "x\u001fy"]), "options", "options A and B look the same to a reader"),
    # the guard reads the options' JSON text: an escaped quote or backslash inside an option; non-ASCII
    # options that differ only in case
    (row(options=["Ärger", "Freude", "ärger"]), "options", "options A and C look the same to a reader"),
    (row(options=['say "hi"', 'Say "Hi"']), "options", "options A and B look the same to a reader"),
    (row(options=["C:\\dir", "c:\\DIR"]), "options", "options A and B look the same to a reader"),
    (
        row(options=["Rome", "Ro\u200bme"]),
        "options",
        "they differ only in case, spaces, invisible characters",
    ),
    (
        row(arm="base\u200b"),
        "arm",
        "has an invisible character (U+200B): it would look like another arm's name",
    ),
    (row(arm="base\u202e"), "arm", "has an invisible character (U+202E)"),
    (row(arm="base "), "arm", "has spaces at its start or end"),
    (row(arm="cafe\u0301"), "arm", 'is not in Unicode NFC form ("caf\u00e9" composed)'),
    (
        row(option_logprobs={"A": float("nan"), "B": -1.0}),
        "option_logprobs",
        "values must be finite numbers: NaN and Infinity are not JSON numbers",
    ),
    (row(option_logprobs={"A": float("inf")}), "option_logprobs", "values must be finite numbers"),
    (
        row(option_logprobs={"A": float("-inf")}),
        "option_logprobs",
        "(for a probability of 0, leave the letter out)",
    ),
]


@pytest.mark.parametrize(
    ("bad", "field", "reason"), LOOK_ALIKE, ids=[f"{b[1]}-{i}" for i, b in enumerate(LOOK_ALIKE)]
)
def test_look_alikes_and_non_finite_logprobs_are_refused(
    study: Study, tmp_path: Path, bad: dict, field: str, reason: str
) -> None:
    f = tmp_path / "g.jsonl"
    f.write_text(json.dumps(row(item_id="ok-item")) + "\n" + json.dumps(bad, ensure_ascii=False) + "\n")
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    assert [(p.line, p.field) for p in exc.value.problems] == [(2, field)], str(exc.value)
    assert reason in exc.value.problems[0].reason, str(exc.value)
    assert count(study, "gen_rows") == 0


def test_look_alike_options_between_rows_of_one_item_are_refused(study: Study, tmp_path: Path) -> None:
    f = write_jsonl(
        tmp_path / "g.jsonl", [row(), row(arm="s", options=["Paris ", "Rome", "Berlin", "Madrid"])]
    )
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    assert [(p.line, p.field) for p in exc.value.problems] == [(2, "options")]


@pytest.mark.parametrize("path", ["fast", "line-level"])
def test_a_duplicate_key_is_refused_with_its_line(study: Study, tmp_path: Path, path: str) -> None:
    dup = json.dumps(row(item_id="b"))[:-1] + ', "gold": "B"}'  # first wins in JSON readers: refused instead
    lines = [json.dumps(row(item_id="a")), dup, json.dumps(row(item_id="c"))]
    if path == "line-level":
        lines.insert(1, "")  # a blank line: staged line by line from the start
    f = tmp_path / "g.jsonl"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as exc:
        ingest_file(study, f)
    where = 3 if path == "line-level" else 2
    assert [str(p) for p in exc.value.problems] == [
        f'{f}:{where}: line: duplicate key "gold" in the object: a JSON reader keeps only one of its values, '
        "so say it once"
    ]
    # a key's name inside a text is no duplicate
    ok = write_jsonl(tmp_path / "ok.jsonl", [row(generation='I would say "gold" is "A".')])
    assert ingest_file(study, ok).loaded == 1
