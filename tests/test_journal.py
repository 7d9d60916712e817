"""The journal beside the study (store/journal.py, docs/design.md §5): replay at the next open, torn last
lines, idempotent replay, a live writer's segment left alone, a read-only study and `info`; and lock waits
that say what they wait for. The SIGKILL fault tests are in tests/test_sigkill.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mcqaudit.app.study import journal_pending, open_study, take_replayed
from mcqaudit.store import Study
from mcqaudit.store.journal import Journal, journal_dir, pending, replay
from mcqaudit.store.judging import ReplyRecord, VerdictRecord, write_judged
from tests.helpers import REPO
from tests.judge_servers import ScriptedJudge, add_rows, heuristic

KILLS = 5
CONCURRENCY = 16


def env() -> dict[str, str]:
    out = {
        k: v for k, v in os.environ.items() if k not in ("MCQAUDIT_JUDGE_MODEL", "MCQAUDIT_JUDGE_BASE_URL")
    }
    out["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return out


def judge_rows(n: int) -> list[dict]:
    opts = ["a red fruit", "a yellow fruit", "a green vegetable", "a root vegetable"]
    return [
        {"row_id": f"r{i:05d}", "item_id": f"item{i}", "options": opts, "gold_letter": "A",
         "generation": f"I would say it is {opts[i % 4]} (take {i})."}
        for i in range(n)
    ]  # fmt: skip


# --- the journal itself ------------------------------------------------------------------------------------

T0 = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)


def records(k: int, status: str = "ok") -> tuple[list[ReplyRecord], list[VerdictRecord]]:
    reply = ReplyRecord("fp1", f"h{k}", status, "B", "B" if status == "ok" else None, None, None,
                        "http://127.0.0.1:1/v1", 10, 1, T0.replace(second=k % 60))  # fmt: skip
    verdict = VerdictRecord(f"r{k:05d}", "fp1", status, "B", "INCORRECT", "B", None, None, f"h{k}",
                            "http://127.0.0.1:1/v1", 1, T0.replace(second=k % 60))  # fmt: skip
    return [reply], [verdict]


@pytest.fixture
def rows_study(tmp_path: Path) -> Study:
    s = Study(tmp_path / "study.duckdb", create=True)
    add_rows(s, judge_rows(10))
    return s


def counts(study: Study) -> tuple[int, int]:
    (r,) = study.query("SELECT (SELECT count(*) FROM judge_replies), (SELECT count(*) FROM judge_verdicts)")
    return int(r[0]), int(r[1])


def left_by_a_dead_writer(study: Study, ks: range) -> Path:
    j = Journal(study.path)
    for k in ks:
        j.append_judged(*records(k))
    seg = j.rotate()
    assert seg is not None
    seg.release()  # as a killed process leaves it: file kept, lock gone
    return seg.path


def test_next_open_replays_a_dead_writers_segment_then_deletes_it(rows_study: Study) -> None:
    path = left_by_a_dead_writer(rows_study, range(4))
    assert counts(rows_study) == (0, 0)  # a Study already open does not replay behind its owner's back
    again = open_study(rows_study.path)
    replayed = take_replayed(again)
    assert replayed is not None and replayed.records == {"judged": 4}
    assert counts(again) == (4, 4)
    assert not path.exists() and not journal_dir(rows_study.path).exists()
    got = again.query("SELECT row_id, status, letter, judged_at FROM judge_verdicts ORDER BY row_id")
    assert got[0][:3] == ("r00000", "ok", "B") and got[0][3] == T0.replace(second=0)


def test_replay_is_idempotent_and_skips_a_torn_last_line(rows_study: Study) -> None:
    path = left_by_a_dead_writer(rows_study, range(3))
    # killed after its batch committed but before the segment was deleted: the records are in the study
    r, v = [], []
    for k in range(3):
        rk, vk = records(k)
        r += rk
        v += vk
    write_judged(rows_study, r, v)
    with path.open("ab") as fh:  # and a line cut off mid-write
        fh.write(b'{"kind": "judged", "v": 1, "replies": [{"fingerp')
    done = replay(rows_study)
    assert done.records == {"judged": 3} and done.torn == 1
    assert counts(rows_study) == (3, 3)  # nothing doubled
    assert not path.exists()


def test_a_live_writers_segment_is_left_alone(rows_study: Study) -> None:
    j = Journal(rows_study.path)
    j.append_judged(*records(1))
    # another open (e.g. the dashboard) while the writer lives
    done = take_replayed(open_study(rows_study.path))
    assert done is not None and done.records == {} and counts(rows_study) == (0, 0)
    assert pending(rows_study.path).total == 1
    j.append_judged(*records(2))  # the writer goes on; its records are still there
    seg = j.rotate()
    assert seg is not None
    seg.release()
    assert take_replayed(open_study(rows_study.path)).records == {"judged": 2}  # type: ignore[union-attr]
    assert counts(rows_study) == (2, 2)


def test_a_read_only_study_opens_with_a_journal_and_info_says_so(
    rows_study: Study, capsys: pytest.CaptureFixture[str]
) -> None:
    from mcqaudit import cli

    left_by_a_dead_writer(rows_study, range(2))
    study = Study(rows_study.path, read_only=True)  # as a shared, read-only file or folder opens
    assert study.read_only and take_replayed(study) is None and counts(study) == (0, 0)
    assert journal_pending(study).records == {"judged": 2}
    capsys.readouterr()
    cli._info_journal(study)
    out = capsys.readouterr().out
    assert "journal: 2 judge replies not yet in the study" in out and "read-only" in out, out
    folder = rows_study.path.parent
    for p in [rows_study.path, *journal_dir(rows_study.path).iterdir(), journal_dir(rows_study.path), folder]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        if os.access(rows_study.path, os.W_OK):
            return  # running as root: permissions do not make a file read-only; the rest needs them
        info = subprocess.run(
            [sys.executable, "-m", "mcqaudit", "info", "--db", str(rows_study.path)],
            env=env(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert info.returncode == 0, info.stderr
        assert "journal: 2 judge replies" in info.stdout, info.stdout
    finally:
        for p in [
            folder,
            journal_dir(rows_study.path),
            *journal_dir(rows_study.path).iterdir(),
            rows_study.path,
        ]:
            p.chmod(0o755 if p.is_dir() else 0o644)
    assert take_replayed(open_study(rows_study.path)).records == {"judged": 2}  # type: ignore[union-attr]


def test_a_record_of_an_unknown_kind_stays_in_the_journal(rows_study: Study) -> None:
    j = Journal(rows_study.path, kind="from-the-future")
    j.append({"x": 1})
    seg = j.rotate()
    assert seg is not None
    seg.release()
    assert take_replayed(open_study(rows_study.path)).records == {}  # type: ignore[union-attr]
    assert seg.path.exists()


# --- lock waits ---------------------------------------------------------------------------------------------

# the holder keeps the study until its stdin closes: the test closes it once the waiter has spoken
HOLD = """
import sys
from mcqaudit.store import Study
with Study(sys.argv[1]).write():
    print("held", flush=True)
    sys.stdin.read()
"""

HOLD_RAW = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
print("held", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("holder", ["mcqaudit", "duckdb"])
def test_a_lock_wait_says_what_it_waits_for_and_for_how_long(rows_study: Study, holder: str) -> None:
    code = HOLD if holder == "mcqaudit" else HOLD_RAW
    hold = subprocess.Popen([sys.executable, "-c", code, str(rows_study.path)], env=env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    info = None
    try:
        assert hold.stdout is not None and hold.stdout.readline().strip() == "held"
        info = subprocess.Popen([sys.executable, "-m", "mcqaudit", "info", "--db", str(rows_study.path)],
                                env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert info.stderr is not None
        line = info.stderr.readline()  # blocks until the waiter says something (or exits)
    finally:
        assert hold.stdin is not None
        hold.stdin.close()
        hold.wait(30)
    out, rest = info.communicate(timeout=60)
    assert info.returncode == 0, line + rest  # it waited, then went ahead
    assert line.startswith("waiting for the study file"), line + rest
    assert str(rows_study.path) in line and f"(pid {hold.pid})" in line and "s so far" in line, line
    assert "python" in line, line  # the holder's program (here a bare python -c)
    assert "rows" in out


def test_records_this_version_cannot_read_are_skipped_and_counted(rows_study: Study) -> None:
    path = left_by_a_dead_writer(rows_study, range(2))
    with path.open("ab") as fh:
        fh.write(b'{"kind": "judged", "v": 1, "replies": [{"fingerprint": 3}], "verdicts": []}\n')
        fh.write(b"not json at all\n")
    again = open_study(rows_study.path)
    replayed = take_replayed(again)
    assert replayed is not None
    assert replayed.records == {"judged": 2} and replayed.unreadable == 2
    assert counts(again) == (2, 2) and not path.exists()


def test_grade_on_a_study_opened_before_the_kill_replays_and_asks_nothing_again(rows_study: Study) -> None:
    from mcqaudit.app.grade import GradeOptions, grade
    from mcqaudit.judge.prompts import JudgeConfig

    with ScriptedJudge(heuristic) as srv:
        config = JudgeConfig(model="scripted")
        opts = GradeOptions(config, base_url=srv.base_url, api_key_env="NO_SUCH_KEY_VAR")
        first = grade(rows_study, opts)
        assert first.graded == 10 and srv.count == 10
        # as if a run had journalled these outcomes and died before its batch: drop them from the study
        # and put them back in a dead writer's segment
        replies = rows_study.query("SELECT * FROM judge_replies")
        verdicts = rows_study.query("SELECT * FROM judge_verdicts")
        with rows_study.write() as con:
            con.execute("DELETE FROM judge_replies")
            con.execute("DELETE FROM judge_verdicts")
        j = Journal(rows_study.path)
        for r, v in zip(replies, verdicts, strict=True):
            j.append_judged([ReplyRecord(*r)], [VerdictRecord(*v)])
        seg = j.rotate()
        assert seg is not None
        seg.release()
        srv.reset()
        again = grade(rows_study, opts)  # the same Study object: opened before the "kill"
    assert srv.count == 0 and again.recovered == 10 and again.graded == 0
    assert counts(rows_study) == (10, 10)


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["mcqaudit", "grade", "--judge-api-key-env", "sk-secret"], "`mcqaudit grade`"),
        (["-m", "streamlit", "run", "app.py"], "the dashboard"),
    ],
)
def test_a_lock_holder_is_named_by_program_and_command_never_its_arguments(
    argv: list[str], shown: str
) -> None:
    from mcqaudit.store.db import describe_process

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", *argv])
    try:
        # until the child has exec'd, /proc/PID/cmdline is still this process's own
        cmdline = Path(f"/proc/{proc.pid}/cmdline")
        deadline = time.monotonic() + 10
        while b"time.sleep(30)" not in cmdline.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        name = describe_process(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert name.startswith(shown) and name.endswith(f"(pid {proc.pid})") and "secret" not in name, name
    assert describe_process(None) == "another process"


def test_info_on_a_writable_study_says_what_it_replayed(rows_study: Study) -> None:
    left_by_a_dead_writer(rows_study, range(4))
    info = subprocess.run([sys.executable, "-m", "mcqaudit", "info", "--db", str(rows_study.path)],
                          env=env(), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert info.returncode == 0, info.stderr
    assert (
        "journal: 4 judge replies that an earlier run had received but not yet written (it was stopped or "
        "killed) were written into the study from its journal" in info.stdout
    ), info.stdout
    assert counts(Study(rows_study.path)) == (4, 4) and not journal_dir(rows_study.path).exists()
    # told once: a second look finds nothing left to say
    again = subprocess.run([sys.executable, "-m", "mcqaudit", "info", "--db", str(rows_study.path)],
                           env=env(), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "journal:" not in again.stdout, again.stdout


def test_a_third_process_names_the_real_holder_not_the_one_waiting_before_it(rows_study: Study) -> None:
    """Another program holds the file (DuckDB's own lock); a first `mcqaudit info` waits for it holding
    mcqaudit's file lock; a second one, queued behind that, still names the program that has the file."""
    hold = subprocess.Popen([sys.executable, "-c", HOLD_RAW, str(rows_study.path)], env=env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    cmd = [sys.executable, "-m", "mcqaudit", "info", "--db", str(rows_study.path)]
    waiters: list[subprocess.Popen] = []
    try:
        assert hold.stdout is not None and hold.stdout.readline().strip() == "held"
        for _ in range(2):
            w = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            waiters.append(w)
            assert w.stderr is not None
            line = w.stderr.readline()  # blocks until it waits (and says so), or exits
            assert line.startswith("waiting for the study file"), line
            assert f"(pid {hold.pid})" in line, f"{line} (holder {hold.pid}, waiters {[x.pid for x in waiters]})"
    finally:
        assert hold.stdin is not None
        hold.stdin.close()
        hold.wait(30)
        for w in waiters:
            w.communicate(timeout=60)
    assert [w.returncode for w in waiters] == [0, 0]
