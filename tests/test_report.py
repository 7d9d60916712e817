"""The report: JSON shape (docs/design.md §7), golden Markdown/JSON of a fixture study, HTML, the CLI command.

Golden files live in tests/golden/ and are rewritten only with MCQAUDIT_REGEN_GOLDEN=1. The fixture is
deterministic (seeded, fixed timestamps) and its item-level values are multiples of 1/4, so the float32
bootstrap sums are exact on every machine.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from mcqaudit import orient
from mcqaudit.app.report import build_report, flags_for
from mcqaudit.plots import (
    fig_delta_by_orientation,
    fig_judge_agreement,
    fig_orientation_accuracy,
    fig_other_rate,
    fig_parser_confusion,
    fig_position_picks,
    report_figures,
)
from mcqaudit.report import STANDIN_BANNER, render, to_html, to_markdown
from tests.builders import NO_POSITION_EFFECT, StudyBuilder, fixture_study, two_family_study
from tests.helpers import run_cli

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("MCQAUDIT_REGEN_GOLDEN") == "1"
METRIC_KEYS = {"value", "ci_low", "ci_high", "n"}


def golden_report(tmp_path: Path, **kw: Any) -> dict[str, Any]:
    study = fixture_study(tmp_path / "golden.duckdb").build()
    return build_report(study, n_boot=200, seed=0, **kw)


def normalise(text: str, rep: dict[str, Any]) -> str:
    """Take out what differs between runs and releases: the file's path, its creation time, the version."""
    text = text.replace(rep["study"]["path"], "<study>").replace(str(rep["study"]["created"]), "<created>")
    return text.replace(f'"mcqaudit_version": "{rep["mcqaudit_version"]}"', '"mcqaudit_version": "<version>"')


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if REGEN:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing: regenerate with MCQAUDIT_REGEN_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} differs from the golden file (MCQAUDIT_REGEN_GOLDEN=1)"
    )


def test_golden_json_and_markdown(tmp_path: Path) -> None:
    rep = golden_report(tmp_path)
    check_golden("fixture_report.json", normalise(render(rep, "json"), rep))
    check_golden("fixture_report.md", normalise(to_markdown(rep), rep))


def _walk_metrics(obj: Any, path: str = "") -> list[str]:
    """Paths of metric-looking dicts that lack a field of the metric shape."""
    bad = []
    if isinstance(obj, dict):
        if "value" in obj and not obj.keys() >= METRIC_KEYS:
            bad.append(path)
        for k, v in obj.items():
            bad += _walk_metrics(v, f"{path}.{k}")
    return bad


def test_json_has_the_design_shape(tmp_path: Path) -> None:
    rep = golden_report(tmp_path)
    for key in ("study", "arms", "control_arm", "rows", "judge_fingerprints", "metrics", "delta_accuracy",
                "delta_accuracy_by_parser", "flags", "notes", "bootstrap"):  # fmt: skip
        assert key in rep, key
    assert rep["arms"] == ["base", "steered", "hedging"] and rep["control_arm"] == "base"
    assert rep["rows"] == 288
    assert rep["bootstrap"] == {"resamples": 200, "seed": 0, "unit": "item", "ci_level": 0.95, "method": "bootstrap"}
    assert set(rep["study"]) >= {"path", "created", "unaudited", "standin_judge"}
    assert rep["judge_fingerprints"]["fp-golden"]["arms"] == ["base", "steered", "hedging"]
    for arm in rep["arms"]:
        m = rep["metrics"][arm]
        for key in ("accuracy", "answered_accuracy", "other_rate", "ungraded_rate", "accuracy_by_orientation",
                    "circular_accuracy", "position_pick_rate", "first_position_rate", "rstd", "consistency",
                    "parser_disagreement", "judge_agreement", "logprob_crosscheck"):  # fmt: skip
            assert key in m, (arm, key)
        assert m["circular_accuracy"]["chance"] == pytest.approx(0.25**4)
    assert rep["metrics"]["base"]["logprob_crosscheck"] is not None
    assert rep["metrics"]["steered"]["logprob_crosscheck"] is None
    assert "metrics.steered.logprob_crosscheck" in rep["notes"]
    assert set(rep["delta_accuracy"]) == {"steered", "hedging"}
    for d in rep["delta_accuracy"].values():
        assert "mde" in d["overall"] and set(d["by_orientation"]) == set(orient.scheme_labels(4, "cyclic"))
    assert set(rep["delta_accuracy_by_parser"]["hedging"]) == {"strict", "naive", "user", "simple_evals"}
    assert _walk_metrics(rep) == []
    for f in rep["flags"]:
        assert set(f) >= {"name", "arm", "evidence", "page"}
    json.dumps(rep, allow_nan=False)  # strict JSON: no NaN anywhere


def test_fixture_flags(tmp_path: Path) -> None:
    rep = golden_report(tmp_path)
    names = {(f["name"], f["arm"]) for f in rep["flags"]}
    assert ("ungraded_rows", "hedging") in names
    assert ("other_rate_rise", "hedging") in names
    # six reviews of a uniform spot check do not audit the judge: it needs 100 (docs/design.md §7)
    (un,) = [f for f in rep["flags"] if f["name"] == "judge_unaudited"]
    assert (un["reviewed_rows"], un["required_rows"]) == (6, 100) and "6 of the 100" in un["evidence"]
    assert rep["judge_agreement"]["preliminary"] is True
    for f in rep["flags"]:
        assert isinstance(f["items"], int) and isinstance(f["rows"], int)
    for d in rep["delta_accuracy"].values():
        assert (d["items"], d["pairing"]) == (24, "paired")
    assert set(rep["pairwise_delta"]["steered"]) == {"base", "hedging"}
    assert rep["pairwise_delta"]["steered"]["base"]["value"] == rep["delta_accuracy"]["steered"]["overall"]["value"]
    ev = next(f["evidence"] for f in rep["flags"] if f["name"] == "other_rate_rise")
    assert "answered accuracy" in ev  # the recomputation without OTHER is shown beside it


def test_control_and_verdict_options(tmp_path: Path) -> None:
    study = fixture_study(tmp_path / "s.duckdb").build()
    rep = build_report(study, control="steered", verdicts="judge", n_boot=0)
    assert rep["control_arm"] == "steered" and rep["control_source"] == "--control"
    assert set(rep["delta_accuracy"]) == {"base", "hedging"}
    assert rep["study"]["verdicts"] == "judge"
    assert rep["metrics"]["base"]["accuracy"]["ci_low"] is None  # no bootstrap asked for
    with pytest.raises(ValueError, match="not an arm"):
        build_report(study, control="nope", n_boot=0)
    with pytest.raises(ValueError, match="verdicts"):
        build_report(study, verdicts="human", n_boot=0)


def test_markdown_puts_flags_first_and_has_every_table(tmp_path: Path) -> None:
    md = to_markdown(golden_report(tmp_path))
    heads = re.findall(r"^## (.+)$", md, flags=re.M)
    assert heads.index("Flags") < heads.index("Headline")
    for h in ("Headline", "Accuracy by orientation", "Δ vs control (base)", "Δaccuracy by parser",
              "Parser disagreement with the verdicts", "Position picks", "Judge vs human"):  # fmt: skip
        assert h in heads
    header = next(line for line in md.splitlines() if line.startswith("| arm | rows | accuracy"))
    for col in (
        "answered accuracy",
        "OTHER rate",
        "ungraded rate",
        "circular accuracy",
        "first-position rate",
        "RStd",
    ):
        assert col in header


def test_html_is_self_contained_with_banner_and_escaped_names(tmp_path: Path) -> None:
    evil = '<script>alert("x")</script>'
    b = fixture_study(tmp_path / "s.duckdb", standin=True, arm_names=("base", evil, "hedging|pipe"))
    rep = build_report(b.build(), n_boot=50)
    assert rep["study"]["standin_judge"] is True
    page = to_html(rep)
    assert "<script" not in page.replace("&lt;script", "")  # no script at all: the plots are inline SVG
    assert evil not in page  # escaped in tables and in the plots' labels
    assert STANDIN_BANNER in page
    assert not re.search(r"(src|href)=", page)  # nothing fetched: works offline
    assert page.count("<svg") >= 6
    md = to_markdown(rep)
    assert STANDIN_BANNER in md and "hedging\\|pipe" in md


def test_figures_build_from_the_report(tmp_path: Path) -> None:
    rep = golden_report(tmp_path)
    assert len(fig_orientation_accuracy(rep).data) == 3
    assert len(fig_other_rate(rep).data) == 2
    assert len(fig_delta_by_orientation(rep).data) == 2
    assert len(fig_parser_confusion(rep, "naive").data) == 3
    assert len(fig_position_picks(rep).data) == 4  # three arms and the chance markers
    # 6 reviewed rows: no bar from so few (issue 17: counts only, in the table), and the figure says why
    ag = fig_judge_agreement(rep)
    assert not ag.data and "fewer than 10 reviewed rows" in ag.layout.title.text


def test_flags_for_info(tmp_path: Path) -> None:
    study = fixture_study(tmp_path / "s.duckdb").build()
    assert {f["name"] for f in flags_for(study, n_boot=50)} >= {"ungraded_rows", "other_rate_rise"}


def test_report_command(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    fixture_study(db).build()
    out = tmp_path / "r.md"
    proc = run_cli("report", "--db", str(db), "--format", "md", "--out", str(out), "--bootstrap", "50")
    assert proc.returncode == 0, proc.stderr
    assert out.read_text(encoding="utf-8").startswith("# mcqaudit report")
    assert "wrote" in proc.stderr


def test_report_command_options_and_usage_errors(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mcqaudit.cli import app

    db = tmp_path / "s.duckdb"
    fixture_study(db).build()
    runner = CliRunner()
    res = runner.invoke(
        app, ["report", "--db", str(db), "--bootstrap", "0", "--verdicts", "judge", "--seed", "3"]
    )
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["study"]["verdicts"] == "judge" and rep["bootstrap"]["seed"] == 3
    html_out = tmp_path / "r.html"
    res = runner.invoke(
        app, ["report", "--db", str(db), "--format", "html", "-o", str(html_out), "--bootstrap", "20"]
    )
    assert res.exit_code == 0 and html_out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    for args, code in (
        (["--control", "nope"], 2),
        (["--format", "pdf"], 2),
        (["--verdicts", "human"], 2),
        (["--bootstrap", "-1"], 2),
    ):
        res = runner.invoke(app, ["report", "--db", str(db), *args])
        assert res.exit_code == code, (args, res.output)
    assert runner.invoke(app, ["report", "--db", str(tmp_path / "missing.duckdb")]).exit_code == 1


def test_schema_doc_names_every_key(tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "report-schema.md").read_text(encoding="utf-8")
    rep = golden_report(tmp_path)
    keys = set(rep) | set(rep["study"]) | set(rep["metrics"]["base"]) | set(rep["delta_accuracy"]["steered"])
    keys |= {"mde", "se", "chance", "corrected_accuracy", "kappa", "precision", "agreement", "mismatch_rate"}
    keys |= {f["name"] for f in rep["flags"]} | {"orientation_instability", "parser_disagreement",
             "logprob_mismatch", "judge_config_mixed", "judge_unaudited", "suspected_parser_artifact"}  # fmt: skip
    missing = sorted(k for k in keys if f"`{k}`" not in doc)
    assert not missing, f"docs/report-schema.md does not document {missing}"


def test_markdown_and_html_show_orientations_and_rstd_per_item_family(tmp_path: Path) -> None:
    rep = build_report(two_family_study(tmp_path / "f.duckdb", *NO_POSITION_EFFECT).build(), n_boot=100)
    md = to_markdown(rep)
    # one table per family, each with its own orientations: AB never stands beside ABCD
    assert "| 2-option items (40 items) | all orientations | AB | BA |" in md
    assert "| 4-option items (40 items) | all orientations | ABCD | BCDA | CDAB | DABC |" in md
    assert "| 2-option items (40 items) | Δ all orientations | AB | BA | items |" in md
    assert not any("| AB |" in line and "ABCD" in line for line in md.splitlines())
    assert "## RStd by item family" in md and "| 4-option items (40 items) | base | 0.0 [0.0, 0.0] |" in md
    assert "Δ holds per orientation within 2-option items (40 items)" in md
    titles = [t for t, _ in report_figures(rep)]
    assert titles[:2] == ["Accuracy by orientation: 2-option items", "Accuracy by orientation: 4-option items"]
    page = to_html(rep)
    assert "Δaccuracy vs control by orientation" in page and "— 4-option items (40 items)" in page


def test_report_shows_pick_shares_as_confounded_when_gold_is_unbalanced(tmp_path: Path) -> None:
    b = StudyBuilder(tmp_path / "u.duckdb")
    for k in range(24):
        b.item(f"i{k:02d}", n=4, gold=0)
        b.row("base", f"i{k:02d}", "ABCD", "A")
        b.row("base", f"i{k:02d}", "BCDA", "A" if k < 12 else "D")
    rep = build_report(b.build(), n_boot=50)
    m = rep["metrics"]["base"]
    assert m["position_pick_rate"] is None and m["pick_share"]["A"]["value"] == 0.75 and m["pick_share"]["A"]["n"] == 48
    md = to_markdown(rep)
    sec = md[md.index("## Position picks") :]
    assert "Confounded by the gold imbalance (design_imbalance)" in sec and "| base | 75.0 [" in sec
    fig = fig_position_picks(rep)
    assert "confounded by the gold imbalance" in fig.layout.title.text and len(fig.data) == 1


def test_the_figures_template_is_plotly_white_for_every_trace_type_they_draw(tmp_path: Path) -> None:
    """The figures' template (`plots.TEMPLATE`) is plotly_white's layout and its defaults for the trace types in
    `plots.TRACE_TYPES` alone (a copy per figure costs half): every figure of a report with several parsers, and
    the dashboard's own (the pairwise Δ heatmap of three or more arms included), draws only those types on it,
    so each looks as it would with plotly_white itself."""
    import plotly.io as pio

    from mcqaudit import plots
    from tests.builders import build_review_study

    rep = build_report(fixture_study(tmp_path / "s.duckdb").build(), n_boot=50)
    three = build_report(build_review_study(tmp_path / "three.duckdb", n_items=24), n_boot=50)
    figs = [f for _, f in report_figures(rep)]
    figs += [plots.fig_parser_confusion(rep, p, a) for p in ("naive", "strict") for a in (None, rep["arms"][0])]
    pairwise = plots.fig_pairwise_delta(three)
    drawn = {trace["type"] for f in [*figs, pairwise] for trace in f.to_plotly_json()["data"]}
    assert {"bar", "heatmap", "scatter"} <= drawn <= set(plots.TRACE_TYPES), drawn
    white, ours = pio.templates["plotly_white"].to_plotly_json(), pio.templates[plots.TEMPLATE].to_plotly_json()
    assert ours["layout"] == white["layout"]
    assert ours["data"] == {t: white["data"][t] for t in plots.TRACE_TYPES}
    assert len(figs) > 8 and all(f.layout.template.to_plotly_json() == ours for f in [*figs, pairwise])


def test_the_figures_template_is_made_at_the_first_figure_not_at_import() -> None:
    """Importing the figures (every dashboard page does) registers no template (loading plotly_white and
    building ours: ~75 ms); the first figure does."""
    import subprocess
    import sys

    from tests.helpers import process_env

    code = (
        "import plotly.io as pio; from mcqaudit import plots; before = plots.TEMPLATE in pio.templates; "
        "plots.fig_other_rate({'arms': [], 'metrics': {}}); print(before, plots.TEMPLATE in pio.templates)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=process_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


LONG_ARMS = (
    "llama-3.1-8b-instruct_base-unsteered-run-2026-11-30",
    "llama-3.1-8b-instruct_steer-refusal-dir_layer14_alpha0.50_seed3",
    "llama-3.1-8b-instruct_steer-refusal-dir_layer14_alpha1.00_seed3",
)


def test_short_labels_cut_long_names_in_the_middle_and_tell_them_apart() -> None:
    from mcqaudit.formatting import LABEL_CHARS, short_label, short_labels

    assert short_label("base") == "base" and short_label("x" * LABEL_CHARS) == "x" * LABEL_CHARS
    cut = short_label(LONG_ARMS[1])
    assert len(cut) == LABEL_CHARS and cut.count("…") == 1
    assert cut.startswith("llama-3.1-8b-instruct") and cut.endswith("0.50_seed3")  # both ends stay
    labels = short_labels(LONG_ARMS)
    assert len(set(labels.values())) == 3 and all(len(v) == LABEL_CHARS for v in labels.values())
    # alike at both ends: every label grows until they differ (at the longest, the names themselves)
    a, b = "x" * 30 + "alpha" + "y" * 30, "x" * 30 + "omega" + "y" * 30
    got = short_labels([a, b, "base"])
    assert got[a] != got[b] and got["base"] == "base" and len(got[a]) < len(a)
    same_ends = ["x" * 20 + "1" + "y" * 39, "x" * 20 + "2" + "y" * 39]  # alike but for one character, inside
    got = short_labels(same_ends)
    assert got[same_ends[0]] != got[same_ends[1]] and all(LABEL_CHARS < len(v) < 60 for v in got.values()), got
    # one model, several steering settings: little of the shared start, more of the end that tells them apart
    family = [f"qwen2.5-7b-instruct_steer-sycophancy_L{layer}_a{a}" for layer in (12, 18) for a in ("0.25", "1.00")]
    got = short_labels(["qwen2.5-7b-instruct_baseline", *family])
    assert got["qwen2.5-7b-instruct_baseline"] == "qwen2.5-7b-instruct_baseline"
    assert all(got[n].startswith("qwen2.…") and got[n].endswith(n[-20:]) for n in family), got


def test_figures_show_long_arm_names_cut_and_name_them_whole_in_the_hover(tmp_path: Path) -> None:
    """Arm names of 50-65 characters (a steering run's settings in its name) took most of a figure: its legend
    or its slanted tick labels left the plot a strip (64 px of 940 in the dashboard). Every figure shows them cut
    in the middle, told apart, the categories of an axis still the whole names; the hover names them whole; the
    HTML report's drawings likewise, their legends within the drawing."""
    import html as html_lib
    import re

    from mcqaudit import plots
    from mcqaudit.formatting import short_labels

    rep = build_report(fixture_study(tmp_path / "s.duckdb", arm_names=LONG_ARMS).build(), n_boot=50)
    lab = short_labels(LONG_ARMS)
    arms = list(rep["arms"])
    for fig in (fig_orientation_accuracy(rep), plots.fig_parser_disagreement(rep), fig_position_picks(rep)):
        named = [t for t in fig.data if t.name in lab.values()]
        assert [t.name for t in named] == [lab[a] for a in arms], [t.name for t in fig.data]
        for t, a in zip(named, arms, strict=True):
            assert all(str(h).startswith(f"{a}<br>") for h in t.hovertext), t.hovertext
    delta = fig_delta_by_orientation(rep)
    assert [t.name for t in delta.data] == [f"{lab[a]} − {lab[arms[0]]}" for a in arms[1:]]
    assert all(f"{arms[1]} − {arms[0]}<br>" in h for h in delta.data[0].hovertext)
    other = fig_other_rate(rep)
    assert list(other.data[0].x) == arms  # the categories: the names whole (distinct, hovered)
    assert list(other.layout.xaxis.tickvals) == arms and list(other.layout.xaxis.ticktext) == [lab[a] for a in arms]
    assert all(str(h).startswith(f"{a}<br>") for h, a in zip(other.data[0].hovertext, arms, strict=True))
    confusion = fig_parser_confusion(rep, "naive")
    panel = short_labels(LONG_ARMS, limit=28)  # three panels a row: a shorter cut, to fit one
    assert [a.text for a in confusion.layout.annotations] == [panel[a] for a in arms]
    pairwise = plots.fig_pairwise_delta(rep)
    if pairwise.data:
        for axis in (pairwise.layout.xaxis, pairwise.layout.yaxis):
            assert list(axis.tickvals) == arms and list(axis.ticktext) == [lab[a] for a in arms]
    # names within the limit: figures as they were (no tick labels of their own)
    short = build_report(fixture_study(tmp_path / "t.duckdb").build(), n_boot=50)
    assert fig_other_rate(short).layout.xaxis.tickvals is None
    assert [t.name for t in fig_orientation_accuracy(short).data] == list(short["arms"])
    # the HTML report's drawings: the label shown, the whole name in its tooltip, every legend within the drawing
    page = to_html(rep)
    assert "&lt;br&gt;" not in page  # a hover's line break is the tooltip's, not text
    for a in arms[1:]:
        assert f"<title>{html_lib.escape(a)}</title>{html_lib.escape(lab[a])}</text>" in page
    ends = [float(x) + 14 + 7 * len(html_lib.unescape(t)) * float(size or 12) / 12
            for x, size, t in re.findall(r'<text x="([\d.]+)" y="47" fill="#333"(?: font-size="([\d.]+)")?>'
                                         r'(?:<title>[^<]*</title>)?([^<]*)</text>', page)]  # fmt: skip
    assert len(ends) > 10 and max(ends) <= 760, max(ends)


def test_eight_arms_lay_out_their_panels_and_legends_in_rows(tmp_path: Path) -> None:
    """Eight arms with long names sharing a long start: the parser-vs-verdicts matrices go four a row (eight in
    one row were 90 px each, their titles overlapping), the titles cut to their panel and told apart, the
    columns' names under the lowest row only; the HTML report draws them so, and puts a legend too long for one
    line under the plot, each name as the figure shows it, within the drawing."""
    import re

    from mcqaudit.formatting import short_labels
    from tests.builders import MANY_ARMS, many_arm_study

    rep = build_report(many_arm_study(tmp_path / "m.duckdb").build(), n_boot=50)
    fig = fig_parser_confusion(rep, "naive")
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [short_labels(MANY_ARMS, limit=22)[a] for a in rep["arms"]] and len(set(titles)) == 8
    assert all(len(t) <= 22 for t in titles) and fig.layout.height == 340 + 240
    shown = [fig.layout[f"xaxis{k if k > 1 else ''}"].showticklabels for k in range(1, 9)]
    assert shown == [False] * 4 + [True] * 4
    assert [fig.layout[f"xaxis{k}"].domain == fig.layout[f"xaxis{k + 4}"].domain for k in (2, 3, 4)] == [True] * 3
    page = to_html(rep)
    heights = [int(h) for h in re.findall(r'<svg viewBox="0 0 760 (\d+)"', page)]
    assert max(heights) > 400  # two rows of matrices; the legend of eight arms under its plot
    legend = re.findall(r'<text x="([\d.]+)" y="([\d.]+)" fill="#333" font-size="11">([^<]*)</text>', page)
    assert {t for _, _, t in legend} >= set(short_labels(MANY_ARMS).values())
    assert all(float(x) + 14 + 6.2 * len(t) <= 760 and float(y) > 340 for x, y, t in legend)


def test_many_arms_compared_say_how_far_chance_alone_goes(tmp_path: Path) -> None:
    """Seven arms compared with the control, each headline CI at 95 %: with no effect in any, one or more would
    exclude 0 in 1 − 0.95⁷ = 30 % of studies. A `comparisons` finding says so before the arms' own findings, with
    how many exclude 0 here; two arms compared (the fixture) get none."""
    from mcqaudit.report import findings
    from tests.builders import many_arm_study

    rep = build_report(many_arm_study(tmp_path / "m.duckdb").build(), n_boot=200)
    said = findings(rep)
    (f,) = [x for x in said if x["kind"] == "comparisons"]
    clear = [a for a, d in rep["delta_accuracy"].items() if d["overall"]["ci_low"] > 0 or d["overall"]["ci_high"] < 0]
    assert 0 < len(clear) <= 3
    assert f["text"].startswith("7 arms are compared with the control, each Δaccuracy's CI at 95 %")
    assert "in 30 % of studies" in f["text"] and f"here {len(clear)} of 7 do ({', '.join(clear)})" in f["text"]
    kinds = [x["kind"] for x in said]
    assert kinds.index("comparisons") < kinds.index("headline")
    assert "comparisons" not in {x["kind"] for x in golden_report(tmp_path)["findings"]}
