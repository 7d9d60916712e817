"""Helpers the test modules share (a helper module, not a test module; no test module imports another, nor
conftest.py): the repository's paths, writers for input files, the tmpfs of the full-disk tests, and the two
ways to run the `mcqaudit` command.

- :func:`run_cli` runs the command in this process (``mcqaudit.cli.app`` through Click's ``main``), with
  the result shape of :func:`subprocess.run` (``returncode``, ``stdout``, ``stderr``, kept apart): the tests
  of what a command prints, writes and exits with. About 50 ms a call instead of ~1 s for a new interpreter.
- :func:`run_process` runs the real ``python -m mcqaudit`` in a subprocess: the tests that need a process of
  their own (its exit status as the shell sees it, signals, SIGKILL, stdin/TTY, environment variables read
  at start-up, a second process holding the study).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from typer import _click as click

REPO = Path(__file__).resolve().parents[1]
CASES = Path(__file__).parent / "cases"
PROG_NAME = "python -m mcqaudit"  # what Click calls the program in usage lines when run as `python -m mcqaudit`

Json = dict[str, Any]


def write_jsonl(path: Path, rows: Sequence[Json | str]) -> Path:
    """One line per row: a dict as JSON (non-ASCII kept as is), a string as it is (a broken line)."""
    with path.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n")
    return path


def read_cases(name: str) -> list[Json]:
    """The JSON lines of ``tests/cases/<name>``."""
    lines = (CASES / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@contextlib.contextmanager
def mounted_tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of ``size`` (``"2m"``, ``"8m"``) mounted on a new ``folder``, unmounted afterwards: the
    full-disk tests' disk. Skips the test where it cannot be mounted (not root, no mount permission)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    folder.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode(errors='replace').strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)



# --- input rows the ingest tests share -----------------------------------------------------------------------
Q4 = ["Paris", "Rome", "Berlin", "Madrid"]


def row(**kw: Any) -> Json:
    """One valid generations row (capital of France, gold A, answered A), with ``kw`` changed."""
    base: Json = {
        "item_id": "cap-fr",
        "arm": "base",
        "question": "Capital of France?",
        "options": Q4,
        "gold": "A",
        "generation": "A",
    }
    base.update(kw)
    return base


# (a bad JSON line, the field its error names, the reason it gives)
BAD_LINES: list[tuple[str, str, str]] = [
    ("{not json", "line", "not valid JSON"),
    ("[1, 2]", "line", "not a JSON object"),
    (
        json.dumps({k: v for k, v in row().items() if k != "generation"}),
        "generation",
        "missing required field",
    ),
    (json.dumps({k: v for k, v in row().items() if k != "item_id"}), "item_id", "missing required field"),
    (json.dumps(row(question=7)), "question", "must be a string, got an integer"),
    (json.dumps(row(options="Paris")), "options", "must be a list of option texts, got a string"),
    (json.dumps(row(options=["Paris"])), "options", "needs at least 2 options, got 1"),
    (json.dumps(row(options=["Paris", "Paris", "Rome"])), "options", "duplicate option texts: Paris"),
    (json.dumps(row(gold="E")), "gold", "'E' is not a letter in A..D"),
    (json.dumps(row(gold=4)), "gold", "index 4 is out of range for 4 options"),
    (json.dumps(row(gold=True)), "gold", "must be a letter or a 0-based index, got a boolean"),
    (json.dumps(row(orientation="ABCE")), "orientation", "is not an orientation label"),
    # labels are checked once per distinct label (issue 23): a repeated letter, lower case, a short label
    (json.dumps(row(orientation="ABBA")), "orientation", "is not an orientation label"),
    (json.dumps(row(orientation="dcba")), "orientation", "is not an orientation label"),
    (json.dumps(row(orientation="CBA")), "orientation", "is not an orientation label"),
    (json.dumps(row(sample="one")), "sample", "must be a non-negative integer"),
    (json.dumps(row(parsed_letter="F")), "parsed_letter", "'F' is not a letter in A..D"),
    (json.dumps(row(option_logprobs={"A": "high"})), "option_logprobs", "values must be numbers"),
    (json.dumps(row(metadata=[1])), "metadata", "must be an object"),
]


# --- the subprocess tests of grade and generate (tests/test_sigkill.py, tests/test_grade_guards.py) ---------
def process_env() -> dict[str, str]:
    """The environment of a real `mcqaudit` process under test: no judge settings inherited from the
    caller, a test API key, and this checkout first on PYTHONPATH."""
    out = {
        k: v for k, v in os.environ.items() if k not in ("MCQAUDIT_JUDGE_MODEL", "MCQAUDIT_JUDGE_BASE_URL")
    }
    out["OPENAI_API_KEY"] = "test-key"
    out["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return out


def judge_rows(n: int) -> list[Json]:
    """``n`` prose rows the scripted judge reads (gold A), for ``add_rows``."""
    opts = ["a red fruit", "a yellow fruit", "a green vegetable", "a root vegetable"]
    return [
        {
            "row_id": f"r{i:05d}",
            "item_id": f"item{i}",
            "options": opts,
            "gold_letter": "A",
            "generation": f"Thinking it over (take {i}), I would say it is {opts[i % 4]}.",
        }
        for i in range(n)
    ]


# --- running the command ------------------------------------------------------------------------------------
CliResult = subprocess.CompletedProcess[str]


def _checked(proc: CliResult, args: Sequence[str], check: bool) -> CliResult:
    if check and proc.returncode != 0:
        raise AssertionError(f"mcqaudit {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


Env = Mapping[str, str | None]  # variables set for one call; None: unset for it


def run_process(*args: str, env: Env | None = None, timeout: float = 120, check: bool = False) -> CliResult:
    """Run the real `mcqaudit` command in a subprocess (``python -m mcqaudit``)."""
    full = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "mcqaudit", *args],
        capture_output=True,
        text=True,
        env={k: v for k, v in full.items() if v is not None},
        timeout=timeout,
    )
    return _checked(proc, args, check)


@contextlib.contextmanager
def _environment(env: Env) -> Iterator[None]:
    before = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """Restore the signal handlers a command installed (the dashboard's stop handlers, asyncio's SIGTERM)."""
    before = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in before.items():
            if handler is not None:
                signal.signal(sig, handler)


@contextlib.contextmanager
def _streams() -> Iterator[tuple[io.BytesIO, io.BytesIO]]:
    """sys.stdin (empty, not a TTY), sys.stdout and sys.stderr swapped for buffers, as a subprocess with
    ``capture_output`` sees pipes (stderr with Python's ``backslashreplace``)."""
    out, err = io.BytesIO(), io.BytesIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    streams = (
        io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8"),
        io.TextIOWrapper(out, encoding="utf-8", write_through=True),
        io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True),
    )
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        for stream in streams:
            stream.flush()
            stream.detach()  # the buffers stay open for the caller to read


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # what the interpreter does with `sys.exit("message")`
    return 1


def run_cli(*args: str, env: Env | None = None, timeout: float = 120, check: bool = False) -> CliResult:
    """Run the `mcqaudit` command in this process, with the result shape of :func:`run_process`.

    As the real process does: Click's standalone main (usage errors exit 2), ``mcqaudit.cli.main``'s
    KeyboardInterrupt (``interrupted``, 130), and an exception that escapes prints its traceback on stderr
    and exits 1 (so a test that asserts "no traceback" still sees one). ``env`` is set in ``os.environ``
    for the call only (None: unset); ``timeout`` is accepted for the call sites' sake (an in-process call cannot be
    killed; the suite's own timeout covers a hang). Each command closes its study's connections itself
    (``Study.connect`` is short-lived), so nothing stays open after the call."""
    del timeout
    from mcqaudit import cli

    command = _click_command(cli.app)
    with _environment(env or {}), _signal_handlers_kept(), _streams() as (out, err):
        try:
            command.main(args=list(args), prog_name=PROG_NAME, standalone_mode=True)
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc)
        except KeyboardInterrupt:
            cli.err.print("interrupted")
            code = 130
        except Exception:  # the real process: a traceback on stderr, exit status 1
            traceback.print_exc(file=sys.stderr)
            code = 1
    proc = subprocess.CompletedProcess(
        [PROG_NAME, *args], code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8")
    )
    return _checked(proc, args, check)


@functools.cache
def _click_command(app: typer.Typer) -> click.Command:
    """The Click command typer builds from ``app`` (built once: ``app()`` builds it on every call)."""
    return typer.main.get_command(app)
