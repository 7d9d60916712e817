"""`mcqaudit info` without numpy, pandas or the metrics, and its cache (issue 23).

The twin: the flags ``info`` builds from DuckDB's counts (:mod:`mcqaudit.store.facts` →
:func:`mcqaudit.metrics.facts.quick_flags`) equal, key for key, those ``metrics.compute(frames, n_boot=0)``
raises — on the fixture studies, the demo, studies made to fire each flag, and random studies — and so do the
counts beneath them (each parser's item-cluster sums, the log-prob cross-check, rows, graded rows and items per
arm). The summary's tables equal what the pandas code printed before. The imports: ``mcqaudit --help``, the
CLI module and ``info`` load none of numpy, pandas, pyarrow or the metrics' numpy modules, and ``info`` from
its cache not even duckdb. The cache: a second ``info`` prints the same bytes from it, and any change to the
study (through DuckDB, as every writer makes it) is seen at once.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mcqaudit import orient
from mcqaudit.app.info import info_facts
from mcqaudit.metrics import CI_FLAGS, compute, sort_flags
from mcqaudit.metrics.cells import cells_of, rows_of
from mcqaudit.metrics.facts import FactCounts, quick_flags
from mcqaudit.metrics.parsers import parser_tallies
from mcqaudit.store import infocache
from mcqaudit.store.db import Study
from mcqaudit.store.facts import fact_counts
from mcqaudit.store.frames import load_frames
from mcqaudit.store.sidecars import info_cache_path
from mcqaudit.store.summary import summarise
from tests.builders import NO_POSITION_EFFECT, StudyBuilder, fixture_study, hand_study, two_family_study
from tests.helpers import REPO, process_env, run_cli, run_process

HEAVY = (
    "numpy",
    "pandas",
    "pyarrow",
    "mcqaudit.metrics.compute",
    "mcqaudit.metrics.bootstrap",
    "mcqaudit.app.report",
)


# --- the twin ------------------------------------------------------------------------------------------------
def reference(study: Study) -> tuple[list[Any], tuple[str, ...]]:
    """What `info` printed before issue 23: the flags of ``compute`` without resamples."""
    res = compute(load_frames(study), n_boot=0)
    return sort_flags(res["flags"]), (CI_FLAGS if res["delta_accuracy"] else ())


def _arr(sample: list[list[float]] | None) -> np.ndarray | None:
    return None if sample is None else np.asarray(sample, dtype=np.float64)


def assert_twin(study: Study) -> FactCounts:
    """The flags and every count beneath them agree with the metrics' numpy path."""
    c = fact_counts(study)
    assert quick_flags(c) == reference(study)
    frames = load_frames(study)
    R = rows_of(frames)
    tallies = parser_tallies(frames, R, cells_of(R))
    assert [p.name for p in c.parsers] == [t.name for t in tallies]
    for mine, theirs in zip(c.parsers, tallies, strict=True):
        for got, want in ((mine.disagreement, theirs.disagreement),) + (
            ((mine.letters.rates, theirs.letters.rates),) if theirs.letters is not None else ()
        ):
            np.testing.assert_array_equal(_arr(got.pooled), want.pooled, err_msg=mine.name)
            if want.spot is None:
                assert got.spot is None, mine.name
            else:
                np.testing.assert_array_equal(_arr(got.spot), want.spot, err_msg=mine.name)
        assert (mine.letters is None) == (theirs.letters is None), mine.name
    res = compute(frames, n_boot=0)
    for arm, m in res["metrics"].items():
        assert (c.rows_by_arm[arm], c.graded_by_arm[arm], c.items_by_arm[arm]) == (
            m["rows"],
            m["graded"],
            m["items"],
        )
        lp = m["logprob_crosscheck"]
        got = c.logprob.get(arm)
        assert (lp is None) == (got is None or got.rows == 0), arm
        if lp is not None and got is not None:
            assert got.items == lp["items"] and got.rows == lp["accuracy_text"]["n"]
    assert c.uniform_reviewed_rows == res["audit"]["uniform_reviewed_rows"]
    assert c.arm_fingerprints == frames.info.arm_fingerprints
    return c


def test_fixture_studies(tmp_path: Path) -> None:
    for k, b in enumerate(
        [
            fixture_study(tmp_path / "a.duckdb"),
            fixture_study(tmp_path / "b.duckdb", standin=True, arm_names=("ctl", "x<y>", "z|w")),
            hand_study(tmp_path, "c.duckdb"),
            two_family_study(tmp_path / "d.duckdb", *NO_POSITION_EFFECT),
        ]
    ):
        c = assert_twin(b.build())
        assert c.rows_by_arm, k


def test_each_flag_fires_alike(tmp_path: Path) -> None:
    """Studies made so that judge_config_mixed, design_imbalance (unbalanced gold, one orientation),
    ungraded_rows, judge_unaudited (--no-judge, too few reviews), parser_disagreement on verdicts and on letters
    (pooled and in the spot check) and logprob_mismatch fire."""
    b = StudyBuilder(tmp_path / "flags.duckdb")
    b.meta["unaudited"] = "true"
    spot = []
    for k in range(150):
        item = b.item(f"i{k:03d}", n=4, gold=0)  # gold always canonical A: with one orientation, unbalanced
        for arm, fp in (("base", "fp-1"), ("treated", "fp-2")):
            pick = "A" if k % 3 else ("OTHER" if k % 2 else "B")
            rid = b.row(arm, item, "ABCD", pick if k % 17 else None, fp=fp, naive="C", user="A",
                        logprobs={"A": -2.0, "B": -0.5} if k % 2 else {"a": -1.0, "B": -1.0},
                        frameworks={"fw": "A" if k % 5 else "E"})  # fmt: skip
            spot.append(rid)
    b.spot.append(("uniform", spot))
    for rid in spot[:30]:
        b.review(rid, "CORRECT", "A")
    c = assert_twin(b.build())
    names = {f["name"] for f in quick_flags(c)[0]}
    assert names >= {"judge_config_mixed", "design_imbalance", "ungraded_rows", "judge_unaudited",
                     "parser_disagreement", "logprob_mismatch"}  # fmt: skip


def test_empty_and_tiny_studies(tmp_path: Path) -> None:
    empty = StudyBuilder(tmp_path / "empty.duckdb")
    assert_twin(empty.build())
    one = StudyBuilder(tmp_path / "one.duckdb")
    one.item("q", n=2)
    one.row("base", "q", "AB", None, status="pending")
    assert_twin(one.build())


@pytest.mark.parametrize("seed", range(6))
def test_random_studies(tmp_path: Path, seed: int) -> None:
    """Random arms, option counts, orientation sets, verdict sources, judge errors and pending rows, several
    fingerprints, reviews with and without a letter, spot checks of each kind, log-probs with ties and keys
    beyond the options, framework and user letters beyond the options."""
    rng = random.Random(seed)
    b = StudyBuilder(tmp_path / f"r{seed}.duckdb")
    arms = ["base", "a1", "a2"][: rng.choice([1, 2, 3])]
    fps = ["fp-x", "fp-y"] if seed % 3 == 0 else ["fp-x"]
    ids = []
    for k in range(rng.randint(15, 60)):
        n = rng.choice([2, 4, 4, 5])
        item = b.item(f"q{k}", n=n, gold=rng.randrange(n))
        labels = orient.scheme_labels(n, rng.choice(["cyclic", "swap", "random:2"]), seed=k)
        for arm in arms:
            for lab in labels:
                letters = "ABCDE"[:n]
                pick = rng.choice([*letters, "OTHER", None, "F"])
                src = (
                    rng.choice(["judge", "judge", "strict", "blank"]) if pick not in (None, "F") else "judge"
                )
                if src == "blank":
                    pick = "OTHER"
                lp = None
                if rng.random() < 0.4:
                    lp = {x: rng.choice([-1.0, -2.0, -0.5]) for x in rng.sample("ABCDEFab", 3)}
                rid = b.row(
                    arm, item, lab, pick, source=src, status=rng.choice(["ok", "ok", "pending"]),
                    fp=rng.choice(fps), naive=rng.choice(["same", None, "A", "E"]),
                    user=rng.choice(["none", "same", "B", "Z"]), logprobs=lp, named=rng.random() < 0.9,
                    frameworks={"fw1": rng.choice([None, "A", "B", "G"]), "fw2": rng.choice(["A", None])},
                )  # fmt: skip
                ids.append(rid)
    rng.shuffle(ids)
    b.spot.append(("uniform", ids[: len(ids) // 2]))
    if seed % 2:
        b.spot.append(("stratified", ids[-10:]))
    for rid in ids[: rng.randint(0, len(ids) // 3)]:
        b.review(rid, rng.choice(["CORRECT", "INCORRECT", "OTHER"]), rng.choice([None, "A", "B"]))
    assert_twin(b.build())


def test_the_demo(tmp_path_factory: pytest.TempPathFactory) -> None:
    from mcqaudit.demo import build_demo

    assert_twin(Study(build_demo(tmp_path_factory.mktemp("demo") / "demo.duckdb")))


# --- the summary without pandas --------------------------------------------------------------------------------
def test_rows_per_arm_and_orientation_pivot_as_pandas_did(tmp_path: Path) -> None:
    """Arms in ingest order, orientations in the order they first appear, a missing cell 0 (the pandas pivot
    ``sort=False`` the table was before)."""
    import pandas as pd

    b = StudyBuilder(tmp_path / "p.duckdb")
    b.item("q2", n=2)
    b.item("q4", n=4)
    b.row("second", "q4", "ABCD", "A")
    b.row("first", "q2", "BA", "A")
    b.row("first", "q2", "AB", "A")
    b.row("second", "q4", "CDAB", "A")
    study = b.build()
    got = summarise(study).rows_by_arm_orientation
    with study.connect() as con:
        by = con.execute(
            "SELECT g.arm, g.orientation, count(*) AS n, min(a.ordinal) AS ord FROM gen_rows g JOIN arms a "
            "USING (arm) GROUP BY g.arm, g.orientation ORDER BY ord, length(g.orientation), g.orientation"
        ).df()
    want = by.pivot_table(
        index="arm", columns="orientation", values="n", aggfunc="sum", fill_value=0, sort=False
    )
    assert got.columns == ["arm", *map(str, want.columns)]
    assert got.rows == [[a, *map(int, r)] for a, r in zip(want.index, want.to_numpy().tolist(), strict=True)]
    assert isinstance(want, pd.DataFrame) and got.rows == [["second", 1, 1, 0, 0], ["first", 0, 0, 1, 1]]


# --- imports -----------------------------------------------------------------------------------------------------
def _imported(*args: str) -> set[str]:
    """The modules ``python -X importtime -m mcqaudit ARGS`` loaded (a real process)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "mcqaudit", *args],
        capture_output=True, text=True, env=process_env(), cwd=REPO, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")
    }


def test_help_and_info_import_no_numpy_pandas_or_metrics(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    fixture_study(db).build()
    assert not set(HEAVY) & _imported("--help")
    computed = _imported("info", "--db", str(db))
    assert not set(HEAVY) & computed and "duckdb" in computed
    cached = _imported("info", "--db", str(db))
    assert not set(HEAVY) & cached and "duckdb" not in cached  # from the cache: the study is not opened
    code = "import sys, mcqaudit.cli; print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pandas', 'pyarrow', 'duckdb')))"  # noqa: E501
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=process_env(), check=True
    )
    assert out.stdout.strip() == "[]"


# --- the cache ---------------------------------------------------------------------------------------------------
def _info(db: Path, *extra: str) -> str:
    proc = run_cli("info", "--db", str(db), *extra, check=True)
    return proc.stdout


def test_cached_info_prints_the_same_bytes(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    fixture_study(db).build()
    first, first_json = _info(db), _info(db, "--json")
    assert info_cache_path(db).exists()
    assert infocache.load(db) is not None
    assert _info(db) == first and _info(db, "--json") == first_json
    info_cache_path(db).write_text("{not json", encoding="utf-8")  # a broken cache is a miss
    assert _info(db) == first
    assert json.loads(info_cache_path(db).read_text(encoding="utf-8"))["payload"]


def test_a_change_to_the_study_is_seen_at_once(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    fixture_study(db).build()
    before = _info(db)
    assert "(control: not set)" in before
    Study(db).set_meta("control_arm", "steered")  # a write through DuckDB, as every writer makes one
    steered = _info(db)
    assert "(control: steered)" in steered
    with Study(db).write() as con:  # a review: the judge_unaudited evidence changes
        con.execute(
            "INSERT INTO reviews (review_id, row_id, action, verdict, picked_letter, reviewer, created_at) "
            "SELECT 99, row_id, 'override', 'OTHER', NULL, 'tester', now() FROM spot_check_rows LIMIT 1 OFFSET 7"
        )
        from mcqaudit.store.schema import refresh_effective_reviews

        refresh_effective_reviews(con)
    text = _info(db)
    assert text != steered
    (audit,) = (f for f in info_facts(db).flags if f["name"] == "judge_unaudited")  # from the cache
    assert "7 of the 100 rows" in audit["evidence"] and "(7 reviews in all" in audit["evidence"]
    info_cache_path(db).unlink()
    assert text == _info(db)  # what a fresh computation prints


def test_a_cache_is_kept_only_for_the_state_it_was_computed_from(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    study = fixture_study(db).build()
    taken = infocache.stamp(db)
    study.set_meta("control_arm", "base")
    assert not infocache.save(db, taken, {"x": 1}) and not info_cache_path(db).exists()
    assert infocache.save(db, infocache.stamp(db), {"x": 1}) and infocache.load(db) == {"x": 1}
    os.utime(db, ns=(0, 0))  # the file touched: its stamp changed
    assert infocache.load(db) is None


# --- the command line: info skips Typer's parsing, and answers as Typer would -----------------------------
def test_info_answers_as_typer_does(tmp_path: Path) -> None:
    """`python -m mcqaudit info …` (the CLI's own parse of info's two options) prints, to the byte, and exits
    with what the Typer command does (``run_cli``: Click's ``main``), for every spelling it takes."""
    db = tmp_path / "s.duckdb"
    fixture_study(db).build()
    missing = tmp_path / "none.duckdb"
    for args in (
        ["info", "--db", str(db)],
        ["info", "--json", "--db", str(db)],
        ["info", "--db", str(db), "--json"],
        ["info", f"--db={db}"],
        ["info", "--db", str(missing)],
        ["info", "--json", "--db", str(missing)],
    ):
        typer_run, own = run_cli(*args), run_process(*args, env={"COLUMNS": "80"})
        assert (own.returncode, own.stdout, own.stderr) == (
            typer_run.returncode,
            typer_run.stdout,
            typer_run.stderr,
        ), args


def test_other_info_command_lines_go_to_typer() -> None:
    from mcqaudit.cli import _info_args

    assert _info_args(["info", "--db", "s.duckdb"]) == (Path("s.duckdb"), False)
    assert _info_args(["info", "--json", "--db=s.duckdb"]) == (Path("s.duckdb"), True)
    for argv in (
        ["info"], ["info", "--help"], ["info", "--db"], ["info", "--db", "--json"], ["info", "--db="],
        ["info", "--db", "a", "--db", "b"], ["info", "--json", "--json", "--db", "a"], ["info", "--db", "a", "x"],
        ["info", "--db", "a", "--"], ["report", "--db", "a"], [],
    ):  # fmt: skip
        assert _info_args(argv) is None, argv


def test_the_queue_listing_imports_no_numpy_or_pandas(tmp_path: Path) -> None:
    """`reviews queues` lists without pandas (0.6 s at 1 M rows with it, most of it the import; 0.4 s now)."""
    db = tmp_path / "s.duckdb"
    fixture_study(db).build()
    drawn = subprocess.run(
        [sys.executable, "-m", "mcqaudit", "reviews", "queue", "--db", str(db), "--size", "4", "--json"],
        capture_output=True, text=True, env=process_env(), cwd=REPO, timeout=120,
    )  # fmt: skip
    assert drawn.returncode == 0, drawn.stderr[-2000:]
    assert not set(HEAVY) & _imported("reviews", "queues", "--db", str(db))
    assert not set(HEAVY) & _imported("reviews", "queues", "--db", str(db), "--json")
