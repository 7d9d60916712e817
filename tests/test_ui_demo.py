"""The demo study builder: the real ingest + grade path against the in-process stand-in judge, control arm
base, marked as demo data; built once, rebuilt only when its inputs change."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcqaudit.demo import DEMO_DB, GENERATIONS, ITEMS, DemoError, build_demo
from mcqaudit.report import STANDIN_BANNER
from mcqaudit.store import Study
from mcqaudit.ui.components import DEMO_BANNER
from tests.builders import write_ui_inputs as write_inputs
from tests.ui_study import app


def test_build_demo_is_real_and_idempotent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", "50")
    gens, items = write_inputs(tmp_path / "inputs")
    gens.write_text("".join(gens.read_text().splitlines(keepends=True)[:16]))  # 4 items: a quick grade
    db = tmp_path / "demo.duckdb"
    assert build_demo(db, generations=gens, items=items) == db
    # nothing of the building file is left beside the study (its locks, its info cache)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.duckdb", "inputs"]
    s = Study(db)
    assert s.get_meta("control_arm") == "base" and s.get_meta("demo") == "true"
    assert s.query("SELECT count(*) FROM graded_rows WHERE judge_status = 'pending'")[0][0] == 0
    assert s.query("SELECT model, standin FROM judge_configs") == [("standin-heuristic", True)]
    # the dashboard says where its numbers come from
    at = app(db, "overview").run()
    assert DEMO_BANNER in [i.value for i in at.info] and STANDIN_BANNER in [w.value for w in at.warning]
    stamp = db.stat().st_mtime_ns
    build_demo(db, generations=gens, items=items)  # up to date: nothing rebuilt
    assert db.stat().st_mtime_ns == stamp
    gens.write_text(gens.read_text().replace("I cannot answer that question.", "I will not say."))
    assert "I will not say." in gens.read_text()
    build_demo(db, generations=gens, items=items)  # inputs changed: rebuilt
    assert db.stat().st_mtime_ns != stamp
    assert Study(db).query("SELECT count(*) FROM graded_rows WHERE generation = 'I will not say.'")[0][0] > 0


def test_build_demo_names_a_missing_input(tmp_path: Path) -> None:
    with pytest.raises(DemoError, match="missing"):
        build_demo(tmp_path / "x.duckdb", generations=tmp_path / "nope.jsonl", items=ITEMS)


def test_demo_paths_are_the_sample_runs() -> None:
    assert DEMO_DB.parent == GENERATIONS.parent == ITEMS.parent
    assert DEMO_DB.name == "demo.duckdb" and GENERATIONS.exists() and ITEMS.exists()
