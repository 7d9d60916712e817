"""The reports' cache beside a study (``<study>.report.json``, issue 23): a report asked again of an unchanged
study with the same options is read, not computed, and is the computed one to the byte.

On the fixture study and the demo: every format from the cache equals the format of a fresh computation
(``report_and_frames``, which never reads the cache); a second ``mcqaudit report`` answers without importing
duckdb or numpy; a review, a new control arm or other options are never answered from an older report; a
journal waiting beside the study, a broken cache file, a study with a connection open in this process and a
folder that cannot be written each mean: computed (and nothing left behind).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcqaudit import orient
from mcqaudit.app.report import build_report, report_and_frames
from mcqaudit.app.report_cache import cached_report
from mcqaudit.report import FORMATS, render
from mcqaudit.store import reportcache
from mcqaudit.store.db import Study
from mcqaudit.store.schema import refresh_effective_reviews
from mcqaudit.store.sidecars import journal_dir, report_cache_path
from mcqaudit.vocab import LETTERS
from tests.builders import build_graded_study, fixture_study, write_inputs
from tests.helpers import process_env, run_cli

BOOT = 200


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "s.duckdb"
    fixture_study(path).build()
    return path


def computed(path: Path, **kw: object) -> dict[str, str]:
    """Every format of the report as a fresh computation gives it (the cache neither read nor written)."""
    rep = report_and_frames(Study(path), n_boot=BOOT, **kw)[0]  # type: ignore[arg-type]
    return {fmt: render(rep, fmt) for fmt in FORMATS}


def test_every_format_from_the_cache_is_the_computed_one(db: Path) -> None:
    want = computed(db)
    assert not report_cache_path(db).exists()
    first = build_report(db, n_boot=BOOT)  # computed, and kept
    assert report_cache_path(db).exists()
    hit = cached_report(db, n_boot=BOOT)
    assert hit is not None and hit == first
    for fmt in FORMATS:
        assert render(hit, fmt) == want[fmt], fmt
    for fmt in FORMATS:  # the command line, in each format, from the cache
        out = run_cli("report", "--db", str(db), "--format", fmt, "--bootstrap", str(BOOT), check=True).stdout
        assert out == want[fmt], fmt


def test_another_spelling_of_the_path_reads_the_same_report_naming_its_own(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard names a study by its absolute path, a command often by a relative one: one report kept
    serves both, and each reads the path it gave (``study.path``, the only place a report names it)."""
    build_report(db.resolve(), n_boot=BOOT)
    monkeypatch.chdir(db.parent)
    hit = cached_report("s.duckdb", n_boot=BOOT)
    assert hit is not None and hit["study"]["path"] == "s.duckdb"
    assert render(hit, "json") == computed(Path("s.duckdb"))["json"]


def test_the_demo_study_from_the_cache(tmp_path: Path) -> None:
    from mcqaudit import demo

    path = tmp_path / "demo.duckdb"
    demo.build_demo(path)
    want = computed(path)
    build_report(path, n_boot=BOOT)
    hit = cached_report(path, n_boot=BOOT)
    assert hit is not None and {fmt: render(hit, fmt) for fmt in FORMATS} == want


def test_a_second_report_imports_neither_duckdb_nor_numpy(db: Path) -> None:
    args = ["report", "--db", str(db), "--format", "json", "--bootstrap", str(BOOT)]
    first = run_cli(*args, check=True).stdout
    code = (
        "import sys\nfrom mcqaudit.cli import main\nsys.argv = ['mcqaudit', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "sys.stderr.write(repr(sorted(m for m in sys.modules if m.split('.')[0] in ('duckdb', 'numpy', 'pandas'))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=process_env(), check=True
    )
    assert proc.stdout == first
    assert proc.stderr.strip() == "[]"


def test_check_after_report_reads_the_kept_report_and_says_what_it_would_have_computed(db: Path) -> None:
    """The CI gate's usual pair: `report`, then `check` with the same options. The check reads the kept
    report (no duckdb, no numpy) and prints, exits and says in JSON what a computed check does."""
    args = ["--db", str(db), "--bootstrap", str(BOOT)]
    want = run_cli("check", *args, "--json")
    want_text = run_cli("check", *args)
    report_cache_path(db).unlink()
    run_cli("report", *args, "--format", "md", check=True)
    code = (
        "import sys\nfrom mcqaudit.cli import main\nsys.argv = ['mcqaudit', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "sys.stderr.write(repr((code, sorted(m for m in sys.modules if m.split('.')[0] in ('duckdb', 'numpy')))))"
    )
    for extra, expect in ((["--json"], want), ([], want_text)):
        proc = subprocess.run(
            [sys.executable, "-c", code, "check", *args, *extra],
            capture_output=True, text=True, env=process_env(), check=False,
        )  # fmt: skip
        assert proc.stdout == expect.stdout
        assert proc.stderr.strip() == repr((expect.returncode, []))
    assert json.loads(want.stdout)["fired"] and want.returncode == 1  # the fixture's flags fire


def test_a_review_or_a_control_arm_is_never_answered_from_an_older_report(db: Path) -> None:
    before = build_report(db, n_boot=BOOT)
    study = Study(db)
    with study.write() as con:  # a review (the fixture's reviews take ids the sequence does not know)
        con.execute(
            "INSERT INTO reviews (review_id, row_id, action, verdict, picked_letter, reviewer, created_at) "
            "SELECT 999, row_id, 'override', 'OTHER', NULL, 'Kim', now() FROM graded_rows "
            "WHERE final_verdict = 'CORRECT' ORDER BY row_id LIMIT 1"
        )
        refresh_effective_reviews(con)
    assert cached_report(db, n_boot=BOOT) is None
    after = build_report(db, n_boot=BOOT)
    assert after["study"]["reviews"] == before["study"]["reviews"] + 1
    assert render(after, "json") == computed(db)["json"]
    study.set_meta("control_arm", "steered")
    assert cached_report(db, n_boot=BOOT) is None
    steered = build_report(db, n_boot=BOOT)
    assert steered["control_arm"] == "steered" and render(steered, "md") == computed(db)["md"]


def test_each_set_of_options_its_own_report_and_a_change_drops_them_all(db: Path) -> None:
    a = build_report(db, n_boot=BOOT)
    b = build_report(db, n_boot=BOOT, seed=7)
    c = build_report(db, n_boot=BOOT, verdicts="judge")
    d = build_report(db, n_boot=BOOT, control="hedging")
    assert a != b and a["bootstrap"]["seed"] == 0 and b["bootstrap"]["seed"] == 7
    assert c["study"]["verdicts"] == "judge" and d["control_arm"] == "hedging"
    assert cached_report(db, n_boot=BOOT, seed=7) == b and cached_report(db, n_boot=BOOT, verdicts="judge") == c
    assert cached_report(db, n_boot=BOOT + 1) is None
    build_report(db, n_boot=BOOT, seed=8)  # a fifth: the least recent (a) is no longer kept
    kept = json.loads(report_cache_path(db).read_text(encoding="utf-8"))["reports"]
    assert len(kept) == reportcache.KEEP and cached_report(db, n_boot=BOOT) is None
    os.utime(db, ns=(0, 0))  # the file touched: no report of it holds
    assert all(cached_report(db, n_boot=BOOT, seed=s) is None for s in (7, 8))
    build_report(db, n_boot=BOOT, seed=7)
    assert len(json.loads(report_cache_path(db).read_text(encoding="utf-8"))["reports"]) == 1


def test_a_broken_cache_a_waiting_journal_and_an_open_connection_mean_computed(db: Path) -> None:
    want = computed(db)["json"]
    report_cache_path(db).write_text("{not json", encoding="utf-8")
    assert cached_report(db, n_boot=BOOT) is None
    assert render(build_report(db, n_boot=BOOT), "json") == want  # computed, and the cache written again
    assert cached_report(db, n_boot=BOOT) is not None
    journal_dir(db).mkdir()  # a journal waits: opening the study for writing would change it first
    try:
        assert cached_report(db, n_boot=BOOT) is None
    finally:
        journal_dir(db).rmdir()
    study = Study(db)
    with study.connect():  # this process has it open (a write may be under way): neither read nor kept
        assert cached_report(study, n_boot=BOOT) is None
    report_cache_path(db).unlink()
    with study.connect():
        build_report(study, n_boot=BOOT)
    assert not report_cache_path(db).exists()


def test_a_folder_that_cannot_be_written_keeps_no_report(db: Path, tmp_path: Path) -> None:
    """As a user without write access to the study's folder (no root's override): the report is computed,
    no cache and no temporary file are left."""
    code = (
        "import sys\nfrom mcqaudit.app.report import build_report\nfrom mcqaudit.report import render\n"
        f"sys.stdout.write(render(build_report({str(db)!r}, n_boot={BOOT}), 'json'))"
    )
    before = sorted(p.name for p in db.parent.iterdir())
    assert "s.duckdb.report.json" not in before
    os.chmod(db.parent, 0o555)
    try:
        proc = subprocess.run(
            ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all",
             sys.executable, "-c", code],
            capture_output=True, text=True, env=process_env(), check=False,
        )  # fmt: skip
    finally:
        os.chmod(db.parent, 0o755)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == computed(db)["json"]
    assert sorted(p.name for p in db.parent.iterdir()) == before


def test_the_dashboard_reads_the_report_a_command_kept_and_keeps_its_own(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mcqaudit report` with the dashboard's options, then a dashboard page: the page's analysis is the kept
    report (nothing computed: computing would fail here) with the verdict counts the frames give; with no
    report kept, the dashboard computes and keeps one that the command then reads."""
    import pandas as pd
    import streamlit as st

    from mcqaudit.app import report as app_report
    from mcqaudit.store.frames import load_frames
    from mcqaudit.ui import data

    path = str(db.resolve())
    want = computed(db)["json"]
    want_counts = data.counts_of(load_frames(Study(path)))
    run_cli("report", "--db", path, "--format", "json", "--bootstrap", str(BOOT), check=True)
    st.cache_data.clear()
    with monkeypatch.context() as m:
        m.setattr(app_report, "report_and_frames", lambda *a, **k: pytest.fail("computed, not read"))
        rep, counts = data.analysis(path, data.study_version(path), BOOT)
    assert render(rep, "json") == want
    pd.testing.assert_frame_equal(counts.reset_index(drop=True), want_counts.reset_index(drop=True))
    report_cache_path(db).unlink()
    st.cache_data.clear()
    rep, counts = data.analysis(path, data.study_version(path), BOOT)
    assert render(rep, "json") == want and counts.equals(want_counts)
    hit = cached_report(db, n_boot=BOOT)
    assert hit is not None and render(hit, "md") == computed(db)["md"]


def grouped_study(tmp_path: Path) -> Path:
    """Two arms × 3 topics (and rows without one) × 24 items × 4 orientations, through the real ingest; the
    treated arm is right less often on one topic. No judge: the generations are bare letters (pre-filter)."""
    items, gens = [], []
    for t, topic in enumerate(("algebra", "history", "optics", None)):
        for i in range(24):
            iid = f"{t}-{i:02d}"
            items.append({"item_id": iid, "question": f"Question {iid}?", "options": [f"{iid}-{k}" for k in "wxyz"],
                          "gold": 0})  # fmt: skip
            for orientation in ("ABCD", "BCDA", "CDAB", "DABC"):
                gold = orient.displayed_letter("A", orientation)
                for arm in ("base", "steered"):
                    right = (i + len(orientation) + t) % (3 if arm == "steered" and topic == "optics" else 5) != 0
                    gens.append({
                        "item_id": iid, "arm": arm, "question": f"Question {iid}?", "orientation": orientation,
                        "options": orient.apply([f"{iid}-{k}" for k in "wxyz"], orientation), "gold": gold,
                        "generation": gold if right else LETTERS[(LETTERS.index(gold) + 1) % 4],
                        **({"metadata": {"topic": topic}} if topic else {}),
                    })  # fmt: skip
    generations, items_path = write_inputs(tmp_path / "inputs", items, gens)
    return build_graded_study(tmp_path / "s.duckdb", generations, items=items_path, judge=False)


@pytest.mark.parametrize("kind", ["by_group", "panel_and_reviewers"])
def test_reports_of_every_part_come_back_from_the_cache_as_they_were(kind: str, tmp_path: Path) -> None:
    """A report's JSON form loses nothing a renderer reads: with `--by` groups, and with a judge panel and two
    reviewers (reviewer agreement), the kept report equals the computed dict (no tuple, no key that is not a
    string) and renders to the same bytes in every format."""
    if kind == "by_group":
        path, by = grouped_study(tmp_path), ["metadata.topic"]
    else:
        from tests.overview_panel_study import panel_study

        path, by = panel_study(tmp_path, True), []
    rep = report_and_frames(Study(path), n_boot=BOOT, by=by)[0]
    assert rep.get("by_group") if by else rep.get("judge_panel") and rep.get("reviewer_agreement")
    build_report(path, n_boot=BOOT, by=by)
    hit = cached_report(path, n_boot=BOOT, by=by)
    assert hit == rep
    assert {fmt: render(hit, fmt) for fmt in FORMATS} == {fmt: render(rep, fmt) for fmt in FORMATS}
