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
