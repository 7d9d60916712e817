"""Shared fixtures: real DuckDB study files in a temp dir, and writers for input files."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcqaudit.store import Study

REPO = Path(__file__).resolve().parents[1]
CASES = Path(__file__).parent / "cases"


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


def write_jsonl(path: Path, rows: list) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n")
    return path


def read_cases(name: str) -> list[dict]:
    return [
        json.loads(line) for line in (CASES / name).read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def run_cli(
    *args: str, env: dict | None = None, timeout: float = 120, check: bool = False
) -> subprocess.CompletedProcess:
    """Run the real `mcqaudit` command in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "mcqaudit", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"mcqaudit {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


@pytest.fixture
def study(tmp_path: Path) -> Study:
    return Study(tmp_path / "study.duckdb", create=True)


# --- the dashboard's fixture study (tests/ui_study.py), built once per session, copied per test -------------
@pytest.fixture(scope="session")
def ui_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.ui_study import build_study

    return build_study(tmp_path_factory.mktemp("ui-template") / "template.duckdb")


@pytest.fixture
def ui_db(ui_template: Path, tmp_path: Path) -> Path:
    """Each test gets its own copy, so st.cache_resource keyed by path never leaks between tests."""
    import shutil

    dst = tmp_path / "study.duckdb"
    shutil.copy(ui_template, dst)
    return dst


# --- the one way the tests build a graded study through the public path ------------------------------------
def build_graded_study(
    path: Path, generations: Path, *, items: Path | None = None, control: str | None = "base", judge: bool = True
) -> Path:
    """Ingest a generations file (and its items file) into a new study at ``path`` through the real
    ``ingest_file``, then grade it with the real ``grade`` against the stand-in judge on 127.0.0.1 (a
    heuristic, not an LLM: none can be reached here). Rows the stand-in cannot read end as ``error``, as with
    any judge."""
    from mcqaudit.app.grade import GradeOptions, grade
    from mcqaudit.app.ingest import ingest_file
    from mcqaudit.judge.prompts import JudgeConfig
    from mcqaudit.standin.server import StandinServer
    from mcqaudit.vocab import STANDIN_MODEL

    study = Study(path, create=True)
    ingest_file(study, generations, items_path=items, control=control)
    if judge:
        with StandinServer() as server:
            summary = grade(study, GradeOptions(config=JudgeConfig(model=STANDIN_MODEL), base_url=server.base_url))
        assert summary.exit_code in (0, 3), summary.lines()
    return path
