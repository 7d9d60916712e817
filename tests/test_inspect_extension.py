"""The Inspect AI extension (`mcqaudit.inspect`, DESIGN §10), with real Inspect runs made offline
(tests/inspect_runs.py: the task of sample_runs/inspect_task.py, `mockllm/model` as the model and as the
`grader` role): dataset -> orientations -> answers, half bare letters and half prose -> mcq_scorer on the
grader -> log -> `mcqaudit ingest` (the scorer's verdicts taken as judge verdicts) -> per-orientation report,
the dashboard, `reviews export --inspect`; the entry point Inspect finds the extension by."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from mcqaudit import orient
from mcqaudit.app.grade import GradeOptions, grade
from mcqaudit.app.reviews import add_review
from mcqaudit.judge.prompts import TEMPLATE_VERSION, JudgeConfig
from mcqaudit.store import Study
from tests.helpers import run_cli
from tests.inspect_runs import ILLEGAL, ROOT, make_in_subprocess, subprocess_env
from tests.judge_servers import ScriptedJudge, heuristic

inspect_log = pytest.importorskip("inspect_ai.log")
ext = pytest.importorskip("mcqaudit.inspect")


# ------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The audited run's log, a study ingested from it (copied per test) and what ingest said."""
    folder = tmp_path_factory.mktemp("inspect_ext")
    log = make_in_subprocess("audit", folder)
    db = folder / "template.duckdb"
    proc = run_cli("ingest", str(log), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    return {"log": log, "db": db, "said": proc.stdout}


@pytest.fixture
def study(made: dict[str, Any], tmp_path: Path) -> Study:
    db = tmp_path / "study.duckdb"
    shutil.copy(made["db"], db)
    return Study(db)


def _samples(log_path: Path) -> dict[str, Any]:
    log = inspect_log.read_eval_log(str(log_path), resolve_attachments=True)  # long texts are attachments
    return {str(s.id): s for s in log.samples}


def _score(sample: Any) -> Any:
    return sample.scores["mcq_scorer"]


def _rows(study: Study) -> dict[str, dict[str, Any]]:
    df = study.query_df("SELECT * FROM graded_rows")
    df = df.astype(object).where(df.notna(), None)  # a missing value reads as None
    return {f"{r['item_id']}@{r['orientation']}": r for r in df.to_dict("records")}


# ----------------------------------------------------------------------------------------- orientations
def _questions() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("inspect_task", ROOT / "sample_runs" / "inspect_task.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.QUESTIONS


@pytest.mark.parametrize(("scheme", "n"), [("cyclic", 20), ("swap", 12), ("all", 100), ("random:3", 16)])
def test_orientations_gives_every_sample_in_every_orientation(scheme: str, n: int) -> None:
    questions = list(_questions())
    out = list(ext.orientations(questions, scheme=scheme))
    assert len(out) == n and len({s.id for s in out}) == n
    by_item = Counter(s.metadata["item_id"] for s in out)
    for q in questions:
        labels = orient.scheme_labels(len(q.choices), scheme)
        assert by_item[q.id] == len(labels)
        for label in labels:
            s = next(x for x in out if x.id == f"{q.id}@{label}")
            assert s.metadata["orientation"] == label and s.metadata["item_id"] == q.id
            assert s.choices == orient.apply(q.choices, label)  # choices reordered as the label says
            gold = q.choices[orient.LETTERS.index(q.target)]
            assert s.choices[orient.LETTERS.index(s.target)] == gold  # the target follows its option
            assert s.input == q.input
            for key, value in (q.metadata or {}).items():  # the sample's own metadata stays
                assert s.metadata[key] == value


def test_orientations_keeps_a_dataset_s_own_item_id_and_counts_samples_without_ids() -> None:
    from inspect_ai.dataset import MemoryDataset, Sample

    ds = MemoryDataset(
        [
            Sample(input="Q1?", choices=["x", "y"], target=["B"]),
            Sample(input="Q2?", choices=["x", "y"], target="A", metadata={"item_id": "mmlu-17"}),
        ],
        name="named",
    )
    out = ext.orientations(ds, scheme="cyclic")
    assert out.name == "named"
    assert [(s.id, s.metadata["item_id"], s.target) for s in out] == [
        ("1@AB", "1", ["B"]),
        ("1@BA", "1", ["A"]),
        ("2@AB", "mmlu-17", "A"),
        ("2@BA", "mmlu-17", "B"),
    ]


@pytest.mark.parametrize(
    ("sample", "says"),
    [
        ({"input": "Q?", "target": "A"}, "'q': no choices"),
        ({"input": "Q?", "choices": ["x", "x", "y"], "target": "A"}, "'q': its choices repeat"),
        (
            {"input": "Q?", "choices": ["x", "y"], "target": "C"},
            "'q': target 'C' is not one option letter in A..B",
        ),
        ({"input": "Q?", "choices": ["x", "y"], "target": ["A", "B"]}, "is not one option letter"),
        (
            {"input": "Q?", "choices": ["x", "y"], "target": "A", "metadata": {"orientation": "BA"}},
            "applied twice",
        ),
    ],
)
def test_orientations_refuses_what_it_cannot_orient(sample: dict[str, Any], says: str) -> None:
    from inspect_ai.dataset import Sample

    with pytest.raises(orient.OrientationError, match=None) as exc:
        ext.orientations([Sample(id="q", **sample)])
    assert says in str(exc.value)
    with pytest.raises(orient.OrientationError, match="unknown scheme"):
        ext.orientations([Sample(id="q", input="Q?", choices=["x", "y"], target="A")], scheme="spiral")


# --------------------------------------------------------------------------------------- the Inspect run
def test_the_scorer_s_verdicts_in_inspect(made: dict[str, Any]) -> None:
    samples = _samples(made["log"])
    assert len(samples) == 20
    want = {
        # item: (value in every orientation, source)
        "capital-fr": ("C", "prefilter"),  # bare letters
        "boiling": ("C", "prefilter"),  # a bare letter after ContentReasoning that names another option
        "red-planet": ("C", "judge"),  # prose
        "spider-legs": ("I", "judge"),  # prose after a <think> block that names another option
    }
    for sid, s in samples.items():
        sc = _score(s)
        item = s.metadata["item_id"]
        meta = sc.metadata
        assert meta["mcqaudit_score"] == ext.SCORE_VERSION
        if item in want:
            assert (sc.value, meta["source"]) == want[item], sid
            letter = s.choices.index(  # the picked letter is the option's letter in the order shown
                {"capital-fr": "Paris", "boiling": "100 °C", "red-planet": "Mars", "spider-legs": "Ten"}[item]
            )
            assert sc.answer == meta["letter"] == "ABCD"[letter]
    blank = _score(samples["sun-orbit@BA"])  # a blank answer: OTHER by rule, Inspect's NOANSWER
    assert (blank.value, blank.answer, blank.metadata["source"], blank.metadata["verdict"]) == (
        "N",
        None,
        "rule",
        "OTHER",
    )
    judged = _score(samples["red-planet@BCDA"])
    assert (
        judged.metadata["judge_status"] == "ok"
        and judged.explanation == judged.metadata["judge_reply"] == "A"
    )
    config = JudgeConfig(model="mockllm/model")  # what mcq_scorer() uses: the grader role's model
    assert judged.metadata["fingerprint"] == config.fingerprint
    assert judged.metadata["judge"]["config"]["template_version"] == TEMPLATE_VERSION
    # a prefilter row names no fingerprint: no judge was asked
    assert _score(samples["capital-fr@ABCD"]).metadata["fingerprint"] is None


def test_an_illegal_grader_reply_is_not_a_verdict(made: dict[str, Any]) -> None:
    log = inspect_log.read_eval_log(str(made["log"]))
    samples = {str(s.id): s for s in log.samples}
    bad = _score(samples["ice-cold@AB"])  # prose from the judge, at the first ask and at the re-ask
    assert isinstance(bad.value, float) and math.isnan(bad.value)  # Inspect's unscored score, never coerced
    assert bad.reason == "grader_failed" and bad.answer is None
    assert bad.metadata["judge_status"] == "error" and bad.metadata["verdict"] is None
    assert bad.metadata["judge_reply"] == ILLEGAL and ILLEGAL in bad.explanation
    assert [r["reply"] for r in bad.metadata["judge"]["replies"]] == [ILLEGAL, ILLEGAL]
    assert bad.metadata["judge_error"].startswith("prose:")
    # one illegal reply, then a legal one on the re-ask: a verdict
    again = _score(samples["ice-cold@BA"])
    assert again.value == "C" and [r["value"] for r in again.metadata["judge"]["replies"]] == [None, "B"]
    # Inspect's metrics leave the unscored sample out
    result = log.results.scores[0]
    assert result.unscored_samples == 1 and result.scored_samples == 19
    values = [_score(s).value for s in log.samples if _score(s).reason is None]
    assert result.metrics["accuracy"].value == pytest.approx(values.count("C") / len(values))


def test_the_judge_is_sent_the_answer_never_the_thinking(made: dict[str, Any]) -> None:
    samples = _samples(made["log"])
    for sid in ("spider-legs@ABCD", "red-planet@ABCD"):
        s = samples[sid]
        calls = [e for e in s.events if e.event == "model" and e.role == "grader"]
        assert len(calls) == 1
        sent = "\n".join(m.text for m in calls[0].input)
        assert "RESPONSE>>>" in sent  # the judge prompt itself, not an attachment reference
        assert "Insects have six legs" not in sent and "<think>" not in sent
    spider = samples["spider-legs@ABCD"]
    sent = next(e for e in spider.events if e.event == "model" and e.role == "grader").input[-1].text
    assert "A spider has ten legs." in sent
    # the reasoning model's bare letter was read by the pre-filter, its ContentReasoning left alone
    boiling = samples["boiling@BCDA"]
    assert not [e for e in boiling.events if e.event == "model" and e.role == "grader"]
    assert _score(boiling).answer == "ABCD"[boiling.choices.index("100 °C")]


def test_mcq_scorer_needs_a_judge(tmp_path: Path) -> None:
    log = inspect_log.read_eval_log(str(make_in_subprocess("nograder", tmp_path)))
    assert log.status == "error"
    assert "Model role 'grader' is required" in str(log.error.message)


# ------------------------------------------------------------------------------------------- ingest
def test_ingest_keeps_orientation_and_item_and_takes_the_verdicts(made: dict[str, Any], study: Study) -> None:
    samples = _samples(made["log"])
    rows = _rows(study)
    assert set(rows) == set(samples)  # item and orientation from the metadata: one row per sample
    fp = JudgeConfig(model="mockllm/model").fingerprint
    for sid, s in samples.items():
        r, meta = rows[sid], _score(s).metadata
        assert list(r["options"]) == s.choices
        assert r["verdict_source"] == (meta["source"] if meta["verdict"] is not None else None), sid
        assert r["final_verdict"] == meta["verdict"], sid
        if meta["source"] == "judge":  # the scorer's judge outcome, under its fingerprint
            assert (r["judge_fingerprint"], r["judge_status"], r["judge_reply"]) == (
                fp, meta["judge_status"], meta["judge_reply"]
            ), sid  # fmt: skip
        else:
            assert r["judge_status"] == "skipped" and r["judge_fingerprint"] is None, sid
    assert rows["ice-cold@AB"]["judge_status"] == "error" and rows["ice-cold@AB"]["final_verdict"] is None
    assert rows["spider-legs@BCDA"]["answer"] == "A spider has ten legs."
    n_replies = sum(
        len(_score(s).metadata["judge"]["replies"]) for s in samples.values() if _score(s).metadata["judge"]
    )
    assert n_replies == 12
    assert study.query("SELECT count(*) FROM judge_replies WHERE fingerprint = ?", [fp])[0][0] == n_replies
    assert study.query("SELECT model, shape, template_version FROM judge_configs") == [
        ("mockllm/model", "extract", TEMPLATE_VERSION)
    ]
    said = made["said"]
    assert f"10 judge verdict(s) taken from mcq_scorer under {fp}" in said
    assert "(1 of them replies that are not verdicts: `grade` retries them)" in said


def test_grade_after_ingest_asks_only_what_the_scorer_left(study: Study) -> None:
    """No second grading: under the scorer's fingerprint `grade` sends only the row with no verdict."""
    with ScriptedJudge(heuristic) as srv:
        summary = grade(study, GradeOptions(JudgeConfig(model="mockllm/model"), base_url=srv.base_url,
                                            backoff_base_s=0.01))  # fmt: skip
        sent = [c.parsed.options for c in srv.calls if c.parsed is not None]
    assert summary.fingerprint == JudgeConfig(model="mockllm/model").fingerprint
    assert sent == [["Yes", "No"]]  # ice-cold in orientation AB, the one error
    assert _rows(study)["ice-cold@AB"]["judge_status"] == "ok"


def test_the_per_orientation_report_matches_inspect_s(
    made: dict[str, Any], study: Study, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    proc = run_cli("report", "--db", str(study.path), "--format", "json", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    import json

    rep = json.loads(out.read_text())
    [arm] = rep["arms"]
    by_orientation = rep["metrics"][arm]["accuracy_by_orientation"]
    inspect_metrics = inspect_log.read_eval_log(str(made["log"])).results.scores[0].metrics
    samples = _samples(made["log"])
    labels = sorted({s.metadata["orientation"] for s in samples.values()})
    assert sorted(by_orientation) == labels
    for label in labels:
        # by hand: the scored samples of the orientation, C over all (OTHER counts against, as in Inspect)
        values = [_score(s).value for s in samples.values() if s.metadata["orientation"] == label]
        scored = [v for v in values if v in ("C", "I", "N")]
        assert by_orientation[label]["value"] == pytest.approx(scored.count("C") / len(scored), abs=1e-6)
        assert by_orientation[label]["n"] == len(scored)
        assert inspect_metrics[label].value == pytest.approx(by_orientation[label]["value"], abs=1e-6)
    assert rep["judge_fingerprints"][JudgeConfig(model="mockllm/model").fingerprint]["rows"] == 9


def test_the_dashboard_opens_on_the_ingested_log(study: Study, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcqaudit.ui import tables
    from tests.ui_study import BOOT, app, no_exceptions, report_of

    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", str(BOOT))
    rep = report_of(study.path)
    at = app(study.path, "orientations").run()
    no_exceptions(at)
    want = tables.circular(rep).reset_index(drop=True).astype(str)  # accuracy over every orientation
    shown = [d.value for d in at.dataframe if list(d.value.columns) == list(want.columns)]
    assert shown and shown[0].reset_index(drop=True).astype(str).equals(want)
    ov = app(study.path, "overview").run()
    no_exceptions(ov)
    fp = JudgeConfig(model="mockllm/model").fingerprint
    assert any(fp in " ".join(map(str, d.value.to_numpy().ravel())) for d in ov.dataframe)


def test_a_judge_outcome_that_does_not_check_out_is_left_for_grade(
    made: dict[str, Any], tmp_path: Path
) -> None:
    """Taken only when it checks out: a prompt hash that is not the row's, a template version that is not
    this mcqaudit's, and a verdict its reply does not give are each left pending, with the reason."""
    log = inspect_log.read_eval_log(str(made["log"]))
    edits = {
        "red-planet@ABCD": lambda m: m["judge"].update(prompt_hash="0" * 64),
        "red-planet@BCDA": lambda m: m["judge"]["config"].update(template_version="2020-01-01.1"),
        "red-planet@CDAB": lambda m: m.update(verdict="INCORRECT"),
    }
    for s in log.samples:
        if s.id in edits:
            edits[s.id](s.scores["mcq_scorer"].metadata)
    edited = tmp_path / "edited.eval"
    inspect_log.write_eval_log(log, str(edited))
    db = tmp_path / "s.duckdb"
    proc = run_cli("ingest", str(edited), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert "7 judge verdict(s) taken" in proc.stdout
    assert "3 judge outcome(s) left for `grade` (sample " in proc.stdout
    assert "the judge was sent another text than this row's question, options and answer" in proc.stdout
    rows = _rows(Study(db))
    for sid in edits:
        assert rows[sid]["judge_status"] == "pending" and rows[sid]["final_verdict"] is None
    assert rows["red-planet@DABC"]["judge_status"] == "ok"


# ------------------------------------------------------------------------------------ corrections back
def test_reviews_export_edits_the_scorer_s_three_way_score(
    made: dict[str, Any], study: Study, tmp_path: Path
) -> None:
    rows = _rows(study)
    add_review(study, rows["red-planet@BCDA"]["row_id"], reviewer="ann", verdict="OTHER", note="hedges")
    add_review(
        study, rows["capital-fr@CDAB"]["row_id"], reviewer="ann", verdict="INCORRECT", picked_letter="A"
    )
    out = tmp_path / "audited.eval"
    proc = run_cli(
        "reviews", "export", "--db", str(study.path), "--inspect", str(made["log"]), "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    before, after = _samples(made["log"]), _samples(out)
    red = _score(after["red-planet@BCDA"])
    assert (red.value, red.answer, red.explanation) == ("N", None, "OTHER: hedges")  # three-way: N, not I
    assert red.history[1].provenance.author == "ann"
    assert red.metadata == _score(before["red-planet@BCDA"]).metadata  # the scorer's record stays
    cap = _score(after["capital-fr@CDAB"])
    assert (cap.value, cap.answer) == ("I", "A")  # the orientation's own sample, its displayed letter
    for sid in set(before) - {"red-planet@BCDA", "capital-fr@CDAB"}:
        assert _score(after[sid]).history == []


# ------------------------------------------------------------------------------------ the entry point
def test_inspect_finds_the_extension_by_its_entry_point(tmp_path: Path) -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["inspect_ai"]
    assert declared == {"mcqaudit": "mcqaudit.inspect"}
    found = {ep.name: ep.value for ep in entry_points(group="inspect_ai")}
    assert found.get("mcqaudit") == "mcqaudit.inspect", (
        "the installed package does not declare the pyproject's entry point: reinstall it (pip install -e .)"
    )
    # `inspect score --scorer mcqaudit/mcq_scorer` resolves the name through the entry point alone
    log = make_in_subprocess("bare", tmp_path)
    out = tmp_path / "rescored.eval"
    inspect_cli = Path(sys.executable).with_name("inspect")
    proc = subprocess.run(
        [str(inspect_cli), "score", str(log), "--scorer", "mcqaudit/mcq_scorer", "--model-role",
         "grader=mockllm/model", "--action", "overwrite", "--output-file", str(out), "--display", "none"],
        cwd=tmp_path, env=subprocess_env(tmp_path / "home"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rescored = inspect_log.read_eval_log(str(out))
    assert [s.name for s in rescored.results.scores] == ["mcq_scorer"]
    for s in rescored.samples:  # bare letters: the pre-filter reads each, no judge is asked
        sc = s.scores["mcq_scorer"]
        assert sc.metadata["source"] == "prefilter" and sc.answer == "ABCD"[len(s.choices) - 1]


def test_the_score_layout_is_one_across_the_package() -> None:
    from mcqaudit import inspect_edits
    from mcqaudit.app import scored
    from mcqaudit.ingest import inspect_log as reader

    assert ext.SCORE_KEY == reader.SCORE_KEY == scored.SCORE_KEY == inspect_edits._MCQ_SCORER_KEY
    assert ext.SCORE_VERSION == scored.SCORE_VERSION
