"""Reviewer agreement (docs/design.md §7 ``reviewer_agreement``; issue 21): people's labels brought in with
``mcqaudit reviews import``, compared with each other on the rows two or more of them reviewed, each person's
latest review in force; judge-vs-human agreement keeps the latest review per row and says how many rows a
later reviewer settled. Expected figures are hand counts from the labels the test writes.

The study: 40 prose rows graded by the scripted heuristic judge on 127.0.0.1 (through the real ``openai``
client): row ``i`` is CORRECT when ``i % 4 == 0``, else INCORRECT.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from mcqaudit.app.reviews import retract_review
from mcqaudit.app.rows import count_rows
from mcqaudit.review.filters import REVIEWERS_DISAGREE, REVIEWERS_SETTLED, RowFilter
from mcqaudit.store import Study
from mcqaudit.vocab import CORRECT, INCORRECT, OTHER
from tests.helpers import judge_rows, run_cli
from tests.judge_servers import ScriptedJudge, add_rows, heuristic

N = 40
ANN = range(30)  # ann labels rows 0..29 as the judge did
BOB_OTHER = {0, 5, 10, 15, 20, 25}  # bob labels the same rows, OTHER on these
CAT = range(10)  # cat, last, labels rows 0..9 as ann did


def judge_verdict(i: int) -> str:
    return CORRECT if i % 4 == 0 else INCORRECT


def ann(i: int) -> str:
    return judge_verdict(i)


def bob(i: int) -> str:
    return OTHER if i in BOB_OTHER else judge_verdict(i)


def _labels(path: Path, who: str, day: int, rows: dict[int, str]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["row_id", "verdict", "reviewer", "reviewed_at"])
        for i, v in rows.items():
            w.writerow([f"r{i:05d}", v, who, f"2026-01-{day:02d}T10:{i:02d}:00Z"])
    return path


def _study(tmp_path: Path) -> Path:
    study = Study(tmp_path / "s.duckdb", create=True)
    add_rows(study, judge_rows(N))
    with ScriptedJudge(heuristic) as one:
        proc = run_cli(
            "grade", "--db", str(study.path), "--judge-model", "scripted", "--judge-base-url", one.base_url
        )
        assert proc.returncode == 0, proc.stderr
    return study.path


def _import(db: Path, path: Path) -> None:
    proc = run_cli("reviews", "import", str(path), "--db", str(db))
    assert proc.returncode == 0, proc.stderr


def _report(db: Path) -> dict:  # type: ignore[type-arg]
    proc = run_cli("report", "--db", str(db), "--format", "json", "--bootstrap", "300")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def cohen(pairs: list[tuple[str, str]]) -> tuple[float, float]:
    n = len(pairs)
    po = sum(a == b for a, b in pairs) / n
    pe = sum(
        sum(a == v for a, _ in pairs) * sum(b == v for _, b in pairs) for v in (CORRECT, INCORRECT, OTHER)
    ) / (n * n)
    return po, (po - pe) / (1 - pe)


def close(x: float | None, y: float) -> None:
    assert x is not None and abs(x - y) < 1e-5, (x, y)


def test_two_reviewers_imported_agree_as_counted(tmp_path: Path) -> None:
    db = _study(tmp_path)
    assert _report(db)["reviewer_agreement"] is None  # nobody has reviewed yet
    _import(db, _labels(tmp_path / "ann.csv", "ann", 1, {i: ann(i) for i in ANN}))
    rep = _report(db)
    assert rep["reviewer_agreement"] is None  # one person is no agreement
    assert rep["notes"]["reviewer_agreement"] == "no row has been reviewed by two people yet"
    _import(db, _labels(tmp_path / "bob.csv", "bob", 2, {i: bob(i) for i in ANN}))
    rep = _report(db)
    ra = rep["reviewer_agreement"]
    pairs = [(ann(i), bob(i)) for i in ANN]
    po, kappa = cohen(pairs)
    assert (ra["rows"], ra["pairs_compared"], ra["reviewers"]) == (30, 30, ["ann", "bob"])
    close(ra["agreement"]["value"], po)
    close(ra["agreement"]["value"], 24 / 30)
    close(ra["kappa"]["value"], kappa)
    assert ra["agreement"]["n"] == ra["kappa"]["n"] == 30
    assert ra["preliminary"] is True  # under 100 rows
    # bob's reviews are the later: the rows they disagree on have his in force, and no third person has
    # settled them yet (the Review page lists them under "reviewers disagree")
    assert (ra["disagreed_rows"], ra["settled_rows"]) == (len(BOB_OTHER), 0)
    p = ra["pairs"]["ann|bob"]
    assert p["rows"] == 30 and p["agreement"]["value"] == ra["agreement"]["value"]
    assert (
        p["confusion"][CORRECT][OTHER] == 2 and p["confusion"][INCORRECT][OTHER] == 4
    )  # rows 0, 20 and 5, 10, 15, 25
    # judge vs human: bob's reviews are the later, so in force
    ja = rep["judge_agreement"]
    assert ja["reviewed_rows"] == 30 and (ja["disagreed_rows"], ja["settled_rows"]) == (6, 0)
    close(ja["agreement"]["value"], 24 / 30)
    md = run_cli("report", "--db", str(db), "--format", "md", "--bootstrap", "100").stdout
    assert "## Reviewer agreement" in md and "| ann and bob | 30 |" in md
    assert "preliminary: under 100 rows" in md
    assert "6 rows where they disagree (the latest review is final there): 0 settled by a later review, 6 waiting" in md
    assert "Reviewers agree on 80.0 % [" in md
    assert "Each row's latest review is the one compared; reviewers: 6 rows where they disagree" in md


def test_a_third_reviewer_settles_and_each_persons_latest_counts(tmp_path: Path) -> None:
    db = _study(tmp_path)
    _import(db, _labels(tmp_path / "ann.csv", "ann", 1, {i: ann(i) for i in ANN}))
    _import(db, _labels(tmp_path / "bob.csv", "bob", 2, {i: bob(i) for i in ANN}))
    _import(db, _labels(tmp_path / "cat.csv", "cat", 3, {i: ann(i) for i in CAT}))
    # bob changes his mind on row 25 (his later review is his in force) and withdraws his review of row 29
    _import(db, _labels(tmp_path / "bob2.csv", "bob", 4, {25: judge_verdict(25)}))
    bob_29 = Study(db).query(
        "SELECT review_id FROM reviews WHERE reviewer = 'bob' AND row_id = 'r00029' AND action <> 'retract'"
    )[0][0]
    retract_review(db, int(bob_29), reviewer="bob", origin="cli")
    rep = _report(db)
    ra = rep["reviewer_agreement"]
    bob_now = {i: (judge_verdict(i) if i == 25 else bob(i)) for i in ANN if i != 29}
    pairs = [(ann(i), bob_now[i]) for i in bob_now]  # names in order: ann, bob, cat
    pairs += [(ann(i), ann(i)) for i in CAT]  # ann|cat
    pairs += [(bob_now[i], ann(i)) for i in CAT]  # bob|cat
    po, kappa = cohen(pairs)
    assert (ra["rows"], ra["pairs_compared"], ra["reviewers"]) == (29, 29 + 10 + 10, ["ann", "bob", "cat"])
    close(ra["agreement"]["value"], po)
    close(
        ra["agreement"]["value"], (29 + 10 + 10 - 5 - 2) / 49
    )  # bob vs ann on 0, 5, 10, 15, 20; vs cat on 0, 5
    close(ra["kappa"]["value"], kappa)
    assert set(ra["pairs"]) == {"ann|bob", "ann|cat", "bob|cat"}
    assert ra["pairs"]["ann|cat"]["rows"] == 10 and ra["pairs"]["ann|cat"]["agreement"]["value"] == 1.0
    assert ra["pairs"]["bob|cat"]["rows"] == 10
    close(ra["pairs"]["bob|cat"]["agreement"]["value"], 8 / 10)
    # reviewers who disagree: 0, 5, 10, 15, 20 (25: bob changed his mind); cat's later word settled 0 and 5,
    # where ann and bob already differed; 10, 15, 20 wait for a third reviewer
    assert (ra["disagreed_rows"], ra["settled_rows"]) == (5, 2)
    # the Review page's reviewers filter counts the same rows
    waiting = count_rows(db, RowFilter(reviewers=REVIEWERS_DISAGREE))
    assert (waiting, count_rows(db, RowFilter(reviewers=REVIEWERS_SETTLED))) == (3, 2)
    # judge vs human, latest review per row: cat's on 0..9 (as the judge), bob's on 10..28, ann's on 29
    ja = rep["judge_agreement"]
    assert ja["reviewed_rows"] == 30 and (ja["disagreed_rows"], ja["settled_rows"]) == (5, 2)
    close(ja["agreement"]["value"], (30 - 3) / 30)  # bob's OTHER on 10, 15, 20 is in force there
