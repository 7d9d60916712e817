"""`info`'s cache kept up to date by the writers (issue 23: the first `info` after a write answers from it).

The twin: after every write of a random sequence (confirms, overrides, retractions, a write that fails, a
write through DuckDB that no writer keeps the cache for, ingests, a second ingest with --replace, a grade
without the judge, a review-log import), whatever cache is valid for the study as it is holds exactly what a
fresh computation gives, and `info` prints the same bytes from it as without it. A review whose write found the
cache valid leaves it valid (kept by delta); a write that does not commit, or whose connection is used after
another write, leaves the study's stamp to say the cache is stale.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcqaudit.app.info import _compute, _payload, info_facts, keep_pending, refresh
from mcqaudit.app.reviews import ReviewError, add_review, retract_review
from mcqaudit.store import infocache
from mcqaudit.store.db import Study
from mcqaudit.store.sidecars import info_cache_path
from tests.builders import build_graded_study, fixture_study, write_ui_inputs
from tests.helpers import process_env, run_cli


def _study(db: Path) -> None:
    """The fixture study, its review sequence past the reviews the builder wrote with its own SQL."""
    fixture_study(db).build()
    with Study(db).write() as con:
        con.execute("SELECT nextval('review_seq') FROM range(1000)").fetchall()


def fresh(db: Path) -> dict[str, Any]:
    """What `info` computes of the study now (read-only: the file is left as it is)."""
    s = Study(db, read_only=True)
    with s.connect():
        facts, _ = _compute(s)
    out: dict[str, Any] = json.loads(json.dumps(_payload(facts)))
    return out


def check(db: Path) -> bool:
    """The cache, when valid for the study as it is, equals a fresh computation; returns whether it was valid."""
    keep_pending(db)  # what this process's reviews left to keep
    kept = infocache.load(db)
    if kept is None:
        return False
    assert kept == fresh(db)
    return True


def _info(db: Path) -> str:
    return run_cli("info", "--db", str(db), check=True).stdout


def _info_fresh(db: Path) -> str:
    info_cache_path(db).unlink(missing_ok=True)
    return _info(db)


def _rows(db: Path) -> list[str]:
    return [r[0] for r in Study(db, read_only=True).query("SELECT row_id FROM gen_rows ORDER BY row_id")]


def _reviews(db: Path) -> list[int]:
    """Confirms and overrides not yet retracted."""
    return [
        int(r[0])
        for r in Study(db, read_only=True).query(
            "SELECT review_id FROM reviews WHERE action <> 'retract' AND review_id NOT IN "
            "(SELECT retracts FROM reviews WHERE retracts IS NOT NULL) ORDER BY review_id"
        )
    ]


_VERDICTS = st.sampled_from(["CORRECT", "INCORRECT", "OTHER"])
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("confirm"), st.integers(0, 10_000)),
        st.tuples(st.just("override"), st.integers(0, 10_000), _VERDICTS, st.sampled_from([None, "A", "B", "C"])),
        st.tuples(st.just("retract"), st.integers(0, 10_000)),
        st.tuples(st.just("failed"), st.integers(0, 10_000)),
        st.tuples(st.just("foreign"), st.integers(0, 10_000)),
        st.tuples(st.just("info"), st.just(0)),
    ),
    min_size=1,
    max_size=8,
)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("maintained") / "t.duckdb"
    _study(db)
    return db


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_reviews_keep_the_cache_equal_to_a_fresh_computation(
    template: Path, tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]]
) -> None:
    db = tmp_path_factory.mktemp("run") / "s.duckdb"
    db.write_bytes(template.read_bytes())
    info_facts(db)  # the cache, computed
    assert check(db)
    rows = _rows(db)
    for op in ops:
        keep_pending(db)
        valid = infocache.load(db) is not None
        kind, k = op[0], op[1]
        row = rows[k % len(rows)]
        if kind == "confirm":
            try:
                add_review(db, row, reviewer="amy", action="confirm")
            except ReviewError:  # a row without a verdict yet: refused, nothing written
                assert (infocache.load(db) is not None) == valid
                continue
        elif kind == "override":
            try:
                add_review(db, row, reviewer="bo", action="override", verdict=op[2], picked_letter=op[3])
            except ReviewError:  # a verdict and letter that contradict the row's gold: refused, nothing written
                assert (infocache.load(db) is not None) == valid
                continue
        elif kind == "retract":
            live = _reviews(db)
            if not live:
                continue
            retract_review(db, live[k % len(live)], reviewer="amy")
        elif kind == "failed":  # a review refused inside its write: nothing committed, the cache still valid
            with pytest.raises(ReviewError):
                add_review(db, row, reviewer="amy", action="override", verdict="CORRECT", picked_letter="Z")
            assert (infocache.load(db) is not None) == valid
        elif kind == "foreign":  # a write no writer keeps the cache for: the stamp says it is stale
            Study(db).set_meta("control_arm", f"arm{k}" if infocache.load(db) is None else "base-x")
            Study(db).set_meta("control_arm", ["base", "steered"][k % 2])
            assert infocache.load(db) is None
        else:
            info_facts(db)
            assert infocache.load(db) is not None
        if kind in ("confirm", "override", "retract") and valid:
            keep_pending(db)
            assert infocache.load(db) is not None, f"{kind} did not keep the cache"
        check(db)
    text = _info(db)
    info_cache_path(db).unlink()
    assert _info(db) == text  # the cache's bytes are a fresh computation's


def test_a_review_inside_a_connection_used_before_keeps_no_cache(tmp_path: Path) -> None:
    """A review nested in a connection that wrote first: the cache cannot vouch for that write, so none is kept."""
    db = tmp_path / "s.duckdb"
    _study(db)
    info_facts(db)
    s = Study(db)
    row = _rows(db)[3]
    with s.connect() as con:
        con.execute("UPDATE study_meta SET value = 'x' WHERE key = 'created'")
        add_review(s, row, reviewer="amy", action="override", verdict="OTHER")
    assert infocache.load(db) is None
    info_facts(db)
    assert check(db)


def test_a_writer_killed_before_it_kept_the_cache_leaves_it_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review commits, the process dies before the cache is written: the old cache's stamp is stale."""
    db = tmp_path / "s.duckdb"
    _study(db)
    before = _info(db)
    monkeypatch.setattr(infocache, "save", lambda *a, **k: False)  # killed between the commit and the save
    add_review(db, _rows(db)[5], reviewer="amy", action="override", verdict="OTHER")
    keep_pending(db)
    monkeypatch.undo()
    assert infocache.load(db) is None
    after = _info(db)
    assert after != before
    assert check(db)


def test_ingest_grade_replace_and_import_keep_the_cache(tmp_path: Path) -> None:
    """The first `info` after an ingest, a grade without the judge, a review, a second ingest with --replace
    and a review-log import answers from a cache that equals a fresh computation."""
    gens, items = write_ui_inputs(tmp_path / "in")
    db = tmp_path / "u.duckdb"
    run_cli("ingest", str(gens), "--items", str(items), "--db", str(db), check=True)
    assert check(db)
    run_cli("grade", "--db", str(db), "--no-judge", check=True)
    assert check(db)
    rows = _rows(db)
    add_review(db, rows[0], reviewer="amy", action="override", verdict="OTHER")
    add_review(db, rows[1], reviewer="amy", action="override", verdict="INCORRECT")
    assert check(db)
    add_review(db, rows[3], reviewer="amy", action="override", verdict="OTHER")
    assert _info(db) == _info_fresh(db)  # the first info after a review: this process keeps the chain first
    # the same generations again, some answers changed: --replace withdraws the reviews of replaced rows
    lines = gens.read_text(encoding="utf-8").splitlines()
    changed = []
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if i % 5 == 0:
            for key in ("generation", "response", "output", "text"):
                if isinstance(rec.get(key), str):
                    rec[key] = "The answer is (A)."
        changed.append(json.dumps(rec))
    gens2 = tmp_path / "in" / "generations2.jsonl"
    gens2.write_text("\n".join(changed) + "\n", encoding="utf-8")
    run_cli("ingest", str(gens2), "--items", str(items), "--db", str(db), "--replace", check=True)
    assert check(db)
    add_review(db, rows[2], reviewer="bo", action="override", verdict="OTHER")
    assert check(db)
    log = tmp_path / "log.csv"
    run_cli("reviews", "export", "--db", str(db), "--out", str(log), check=True)
    db2 = tmp_path / "v.duckdb"
    run_cli("ingest", str(gens), "--items", str(items), "--db", str(db2), check=True)
    run_cli("reviews", "import", str(log), "--db", str(db2), check=True)
    assert check(db2)
    text = _info(db2)
    info_cache_path(db2).unlink()
    assert _info(db2) == text


def test_refresh_nested_in_a_connection_keeps_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    _study(db)
    s = Study(db)
    with s.connect():
        refresh(s)
    assert not info_cache_path(db).exists()
    refresh(s)
    assert check(db)


def test_refresh_on_a_study_another_process_holds_keeps_nothing_and_raises_nothing(tmp_path: Path) -> None:
    """After a write (an ingest, a grade run, a review-log import) another process may take the file before
    the cache is computed: the write stands, no cache is kept (after the lock wait gives up), nothing raises,
    and the next ``info`` computes."""
    db = tmp_path / "s.duckdb"
    _study(db)
    info_cache_path(db).unlink(missing_ok=True)
    study = Study(db, lock_timeout_s=1.0)  # opened before the other process takes the file
    hold = subprocess.Popen(
        [sys.executable, "-c", "import sys, duckdb\ncon = duckdb.connect(sys.argv[1])\nprint('held', flush=True)\n"
         "sys.stdin.read()", str(db)],
        env=process_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert hold.stdout is not None and hold.stdout.readline().strip() == "held"
        refresh(study)
        assert not info_cache_path(db).exists()
    finally:
        assert hold.stdin is not None
        hold.stdin.close()
        hold.wait(30)
    info_facts(db)  # the next info computes it, and keeps it
    assert check(db)


def test_reviews_in_a_row_are_kept_once_after_them(tmp_path: Path) -> None:
    """Reviews one after another (a chain) are kept once, after the last; a write of anything else in between
    breaks the chain (the cache stays stale, and info computes)."""
    db = tmp_path / "s.duckdb"
    _study(db)
    info_facts(db)
    rows = _rows(db)
    for r in rows[10:14]:
        add_review(db, r, reviewer="amy", action="override", verdict="OTHER")
    assert infocache.load(db) is None  # not kept yet: after the last review, in the background
    assert check(db)  # kept now, and equal to a fresh computation
    add_review(db, rows[20], reviewer="amy", action="override", verdict="OTHER")
    Study(db).set_meta("control_arm", "hedging")  # another write: the chain cannot be kept
    add_review(db, rows[21], reviewer="amy", action="override", verdict="OTHER")
    keep_pending(db)
    assert infocache.load(db) is None
    info_facts(db)
    assert check(db)


def test_a_review_in_the_dashboards_connection_is_kept(tmp_path: Path) -> None:
    """The dashboard saves a review inside a connection it opened (to read the next row in it): kept; a write
    committed in that connection before or after the review's is not vouched for, and nothing is kept."""
    db = tmp_path / "s.duckdb"
    _study(db)
    info_facts(db)
    s = Study(db)
    rows = _rows(db)
    with s.connect() as con:
        add_review(s, rows[30], reviewer="amy", action="override", verdict="OTHER")
        con.execute("SELECT count(*) FROM gen_rows").fetchall()
    assert check(db)
    with s.connect() as con:
        add_review(s, rows[31], reviewer="amy", action="override", verdict="OTHER")
        con.execute("UPDATE study_meta SET value = 'y' WHERE key = 'created'")
    keep_pending(db)
    assert infocache.load(db) is None
    info_facts(db)
    assert check(db)


def test_a_process_that_exits_keeps_its_reviews(tmp_path: Path) -> None:
    """A script that saves a review and exits at once: its exit keeps the cache (before the timer would)."""
    import subprocess
    import sys

    from tests.helpers import process_env

    db = tmp_path / "s.duckdb"
    _study(db)
    info_facts(db)
    row = _rows(db)[40]
    code = (
        "import sys; from mcqaudit.app.reviews import add_review; "
        f"add_review({str(db)!r}, {row!r}, reviewer='amy', action='override', verdict='OTHER')"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=process_env(), timeout=120)
    kept = infocache.load(db)
    assert kept is not None and kept == fresh(db)


def test_an_online_grade_keeps_the_cache(tmp_path: Path) -> None:
    """A grade run against the stand-in judge computes the cache at its end (its journal gone by then)."""
    gens, items = write_ui_inputs(tmp_path / "in")
    db = build_graded_study(tmp_path / "g.duckdb", gens, items=items)
    assert check(db)


def _ingested(tmp_path: Path) -> Path:
    gens, items = write_ui_inputs(tmp_path / "in")
    return build_graded_study(tmp_path / "g.duckdb", gens, items=items, judge=False)


def _grade(db: Path) -> None:
    from mcqaudit.app.grade import GradeOptions, grade
    from mcqaudit.judge.prompts import JudgeConfig
    from mcqaudit.standin.server import StandinServer
    from mcqaudit.vocab import STANDIN_MODEL

    with StandinServer() as server:
        grade(Study(db), GradeOptions(JudgeConfig(model=STANDIN_MODEL), base_url=server.base_url, concurrency=4))


def test_an_online_grade_keeps_the_cache_in_its_last_writes_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run computes `info`'s cache in the connection of its last write, once that has committed: the file
    is not opened again for it (a refresh after the run fails here), and what is kept is what a fresh
    computation gives of the study as the run left it."""
    from mcqaudit.app import grade as app_grade

    db = _ingested(tmp_path)
    monkeypatch.setattr(app_grade, "refresh", lambda study: pytest.fail("the file opened again to keep the cache"))
    _grade(db)
    assert Study(db, read_only=True).query("SELECT count(*) FROM judge_verdicts")[0][0] > 0
    assert check(db)


def test_a_failure_keeping_the_cache_is_not_a_failed_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What computing the cache raises after the last write committed is raised as itself; that write is in
    the study (its rows graded, the unaudited mark it clears cleared) and nothing is left to replay."""
    from mcqaudit.app import grade as app_grade
    from mcqaudit.store.judging import is_unaudited, set_unaudited
    from mcqaudit.store.sidecars import journal_dir

    db = _ingested(tmp_path)
    set_unaudited(Study(db), True)  # as `grade --no-judge` leaves it: the run's last write clears it
    judging = "SELECT count(*) FROM gen_rows g WHERE needs_judge(g.strict_letter, g.is_blank)"
    need = Study(db, read_only=True).query(judging)[0][0]

    def broken(study: Study) -> None:
        raise RuntimeError("computing the cache broke")

    monkeypatch.setattr(app_grade, "refresh_here", broken)
    with pytest.raises(RuntimeError, match="computing the cache broke"):
        _grade(db)
    s = Study(db, read_only=True)
    assert s.query("SELECT count(*) FROM judge_verdicts")[0][0] == need > 0
    assert not is_unaudited(s)
    assert not journal_dir(db).is_dir() or not any(journal_dir(db).iterdir())


def test_the_keeping_runs_by_itself_once_the_study_is_left_alone(tmp_path: Path) -> None:
    """Nobody asks: the background keeps the chain once the process has left the study alone a moment."""
    import time

    db = tmp_path / "s.duckdb"
    _study(db)
    info_facts(db)
    add_review(db, _rows(db)[50], reviewer="amy", action="override", verdict="OTHER")
    deadline = time.monotonic() + 60
    while infocache.load(db) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    kept = infocache.load(db)
    assert kept is not None and kept == fresh(db)


def test_the_verdicts_table_lists_the_arms_in_the_studys_order(template: Path) -> None:
    """`info`'s verdicts by source list the arms as its rows-per-arm table does, in the study's order (base,
    steered, hedging), not alphabetically (base, hedging, steered), computed or kept after reviews."""
    got = fresh(template)["summary"]
    arms = got["arms"]
    assert arms == ["base", "steered", "hedging"]
    listed = list(dict.fromkeys(r[0] for r in got["verdicts"]["rows"]))
    assert listed == arms and [r[0] for r in got["rows_by_arm_orientation"]["rows"]] == arms
