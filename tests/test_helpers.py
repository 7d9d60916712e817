"""The in-process twin of the `mcqaudit` command (tests/helpers.py ``run_cli``) answers as the real process
(``run_process``) does: the same exit status, stdout and stderr, kept apart."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.helpers import run_cli, run_process, write_jsonl


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("ingest",),  # a usage error: exit 2, the usage line names the program as `python -m mcqaudit`
        ("info", "--db", "{tmp}/missing.duckdb"),  # a clear one-line error, exit 1
        ("grade", "--db", "{tmp}/missing.duckdb", "--no-judge", "--bogus"),
    ],
)
def test_run_cli_answers_as_the_real_process(tmp_path: Path, args: tuple[str, ...]) -> None:
    argv = [a.format(tmp=tmp_path) for a in args]
    here, real = run_cli(*argv), run_process(*argv)
    assert (here.returncode, here.stdout, here.stderr) == (real.returncode, real.stdout, real.stderr)


def test_run_cli_on_a_study_matches_the_process(tmp_path: Path) -> None:
    rows = [
        {
            "item_id": "q",
            "arm": "base",
            "question": "Q?",
            "options": ["x", "y"],
            "gold": "A",
            "generation": "A",
        }
    ]
    src = write_jsonl(tmp_path / "g.jsonl", rows)
    for name, run in (("here", run_cli), ("real", run_process)):
        db = tmp_path / f"{name}.duckdb"
        assert run("ingest", str(src), "--db", str(db), "--quiet").returncode == 0
    here = run_cli("info", "--db", str(tmp_path / "here.duckdb"))
    real = run_process("info", "--db", str(tmp_path / "real.duckdb"))
    assert here.returncode == real.returncode == 0
    assert (
        here.stdout.replace("here.duckdb", "S").splitlines()[1:]
        == real.stdout.replace("real.duckdb", "S").splitlines()[1:]
    )  # the first line names the file and its creation time


def test_an_escaping_exception_is_a_traceback_and_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcqaudit import cli

    def boom(*_: object, **__: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(cli.console, "print", boom)
    p = run_cli("--version")
    assert p.returncode == 1 and "Traceback" in p.stderr and "RuntimeError: boom" in p.stderr


def test_env_is_set_and_unset_for_one_call_and_signal_handlers_are_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcqaudit import cli

    seen: dict[str, str | None] = {}

    def look(*_: object, **__: object) -> None:
        seen["A"], seen["B"] = os.environ.get("MCQ_TEST_A"), os.environ.get("MCQ_TEST_B")
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a command that installs a handler

    monkeypatch.setenv("MCQ_TEST_B", "before")
    monkeypatch.setattr(cli.console, "print", look)
    before = signal.getsignal(signal.SIGTERM)
    assert run_cli("--version", env={"MCQ_TEST_A": "set", "MCQ_TEST_B": None}).returncode == 0
    assert seen == {"A": "set", "B": None}
    assert "MCQ_TEST_A" not in os.environ and os.environ["MCQ_TEST_B"] == "before"
    assert signal.getsignal(signal.SIGTERM) == before


def test_check_raises_with_the_output() -> None:
    with pytest.raises(AssertionError, match="exited 2"):
        run_cli("ingest", check=True)
