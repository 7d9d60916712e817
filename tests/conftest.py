"""Shared fixtures: real DuckDB study files in a temp dir, and writers for input files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcqaudit.store import Study

REPO = Path(__file__).resolve().parents[1]
CASES = Path(__file__).parent / "cases"


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
