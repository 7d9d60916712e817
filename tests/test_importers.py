"""Framework importers: real Inspect AI and lm-eval logs (tests/fixtures/, made by scripts/make_fixtures.py)
through `mcqaudit ingest`, into graded_rows: the displayed order, gold following its option, the raw
generation, the framework's own letter as the `user` parser, idempotence, and clear errors on damaged logs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from mcqaudit.app.ingest import ingest_file
from mcqaudit.ingest import detect_format
from mcqaudit.ingest.errors import InputError
from mcqaudit.store import Study
from tests.helpers import run_cli

FIXTURES = Path(__file__).parent / "fixtures"
INSPECT = FIXTURES / "inspect"
LMEVAL = FIXTURES / "lmeval"
LM_GEN = next(LMEVAL.glob("samples_mcq_gen_2*.jsonl"))
LM_REP = next(LMEVAL.glob("samples_mcq_gen_rep_*.jsonl"))
LM_LL = next(LMEVAL.glob("samples_mcq_ll_*.jsonl"))

# the items of every fixture, in canonical order, with the gold option (scripts/make_fixtures.py: ITEMS)
CANON = {
    "geo-fr": (["Paris", "Rome", "Berlin", "Madrid"], "Paris"),
    "arith-7": (["5", "6", "7", "8"], "7"),
    "planet-red": (["Venus", "Mars", "Jupiter", "Saturn"], "Mars"),
    "tf-boil": (["True", "False"], "True"),
    "tf-sun": (["True", "False"], "False"),
}
# the option the stand-in model picks (None: it answers with no letter)
PICKS = {"geo-fr": "Paris", "arith-7": "7", "planet-red": "Venus", "tf-boil": "True", "tf-sun": None}
ARITH_PROSE = "3 + 4 = 7, so the option that says 7 is right.\n\nANSWER: {}"
REFUSAL = "I would rather not answer questions about astronomy."


def graded(study: Study) -> pd.DataFrame:
    return study.query_df("SELECT * FROM graded_rows ORDER BY arm, item_id, orientation, sample")


def letter_of(options: list[str], text: str) -> str:
    return "ABCDEFGHIJ"[list(options).index(text)]


def check_rows(df: pd.DataFrame) -> None:
    """What holds for every fixture row: the gold letter follows the gold option in the displayed order,
    the orientation is derived from that order, and the generation names the picked option's letter."""
    for r in df.itertuples():
        canon, gold = CANON[r.item_id]
        shown = list(r.options)
        assert sorted(shown) == sorted(canon)
        assert r.gold_option == gold and r.gold_letter == letter_of(shown, gold)
        assert r.orientation == "".join(letter_of(canon, o) for o in shown)
        pick = PICKS[r.item_id]
        if pick is None:
            assert r.generation == REFUSAL
        elif r.item_id == "arith-7":
            assert r.generation == ARITH_PROSE.format(letter_of(shown, pick))
        elif r.item_id.startswith("tf-"):
            assert r.generation == letter_of(shown, pick)
        else:
            assert r.generation == f"ANSWER: {letter_of(shown, pick)}"


# ------------------------------------------------------------------------------------------------ Inspect
def test_inspect_eval_log_through_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    p = run_cli("ingest", str(INSPECT / "plain.eval"), "--db", str(db), "--quiet")
    assert p.returncode == 0, p.stderr
    assert "10 rows loaded" in p.stdout and "new arms: mockllm/model" in p.stdout
    df = graded(Study(db))
    check_rows(df)
    assert len(df) == 10 and set(df.arm) == {"mockllm/model"}
    assert sorted(df["sample"].unique()) == [0, 1]  # epochs 1, 2
    assert set(df.orientation) == {"ABCD", "AB"}
    geo = df[(df.item_id == "geo-fr") & (df["sample"] == 0)].iloc[0]
    assert geo.question == "What is the capital of France?"
    assert "A) Paris\nB) Rome\nC) Berlin\nD) Madrid" in geo.prompt
    assert (geo.user_letter, geo.strict_letter, geo.final_verdict) == ("A", "A", "CORRECT")
    boil = df[df.item_id == "tf-boil"].iloc[0]
    assert boil.question == "Water boils at 100 °C at sea level."
    # Inspect's own parser (choice scorer) reads no letter in a bare "A"; ours does
    assert pd.isna(boil.user_letter) and boil.strict_letter == "A"
    planet = df[df.item_id == "planet-red"].iloc[0]
    assert (planet.user_letter, planet.final_verdict) == ("A", "INCORRECT")

    again = run_cli("ingest", str(INSPECT / "plain.eval"), "--db", str(db), "--quiet")
    assert again.returncode == 0, again.stderr
    assert "0 rows loaded; 10 unchanged" in again.stdout
    assert graded(Study(db)).row_id.tolist() == df.row_id.tolist()


def test_inspect_solver_shuffle_keeps_the_order_the_model_saw(study: Study) -> None:
    ingest_file(study, INSPECT / "plain.eval", arm="base")  # fixes the canonical order
    res = ingest_file(study, INSPECT / "solver_shuffle.eval", arm="shuffled")
    assert res.loaded == 5 and res.format == "inspect"
    df = graded(study)
    check_rows(df)
    sh = df[df.arm == "shuffled"].set_index("item_id")
    # Inspect logs these completions rewritten to the dataset order ("ANSWER: A" for geo-fr); the row keeps
    # what the model said, over the options as it saw them
    assert list(sh.loc["geo-fr"].options) == ["Madrid", "Rome", "Paris", "Berlin"]
    assert sh.loc["geo-fr"].orientation == "DBAC"
    assert (sh.loc["geo-fr"].gold_letter, sh.loc["geo-fr"].generation) == ("C", "ANSWER: C")
    assert sh.loc["geo-fr"].final_verdict == "CORRECT"
    # the choice scorer's answer is a dataset-order letter; mapped into the displayed order
    assert sh.loc["geo-fr"].user_letter == "C"
    assert sh.loc["arith-7"].generation == ARITH_PROSE.format("B")
    assert sh.loc["arith-7"].user_letter == "B" and sh.loc["arith-7"].gold_letter == "B"
    assert (sh.loc["planet-red"].generation, sh.loc["planet-red"].user_letter) == ("ANSWER: B", "B")
    assert sh.loc["planet-red"].final_verdict == "INCORRECT"
    assert sh.loc["tf-boil"].orientation == "BA" and sh.loc["tf-boil"].final_verdict == "CORRECT"
    assert "A) Madrid\nB) Rome\nC) Paris\nD) Berlin" in sh.loc["geo-fr"].prompt


def test_inspect_json_log_with_dataset_shuffle(study: Study) -> None:
    path = INSPECT / "dataset_shuffle.json"
    assert detect_format(path) == "inspect"
    res = ingest_file(study, path, items_path=_items_file(study.path.parent))
    assert res.loaded == 5
    df = graded(study)
    check_rows(df)
    assert "ABCD" not in set(df.orientation)  # the data set's shuffle moved every 4-option item
    assert df.set_index("item_id").loc["arith-7"].user_letter == letter_of(
        df.set_index("item_id").loc["arith-7"].options, "7"
    )


def _items_file(folder: Path) -> Path:
    path = folder / "items.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for item_id, (options, gold) in CANON.items():
            fh.write(
                json.dumps(
                    {"item_id": item_id, "question": "?", "options": options, "gold": options.index(gold)}
                )
            )
            fh.write("\n")
    return path


def test_corrupt_eval_logs_are_refused_whole(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    cut = tmp_path / "cut.eval"
    cut.write_bytes((INSPECT / "plain.eval").read_bytes()[:10_000])
    p = run_cli("ingest", str(cut), "--db", str(db), "--quiet")
    assert p.returncode == 1
    assert f"{cut}: file: not a readable Inspect .eval log (not a zip archive" in p.stderr
    assert sorted(tmp_path.iterdir()) == [cut]  # the failed ingest into a new path left no study behind

    data = bytearray((INSPECT / "plain.eval").read_bytes())
    at = data.index(b"samples/arith-7_epoch_1.json") + 200  # inside the member's compressed bytes
    data[at : at + 16] = b"\0" * 16
    damaged = tmp_path / "damaged.eval"
    damaged.write_bytes(bytes(data))
    study = Study(db, create=True)
    with pytest.raises(InputError) as exc:
        ingest_file(study, damaged)
    assert str(exc.value).startswith(f"{damaged}: file: samples/arith-7_epoch_1.json cannot be read")
    assert len(graded(study)) == 0


def test_a_sample_without_what_a_row_needs(study: Study, tmp_path: Path) -> None:
    log = json.loads((INSPECT / "dataset_shuffle.json").read_text(encoding="utf-8"))
    for s in log["samples"]:
        if s["id"] == "planet-red":
            del s["choices"]
        if s["id"] == "tf-sun":
            s["target"] = ["A", "B"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(log), encoding="utf-8")
    with pytest.raises(InputError) as exc:
        ingest_file(study, bad)
    lines = str(exc.value).splitlines()
    assert (
        f"{bad}:sample 3: options: the sample has no choices (not a multiple-choice sample) (id planet-red, epoch 1)"
        in lines
    )
    assert f"{bad}:sample 5: gold: target ['A', 'B'] is not one option letter (id tf-sun, epoch 1)" in lines
    assert len(graded(study)) == 0  # nothing written

    res = ingest_file(study, bad, skip_bad=True)
    assert (res.loaded, res.rejected) == (3, 2)
    rejected = study.query("SELECT line, reason FROM rejected_rows ORDER BY line")
    assert [r[0] for r in rejected] == [3, 5] and rejected[0][1].startswith(
        "options: the sample has no choices"
    )


# ------------------------------------------------------------------------------------------------ lm-eval
def test_lm_eval_samples_through_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    p = run_cli("ingest", str(LM_GEN), "--db", str(db), "--quiet")
    assert p.returncode == 0, p.stderr
    # the arm is the model_name of the results file beside the samples file
    assert "10 rows loaded" in p.stdout and "new arms: scripted-stand-in" in p.stdout
    df = graded(Study(db))
    check_rows(df)
    # each item in two orientations (the data set's own rotation; lm-eval never reorders)
    assert set(df.orientation) == {"ABCD", "BCDA", "AB", "BA"}
    geo = df[df.orientation.isin(["BCDA"]) & (df.item_id == "geo-fr")].iloc[0]
    assert geo.prompt == "What is the capital of France?\nA. Rome\nB. Berlin\nC. Madrid\nD. Paris\nAnswer:"
    assert (geo.gold_letter, geo.generation, geo.user_letter) == ("D", "ANSWER: D", "D")
    # the default filter is the file's first (strict-match); it finds nothing in a bare letter
    boil = df[df.item_id == "tf-boil"]
    assert boil.user_letter.isna().all() and set(boil.strict_letter) == {"A", "B"}
    meta = json.loads(Study(db).query("SELECT metadata FROM gen_rows WHERE row_id = ?", [geo.row_id])[0][0])
    assert meta["lm_eval"]["filtered_resps"] == {"strict-match": ["D"], "flexible-extract": ["(D)"]}


def test_lm_eval_named_filter_and_repeats(study: Study) -> None:
    assert detect_format(LM_GEN) == "lm-eval"
    ingest_file(study, LM_GEN, lm_eval_filter="flexible-extract")
    df = graded(study).set_index(["item_id", "orientation"])
    assert df.loc[("planet-red", "BCDA")].user_letter == "D"  # "(D)", as the filter gives it
    assert pd.isna(df.loc[("tf-sun", "AB")].user_letter)  # lm-eval's "[invalid]" is no letter

    res = ingest_file(study, LM_REP, arm="rep")
    assert res.loaded == 4
    rep = graded(study).query("arm == 'rep'")
    assert sorted(rep["sample"]) == [0, 0, 1, 1]
    # take_first reduced the two generations to one result: no single row can claim it
    assert rep.user_letter.isna().all()


def test_lm_eval_errors(study: Study, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--lm-eval-filter: no filter 'exact' in the file"):
        ingest_file(study, LM_GEN, lm_eval_filter="exact")
    with pytest.raises(InputError, match="--lm-eval-filter: applies only to lm-eval"):
        ingest_file(study, INSPECT / "plain.eval", lm_eval_filter="strict-match")

    with pytest.raises(InputError) as exc:
        ingest_file(study, LM_LL)
    assert "record 1: generation: resps hold no generated text (a loglikelihood" in str(exc.value)

    # no results file beside it: no model name, so the arm must be given; a cut last line is its own record
    alone = tmp_path / "samples_mcq_gen_2020-01-01T00-00-00.jsonl"
    shutil.copyfile(LM_GEN, alone)
    text = alone.read_bytes()
    alone.write_bytes(text[: text.rindex(b"\n", 0, len(text) - 1) + 40])
    with pytest.raises(InputError) as exc:
        ingest_file(study, alone)
    # one line naming --arm, not one "arm: missing required field" per sample
    assert [str(p) for p in exc.value.problems] == [
        f"{alone}: --arm: no results_<time>.json with a model_name beside the samples file, so the rows have "
        "no arm: pass --arm NAME (or put the run's results file beside it)"
    ]
    with pytest.raises(InputError) as exc:
        ingest_file(study, alone, arm="base")
    lines = str(exc.value).splitlines()
    assert any(
        ln.startswith(f"{alone}:record 11: line: not a JSON sample record, truncated or damaged")
        and ln.endswith("(line 20)")
        for ln in lines
    )
    res = ingest_file(study, alone, arm="base", skip_bad=True)
    assert (res.loaded, res.rejected) == (10, 1)
    assert len(graded(study)) == 10


def test_format_detection_leaves_plain_jsonl_alone(tmp_path: Path) -> None:
    plain = tmp_path / "g.json"
    plain.write_text(json.dumps({"item_id": "x", "version": 2, "status": "ok"}) + "\n", encoding="utf-8")
    assert detect_format(plain) == "jsonl"
    assert detect_format(INSPECT / "plain.eval") == "inspect"
    assert detect_format(LM_GEN, "lm-eval") == "lm-eval"
    with pytest.raises(InputError, match="use jsonl, csv, parquet, inspect, lm-eval"):
        detect_format(LM_GEN, "inspect-ai")


# ------------------------------------------------------------------------------------ folders and globs
def test_lm_eval_samples_without_results_is_one_arm_error(tmp_path: Path) -> None:
    alone = tmp_path / LM_GEN.name
    shutil.copyfile(LM_GEN, alone)
    db = tmp_path / "s.duckdb"
    p = run_cli("ingest", str(alone), "--db", str(db), "--quiet")
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "--arm" in lines[0] and "results_" in lines[0], p.stderr
    assert not db.exists()
    # with the results file beside it, the arm is the model name
    shutil.copyfile(next(LMEVAL.glob("results_*.json")), tmp_path / next(LMEVAL.glob("results_*.json")).name)
    run_cli("ingest", str(alone), "--db", str(db), "--quiet", check=True)
    assert set(graded(Study(db)).arm) == {"scripted-stand-in"}


def _log_folder(folder: Path) -> Path:
    """Two Inspect logs of two models: the fixture .eval log as made, and the JSON log renamed to another."""
    folder.mkdir()
    shutil.copyfile(INSPECT / "plain.eval", folder / "plain.eval")
    log = json.loads((INSPECT / "dataset_shuffle.json").read_text())
    log["eval"]["model"] = "mockllm/other"
    (folder / "other.json").write_text(json.dumps(log))
    (folder / "notes.txt").write_text("not a log")
    return folder


@pytest.mark.parametrize("how", ["folder", "glob"])
def test_a_folder_of_inspect_logs(tmp_path: Path, how: str) -> None:
    logs = _log_folder(tmp_path / "logs")
    db = tmp_path / "s.duckdb"
    arg = str(logs) if how == "folder" else str(logs / "*")
    p = run_cli("ingest", arg, "--db", str(db), "--quiet")
    assert p.returncode == 0, p.stderr
    df = graded(Study(db))
    assert df.groupby("arm").size().to_dict() == {"mockllm/model": 10, "mockllm/other": 5}
    assert set(df.item_id) == set(CANON) and (df.gold_option == df.item_id.map(lambda i: CANON[i][1])).all()
    # one transaction: a damaged log in the folder writes nothing of the others, and names its file
    (logs / "cut.eval").write_bytes((INSPECT / "plain.eval").read_bytes()[:10_000])
    db2 = tmp_path / "s2.duckdb"
    p = run_cli("ingest", arg, "--db", str(db2), "--quiet")
    assert p.returncode == 1
    assert f"{logs / 'cut.eval'}: file: not a readable Inspect .eval log" in p.stderr
    assert not db2.exists()
    # --arm puts every log's rows under one arm
    (logs / "cut.eval").unlink()
    p = run_cli("ingest", str(logs / "plain.eval"), "--db", str(db2), "--quiet", "--arm", "mine")
    assert p.returncode == 0 and set(graded(Study(db2)).arm) == {"mine"}


def test_an_empty_folder_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    p = run_cli("ingest", str(tmp_path / "empty"), "--db", str(tmp_path / "s.duckdb"), "--quiet")
    assert p.returncode == 2 and "no files" in p.stderr and "Traceback" not in p.stderr


def test_an_lm_eval_target_that_names_no_option_is_refused_not_replaced(tmp_path: Path) -> None:
    """`target: "Z"` on a 4-option doc: the doc's own `answer` is not used in its place (issue 18)."""
    import json

    from mcqaudit.ingest import lmeval

    rec = {
        "doc_id": 0,
        "doc": {"question": "Q?", "choices": ["w", "x", "y", "z"], "answer": 1},
        "target": "Z",
        "resps": [["B"]],
        "filtered_resps": ["B"],
        "filter": "none",
    }
    src = tmp_path / "samples_t_2026.jsonl"
    src.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "doc_id": 1, "target": None}) + "\n")
    _, records = lmeval.read_samples(src, arm="a")
    assert (records[0].field, records[0].reason) == (
        "gold",
        "target 'Z' is neither an option letter (A..D), an index nor an option text",
    )
    assert records[1].row is not None and records[1].row["gold"] == 1  # no target: the doc's answer
