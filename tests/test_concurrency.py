"""Several writers on one study file lose nothing (docs/design.md §6).

The real ``mcqaudit grade`` runs as its own process against the stand-in judge (writing verdicts in small
batches) while a second process plays the dashboard server with two review sessions — two threads sharing one
cached ``Study``, as two browser sessions share one in Streamlit — each appending reviews, half of them to
rows the judge is grading at that moment. Meanwhile this process reads the file the way a page does. DuckDB
lets one process open the file at a time, so every side goes through the bounded lock retry. At the end every
review is there, every row has its judge verdict, and the reviews win where they should.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from mcqaudit.app.ingest import ingest_file
from mcqaudit.demo import GENERATIONS, ITEMS
from mcqaudit.judge.client import STANDIN_MODEL
from mcqaudit.review.filters import RowFilter
from mcqaudit.standin.server import StandinOptions, StandinServer
from mcqaudit.store import Study
from mcqaudit.store.rows import count_rows
from tests.helpers import REPO

PER_SESSION = 25
GRADE_LIMIT = 200  # rows the grade run judges (of ~490 that need it): enough batches to overlap the reviews

REVIEWERS = r"""
import json, sys, threading
from mcqaudit.store import Study
from mcqaudit.app.reviews import add_review

db, plan = sys.argv[1], json.loads(sys.argv[2])
study = Study(db)  # one per process, as st.cache_resource keeps it
errors = []

def session(name, rows):
    for rid in rows:
        try:
            add_review(study, rid, reviewer=name, verdict="OTHER", note="concurrent")
        except Exception as exc:  # noqa: BLE001 - reported to the test
            errors.append(f"{name} {rid}: {exc!r}")

threads = [threading.Thread(target=session, args=(n, rows)) for n, rows in plan.items()]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"errors": errors}))
"""


def test_two_review_sessions_and_a_grade_run_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "shared.duckdb"
    study = Study(db, create=True)
    ingest_file(study, GENERATIONS, items_path=ITEMS, control="base")
    pending = [
        r[0]
        for r in study.query("SELECT row_id FROM graded_rows WHERE judge_status = 'pending' ORDER BY row_id")
    ]
    resolved = [
        r[0]
        for r in study.query("SELECT row_id FROM graded_rows WHERE judge_status = 'skipped' ORDER BY row_id")
    ]
    assert len(pending) > 300
    # each session: half rows the judge is about to grade, half resolved rows; both touch 5 shared rows
    shared = pending[:5]
    plan = {
        "ann": shared + pending[5 : 5 + PER_SESSION // 2] + resolved[: PER_SESSION - PER_SESSION // 2 - 5],
        "bob": shared
        + pending[100 : 100 + PER_SESSION // 2]
        + resolved[100 : 100 + PER_SESSION - PER_SESSION // 2 - 5],
    }
    env = {**os.environ, "OPENAI_API_KEY": "anything", "PYTHONPATH": str(REPO)}
    with StandinServer(StandinOptions(latency_ms=2)) as judge:
        grade = subprocess.Popen(
            [sys.executable, "-m", "mcqaudit", "grade", "--db", str(db), "--judge-model", STANDIN_MODEL,
             "--judge-base-url", judge.base_url, "--concurrency", "4", "--limit", str(GRADE_LIMIT),
             "--quiet", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        time.sleep(0.5)  # let the grade run start writing first
        reviewers = subprocess.Popen(
            [sys.executable, "-c", REVIEWERS, str(db), json.dumps(plan)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        reads = 0
        while grade.poll() is None or reviewers.poll() is None:
            count_rows(study, RowFilter(verdicts=("OTHER",)))  # what a page does between writes
            reads += 1
        g_out, g_err = grade.communicate(timeout=120)
        r_out, r_err = reviewers.communicate(timeout=120)
    assert grade.returncode == 0, g_err
    assert reviewers.returncode == 0, r_err
    assert json.loads(r_out.strip().splitlines()[-1]) == {"errors": []}
    assert reads > 0
    summary = json.loads(g_out[g_out.index("{") :])
    assert summary["graded"] == GRADE_LIMIT and summary["errors"] == 0

    # nothing lost: every review, every judge verdict the grade run reported
    per = dict(study.query("SELECT reviewer, count(*) FROM reviews GROUP BY reviewer"))
    assert per == {"ann": PER_SESSION, "bob": PER_SESSION}
    assert study.query("SELECT count(DISTINCT review_id) FROM reviews")[0][0] == 2 * PER_SESSION
    assert study.query("SELECT count(*) FROM judge_verdicts WHERE status = 'ok'")[0][0] == GRADE_LIMIT
    assert study.query("SELECT count(*) FROM judge_replies")[0][0] == GRADE_LIMIT
    reviewed = set(plan["ann"]) | set(plan["bob"])
    got = study.query(
        "SELECT row_id, final_verdict, verdict_source FROM graded_rows WHERE row_id IN (SELECT unnest(?))",
        [sorted(reviewed)],
    )
    assert len(got) == len(reviewed)
    assert all(v == "OTHER" and src == "review" for _, v, src in got)


def test_a_helper_thread_reads_on_a_cursor_of_the_open_connection(tmp_path: Path) -> None:
    """`Study.on_cursor`: a thread beside one that holds the study open reads it through a cursor of that
    connection (its own `connect` would wait for the holder to close: the holder waits for the helper);
    the cursor is closed when the helper is done, and a thread with a connection of its own is refused."""
    from concurrent.futures import ThreadPoolExecutor

    import duckdb
    import pytest

    s = Study(tmp_path / "s.duckdb", create=True)
    created = s.get_meta("created")
    with s.connect() as con:
        cursor = con.cursor()
        seen: list[object] = []

        def helper() -> str | None:
            with s.on_cursor(cursor), s.connect() as c:
                seen.append(c)
                return s.get_meta("created")

        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(helper).result(timeout=30) == created
        assert seen == [cursor]
        with pytest.raises(duckdb.Error):
            cursor.execute("SELECT 1")
        with pytest.raises(RuntimeError, match="own open"), s.on_cursor(con.cursor()):
            pass
        assert s.connected and con.execute("SELECT 1").fetchone() == (1,)


def test_one_open_shares_one_connection_among_the_reads_in_it(tmp_path: Path, monkeypatch) -> None:
    """`Study.one_open`: the reads in the block, each written as its own `connect`, open the file once (at the
    first of them), and none at all when none reads; the connection closes when the block ends (another
    thread can then open the file), an error inside included."""
    import threading

    import pytest

    s = Study(tmp_path / "s.duckdb", create=True)
    opens: list[str] = []
    real = Study._open

    def counted(self: Study):  # type: ignore[no-untyped-def]
        opens.append(threading.current_thread().name)
        return real(self)

    monkeypatch.setattr(Study, "_open", counted)
    with s.one_open():
        pass
    assert opens == []
    with s.one_open():
        first = s.get_meta("created")
        with s.connect() as a, s.connect() as b:
            assert a is b
        assert s.get_meta("created") == first and s.query("SELECT count(*) FROM arms")[0][0] == 0
        assert s.connected
    assert len(opens) == 1 and not s.connected
    with pytest.raises(RuntimeError, match="inside"), s.one_open():
        s.get_meta("created")
        raise RuntimeError("inside")
    assert len(opens) == 2 and not s.connected
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(s.get_meta("created")))
    t.start()
    t.join(timeout=30)
    assert got == [first] and len(opens) == 3
