"""Shared fixtures: real DuckDB study files in a temp dir. The helpers the tests share live in
tests/helpers.py and the study builders in tests/builders.py (no test module imports conftest.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mcqaudit.store import Study
from tests.builders import build_ui_study


@pytest.fixture
def study(tmp_path: Path) -> Study:
    return Study(tmp_path / "study.duckdb", create=True)


# --- the dashboard's fixture study (tests/ui_study.py), built once per session, copied per test -------------
@pytest.fixture(scope="session")
def ui_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_ui_study(tmp_path_factory.mktemp("ui-template") / "template.duckdb")


@pytest.fixture
def ui_db(ui_template: Path, tmp_path: Path) -> Path:
    """Each test gets its own copy, so st.cache_resource keyed by path never leaks between tests."""
    dst = tmp_path / "study.duckdb"
    shutil.copy(ui_template, dst)
    return dst
